//! Black-box tests of the session journal (docs/configuration.md#session-journals): the real
//! `zi --mode rpc` binary with persistent sessions under a temporary agent dir, against the mock
//! LLM. Covers crash safety under SIGKILL, resume (`-r FILE`) and continue (`-c`), torn-tail
//! repair, the 64 MiB bound, the pending-journal discipline and `--no-session`, and resuming a
//! session whose model is gone.

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use serde_json::{Value, json};
use zi_test_support::dirs::{AgentDir, TempCwd, temp_cwd};
use zi_test_support::harness::Harness;
use zi_test_support::mock_llm::start_mock;
use zi_test_support::mock_llm::{MockLlm, Step};
use zi_test_support::zi_command::ZiCommand;

use crate::wire_support::text_of;

mod crash;
mod damaged;
mod resume;
mod write_failures;

const WAIT: Duration = Duration::from_secs(30);
const KEY: &str = "journal-test-key";
const NO_MODEL: &str = "No model selected. Use /login, then /model.";

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

/// The mock LLM, an agent dir on it serving reasoning models `ids`, and a cwd.
async fn scene(ids: &[&str]) -> (MockLlm, AgentDir, TempCwd) {
    let mock = start_mock().await;
    let agent = agent_with(&mock, ids);
    (mock, agent, temp_cwd())
}

/// Selects `mock/m2`, then the thinking `level`; returns what `thinking.select` answered.
async fn select_m2_thinking(p: &mut Harness, level: &str) -> Value {
    p.request_ok(
        "ms",
        "model.select",
        Some(json!({"provider": "mock", "id": "m2"})),
    )
    .await;
    p.request_ok("ts", "thinking.select", Some(json!({"level": level})))
        .await
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
        p.prompt_and_settle(&format!("p{n}"), &format!("prompt {n}"))
            .await;
    }
    p.exit_by_eof().await;
    let path = default_journal(agent, cwd, &id);
    assert!(path.is_file(), "journal {} exists", path.display());
    (id, path)
}

fn texts(messages: &[Value]) -> Vec<String> {
    messages.iter().map(|m| text_of(&m["content"])).collect()
}
