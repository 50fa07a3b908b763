//! One journal's catalog summary: the header alone (enough to filter and sort a listing), then
//! for the journals a page shows, a line scan that can resume where an earlier scan of the same
//! (append-only) file stopped.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

use serde::{Deserialize, Serialize};
use zi_protocol::message::MessageContent;
use zi_protocol::results::{SessionModel, clip_utf8};

use crate::file::{MAX_JOURNAL_BYTES, SessionHeader};

/// Longest `firstUserText`, in bytes.
pub const FIRST_USER_TEXT_BYTES: usize = 256;
/// Longest header line read.
const HEADER_BYTES: u64 = 64 * 1024;
/// The first read of a header: headers are a few hundred bytes, so reading more (a whole
/// buffered block) for each of a thousand journals would dominate a listing.
const HEADER_FIRST_READ: usize = 4 * 1024;
/// The scan's read size; a longer line grows the buffer to its length (at most the journal's).
const SCAN_CHUNK: usize = 256 * 1024;

const MESSAGE_LINE: &[u8] = b"{\"type\":\"message\",";
/// How every journal writer begins a message line: the role tag comes first in the message.
const MESSAGE_ROLE_PREFIX: &[u8] = b"{\"type\":\"message\",\"message\":{\"role\":\"";
const MODEL_CHANGE_LINE: &[u8] = b"{\"type\":\"model_change\",";
const USER_ROLE: &[u8] = b"\"role\":\"user\"";
const ASSISTANT_ROLE: &[u8] = b"\"role\":\"assistant\"";

/// What the catalog knows of one journal; also the cache record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Summary {
    pub session_id: String,
    pub cwd: String,
    pub created_at: String,
    /// End of the last complete line scanned: where a later scan of the grown file resumes.
    /// Right after the header when only the header was read.
    pub scanned: u64,
    pub message_count: u64,
    /// `None` until a user message was seen.
    pub first_user_text: Option<String>,
    pub model: Option<SessionModel>,
}

impl Summary {
    /// Whether the scan reached the end of a file of `len` bytes, so the counts are final.
    /// (A torn last line keeps a summary short of the end; resuming it rereads only that line.)
    pub fn covers(&self, len: u64) -> bool {
        self.scanned >= len
    }
}

/// Why a file is not listed.
#[derive(Debug)]
pub struct Unlisted;

/// The summary of the journal at `path` (`len` bytes now) from its header alone: nothing after
/// the header is counted yet (`scanned` is the header's end).
pub fn header_summary(path: &Path, len: u64) -> Result<Summary, Unlisted> {
    let mut file = open_journal(path, len)?;
    let (header, header_end) = read_header(&mut file)?;
    Ok(fresh(header, header_end))
}

/// Summarizes the journal at `path` (`len` bytes now). `earlier` is a previous summary of the
/// same file: when its header still matches and the file only grew past a line end, only the
/// new bytes are scanned.
pub fn summarize(path: &Path, len: u64, earlier: Option<Summary>) -> Result<Summary, Unlisted> {
    let mut file = open_journal(path, len)?;
    let (header, header_end) = read_header(&mut file)?;
    let resumable = earlier.filter(|summary| {
        summary.session_id == header.id
            && summary.scanned >= header_end
            && summary.scanned <= len
            && ends_line(&mut file, summary.scanned)
    });
    let mut summary = match resumable {
        Some(summary) => summary,
        None => fresh(header, header_end),
    };
    scan_lines(&mut file, &mut summary).map_err(|_| Unlisted)?;
    Ok(summary)
}

fn open_journal(path: &Path, len: u64) -> Result<File, Unlisted> {
    if len > MAX_JOURNAL_BYTES {
        return Err(Unlisted);
    }
    let (file, _) = zi_os::config_file::open_regular(path)
        .ok()
        .flatten()
        .ok_or(Unlisted)?;
    Ok(file)
}

fn fresh(header: SessionHeader, header_end: u64) -> Summary {
    Summary {
        session_id: header.id,
        cwd: header.cwd,
        created_at: header.timestamp,
        scanned: header_end,
        message_count: 0,
        first_user_text: None,
        model: None,
    }
}

/// Reads and checks the header line (at most [`HEADER_BYTES`]), starting with a small read
/// and doubling it while no line end has been seen. Returns the header and its length.
fn read_header(file: &mut File) -> Result<(SessionHeader, u64), Unlisted> {
    let mut limited = Read::by_ref(file).take(HEADER_BYTES);
    let mut buffer = Vec::new();
    loop {
        let filled = buffer.len();
        buffer.resize(filled + filled.max(HEADER_FIRST_READ), 0);
        let read = limited.read(&mut buffer[filled..]).map_err(|_| Unlisted)?;
        buffer.truncate(filled + read);
        if let Some(at) = memchr::memchr(b'\n', &buffer[filled..]) {
            let end = filled + at + 1;
            let header: SessionHeader =
                serde_json::from_slice(&buffer[..end]).map_err(|_| Unlisted)?;
            if header.kind != "session" || !(1..=2).contains(&header.version) {
                return Err(Unlisted);
            }
            return Ok((header, end as u64));
        }
        if read == 0 {
            return Err(Unlisted);
        }
    }
}

/// Whether the byte before `offset` is a newline (the earlier scan ended on a line end).
fn ends_line(file: &mut File, offset: u64) -> bool {
    let mut byte = [0u8; 1];
    file.seek(SeekFrom::Start(offset - 1)).is_ok()
        && file.read_exact(&mut byte).is_ok()
        && byte[0] == b'\n'
}

/// Where the line that names the latest model sits.
struct ModelLine {
    offset: u64,
    len: usize,
}

/// Scans complete lines from `summary.scanned`: counts `message` entries (lines that begin
/// with `{"type":"message",`, the form every journal writer emits), takes the first user
/// text, and remembers the last line that names a model, parsed once at the end. Lines are
/// examined in place in large reads (no copy per line, no parse but the two lines used).
fn scan_lines(file: &mut File, summary: &mut Summary) -> std::io::Result<()> {
    file.seek(SeekFrom::Start(summary.scanned))?;
    let mut buffer = vec![0u8; SCAN_CHUNK];
    // `buffer[..filled]` holds the file from `offset`; `searched` bytes of it hold no newline.
    let (mut filled, mut searched, mut offset) = (0, 0, summary.scanned);
    let mut model_line: Option<ModelLine> = None;
    loop {
        if filled == buffer.len() {
            // One line longer than the buffer: grow it (journals are bounded, so is this).
            buffer.resize(buffer.len() * 2, 0);
        }
        let read = file.read(&mut buffer[filled..])?;
        if read == 0 {
            // EOF; a last line without its newline is still being written: stop before it.
            break;
        }
        filled += read;
        let mut begin = 0;
        while let Some(at) = memchr::memchr(b'\n', &buffer[searched..filled]) {
            let end = searched + at;
            let text = &buffer[begin..end];
            let line_offset = offset + begin as u64;
            if text.starts_with(MESSAGE_LINE) {
                summary.message_count += 1;
                let role = message_role(text);
                if summary.first_user_text.is_none() && role == Some(Role::User) {
                    summary.first_user_text = user_text(text);
                }
                if role == Some(Role::Assistant) {
                    model_line = Some(ModelLine {
                        offset: line_offset,
                        len: text.len(),
                    });
                }
            } else if text.starts_with(MODEL_CHANGE_LINE) {
                model_line = Some(ModelLine {
                    offset: line_offset,
                    len: text.len(),
                });
            }
            begin = end + 1;
            searched = begin;
        }
        buffer.copy_within(begin..filled, 0);
        filled -= begin;
        searched = filled;
        offset += begin as u64;
    }
    summary.scanned = offset;
    if let Some(found) = model_line {
        let mut line = vec![0; found.len];
        file.seek(SeekFrom::Start(found.offset))?;
        file.read_exact(&mut line)?;
        if let Some(model) = line_model(&line) {
            summary.model = Some(model);
        }
    }
    Ok(())
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    User,
    Assistant,
}

/// The role a message line names: read at its usual place right after the entry's prefix,
/// else searched for in the line (a writer that orders keys differently).
fn message_role(line: &[u8]) -> Option<Role> {
    if let Some(rest) = line.strip_prefix(MESSAGE_ROLE_PREFIX) {
        return if rest.starts_with(b"user\"") {
            Some(Role::User)
        } else if rest.starts_with(b"assistant\"") {
            Some(Role::Assistant)
        } else {
            None
        };
    }
    if contains(line, USER_ROLE) {
        Some(Role::User)
    } else if contains(line, ASSISTANT_ROLE) {
        Some(Role::Assistant)
    } else {
        None
    }
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    memchr::memmem::find(haystack, needle).is_some()
}

/// The clipped text of a user message line (`None` when it is not one after all).
fn user_text(line: &[u8]) -> Option<String> {
    #[derive(Deserialize)]
    struct Line {
        message: Message,
    }
    #[derive(Deserialize)]
    struct Message {
        role: String,
        #[serde(default)]
        content: Option<MessageContent>,
    }
    let parsed: Line = serde_json::from_slice(line).ok()?;
    if parsed.message.role != "user" {
        return None;
    }
    let text = parsed.message.content.map(|c| c.text()).unwrap_or_default();
    Some(clip_utf8(&text, FIRST_USER_TEXT_BYTES).0.to_string())
}

/// The model a `model_change` or assistant `message` line names.
fn line_model(line: &[u8]) -> Option<SessionModel> {
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Line {
        #[serde(rename = "type")]
        kind: String,
        provider: Option<String>,
        model_id: Option<String>,
        message: Option<Message>,
    }
    #[derive(Deserialize)]
    struct Message {
        role: String,
        provider: Option<String>,
        model: Option<String>,
    }
    let parsed: Line = serde_json::from_slice(line).ok()?;
    let (provider, id) = match (parsed.kind.as_str(), parsed.message) {
        ("model_change", _) => (parsed.provider?, parsed.model_id?),
        ("message", Some(message)) if message.role == "assistant" => {
            (message.provider?, message.model?)
        }
        _ => return None,
    };
    Some(SessionModel { provider, id })
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEADER: &str = r#"{"type":"session","version":2,"id":"s1","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/p"}"#;

    fn user(text: &str) -> String {
        format!(
            r#"{{"type":"message","message":{{"role":"user","content":[{{"type":"text","text":{}}}],"timestamp":1}},"id":"u","parentId":null,"timestamp":"2026-01-01T00:00:00.000Z"}}"#,
            serde_json::Value::from(text)
        )
    }

    fn assistant(model: &str) -> String {
        format!(
            r#"{{"type":"message","message":{{"role":"assistant","content":[],"api":"openai-completions","provider":"p","model":"{model}","usage":{{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"totalTokens":0,"cost":{{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":0}}}},"stopReason":"stop","timestamp":1}},"id":"a","parentId":"u","timestamp":"2026-01-01T00:00:00.000Z"}}"#
        )
    }

    fn write(path: &Path, lines: &[String]) -> u64 {
        let mut text = String::new();
        for line in lines {
            text.push_str(line);
            text.push('\n');
        }
        std::fs::write(path, &text).expect("write journal");
        text.len() as u64
    }

    #[test]
    fn counts_messages_and_resumes_after_growth() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("s1.jsonl");
        let long = "é".repeat(200);
        let len = write(&path, &[HEADER.to_string(), user(&long), assistant("m1")]);
        let first = summarize(&path, len, None).expect("listed");
        assert_eq!(first.message_count, 2);
        assert_eq!(
            first.first_user_text.as_deref(),
            Some("é".repeat(128).as_str())
        );
        assert_eq!(first.model.as_ref().map(|m| m.id.as_str()), Some("m1"));
        let model_change = r#"{"type":"model_change","provider":"q","modelId":"m2","id":"c","parentId":"a","timestamp":"2026-01-01T00:00:00.000Z"}"#;
        let grown = write(
            &path,
            &[
                HEADER.to_string(),
                user(&long),
                assistant("m1"),
                model_change.to_string(),
                user("again"),
            ],
        );
        // Resumed from the first summary: only the appended lines are scanned, so a count
        // that was wrong before would stay wrong; a fresh scan must agree.
        let second = summarize(&path, grown, Some(first)).expect("listed");
        assert_eq!(second.message_count, 3);
        assert_eq!(
            second
                .model
                .as_ref()
                .map(|m| (m.provider.as_str(), m.id.as_str())),
            Some(("q", "m2"))
        );
        assert_eq!(summarize(&path, grown, None).expect("listed"), second);
    }

    #[test]
    fn lines_longer_than_a_read_and_many_reads_are_counted() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("s1.jsonl");
        // A first user line three reads long, then enough short lines for several reads.
        let long = "x".repeat(3 * SCAN_CHUNK);
        let mut lines = vec![HEADER.to_string(), user(&long)];
        for n in 0..2_000 {
            lines.push(assistant(&format!("m{n}")));
        }
        let len = write(&path, &lines);
        let header = header_summary(&path, len).expect("listed");
        assert_eq!(header.message_count, 0);
        assert!(!header.covers(len));
        let summary = summarize(&path, len, Some(header)).expect("listed");
        assert!(summary.covers(len));
        assert_eq!(summary.message_count, 2_001);
        assert_eq!(
            summary.first_user_text.as_deref(),
            Some("x".repeat(FIRST_USER_TEXT_BYTES).as_str())
        );
        assert_eq!(summary.model.map(|m| m.id), Some("m1999".to_string()));
    }

    #[test]
    fn a_torn_last_line_is_left_for_later() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("s1.jsonl");
        let mut text = format!("{HEADER}\n{}\n", user("hi"));
        let complete = text.len() as u64;
        text.push_str(&assistant("m1")[..40]);
        std::fs::write(&path, &text).expect("write");
        let summary = summarize(&path, text.len() as u64, None).expect("listed");
        assert_eq!((summary.message_count, summary.scanned), (1, complete));
        assert!(!summary.covers(text.len() as u64));
    }

    #[test]
    fn foreign_files_are_unlisted() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("x.jsonl");
        for content in ["", "not json\n", "{\"type\":\"other\"}\n", HEADER] {
            std::fs::write(&path, content).expect("write");
            assert!(
                summarize(&path, content.len() as u64, None).is_err(),
                "{content}"
            );
        }
    }
}
