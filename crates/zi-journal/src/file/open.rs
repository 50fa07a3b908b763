//! Opening an existing journal: one pass over header, chain and blobs, and torn-tail repair.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::path::Path;

use serde::Deserialize;
use zi_protocol::event::{EntryData, SessionEntry};

use super::parse::{EntryError, parse_entry};
use super::write::{FileState, JournalFile};
use super::{JournalError, MAX_JOURNAL_BYTES, SessionHeader};
use crate::messages;

/// A journal read back from disk.
pub struct OpenedJournal {
    /// Line 1.
    pub header: SessionHeader,
    /// The state entries before the resident tail that [`crate::memory::kept_cold`] keeps.
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
    read_existing(path)
}

// Long on purpose: one pass over the file (header, chain, blobs, torn-line repair) whose steps
// share the reader, the line buffer and the positions reported in errors.
pub(super) fn read_existing(path: &Path) -> Result<OpenedJournal, JournalError> {
    use std::io::{BufRead, BufReader, Seek, SeekFrom};
    let describe =
        |error: std::io::Error| JournalError(messages::read_failed(path.display(), error));
    let corrupt = |line: usize, error: &EntryError| {
        JournalError(messages::corrupt_line(path.display(), line, error))
    };
    // Only a regular file, opened without blocking: a FIFO or `/dev/zero` must not hang `-r`.
    let (file, meta) = match zi_os::config_file::open_regular(path) {
        Ok(Some(opened)) => opened,
        Ok(None) => return Err(describe(std::io::ErrorKind::NotFound.into())),
        Err(error) => return Err(format!("Could not open journal: {error}").into()),
    };
    let size = meta.len();
    if size > MAX_JOURNAL_BYTES {
        return Err(format!(
            "Journal {} exceeds {MAX_JOURNAL_BYTES} bytes and cannot be opened",
            path.display()
        )
        .into());
    }
    let mut reader = BufReader::with_capacity(256 * 1024, file);
    let mut line = Vec::new();
    reader.read_until(b'\n', &mut line).map_err(describe)?;
    if line.is_empty() {
        return Err(format!("Journal {} is empty", path.display()).into());
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
        )
        .into());
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
                .map_err(EntryError::from)
        }
        .and_then(|parsed| {
            if parsed.parent_id() == previous_id.as_deref() {
                Ok(parsed)
            } else {
                Err(EntryError::Unchained {
                    id: parsed.id().to_string(),
                })
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
    let mut read_entry = |head: &LineHead, position: usize| -> Result<SessionEntry, JournalError> {
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
            if crate::memory::kept_cold(&entry.data) {
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
        .map_err(|error| {
            JournalError(format!(
                "Could not open journal {}: {error}",
                path.display()
            ))
        })?;
    let io_error = |error: std::io::Error| {
        JournalError(format!(
            "Could not repair journal {}: {error}",
            path.display()
        ))
    };
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
        blobs: None,
    }
    .with_blobs();
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
