//! Black-box tests of automatic compaction (runtime-reference §8) through the real binary and
//! the mock provider, with a small-context model.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::{Value, json};
use zi_test_support::mock_llm::{MockLlm, MockUsage, Step};
use zi_test_support::zi_process::{AgentDir, RpcProcess, ZiProcessBuilder};

const WAIT: Duration = Duration::from_secs(30);
const SUMMARY: &str = "## Goal\nKeep going.\n## Progress\n### Done\nEarlier work.";

struct Setup {
    mock: MockLlm,
    agent: AgentDir,
    cwd: tempfile::TempDir,
}

async fn setup() -> Setup {
    let mock = MockLlm::start()
        .await
        .unwrap_or_else(|e| panic!("mock: {e}"));
    let agent = AgentDir::new();
    // Window 4000 → reserve 1000, trigger 3000, keep-recent 1500, summary max 500.
    agent.write(
        "models.json",
        &mock.models_json(
            "k",
            &[json!({"id": "small", "contextWindow": 4000, "maxTokens": 500})],
        ),
    );
    agent.write("settings.json", r#"{"retryEnabled": false}"#);
    let cwd = tempfile::tempdir().unwrap_or_else(|e| panic!("cwd: {e}"));
    Setup { mock, agent, cwd }
}

fn cwd_path(setup: &Setup) -> PathBuf {
    setup
        .cwd
        .path()
        .canonicalize()
        .unwrap_or_else(|e| panic!("canonicalize: {e}"))
}

async fn spawn(setup: &Setup, extra: &[&str]) -> RpcProcess {
    let mut zi = ZiProcessBuilder::new(env!("CARGO_BIN_EXE_zi"))
        .args(["--mode", "rpc", "--model", "mock/small", "--agent-dir"])
        .arg(setup.agent.path())
        .arg("--cwd")
        .arg(cwd_path(setup))
        .args(extra)
        .timeout(WAIT)
        .spawn_rpc()
        .await
        .unwrap_or_else(|e| panic!("spawn: {e}"));
    zi.ready().await;
    zi
}

/// A reply of `bytes` bytes reporting `total` tokens of usage.
fn reply(bytes: usize, total: u64) -> Step {
    Step::Reply {
        thinking: Vec::new(),
        text: vec!["y".repeat(bytes)],
        tool_calls: Vec::new(),
        finish_reason: "stop".to_string(),
        usage: Some(MockUsage {
            prompt_tokens: total.saturating_sub(bytes as u64 / 4),
            completion_tokens: bytes as u64 / 4,
            cached_tokens: 0,
        }),
    }
}

async fn prompt_and_wait(zi: &mut RpcProcess, id: &str, text: &str) {
    let response = zi
        .request(
            id,
            "session.prompt",
            Some(json!({"delivery": "direct", "text": text})),
        )
        .await;
    assert_eq!(response["ok"], true, "{response}");
    let idle = zi
        .request(&format!("{id}-idle"), "session.await_idle", None)
        .await;
    assert_eq!(idle["ok"], true, "{idle}");
}

fn events_of<'a>(zi: &'a RpcProcess, ty: &str) -> Vec<&'a Value> {
    zi.frames()
        .iter()
        .filter(|f| f["type"] == "session_event" && f["event"]["type"] == ty)
        .map(|f| &f["event"])
        .collect()
}

fn first_user_text(body: &Value) -> String {
    body["messages"]
        .as_array()
        .and_then(|m| m.iter().find(|m| m["role"] == "user"))
        .map(|m| match &m["content"] {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        })
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn threshold_compaction_summarises_before_the_next_prompt() {
    let setup = setup().await;
    let mut zi = spawn(&setup, &["--no-session"]).await;
    // Three exchanges of ~1000 tokens each; the last usage reports 3500 tokens (> trigger).
    setup.mock.push(reply(4000, 1100));
    prompt_and_wait(&mut zi, "p1", "first").await;
    setup.mock.push(reply(4000, 2200));
    prompt_and_wait(&mut zi, "p2", "second").await;
    setup.mock.push(reply(4000, 3500));
    prompt_and_wait(&mut zi, "p3", "third").await;
    assert!(events_of(&zi, "compaction_start").is_empty());

    // The fourth prompt compacts first: one summary request, then the real turn.
    setup.mock.push(Step::text(SUMMARY));
    setup.mock.push(Step::text("after compaction"));
    prompt_and_wait(&mut zi, "p4", "fourth").await;

    let starts = events_of(&zi, "compaction_start");
    assert_eq!(starts.len(), 1);
    assert_eq!(starts[0]["reason"], "threshold");
    let ends = events_of(&zi, "compaction_end");
    assert_eq!(ends.len(), 1);
    assert_eq!(ends[0]["outcome"]["type"], "completed", "{}", ends[0]);
    let result = &ends[0]["outcome"]["result"];
    assert_eq!(result["summary"], SUMMARY);
    assert!(result["estimatedTokensAfter"].as_u64() < result["tokensBefore"].as_u64());
    // entry_appended(compaction) precedes compaction_end; compaction precedes agent_start.
    let types = zi.event_types();
    let start_at = types
        .iter()
        .rposition(|t| t == "compaction_start")
        .unwrap_or(0);
    let tail: Vec<&str> = types[start_at..]
        .iter()
        .map(String::as_str)
        .take(4)
        .collect();
    assert_eq!(
        tail,
        [
            "compaction_start",
            "entry_appended",
            "compaction_end",
            "agent_start"
        ]
    );

    let requests = setup.mock.requests();
    assert_eq!(requests.len(), 5);
    let summary_request = &requests[3].body;
    assert!(
        summary_request["messages"][0]["content"]
            .as_str()
            .is_some_and(|s| s.starts_with("You are a context summarization assistant.")),
        "{summary_request}"
    );
    assert!(first_user_text(summary_request).contains("<conversation>"));
    let next = &requests[4].body;
    let first = first_user_text(next);
    assert!(
        first.contains("The conversation history before this point was compacted"),
        "{first}"
    );
    assert!(first.contains("Keep going."));

    // Pages show the summary item; the transcript restarts from the kept messages.
    let page = zi
        .request("m", "session.get_messages", Some(json!({"limit": 100})))
        .await;
    let messages = page["result"]["messages"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(
        messages.iter().any(|m| m["role"] == "compactionSummary"),
        "{page}"
    );
    assert!(!messages.iter().any(|m| m["content"][0]["text"] == "first"));
    assert_eq!(
        messages.last().map(|m| m["content"][0]["text"].clone()),
        Some(json!("after compaction"))
    );
    let state = zi.request("s", "session.get_state", None).await;
    assert_eq!(
        state["result"]["messageCount"].as_u64(),
        Some(messages.len() as u64)
    );
    assert_eq!(state["result"]["compaction"]["type"], "idle");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overflow_recovery_compacts_once_and_continues() {
    let setup = setup().await;
    let mut zi = spawn(&setup, &["--no-session"]).await;
    setup.mock.push(reply(4000, 1100));
    prompt_and_wait(&mut zi, "p1", "first").await;
    setup.mock.push(reply(4000, 2000));
    prompt_and_wait(&mut zi, "p2", "second").await;
    setup.mock.push(reply(4000, 2900));
    prompt_and_wait(&mut zi, "p2b", "second again").await;

    // The provider reports an overflow; zi compacts and retries the turn once.
    setup.mock.push(Step::HttpError {
        status: 400,
        message: "prompt is too long: 5000 tokens > 4000 maximum".to_string(),
    });
    setup.mock.push(Step::text(SUMMARY));
    setup.mock.push(Step::text("recovered"));
    prompt_and_wait(&mut zi, "p3", "third").await;

    let ends = events_of(&zi, "compaction_end");
    assert_eq!(ends.len(), 1);
    assert_eq!(ends[0]["reason"], "overflow");
    assert_eq!(ends[0]["outcome"]["type"], "completed", "{}", ends[0]);
    assert_eq!(events_of(&zi, "agent_settled").len(), 4);
    let compaction_entries: Vec<&Value> = events_of(&zi, "entry_appended")
        .into_iter()
        .filter(|e| e["entry"]["type"] == "compaction")
        .collect();
    assert_eq!(compaction_entries.len(), 1);
    assert!(compaction_entries[0]["entry"]["excludedFailureEntryId"].is_string());

    // The overflowed message is gone from pages; the recovered answer is last.
    let page = zi.request("m", "session.get_messages", None).await;
    let messages = page["result"]["messages"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(
        !messages.iter().any(|m| m["stopReason"] == "error"),
        "{page}"
    );
    assert_eq!(
        messages.last().map(|m| m["content"][0]["text"].clone()),
        Some(json!("recovered"))
    );
    let requests = setup.mock.requests();
    assert_eq!(requests.len(), 6);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_summary_fails_the_compaction_and_the_run_goes_on() {
    let setup = setup().await;
    let mut zi = spawn(&setup, &["--no-session"]).await;
    setup.mock.push(reply(4000, 1100));
    prompt_and_wait(&mut zi, "p1", "first").await;
    setup.mock.push(reply(4000, 2200));
    prompt_and_wait(&mut zi, "p1b", "again").await;
    setup.mock.push(reply(4000, 3500));
    prompt_and_wait(&mut zi, "p2", "second").await;
    setup.mock.push(Step::HttpError {
        status: 400,
        message: "bad summary request".to_string(),
    });
    setup.mock.push(Step::text("answered anyway"));
    prompt_and_wait(&mut zi, "p3", "third").await;
    let ends = events_of(&zi, "compaction_end");
    assert_eq!(ends.len(), 1);
    assert_eq!(ends[0]["outcome"]["type"], "failed");
    assert!(
        ends[0]["outcome"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("bad summary request"))
    );
    assert!(
        !events_of(&zi, "entry_appended")
            .iter()
            .any(|e| e["entry"]["type"] == "compaction")
    );
    let page = zi.request("m", "session.get_messages", None).await;
    assert_eq!(
        page["result"]["messages"]
            .as_array()
            .and_then(|m| m.last())
            .map(|m| m["content"][0]["text"].clone()),
        Some(json!("answered anyway"))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interrupting_a_compaction_cancels_it() {
    let setup = setup().await;
    let mut zi = spawn(&setup, &["--no-session"]).await;
    setup.mock.push(reply(4000, 1100));
    prompt_and_wait(&mut zi, "p1", "first").await;
    setup.mock.push(reply(4000, 2200));
    prompt_and_wait(&mut zi, "p1b", "again").await;
    setup.mock.push(reply(4000, 3500));
    prompt_and_wait(&mut zi, "p2", "second").await;
    setup.mock.push(Step::Hang(vec!["## Goal".to_string()]));
    zi.request(
        "p3",
        "session.prompt",
        Some(json!({"delivery": "direct", "text": "third"})),
    )
    .await;
    zi.event("compaction_start").await;
    let state = zi.request("s", "session.get_state", None).await;
    assert_eq!(state["result"]["activity"]["type"], "compacting", "{state}");
    assert_eq!(state["result"]["compaction"]["type"], "running");
    assert_eq!(state["result"]["compaction"]["reason"], "threshold");
    let interrupted = zi.request("i", "session.interrupt", None).await;
    assert_eq!(interrupted["ok"], true);
    let ends = events_of(&zi, "compaction_end");
    assert_eq!(ends.len(), 1);
    assert_eq!(ends[0]["outcome"]["type"], "cancelled");
    let state = zi.request("s2", "session.get_state", None).await;
    assert_eq!(state["result"]["activity"]["type"], "idle");
    assert_eq!(state["result"]["compaction"]["type"], "idle");
    assert_eq!(events_of(&zi, "agent_settled").len(), 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_compacted_session_resumes_with_the_same_pages() {
    let setup = setup().await;
    let mut zi = spawn(&setup, &[]).await;
    setup.mock.push(reply(4000, 1100));
    prompt_and_wait(&mut zi, "p1", "first").await;
    setup.mock.push(reply(4000, 2200));
    prompt_and_wait(&mut zi, "p1b", "again").await;
    setup.mock.push(reply(4000, 3500));
    prompt_and_wait(&mut zi, "p2", "second").await;
    setup.mock.push(Step::text(SUMMARY));
    setup.mock.push(Step::text("after"));
    prompt_and_wait(&mut zi, "p3", "third").await;
    let before = zi.request("m", "session.get_messages", None).await;
    let state_before = zi.request("s", "session.get_state", None).await;
    zi.close_stdin();
    let exited = zi.wait_exit(WAIT).await;
    assert_eq!(exited.code, Some(0), "{}", exited.stderr);

    let mut resumed = spawn(&setup, &["-c"]).await;
    let after = resumed.request("m", "session.get_messages", None).await;
    let state_after = resumed.request("s", "session.get_state", None).await;
    assert_eq!(before["result"], after["result"]);
    for key in ["sessionId", "messageCount", "contextUsage", "model"] {
        assert_eq!(
            state_before["result"][key], state_after["result"][key],
            "{key}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transient_summary_failure_is_retried() {
    let setup = setup().await;
    setup.agent.write(
        "settings.json",
        r#"{"retryEnabled": true, "retryBaseDelayMs": 20}"#,
    );
    let mut zi = spawn(&setup, &["--no-session"]).await;
    setup.mock.push(reply(4000, 1100));
    prompt_and_wait(&mut zi, "p1", "first").await;
    setup.mock.push(reply(4000, 2200));
    prompt_and_wait(&mut zi, "p1b", "again").await;
    setup.mock.push(reply(4000, 3500));
    prompt_and_wait(&mut zi, "p2", "second").await;
    setup.mock.push(Step::HttpError {
        status: 503,
        message: "service unavailable".to_string(),
    });
    setup.mock.push(Step::text(SUMMARY));
    setup.mock.push(Step::text("after retry"));
    prompt_and_wait(&mut zi, "p3", "third").await;

    let types = zi.event_types();
    let from = types
        .iter()
        .position(|t| t == "compaction_start")
        .unwrap_or(0);
    let sequence: Vec<&str> = types[from..]
        .iter()
        .map(String::as_str)
        .filter(|t| t.starts_with("compaction") || t.starts_with("summarization"))
        .collect();
    assert_eq!(
        sequence,
        [
            "compaction_start",
            "summarization_retry_scheduled",
            "summarization_retry_attempt_start",
            "summarization_retry_finished",
            "compaction_end"
        ]
    );
    let scheduled = events_of(&zi, "summarization_retry_scheduled");
    assert_eq!(scheduled[0]["attempt"], 1);
    assert_eq!(scheduled[0]["delayMs"], 20);
    assert_eq!(scheduled[0]["reason"], "threshold");
    let ends = events_of(&zi, "compaction_end");
    assert_eq!(ends[0]["outcome"]["type"], "completed", "{}", ends[0]);
}
