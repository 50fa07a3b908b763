//! Parsing one entry line (message entries on a fast path) and inlining format-2 image blobs.

use std::path::Path;

use serde::Deserialize;
use zi_protocol::event::{EntryData, SessionEntry};

/// Why one entry line could not be read; `Display` is the cause the journal's "corrupt at line"
/// error names.
#[derive(Debug, thiserror::Error)]
pub(crate) enum EntryError {
    #[error("{0}")]
    Json(#[from] serde_json::Error),
    #[error("image blob without a valid sha256")]
    BlobWithoutSha,
    #[error("missing image blob {sha}: {source}")]
    MissingBlob { sha: String, source: std::io::Error },
    #[error("entry {id} does not follow its predecessor")]
    Unchained { id: String },
}

/// Parses one entry line, inlining format-2 image blobs (`{"type":"image","blob":{...}}`).
pub(crate) fn parse_entry(line: &[u8], blobs: &Path) -> Result<SessionEntry, EntryError> {
    if !memchr_blob(line) {
        if let Some(entry) = parse_message_entry(line) {
            return Ok(entry);
        }
        return Ok(serde_json::from_slice(line)?);
    }
    let mut value: serde_json::Value = serde_json::from_slice(line)?;
    inline_blobs(&mut value, blobs)?;
    Ok(serde_json::from_value(value)?)
}

/// The common case, decoded in one pass without serde's buffering of internally tagged enums:
/// a `message` entry whose message starts with its `role` (as zi writes it), which selects the
/// concrete message type before the rest is read. `None` sends the line through the general
/// decoder (which also produces the error for anything malformed).
pub(super) fn parse_message_entry(line: &[u8]) -> Option<SessionEntry> {
    #[derive(Deserialize)]
    struct Raw<'a> {
        #[serde(rename = "type", borrow)]
        kind: std::borrow::Cow<'a, str>,
        message: RoleFirst,
        id: String,
        #[serde(rename = "parentId")]
        parent_id: Option<String>,
        timestamp: String,
    }

    let raw: Raw<'_> = serde_json::from_slice(line).ok()?;
    if raw.kind != "message" {
        return None;
    }
    Some(SessionEntry {
        data: EntryData::Message {
            message: raw.message.0,
        },
        id: raw.id,
        parent_id: raw.parent_id,
        timestamp: raw.timestamp,
    })
}

/// A user, assistant or tool-result message whose first key is `role`. Any other shape is an
/// error here, which only sends the line to the general decoder. (A second `role` key, which
/// the general decoder refuses, is ignored here; zi never writes one.)
struct RoleFirst(zi_protocol::message::AgentMessage);

impl<'de> Deserialize<'de> for RoleFirst {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(RoleFirstVisitor)
    }
}

struct RoleFirstVisitor;

impl<'de> serde::de::Visitor<'de> for RoleFirstVisitor {
    type Value = RoleFirst;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a message whose first key is role")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<RoleFirst, A::Error> {
        use serde::de::Error;
        use serde::de::value::MapAccessDeserializer;
        use zi_protocol::message::{
            AgentMessage, AssistantMessage, MessageContent, ToolResultMessage, UserMessage,
        };

        let key: Option<std::borrow::Cow<'de, str>> = map.next_key()?;
        if key.as_deref() != Some("role") {
            return Err(A::Error::custom("role is not the first key"));
        }
        let role: std::borrow::Cow<'de, str> = map.next_value()?;
        let rest = MapAccessDeserializer::new(map);
        // A streamed array has no length up front, so its vector grows to four slots for one
        // block; a resumed journal keeps every message, so each is cut to its length.
        let message = match role.as_ref() {
            "user" => {
                let mut user = UserMessage::deserialize(rest)?;
                if let MessageContent::Parts(parts) = &mut user.content {
                    parts.shrink_to_fit();
                }
                AgentMessage::User(user)
            }
            "assistant" => {
                let mut assistant = AssistantMessage::deserialize(rest)?;
                assistant.content.shrink_to_fit();
                AgentMessage::Assistant(assistant)
            }
            "toolResult" => {
                let mut result = ToolResultMessage::deserialize(rest)?;
                result.content.shrink_to_fit();
                AgentMessage::ToolResult(result)
            }
            _ => return Err(A::Error::custom("another role")),
        };
        Ok(RoleFirst(message))
    }
}

pub(super) fn memchr_blob(line: &[u8]) -> bool {
    // Built once: building a searcher costs about as much as one line's search.
    static BLOB: std::sync::LazyLock<memchr::memmem::Finder<'static>> =
        std::sync::LazyLock::new(|| memchr::memmem::Finder::new(b"\"blob\":"));
    BLOB.find(line).is_some()
}

pub(super) fn inline_blobs(value: &mut serde_json::Value, blobs: &Path) -> Result<(), EntryError> {
    use base64::Engine;
    match value {
        serde_json::Value::Object(map) => {
            let is_blob_image = map.get("type").and_then(|t| t.as_str()) == Some("image")
                && map.contains_key("blob");
            if is_blob_image {
                let sha = map
                    .get("blob")
                    .and_then(|b| b.get("sha256"))
                    .and_then(|s| s.as_str())
                    .filter(|s| s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit()))
                    .ok_or(EntryError::BlobWithoutSha)?
                    .to_string();
                let data = match std::fs::read(blobs.join(&sha)) {
                    Ok(data) => data,
                    Err(source) => return Err(EntryError::MissingBlob { sha, source }),
                };
                map.remove("blob");
                map.insert(
                    "data".to_string(),
                    serde_json::Value::from(base64::engine::general_purpose::STANDARD.encode(data)),
                );
                return Ok(());
            }
            for child in map.values_mut() {
                inline_blobs(child, blobs)?;
            }
            Ok(())
        }
        serde_json::Value::Array(items) => {
            for child in items {
                inline_blobs(child, blobs)?;
            }
            Ok(())
        }
        _ => Ok(()),
    }
}
