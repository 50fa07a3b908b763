//! The journal's JSONL file (runtime-reference §12.2, §12.5).
//!
//! A new session stays pending (no file) until its first assistant message or custom entry;
//! then the header and every buffered entry are written at once with create-new semantics and
//! mode 0600. After that each entry is appended and flushed before memory changes, so nothing is
//! announced that is not on disk. `sync` (fsync) runs when a run settles.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use zi_protocol::event::{EntryData, SessionEntry};
use zi_protocol::message::AgentMessage;

/// Largest journal file zi writes or opens.
pub const MAX_JOURNAL_BYTES: u64 = 64 * 1024 * 1024;

/// Line 1 of every journal.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionHeader {
    #[serde(rename = "type")]
    pub kind: String,
    pub version: u32,
    pub id: String,
    pub timestamp: String,
    pub cwd: String,
}

impl SessionHeader {
    pub fn new(id: &str, cwd: &Path, timestamp: String) -> Self {
        SessionHeader {
            kind: "session".to_string(),
            version: 2,
            id: id.to_string(),
            timestamp,
            cwd: cwd.display().to_string(),
        }
    }
}

enum FileState {
    Pending,
    Open(File),
}

pub struct JournalFile {
    path: PathBuf,
    header: SessionHeader,
    state: FileState,
    bytes: u64,
    dirty: bool,
}

/// Entries whose append makes a pending session durable.
fn materializes(data: &EntryData) -> bool {
    matches!(
        data,
        EntryData::Message {
            message: AgentMessage::Assistant(_),
        } | EntryData::Custom { .. }
    )
}

fn encode_line<T: Serialize>(value: &T) -> Result<Vec<u8>, String> {
    let mut line = serde_json::to_vec(value)
        .map_err(|error| format!("Could not encode journal entry: {error}"))?;
    line.push(b'\n');
    Ok(line)
}

impl JournalFile {
    /// A journal that will be created at `path` when it first needs to exist.
    pub fn pending(path: PathBuf, header: SessionHeader) -> Self {
        JournalFile {
            path,
            header,
            state: FileState::Pending,
            bytes: 0,
            dirty: false,
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn header(&self) -> &SessionHeader {
        &self.header
    }

    /// Persists `entry`, given the entries already in memory (written too if the file is
    /// still pending).
    pub fn append(
        &mut self,
        entry: &SessionEntry,
        previous: &[SessionEntry],
    ) -> Result<(), String> {
        match &mut self.state {
            FileState::Pending => {
                if !materializes(&entry.data) {
                    return Ok(());
                }
                let mut bytes = encode_line(&self.header)?;
                for earlier in previous {
                    bytes.extend(encode_line(earlier)?);
                }
                bytes.extend(encode_line(entry)?);
                if bytes.len() as u64 > MAX_JOURNAL_BYTES {
                    return Err(journal_full(&self.path));
                }
                if let Some(parent) = self.path.parent() {
                    create_private_dir(parent)?;
                }
                let mut file = open_new_private(&self.path)?;
                file.write_all(&bytes)
                    .and_then(|()| file.flush())
                    .map_err(|error| {
                        format!("Could not write journal {}: {error}", self.path.display())
                    })?;
                self.bytes = bytes.len() as u64;
                self.state = FileState::Open(file);
                self.dirty = true;
                Ok(())
            }
            FileState::Open(file) => {
                let line = encode_line(entry)?;
                if self.bytes + line.len() as u64 > MAX_JOURNAL_BYTES {
                    return Err(journal_full(&self.path));
                }
                file.write_all(&line)
                    .and_then(|()| file.flush())
                    .map_err(|error| {
                        format!(
                            "Could not append to journal {}: {error}",
                            self.path.display()
                        )
                    })?;
                self.bytes += line.len() as u64;
                self.dirty = true;
                Ok(())
            }
        }
    }

    /// fsyncs the file if anything was written since the last sync.
    pub fn sync(&mut self) -> Result<(), String> {
        if let FileState::Open(file) = &self.state
            && self.dirty
        {
            file.sync_data().map_err(|error| {
                format!("Could not sync journal {}: {error}", self.path.display())
            })?;
            self.dirty = false;
        }
        Ok(())
    }
}

fn journal_full(path: &Path) -> String {
    format!(
        "Journal {} would exceed {MAX_JOURNAL_BYTES} bytes; start a new session",
        path.display()
    )
}

fn create_private_dir(dir: &Path) -> Result<(), String> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        builder.mode(0o700);
    }
    builder.create(dir).map_err(|error| {
        format!(
            "Could not create session directory {}: {error}",
            dir.display()
        )
    })
}

fn open_new_private(path: &Path) -> Result<File, String> {
    let mut options = OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    options
        .open(path)
        .map_err(|error| format!("Could not create journal {}: {error}", path.display()))
}

/// `<agentDir>/sessions/--<cwd with / \ : replaced by ->--`.
pub fn default_session_dir(agent_dir: &Path, cwd: &Path) -> PathBuf {
    let text = cwd.display().to_string();
    let trimmed = text
        .strip_prefix('/')
        .or_else(|| text.strip_prefix('\\'))
        .unwrap_or(&text);
    let encoded: String = trimmed
        .chars()
        .map(|c| {
            if matches!(c, '/' | '\\' | ':') {
                '-'
            } else {
                c
            }
        })
        .collect();
    agent_dir.join("sessions").join(format!("--{encoded}--"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_dir_encoding_matches_the_reference() {
        assert_eq!(
            default_session_dir(Path::new("/a"), Path::new("/home/u/proj")),
            PathBuf::from("/a/sessions/--home-u-proj--")
        );
    }
}
