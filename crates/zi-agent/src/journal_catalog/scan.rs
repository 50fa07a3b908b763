//! One journal's catalog summary, read from its header and a streamed line scan that can
//! resume where an earlier scan of the same (append-only) file stopped.

use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::Path;

use serde::{Deserialize, Serialize};
use zi_protocol::message::MessageContent;
use zi_protocol::results::{SessionModel, clip_utf8};

use crate::journal_file::{MAX_JOURNAL_BYTES, SessionHeader};

/// Longest `firstUserText`, in bytes.
pub const FIRST_USER_TEXT_BYTES: usize = 256;
/// Longest header line read.
const HEADER_BYTES: u64 = 64 * 1024;

const MESSAGE_LINE: &[u8] = b"{\"type\":\"message\",";
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
    pub scanned: u64,
    pub message_count: u64,
    /// `None` until a user message was seen.
    pub first_user_text: Option<String>,
    pub model: Option<SessionModel>,
}

/// Why a file is not listed.
#[derive(Debug)]
pub struct Unlisted;

/// Summarizes the journal at `path` (`len` bytes now). `earlier` is a previous summary of the
/// same file: when its header still matches and the file only grew past a line end, only the
/// new bytes are scanned.
pub fn summarize(path: &Path, len: u64, earlier: Option<Summary>) -> Result<Summary, Unlisted> {
    if len > MAX_JOURNAL_BYTES {
        return Err(Unlisted);
    }
    let (file, _) = zi_ai::config_file::open_regular(path)
        .ok()
        .flatten()
        .ok_or(Unlisted)?;
    let mut reader = BufReader::with_capacity(256 * 1024, file);
    let mut line = Vec::new();
    (&mut reader)
        .take(HEADER_BYTES)
        .read_until(b'\n', &mut line)
        .map_err(|_| Unlisted)?;
    if line.last() != Some(&b'\n') {
        return Err(Unlisted);
    }
    let header: SessionHeader = serde_json::from_slice(&line).map_err(|_| Unlisted)?;
    if header.kind != "session" || !(1..=2).contains(&header.version) {
        return Err(Unlisted);
    }
    let header_end = line.len() as u64;
    let resumable = earlier.filter(|summary| {
        summary.session_id == header.id
            && summary.scanned >= header_end
            && summary.scanned <= len
            && ends_line(reader.get_mut(), summary.scanned)
    });
    let mut summary = match resumable {
        Some(summary) => summary,
        None => Summary {
            session_id: header.id,
            cwd: header.cwd,
            created_at: header.timestamp,
            scanned: header_end,
            message_count: 0,
            first_user_text: None,
            model: None,
        },
    };
    reader
        .seek(SeekFrom::Start(summary.scanned))
        .map_err(|_| Unlisted)?;
    scan_lines(&mut reader, &mut summary).map_err(|_| Unlisted)?;
    Ok(summary)
}

/// Whether the byte before `offset` is a newline (the earlier scan ended on a line end).
fn ends_line(file: &mut std::fs::File, offset: u64) -> bool {
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

/// Scans complete lines from the reader's position: counts `message` entries (lines that
/// begin with `{"type":"message",`, the form every journal writer emits), takes the first
/// user text, and remembers the last line that names a model, parsed once at the end.
fn scan_lines<R: BufRead + Seek>(reader: &mut R, summary: &mut Summary) -> std::io::Result<()> {
    let mut line = Vec::new();
    let mut offset = summary.scanned;
    let mut model_line: Option<ModelLine> = None;
    loop {
        line.clear();
        let read = reader.read_until(b'\n', &mut line)?;
        if read == 0 || line.last() != Some(&b'\n') {
            // EOF, or a line still being written: stop before it.
            break;
        }
        let text = &line[..line.len() - 1];
        if text.starts_with(MESSAGE_LINE) {
            summary.message_count += 1;
            if summary.first_user_text.is_none() && contains(text, USER_ROLE) {
                summary.first_user_text = user_text(text);
            }
            if contains(text, ASSISTANT_ROLE) {
                model_line = Some(ModelLine {
                    offset,
                    len: text.len(),
                });
            }
        } else if text.starts_with(MODEL_CHANGE_LINE) {
            model_line = Some(ModelLine {
                offset,
                len: text.len(),
            });
        }
        offset += read as u64;
    }
    summary.scanned = offset;
    if let Some(found) = model_line {
        let mut buffer = vec![0; found.len];
        reader.seek(SeekFrom::Start(found.offset))?;
        reader.read_exact(&mut buffer)?;
        if let Some(model) = line_model(&buffer) {
            summary.model = Some(model);
        }
    }
    Ok(())
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
