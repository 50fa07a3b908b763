//! Black-box tests of a Zi RPC v1 session: the real `zi --mode rpc` binary against the mock LLM.
//!
//! Covers the event order of a direct prompt (docs/rpc.md#event-order, with zi's delta-only
//! `message_update`), the state snapshot while streaming (docs/rpc.md#the-state-snapshot),
//! completion watches (docs/rpc.md#completion-watches), interruption
//! (docs/rpc.md#sessioninterrupt), the input queues (docs/architecture.md#the-run), provider
//! failures as assistant messages, models and thinking levels (docs/rpc.md#modellist,
//! docs/providers.md#thinking-levels), secrecy of provider configuration, and the session journal
//! (docs/configuration.md#session-journals).

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};
use zi_test_support::dirs::{AgentDir, temp_cwd};
use zi_test_support::harness::Harness;
use zi_test_support::mock_llm::start_mock;
use zi_test_support::mock_llm::{MockLlm, MockUsage, Step};
use zi_test_support::zi_command::ZiCommand;

const WAIT: Duration = Duration::from_secs(30);
const KEY: &str = "test-key-abc";

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

/// An agent dir whose models.json has provider `mock` (key [`KEY`]) serving `models`.
fn agent_with(mock: &MockLlm, models: &[Value]) -> AgentDir {
    let agent = AgentDir::new();
    agent.write("models.json", &mock.models_json(KEY, models));
    agent
}

fn reasoning_m1() -> Vec<Value> {
    vec![json!({"id": "m1", "reasoning": true})]
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

/// `--no-session --model mock/m1`.
async fn spawn_m1(agent: &AgentDir, cwd: &Path) -> Harness {
    spawn(agent, cwd, &["--no-session", "--model", "mock/m1"]).await
}

fn seq(frame: &Value) -> u64 {
    frame["sequence"].as_u64().unwrap_or(0)
}

/// Waits for a `message_update` carrying an assistant event of type `ty` after `after`.
async fn update_after(p: &mut Harness, ty: &str, after: u64) -> Value {
    let what = format!("a message_update {ty:?} after sequence {after}");
    let ty = ty.to_string();
    p.wait_for(&what, move |f| {
        f["type"] == "session_event"
            && f["event"]["type"] == "message_update"
            && f["event"]["assistantMessageEvent"]["type"] == ty.as_str()
            && seq(f) > after
    })
    .await
}

/// The session events (the `event` objects) with `after < sequence <= through`, in order.
fn events_between(p: &Harness, after: u64, through: u64) -> Vec<Value> {
    p.frames()
        .iter()
        .filter(|f| f["type"] == "session_event" && seq(f) > after && seq(f) <= through)
        .map(|f| f["event"].clone())
        .collect()
}

fn prompt_params(delivery: &str, text: &str, completion_id: Option<&str>) -> Value {
    let mut params = json!({"delivery": delivery, "text": text});
    if let Some(id) = completion_id {
        params["completionId"] = json!(id);
    }
    params
}

/// Sends a prompt, asserts it was admitted, and returns the response frame.
async fn prompt_ok(
    p: &mut Harness,
    id: &str,
    delivery: &str,
    text: &str,
    completion_id: Option<&str>,
) -> Value {
    let frame = p
        .request(
            id,
            "session.prompt",
            Some(prompt_params(delivery, text, completion_id)),
        )
        .await;
    assert_eq!(frame["type"], "response", "{frame}");
    assert_eq!(frame["ok"], true, "prompt {id} was not admitted: {frame}");
    frame
}

/// A direct prompt run to settlement: returns its events (response excluded) through
/// `agent_settled`.
async fn run_direct(p: &mut Harness, id: &str, text: &str) -> Vec<Value> {
    let response = prompt_ok(p, id, "direct", text, None).await;
    let settled = p.event_after("agent_settled", seq(&response)).await;
    events_between(p, seq(&response), seq(&settled))
}

/// Asserts a failed response with `code` and exactly `message`.
fn assert_failure(frame: &Value, code: &str, message: &str) {
    assert_eq!(frame["type"], "response", "{frame}");
    assert_eq!(frame["ok"], false, "{frame}");
    assert_eq!(frame["error"]["code"], code, "{frame}");
    assert_eq!(frame["error"]["message"], message, "{frame}");
}

/// Concatenated `text` parts of a message `content` (a string or an array of parts).
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

/// The `message` of the last `message_end` event with this role.
fn last_message_end(events: &[Value], role: &str) -> Value {
    events
        .iter()
        .rev()
        .find(|e| e["type"] == "message_end" && e["message"]["role"] == role)
        .map(|e| e["message"].clone())
        .unwrap_or_else(|| panic!("no message_end with role {role} in {events:#?}"))
}

/// Event labels: `message_*:role` for messages, `message_update:<assistant event>` for updates.
fn labels(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .map(|e| {
            let ty = e["type"].as_str().unwrap_or_default();
            match ty {
                "message_start" | "message_end" => {
                    format!("{ty}:{}", e["message"]["role"].as_str().unwrap_or("?"))
                }
                "message_update" => format!(
                    "message_update:{}",
                    e["assistantMessageEvent"]["type"].as_str().unwrap_or("?")
                ),
                _ => ty.to_string(),
            }
        })
        .collect()
}

fn read_json(path: &Path) -> Value {
    let text =
        std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("parse {}: {e}\n{text}", path.display()))
}

/// The last user message text of a recorded chat-completions request body.
fn last_user_text(body: &Value) -> String {
    body["messages"]
        .as_array()
        .and_then(|m| m.iter().rev().find(|m| m["role"] == "user"))
        .map(|m| text_of(&m["content"]))
        .unwrap_or_default()
}

fn user_texts(body: &Value) -> Vec<String> {
    body["messages"]
        .as_array()
        .map(|m| {
            m.iter()
                .filter(|m| m["role"] == "user")
                .map(|m| text_of(&m["content"]))
                .collect()
        })
        .unwrap_or_default()
}

// ---------------------------------------------------------------------------------------------
// 1. Event order of a direct prompt
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn direct_prompt_emits_the_typical_event_order() {
    let mock = start_mock().await;
    mock.push(Step::Reply {
        thinking: vec![],
        text: vec!["Hel".into(), "lo ".into(), "world".into()],
        tool_calls: vec![],
        finish_reason: "stop".into(),
        usage: Some(MockUsage {
            prompt_tokens: 50,
            completion_tokens: 7,
            cached_tokens: 20,
        }),
    });
    let agent = agent_with(&mock, &reasoning_m1());
    let cwd = temp_cwd();
    let mut p = spawn_m1(&agent, &cwd.path).await;

    let response = prompt_ok(&mut p, "p1", "direct", "Say hello", None).await;
    assert_eq!(response["method"], "session.prompt");
    assert_eq!(
        response["result"],
        json!({"delivery": "direct"}),
        "no completionRevision without a completionId"
    );
    let settled = p.event_after("agent_settled", 0).await;

    // zi writes the prompt's response before the first event of the run it starts.
    let first_event = p
        .frames()
        .iter()
        .find(|f| f["type"] == "session_event")
        .cloned()
        .unwrap_or_default();
    assert!(
        seq(&first_event) > seq(&response),
        "the run's first event {first_event} precedes the prompt response {response}"
    );
    let events = events_between(&p, 0, seq(&settled));

    // Collapse the run of text deltas, then compare the order exactly.
    let mut collapsed: Vec<String> = Vec::new();
    for label in labels(&events) {
        if label == "message_update:text_delta"
            && collapsed.last().map(String::as_str) == Some("message_update:text_delta")
        {
            continue;
        }
        collapsed.push(label);
    }
    let expected = [
        "agent_start",
        "turn_start",
        "message_start:user",
        "entry_appended",
        "message_end:user",
        "message_start:assistant",
        "message_update:start",
        "message_update:text_start",
        "message_update:text_delta",
        "message_update:text_end",
        "message_update:done",
        "entry_appended",
        "message_end:assistant",
        "turn_end",
        "agent_end",
        "agent_settled",
    ];
    assert_eq!(collapsed, expected, "event order; all events: {events:#?}");

    // message_update is delta-only.
    let mut deltas = String::new();
    for event in events.iter().filter(|e| e["type"] == "message_update") {
        let keys: Vec<&String> = event
            .as_object()
            .map(|o| o.keys().collect())
            .unwrap_or_default();
        assert_eq!(
            keys,
            ["type", "assistantMessageEvent"],
            "message_update carries only its assistant event: {event}"
        );
        let inner = &event["assistantMessageEvent"];
        assert!(
            inner.get("partial").is_none(),
            "no partial snapshot: {event}"
        );
        match inner["type"].as_str().unwrap_or_default() {
            "text_delta" => {
                assert_eq!(inner["contentIndex"], 0, "{event}");
                deltas.push_str(inner["delta"].as_str().unwrap_or_default());
            }
            "text_start" => assert_eq!(inner["contentIndex"], 0, "{event}"),
            "text_end" => {
                assert_eq!(inner["contentIndex"], 0, "{event}");
                assert_eq!(inner["content"], "Hello world", "{event}");
            }
            "done" => {
                assert_eq!(inner["reason"], "stop", "{event}");
                assert_eq!(inner["message"]["role"], "assistant", "{event}");
                assert_eq!(text_of(&inner["message"]["content"]), "Hello world");
            }
            _ => {}
        }
    }
    assert_eq!(deltas, "Hello world", "the deltas concatenate to the reply");

    // The user message and its journal entry.
    let user = last_message_end(&events, "user");
    assert_eq!(text_of(&user["content"]), "Say hello");
    assert!(user["timestamp"].is_number(), "{user}");
    let entries: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "entry_appended")
        .map(|e| &e["entry"])
        .collect();
    assert_eq!(entries.len(), 2);
    assert_eq!(entries[0]["type"], "message");
    assert_eq!(
        entries[0]["message"], user,
        "the entry carries the committed message"
    );
    for entry in &entries {
        assert!(entry["id"].is_string(), "{entry}");
        assert!(entry["timestamp"].is_string(), "{entry}");
        assert!(entry.get("parentId").is_some(), "{entry}");
    }
    assert_eq!(entries[1]["parentId"], entries[0]["id"], "linear chain");

    // The assistant message, with the mock's usage.
    let assistant = last_message_end(&events, "assistant");
    assert_eq!(entries[1]["message"], assistant);
    assert_eq!(text_of(&assistant["content"]), "Hello world");
    assert_eq!(assistant["stopReason"], "stop");
    assert_eq!(assistant["provider"], "mock");
    assert_eq!(assistant["model"], "m1");
    assert_eq!(assistant["api"], "openai-completions");
    assert!(assistant.get("errorMessage").is_none(), "{assistant}");
    assert_eq!(assistant["usage"]["input"], 30, "{assistant}");
    assert_eq!(assistant["usage"]["output"], 7, "{assistant}");
    assert_eq!(assistant["usage"]["cacheRead"], 20, "{assistant}");
    assert_eq!(assistant["usage"]["cacheWrite"], 0, "{assistant}");
    assert_eq!(assistant["usage"]["totalTokens"], 57, "{assistant}");
    assert!(
        assistant["usage"]["cost"]["total"].is_number(),
        "{assistant}"
    );

    let turn_end = events
        .iter()
        .find(|e| e["type"] == "turn_end")
        .cloned()
        .unwrap_or_default();
    assert_eq!(turn_end["message"], assistant);
    assert_eq!(turn_end["toolResults"], json!([]));
    let agent_end = events
        .iter()
        .find(|e| e["type"] == "agent_end")
        .cloned()
        .unwrap_or_default();
    assert_eq!(agent_end["willRetry"], false, "{agent_end}");
    assert!(agent_end["messages"].is_array(), "{agent_end}");

    // What the provider received.
    let requests = mock.wait_for_requests(1, WAIT).await;
    assert_eq!(requests.len(), 1);
    let request = &requests[0];
    assert_eq!(request.path, "/v1/chat/completions");
    assert_eq!(
        request.header("authorization"),
        Some(format!("Bearer {KEY}").as_str())
    );
    assert_eq!(request.body["model"], "m1");
    assert_eq!(request.body["stream"], true);
    let messages = request.body["messages"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(
        messages[0]["role"] == "system" || messages[0]["role"] == "developer",
        "the first message is the system prompt: {:?}",
        messages.first()
    );
    let system = text_of(&messages[0]["content"]);
    assert!(
        system.starts_with("You are an expert coding assistant operating inside Zi."),
        "{system}"
    );
    assert!(
        system.contains(&format!(
            "Current working directory: {}",
            cwd.path.display()
        )),
        "{system}"
    );
    assert_eq!(last_user_text(&request.body), "Say hello");

    let state = p.request_ok("s1", "session.get_state", None).await;
    assert_eq!(state["activity"], json!({"type": "idle"}));
    assert_eq!(state["messageCount"], 2);
    assert!(state.get("streamingMessage").is_none(), "{state}");

    p.close_stdin().await;
    let exited = p.wait_exit(WAIT).await;
    assert_eq!(exited.code, Some(0), "stderr: {}", exited.stderr);
}

// ---------------------------------------------------------------------------------------------
// 2. State while streaming
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_state_shows_the_streaming_message_only_while_running() {
    let mock = start_mock().await;
    mock.push(Step::Hang(vec!["par".into(), "tial".into()]));
    let agent = agent_with(&mock, &reasoning_m1());
    let cwd = temp_cwd();
    let mut p = spawn_m1(&agent, &cwd.path).await;

    let response = prompt_ok(&mut p, "p1", "direct", "stream please", None).await;
    // Both deltas have been applied once the second one is announced.
    let first = update_after(&mut p, "text_delta", seq(&response)).await;
    update_after(&mut p, "text_delta", seq(&first)).await;

    let state = p.request_ok("s1", "session.get_state", None).await;
    assert_eq!(state["activity"], json!({"type": "running"}), "{state}");
    let streaming = &state["streamingMessage"];
    assert_eq!(streaming["role"], "assistant", "{state}");
    assert_eq!(text_of(&streaming["content"]), "partial", "{state}");
    assert_eq!(
        state["messageCount"], 1,
        "only the user message is committed: {state}"
    );

    p.request_ok("i1", "session.interrupt", None).await;
    let state = p.request_ok("s2", "session.get_state", None).await;
    assert_eq!(state["activity"], json!({"type": "idle"}), "{state}");
    assert!(
        state.get("streamingMessage").is_none(),
        "streamingMessage must be absent when idle: {state}"
    );
    assert_eq!(state["messageCount"], 2, "{state}");
}

// ---------------------------------------------------------------------------------------------
// 3. Completion watches
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn completion_watches_clip_advance_and_invalidate() {
    let mock = start_mock().await;
    let agent = agent_with(&mock, &reasoning_m1());
    agent.write("settings.json", r#"{"retryEnabled": false}"#);
    let cwd = temp_cwd();
    let mut p = spawn_m1(&agent, &cwd.path).await;

    // A 60 KiB answer: clipped to 50 KiB.
    mock.push(Step::Bytes {
        total_bytes: 61_440,
        delta_bytes: 4_096,
    });
    let response = prompt_ok(&mut p, "p1", "direct", "big", Some("cycle-1")).await;
    assert_eq!(
        response["result"],
        json!({"delivery": "direct", "completionRevision": 1})
    );
    let idle = p
        .request_ok(
            "w1",
            "session.await_idle",
            Some(json!({"completionId": "cycle-1"})),
        )
        .await;
    assert_eq!(idle["completionRevision"], 1, "{}", preview(&idle));
    assert_eq!(idle["messageCount"], 2, "{}", preview(&idle));
    let completion = &idle["completion"];
    let text = completion["text"].as_str().unwrap_or_default();
    assert_eq!(text.len(), 51_200);
    assert!(text.bytes().all(|b| b == b'x'));
    assert_eq!(completion["stopReason"], "stop");
    assert_eq!(completion["originalBytes"], 61_440);
    assert_eq!(completion["omittedBytes"], 10_240);
    assert!(completion.get("error").is_none(), "{}", preview(&idle));

    // A continue with the same id joins the cycle: revision 2. Hold the run.
    mock.push(Step::Hang(vec!["second".into()]));
    let response = prompt_ok(&mut p, "p2", "continue", "more", Some("cycle-1")).await;
    assert_eq!(
        response["result"],
        json!({"delivery": "continue", "completionRevision": 2})
    );
    update_after(&mut p, "text_delta", seq(&response)).await;

    // A direct prompt while running is rejected and leaves the watch alone.
    let rejected = p
        .request(
            "p3",
            "session.prompt",
            Some(prompt_params("direct", "again", Some("cycle-1"))),
        )
        .await;
    assert_failure(
        &rejected,
        "operation_failed",
        "streamingBehavior is required while the agent is running",
    );

    // The watch settles when the interrupted run does.
    p.send(
        "w2",
        "session.await_idle",
        Some(json!({"completionId": "cycle-1"})),
    )
    .await;
    assert_eq!(
        p.request_ok("i1", "session.interrupt", None).await,
        json!({})
    );
    let idle = p.response("w2").await;
    assert_eq!(idle["ok"], true, "{idle}");
    let idle = &idle["result"];
    assert_eq!(idle["completionRevision"], 2, "{idle}");
    assert_eq!(idle["messageCount"], 4, "{idle}");
    assert_eq!(idle["completion"]["stopReason"], "aborted", "{idle}");
    assert!(idle["completion"]["error"].is_string(), "{idle}");

    // A no-id direct prompt invalidates the watch.
    mock.push(Step::text("unrelated"));
    let response = prompt_ok(&mut p, "p4", "direct", "unrelated", None).await;
    assert_eq!(response["result"], json!({"delivery": "direct"}));
    p.event_after("agent_settled", seq(&response)).await;
    let stale = p
        .request(
            "w3",
            "session.await_idle",
            Some(json!({"completionId": "cycle-1"})),
        )
        .await;
    assert_failure(
        &stale,
        "operation_failed",
        "Completion watch is not active: cycle-1",
    );
    // A plain idle wait still answers {}.
    assert_eq!(
        p.request_ok("w4", "session.await_idle", None).await,
        json!({})
    );

    // A provider error is reported as the completion's stop reason and error text.
    mock.push(Step::HttpError {
        status: 500,
        message: "upstream exploded".into(),
    });
    let response = prompt_ok(&mut p, "p5", "direct", "fail", Some("err-1")).await;
    assert_eq!(
        response["result"],
        json!({"delivery": "direct", "completionRevision": 1})
    );
    let idle = p
        .request_ok(
            "w5",
            "session.await_idle",
            Some(json!({"completionId": "err-1"})),
        )
        .await;
    assert_eq!(idle["completionRevision"], 1, "{idle}");
    assert_eq!(idle["completion"]["stopReason"], "error", "{idle}");
    let error = idle["completion"]["error"].as_str().unwrap_or_default();
    assert!(error.contains("upstream exploded"), "{idle}");
    assert_eq!(idle["completion"]["text"], "", "{idle}");
    assert_eq!(idle["completion"]["omittedBytes"], 0, "{idle}");
}

fn preview(value: &Value) -> String {
    let text = value.to_string();
    if text.len() > 400 {
        format!("{}… ({} bytes)", &text[..400], text.len())
    } else {
        text
    }
}

// ---------------------------------------------------------------------------------------------
// 4. Interrupt
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interrupt_aborts_the_stream_and_answers_after_settlement() {
    let mock = start_mock().await;
    mock.push(Step::Hang(vec!["Work".into(), "ing".into()]));
    let agent = agent_with(&mock, &reasoning_m1());
    let cwd = temp_cwd();
    let mut p = spawn_m1(&agent, &cwd.path).await;

    let response = prompt_ok(&mut p, "p1", "direct", "long task", None).await;
    let first = update_after(&mut p, "text_delta", seq(&response)).await;
    update_after(&mut p, "text_delta", seq(&first)).await;

    let interrupted = p.request("i1", "session.interrupt", None).await;
    assert_eq!(interrupted["ok"], true, "{interrupted}");
    assert_eq!(interrupted["result"], json!({}));
    let settled = p
        .frames()
        .iter()
        .find(|f| f["type"] == "session_event" && f["event"]["type"] == "agent_settled")
        .cloned()
        .unwrap_or_else(|| panic!("the interrupt answered before the run settled"));
    assert!(
        seq(&settled) < seq(&interrupted),
        "agent_settled {settled} must precede the interrupt response {interrupted}"
    );

    let events = events_between(&p, seq(&response), seq(&settled));
    let assistant = last_message_end(&events, "assistant");
    assert_eq!(assistant["stopReason"], "aborted", "{assistant}");
    assert!(
        assistant["errorMessage"]
            .as_str()
            .is_some_and(|m| !m.is_empty()),
        "{assistant}"
    );
    assert_eq!(
        events
            .iter()
            .filter(|e| e["type"] == "agent_settled")
            .count(),
        1
    );

    let page = p.request_ok("m1", "session.get_messages", None).await;
    assert_eq!(page["total"], 2, "{page}");
    assert_eq!(page["nextStart"], Value::Null);
    assert_eq!(page["messages"][1]["role"], "assistant");
    assert_eq!(page["messages"][1]["stopReason"], "aborted");

    assert_eq!(
        mock.wait_for_disconnects(1, WAIT).await,
        1,
        "the provider request was dropped"
    );
    let state = p.request_ok("s1", "session.get_state", None).await;
    assert_eq!(state["activity"], json!({"type": "idle"}));

    // An interrupt while idle answers at once.
    assert_eq!(
        p.request_ok("i2", "session.interrupt", None).await,
        json!({})
    );
}

// ---------------------------------------------------------------------------------------------
// 5. Queues
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn follow_up_while_idle_waits_for_the_next_prompt() {
    let mock = start_mock().await;
    let agent = agent_with(&mock, &reasoning_m1());
    let cwd = temp_cwd();
    let mut p = spawn_m1(&agent, &cwd.path).await;

    let queued = prompt_ok(&mut p, "f1", "follow_up", "later", None).await;
    assert_eq!(queued["result"], json!({"delivery": "follow_up"}));
    let update = p.event_after("queue_update", 0).await;
    assert_eq!(update["event"]["steering"], json!([]));
    assert_eq!(update["event"]["followUp"][0]["text"], "later", "{update}");
    assert_eq!(update["event"]["followUp"][0]["delivery"], "followUp");

    let state = p.request_ok("s1", "session.get_state", None).await;
    assert_eq!(
        state["activity"],
        json!({"type": "idle"}),
        "a queued input does not wake the session"
    );
    let follow_up = &state["queuedInputs"]["followUp"];
    assert_eq!(follow_up.as_array().map(Vec::len), Some(1), "{state}");
    assert_eq!(follow_up[0]["text"], "later");
    assert_eq!(follow_up[0]["delivery"], "followUp");
    assert_eq!(follow_up[0]["images"], json!([]));
    assert_eq!(follow_up[0]["bytes"], 5);
    assert!(follow_up[0]["id"].is_number());
    assert_eq!(state["queuedInputs"]["steering"], json!([]));
    assert_eq!(mock.requests().len(), 0, "no provider call while idle");
    assert!(
        !p.event_types().iter().any(|t| t == "agent_start"),
        "no run started: {:?}",
        p.event_types()
    );

    // The next direct prompt consumes it when the run would otherwise stop.
    mock.push(Step::text("first answer"));
    mock.push(Step::text("second answer"));
    let events = run_direct(&mut p, "d1", "now").await;
    let labels = labels(&events);
    let removed = events
        .iter()
        .position(|e| e["type"] == "queue_update" && e["followUp"] == json!([]))
        .unwrap_or_else(|| panic!("no queue_update removing the follow-up: {labels:?}"));
    let delivered = events
        .iter()
        .position(|e| {
            e["type"] == "message_start"
                && e["message"]["role"] == "user"
                && text_of(&e["message"]["content"]) == "later"
        })
        .unwrap_or_else(|| panic!("the follow-up was not delivered: {labels:?}"));
    let first_answer_end = events
        .iter()
        .position(|e| {
            e["type"] == "message_end"
                && e["message"]["role"] == "assistant"
                && text_of(&e["message"]["content"]) == "first answer"
        })
        .unwrap_or_else(|| panic!("no first answer: {labels:?}"));
    assert!(
        removed < delivered,
        "queue_update precedes the input's message_start: {labels:?}"
    );
    assert!(
        first_answer_end < delivered,
        "follow-up comes after the run would stop: {labels:?}"
    );
    assert_eq!(
        labels.iter().filter(|l| *l == "agent_start").count(),
        1,
        "{labels:?}"
    );
    assert_eq!(
        text_of(&last_message_end(&events, "assistant")["content"]),
        "second answer"
    );

    let requests = mock.wait_for_requests(2, WAIT).await;
    assert_eq!(requests.len(), 2);
    assert_eq!(user_texts(&requests[0].body), ["now"]);
    assert_eq!(user_texts(&requests[1].body), ["now", "later"]);
    let state = p.request_ok("s2", "session.get_state", None).await;
    assert_eq!(
        state["queuedInputs"],
        json!({"steering": [], "followUp": []})
    );
    assert_eq!(state["messageCount"], 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn steer_during_a_run_is_delivered_at_the_next_turn() {
    let mock = start_mock().await;
    let agent = agent_with(&mock, &reasoning_m1());
    let cwd = temp_cwd();
    let mut p = spawn_m1(&agent, &cwd.path).await;

    // The first turn's tool waits for a file the test creates only after the steer was
    // queued, so the steer always arrives while the first turn is busy (a long streamed reply
    // raced: a fast zi could settle before the harness got to send the steer).
    let go = cwd.path.join("go");
    let command = format!(
        "while [ ! -e '{}' ]; do sleep 0.02; done; echo released",
        go.display()
    );
    mock.push(Step::tool_call(
        "call-1",
        "bash",
        json!({"command": command}),
    ));
    mock.push(Step::text("steered answer"));
    let response = prompt_ok(&mut p, "d1", "direct", "long", None).await;
    p.event_after("tool_execution_start", seq(&response)).await;
    let steer = prompt_ok(&mut p, "s1", "steer", "steer now", None).await;
    assert_eq!(steer["result"], json!({"delivery": "steer"}));
    std::fs::write(&go, b"").unwrap_or_else(|e| panic!("create {}: {e}", go.display()));
    let settled = p.event_after("agent_settled", seq(&response)).await;
    let events = events_between(&p, seq(&response), seq(&settled));
    let labels: Vec<String> = labels(&events)
        .into_iter()
        .filter(|l| l != "message_update:text_delta")
        .collect();

    let queued = events
        .iter()
        .position(|e| e["type"] == "queue_update" && e["steering"][0]["text"] == "steer now")
        .unwrap_or_else(|| panic!("no queue_update listing the steer: {labels:?}"));
    assert_eq!(events[queued]["steering"][0]["delivery"], "steer");
    let first_end = events
        .iter()
        .position(|e| e["type"] == "tool_execution_end")
        .unwrap_or_else(|| panic!("no tool_execution_end: {labels:?}"));
    let delivered = events
        .iter()
        .position(|e| {
            e["type"] == "message_start"
                && e["message"]["role"] == "user"
                && text_of(&e["message"]["content"]) == "steer now"
        })
        .unwrap_or_else(|| panic!("the steer was not delivered in this run: {labels:?}"));
    let removed = events
        .iter()
        .position(|e| e["type"] == "queue_update" && e["steering"] == json!([]))
        .unwrap_or_else(|| panic!("no queue_update removing the steer: {labels:?}"));
    let second_start = events
        .iter()
        .rposition(|e| e["type"] == "message_start" && e["message"]["role"] == "assistant")
        .unwrap_or_default();
    assert!(
        queued < first_end,
        "the steer was queued during the first turn: {labels:?}"
    );
    assert!(first_end < removed && removed < delivered, "{labels:?}");
    assert!(delivered < second_start, "{labels:?}");
    assert_eq!(
        labels.iter().filter(|l| *l == "turn_start").count(),
        2,
        "{labels:?}"
    );
    assert_eq!(
        labels.iter().filter(|l| *l == "agent_start").count(),
        1,
        "{labels:?}"
    );
    assert_eq!(
        text_of(&last_message_end(&events, "assistant")["content"]),
        "steered answer"
    );

    let requests = mock.wait_for_requests(2, WAIT).await;
    assert_eq!(requests.len(), 2);
    assert_eq!(user_texts(&requests[0].body), ["long"]);
    assert_eq!(user_texts(&requests[1].body), ["long", "steer now"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queue_capacity_is_32_inputs() {
    let mock = start_mock().await;
    let agent = agent_with(&mock, &reasoning_m1());
    let cwd = temp_cwd();
    let mut p = spawn_m1(&agent, &cwd.path).await;

    for i in 0..32 {
        let delivery = if i % 2 == 0 { "steer" } else { "follow_up" };
        prompt_ok(
            &mut p,
            &format!("q{i}"),
            delivery,
            &format!("input {i}"),
            None,
        )
        .await;
    }
    let rejected = p
        .request(
            "q32",
            "session.prompt",
            Some(prompt_params("follow_up", "one too many", None)),
        )
        .await;
    assert_failure(
        &rejected,
        "operation_failed",
        "Queue capacity exceeded (maximum 32 messages or 8 MiB).",
    );
    let rejected = p
        .request(
            "q33",
            "session.prompt",
            Some(prompt_params("steer", "one too many", None)),
        )
        .await;
    assert_failure(
        &rejected,
        "operation_failed",
        "Queue capacity exceeded (maximum 32 messages or 8 MiB).",
    );
    let state = p.request_ok("s1", "session.get_state", None).await;
    assert_eq!(
        state["queuedInputs"]["steering"].as_array().map(Vec::len),
        Some(16)
    );
    assert_eq!(
        state["queuedInputs"]["followUp"].as_array().map(Vec::len),
        Some(16)
    );
    assert_eq!(state["queuedInputs"]["steering"][0]["text"], "input 0");
    assert_eq!(state["queuedInputs"]["followUp"][15]["text"], "input 31");
}

// ---------------------------------------------------------------------------------------------
// 6. Provider errors are assistant messages
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn provider_errors_become_error_messages_and_zi_keeps_serving() {
    let mock = start_mock().await;
    let agent = agent_with(&mock, &reasoning_m1());
    // Retry policy is not under test here: no automatic retry of the 429.
    agent.write("settings.json", r#"{"retryEnabled": false}"#);
    let cwd = temp_cwd();
    let mut p = spawn_m1(&agent, &cwd.path).await;

    mock.push(Step::HttpError {
        status: 429,
        message: "Rate limit reached for m1".into(),
    });
    let events = run_direct(&mut p, "e1", "first").await;
    let assistant = last_message_end(&events, "assistant");
    assert_eq!(assistant["stopReason"], "error", "{assistant}");
    let message = assistant["errorMessage"].as_str().unwrap_or_default();
    assert!(message.contains("429"), "{assistant}");
    assert!(message.contains("Rate limit reached for m1"), "{assistant}");
    let agent_end = events
        .iter()
        .find(|e| e["type"] == "agent_end")
        .cloned()
        .unwrap_or_default();
    assert_eq!(agent_end["willRetry"], false);
    assert!(labels(&events).contains(&"turn_end".to_string()));

    mock.push(Step::MidStreamError {
        text: vec!["half an ".into()],
        message: "backend overloaded mid-stream".into(),
    });
    let events = run_direct(&mut p, "e2", "second").await;
    let assistant = last_message_end(&events, "assistant");
    assert_eq!(assistant["stopReason"], "error", "{assistant}");
    assert!(
        assistant["errorMessage"]
            .as_str()
            .is_some_and(|m| m.contains("backend overloaded mid-stream")),
        "{assistant}"
    );

    mock.push(Step::Truncated(vec!["cut ".into(), "off".into()]));
    let events = run_direct(&mut p, "e3", "third").await;
    let assistant = last_message_end(&events, "assistant");
    assert_eq!(assistant["stopReason"], "error", "{assistant}");
    assert!(
        assistant["errorMessage"]
            .as_str()
            .is_some_and(|m| !m.is_empty()),
        "{assistant}"
    );

    mock.push(Step::text("all good"));
    let events = run_direct(&mut p, "e4", "fourth").await;
    let assistant = last_message_end(&events, "assistant");
    assert_eq!(assistant["stopReason"], "stop");
    assert_eq!(text_of(&assistant["content"]), "all good");

    let page = p.request_ok("m1", "session.get_messages", None).await;
    assert_eq!(page["total"], 8, "{}", preview(&page));
    let stops: Vec<&Value> = page["messages"]
        .as_array()
        .map(|m| {
            m.iter()
                .filter(|m| m["role"] == "assistant")
                .map(|m| &m["stopReason"])
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(
        stops,
        [
            &json!("error"),
            &json!("error"),
            &json!("error"),
            &json!("stop")
        ]
    );
    assert_eq!(mock.requests().len(), 4, "no automatic retry");
    let state = p.request_ok("s1", "session.get_state", None).await;
    assert_eq!(state["activity"], json!({"type": "idle"}));
}

// ---------------------------------------------------------------------------------------------
// 7. Models and thinking levels
// ---------------------------------------------------------------------------------------------

fn two_provider_models(mock: &MockLlm) -> String {
    json!({
        "providers": {
            "mock": {
                "baseUrl": mock.base_url(),
                "api": "openai-completions",
                "apiKey": KEY,
                "models": [
                    {"id": "m1", "name": "Model One", "reasoning": true, "contextWindow": 64000,
                     "maxTokens": 4096,
                     "cost": {"input": 1.5, "output": 2.5, "cacheRead": 0, "cacheWrite": 0}},
                    {"id": "m2", "reasoning": false}
                ]
            },
            "mock2": {
                "baseUrl": mock.base_url(),
                "api": "openai-completions",
                "models": [{"id": "x"}]
            }
        }
    })
    .to_string()
}

fn m1_descriptor() -> Value {
    json!({"provider": "mock", "id": "m1", "name": "Model One", "reasoning": true,
           "input": ["text"], "contextWindow": 64000, "maxTokens": 4096})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn models_and_thinking_levels_are_listed_selected_and_persisted() {
    let mock = start_mock().await;
    let agent = AgentDir::new();
    agent.write("models.json", &two_provider_models(&mock));
    let cwd = temp_cwd();
    let mut p = spawn(&agent, &cwd.path, &["--no-session", "--model", "mock/m2"]).await;
    let settings_path = agent.path().join("settings.json");

    // model.list: public descriptors plus `configured`, nothing else.
    let list = p.request("l1", "model.list", None).await;
    assert_eq!(list["ok"], true, "{list}");
    let raw = list.to_string();
    for secret in [
        "baseUrl",
        "apiKey",
        "cost",
        "headers",
        "compat",
        KEY,
        &mock.base_url(),
    ] {
        assert!(!raw.contains(secret), "model.list leaks {secret:?}: {raw}");
    }
    let models = list["result"]["models"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let custom = models
        .iter()
        .filter(|m| {
            m["provider"]
                .as_str()
                .is_some_and(|p| p.starts_with("mock"))
        })
        .count();
    assert_eq!(custom, 3, "{raw}");
    for model in &models {
        let keys: Vec<&String> = model
            .as_object()
            .map(|o| o.keys().collect())
            .unwrap_or_default();
        let mut sorted = keys.clone();
        sorted.sort();
        assert_eq!(
            sorted,
            [
                "configured",
                "contextWindow",
                "id",
                "input",
                "maxTokens",
                "name",
                "provider",
                "reasoning"
            ],
            "{model}"
        );
    }
    let find = |provider: &str, id: &str| {
        models
            .iter()
            .find(|m| m["provider"] == provider && m["id"] == id)
            .cloned()
            .unwrap_or_else(|| panic!("{provider}/{id} missing from {raw}"))
    };
    let mut expected_m1 = m1_descriptor();
    expected_m1["configured"] = json!(true);
    assert_eq!(find("mock", "m1"), expected_m1);
    assert_eq!(
        find("mock", "m2"),
        json!({"provider": "mock", "id": "m2", "name": "m2", "reasoning": false, "input": ["text"],
               "contextWindow": 128000, "maxTokens": 16384, "configured": true})
    );
    assert_eq!(find("mock2", "x")["configured"], false);

    // Unauthenticated and unknown models.
    let frame = p
        .request(
            "ms1",
            "model.select",
            Some(json!({"provider": "mock2", "id": "x"})),
        )
        .await;
    assert_failure(
        &frame,
        "operation_failed",
        "Model mock2/x is not authenticated",
    );
    let frame = p
        .request(
            "ms2",
            "model.select",
            Some(json!({"provider": "mock", "id": "nope"})),
        )
        .await;
    assert_failure(&frame, "not_found", "Model not found: mock/nope");

    // A non-reasoning model supports only "off".
    assert_eq!(
        p.request_ok("t1", "thinking.list", None).await,
        json!({"levels": ["off"]})
    );

    // Selecting the reasoning model: thinking_level_changed (off → medium), then model_changed.
    let selected = p
        .request(
            "ms3",
            "model.select",
            Some(json!({"provider": "mock", "id": "m1"})),
        )
        .await;
    assert_eq!(selected["ok"], true, "{selected}");
    assert_eq!(selected["result"], json!({"model": m1_descriptor()}));
    let level = p.event_after("thinking_level_changed", 0).await;
    let changed = p.event_after("model_changed", 0).await;
    assert!(
        seq(&level) < seq(&changed),
        "thinking_level_changed precedes model_changed"
    );
    assert_eq!(level["event"]["level"], "medium");
    assert_eq!(changed["event"]["model"], m1_descriptor());
    let settings = read_json(&settings_path);
    assert_eq!(settings["defaultProvider"], "mock", "{settings}");
    assert_eq!(settings["defaultModel"], "m1", "{settings}");
    assert_eq!(settings["defaultThinkingLevel"], "medium", "{settings}");
    let state = p.request_ok("s1", "session.get_state", None).await;
    assert_eq!(
        state["model"],
        json!({"type": "selected", "model": m1_descriptor()})
    );
    assert_eq!(state["thinkingLevel"], "medium");

    assert_eq!(
        p.request_ok("t2", "thinking.list", None).await,
        json!({"levels": ["off", "minimal", "low", "medium", "high"]})
    );

    // thinking.select, global.
    let selection = p
        .request_ok("ts1", "thinking.select", Some(json!({"level": "high"})))
        .await;
    assert_eq!(
        selection,
        json!({"scope": "global", "requested": "high", "effective": "high"})
    );
    assert_eq!(
        serde_json::to_string(&selection).unwrap_or_default(),
        r#"{"scope":"global","requested":"high","effective":"high"}"#,
        "key order"
    );
    let level = p.event_after("thinking_level_changed", seq(&level)).await;
    assert_eq!(level["event"]["level"], "high");
    assert_eq!(read_json(&settings_path)["defaultThinkingLevel"], "high");

    // max is not mapped for m1: clamped down to high.
    let selection = p
        .request_ok("ts2", "thinking.select", Some(json!({"level": "max"})))
        .await;
    assert_eq!(
        selection,
        json!({"scope": "global", "requested": "max", "effective": "high"})
    );
    assert_eq!(read_json(&settings_path)["defaultThinkingLevel"], "high");

    // Project scope in an untrusted project.
    let frame = p
        .request(
            "ts3",
            "thinking.select",
            Some(json!({"level": "low", "scope": "project"})),
        )
        .await;
    assert_eq!(frame["ok"], false, "{frame}");
    assert_eq!(frame["error"]["code"], "operation_failed", "{frame}");
    let message = frame["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.starts_with("Cannot update project settings before project trust: ")
            && message.contains(&cwd.path.display().to_string()),
        "{frame}"
    );
    assert!(!cwd.path.join(".zi").join("settings.json").exists());
    let state = p.request_ok("s2", "session.get_state", None).await;
    assert_eq!(state["thinkingLevel"], "high");

    // Model and thinking changes are idle-only.
    mock.push(Step::Hang(vec!["busy".into()]));
    let response = prompt_ok(&mut p, "r1", "direct", "hold on", None).await;
    update_after(&mut p, "text_delta", seq(&response)).await;
    let frame = p
        .request(
            "ms4",
            "model.select",
            Some(json!({"provider": "mock", "id": "m2"})),
        )
        .await;
    assert_failure(
        &frame,
        "operation_failed",
        "Cannot change model while the agent is running",
    );
    let frame = p
        .request("ts4", "thinking.select", Some(json!({"level": "low"})))
        .await;
    assert_failure(
        &frame,
        "operation_failed",
        "Cannot change thinking level while the agent is running",
    );
    p.request_ok("i1", "session.interrupt", None).await;
    let state = p.request_ok("s3", "session.get_state", None).await;
    assert_eq!(state["model"]["model"]["id"], "m1");
    assert_eq!(state["thinkingLevel"], "high");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thinking_select_writes_project_settings_of_a_trusted_project() {
    let mock = start_mock().await;
    let agent = AgentDir::new();
    agent.write("models.json", &two_provider_models(&mock));
    let cwd = temp_cwd();
    agent.write(
        "trust.json",
        &json!({"trusted": [cwd.path.display().to_string()]}).to_string(),
    );
    let mut p = spawn(&agent, &cwd.path, &["--no-session", "--model", "mock/m1"]).await;
    let selection = p
        .request_ok(
            "ts1",
            "thinking.select",
            Some(json!({"level": "low", "scope": "project"})),
        )
        .await;
    assert_eq!(
        selection,
        json!({"scope": "project", "requested": "low", "effective": "low"})
    );
    let project = read_json(&cwd.path.join(".zi").join("settings.json"));
    assert_eq!(project["defaultThinkingLevel"], "low", "{project}");
    let global = agent.path().join("settings.json");
    if global.exists() {
        assert_ne!(read_json(&global)["defaultThinkingLevel"], "low");
    }
    let state = p.request_ok("s1", "session.get_state", None).await;
    assert_eq!(state["thinkingLevel"], "low");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn model_select_without_models_is_not_found() {
    let agent = AgentDir::new();
    let cwd = temp_cwd();
    let mut p = spawn(&agent, &cwd.path, &["--no-session"]).await;
    // Only the built-in catalog, and without keys none of it is configured.
    let list = p.request_ok("l1", "model.list", None).await;
    let models = list["models"].as_array().cloned().unwrap_or_default();
    assert!(!models.is_empty(), "{list}");
    assert!(models.iter().all(|m| m["configured"] == false), "{list}");
    let frame = p
        .request(
            "ms0",
            "model.select",
            Some(json!({"provider": "anthropic", "id": "claude-sonnet-4-5"})),
        )
        .await;
    assert_failure(
        &frame,
        "operation_failed",
        "Model anthropic/claude-sonnet-4-5 is not authenticated",
    );
    let frame = p
        .request(
            "ms1",
            "model.select",
            Some(json!({"provider": "mock", "id": "m1"})),
        )
        .await;
    assert_failure(&frame, "not_found", "Model not found: mock/m1");
    assert_eq!(
        p.request_ok("t1", "thinking.list", None).await,
        json!({"levels": ["off"]})
    );
}

// ---------------------------------------------------------------------------------------------
// 8. Secrets never cross stdout or stderr
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_base_urls_and_headers_never_reach_stdout_or_stderr() {
    const CLI_KEY: &str = "sk-test-SECRET-123";
    const HEADER_VALUE: &str = "hdr-SECRET-456";
    let mock = start_mock().await;
    // "127.0.0.1:PORT"
    let port = mock
        .base_url()
        .trim_start_matches("http://")
        .trim_end_matches("/v1")
        .to_string();
    let agent = AgentDir::new();
    agent.write(
        "models.json",
        &json!({"providers": {"mock": {
            "baseUrl": mock.base_url(),
            "api": "openai-completions",
            "headers": {"x-team-secret": HEADER_VALUE},
            "models": [{"id": "m1", "reasoning": true,
                        "cost": {"input": 3, "output": 15, "cacheRead": 0, "cacheWrite": 0}}]
        }}})
        .to_string(),
    );
    let cwd = temp_cwd();
    let mut p = spawn(
        &agent,
        &cwd.path,
        &["--no-session", "--model", "mock/m1", "--api-key", CLI_KEY],
    )
    .await;

    mock.push(Step::text("fine"));
    mock.push(Step::HttpError {
        status: 401,
        message: "Incorrect API key provided".into(),
    });
    mock.push(Step::MidStreamError {
        text: vec!["x".into()],
        message: "stream broke".into(),
    });
    mock.push(Step::Hang(vec!["waiting".into()]));
    p.request_ok("s1", "session.get_state", None).await;
    p.request_ok("l1", "model.list", None).await;
    p.request_ok(
        "ms1",
        "model.select",
        Some(json!({"provider": "mock", "id": "m1"})),
    )
    .await;
    run_direct(&mut p, "p1", "hello").await;
    run_direct(&mut p, "p2", "again").await;
    run_direct(&mut p, "p3", "once more").await;
    // A transport failure mid-stream: the mock goes away while the reply hangs.
    let response = prompt_ok(&mut p, "p4", "direct", "last", None).await;
    update_after(&mut p, "text_delta", seq(&response)).await;
    mock.shutdown();
    let settled = p.event_after("agent_settled", seq(&response)).await;
    let events = events_between(&p, seq(&response), seq(&settled));
    assert_eq!(
        last_message_end(&events, "assistant")["stopReason"],
        "error"
    );
    // The provider is now unreachable: a connection failure.
    let events = run_direct(&mut p, "p5", "anyone there?").await;
    let failed = last_message_end(&events, "assistant");
    assert_eq!(failed["stopReason"], "error", "{failed}");
    p.request_ok("m1", "session.get_messages", None).await;
    p.request_ok("s2", "session.get_state", None).await;
    p.close_stdin().await;
    let exited = p.wait_exit(WAIT).await;
    assert_eq!(exited.code, Some(0), "stderr: {}", exited.stderr);

    // The credentials were used…
    let requests = mock.requests();
    assert_eq!(
        requests[0].header("authorization"),
        Some(format!("Bearer {CLI_KEY}").as_str())
    );
    assert_eq!(requests[0].header("x-team-secret"), Some(HEADER_VALUE));
    // …and never shown.
    let stdout: String = p
        .frames()
        .iter()
        .map(|f| serde_json::to_string(f).unwrap_or_default() + "\n")
        .collect();
    let mut leaks = Vec::new();
    for secret in [
        CLI_KEY,
        HEADER_VALUE,
        port.as_str(),
        mock.base_url().as_str(),
    ] {
        for (stream, text) in [("stdout", &stdout), ("stderr", &exited.stderr)] {
            if let Some(at) = text.find(secret) {
                let start = text[..at]
                    .char_indices()
                    .rev()
                    .nth(80)
                    .map_or(0, |(i, _)| i);
                let end = (at + secret.len() + 80).min(text.len());
                let end = (end..=text.len())
                    .find(|&i| text.is_char_boundary(i))
                    .unwrap_or(text.len());
                leaks.push(format!("{secret:?} on {stream}: …{}…", &text[start..end]));
            }
        }
    }
    assert!(leaks.is_empty(), "secrets leaked:\n{}", leaks.join("\n"));
}

// ---------------------------------------------------------------------------------------------
// 9. Journal
// ---------------------------------------------------------------------------------------------

fn encoded_cwd(cwd: &Path) -> String {
    let text = cwd.display().to_string();
    let trimmed = text.strip_prefix('/').unwrap_or(&text);
    format!("--{}--", trimmed.replace(['/', '\\', ':'], "-"))
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
    found
}

fn is_iso_millis(text: &str) -> bool {
    // YYYY-MM-DDTHH:MM:SS.mmmZ
    let b = text.as_bytes();
    b.len() == 24
        && b.iter().enumerate().all(|(i, c)| match i {
            4 | 7 => *c == b'-',
            10 => *c == b'T',
            13 | 16 => *c == b':',
            19 => *c == b'.',
            23 => *c == b'Z',
            _ => c.is_ascii_digit(),
        })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn persistent_session_writes_a_private_linear_journal() {
    let mock = start_mock().await;
    mock.push(Step::text("journal reply"));
    let agent = agent_with(&mock, &reasoning_m1());
    let cwd = temp_cwd();
    let mut p = spawn(&agent, &cwd.path, &["--model", "mock/m1"]).await;
    let session_id = p.ready()["sessionId"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert_eq!(session_id.len(), 36, "a UUID: {session_id}");

    let events = run_direct(&mut p, "p1", "hello journal").await;
    let path = agent
        .path()
        .join("sessions")
        .join(encoded_cwd(&cwd.path))
        .join(format!("{session_id}.jsonl"));
    assert!(
        path.is_file(),
        "no journal at {}; files: {:?}",
        path.display(),
        files_under(&agent.path().join("sessions"))
    );
    assert_eq!(
        files_under(&agent.path().join("sessions")),
        std::slice::from_ref(&path)
    );
    let mode = std::fs::metadata(&path)
        .map(|m| m.permissions().mode() & 0o777)
        .unwrap_or_default();
    assert_eq!(mode, 0o600, "journal mode {mode:o}");

    let text = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(text.ends_with('\n'));
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("journal line {l}: {e}")))
        .collect();
    let header = &lines[0];
    assert_eq!(header["type"], "session", "{header}");
    assert_eq!(header["version"], 2, "{header}");
    assert_eq!(header["id"], session_id.as_str(), "{header}");
    assert_eq!(header["cwd"], cwd.path.display().to_string(), "{header}");
    assert!(
        header["timestamp"]
            .as_str()
            .is_some_and(|t| t.contains('T')),
        "{header}"
    );

    let entries = &lines[1..];
    let mut previous = Value::Null;
    for entry in entries {
        assert!(
            entry["id"].as_str().is_some_and(|id| id.len() == 36),
            "{entry}"
        );
        assert_eq!(entry["parentId"], previous, "linear chain: {entry}");
        assert!(
            entry["timestamp"].as_str().is_some_and(is_iso_millis),
            "{entry}"
        );
        previous = entry["id"].clone();
    }
    let messages: Vec<&Value> = entries.iter().filter(|e| e["type"] == "message").collect();
    assert_eq!(messages.len(), 2, "{text}");
    assert_eq!(messages[0]["message"]["role"], "user");
    assert_eq!(text_of(&messages[0]["message"]["content"]), "hello journal");
    assert_eq!(messages[1]["message"]["role"], "assistant");
    assert_eq!(text_of(&messages[1]["message"]["content"]), "journal reply");

    // The announced entries are the ones on disk.
    let announced: Vec<Value> = events
        .iter()
        .filter(|e| e["type"] == "entry_appended")
        .map(|e| e["entry"].clone())
        .collect();
    assert_eq!(announced.len(), 2);
    assert_eq!(announced[0], *messages[0]);
    assert_eq!(announced[1], *messages[1]);

    p.close_stdin().await;
    assert_eq!(p.wait_exit(WAIT).await.code, Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn journal_stays_pending_until_the_first_assistant_message() {
    let mock = start_mock().await;
    mock.push(Step::Hang(vec!["slow".into()]));
    let agent = agent_with(&mock, &reasoning_m1());
    let cwd = temp_cwd();
    let mut p = spawn(&agent, &cwd.path, &["--model", "mock/m1"]).await;
    let sessions = agent.path().join("sessions");

    let response = prompt_ok(&mut p, "p1", "direct", "first", None).await;
    // The user message is committed and the assistant is streaming: nothing on disk yet.
    update_after(&mut p, "text_delta", seq(&response)).await;
    assert_eq!(files_under(&sessions), Vec::<PathBuf>::new());

    // The aborted assistant message is the first assistant entry: the file appears.
    p.request_ok("i1", "session.interrupt", None).await;
    let files = files_under(&sessions);
    assert_eq!(files.len(), 1, "{files:?}");
    let text = std::fs::read_to_string(&files[0]).unwrap_or_default();
    let lines: Vec<Value> = text
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    assert_eq!(lines[0]["type"], "session");
    let roles: Vec<&Value> = lines
        .iter()
        .filter(|l| l["type"] == "message")
        .map(|l| &l["message"]["role"])
        .collect();
    assert_eq!(roles, [&json!("user"), &json!("assistant")], "{text}");
    let last = lines.last().cloned().unwrap_or_default();
    assert_eq!(last["message"]["stopReason"], "aborted", "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_session_writes_nothing() {
    let mock = start_mock().await;
    mock.push(Step::text("ephemeral"));
    let agent = agent_with(&mock, &reasoning_m1());
    let cwd = temp_cwd();
    let mut p = spawn_m1(&agent, &cwd.path).await;
    run_direct(&mut p, "p1", "hello").await;
    p.close_stdin().await;
    assert_eq!(p.wait_exit(WAIT).await.code, Some(0));
    assert_eq!(
        files_under(&agent.path().join("sessions")),
        Vec::<PathBuf>::new()
    );
    assert!(!cwd.path.join(".zi").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_saved_to_auth_json_while_running_configure_models() {
    let mock = start_mock().await;
    let agent = AgentDir::new();
    let models = json!({"providers": {
        "mock": {"baseUrl": mock.base_url(), "api": "openai-completions", "apiKey": KEY,
                 "models": [{"id": "m1"}]},
        "keyless": {"baseUrl": mock.base_url(), "api": "openai-completions",
                    "models": [{"id": "k1"}]}
    }});
    agent.write("models.json", &models.to_string());
    let cwd = temp_cwd();
    let mut p = spawn(&agent, &cwd.path, &["--no-session", "--model", "mock/m1"]).await;
    let configured = |list: &Value| {
        list["result"]["models"]
            .as_array()
            .and_then(|models| models.iter().find(|m| m["provider"] == "keyless"))
            .map(|m| m["configured"].clone())
    };
    let before = p.request("l1", "model.list", None).await;
    assert_eq!(configured(&before), Some(json!(false)), "{before}");
    let refused = p
        .request(
            "s1",
            "model.select",
            Some(json!({"provider": "keyless", "id": "k1"})),
        )
        .await;
    assert_eq!(refused["ok"], false, "{refused}");

    agent.write(
        "auth.json",
        r#"{"keyless": {"type": "api_key", "key": "saved-later"}}"#,
    );
    let after = p.request("l2", "model.list", None).await;
    assert_eq!(configured(&after), Some(json!(true)), "{after}");
    let selected = p
        .request(
            "s2",
            "model.select",
            Some(json!({"provider": "keyless", "id": "k1"})),
        )
        .await;
    assert_eq!(selected["ok"], true, "{selected}");
    mock.push(Step::text("hi"));
    p.request(
        "p",
        "session.prompt",
        Some(json!({"delivery": "direct", "text": "hello"})),
    )
    .await;
    p.request("w", "session.await_idle", None).await;
    let request = mock.requests().pop().unwrap_or_else(|| panic!("a request"));
    assert_eq!(request.header("authorization"), Some("Bearer saved-later"));
}
