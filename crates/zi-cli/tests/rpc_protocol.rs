//! Black-box tests of Zi RPC v1 through the real `zi --mode rpc` binary (docs/rpc.md): framing,
//! frames, request decoding, method results, the state snapshot, errors, ids, capacity, ordering
//! and shutdown, and event modes.
//!
//! zi's documented decisions are asserted where they matter: records are processed one by one, an
//! empty line is `invalid_json`, `activity` is accepted and never leaves sequence gaps, a prompt's
//! response precedes the first event of its run, and synchronous responses come in input order.

use std::time::Duration;

use serde_json::{Value, json};
use zi_protocol::decode_cases::DECODE_CASES;
use zi_test_support::dirs::{AgentDir, TempCwd, temp_cwd};
use zi_test_support::harness::Harness;
use zi_test_support::mock_llm::{MockLlm, Step};
use zi_test_support::process::{
    descendants, process_exists, process_group_members, wait_until_gone,
};
use zi_test_support::zi_command::ZiCommand;

mod admission;
mod decoding;
mod event_modes;
mod framing;
mod lifecycle;
mod ordering;

const ZI: &str = env!("CARGO_BIN_EXE_zi");
const WAIT: Duration = Duration::from_secs(10);

const API_KEY: &str = "zi-test-secret-key";
const INVALID_JSON: &str = "RPC input must contain one JSON object per line";

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

/// A temporary agent dir (optionally with a `models.json` pointing at a mock) and a separate
/// temporary working directory, so nothing of the host or the repository is read.
struct Env {
    agent: AgentDir,
    cwd: TempCwd,
    model: bool,
}

impl Env {
    fn without_model() -> Env {
        Env {
            agent: AgentDir::new(),
            cwd: temp_cwd(),
            model: false,
        }
    }

    fn with_model(mock: &MockLlm) -> Env {
        Env {
            agent: AgentDir::new().models(
                mock,
                API_KEY,
                &[json!({
                    "id": "m1",
                    "name": "Mock One",
                    "reasoning": false,
                    "input": ["text"],
                    "contextWindow": 32000,
                    "maxTokens": 1000,
                })],
            ),
            cwd: temp_cwd(),
            model: true,
        }
    }

    /// `zi --mode rpc --no-session --agent-dir A [--model mock/m1]`, run in the cwd.
    fn builder(&self) -> ZiCommand {
        let zi = ZiCommand::new(ZI)
            .args(["--mode", "rpc"])
            .no_session()
            .agent_dir(&self.agent)
            .current_dir(&self.cwd.path);
        if self.model { zi.model("mock/m1") } else { zi }
    }

    /// zi started without a model (the `Env` keeps its directories alive).
    async fn started_without_model() -> (Env, Harness) {
        let env = Env::without_model();
        let p = env.spawn().await;
        (env, p)
    }

    /// The mock LLM and zi started on its model `m1`.
    async fn started_with_model() -> (MockLlm, Env, Harness) {
        let mock = mock().await;
        let env = Env::with_model(&mock);
        let p = env.spawn().await;
        (mock, env, p)
    }

    /// Spawns `zi --mode rpc` and waits for `ready`.
    async fn spawn(&self) -> Harness {
        self.builder().spawn_rpc().await
    }
}

async fn mock() -> MockLlm {
    MockLlm::start().await.expect("start the mock LLM")
}

/// One request record, LF-terminated.
fn line(id: &str, method: &str, params: Option<Value>) -> Vec<u8> {
    let mut request = json!({"version": 1, "id": id, "method": method});
    if let Some(params) = params {
        request["params"] = params;
    }
    let mut bytes = serde_json::to_vec(&request).unwrap();
    bytes.push(b'\n');
    bytes
}

fn prompt_params(text: &str) -> Option<Value> {
    Some(json!({"delivery": "direct", "text": text}))
}

/// The next frame that is not a `session_event`.
async fn next_reply(p: &mut Harness) -> Value {
    loop {
        let frame = p.next_frame().await;
        if frame["type"] != "session_event" {
            return frame;
        }
    }
}

fn keys(v: &Value) -> Vec<String> {
    v.as_object()
        .unwrap_or_else(|| panic!("not an object: {v}"))
        .keys()
        .cloned()
        .collect()
}

fn sorted_keys(v: &Value) -> Vec<String> {
    let mut k = keys(v);
    k.sort();
    k
}

/// Asserts a `protocol_error` frame: code, message, and `id` present (with this value) or absent.
fn assert_protocol_error(frame: &Value, code: &str, message: &str, id: Option<&str>, what: &str) {
    assert_eq!(frame["type"], "protocol_error", "{what}: {frame}");
    assert_eq!(frame["code"], code, "{what}: {frame}");
    assert_eq!(frame["message"], message, "{what}: {frame}");
    assert_eq!(&keys(frame)[..3], ["version", "sequence", "type"], "{what}");
    match id {
        Some(id) => {
            assert_eq!(frame["id"], id, "{what}: {frame}");
            assert_eq!(
                sorted_keys(frame),
                ["code", "id", "message", "sequence", "type", "version"],
                "{what}"
            );
        }
        None => {
            assert!(
                frame.get("id").is_none(),
                "{what}: id must be omitted: {frame}"
            );
            assert_eq!(
                sorted_keys(frame),
                ["code", "message", "sequence", "type", "version"],
                "{what}"
            );
        }
    }
}

/// Asserts a failure `response`: id, method, `ok: false` and `error: {code, message}` only.
fn assert_failure(frame: &Value, id: &str, method: &str, code: &str, message: &str) {
    assert_eq!(frame["type"], "response", "{frame}");
    assert_eq!(frame["id"], id, "{frame}");
    assert_eq!(frame["method"], method, "{frame}");
    assert_eq!(frame["ok"], false, "{frame}");
    assert_eq!(
        frame["error"],
        json!({"code": code, "message": message}),
        "{frame}"
    );
    assert!(frame.get("result").is_none(), "{frame}");
    assert_eq!(
        keys(frame),
        ["version", "sequence", "type", "id", "method", "ok", "error"]
    );
}

/// Sends a request and asserts its failure response (see [`assert_failure`]).
async fn request_fails(
    p: &mut Harness,
    id: &str,
    method: &str,
    params: Option<Value>,
    code: &str,
    message: &str,
) {
    let frame = p.request(id, method, params).await;
    assert_failure(&frame, id, method, code, message);
}

/// Sends a request and asserts its success response (see [`assert_success`]); returns the result.
async fn request_succeeds(p: &mut Harness, id: &str, method: &str, params: Option<Value>) -> Value {
    let frame = p.request(id, method, params).await;
    assert_success(&frame, id, method)
}

fn assert_success(frame: &Value, id: &str, method: &str) -> Value {
    assert_eq!(frame["type"], "response", "{frame}");
    assert_eq!(frame["id"], id, "{frame}");
    assert_eq!(frame["method"], method, "{frame}");
    assert_eq!(frame["ok"], true, "{frame}");
    assert_eq!(
        keys(frame),
        [
            "version", "sequence", "type", "id", "method", "ok", "result"
        ]
    );
    frame["result"].clone()
}

/// Pushes a `Hang` step, starts a run on it and waits until the provider request arrived.
async fn start_hanging_run(p: &mut Harness, mock: &MockLlm, id: &str) {
    let before = mock.requests().len();
    mock.push(Step::Hang(vec!["partial".into()]));
    let result = p
        .request_ok(id, "session.prompt", prompt_params("hang"))
        .await;
    assert_eq!(result, json!({"delivery": "direct"}));
    let requests = mock.wait_for_requests(before + 1, WAIT).await;
    assert!(
        requests.len() > before,
        "the run did not reach the provider"
    );
}

/// Every frame's sequence, for checking 1..N.
fn sequences(p: &Harness) -> Vec<u64> {
    p.frames()
        .iter()
        .map(|f| f["sequence"].as_u64().expect("integer sequence"))
        .collect()
}

fn count_frames(p: &Harness, pred: impl Fn(&Value) -> bool) -> usize {
    p.frames().iter().filter(|f| pred(f)).count()
}
