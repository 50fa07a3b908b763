//! The journal's JSONL file (docs/configuration.md#session-journals).
//!
//! A new session stays pending (no file) until its first assistant message or custom entry;
//! then the header and every buffered entry are written at once with create-new semantics and
//! mode 0600, and the file and its directory are fsynced. After that each entry is appended and
//! flushed before memory changes, so nothing is announced that is not on disk. Writes are whole
//! or nothing: a failed creation removes the file, a failed append cuts the file back to its last
//! complete line. `sync` (fsync) runs when a run settles.

use std::path::Path;

use serde::{Deserialize, Serialize};

/// A failure to read or write the journal. The message names the file and the cause.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct JournalError(String);

impl From<String> for JournalError {
    fn from(message: String) -> Self {
        JournalError(message)
    }
}

impl From<crate::blobs::BlobError> for JournalError {
    fn from(error: crate::blobs::BlobError) -> Self {
        JournalError(error.to_string())
    }
}

/// Largest journal file zi writes or opens.
pub const MAX_JOURNAL_BYTES: u64 = 64 * 1024 * 1024;

/// Line 1 of every journal.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionHeader {
    /// Always `"session"`: what tells a journal from another JSONL file.
    #[serde(rename = "type")]
    pub kind: String,
    /// The file format: 1 keeps images inline, 2 keeps them as blobs beside the file.
    pub version: u32,
    /// The session id.
    pub id: String,
    /// When the session started (RFC 3339).
    pub timestamp: String,
    /// The working directory the session ran in; resume and `session.list` match on it.
    pub cwd: String,
    /// A fork's parent journal path (`session.fork`); absent otherwise.
    #[serde(
        rename = "parentSession",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub parent_session: Option<String>,
}

impl SessionHeader {
    /// The header of a new format-2 journal that is nobody's fork.
    pub fn new(id: &str, cwd: &Path, timestamp: String) -> Self {
        SessionHeader {
            kind: "session".to_string(),
            version: 2,
            id: id.to_string(),
            timestamp,
            cwd: cwd.display().to_string(),
            parent_session: None,
        }
    }
}

mod locate;
mod open;
mod parse;
mod tail;
mod write;

pub use locate::{default_session_dir, find_latest_for_cwd};
pub use open::{OpenedJournal, open_existing};
pub(crate) use parse::parse_entry;
pub(crate) use tail::tail_entries;
pub use write::JournalFile;
pub(crate) use write::create_private_dir;
pub(crate) use write::{create_whole, encode_line};

#[cfg(test)]
mod tests;
