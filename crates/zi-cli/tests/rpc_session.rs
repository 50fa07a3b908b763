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
use zi_test_support::dirs::{AgentDir, TempCwd, temp_cwd};
use zi_test_support::harness::{Exited, Harness};
use zi_test_support::mock_llm::start_mock;
use zi_test_support::mock_llm::{MockLlm, MockUsage, Step};
use zi_test_support::zi_command::ZiCommand;

use crate::wire_support::{system_text, text_of, user_texts};

mod events;
mod inputs;
mod models;
mod persistence;

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

fn preview(value: &Value) -> String {
    let text = value.to_string();
    if text.len() > 400 {
        format!("{}… ({} bytes)", &text[..400], text.len())
    } else {
        text
    }
}
