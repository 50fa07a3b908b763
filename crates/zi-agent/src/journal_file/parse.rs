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

/// The common case, decoded without serde's buffering of internally tagged enums: a `message`
/// entry whose role selects the concrete message type directly. `None` sends the line through
/// the general decoder (which also produces the error for anything malformed).
pub(super) fn parse_message_entry(line: &[u8]) -> Option<SessionEntry> {
    use serde_json::value::RawValue;
    use zi_protocol::message::{AgentMessage, AssistantMessage, ToolResultMessage, UserMessage};

    #[derive(Deserialize)]
    struct Raw<'a> {
        #[serde(rename = "type", borrow)]
        kind: std::borrow::Cow<'a, str>,
        #[serde(borrow)]
        message: &'a RawValue,
        id: String,
        #[serde(rename = "parentId")]
        parent_id: Option<String>,
        timestamp: String,
    }
    #[derive(Deserialize)]
    struct Role<'a> {
        #[serde(borrow)]
        role: std::borrow::Cow<'a, str>,
    }

    let raw: Raw<'_> = serde_json::from_slice(line).ok()?;
    if raw.kind != "message" {
        return None;
    }
    let text = raw.message.get();
    let role: Role<'_> = serde_json::from_str(text).ok()?;
    let message = match role.role.as_ref() {
        "user" => AgentMessage::User(serde_json::from_str::<UserMessage>(text).ok()?),
        "assistant" => {
            AgentMessage::Assistant(serde_json::from_str::<AssistantMessage>(text).ok()?)
        }
        "toolResult" => {
            AgentMessage::ToolResult(serde_json::from_str::<ToolResultMessage>(text).ok()?)
        }
        _ => return None,
    };
    Some(SessionEntry {
        data: EntryData::Message { message },
        id: raw.id,
        parent_id: raw.parent_id,
        timestamp: raw.timestamp,
    })
}

pub(super) fn memchr_blob(line: &[u8]) -> bool {
    memchr::memmem::find(line, b"\"blob\":").is_some()
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
