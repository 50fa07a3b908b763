//! `open_existing`, appends and `find_latest_for_cwd` against real files
//! (docs/configuration.md#session-journals).

use std::fs::{File, OpenOptions};
use std::path::PathBuf;

use serde_json::{Value, json};
use zi_protocol::event::{EntryData, SessionEntry};
use zi_protocol::message::{AgentMessage, ContentBlock, MessageContent, UserMessage};

use super::*;

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

/// Only an *unterminated* final line is a torn tail (docs/configuration.md#session-journals): a
/// complete, newline-terminated final line that is malformed or breaks the chain is corruption, and
/// the file must not be silently truncated.
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
    std::fs::write(dir.path().join("s1.blobs").join(&sha), image).unwrap_or_else(|e| panic!("{e}"));
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

#[test]
fn the_one_pass_message_decoder_agrees_with_the_general_decoder() {
    let tail = r#""id":"00000000-0000-4000-8000-000000000002","parentId":"00000000-0000-4000-8000-000000000001","timestamp":"2026-11-30T00:00:00.000Z""#;
    let messages = [
        r#"{"role":"user","content":"plain \"quoted\" text","timestamp":1}"#,
        r#"{"role":"user","content":[{"type":"text","text":"a"},{"type":"image","data":"AA==","mimeType":"image/png"}],"timestamp":2}"#,
        r#"{"role":"assistant","content":[{"type":"thinking","thinking":"hm","thinkingSignature":"s"},{"type":"text","text":"ok"},{"type":"toolCall","id":"c1","name":"bash","arguments":{"command":"ls"}}],"api":"openai-completions","provider":"p","model":"m","usage":{"input":1,"output":2,"cacheRead":0,"cacheWrite":0,"totalTokens":3,"cost":{"input":0.5,"output":0.25,"cacheRead":0.0,"cacheWrite":0.0,"total":0.75}},"stopReason":"toolUse","timestamp":3}"#,
        r#"{"role":"toolResult","toolCallId":"c1","toolName":"bash","content":[{"type":"text","text":"out"}],"details":{"exitCode":0},"isError":false,"timestamp":4}"#,
        r#"{"role":"user","content":"unknown keys are ignored by both","extra":[1,2],"timestamp":5}"#,
    ];
    for message in messages {
        let line = format!(r#"{{"type":"message","message":{message},{tail}}}"#);
        let general: SessionEntry =
            serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"));
        let fast = super::parse::parse_message_entry(line.as_bytes());
        assert_eq!(fast.as_ref(), Some(&general), "{line}");
    }
    // Shapes the one pass leaves to the general decoder, which gives their answer.
    let others = [
        r#"{"type":"message","message":{"content":"role later","role":"user","timestamp":1},"id":"a","parentId":null,"timestamp":"t"}"#,
        r#"{"type":"message","message":{"role":"custom","customType":"x","content":"c","display":true,"timestamp":1},"id":"a","parentId":null,"timestamp":"t"}"#,
        r#"{"type":"message","message":{"role":"user","content":5,"timestamp":1},"id":"a","parentId":null,"timestamp":"t"}"#,
        r#"{"type":"model_change","provider":"p","modelId":"m","id":"a","parentId":null,"timestamp":"t"}"#,
    ];
    for line in others {
        assert_eq!(
            super::parse::parse_message_entry(line.as_bytes()),
            None,
            "{line}"
        );
    }
}

#[test]
fn the_tail_holds_the_whole_lines_at_the_end_and_skips_a_torn_one() {
    let entries = chain(50);
    let mut text = journal_text(&entries);
    let whole = text.len() as u64;
    text.push_str(r#"{"type":"custom","customType":"torn"#);
    let file = fixture(text.as_bytes());
    // The whole file: every entry (the header is not one).
    assert_eq!(tail_entries(&file.path, u64::MAX), entries);
    // A window ending in the torn line and starting inside an entry's line: the whole lines
    // after that one.
    let last_three: usize = entries[47..].iter().map(|e| line(e).len() + 1).sum();
    let window = (text.len() as u64 - whole) + last_three as u64 + 5;
    assert_eq!(tail_entries(&file.path, window), entries[47..].to_vec());
    // No file, no tail.
    assert!(tail_entries(&file.path.with_extension("missing"), 1024).is_empty());
}

#[test]
fn the_tail_is_projected_as_an_opened_journal_is() {
    let mut entries: Vec<SessionEntry> = Vec::new();
    for text in ["one", "two", "three"] {
        let entry = new_entry(user(text), entries.last());
        entries.push(entry);
    }
    // A state entry shows nothing.
    let state = new_entry(custom("test.state", None), entries.last());
    entries.push(state);
    let file = fixture(journal_text(&entries).as_bytes());
    let texts: Vec<String> = crate::memory::Journal::tail_presentation(&file.path, u64::MAX)
        .iter()
        .filter_map(|m| match m {
            AgentMessage::User(user) => Some(user.content.text()),
            _ => None,
        })
        .collect();
    assert_eq!(texts, ["one", "two", "three"]);
}
