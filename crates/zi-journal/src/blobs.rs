//! Format-2 image blobs (docs/configuration.md#session-journals): a journal whose header says
//! version 2 keeps the bytes of each image in `<journal path without .jsonl>.blobs/<sha256-hex>`
//! and writes `{"type":"image","mimeType":…,"blob":{"sha256":…,"bytes":n}}` in the JSONL line
//! instead of base64 `data`. In memory (events, RPC pages) images keep their inline `data`; the
//! reader in [`crate::file`] inlines the blobs again.
//!
//! Only the image parts of message content (user and tool-result messages, `custom` role
//! messages) and of `custom_message` entries are externalized; JSON inside tool arguments or
//! custom data is never touched. An image whose `data` is not standard base64 (possible only
//! from an old format-1 journal) stays inline, which format 2 also reads.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use base64::Engine as _;
use serde_json::{Map, Value};
use zi_protocol::event::SessionEntry;

/// One image's bytes and address.
pub(crate) struct Blob {
    pub sha256: String,
    pub bytes: Vec<u8>,
}

/// An entry's journal line and the blobs it refers to.
pub(crate) struct EncodedEntry {
    pub line: Vec<u8>,
    pub blobs: Vec<Blob>,
}

/// The blob directory of one format-2 journal.
pub(crate) struct BlobDir {
    dir: PathBuf,
    /// Bytes of the blob files present, counted against the journal-plus-blobs bound.
    bytes: u64,
}

impl BlobDir {
    /// The directory beside `journal` (`x.jsonl` → `x.blobs`), with the sizes of the blobs
    /// already in it.
    pub fn beside(journal: &Path) -> Self {
        let dir = journal.with_extension("blobs");
        let bytes = std::fs::read_dir(&dir)
            .map(|entries| {
                entries
                    .filter_map(Result::ok)
                    .filter(|entry| is_blob_name(&entry.file_name().to_string_lossy()))
                    .filter_map(|entry| entry.metadata().ok())
                    .filter(std::fs::Metadata::is_file)
                    .map(|meta| meta.len())
                    .sum()
            })
            .unwrap_or(0);
        BlobDir { dir, bytes }
    }

    /// Bytes of the blobs on disk.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Bytes that writing `blobs` would add (blobs already present cost nothing).
    pub fn added_bytes(&self, blobs: &[Blob]) -> u64 {
        let mut seen = std::collections::HashSet::new();
        blobs
            .iter()
            .filter(|blob| seen.insert(&blob.sha256) && !self.dir.join(&blob.sha256).is_file())
            .map(|blob| blob.bytes.len() as u64)
            .sum()
    }

    /// Writes each blob not yet present, durably: a private temporary file, synced, renamed
    /// to its address, then the directory synced. A blob file therefore exists only whole.
    pub fn write(&mut self, blobs: &[Blob]) -> Result<(), BlobError> {
        let mut wrote = false;
        for blob in blobs {
            let target = self.dir.join(&blob.sha256);
            if target.is_file() {
                continue;
            }
            if !wrote {
                crate::file::create_private_dir(&self.dir).map_err(|source| {
                    BlobError::CreateDir {
                        dir: self.dir.clone(),
                        source,
                    }
                })?;
            }
            let temporary = self
                .dir
                .join(format!(".{}.{}.tmp", blob.sha256, std::process::id()));
            write_synced(&temporary, &blob.bytes)
                .and_then(|()| std::fs::rename(&temporary, &target))
                .map_err(|source| {
                    let _ = std::fs::remove_file(&temporary);
                    BlobError::Write {
                        path: target.clone(),
                        source,
                    }
                })?;
            self.bytes += blob.bytes.len() as u64;
            wrote = true;
        }
        if wrote {
            File::open(&self.dir)
                .and_then(|dir| dir.sync_all())
                .map_err(|source| BlobError::Sync {
                    dir: self.dir.clone(),
                    source,
                })?;
        }
        Ok(())
    }
}

/// A failure to store an entry's images; `Display` names the file and the cause (it becomes the
/// journal's error).
#[derive(Debug, thiserror::Error)]
pub enum BlobError {
    #[error("Could not create image blob directory {}: {source}", dir.display())]
    CreateDir {
        dir: PathBuf,
        source: std::io::Error,
    },
    #[error("Could not write image blob {}: {source}", path.display())]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("Could not sync {}: {source}", dir.display())]
    Sync {
        dir: PathBuf,
        source: std::io::Error,
    },
    #[error("Could not encode journal entry: {0}")]
    Encode(serde_json::Error),
}

fn is_blob_name(name: &str) -> bool {
    name.len() == 64 && name.bytes().all(|byte| byte.is_ascii_hexdigit())
}

fn write_synced(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let mut file = options.open(path)?;
    file.write_all(bytes)?;
    file.sync_data()
}

/// Encodes `entry` as its format-2 line (compact JSON plus `\n`), with its images moved to
/// blobs. Entries without image parts are encoded as they are.
pub(crate) fn encode_format_2(entry: &SessionEntry) -> Result<EncodedEntry, BlobError> {
    let encode_error = BlobError::Encode;
    let mut line = serde_json::to_vec(entry).map_err(encode_error)?;
    // A cheap filter: a line without this text has no image part (string values cannot
    // contain it unescaped).
    if memchr::memmem::find(&line, br#""type":"image""#).is_none() {
        line.push(b'\n');
        return Ok(EncodedEntry {
            line,
            blobs: Vec::new(),
        });
    }
    let mut value: Value = serde_json::from_slice(&line).map_err(encode_error)?;
    let mut blobs = Vec::new();
    if let Some(parts) = content_parts(&mut value) {
        for part in parts {
            if let Value::Object(object) = part
                && let Some(blob) = externalize(object)
            {
                blobs.push(blob);
            }
        }
    }
    let mut line = serde_json::to_vec(&value).map_err(encode_error)?;
    line.push(b'\n');
    Ok(EncodedEntry { line, blobs })
}

/// The content array of a `message` entry's message or of a `custom_message` entry.
fn content_parts(entry: &mut Value) -> Option<&mut Vec<Value>> {
    let kind = entry.get("type")?.as_str()?;
    let holder = match kind {
        "message" => entry.get_mut("message")?,
        "custom_message" => entry,
        _ => return None,
    };
    holder.get_mut("content")?.as_array_mut()
}

/// Replaces an image part's `data` with its blob reference, keeping the part's key order
/// (`type`, `mimeType`, `blob`).
fn externalize(part: &mut Map<String, Value>) -> Option<Blob> {
    if part.get("type").and_then(Value::as_str) != Some("image") {
        return None;
    }
    let mime_type = part.get("mimeType")?.as_str()?.to_string();
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(part.get("data")?.as_str()?)
        .ok()?;
    let sha256 = sha256_hex(&bytes);
    let mut replaced = Map::new();
    replaced.insert("type".into(), Value::from("image"));
    replaced.insert("mimeType".into(), Value::from(mime_type));
    let mut reference = Map::new();
    reference.insert("sha256".into(), Value::from(sha256.clone()));
    reference.insert("bytes".into(), Value::from(bytes.len()));
    replaced.insert("blob".into(), Value::Object(reference));
    *part = replaced;
    Some(Blob { sha256, bytes })
}

fn sha256_hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    let digest = ring::digest::digest(&ring::digest::SHA256, bytes);
    let mut hex = String::with_capacity(64);
    for byte in digest.as_ref() {
        let _ = write!(hex, "{byte:02x}");
    }
    hex
}

#[cfg(test)]
mod tests {
    use super::*;
    use zi_protocol::event::EntryData;
    use zi_protocol::message::{AgentMessage, ContentBlock, MessageContent, UserMessage};

    fn user_entry(parts: Vec<ContentBlock>) -> SessionEntry {
        SessionEntry {
            data: EntryData::Message {
                message: AgentMessage::User(UserMessage {
                    content: MessageContent::Parts(parts),
                    timestamp: 1,
                }),
            },
            id: "e1".into(),
            parent_id: None,
            timestamp: "2026-01-01T00:00:00.000Z".into(),
        }
    }

    #[test]
    fn images_become_blob_references() {
        let image = ContentBlock::Image {
            data: "QUJD".into(),
            mime_type: "image/png".into(),
        };
        let encoded = encode_format_2(&user_entry(vec![ContentBlock::text("look"), image]))
            .unwrap_or_else(|e| panic!("{e}"));
        // sha256("ABC")
        let sha = "b5d4045c3f466fa91fe2cc6abe79232a1a57cdf104f7a26e716e0a1e2789df78";
        assert_eq!(
            String::from_utf8_lossy(&encoded.line),
            format!(
                "{{\"type\":\"message\",\"message\":{{\"role\":\"user\",\"content\":[{{\"type\":\"text\",\"text\":\"look\"}},{{\"type\":\"image\",\"mimeType\":\"image/png\",\"blob\":{{\"sha256\":\"{sha}\",\"bytes\":3}}}}],\"timestamp\":1}},\"id\":\"e1\",\"parentId\":null,\"timestamp\":\"2026-01-01T00:00:00.000Z\"}}\n"
            )
        );
        assert_eq!(encoded.blobs.len(), 1);
        assert_eq!(encoded.blobs[0].sha256, sha);
        assert_eq!(encoded.blobs[0].bytes, b"ABC");
    }

    #[test]
    fn lines_without_images_are_unchanged() {
        let entry = user_entry(vec![ContentBlock::text(r#"say "type":"image""#)]);
        let encoded = encode_format_2(&entry).unwrap_or_else(|e| panic!("{e}"));
        let mut plain = serde_json::to_vec(&entry).unwrap_or_default();
        plain.push(b'\n');
        assert_eq!(encoded.line, plain);
        assert!(encoded.blobs.is_empty());
    }

    #[test]
    fn blobs_are_written_once_and_counted() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let journal = dir.path().join("s.jsonl");
        let mut blobs = BlobDir::beside(&journal);
        assert_eq!(blobs.bytes(), 0);
        let blob = || Blob {
            sha256: "ab".repeat(32),
            bytes: b"12345".to_vec(),
        };
        assert_eq!(blobs.added_bytes(&[blob(), blob()]), 5);
        blobs
            .write(&[blob(), blob()])
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(blobs.bytes(), 5);
        assert_eq!(blobs.added_bytes(&[blob()]), 0);
        let path = dir.path().join("s.blobs").join("ab".repeat(32));
        assert_eq!(std::fs::read(path).unwrap_or_default(), b"12345");
        assert_eq!(BlobDir::beside(&journal).bytes(), 5);
    }

    #[test]
    fn a_format_2_journal_round_trips_its_images() {
        use crate::file::{JournalFile, SessionHeader, open_existing};
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let path = dir.path().join("s1.jsonl");
        let header = SessionHeader::new("s1", dir.path(), "2026-01-01T00:00:00.000Z".into());
        let mut file = JournalFile::pending(path.clone(), header);
        let image = ContentBlock::Image {
            data: base64::engine::general_purpose::STANDARD.encode(b"\x89PNG bytes"),
            mime_type: "image/png".into(),
        };
        let user = user_entry(vec![ContentBlock::text("see"), image.clone()]);
        let mut assistant: SessionEntry = user_entry(Vec::new());
        // A custom entry makes the pending journal durable, like an assistant message.
        assistant.data = EntryData::Custom {
            custom_type: "test.state".into(),
            data: None,
        };
        assistant.id = "e2".into();
        assistant.parent_id = Some("e1".into());
        file.append(&user, &[]).unwrap_or_else(|e| panic!("{e}"));
        assert!(!path.exists(), "still pending");
        file.append(&assistant, std::slice::from_ref(&user))
            .unwrap_or_else(|e| panic!("{e}"));
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(text.contains(r#""blob":{"sha256":""#), "{text}");
        assert!(!text.contains(r#""data":"#), "{text}");
        // A second entry with the same image adds no blob file.
        let mut again = user.clone();
        again.id = "e3".into();
        again.parent_id = Some("e2".into());
        file.append(&again, &[]).unwrap_or_else(|e| panic!("{e}"));
        let blob_files = std::fs::read_dir(dir.path().join("s1.blobs"))
            .map(|entries| entries.count())
            .unwrap_or(0);
        assert_eq!(blob_files, 1);
        let opened = open_existing(&path).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(opened.header.version, 2);
        assert_eq!(opened.entries[0], user);
        assert_eq!(opened.entries[2].data, user.data);
    }
}
