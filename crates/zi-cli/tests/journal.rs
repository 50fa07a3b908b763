//! Black-box tests of the session journal (docs/configuration.md#session-journals): the real
//! `zi --mode rpc` binary with persistent sessions under a temporary agent dir, against the mock
//! LLM. Covers crash safety under SIGKILL, resume (`-r FILE`) and continue (`-c`), torn-tail
//! repair, the 64 MiB bound, the pending-journal discipline and `--no-session`, and resuming a
//! session whose model is gone.

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use serde_json::{Value, json};
use zi_test_support::dirs::{AgentDir, temp_cwd};
use zi_test_support::harness::Harness;
use zi_test_support::mock_llm::start_mock;
use zi_test_support::mock_llm::{MockLlm, Step};
use zi_test_support::zi_command::ZiCommand;

const WAIT: Duration = Duration::from_secs(30);
const KEY: &str = "journal-test-key";
const SIGKILL: i32 = 9;
const NO_MODEL: &str = "No model selected. Use /login, then /model.";
const MAX_JOURNAL_BYTES: u64 = 64 * 1024 * 1024;

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

fn reasoning(ids: &[&str]) -> Vec<Value> {
    ids.iter()
        .map(|id| json!({"id": id, "reasoning": true}))
        .collect()
}

/// An agent dir whose models.json has provider `mock` serving reasoning models `ids`.
fn agent_with(mock: &MockLlm, ids: &[&str]) -> AgentDir {
    let agent = AgentDir::new();
    agent.write("models.json", &mock.models_json(KEY, &reasoning(ids)));
    agent
}

fn builder(agent: &AgentDir, cwd: &Path, extra: &[&str]) -> ZiCommand {
    ZiCommand::rpc(env!("CARGO_BIN_EXE_zi"), agent, cwd)
        .args(extra)
        .timeout(WAIT)
}

/// Spawns `zi --mode rpc --agent-dir A --cwd C EXTRA…` and waits for `ready`.
async fn spawn(agent: &AgentDir, cwd: &Path, extra: &[&str]) -> Harness {
    builder(agent, cwd, extra).spawn_rpc().await
}

fn path_arg(path: &Path) -> String {
    path.display().to_string()
}

fn seq(frame: &Value) -> u64 {
    frame["sequence"].as_u64().unwrap_or(0)
}

/// A direct prompt run to settlement.
async fn run_direct(p: &mut Harness, id: &str, text: &str) {
    let frame = p
        .request(
            id,
            "session.prompt",
            Some(json!({"delivery": "direct", "text": text})),
        )
        .await;
    assert_eq!(frame["ok"], true, "prompt {id} was not admitted: {frame}");
    p.event_after("agent_settled", seq(&frame)).await;
}

/// Closes stdin and expects a clean exit; returns stderr.
async fn exit_by_eof(mut p: Harness) -> String {
    p.close_stdin().await;
    let exited = p.wait_exit(WAIT).await;
    assert_eq!(exited.code, Some(0), "stderr: {}", exited.stderr);
    exited.stderr
}

fn session_id(state: &Value) -> String {
    state["sessionId"].as_str().unwrap_or_default().to_string()
}

fn encoded_cwd(cwd: &Path) -> String {
    let text = cwd.display().to_string();
    let trimmed = text.strip_prefix('/').unwrap_or(&text);
    format!("--{}--", trimmed.replace(['/', '\\', ':'], "-"))
}

fn default_journal(agent: &AgentDir, cwd: &Path, id: &str) -> PathBuf {
    agent
        .path()
        .join("sessions")
        .join(encoded_cwd(cwd))
        .join(format!("{id}.jsonl"))
}

fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return found;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            found.extend(files_under(&path));
        } else {
            found.push(path);
        }
    }
    found.sort();
    found
}

fn text_of(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter(|p| p["type"] == "text")
            .filter_map(|p| p["text"].as_str())
            .collect(),
        _ => String::new(),
    }
}

/// A journal file read back: its header, its complete entries, and a torn (unterminated) tail.
struct JournalText {
    header: Value,
    entries: Vec<Value>,
    torn: Option<String>,
    ends_with_newline: bool,
}

/// Parses a journal: every complete line must be JSON, and the entries must form a linear
/// `parentId` chain starting at `null`.
fn read_journal(path: &Path) -> JournalText {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    let text = String::from_utf8_lossy(&bytes).into_owned();
    let ends_with_newline = text.ends_with('\n');
    let mut pieces: Vec<&str> = text.split('\n').collect();
    let last = pieces.pop().unwrap_or_default();
    let torn = (!last.is_empty()).then(|| last.to_string());
    let mut lines = pieces.into_iter();
    let header: Value = serde_json::from_str(lines.next().unwrap_or_default())
        .unwrap_or_else(|e| panic!("header of {}: {e}\n{text}", path.display()));
    let mut entries: Vec<Value> = Vec::new();
    for (n, line) in lines.enumerate() {
        let entry: Value = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("line {} of {} ({e}): {line}", n + 2, path.display()));
        let expected = entries.last().map_or(Value::Null, |e| e["id"].clone());
        assert_eq!(
            entry["parentId"],
            expected,
            "linear chain broken at line {}",
            n + 2
        );
        assert!(
            entry["id"].as_str().is_some_and(|id| id.len() == 36),
            "entry id: {entry}"
        );
        entries.push(entry);
    }
    JournalText {
        header,
        entries,
        torn,
        ends_with_newline,
    }
}

/// The messages a journal's entries project to in presentation (no compaction, no custom
/// messages involved here): every `message` entry's message.
fn journal_messages(entries: &[Value]) -> Vec<Value> {
    entries
        .iter()
        .filter(|e| e["type"] == "message")
        .map(|e| e["message"].clone())
        .collect()
}

/// Every message of the session, following `nextStart`.
async fn all_messages(p: &mut Harness) -> Vec<Value> {
    let mut messages = Vec::new();
    let mut start = 0u64;
    let mut request = 0;
    loop {
        request += 1;
        let page = p
            .request_ok(
                &format!("gm{request}-{start}"),
                "session.get_messages",
                Some(json!({"start": start, "limit": 7})),
            )
            .await;
        let items = page["messages"].as_array().cloned().unwrap_or_default();
        messages.extend(items);
        match page["nextStart"].as_u64() {
            Some(next) => start = next,
            None => {
                assert_eq!(
                    page["total"].as_u64(),
                    Some(messages.len() as u64),
                    "{page}"
                );
                return messages;
            }
        }
    }
}

/// The state fields that survive a restart (activity must be idle).
fn durable_state(state: &Value) -> Value {
    assert_eq!(state["activity"], json!({"type": "idle"}), "{state}");
    json!({
        "sessionId": state["sessionId"],
        "model": state["model"],
        "thinkingLevel": state["thinkingLevel"],
        "supportedThinkingLevels": state["supportedThinkingLevels"],
        "messageCount": state["messageCount"],
        "workPlan": state["workPlan"],
        "contextUsage": state["contextUsage"],
        "queuedInputs": state["queuedInputs"],
    })
}

fn warnings(stderr: &str) -> Vec<&str> {
    stderr
        .lines()
        .filter(|l| l.starts_with("Warning:"))
        .collect()
}

/// A hand-written journal: header plus alternating user / assistant messages.
fn write_journal(path: &Path, id: &str, cwd: &Path, texts: &[&str]) {
    let mut lines = vec![json!({
        "type": "session", "version": 2, "id": id,
        "timestamp": "2026-01-01T00:00:00.000Z", "cwd": cwd.display().to_string(),
    })];
    let mut parent = Value::Null;
    for (n, text) in texts.iter().enumerate() {
        let message = if n % 2 == 0 {
            json!({"role": "user", "content": [{"type": "text", "text": text}], "timestamp": 1_000 + n})
        } else {
            json!({"role": "assistant", "content": [{"type": "text", "text": text}],
                   "api": "openai-completions", "provider": "mock", "model": "m1",
                   "usage": {"input": 1, "output": 1, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 2,
                             "cost": {"input": 0.0, "output": 0.0, "cacheRead": 0.0, "cacheWrite": 0.0, "total": 0.0}},
                   "stopReason": "stop", "timestamp": 1_000 + n})
        };
        let entry_id = uuid_like(id, n);
        lines.push(json!({
            "type": "message", "message": message,
            "id": entry_id, "parentId": parent, "timestamp": "2026-01-01T00:00:01.000Z",
        }));
        parent = json!(entry_id);
    }
    let mut text = String::new();
    for line in lines {
        text.push_str(&line.to_string());
        text.push('\n');
    }
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).unwrap_or_else(|e| panic!("{e}"));
    }
    std::fs::write(path, text).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
}

/// A deterministic 36-character id.
fn uuid_like(seed: &str, n: usize) -> String {
    let mut hex: String = seed
        .bytes()
        .map(|b| format!("{:02x}", b))
        .collect::<String>();
    hex.push_str(&format!("{n:08x}"));
    while hex.len() < 32 {
        hex.push('0');
    }
    let hex = &hex[hex.len() - 32..];
    format!(
        "{}-{}-4{}-8{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[13..16],
        &hex[17..20],
        &hex[20..32]
    )
}

fn set_mtime(path: &Path, time: SystemTime) {
    let file = std::fs::File::options()
        .write(true)
        .open(path)
        .unwrap_or_else(|e| panic!("open {}: {e}", path.display()));
    file.set_modified(time)
        .unwrap_or_else(|e| panic!("set mtime of {}: {e}", path.display()));
}

/// Runs one persistent session with `prompts` direct prompts (each answered `reply N`) and
/// exits by EOF; returns the session id and journal path.
async fn recorded_session(
    agent: &AgentDir,
    mock: &MockLlm,
    cwd: &Path,
    prompts: usize,
) -> (String, PathBuf) {
    let mut p = spawn(agent, cwd, &["--model", "mock/m1"]).await;
    let id = session_id(&p.ready());
    for n in 0..prompts {
        mock.push(Step::text(&format!("reply {n}")));
        run_direct(&mut p, &format!("p{n}"), &format!("prompt {n}")).await;
    }
    exit_by_eof(p).await;
    let path = default_journal(agent, cwd, &id);
    assert!(path.is_file(), "journal {} exists", path.display());
    (id, path)
}

// ---------------------------------------------------------------------------------------------
// 1. Crash safety
// ---------------------------------------------------------------------------------------------

const CRASH_PROMPTS: usize = 30;

/// Starts 30 queued prompts, SIGKILLs zi after `kill_after` `entry_appended` events, and checks
/// that every announced entry is on disk, byte-for-byte equal as JSON, and that the journal
/// resumes.
async fn crash_round(kill_after: usize) {
    let mock = start_mock().await;
    for n in 0..CRASH_PROMPTS {
        mock.push(Step::text(&format!("reply {n}")));
    }
    let agent = agent_with(&mock, &["m1"]);
    let cwd = temp_cwd();
    let mut p = spawn(&agent, &cwd.path, &["--model", "mock/m1"]).await;
    let id = session_id(&p.ready());
    // `continue` starts a run when idle and queues a follow-up while running.
    for n in 0..CRASH_PROMPTS {
        p.send(
            &format!("p{n}"),
            "session.prompt",
            Some(json!({"delivery": "continue", "text": format!("prompt {n}")})),
        )
        .await;
    }
    for _ in 0..kill_after {
        p.event("entry_appended").await;
    }
    p.signal(SIGKILL);
    let exited = p.wait_exit(WAIT).await;
    assert_eq!(exited.signal, Some(SIGKILL), "killed after {kill_after}");

    // Everything zi wrote to stdout before dying, including frames read after the kill.
    let announced: Vec<Value> = p
        .frames()
        .iter()
        .filter(|f| f["type"] == "session_event" && f["event"]["type"] == "entry_appended")
        .map(|f| f["event"]["entry"].clone())
        .collect();
    for f in p.frames() {
        if f["type"] == "response" {
            assert_eq!(f["ok"], true, "a prompt was refused: {f}");
        }
    }
    assert!(announced.len() >= kill_after);

    let path = default_journal(&agent, &cwd.path, &id);
    if !path.exists() {
        // Still pending: allowed only while no assistant message was announced.
        assert!(
            announced
                .iter()
                .all(|e| e["message"]["role"] != "assistant"),
            "an assistant message was announced but no journal exists (kill after {kill_after})"
        );
        return;
    }
    let journal = read_journal(&path);
    eprintln!(
        "kill after {kill_after}: {} announced, {} on disk, torn tail: {}",
        announced.len(),
        journal.entries.len(),
        journal.torn.is_some()
    );
    assert_eq!(journal.header["type"], "session");
    assert_eq!(journal.header["version"], 2);
    assert_eq!(journal.header["id"], id.as_str());
    assert_eq!(journal.header["cwd"], cwd.path.display().to_string());

    // Announced entries appear on disk, identical and in order.
    let mut cursor = 0;
    for entry in &announced {
        let found = journal.entries[cursor..]
            .iter()
            .position(|e| e == entry)
            .unwrap_or_else(|| {
                panic!(
                    "kill after {kill_after}: announced entry missing from (or out of order in) \
                     the journal: {entry}\n{} entries on disk, torn tail: {:?}",
                    journal.entries.len(),
                    journal.torn
                )
            });
        cursor += found + 1;
    }
    // Nothing on disk is out of order: user / assistant alternate.
    let roles: Vec<String> = journal_messages(&journal.entries)
        .iter()
        .map(|m| m["role"].as_str().unwrap_or_default().to_string())
        .collect();
    for (n, role) in roles.iter().enumerate() {
        let expected = if n % 2 == 0 { "user" } else { "assistant" };
        assert_eq!(role, expected, "message {n} of {roles:?}");
    }

    // Resume the crashed journal with `-r FILE`.
    let mock2 = start_mock().await;
    agent.write("models.json", &mock2.models_json(KEY, &reasoning(&["m1"])));
    let mut r = spawn(&agent, &cwd.path, &["-r", &path_arg(&path)]).await;
    let state = r.ready();
    assert_eq!(session_id(&state), id);
    assert_eq!(state["activity"], json!({"type": "idle"}));
    assert_eq!(state["model"]["model"]["id"], "m1", "{state}");
    let on_disk = journal_messages(&journal.entries);
    assert_eq!(state["messageCount"], json!(on_disk.len()), "{state}");
    assert_eq!(all_messages(&mut r).await, on_disk);

    // And it keeps going: a new prompt extends the same chain.
    mock2.push(Step::text("after the crash"));
    run_direct(&mut r, "after", "after the crash?").await;
    let stderr = exit_by_eof(r).await;
    if journal.torn.is_some() {
        assert!(
            !warnings(&stderr).is_empty(),
            "a repair is reported: {stderr}"
        );
    } else {
        assert!(warnings(&stderr).is_empty(), "{stderr}");
    }
    let after = read_journal(&path);
    assert!(after.torn.is_none() && after.ends_with_newline);
    assert_eq!(
        &after.entries[..journal.entries.len()],
        &journal.entries[..]
    );
    let messages = journal_messages(&after.entries);
    let tail: Vec<String> = messages[messages.len() - 2..]
        .iter()
        .map(|m| text_of(&m["content"]))
        .collect();
    assert_eq!(tail, ["after the crash?", "after the crash"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_after_the_first_announced_entry() {
    crash_round(1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_after_two_announced_entries() {
    crash_round(2).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_after_nine_announced_entries() {
    crash_round(9).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_after_twenty_six_announced_entries() {
    crash_round(26).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_after_forty_seven_announced_entries() {
    crash_round(47).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_at_a_random_point() {
    let nanos = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos() as usize);
    let kill_after = 2 + nanos % (2 * CRASH_PROMPTS - 2);
    eprintln!("killing after {kill_after} entry_appended events");
    crash_round(kill_after).await;
}

// ---------------------------------------------------------------------------------------------
// 2. Resume equivalence
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resume_and_continue_restore_the_same_session() {
    let mock = start_mock().await;
    let agent = agent_with(&mock, &["m1", "m2"]);
    let cwd = temp_cwd();
    let mut p = spawn(&agent, &cwd.path, &["--model", "mock/m1"]).await;
    let id = session_id(&p.ready());
    mock.push(Step::text("one"));
    run_direct(&mut p, "p1", "first").await;
    p.request_ok(
        "ms",
        "model.select",
        Some(json!({"provider": "mock", "id": "m2"})),
    )
    .await;
    let selected = p
        .request_ok("ts", "thinking.select", Some(json!({"level": "low"})))
        .await;
    assert_eq!(selected["effective"], "low");
    mock.push(Step::text("two"));
    run_direct(&mut p, "p2", "second").await;
    mock.push(Step::text("three"));
    run_direct(&mut p, "p3", "third").await;
    let before = p.request_ok("s1", "session.get_state", None).await;
    let before_state = durable_state(&before);
    assert_eq!(before["model"]["model"]["id"], "m2");
    assert_eq!(before["thinkingLevel"], "low");
    assert_eq!(before["messageCount"], 6);
    let before_messages = all_messages(&mut p).await;
    assert_eq!(before_messages.len(), 6);
    exit_by_eof(p).await;
    let path = default_journal(&agent, &cwd.path, &id);
    let journal_before = read_journal(&path);

    // The journal, not the settings, decides the model and thinking level of a resumed session.
    agent.write(
        "settings.json",
        r#"{"defaultProvider": "mock", "defaultModel": "m1", "defaultThinkingLevel": "high"}"#,
    );

    let mut r = spawn(&agent, &cwd.path, &["-r", &path_arg(&path)]).await;
    assert_eq!(durable_state(&r.ready()), before_state);
    let state = r.request_ok("s2", "session.get_state", None).await;
    assert_eq!(durable_state(&state), before_state);
    assert_eq!(all_messages(&mut r).await, before_messages);
    let stderr = exit_by_eof(r).await;
    assert!(warnings(&stderr).is_empty(), "{stderr}");
    // Resuming without changes appends nothing.
    assert_eq!(read_journal(&path).entries, journal_before.entries);

    // `-c` from the same cwd finds the same session.
    let mut c = spawn(&agent, &cwd.path, &["-c"]).await;
    assert_eq!(durable_state(&c.ready()), before_state);
    assert_eq!(all_messages(&mut c).await, before_messages);
    // And continues it: the provider sees the whole conversation, with the restored model.
    mock.push(Step::text("four"));
    run_direct(&mut c, "p4", "fourth").await;
    let body = mock.requests().pop().map(|r| r.body).unwrap_or_default();
    assert_eq!(body["model"], "m2", "{body}");
    let users: Vec<String> = body["messages"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .filter(|m| m["role"] == "user")
        .map(|m| text_of(&m["content"]))
        .collect();
    assert_eq!(users, ["first", "second", "third", "fourth"]);
    exit_by_eof(c).await;
    let journal_after = read_journal(&path);
    assert_eq!(
        &journal_after.entries[..journal_before.entries.len()],
        &journal_before.entries[..]
    );
    assert_eq!(journal_messages(&journal_after.entries).len(), 8);
    assert_eq!(
        files_under(&agent.path().join("sessions")),
        [path],
        "no second journal"
    );
}

// ---------------------------------------------------------------------------------------------
// 3. `--continue` selection
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn continue_picks_the_newest_session_of_the_cwd() {
    let mock = start_mock().await;
    let agent = agent_with(&mock, &["m1"]);
    let cwd = temp_cwd();
    let other_cwd = temp_cwd();
    let fresh_cwd = temp_cwd();
    let shared = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let dir = shared.path().join("shared-sessions");
    let base = SystemTime::now() - Duration::from_secs(3600);

    let make = |name: &str, cwd: &Path, age: u64, text: &str| {
        let path = dir.join(format!("{name}.jsonl"));
        let id = uuid_like(name, 0);
        write_journal(&path, &id, cwd, &[text, &format!("{text} reply")]);
        set_mtime(&path, base - Duration::from_secs(age));
        (id, path)
    };
    // Creation order, name order and mtime order all differ.
    let (_, _) = make("a-oldest", &cwd.path, 30, "oldest");
    let (newest_id, newest_path) = make("b-newest", &cwd.path, 10, "newest");
    let (_, _) = make("c-middle", &cwd.path, 20, "middle");
    let (other_id, _) = make("d-other", &other_cwd.path, 1, "other cwd");
    let before = files_under(&dir);

    let dir_arg = path_arg(&dir);
    let mut p = spawn(&agent, &cwd.path, &["--session-dir", &dir_arg, "-c"]).await;
    let state = p.ready();
    assert_eq!(session_id(&state), newest_id, "{state}");
    let texts: Vec<String> = all_messages(&mut p)
        .await
        .iter()
        .map(|m| text_of(&m["content"]))
        .collect();
    assert_eq!(texts, ["newest", "newest reply"]);
    exit_by_eof(p).await;

    // The other cwd's session is found from its own cwd.
    let p = spawn(&agent, &other_cwd.path, &["--session-dir", &dir_arg, "-c"]).await;
    assert_eq!(session_id(&p.ready()), other_id);
    exit_by_eof(p).await;

    // No session for this cwd: a new one, which stays pending.
    let p = spawn(&agent, &fresh_cwd.path, &["--session-dir", &dir_arg, "-c"]).await;
    let state = p.ready();
    let new_id = session_id(&state);
    assert_eq!(new_id.len(), 36, "{state}");
    assert!(
        ![newest_id.as_str(), other_id.as_str()].contains(&new_id.as_str()),
        "{state}"
    );
    assert_eq!(state["messageCount"], 0);
    exit_by_eof(p).await;
    assert_eq!(
        files_under(&dir),
        before,
        "an unused new session writes nothing"
    );

    // A session created now lands in the shared dir and becomes the newest for its cwd.
    let mut p = spawn(
        &agent,
        &cwd.path,
        &["--session-dir", &dir_arg, "--model", "mock/m1"],
    )
    .await;
    let created = session_id(&p.ready());
    mock.push(Step::text("brand new reply"));
    run_direct(&mut p, "p1", "brand new").await;
    exit_by_eof(p).await;
    assert!(dir.join(format!("{created}.jsonl")).is_file());
    let p = spawn(&agent, &cwd.path, &["--session-dir", &dir_arg, "-c"]).await;
    assert_eq!(session_id(&p.ready()), created);
    exit_by_eof(p).await;
    assert!(newest_path.is_file());

    // Without --session-dir, -c looks in the default dir, which has nothing for this cwd.
    let p = spawn(&agent, &cwd.path, &["-c"]).await;
    let state = p.ready();
    assert_ne!(session_id(&state), created);
    assert_eq!(state["messageCount"], 0);
    exit_by_eof(p).await;
}

/// Issue 23 C6: a cwd whose encoded name would exceed NAME_MAX gets a bounded session
/// directory; the run is saved, and `-c` and `session.list` find it again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cwd_too_long_for_a_directory_name_is_saved_continued_and_listed() {
    let mock = start_mock().await;
    let agent = agent_with(&mock, &["m1"]);
    let root = temp_cwd();
    let cwd = root
        .path
        .join("a".repeat(120))
        .join("b".repeat(120))
        .join("c".repeat(60));
    std::fs::create_dir_all(&cwd).unwrap();
    assert!(encoded_cwd(&cwd).len() > 255);
    let mut p = spawn(&agent, &cwd, &["--model", "mock/m1"]).await;
    let id = session_id(&p.ready());
    mock.push(Step::text("saved"));
    run_direct(&mut p, "p1", "first").await;
    let messages = all_messages(&mut p).await;
    assert_eq!(messages.len(), 2, "{messages:?}");
    assert_eq!(messages[1]["stopReason"], "stop", "{messages:?}");
    exit_by_eof(p).await;
    let journals = files_under(&agent.path().join("sessions"));
    assert_eq!(journals.len(), 1, "{journals:?}");
    let directory = journals[0].parent().unwrap().file_name().unwrap();
    assert!(directory.len() <= 255, "{directory:?}");
    assert_eq!(
        journals[0].file_name().unwrap(),
        format!("{id}.jsonl").as_str()
    );

    let mut c = spawn(&agent, &cwd, &["-c"]).await;
    assert_eq!(session_id(&c.ready()), id, "-c finds the session");
    let listed = c.request_ok("l1", "session.list", None).await;
    let sessions = listed["sessions"].as_array().unwrap();
    assert_eq!(sessions.len(), 1, "{listed}");
    assert_eq!(sessions[0]["sessionId"], id.as_str());
    assert_eq!(sessions[0]["cwd"], cwd.display().to_string());
    exit_by_eof(c).await;
}

// ---------------------------------------------------------------------------------------------
// 4. Torn-tail repair
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_torn_final_line_is_removed_on_resume() {
    let mock = start_mock().await;
    let agent = agent_with(&mock, &["m1"]);
    let cwd = temp_cwd();
    let (id, path) = recorded_session(&agent, &mock, &cwd.path, 1).await;
    let clean = read_journal(&path);
    let clean_bytes = std::fs::read(&path).unwrap_or_default();

    // Half of an entry line, as a crash in the middle of a write would leave it.
    let half = r#"{"type":"message","message":{"role":"user","content":[{"type":"text","te"#;
    let mut torn = clean_bytes.clone();
    torn.extend_from_slice(half.as_bytes());
    std::fs::write(&path, &torn).unwrap_or_else(|e| panic!("{e}"));

    let mut r = spawn(&agent, &cwd.path, &["-r", &path_arg(&path)]).await;
    let state = r.ready();
    assert_eq!(session_id(&state), id);
    assert_eq!(state["messageCount"], 2);
    // Repaired at open: the torn bytes are gone and the file ends with a newline.
    assert_eq!(std::fs::read(&path).unwrap_or_default(), clean_bytes);
    mock.push(Step::text("after repair"));
    run_direct(&mut r, "p2", "after repair?").await;
    let stderr = exit_by_eof(r).await;
    assert_eq!(warnings(&stderr).len(), 1, "one repair warning: {stderr}");

    let after = read_journal(&path);
    assert!(after.torn.is_none() && after.ends_with_newline);
    assert_eq!(&after.entries[..clean.entries.len()], &clean.entries[..]);
    let added = &after.entries[clean.entries.len()..];
    assert_eq!(added.len(), 2, "{added:?}");
    assert_eq!(text_of(&added[0]["message"]["content"]), "after repair?");
    assert_eq!(text_of(&added[1]["message"]["content"]), "after repair");
    assert_eq!(
        added[0]["parentId"],
        clean
            .entries
            .last()
            .map_or(Value::Null, |e| e["id"].clone())
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_complete_last_entry_missing_its_newline_is_kept() {
    let mock = start_mock().await;
    let agent = agent_with(&mock, &["m1"]);
    let cwd = temp_cwd();
    let (_, path) = recorded_session(&agent, &mock, &cwd.path, 1).await;
    let clean = read_journal(&path);
    let clean_bytes = std::fs::read(&path).unwrap_or_default();
    std::fs::write(&path, &clean_bytes[..clean_bytes.len() - 1]).unwrap_or_else(|e| panic!("{e}"));

    let mut r = spawn(&agent, &cwd.path, &["-r", &path_arg(&path)]).await;
    assert_eq!(r.ready()["messageCount"], 2);
    assert_eq!(
        std::fs::read(&path).unwrap_or_default(),
        clean_bytes,
        "the entry is kept and its newline added"
    );
    mock.push(Step::text("still fine"));
    run_direct(&mut r, "p2", "still fine?").await;
    let stderr = exit_by_eof(r).await;
    assert_eq!(warnings(&stderr).len(), 1, "one repair warning: {stderr}");
    let after = read_journal(&path);
    assert!(after.torn.is_none() && after.ends_with_newline);
    assert_eq!(&after.entries[..clean.entries.len()], &clean.entries[..]);
    assert_eq!(journal_messages(&after.entries).len(), 4);
}

// ---------------------------------------------------------------------------------------------
// 5. 64 MiB bound
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_journal_over_64_mib_is_refused_before_ready() {
    let mock = start_mock().await;
    let agent = agent_with(&mock, &["m1"]);
    let cwd = temp_cwd();
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let path = dir.path().join("huge.jsonl");
    write_journal(&path, &uuid_like("huge", 0), &cwd.path, &["hi", "hello"]);
    // Sparse padding past the bound: the size check comes before any parsing.
    std::fs::File::options()
        .write(true)
        .open(&path)
        .and_then(|f| f.set_len(MAX_JOURNAL_BYTES + 1))
        .unwrap_or_else(|e| panic!("{e}"));

    let finished = builder(&agent, &cwd.path, &["-r", &path_arg(&path)])
        .run_to_end(b"", WAIT)
        .await
        .unwrap_or_else(|e| panic!("run zi: {e}"));
    assert_eq!(finished.code, Some(1), "stderr: {}", finished.stderr_text());
    assert!(
        finished.stdout.is_empty(),
        "no ready frame: {}",
        finished.stdout_text()
    );
    let stderr = finished.stderr_text();
    assert!(
        stderr.contains(&path_arg(&path)),
        "names the file: {stderr}"
    );
    assert!(
        stderr.contains("exceeds") && stderr.contains(&MAX_JOURNAL_BYTES.to_string()),
        "explains the bound: {stderr}"
    );
    assert_eq!(
        std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0),
        MAX_JOURNAL_BYTES + 1,
        "the file is left alone"
    );
}

/// Runs `zi --mode rpc … -r FILE` with empty stdin and expects a startup failure.
async fn resume_fails(agent: &AgentDir, cwd: &Path, path: &Path) -> String {
    let finished = builder(agent, cwd, &["-r", &path_arg(path)])
        .run_to_end(b"", WAIT)
        .await
        .unwrap_or_else(|e| panic!("run zi: {e}"));
    assert_eq!(finished.code, Some(1), "stderr: {}", finished.stderr_text());
    assert!(
        finished.stdout.is_empty(),
        "no ready frame: {}",
        finished.stdout_text()
    );
    finished.stderr_text()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_or_corrupt_journals_are_refused_before_ready() {
    let mock = start_mock().await;
    let agent = agent_with(&mock, &["m1"]);
    let cwd = temp_cwd();
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));

    let missing = dir.path().join("missing.jsonl");
    let stderr = resume_fails(&agent, &cwd.path, &missing).await;
    assert!(stderr.contains(&path_arg(&missing)), "{stderr}");
    assert!(!missing.exists());

    // A malformed line in the middle is corruption, not a torn tail.
    let corrupt = dir.path().join("corrupt.jsonl");
    write_journal(
        &corrupt,
        &uuid_like("corrupt", 0),
        &cwd.path,
        &["a", "b", "c", "d"],
    );
    let text = std::fs::read_to_string(&corrupt).unwrap_or_default();
    let mut lines: Vec<&str> = text.lines().collect();
    lines[2] = r#"{"type":"message","message":"#;
    let broken = format!("{}\n", lines.join("\n"));
    std::fs::write(&corrupt, &broken).unwrap_or_else(|e| panic!("{e}"));
    let stderr = resume_fails(&agent, &cwd.path, &corrupt).await;
    assert!(stderr.contains(&path_arg(&corrupt)), "{stderr}");
    assert_eq!(
        std::fs::read_to_string(&corrupt).unwrap_or_default(),
        broken,
        "a corrupt journal is not modified"
    );

    // A journal whose working directory is gone cannot be resumed.
    let gone = temp_cwd();
    let orphan = dir.path().join("orphan.jsonl");
    write_journal(&orphan, &uuid_like("orphan", 0), &gone.path, &["a", "b"]);
    drop(gone);
    let stderr = resume_fails(&agent, &cwd.path, &orphan).await;
    assert!(!stderr.trim().is_empty());
}

// ---------------------------------------------------------------------------------------------
// 6. Pending journals and --no-session
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_session_never_writes_a_journal() {
    let mock = start_mock().await;
    let agent = agent_with(&mock, &["m1", "m2"]);
    let cwd = temp_cwd();
    let unused = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let session_dir = unused.path().join("never");
    let mut p = spawn(
        &agent,
        &cwd.path,
        &[
            "--no-session",
            "--session-dir",
            &path_arg(&session_dir),
            "--model",
            "mock/m1",
        ],
    )
    .await;
    let id = session_id(&p.ready());
    assert_eq!(id.len(), 36, "still a UUID");
    mock.push(Step::text("one"));
    run_direct(&mut p, "p1", "first").await;
    p.request_ok(
        "ms",
        "model.select",
        Some(json!({"provider": "mock", "id": "m2"})),
    )
    .await;
    p.request_ok("ts", "thinking.select", Some(json!({"level": "high"})))
        .await;
    mock.push(Step::text("two"));
    run_direct(&mut p, "p2", "second").await;
    assert_eq!(
        p.request_ok("s", "session.get_state", None).await["messageCount"],
        4
    );
    exit_by_eof(p).await;
    assert_eq!(
        files_under(&agent.path().join("sessions")),
        Vec::<PathBuf>::new()
    );
    assert!(!session_dir.exists(), "--session-dir is not created either");
    assert!(!cwd.path.join(".zi").exists());
    let stray: Vec<PathBuf> = files_under(agent.path())
        .into_iter()
        .filter(|f| f.extension().is_some_and(|e| e == "jsonl"))
        .collect();
    assert!(stray.is_empty(), "{stray:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_session_writes_nothing_before_its_first_assistant_message() {
    // No models at all: prompts fail before any provider call.
    let agent = AgentDir::new();
    let cwd = temp_cwd();
    let sessions = agent.path().join("sessions");
    let mut p = spawn(&agent, &cwd.path, &[]).await;
    let state = p.ready();
    assert_eq!(state["model"], json!({"type": "unselected"}));
    let frame = p
        .request(
            "p1",
            "session.prompt",
            Some(json!({"delivery": "direct", "text": "hello?"})),
        )
        .await;
    assert_eq!(frame["ok"], false, "{frame}");
    assert_eq!(frame["error"]["message"], NO_MODEL, "{frame}");
    // Queued input alone does not need a model and writes nothing either.
    p.request_ok(
        "q1",
        "session.prompt",
        Some(json!({"delivery": "follow_up", "text": "later"})),
    )
    .await;
    assert_eq!(files_under(&sessions), Vec::<PathBuf>::new());
    exit_by_eof(p).await;
    assert_eq!(files_under(&sessions), Vec::<PathBuf>::new());

    // With a model: selecting a thinking level journals only in memory until the first reply.
    let mock = start_mock().await;
    agent.write("models.json", &mock.models_json(KEY, &reasoning(&["m1"])));
    let mut p = spawn(&agent, &cwd.path, &["--model", "mock/m1"]).await;
    let id = session_id(&p.ready());
    p.request_ok("ts", "thinking.select", Some(json!({"level": "high"})))
        .await;
    assert_eq!(files_under(&sessions), Vec::<PathBuf>::new());
    mock.push(Step::text("first reply"));
    run_direct(&mut p, "p1", "first").await;
    let path = default_journal(&agent, &cwd.path, &id);
    assert_eq!(files_under(&sessions), std::slice::from_ref(&path));
    let mode = std::fs::metadata(&path)
        .map(|m| m.permissions().mode() & 0o777)
        .unwrap_or_default();
    assert_eq!(mode, 0o600, "journal mode {mode:o}");
    // The buffered entries were written with it, in order.
    let journal = read_journal(&path);
    let types: Vec<&str> = journal
        .entries
        .iter()
        .map(|e| e["type"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(types.last(), Some(&"message"));
    assert!(types.contains(&"thinking_level_change"), "{types:?}");
    let last_thinking = journal
        .entries
        .iter()
        .rev()
        .find(|e| e["type"] == "thinking_level_change")
        .cloned()
        .unwrap_or_default();
    assert_eq!(last_thinking["thinkingLevel"], "high");
    exit_by_eof(p).await;
}

// ---------------------------------------------------------------------------------------------
// 7. Saved model unavailable
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resuming_with_the_saved_model_gone_falls_back_with_a_warning() {
    let mock = start_mock().await;
    let agent = agent_with(&mock, &["m1"]);
    let cwd = temp_cwd();
    let (id, path) = recorded_session(&agent, &mock, &cwd.path, 1).await;

    // m1 disappears from models.json; m2 takes its place.
    agent.write("models.json", &mock.models_json(KEY, &reasoning(&["m2"])));
    let mut r = spawn(&agent, &cwd.path, &["-r", &path_arg(&path)]).await;
    let state = r.ready();
    assert_eq!(session_id(&state), id);
    assert_eq!(state["model"]["type"], "selected", "{state}");
    assert_eq!(state["model"]["model"]["id"], "m2", "{state}");
    assert_eq!(state["messageCount"], 2);
    // The fallback model answers the next prompt.
    mock.push(Step::text("from m2"));
    run_direct(&mut r, "p2", "who?").await;
    let body = mock.requests().pop().map(|r| r.body).unwrap_or_default();
    assert_eq!(body["model"], "m2");
    let stderr = exit_by_eof(r).await;
    let found = warnings(&stderr);
    assert!(
        found.iter().any(|w| w.contains("mock/m1")),
        "a Warning: line names the saved model: {stderr}"
    );

    // No models at all: RPC still starts, without a model.
    std::fs::remove_file(agent.path().join("models.json")).unwrap_or_else(|e| panic!("{e}"));
    std::fs::remove_file(agent.path().join("settings.json")).ok();
    let mut r = spawn(&agent, &cwd.path, &["-r", &path_arg(&path)]).await;
    let state = r.ready();
    assert_eq!(state["model"], json!({"type": "unselected"}), "{state}");
    assert_eq!(state["messageCount"], 4);
    let frame = r
        .request(
            "p3",
            "session.prompt",
            Some(json!({"delivery": "direct", "text": "anyone?"})),
        )
        .await;
    assert_eq!(frame["error"]["message"], NO_MODEL, "{frame}");
    let stderr = exit_by_eof(r).await;
    assert!(
        warnings(&stderr).iter().any(|w| w.contains("mock/m2")),
        "the saved model (now m2) is named: {stderr}"
    );
}

// ---------------------------------------------------------------------------------------------
// Write failures: a full disk, an uncreatable journal (docs/configuration.md#session-journals)
// ---------------------------------------------------------------------------------------------
//
// A full disk is simulated with the file-size limit of the zi process (RLIMIT_FSIZE, changed
// from outside with prlimit): a write past it is cut short and the next one fails with EFBIG,
// exactly like ENOSPC in the middle of a line. zi catches SIGXFSZ, so the limit cannot kill it.

/// Sets the soft file-size limit of process `pid` (`None`: unlimited).
fn limit_file_size(pid: u32, bytes: Option<u64>) {
    let limit = libc::rlimit {
        rlim_cur: bytes.unwrap_or(libc::RLIM_INFINITY),
        rlim_max: libc::RLIM_INFINITY,
    };
    // SAFETY: prlimit reads `limit` and writes nothing (the old-limit pointer is null).
    let result = unsafe {
        libc::prlimit(
            pid as libc::pid_t,
            libc::RLIMIT_FSIZE,
            &limit,
            std::ptr::null_mut(),
        )
    };
    assert_eq!(result, 0, "prlimit: {}", std::io::Error::last_os_error());
}

/// Spawns zi with `--session-dir DIR`; returns it and the path its journal will have.
async fn spawn_in_session_dir(
    agent: &AgentDir,
    cwd: &Path,
    dir: &Path,
    extra: &[&str],
) -> (Harness, PathBuf) {
    let dir_arg = path_arg(dir);
    let mut args = vec!["--model", "mock/m1", "--session-dir", &dir_arg];
    args.extend(extra);
    let p = spawn(agent, cwd, &args).await;
    let journal = dir.join(format!("{}.jsonl", session_id(&p.ready())));
    (p, journal)
}

/// The session events among the frames received since frame `start`.
fn events_since(p: &Harness, start: usize) -> Vec<Value> {
    p.frames()[start..]
        .iter()
        .filter(|f| f["type"] == "session_event")
        .map(|f| f["event"].clone())
        .collect()
}

fn file_len(path: &Path) -> u64 {
    std::fs::metadata(path).map_or(0, |m| m.len())
}

/// One direct prompt with a completion id, to settlement. Returns the `await_idle` result's
/// `completion` and the session events of the run.
async fn prompt_to_completion(p: &mut Harness, id: &str, text: &str) -> (Value, Vec<Value>) {
    let start = p.frames().len();
    let admitted = p
        .request(
            &format!("{id}-prompt"),
            "session.prompt",
            Some(json!({"delivery": "direct", "text": text, "completionId": id})),
        )
        .await;
    assert_eq!(
        admitted["ok"], true,
        "prompt {id} was not admitted: {admitted}"
    );
    let idle = p
        .request_ok(
            &format!("{id}-idle"),
            "session.await_idle",
            Some(json!({"completionId": id})),
        )
        .await;
    (idle["completion"].clone(), events_since(p, start))
}

/// The entries the client was told about (`entry_appended`).
fn acknowledged(events: &[Value]) -> Vec<Value> {
    events
        .iter()
        .filter(|e| e["type"] == "entry_appended")
        .map(|e| e["entry"].clone())
        .collect()
}

/// The events of a run stopped by a journal failure: the run ends with an assistant
/// `message_end` (stop reason `error`) naming the journal, which is also the completion; no
/// `entry_appended` announces anything that was not saved.
fn assert_failed_visibly(completion: &Value, events: &[Value], journal: &Path) {
    assert_eq!(completion["stopReason"], "error", "{completion}");
    let error = completion["error"].as_str().unwrap_or_default();
    assert!(
        error.contains(&journal.display().to_string()),
        "the error names the journal {}: {error}",
        journal.display()
    );
    assert!(error.contains("journal"), "{error}");
    let last_end = events
        .iter()
        .rev()
        .find(|e| e["type"] == "message_end")
        .unwrap_or_else(|| panic!("no message_end: {events:?}"));
    assert_eq!(last_end["message"]["role"], "assistant", "{last_end}");
    assert_eq!(last_end["message"]["stopReason"], "error", "{last_end}");
    assert_eq!(last_end["message"]["errorMessage"].as_str(), Some(error));
    let agent_end = events
        .iter()
        .find(|e| e["type"] == "agent_end")
        .unwrap_or_else(|| panic!("no agent_end: {events:?}"));
    assert_eq!(agent_end["willRetry"], false, "{agent_end}");
    let ended = agent_end["messages"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(
        ended.last().map(|m| &m["errorMessage"]),
        Some(&json!(error)),
        "agent_end ends with the failure: {agent_end}"
    );
    // Every message_start has its message_end.
    let count = |ty: &str| events.iter().filter(|e| e["type"] == ty).count();
    assert_eq!(count("message_start"), count("message_end"), "{events:?}");
    assert_eq!(count("agent_settled"), 1);
}

/// The journal's `message` entries are exactly the acknowledged ones, in order.
fn assert_journal_holds(journal: &Path, acknowledged: &[Value]) {
    let on_disk = read_journal(journal);
    assert_eq!(
        on_disk.torn,
        None,
        "no partial line in {}",
        journal.display()
    );
    assert!(on_disk.ends_with_newline);
    let saved: Vec<&Value> = on_disk
        .entries
        .iter()
        .filter(|e| e["type"] == "message")
        .collect();
    let announced: Vec<&Value> = acknowledged
        .iter()
        .filter(|e| e["type"] == "message")
        .collect();
    assert_eq!(
        saved, announced,
        "the journal holds every acknowledged entry"
    );
}

fn texts(messages: &[Value]) -> Vec<String> {
    messages.iter().map(|m| text_of(&m["content"])).collect()
}

/// A bash call that waits for `gate` to exist, then prints 20,000 bytes.
fn gated_output_call(gate: &Path) -> Step {
    let command = format!(
        "while [ ! -e {} ]; do sleep 0.05; done; head -c 20000 /dev/zero | tr '\\0' y",
        gate.display()
    );
    Step::tool_call("call-1", "bash", json!({"command": command}))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_fails_the_run_visibly_and_never_tears_the_journal() {
    let mock = start_mock().await;
    let agent = agent_with(&mock, &["m1"]);
    let cwd = temp_cwd();
    let sessions = cwd.path.join("sessions");
    let (mut p, journal) = spawn_in_session_dir(&agent, &cwd.path, &sessions, &[]).await;
    let mut announced = Vec::new();

    mock.push(Step::text("first reply"));
    let (completion, events) = prompt_to_completion(&mut p, "c1", "one").await;
    assert_eq!(completion["stopReason"], "stop", "{completion}");
    announced.extend(acknowledged(&events));

    // The disk fills up in the middle of the next line (the user message).
    let before = std::fs::read(&journal).unwrap_or_else(|e| panic!("{e}"));
    limit_file_size(p.pid(), Some(before.len() as u64 + 40));
    let (completion, events) = prompt_to_completion(&mut p, "c2", "two").await;
    assert_failed_visibly(&completion, &events, &journal);
    assert!(acknowledged(&events).is_empty(), "{events:?}");
    assert_eq!(
        std::fs::read(&journal).unwrap_or_default(),
        before,
        "the failed append left the file exactly as it was"
    );

    // Space comes back: the next prompt is saved after the last complete line.
    limit_file_size(p.pid(), None);
    mock.push(Step::text("third reply"));
    let (completion, events) = prompt_to_completion(&mut p, "c3", "three").await;
    assert_eq!(completion["stopReason"], "stop", "{completion}");
    assert_eq!(completion["text"], "third reply");
    announced.extend(acknowledged(&events));

    // The disk fills up in the middle of a long assistant reply: the user message is saved,
    // the streamed reply ends as an error naming the journal.
    limit_file_size(p.pid(), Some(file_len(&journal) + 2_000));
    mock.push(Step::Bytes {
        total_bytes: 20_000,
        delta_bytes: 1_000,
    });
    let (completion, events) = prompt_to_completion(&mut p, "c4", "four").await;
    assert_failed_visibly(&completion, &events, &journal);
    assert_eq!(completion["text"].as_str().map(str::len), Some(20_000));
    let saved = acknowledged(&events);
    assert_eq!(saved.len(), 1, "only the user message was saved: {saved:?}");
    assert_eq!(saved[0]["message"]["role"], "user");
    announced.extend(saved);
    assert_journal_holds(&journal, &announced);

    // The disk fills up while a tool runs: its result is not saved.
    limit_file_size(p.pid(), None);
    let gate = cwd.path.join("gate");
    mock.push(gated_output_call(&gate));
    p.send(
        "c5-prompt",
        "session.prompt",
        Some(json!({"delivery": "direct", "text": "five", "completionId": "c5"})),
    )
    .await;
    let start = p.frames().len();
    p.event("tool_execution_start").await;
    limit_file_size(p.pid(), Some(file_len(&journal) + 100));
    std::fs::write(&gate, b"").unwrap_or_else(|e| panic!("{e}"));
    let idle = p
        .request_ok(
            "c5-idle",
            "session.await_idle",
            Some(json!({"completionId": "c5"})),
        )
        .await;
    let events = events_since(&p, start);
    assert_failed_visibly(&idle["completion"], &events, &journal);
    let unsaved_result = events
        .iter()
        .find(|e| e["type"] == "message_end" && e["message"]["role"] == "toolResult")
        .unwrap_or_else(|| panic!("the tool result is ended: {events:?}"));
    assert!(unsaved_result["message"]["toolCallId"] == "call-1");
    assert!(
        acknowledged(&events)
            .iter()
            .all(|e| e["message"]["role"] != "toolResult"),
        "the tool result was not saved"
    );
    announced.extend(
        p.frames()
            .iter()
            .filter(|f| f["type"] == "session_event" && f["event"]["type"] == "entry_appended")
            .map(|f| f["event"]["entry"].clone())
            .filter(|e| !announced.contains(e))
            .collect::<Vec<_>>(),
    );
    assert_journal_holds(&journal, &announced);
    limit_file_size(p.pid(), None);
    exit_by_eof(p).await;

    // `-c` reopens the session with every acknowledged entry and keeps appending.
    let (mut p, continued) = spawn_in_session_dir(&agent, &cwd.path, &sessions, &["-c"]).await;
    assert_eq!(continued, journal, "-c picked the session");
    let expected: Vec<Value> = announced
        .iter()
        .filter(|e| e["type"] == "message")
        .map(|e| e["message"].clone())
        .collect();
    assert_eq!(all_messages(&mut p).await, expected);
    assert_eq!(
        texts(&expected)[..5],
        ["one", "first reply", "three", "third reply", "four"]
    );
    mock.push(Step::text("sixth reply"));
    let (completion, _) = prompt_to_completion(&mut p, "c6", "six").await;
    assert_eq!(completion["stopReason"], "stop", "{completion}");
    exit_by_eof(p).await;
    assert!(read_journal(&journal).torn.is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_journal_that_cannot_be_created_fails_visibly_leaves_no_file_and_is_retried() {
    let mock = start_mock().await;
    let agent = agent_with(&mock, &["m1"]);
    let cwd = temp_cwd();
    let sessions = cwd.path.join("sessions");
    std::fs::create_dir_all(&sessions).unwrap_or_else(|e| panic!("{e}"));
    let (mut p, journal) = spawn_in_session_dir(&agent, &cwd.path, &sessions, &[]).await;

    // The disk is full when the journal is created (at the first assistant message).
    limit_file_size(p.pid(), Some(10));
    mock.push(Step::text("lost reply"));
    let (completion, events) = prompt_to_completion(&mut p, "c1", "one").await;
    assert_failed_visibly(&completion, &events, &journal);
    assert_eq!(
        completion["text"], "lost reply",
        "the streamed text is reported"
    );
    assert_eq!(
        files_under(&sessions),
        Vec::<PathBuf>::new(),
        "no empty or partial journal is left"
    );
    let pending = acknowledged(&events);

    // A later prompt creates it: the pending user message and the new exchange are saved.
    limit_file_size(p.pid(), None);
    mock.push(Step::text("second reply"));
    let (completion, events) = prompt_to_completion(&mut p, "c2", "two").await;
    assert_eq!(completion["stopReason"], "stop", "{completion}");
    let mut announced = pending;
    announced.extend(acknowledged(&events));
    assert_journal_holds(&journal, &announced);
    assert_eq!(
        texts(&journal_messages(&read_journal(&journal).entries)),
        ["one", "two", "second reply"]
    );
    exit_by_eof(p).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_dir_that_is_a_file_fails_every_run_visibly() {
    let mock = start_mock().await;
    let agent = agent_with(&mock, &["m1"]);
    let cwd = temp_cwd();
    let blocker = cwd.path.join("not-a-dir");
    std::fs::write(&blocker, b"a file").unwrap_or_else(|e| panic!("{e}"));
    for session_dir in [blocker.clone(), blocker.join("below")] {
        let (mut p, journal) = spawn_in_session_dir(&agent, &cwd.path, &session_dir, &[]).await;
        for n in 0..2 {
            mock.push(Step::text("unsaved reply"));
            let (completion, events) =
                prompt_to_completion(&mut p, &format!("c{n}"), "hello").await;
            assert_failed_visibly(&completion, &events, &journal);
        }
        let stderr = exit_by_eof(p).await;
        assert!(stderr.contains("journal"), "{stderr}");
        assert_eq!(std::fs::read(&blocker).unwrap_or_default(), b"a file");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn print_mode_reports_a_journal_that_cannot_be_written() {
    let mock = start_mock().await;
    mock.push(Step::text("unsaved reply"));
    let agent = agent_with(&mock, &["m1"]);
    let cwd = temp_cwd();
    let blocker = cwd.path.join("not-a-dir");
    std::fs::write(&blocker, b"a file").unwrap_or_else(|e| panic!("{e}"));
    let finished = ZiCommand::new(env!("CARGO_BIN_EXE_zi"))
        .args(["--agent-dir"])
        .arg(agent.path())
        .arg("--cwd")
        .arg(&cwd.path)
        .args(["--model", "mock/m1", "--session-dir"])
        .arg(&blocker)
        .args(["-p", "hello"])
        .current_dir(&cwd.path)
        .run_to_end(b"", WAIT)
        .await
        .unwrap_or_else(|e| panic!("run zi -p: {e}"));
    let stderr = finished.stderr_text();
    assert_eq!(finished.code, Some(1), "stderr: {stderr}");
    assert!(
        stderr.contains("session journal could not be written")
            && stderr.contains(&blocker.display().to_string()),
        "{stderr}"
    );
}
