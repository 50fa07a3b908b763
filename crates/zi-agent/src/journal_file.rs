//! The journal's JSONL file (runtime-reference §12.2, §12.5).
//!
//! A new session stays pending (no file) until its first assistant message or custom entry;
//! then the header and every buffered entry are written at once with create-new semantics and
//! mode 0600. After that each entry is appended and flushed before memory changes, so nothing is
//! announced that is not on disk. `sync` (fsync) runs when a run settles.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
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
            | EntryData::CustomMessage { .. }
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

/// A journal read back from disk.
pub struct OpenedJournal {
    pub header: SessionHeader,
    pub entries: Vec<SessionEntry>,
    /// The file, open for appending.
    pub file: JournalFile,
    /// What was repaired while opening (a torn final line), for a `Warning:` line.
    pub repaired: Option<String>,
}

/// Opens an existing journal: checks the size bound, parses the header and every entry,
/// validates the linear chain, inlines format-2 image blobs, and repairs a torn final line
/// (an unterminated or unparsable last line is cut off).
pub fn open_existing(path: &Path) -> Result<OpenedJournal, String> {
    let describe =
        |error: std::io::Error| format!("Could not read journal {}: {error}", path.display());
    let size = std::fs::metadata(path).map_err(describe)?.len();
    if size > MAX_JOURNAL_BYTES {
        return Err(format!(
            "Journal {} exceeds {MAX_JOURNAL_BYTES} bytes and cannot be opened",
            path.display()
        ));
    }
    let bytes = std::fs::read(path).map_err(describe)?;
    let mut lines: Vec<&[u8]> = bytes.split(|b| *b == b'\n').collect();
    let terminated = bytes.last() == Some(&b'\n');
    // `split` yields a final empty piece after a trailing newline.
    if terminated {
        lines.pop();
    }
    let Some(first) = lines.first() else {
        return Err(format!("Journal {} is empty", path.display()));
    };
    let header: SessionHeader = serde_json::from_slice(first)
        .map_err(|error| format!("Journal {} has an invalid header: {error}", path.display()))?;
    if header.kind != "session" || !(1..=2).contains(&header.version) {
        return Err(format!(
            "Journal {} has an unsupported header (type {:?}, version {})",
            path.display(),
            header.kind,
            header.version
        ));
    }
    let blobs = path.with_extension("blobs");
    let mut entries: Vec<SessionEntry> = Vec::with_capacity(lines.len().saturating_sub(1));
    // Bytes of the file that hold the header and every accepted entry, newlines included.
    let mut keep = first.len() as u64 + 1;
    let mut add_newline = false;
    let mut repaired = None;
    let last_index = lines.len() - 1;
    for (index, line) in lines.iter().enumerate().skip(1) {
        let torn_candidate = index == last_index && !terminated;
        let parsed = parse_entry(line, &blobs).and_then(|entry| {
            let expected = entries.last().map(|e| e.id.as_str());
            if entry.parent_id.as_deref() == expected {
                Ok(entry)
            } else {
                Err(format!(
                    "entry {} does not follow its predecessor",
                    entry.id
                ))
            }
        });
        match parsed {
            Ok(entry) => {
                keep += line.len() as u64 + 1;
                if torn_candidate {
                    // A complete entry missing only its newline: keep it and add the newline.
                    add_newline = true;
                    repaired = Some(format!(
                        "added the missing newline after the last entry of {}",
                        path.display()
                    ));
                }
                entries.push(entry);
            }
            Err(_) if index == last_index => {
                repaired = Some(format!("removed a torn final line from {}", path.display()));
            }
            Err(error) => {
                return Err(format!(
                    "Journal {} is corrupt at line {}: {error}",
                    path.display(),
                    index + 1
                ));
            }
        }
    }
    if lines.len() == 1 && !terminated {
        add_newline = true;
        repaired = Some(format!(
            "added the missing newline after the header of {}",
            path.display()
        ));
    }
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .map_err(|error| format!("Could not open journal {}: {error}", path.display()))?;
    let io_error =
        |error: std::io::Error| format!("Could not repair journal {}: {error}", path.display());
    if repaired.is_some() {
        use std::io::Seek;
        let content_len = if add_newline { keep - 1 } else { keep };
        file.set_len(content_len).map_err(io_error)?;
        file.seek(std::io::SeekFrom::End(0)).map_err(io_error)?;
        if add_newline {
            file.write_all(b"\n").map_err(io_error)?;
        }
        file.sync_data().map_err(io_error)?;
    } else {
        use std::io::Seek;
        file.seek(std::io::SeekFrom::End(0)).map_err(io_error)?;
    }
    let file = JournalFile {
        path: path.to_path_buf(),
        header: header.clone(),
        state: FileState::Open(file),
        bytes: keep,
        dirty: false,
    };
    Ok(OpenedJournal {
        header,
        entries,
        file,
        repaired,
    })
}

/// Parses one entry line, inlining format-2 image blobs (`{"type":"image","blob":{...}}`).
fn parse_entry(line: &[u8], blobs: &Path) -> Result<SessionEntry, String> {
    if !memchr_blob(line) {
        return serde_json::from_slice(line).map_err(|error| error.to_string());
    }
    let mut value: serde_json::Value =
        serde_json::from_slice(line).map_err(|error| error.to_string())?;
    inline_blobs(&mut value, blobs)?;
    serde_json::from_value(value).map_err(|error| error.to_string())
}

fn memchr_blob(line: &[u8]) -> bool {
    line.windows(7).any(|w| w == b"\"blob\":")
}

fn inline_blobs(value: &mut serde_json::Value, blobs: &Path) -> Result<(), String> {
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
                    .ok_or_else(|| "image blob without a valid sha256".to_string())?
                    .to_string();
                let data = std::fs::read(blobs.join(&sha))
                    .map_err(|error| format!("missing image blob {sha}: {error}"))?;
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

/// At most this many journals are considered by `--continue`.
const CONTINUE_CANDIDATES: usize = 4096;
/// Of which at most this many headers are read, newest first.
const CONTINUE_PREVIEWS: usize = 200;

/// The newest journal in `dir` whose header cwd equals `cwd` (`-c/--continue`).
pub fn find_latest_for_cwd(dir: &Path, cwd: &Path) -> Option<PathBuf> {
    let read = std::fs::read_dir(dir).ok()?;
    let mut candidates: Vec<(std::time::SystemTime, PathBuf)> = read
        .filter_map(Result::ok)
        .filter(|e| e.path().extension().is_some_and(|x| x == "jsonl"))
        .filter_map(|e| Some((e.metadata().ok()?.modified().ok()?, e.path())))
        .take(CONTINUE_CANDIDATES)
        .collect();
    candidates.sort_by(|a, b| b.0.cmp(&a.0));
    let wanted = cwd.display().to_string();
    candidates
        .into_iter()
        .take(CONTINUE_PREVIEWS)
        .find(|(_, path)| read_header(path).is_some_and(|h| h.cwd == wanted))
        .map(|(_, path)| path)
}

/// Reads only the first line of a journal.
pub fn read_header(path: &Path) -> Option<SessionHeader> {
    use std::io::BufRead;
    let file = File::open(path).ok()?;
    let mut line = Vec::new();
    std::io::BufReader::new(file)
        .take(64 * 1024)
        .read_until(b'\n', &mut line)
        .ok()?;
    serde_json::from_slice(&line).ok()
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
