//! The journal's JSONL file (runtime-reference §12.2, §12.5).
//!
//! A new session stays pending (no file) until its first assistant message or custom entry;
//! then the header and every buffered entry are written at once with create-new semantics and
//! mode 0600, and the file and its directory are fsynced. After that each entry is appended and
//! flushed before memory changes, so nothing is announced that is not on disk. Writes are whole
//! or nothing: a failed creation removes the file, a failed append cuts the file back to its last
//! complete line. `sync` (fsync) runs when a run settles.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use zi_protocol::event::{EntryData, SessionEntry};
use zi_protocol::message::AgentMessage;

/// A failure to read or write the journal. The message names the file and the cause.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct JournalError(String);

impl From<String> for JournalError {
    fn from(message: String) -> Self {
        JournalError(message)
    }
}

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
    /// A fork's parent journal path (`session.fork`); absent otherwise.
    #[serde(
        rename = "parentSession",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub parent_session: Option<String>,
}

impl SessionHeader {
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

enum FileState {
    Pending,
    Open(File),
}

pub struct JournalFile {
    path: PathBuf,
    header: SessionHeader,
    state: FileState,
    /// Length of the file's complete lines: where the next entry goes.
    bytes: u64,
    dirty: bool,
    /// A failed append could not be cut back: the file may end in a partial line, which the
    /// next append removes before writing.
    torn: bool,
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

pub(crate) fn encode_line<T: Serialize>(value: &T) -> Result<Vec<u8>, String> {
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
            torn: false,
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn header(&self) -> &SessionHeader {
        &self.header
    }

    /// Whether the file exists (it is no longer pending).
    pub fn is_written(&self) -> bool {
        matches!(self.state, FileState::Open(_))
    }

    /// Persists `entry`, given the entries already in memory (written too if the file is
    /// still pending). On error nothing of the entry is on disk: a failed creation leaves no
    /// file (the journal stays pending and the next durable entry tries again), and a failed
    /// append cuts the file back to its last complete line.
    pub fn append(
        &mut self,
        entry: &SessionEntry,
        previous: &[SessionEntry],
    ) -> Result<(), JournalError> {
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
                    return Err(journal_full(&self.path).into());
                }
                let file = create_whole(&self.path, &bytes)?;
                self.bytes = bytes.len() as u64;
                self.state = FileState::Open(file);
                // `create_whole` synced the data and the directory entry.
                self.dirty = false;
                Ok(())
            }
            FileState::Open(file) => {
                let line = encode_line(entry)?;
                if self.bytes + line.len() as u64 > MAX_JOURNAL_BYTES {
                    return Err(journal_full(&self.path).into());
                }
                let append_error = |error: std::io::Error| {
                    format!(
                        "Could not append to journal {}: {error}",
                        self.path.display()
                    )
                };
                if self.torn {
                    cut_back(file, self.bytes).map_err(append_error)?;
                    self.torn = false;
                }
                if let Err(error) = file.write_all(&line).and_then(|()| file.flush()) {
                    // Whole or nothing: remove what reached the file of this line.
                    self.torn = cut_back(file, self.bytes).is_err();
                    return Err(append_error(error).into());
                }
                self.bytes += line.len() as u64;
                self.dirty = true;
                Ok(())
            }
        }
    }

    /// fsyncs the file if anything was written since the last sync.
    pub fn sync(&mut self) -> Result<(), JournalError> {
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

/// Truncates `file` to `len` and puts the write position there.
fn cut_back(file: &mut File, len: u64) -> std::io::Result<()> {
    use std::io::{Seek, SeekFrom};
    file.set_len(len)?;
    file.seek(SeekFrom::Start(len)).map(|_| ())
}

fn journal_full(path: &Path) -> String {
    format!(
        "Journal {} would exceed {MAX_JOURNAL_BYTES} bytes; start a new session",
        path.display()
    )
}

/// Creates the journal at `path` holding exactly `bytes`, durably: the session directory
/// (0700) is created as needed, the file (0600) with create-new semantics, its data is synced
/// and then every directory whose entries changed. If any step fails, the file is removed
/// again, so a later attempt is not refused because a partial file exists.
pub(crate) fn create_whole(path: &Path, bytes: &[u8]) -> Result<File, String> {
    let parent = path
        .parent()
        .filter(|parent| !parent.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let created = create_private_dir(parent).map_err(|error| {
        format!(
            "Could not create journal {}: cannot create its directory {}: {error}",
            path.display(),
            parent.display()
        )
    })?;
    let mut file = open_new_private(path)?;
    let written = file
        .write_all(bytes)
        .and_then(|()| file.sync_data())
        .map_err(|error| format!("Could not write journal {}: {error}", path.display()))
        .and_then(|()| {
            sync_dirs(parent, created.as_deref()).map_err(|(dir, error)| {
                format!(
                    "Could not create journal {}: cannot sync directory {}: {error}",
                    path.display(),
                    dir.display()
                )
            })
        });
    match written {
        Ok(()) => Ok(file),
        Err(error) => {
            drop(file);
            if let Err(removal) = std::fs::remove_file(path) {
                tracing::error!(
                    "could not remove the partial journal {}: {removal}",
                    path.display()
                );
            }
            Err(error)
        }
    }
}

/// fsyncs `dir` (which gained the journal's entry) and, when directories were created down
/// from `first_created`, the parent of each of them.
fn sync_dirs<'a>(
    dir: &'a Path,
    first_created: Option<&'a Path>,
) -> Result<(), (&'a Path, std::io::Error)> {
    let mut synced = vec![dir];
    if let Some(first) = first_created {
        let mut current = dir;
        while current != first {
            match current.parent() {
                Some(parent) => current = parent,
                None => break,
            }
            synced.push(current);
        }
        if let Some(parent) = first.parent() {
            synced.push(parent);
        }
    }
    for dir in synced {
        File::open(dir)
            .and_then(|handle| handle.sync_all())
            .map_err(|error| (dir, error))?;
    }
    Ok(())
}

/// Creates `dir` and its missing ancestors (mode 0700); returns the topmost directory it
/// created, if any.
fn create_private_dir(dir: &Path) -> std::io::Result<Option<PathBuf>> {
    let first_missing = dir
        .ancestors()
        .take_while(|ancestor| !ancestor.as_os_str().is_empty() && !ancestor.exists())
        .last()
        .map(Path::to_path_buf);
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        builder.mode(0o700);
    }
    builder.create(dir)?;
    Ok(first_missing)
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
    /// The state entries before the resident tail that [`crate::journal::kept_cold`] keeps.
    pub cold: Vec<SessionEntry>,
    /// The resident tail: every entry from the latest compaction's first kept entry on.
    pub entries: Vec<SessionEntry>,
    /// How many entries precede the resident tail.
    pub retired: usize,
    /// The file, open for appending.
    pub file: JournalFile,
    /// What was repaired while opening (a torn final line), for a `Warning:` line.
    pub repaired: Option<String>,
}

/// Opens an existing journal: checks the size bound, parses the header and every entry,
/// validates the linear chain, inlines format-2 image blobs, and repairs a torn final line
/// (an unterminated or unparsable last line is cut off).
pub fn open_existing(path: &Path) -> Result<OpenedJournal, JournalError> {
    read_existing(path).map_err(JournalError)
}

// Long on purpose: one pass over the file (header, chain, blobs, torn-line repair) whose steps
// share the reader, the line buffer and the positions reported in errors.
fn read_existing(path: &Path) -> Result<OpenedJournal, String> {
    use std::io::{BufRead, BufReader, Seek, SeekFrom};
    let describe =
        |error: std::io::Error| format!("Could not read journal {}: {error}", path.display());
    let corrupt = |line: usize, error: &dyn std::fmt::Display| {
        format!(
            "Journal {} is corrupt at line {line}: {error}",
            path.display()
        )
    };
    // Only a regular file, opened without blocking: a FIFO or `/dev/zero` must not hang `-r`.
    let (file, meta) = match zi_ai::config_file::open_regular(path) {
        Ok(Some(opened)) => opened,
        Ok(None) => return Err(describe(std::io::ErrorKind::NotFound.into())),
        Err(error) => return Err(format!("Could not open journal: {error}")),
    };
    let size = meta.len();
    if size > MAX_JOURNAL_BYTES {
        return Err(format!(
            "Journal {} exceeds {MAX_JOURNAL_BYTES} bytes and cannot be opened",
            path.display()
        ));
    }
    let mut reader = BufReader::with_capacity(256 * 1024, file);
    let mut line = Vec::new();
    reader.read_until(b'\n', &mut line).map_err(describe)?;
    if line.is_empty() {
        return Err(format!("Journal {} is empty", path.display()));
    }
    let header_terminated = line.last() == Some(&b'\n');
    let header: SessionHeader = serde_json::from_slice(trim_newline(&line))
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

    // A journal without any compaction is all resident: one pass parses every entry. Otherwise
    // pass 1 reads only each entry's type, id and parent, to validate the chain and find where
    // the resident tail starts, without holding the file in memory.
    let single_pass = !contains_compaction(path).map_err(describe)?;
    let mut parsed_entries: Vec<SessionEntry> = Vec::new();
    let mut heads: Vec<LineHead> = Vec::new();
    let mut previous_id: Option<String> = None;
    let mut offset = line.len() as u64;
    // Bytes of the file that hold the header and every accepted entry, newlines included.
    let mut keep = offset + u64::from(!header_terminated);
    let mut add_newline = !header_terminated;
    let mut repaired = (!header_terminated).then(|| {
        format!(
            "added the missing newline after the header of {}",
            path.display()
        )
    });
    let mut line_number = 1;
    loop {
        line.clear();
        let read = reader.read_until(b'\n', &mut line).map_err(describe)?;
        if read == 0 {
            break;
        }
        line_number += 1;
        let terminated = line.last() == Some(&b'\n');
        let text = trim_newline(&line);
        let parsed = if single_pass {
            parse_entry(text, &blobs).map(|entry| Parsed::Entry(Box::new(entry)))
        } else {
            serde_json::from_slice::<EntryHead<'_>>(text)
                .map(Parsed::Head)
                .map_err(|error| error.to_string())
        }
        .and_then(|parsed| {
            if parsed.parent_id() == previous_id.as_deref() {
                Ok(parsed)
            } else {
                Err(format!(
                    "entry {} does not follow its predecessor",
                    parsed.id()
                ))
            }
        });
        match parsed {
            Ok(parsed) => {
                previous_id = Some(parsed.id().to_string());
                match parsed {
                    Parsed::Entry(entry) => parsed_entries.push(*entry),
                    Parsed::Head(head) => heads.push(LineHead {
                        offset,
                        len: text.len(),
                        kind: EntryKind::of(&head.kind),
                        id_hash: hash_id(&head.id),
                    }),
                }
                keep = offset + text.len() as u64 + 1;
                if !terminated {
                    // A complete entry missing only its newline: keep it and add the newline.
                    add_newline = true;
                    repaired = Some(format!(
                        "added the missing newline after the last entry of {}",
                        path.display()
                    ));
                }
            }
            // Only an unterminated last line can be a torn write.
            Err(_) if !terminated => {
                repaired = Some(format!("removed a torn final line from {}", path.display()));
            }
            Err(error) => return Err(corrupt(line_number, &error)),
        }
        offset += read as u64;
    }

    // Pass 2: the resident tail (from the latest compaction's first kept entry) is parsed in
    // full; before it only state entries are kept, since their messages were compacted away.
    let mut file = reader.into_inner();
    let mut read_entry = |head: &LineHead, position: usize| -> Result<SessionEntry, String> {
        let mut buffer = vec![0; head.len];
        file.seek(SeekFrom::Start(head.offset))
            .and_then(|_| std::io::Read::read_exact(&mut file, &mut buffer))
            .map_err(describe)?;
        parse_entry(&buffer, &blobs).map_err(|error| corrupt(position + 2, &error))
    };
    let resident_start = match heads.iter().rposition(|h| h.kind == EntryKind::Compaction) {
        None => 0,
        Some(marker) => match read_entry(&heads[marker], marker)?.data {
            EntryData::Compaction(compaction) => {
                let wanted = hash_id(&compaction.first_kept_entry_id);
                heads[..marker]
                    .iter()
                    .position(|h| h.id_hash == wanted)
                    .unwrap_or(marker)
            }
            _ => 0,
        },
    };
    let mut cold = Vec::new();
    let mut entries = parsed_entries;
    for (position, head) in heads.iter().enumerate().take(resident_start) {
        if head.kind == EntryKind::Other {
            let entry = read_entry(head, position)?;
            if crate::journal::kept_cold(&entry.data) {
                cold.push(entry);
            }
        }
    }
    // The resident tail is contiguous: read it in one sequential pass.
    entries.reserve(heads.len().saturating_sub(resident_start));
    if let Some(first) = heads.get(resident_start) {
        file.seek(SeekFrom::Start(first.offset)).map_err(describe)?;
        let mut tail = BufReader::with_capacity(256 * 1024, &mut file);
        let mut buffer = Vec::new();
        for (position, head) in heads.iter().enumerate().skip(resident_start) {
            buffer.resize(head.len, 0);
            std::io::Read::read_exact(&mut tail, &mut buffer).map_err(describe)?;
            entries
                .push(parse_entry(&buffer, &blobs).map_err(|error| corrupt(position + 2, &error))?);
            // Skip the newline (absent only after an unterminated last entry).
            let mut newline = [0u8; 1];
            let _ = std::io::Read::read(&mut tail, &mut newline);
        }
    }

    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .map_err(|error| format!("Could not open journal {}: {error}", path.display()))?;
    let io_error =
        |error: std::io::Error| format!("Could not repair journal {}: {error}", path.display());
    if repaired.is_some() {
        let content_len = if add_newline { keep - 1 } else { keep };
        file.set_len(content_len).map_err(io_error)?;
        file.seek(SeekFrom::End(0)).map_err(io_error)?;
        if add_newline {
            file.write_all(b"\n").map_err(io_error)?;
        }
        file.sync_data().map_err(io_error)?;
    } else {
        file.seek(SeekFrom::End(0)).map_err(io_error)?;
    }
    let file = JournalFile {
        path: path.to_path_buf(),
        header: header.clone(),
        state: FileState::Open(file),
        bytes: keep,
        dirty: false,
        torn: false,
    };
    Ok(OpenedJournal {
        header,
        cold,
        entries,
        retired: resident_start,
        file,
        repaired,
    })
}

fn trim_newline(line: &[u8]) -> &[u8] {
    line.strip_suffix(b"\n").unwrap_or(line)
}

/// Where one entry line sits in the file, and what pass 2 needs to know about it.
struct LineHead {
    offset: u64,
    len: usize,
    kind: EntryKind,
    id_hash: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum EntryKind {
    /// `message` and `custom_message`: dropped when cold.
    Message,
    Compaction,
    Other,
}

impl EntryKind {
    fn of(kind: &str) -> EntryKind {
        match kind {
            "message" | "custom_message" => EntryKind::Message,
            "compaction" => EntryKind::Compaction,
            _ => EntryKind::Other,
        }
    }
}

/// A fixed-key hash of an entry id (pass 1 keeps hashes, not the ids themselves).
fn hash_id(id: &str) -> u64 {
    use std::hash::Hasher;
    let mut hasher = std::hash::DefaultHasher::new();
    hasher.write(id.as_bytes());
    hasher.finish()
}

/// One entry as pass 1 read it: in full (single-pass journals) or only its head.
enum Parsed<'a> {
    Entry(Box<SessionEntry>),
    Head(EntryHead<'a>),
}

impl Parsed<'_> {
    fn id(&self) -> &str {
        match self {
            Parsed::Entry(entry) => &entry.id,
            Parsed::Head(head) => &head.id,
        }
    }

    fn parent_id(&self) -> Option<&str> {
        match self {
            Parsed::Entry(entry) => entry.parent_id.as_deref(),
            Parsed::Head(head) => head.parent_id.as_deref(),
        }
    }
}

/// Whether any line of the journal is a `compaction` entry, by a streamed byte search.
fn contains_compaction(path: &Path) -> std::io::Result<bool> {
    const MARKER: &[u8] = b"\n{\"type\":\"compaction\"";
    let mut file = File::open(path)?;
    let finder = memchr::memmem::Finder::new(MARKER);
    let mut buffer = vec![0u8; 256 * 1024 + MARKER.len()];
    let mut carried = 0;
    loop {
        let read = file.read(&mut buffer[carried..])?;
        if read == 0 {
            return Ok(false);
        }
        let filled = carried + read;
        if finder.find(&buffer[..filled]).is_some() {
            return Ok(true);
        }
        // Keep the tail so a marker split across reads is still found.
        carried = (MARKER.len() - 1).min(filled);
        buffer.copy_within(filled - carried..filled, 0);
    }
}

/// What pass 1 reads of each entry.
#[derive(Deserialize)]
struct EntryHead<'a> {
    #[serde(rename = "type", borrow)]
    kind: std::borrow::Cow<'a, str>,
    #[serde(borrow)]
    id: std::borrow::Cow<'a, str>,
    #[serde(rename = "parentId", borrow)]
    parent_id: Option<std::borrow::Cow<'a, str>>,
}

/// Parses one entry line, inlining format-2 image blobs (`{"type":"image","blob":{...}}`).
pub(crate) fn parse_entry(line: &[u8], blobs: &Path) -> Result<SessionEntry, String> {
    if !memchr_blob(line) {
        if let Some(entry) = parse_message_entry(line) {
            return Ok(entry);
        }
        return serde_json::from_slice(line).map_err(|error| error.to_string());
    }
    let mut value: serde_json::Value =
        serde_json::from_slice(line).map_err(|error| error.to_string())?;
    inline_blobs(&mut value, blobs)?;
    serde_json::from_value(value).map_err(|error| error.to_string())
}

/// The common case, decoded without serde's buffering of internally tagged enums: a `message`
/// entry whose role selects the concrete message type directly. `None` sends the line through
/// the general decoder (which also produces the error for anything malformed).
fn parse_message_entry(line: &[u8]) -> Option<SessionEntry> {
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

fn memchr_blob(line: &[u8]) -> bool {
    memchr::memmem::find(line, b"\"blob\":").is_some()
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
    candidates.sort_by_key(|candidate| std::cmp::Reverse(candidate.0));
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
    let (file, _) = zi_ai::config_file::open_regular(path).ok()??;
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

#[cfg(test)]
mod open_tests {
    //! `open_existing`, appends and `find_latest_for_cwd` against real files
    //! (runtime-reference §12.2–§12.6).

    use super::*;
    use serde_json::{Value, json};
    use zi_protocol::message::{ContentBlock, MessageContent, UserMessage};

    fn header_line(id: &str, cwd: &str, version: u32) -> String {
        format!(
            r#"{{"type":"session","version":{version},"id":"{id}","timestamp":"2026-01-01T00:00:00.000Z","cwd":"{cwd}"}}"#
        )
    }

    fn new_entry(data: EntryData, parent: Option<&SessionEntry>) -> SessionEntry {
        SessionEntry {
            data,
            id: uuid::Uuid::new_v4().to_string(),
            parent_id: parent.map(|p| p.id.clone()),
            timestamp: "2026-01-01T00:00:01.000Z".to_string(),
        }
    }

    fn custom(custom_type: &str, data: Option<Value>) -> EntryData {
        EntryData::Custom {
            custom_type: custom_type.to_string(),
            data,
        }
    }

    fn user(text: &str) -> EntryData {
        EntryData::Message {
            message: AgentMessage::User(UserMessage {
                content: MessageContent::Parts(vec![ContentBlock::text(text)]),
                timestamp: 1,
            }),
        }
    }

    /// A chain of `n` custom entries.
    fn chain(n: usize) -> Vec<SessionEntry> {
        let mut entries: Vec<SessionEntry> = Vec::new();
        for i in 0..n {
            let entry = new_entry(custom("test.n", Some(json!(i))), entries.last());
            entries.push(entry);
        }
        entries
    }

    fn line(entry: &SessionEntry) -> String {
        serde_json::to_string(entry).unwrap_or_else(|e| panic!("encode: {e}"))
    }

    /// Header plus one line per entry, each terminated.
    fn journal_text(entries: &[SessionEntry]) -> String {
        let mut text = header_line("s1", "/tmp/project", 2);
        text.push('\n');
        for entry in entries {
            text.push_str(&line(entry));
            text.push('\n');
        }
        text
    }

    struct Fixture {
        _dir: tempfile::TempDir,
        path: PathBuf,
    }

    fn fixture(bytes: &[u8]) -> Fixture {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
        let path = dir.path().join("s1.jsonl");
        std::fs::write(&path, bytes).unwrap_or_else(|e| panic!("write: {e}"));
        Fixture { _dir: dir, path }
    }

    fn read(path: &Path) -> Vec<u8> {
        std::fs::read(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
    }

    fn open_ok(path: &Path) -> OpenedJournal {
        open_existing(path).unwrap_or_else(|e| panic!("open {}: {e}", path.display()))
    }

    fn open_err(path: &Path) -> String {
        match open_existing(path) {
            Ok(opened) => panic!(
                "opening {} succeeded with {} entries (repaired: {:?})",
                path.display(),
                opened.entries.len(),
                opened.repaired
            ),
            Err(error) => error.to_string(),
        }
    }

    /// Parses a whole journal: header, then entries forming a linear chain. Panics on a torn or
    /// unparsable line.
    fn parse_file(path: &Path) -> (SessionHeader, Vec<SessionEntry>) {
        let bytes = read(path);
        assert!(
            bytes.ends_with(b"\n"),
            "journal does not end with a newline: {:?}",
            String::from_utf8_lossy(&bytes[bytes.len().saturating_sub(80)..])
        );
        let mut lines = bytes[..bytes.len() - 1].split(|b| *b == b'\n');
        let header: SessionHeader = lines
            .next()
            .and_then(|l| serde_json::from_slice(l).ok())
            .unwrap_or_else(|| panic!("no header in {}", path.display()));
        let mut entries: Vec<SessionEntry> = Vec::new();
        for (n, l) in lines.enumerate() {
            let entry: SessionEntry = serde_json::from_slice(l).unwrap_or_else(|e| {
                panic!(
                    "line {} is not an entry ({e}): {}",
                    n + 2,
                    String::from_utf8_lossy(l)
                )
            });
            assert_eq!(
                entry.parent_id.as_deref(),
                entries.last().map(|p| p.id.as_str()),
                "line {} breaks the chain",
                n + 2
            );
            entries.push(entry);
        }
        (header, entries)
    }

    fn append_after(opened: &mut OpenedJournal, data: EntryData) -> SessionEntry {
        let entry = new_entry(data, opened.entries.last());
        opened
            .file
            .append(&entry, &opened.entries)
            .unwrap_or_else(|e| panic!("append: {e}"));
        opened.entries.push(entry.clone());
        entry
    }

    #[test]
    fn a_clean_journal_opens_unchanged() {
        let entries = chain(3);
        let text = journal_text(&entries);
        let f = fixture(text.as_bytes());
        let opened = open_ok(&f.path);
        assert_eq!(opened.repaired, None);
        assert_eq!(opened.entries, entries);
        assert_eq!(opened.header.id, "s1");
        assert_eq!(opened.header.cwd, "/tmp/project");
        assert_eq!(opened.file.bytes, text.len() as u64);
        assert_eq!(read(&f.path), text.as_bytes());
    }

    #[test]
    fn a_torn_final_line_is_cut_and_appends_continue_the_chain() {
        let entries = chain(2);
        let good = journal_text(&entries);
        let torn_line = line(&new_entry(custom("test.torn", None), entries.last()));
        let mut bytes = good.clone().into_bytes();
        bytes.extend_from_slice(&torn_line.as_bytes()[..torn_line.len() / 2]);
        let f = fixture(&bytes);

        let mut opened = open_ok(&f.path);
        assert!(opened.repaired.is_some(), "a repair is reported");
        assert_eq!(opened.entries, entries);
        assert_eq!(read(&f.path), good.as_bytes(), "the torn bytes are gone");
        assert_eq!(opened.file.bytes, good.len() as u64);

        let appended = append_after(&mut opened, custom("test.after", Some(json!("x"))));
        let (_, on_disk) = parse_file(&f.path);
        assert_eq!(on_disk.len(), 3);
        assert_eq!(on_disk[2], appended);
        assert_eq!(
            on_disk[2].parent_id.as_deref(),
            Some(entries[1].id.as_str())
        );
        assert_eq!(opened.file.bytes, read(&f.path).len() as u64);
    }

    #[test]
    fn a_complete_last_entry_without_newline_is_kept_and_terminated() {
        let entries = chain(2);
        let good = journal_text(&entries);
        let f = fixture(&good.as_bytes()[..good.len() - 1]);
        let mut opened = open_ok(&f.path);
        assert!(opened.repaired.is_some(), "a repair is reported");
        assert_eq!(opened.entries, entries);
        assert_eq!(read(&f.path), good.as_bytes(), "only the newline was added");

        append_after(&mut opened, custom("test.after", None));
        let (_, on_disk) = parse_file(&f.path);
        assert_eq!(on_disk.len(), 3);
        assert_eq!(&on_disk[..2], &entries[..]);
    }

    #[test]
    fn a_header_without_newline_is_terminated() {
        let header = header_line("s1", "/tmp/project", 2);
        let f = fixture(header.as_bytes());
        let mut opened = open_ok(&f.path);
        assert!(opened.repaired.is_some());
        assert!(opened.entries.is_empty());
        assert_eq!(read(&f.path), format!("{header}\n").as_bytes());
        append_after(&mut opened, user("first"));
        let (_, on_disk) = parse_file(&f.path);
        assert_eq!(on_disk.len(), 1);
        assert_eq!(on_disk[0].parent_id, None);
    }

    #[test]
    fn a_corrupt_or_unchained_middle_line_is_an_error() {
        let entries = chain(3);
        // Malformed middle line.
        let mut text = header_line("s1", "/tmp/project", 2);
        text.push('\n');
        text.push_str(&line(&entries[0]));
        text.push_str("\n{\"type\":\"custom\",\"customType\":\n");
        text.push_str(&line(&entries[2]));
        text.push('\n');
        let f = fixture(text.as_bytes());
        let error = open_err(&f.path);
        assert!(error.contains("line 3"), "{error}");
        assert_eq!(read(&f.path), text.as_bytes(), "nothing is repaired");

        // A middle entry whose parentId is not its predecessor.
        let mut swapped = entries.clone();
        swapped.swap(0, 1);
        let text = journal_text(&swapped);
        let f = fixture(text.as_bytes());
        let error = open_err(&f.path);
        assert!(error.contains("corrupt"), "{error}");
        assert_eq!(read(&f.path), text.as_bytes());
    }

    /// Only an *unterminated* final line is a torn tail (runtime-reference §12.6): a complete,
    /// newline-terminated final line that is malformed or breaks the chain is corruption, and the
    /// file must not be silently truncated.
    #[test]
    fn a_terminated_bad_final_line_is_not_treated_as_a_torn_tail() {
        let entries = chain(2);
        let cases: Vec<(&str, String)> = vec![
            (
                "malformed",
                "{\"type\":\"custom\",\"customType\":}".to_string(),
            ),
            (
                "unchained",
                line(&new_entry(custom("test.orphan", None), entries.first())),
            ),
        ];
        for (name, last) in cases {
            let mut text = journal_text(&entries);
            text.push_str(&last);
            text.push('\n');
            let f = fixture(text.as_bytes());
            let result = open_existing(&f.path);
            let after = read(&f.path);
            assert!(
                result.is_err(),
                "{name}: a terminated bad final line was accepted (repaired: {:?})",
                result.as_ref().ok().and_then(|o| o.repaired.clone())
            );
            assert_eq!(after, text.as_bytes(), "{name}: the file was modified");
        }
    }

    #[test]
    fn headers_are_validated() {
        let f = fixture(b"");
        let error = open_err(&f.path);
        assert!(
            error.contains("empty") || error.contains("header"),
            "{error}"
        );

        let f = fixture(b"not json\n");
        assert!(open_err(&f.path).contains("header"));

        let wrong_type = r#"{"type":"message","version":2,"id":"s1","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/"}"#;
        let f = fixture(format!("{wrong_type}\n").as_bytes());
        assert!(open_err(&f.path).contains("header"));

        let f = fixture(format!("{}\n", header_line("s1", "/", 3)).as_bytes());
        assert!(open_err(&f.path).contains("version"));

        // Format 1 stays readable.
        let entries = chain(1);
        let text = format!(
            "{}\n{}\n",
            header_line("old", "/tmp/project", 1),
            line(&entries[0])
        );
        let f = fixture(text.as_bytes());
        let opened = open_ok(&f.path);
        assert_eq!(opened.header.version, 1);
        assert_eq!(opened.entries, entries);
        assert_eq!(opened.repaired, None);
    }

    #[test]
    fn format_2_image_blobs_are_inlined() {
        use base64::Engine;
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
        let path = dir.path().join("s1.jsonl");
        let image = b"\x89PNG fake image bytes";
        // The address is opaque to the reader; any 64 hex digits name the blob file.
        let sha = "ab".repeat(32);
        std::fs::create_dir_all(dir.path().join("s1.blobs")).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(dir.path().join("s1.blobs").join(&sha), image)
            .unwrap_or_else(|e| panic!("{e}"));
        let stored = |id: &str, parent: Value, sha: &str| {
            json!({
                "type": "message",
                "message": {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "look"},
                        {"type": "image", "mimeType": "image/png",
                         "blob": {"sha256": sha, "bytes": image.len()}}
                    ],
                    "timestamp": 5
                },
                "id": id,
                "parentId": parent,
                "timestamp": "2026-01-01T00:00:01.000Z"
            })
        };
        let first = stored("e1", Value::Null, &sha);
        let text = format!("{}\n{first}\n", header_line("s1", "/tmp/project", 2));
        std::fs::write(&path, &text).unwrap_or_else(|e| panic!("{e}"));
        let opened = open_ok(&path);
        assert_eq!(opened.repaired, None);
        let EntryData::Message {
            message: AgentMessage::User(message),
        } = &opened.entries[0].data
        else {
            panic!("unexpected entry {:?}", opened.entries[0]);
        };
        let MessageContent::Parts(parts) = &message.content else {
            panic!("parts expected: {:?}", message.content);
        };
        assert_eq!(
            parts[1],
            ContentBlock::Image {
                data: base64::engine::general_purpose::STANDARD.encode(image),
                mime_type: "image/png".into()
            }
        );
        assert_eq!(
            read(&path),
            text.as_bytes(),
            "the file keeps the blob reference"
        );

        // A reference to a missing blob in the middle of the file is an error.
        let missing = stored("e2", json!("e1"), &"cd".repeat(32));
        let third = json!({"type": "custom", "customType": "t", "id": "e3", "parentId": "e2",
                           "timestamp": "2026-01-01T00:00:01.000Z"});
        let text = format!(
            "{}\n{first}\n{missing}\n{third}\n",
            header_line("s1", "/tmp/project", 2)
        );
        std::fs::write(&path, &text).unwrap_or_else(|e| panic!("{e}"));
        let error = open_err(&path);
        assert!(error.contains("blob"), "{error}");

        // So is an invalid address.
        let invalid = stored("e2", json!("e1"), "../../etc/passwd");
        let text = format!(
            "{}\n{first}\n{invalid}\n{third}\n",
            header_line("s1", "/tmp/project", 2)
        );
        std::fs::write(&path, &text).unwrap_or_else(|e| panic!("{e}"));
        let error = open_err(&path);
        assert!(error.contains("sha256"), "{error}");
    }

    #[test]
    fn files_over_64_mib_are_refused_before_reading() {
        let header = format!("{}\n", header_line("s1", "/tmp/project", 2));
        let f = fixture(header.as_bytes());
        let file = OpenOptions::new()
            .write(true)
            .open(&f.path)
            .unwrap_or_else(|e| panic!("{e}"));
        // Sparse: cheap to create, and the size check must come before any parsing.
        file.set_len(MAX_JOURNAL_BYTES + 1)
            .unwrap_or_else(|e| panic!("{e}"));
        let error = open_err(&f.path);
        assert!(error.contains("exceeds"), "{error}");
        assert!(error.contains(&MAX_JOURNAL_BYTES.to_string()), "{error}");
        assert_eq!(
            std::fs::metadata(&f.path).map(|m| m.len()).unwrap_or(0),
            MAX_JOURNAL_BYTES + 1,
            "the file is left alone"
        );
    }

    #[test]
    fn appends_past_64_mib_fail_whole_and_an_exact_fit_succeeds() {
        // The size of a `custom` line without data: ids and timestamps have fixed widths.
        let entries = chain(1);
        let probe = new_entry(custom("test.fit", None), entries.last());
        let fit = line(&probe).len() as u64 + 1;
        let text = journal_text(&entries);
        let f = fixture(text.as_bytes());
        let mut opened = open_ok(&f.path);
        assert_eq!(opened.file.bytes, text.len() as u64);
        // Writing a real 64 MiB file is too slow for a unit test in a debug build: pretend the
        // file already holds all but `fit` bytes of the bound.
        opened.file.bytes = MAX_JOURNAL_BYTES - fit;

        // One byte too many: refused, nothing written.
        let too_big = new_entry(custom("test.fitx", None), entries.last());
        let error = opened
            .file
            .append(&too_big, &opened.entries)
            .err()
            .unwrap_or_else(|| panic!("an append past the bound succeeded"));
        assert!(error.to_string().contains("exceed"), "{error}");
        assert_eq!(read(&f.path), text.as_bytes(), "nothing half-written");
        assert_eq!(opened.file.bytes, MAX_JOURNAL_BYTES - fit);

        // Exactly up to the bound: accepted.
        let exact = new_entry(custom("test.fit", None), entries.last());
        opened
            .file
            .append(&exact, &opened.entries)
            .unwrap_or_else(|e| panic!("an exact fit was refused: {e}"));
        assert_eq!(opened.file.bytes, MAX_JOURNAL_BYTES);
        let (_, on_disk) = parse_file(&f.path);
        assert_eq!(on_disk.last(), Some(&exact));

        // Full: even the smallest entry is refused.
        let more = new_entry(custom("a", None), Some(&exact));
        assert!(opened.file.append(&more, &on_disk).is_err());
        assert_eq!(parse_file(&f.path).1.len(), 2);
    }

    #[test]
    fn a_pending_journal_materializes_on_its_first_durable_entry() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
        let path = dir.path().join("nested").join("s2.jsonl");
        let header = SessionHeader::new(
            "s2",
            Path::new("/tmp/project"),
            "2026-01-01T00:00:00.000Z".into(),
        );
        let mut file = JournalFile::pending(path.clone(), header.clone());
        let mut entries: Vec<SessionEntry> = Vec::new();
        for data in [
            EntryData::ModelChange {
                provider: "mock".into(),
                model_id: "m1".into(),
            },
            EntryData::ThinkingLevelChange {
                thinking_level: zi_protocol::ThinkingLevel::Off,
            },
            user("hello"),
        ] {
            let entry = new_entry(data, entries.last());
            file.append(&entry, &entries)
                .unwrap_or_else(|e| panic!("append: {e}"));
            entries.push(entry);
            assert!(
                !path.exists(),
                "nothing is written before the first durable entry"
            );
        }
        let durable = new_entry(custom("test.state", Some(json!({"a": 1}))), entries.last());
        file.append(&durable, &entries)
            .unwrap_or_else(|e| panic!("append: {e}"));
        entries.push(durable);
        let (on_disk_header, on_disk) = parse_file(&path);
        assert_eq!(on_disk_header, header);
        assert_eq!(on_disk, entries);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path)
                .map(|m| m.permissions().mode() & 0o777)
                .unwrap_or(0);
            assert_eq!(mode, 0o600, "journal mode {mode:o}");
        }
        assert_eq!(file.bytes, read(&path).len() as u64);
    }

    #[test]
    fn materializing_never_overwrites_an_existing_file() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
        let path = dir.path().join("s3.jsonl");
        std::fs::write(&path, b"someone else's file\n").unwrap_or_else(|e| panic!("{e}"));
        let header = SessionHeader::new(
            "s3",
            Path::new("/tmp/project"),
            "2026-01-01T00:00:00.000Z".into(),
        );
        let mut file = JournalFile::pending(path.clone(), header);
        let entry = new_entry(custom("test.state", None), None);
        assert!(file.append(&entry, &[]).is_err(), "exclusive create");
        assert_eq!(read(&path), b"someone else's file\n");
    }

    #[test]
    fn continue_picks_the_newest_journal_of_the_cwd() {
        use std::time::{Duration, SystemTime};
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
        let base = SystemTime::now() - Duration::from_secs(3600);
        let write = |name: &str, cwd: &str, age_secs: u64| {
            let path = dir.path().join(name);
            std::fs::write(&path, format!("{}\n", header_line(name, cwd, 2)))
                .unwrap_or_else(|e| panic!("{e}"));
            let file = File::options()
                .write(true)
                .open(&path)
                .unwrap_or_else(|e| panic!("{e}"));
            file.set_modified(base - Duration::from_secs(age_secs))
                .unwrap_or_else(|e| panic!("{e}"));
            path
        };
        write("a.jsonl", "/p", 30);
        let newest_of_p = write("b.jsonl", "/p", 10);
        write("c.jsonl", "/p", 20);
        write("d.jsonl", "/other", 1);
        write("e.txt", "/p", 0);
        write("f.jsonl.bak", "/p", 0);
        assert_eq!(
            find_latest_for_cwd(dir.path(), Path::new("/p")),
            Some(newest_of_p)
        );
        assert_eq!(find_latest_for_cwd(dir.path(), Path::new("/none")), None);
        assert_eq!(
            find_latest_for_cwd(&dir.path().join("missing"), Path::new("/p")),
            None
        );
    }
}
