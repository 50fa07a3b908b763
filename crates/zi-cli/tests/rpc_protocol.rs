//! Black-box tests of Zi RPC v1 through the real `zi --mode rpc` binary (docs/rpc.md): framing,
//! frames, request decoding, method results, the state snapshot, errors, ids, capacity, ordering
//! and shutdown, and event modes.
//!
//! zi's documented decisions are asserted where they matter: records are processed one by one, an
//! empty line is `invalid_json`, `activity` is accepted and never leaves sequence gaps, a prompt's
//! response precedes the first event of its run, and synchronous responses come in input order.

use std::time::Duration;

use serde_json::{Value, json};
use zi_conformance::decode_cases::DECODE_CASES;
use zi_test_support::dirs::{AgentDir, TempCwd, temp_cwd};
use zi_test_support::harness::Harness;
use zi_test_support::mock_llm::{MockLlm, Step};
use zi_test_support::process::{
    descendants, process_exists, process_group_members, wait_until_gone,
};
use zi_test_support::zi_command::ZiCommand;

const ZI: &str = env!("CARGO_BIN_EXE_zi");
const WAIT: Duration = Duration::from_secs(10);
const SETTLE: Duration = Duration::from_secs(5);
const MIB16: usize = 16 * 1024 * 1024;

const API_KEY: &str = "zi-test-secret-key";

const STATE_KEYS: [&str; 13] = [
    "sessionId",
    "activity",
    "model",
    "thinkingLevel",
    "supportedThinkingLevels",
    "steeringMode",
    "followUpMode",
    "queuedInputs",
    "workPlan",
    "messageCount",
    "compaction",
    "retry",
    "contextUsage",
];

const FRAMING_UTF8: &str = "RPC input must be valid UTF-8";
const FRAMING_OVERSIZED: &str = "RPC input records cannot exceed 16777216 bytes";
const INVALID_JSON: &str = "RPC input must contain one JSON object per line";
const NOT_OBJECT: &str = "RPC requests must be JSON objects";
const BAD_ID: &str = "RPC request id must be a non-empty string of at most 256 bytes";
const METHOD_NOT_STRING: &str = "RPC request method must be a string";
const UNKNOWN_FIELDS: &str = "RPC request contains unknown fields";
const MISSING_FIELDS: &str = "RPC request is missing required fields";
const IN_FLIGHT: &str = "RPC request id is already in flight";
const CAPACITY_ORDINARY: &str = "RPC accepts at most 32 in-flight operations";
const CAPACITY_INTERRUPT: &str = "An interruption request is already active";

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

/// Sends, in one write, a `session.interrupt` and then `second` (same id as the interrupt when
/// `second_id` is `None`) while a run hangs, until `second` is admitted while the interrupt is
/// still in flight. The interrupt can settle before zi reads the next record, in which case
/// `second` is legitimately admitted; that is only accepted when its response comes after the
/// interrupt's, and the attempt is repeated with a fresh run. Returns the interrupt id and the
/// frame that answered `second` in the attempt where it overlapped.
async fn while_interrupt_in_flight(
    p: &mut Harness,
    mock: &MockLlm,
    tag: &str,
    second_method: &str,
    second_id: Option<&str>,
) -> (String, Value) {
    for attempt in 0..10 {
        start_hanging_run(p, mock, &format!("{tag}-run-{attempt}")).await;
        let first = format!("{tag}-{attempt}");
        let second = second_id.map_or_else(|| first.clone(), |id| format!("{id}-{attempt}"));
        let mut both = line(&first, "session.interrupt", None);
        both.extend(line(&second, second_method, None));
        p.send_raw(&both).await;
        let interrupted = p
            .wait_for("the interrupt response", |f| {
                f["type"] == "response"
                    && f["id"] == first.as_str()
                    && f["method"] == "session.interrupt"
            })
            .await;
        assert_eq!(
            assert_success(&interrupted, &first, "session.interrupt"),
            json!({})
        );
        let answer = p
            .wait_for("the answer to the second record", |f| {
                f["id"] == second.as_str()
                    && (f["type"] == "protocol_error" || f["method"] == second_method)
            })
            .await;
        if answer["type"] == "protocol_error" || answer["ok"] == false {
            return (first, answer);
        }
        assert!(
            answer["sequence"].as_u64() > interrupted["sequence"].as_u64(),
            "{second_method} {second:?} was admitted while interrupt {first:?} was in flight: \
             {answer} / {interrupted}"
        );
        p.request_ok(&format!("{tag}-idle-{attempt}"), "session.await_idle", None)
            .await;
    }
    panic!("the second record never arrived while the interrupt was in flight (10 attempts)");
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

/// After the process exited: it is gone and left nothing behind.
async fn assert_nothing_left(pid: u32, earlier_descendants: &[u32]) {
    assert!(!process_exists(pid), "zi ({pid}) still exists");
    assert_eq!(
        wait_until_gone(earlier_descendants, SETTLE).await,
        Vec::<u32>::new(),
        "descendants of zi survived it"
    );
    assert_eq!(
        process_group_members(pid),
        Vec::<u32>::new(),
        "members of zi's process group survived it"
    );
}

// ---------------------------------------------------------------------------------------------
// 1. ready (docs/rpc.md#frames, docs/rpc.md#the-state-snapshot)
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ready_without_model_is_sequence_one_with_the_full_unselected_snapshot() {
    let env = Env::without_model();
    let mut p = env.spawn().await;
    let state = p.ready();

    let ready = p.frames()[0].clone();
    assert_eq!(keys(&ready), ["version", "sequence", "type", "state"]);
    assert_eq!(ready["version"], 1);
    assert_eq!(ready["sequence"], 1);
    assert_eq!(ready["type"], "ready");

    assert_eq!(keys(&state), STATE_KEYS, "snapshot keys in emitted order");
    let session_id = state["sessionId"].as_str().expect("sessionId is a string");
    assert!(!session_id.is_empty());
    let mut expected = json!({
        "sessionId": session_id,
        "activity": {"type": "idle"},
        "model": {"type": "unselected"},
        "thinkingLevel": "off",
        "supportedThinkingLevels": ["off"],
        "steeringMode": "one-at-a-time",
        "followUpMode": "one-at-a-time",
        "queuedInputs": {"steering": [], "followUp": []},
        "workPlan": {"revision": 0, "steps": []},
        "messageCount": 0,
        "compaction": {"type": "idle"},
        "retry": {"type": "idle"},
        "contextUsage": {"type": "unavailable", "reason": "no_model"},
    });
    assert_eq!(state, expected);

    // session.get_state returns the same shape and values.
    let got = p.request("s1", "session.get_state", None).await;
    let result = assert_success(&got, "s1", "session.get_state");
    assert_eq!(got["sequence"], 2);
    assert_eq!(keys(&result), STATE_KEYS);
    expected["sessionId"] = json!(session_id);
    assert_eq!(result, expected);

    assert_eq!(
        p.request_ok("t", "thinking.list", None).await,
        json!({"levels": ["off"]})
    );
    p.close_stdin().await;
    assert_eq!(p.wait_exit(WAIT).await.code, Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ready_with_model_carries_only_the_public_descriptor() {
    let mock = mock().await;
    let env = Env::with_model(&mock);
    let mut p = env.spawn().await;
    let state = p.ready();

    assert_eq!(keys(&state), STATE_KEYS);
    let descriptor = json!({
        "provider": "mock",
        "id": "m1",
        "name": "Mock One",
        "reasoning": false,
        "input": ["text"],
        "contextWindow": 32000,
        "maxTokens": 1000,
    });
    assert_eq!(
        state["model"],
        json!({"type": "selected", "model": descriptor})
    );
    assert_eq!(
        keys(&state["model"]["model"]),
        [
            "provider",
            "id",
            "name",
            "reasoning",
            "input",
            "contextWindow",
            "maxTokens"
        ]
    );
    assert_eq!(state["contextUsage"]["type"], "estimated", "{state}");
    assert_eq!(state["contextUsage"]["contextWindow"], 32000, "{state}");
    assert_eq!(state["activity"], json!({"type": "idle"}));
    assert_eq!(state["messageCount"], 0);

    let text = p.frames()[0].to_string();
    for secret in [
        "baseUrl",
        "apiKey",
        API_KEY,
        mock.base_url().as_str(),
        "127.0.0.1",
        "openai-completions",
    ] {
        assert!(!text.contains(secret), "ready leaks {secret:?}: {text}");
    }

    // The catalog adds only `configured`.
    let list = p.request("ml", "model.list", None).await;
    let result = assert_success(&list, "ml", "model.list");
    let mut item = descriptor.clone();
    item["configured"] = json!(true);
    // The built-in catalog follows; none of it is configured (no keys in this environment).
    let models = result["models"].as_array().cloned().unwrap_or_default();
    let mock_models: Vec<&Value> = models.iter().filter(|m| m["provider"] == "mock").collect();
    assert_eq!(mock_models, [&item]);
    assert!(
        models
            .iter()
            .all(|m| m["provider"] == "mock" || m["configured"] == false),
        "{result}"
    );
    let list_text = list.to_string();
    assert!(!list_text.contains("baseUrl") && !list_text.contains(API_KEY));

    // get_state agrees with ready.
    let got = p.request_ok("s", "session.get_state", None).await;
    assert_eq!(got, state);
    p.close_stdin().await;
    assert_eq!(p.wait_exit(WAIT).await.code, Some(0));
}

// ---------------------------------------------------------------------------------------------
// 2. Framing (docs/rpc.md#framing)
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn framing_accepts_crlf_and_reassembles_split_utf8() {
    let env = Env::without_model();
    let mut p = env.spawn().await;

    // CRLF.
    p.send_raw(b"{\"version\":1,\"id\":\"crlf\",\"method\":\"session.get_state\"}\r\n")
        .await;
    let frame = next_reply(&mut p).await;
    assert_success(&frame, "crlf", "session.get_state");

    // A two-byte character split across writes.
    let record = line("split-\u{e9}", "session.get_state", None);
    let at = record
        .iter()
        .position(|&b| b == 0xc3)
        .expect("the record holds é")
        + 1;
    p.send_raw(&record[..at]).await;
    tokio::time::sleep(Duration::from_millis(50)).await;
    p.send_raw(&record[at..]).await;
    let frame = next_reply(&mut p).await;
    assert_success(&frame, "split-\u{e9}", "session.get_state");

    // A four-byte character split in three writes.
    let record = line("emoji-\u{1f600}", "session.get_state", None);
    let start = record.iter().position(|&b| b == 0xf0).expect("emoji");
    p.send_raw(&record[..start + 1]).await;
    tokio::time::sleep(Duration::from_millis(30)).await;
    p.send_raw(&record[start + 1..start + 3]).await;
    tokio::time::sleep(Duration::from_millis(30)).await;
    p.send_raw(&record[start + 3..]).await;
    let frame = next_reply(&mut p).await;
    assert_success(&frame, "emoji-\u{1f600}", "session.get_state");

    p.close_stdin().await;
    let exited = p.wait_exit(WAIT).await;
    assert_eq!(exited.code, Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn framing_empty_lines_are_invalid_json_and_recoverable() {
    let env = Env::without_model();
    let mut p = env.spawn().await;

    p.send_raw(b"\n").await;
    let frame = next_reply(&mut p).await;
    assert_protocol_error(&frame, "invalid_json", INVALID_JSON, None, "empty line");

    p.send_raw(b"\r\n").await;
    let frame = next_reply(&mut p).await;
    assert_protocol_error(&frame, "invalid_json", INVALID_JSON, None, "CR-only line");

    // Several empty lines in one write: one error each, in order.
    let mut bytes = b"\n\n".to_vec();
    bytes.extend(line("after", "session.get_state", None));
    p.send_raw(&bytes).await;
    for n in 0..2 {
        let frame = next_reply(&mut p).await;
        assert_protocol_error(&frame, "invalid_json", INVALID_JSON, None, &format!("#{n}"));
    }
    assert_success(&next_reply(&mut p).await, "after", "session.get_state");

    p.close_stdin().await;
    let exited = p.wait_exit(WAIT).await;
    assert_eq!(exited.code, Some(0));
    assert_eq!(exited.stderr, "");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn framing_unterminated_final_line_is_processed_at_eof() {
    let env = Env::without_model();
    let mut p = env.spawn().await;
    p.send_raw(b"{\"version\":1,\"id\":\"eof\",\"method\":\"session.get_state\"}")
        .await;
    // Nothing happens before EOF ...
    assert!(
        p.next_frame_within(Duration::from_millis(150))
            .await
            .is_none()
    );
    // ... and the record is admitted at EOF.
    p.close_stdin().await;
    let frame = p.response("eof").await;
    assert_success(&frame, "eof", "session.get_state");
    let exited = p.wait_exit(WAIT).await;
    assert_eq!(exited.code, Some(0));
    assert_eq!(exited.stderr, "");
    assert_eq!(sequences(&p), [1, 2]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn framing_invalid_utf8_is_fatal_after_one_error() {
    let env = Env::without_model();
    let mut p = env.spawn().await;

    // A valid record, then invalid bytes, then another record, all in one write.
    let mut bytes = line("before", "session.get_state", None);
    bytes.extend_from_slice(
        b"{\"version\":1,\"id\":\"bad\xff\",\"method\":\"session.get_state\"}\n",
    );
    bytes.extend(line("after", "session.get_state", None));
    p.send_raw(&bytes).await;

    // Records before the failure are admitted (records are processed one by one).
    let frame = next_reply(&mut p).await;
    assert_success(&frame, "before", "session.get_state");
    let frame = next_reply(&mut p).await;
    assert_protocol_error(&frame, "invalid_framing", FRAMING_UTF8, None, "0xff");

    // Later input is ignored (a broken pipe is fine).
    p.send_raw(&line("later", "session.get_state", None)).await;
    let exited = p.wait_exit(WAIT).await;
    assert_eq!(exited.code, Some(1));
    assert_eq!(exited.stderr, format!("{FRAMING_UTF8}\n"));

    assert_eq!(
        count_frames(&p, |f| f["type"] == "protocol_error"),
        1,
        "exactly one protocol_error: {:?}",
        p.frames()
    );
    assert_eq!(
        count_frames(&p, |f| f["type"] == "response"),
        1,
        "nothing after the framing error is answered: {:?}",
        p.frames()
    );
    assert_eq!(sequences(&p), [1, 2, 3]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn framing_incomplete_utf8_at_eof_is_fatal() {
    let env = Env::without_model();
    let mut p = env.spawn().await;
    p.send_raw(b"{\"version\":1,\"id\":\"x\",\"method\":\"session.get_state\"}\n\xc3")
        .await;
    assert_success(&next_reply(&mut p).await, "x", "session.get_state");
    p.close_stdin().await;
    let frame = next_reply(&mut p).await;
    assert_protocol_error(
        &frame,
        "invalid_framing",
        FRAMING_UTF8,
        None,
        "cut-off sequence",
    );
    let exited = p.wait_exit(WAIT).await;
    assert_eq!(exited.code, Some(1));
    assert_eq!(exited.stderr, format!("{FRAMING_UTF8}\n"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn framing_oversized_record_is_fatal() {
    let env = Env::without_model();
    let mut p = env.spawn().await;
    // 16 MiB + 1 bytes and no newline: the decoder fails without waiting for the LF.
    let bytes = vec![b' '; MIB16 + 1];
    p.send_raw(&bytes).await;
    let frame = next_reply(&mut p).await;
    assert_protocol_error(
        &frame,
        "invalid_framing",
        FRAMING_OVERSIZED,
        None,
        "16 MiB + 1",
    );
    p.send_raw(&line("later", "session.get_state", None)).await;
    let exited = p.wait_exit(WAIT).await;
    assert_eq!(exited.code, Some(1));
    assert_eq!(exited.stderr, format!("{FRAMING_OVERSIZED}\n"));
    assert_eq!(sequences(&p), [1, 2], "{:?}", p.frames());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn framing_oversized_terminated_record_is_fatal() {
    let env = Env::without_model();
    let mut p = env.spawn().await;
    // 16 MiB of content plus a CR: the CR counts, so this record is one byte too long.
    let mut record = br#"{"version":1,"id":"big","method":"session.get_state""#.to_vec();
    record.resize(MIB16 - 1, b' ');
    record.push(b'}');
    record.extend_from_slice(b"\r\n");
    p.send_raw(&record).await;
    let frame = next_reply(&mut p).await;
    assert_protocol_error(
        &frame,
        "invalid_framing",
        FRAMING_OVERSIZED,
        None,
        "CR counts",
    );
    let exited = p.wait_exit(WAIT).await;
    assert_eq!(exited.code, Some(1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn framing_record_of_exactly_16_mib_is_accepted() {
    let env = Env::without_model();
    let mut p = env.spawn().await;
    let mut record = br#"{"version":1,"id":"big","method":"session.get_state""#.to_vec();
    record.resize(MIB16 - 1, b' ');
    record.push(b'}');
    assert_eq!(record.len(), MIB16);
    record.push(b'\n');
    p.send_raw(&record).await;
    assert_success(&next_reply(&mut p).await, "big", "session.get_state");

    // The same size including a trailing CR is also exactly 16 MiB.
    let mut record = br#"{"version":1,"id":"big-cr","method":"session.get_state""#.to_vec();
    record.resize(MIB16 - 2, b' ');
    record.push(b'}');
    record.extend_from_slice(b"\r\n");
    p.send_raw(&record).await;
    assert_success(&next_reply(&mut p).await, "big-cr", "session.get_state");

    let after = p.request("after", "session.get_state", None).await;
    assert_success(&after, "after", "session.get_state");
    p.close_stdin().await;
    assert_eq!(p.wait_exit(WAIT).await.code, Some(0));
}

// ---------------------------------------------------------------------------------------------
// 3. Decoding (docs/rpc.md#decoding-a-request)
// ---------------------------------------------------------------------------------------------

/// (record, code, message, id): the conformance kit's decode cases, then the records it does not
/// send (more shapes of each check, zi's decisions, bounds built at run time).
fn decode_cases() -> Vec<(String, &'static str, String, Option<String>)> {
    let ir = "invalid_request";
    let uv = "unsupported_version";
    let um = "unknown_method";
    let s = |v: &str| v.to_string();
    let id257 = "a".repeat(257);
    let id257_multibyte = format!("{}a", "\u{e9}".repeat(128));
    let long_cid = "c".repeat(257);
    let mut cases: Vec<(String, &'static str, String, Option<String>)> = DECODE_CASES
        .iter()
        .map(|case| {
            let id = case.id.map(str::to_string);
            (s(case.line), case.code, s(case.message), id)
        })
        .collect();
    cases.extend([
        // Not JSON.
        (s("{"), "invalid_json", s(INVALID_JSON), None),
        (
            s(r#"{"version":1,"id":"trunc","method":"session.get_state""#),
            "invalid_json",
            s(INVALID_JSON),
            None,
        ),
        // Not an object.
        (s("[]"), ir, s(NOT_OBJECT), None),
        (
            s(r#"[{"version":1,"id":"a","method":"session.get_state"}]"#),
            ir,
            s(NOT_OBJECT),
            None,
        ),
        (s("null"), ir, s(NOT_OBJECT), None),
        (s(r#""text""#), ir, s(NOT_OBJECT), None),
        (s("42"), ir, s(NOT_OBJECT), None),
        (s("true"), ir, s(NOT_OBJECT), None),
        // Version (checked before the id).
        (
            s(r#"{"version":null,"id":"vn","method":"session.get_state"}"#),
            uv,
            s("Unsupported RPC protocol version: null (expected 1)"),
            Some(s("vn")),
        ),
        (
            s(r#"{"version":true,"id":"vt","method":"session.get_state"}"#),
            uv,
            s("Unsupported RPC protocol version: true (expected 1)"),
            Some(s("vt")),
        ),
        (
            s(r#"{"version":1.5,"id":"vf","method":"session.get_state"}"#),
            uv,
            s("Unsupported RPC protocol version: 1.5 (expected 1)"),
            Some(s("vf")),
        ),
        (
            s(r#"{"method":"session.get_state"}"#),
            uv,
            s("Unsupported RPC protocol version: undefined (expected 1)"),
            None,
        ),
        (
            s(r#"{"version":2,"id":"","method":"session.get_state"}"#),
            uv,
            s("Unsupported RPC protocol version: 2 (expected 1)"),
            None,
        ),
        (
            format!(r#"{{"version":3,"id":"{id257}","method":"session.get_state"}}"#),
            uv,
            s("Unsupported RPC protocol version: 3 (expected 1)"),
            None,
        ),
        // Numbers beyond the double range are JavaScript's ±Infinity (JSON.parse).
        (
            s(r#"{"version":1e400,"id":"vinf","method":"session.get_state"}"#),
            uv,
            s("Unsupported RPC protocol version: Infinity (expected 1)"),
            Some(s("vinf")),
        ),
        (
            s(r#"{"version":[-1e400,2],"id":"vninf","method":"session.get_state"}"#),
            uv,
            s("Unsupported RPC protocol version: -Infinity,2 (expected 1)"),
            Some(s("vninf")),
        ),
        (
            s(
                r#"{"version":1,"id":"inf-start","method":"session.get_messages","params":{"start":1e400}}"#,
            ),
            ir,
            s("Message start must be a non-negative integer"),
            Some(s("inf-start")),
        ),
        (
            s(
                r#"{"version":1,"id":"inf-limit","method":"session.get_outcomes","params":{"limit":1e400}}"#,
            ),
            ir,
            s("Outcome limit must be an integer from 1 through 100"),
            Some(s("inf-limit")),
        ),
        (
            s(r#"{"version":1,"id":1e400,"method":"session.get_state"}"#),
            ir,
            s(BAD_ID),
            None,
        ),
        (
            s(
                r#"{"version":1,"id":"inf-text","method":"session.prompt","params":{"delivery":"direct","text":1e400}}"#,
            ),
            ir,
            s("Prompt text must be a string of at most 8388608 bytes"),
            Some(s("inf-text")),
        ),
        (
            s(r#"{"version":1e400,"#),
            "invalid_json",
            s(INVALID_JSON),
            None,
        ),
        // Ids.
        (
            s(r#"{"version":1,"method":"session.get_state"}"#),
            ir,
            s(BAD_ID),
            None,
        ),
        (
            s(r#"{"version":1,"id":7,"method":"session.get_state"}"#),
            ir,
            s(BAD_ID),
            None,
        ),
        (
            s(r#"{"version":1,"id":null,"method":"session.get_state"}"#),
            ir,
            s(BAD_ID),
            None,
        ),
        (
            format!(r#"{{"version":1,"id":"{id257_multibyte}","method":"session.get_state"}}"#),
            ir,
            s(BAD_ID),
            None,
        ),
        // Method.
        (
            s(r#"{"version":1,"id":"m0"}"#),
            ir,
            s(METHOD_NOT_STRING),
            Some(s("m0")),
        ),
        (
            s(r#"{"version":1,"id":"mn","method":null}"#),
            ir,
            s(METHOD_NOT_STRING),
            Some(s("mn")),
        ),
        (
            s(r#"{"version":1,"id":"u2","method":"Session.Get_State"}"#),
            um,
            s("Unknown RPC method: Session.Get_State"),
            Some(s("u2")),
        ),
        // Top-level keys.
        (
            s(r#"{"version":1,"id":"gn","method":"session.get_state","params":null}"#),
            ir,
            s(UNKNOWN_FIELDS),
            Some(s("gn")),
        ),
        (
            s(r#"{"version":1,"id":"ip","method":"session.interrupt","params":{}}"#),
            ir,
            s(UNKNOWN_FIELDS),
            Some(s("ip")),
        ),
        (
            s(r#"{"version":1,"id":"cl","method":"command.list","params":{}}"#),
            ir,
            s(UNKNOWN_FIELDS),
            Some(s("cl")),
        ),
        (
            s(r#"{"version":1,"id":"mlp","method":"model.list","params":{}}"#),
            ir,
            s(UNKNOWN_FIELDS),
            Some(s("mlp")),
        ),
        (
            s(r#"{"version":1,"id":"tlp","method":"thinking.list","params":{}}"#),
            ir,
            s(UNKNOWN_FIELDS),
            Some(s("tlp")),
        ),
        // Params presence and shape.
        (
            s(r#"{"version":1,"id":"pn","method":"session.prompt","params":null}"#),
            ir,
            s("session.prompt params must be an object"),
            Some(s("pn")),
        ),
        (
            s(r#"{"version":1,"id":"gm","method":"session.get_messages","params":"x"}"#),
            ir,
            s("session.get_messages params must be an object"),
            Some(s("gm")),
        ),
        (
            s(r#"{"version":1,"id":"an","method":"session.await_idle","params":null}"#),
            ir,
            s("session.await_idle params must be an object"),
            Some(s("an")),
        ),
        (
            s(r#"{"version":1,"id":"se0","method":"connection.set_events"}"#),
            ir,
            s(MISSING_FIELDS),
            Some(s("se0")),
        ),
        (
            s(r#"{"version":1,"id":"ci0","method":"command.invoke"}"#),
            ir,
            s(MISSING_FIELDS),
            Some(s("ci0")),
        ),
        (
            s(r#"{"version":1,"id":"ms0","method":"model.select"}"#),
            ir,
            s(MISSING_FIELDS),
            Some(s("ms0")),
        ),
        (
            s(r#"{"version":1,"id":"ts0","method":"thinking.select"}"#),
            ir,
            s(MISSING_FIELDS),
            Some(s("ts0")),
        ),
    ]);

    // Per-method params: (method, params, message).
    let per_method: Vec<(&str, Value, String)> = vec![
        (
            "session.get_messages",
            json!({"start": "1"}),
            s("Message start must be a non-negative integer"),
        ),
        (
            "session.get_messages",
            json!({"start": 1.5}),
            s("Message start must be a non-negative integer"),
        ),
        (
            "session.get_messages",
            json!({"limit": 0}),
            s("Message limit must be an integer from 1 through 100"),
        ),
        (
            "session.get_messages",
            json!({"start": -1, "limit": 101}),
            s("Message start must be a non-negative integer"),
        ),
        (
            "session.get_messages",
            json!({"start": 0, "extra": 1}),
            s(UNKNOWN_FIELDS),
        ),
        (
            "session.get_outcomes",
            json!({"start": -1}),
            s("Outcome start must be a non-negative integer"),
        ),
        (
            "session.get_outcomes",
            json!({"limit": "5"}),
            s("Outcome limit must be an integer from 1 through 100"),
        ),
        (
            "session.prompt",
            json!({"delivery": "followUp", "text": "x"}),
            s("Prompt delivery must be direct, steer, follow_up, or continue"),
        ),
        (
            "session.prompt",
            json!({"delivery": null, "text": "x"}),
            s("Prompt delivery must be direct, steer, follow_up, or continue"),
        ),
        (
            "session.prompt",
            json!({"delivery": "direct", "text": 5}),
            s("Prompt text must be a string of at most 8388608 bytes"),
        ),
        (
            "session.prompt",
            // Prompt keys are a subset (docs/rpc.md#params-of-each-method): a missing key fails its
            // own check.
            json!({"delivery": "direct"}),
            s("Prompt text must be a string of at most 8388608 bytes"),
        ),
        (
            "session.prompt",
            json!({"text": "x"}),
            s("Prompt delivery must be direct, steer, follow_up, or continue"),
        ),
        (
            "session.prompt",
            json!({}),
            s("Prompt delivery must be direct, steer, follow_up, or continue"),
        ),
        (
            "session.prompt",
            json!({"delivery": "later", "bogus": 1}),
            s(UNKNOWN_FIELDS),
        ),
        (
            "session.prompt",
            json!({"delivery": "direct", "text": "x", "completionId": ""}),
            s("Completion id must be a non-empty string of at most 256 bytes"),
        ),
        (
            "session.prompt",
            json!({"delivery": "direct", "text": "x", "completionId": long_cid}),
            s("Completion id must be a non-empty string of at most 256 bytes"),
        ),
        (
            "session.await_idle",
            json!({"completionId": 1}),
            s("Completion id must be a non-empty string of at most 256 bytes"),
        ),
        (
            "session.await_idle",
            json!({"completionId": "a", "x": 1}),
            s(UNKNOWN_FIELDS),
        ),
        (
            "connection.set_events",
            json!({"mode": null}),
            s("Event mode must be all, none, or activity"),
        ),
        ("connection.set_events", json!({}), s(MISSING_FIELDS)),
        (
            "command.invoke",
            json!({"name": "trailing-", "arguments": ""}),
            s("Command name must use lowercase kebab-case"),
        ),
        (
            "command.invoke",
            json!({"name": "", "arguments": ""}),
            s("Command name must be a non-empty string of at most 64 bytes"),
        ),
        (
            "command.invoke",
            json!({"name": "a".repeat(65), "arguments": ""}),
            s("Command name must be a non-empty string of at most 64 bytes"),
        ),
        (
            "command.invoke",
            json!({"name": "x", "arguments": 5}),
            s("Command arguments must be a string of at most 262144 bytes"),
        ),
        (
            "command.invoke",
            json!({"name": "x", "arguments": "a".repeat(262_145)}),
            s("Command arguments must be a string of at most 262144 bytes"),
        ),
        (
            "command.invoke",
            json!({"name": "x", "arguments": "", "more": 1}),
            s(UNKNOWN_FIELDS),
        ),
        (
            "model.select",
            json!({"provider": "p".repeat(257), "id": "x"}),
            s("Model provider must be a non-empty string of at most 256 bytes"),
        ),
        (
            "model.select",
            json!({"provider": "p", "id": ""}),
            s("Model id must be a non-empty string of at most 256 bytes"),
        ),
        (
            "model.select",
            json!({"provider": "p", "id": 3}),
            s("Model id must be a non-empty string of at most 256 bytes"),
        ),
        ("model.select", json!({"provider": "p"}), s(MISSING_FIELDS)),
        (
            "model.select",
            json!({"provider": "p", "id": "x", "x": 1}),
            s(UNKNOWN_FIELDS),
        ),
        (
            "thinking.select",
            json!({}),
            s("Unsupported thinking level"),
        ),
        (
            "thinking.select",
            json!({"level": "high", "x": 1}),
            s(UNKNOWN_FIELDS),
        ),
    ];
    for (n, (method, params, message)) in per_method.into_iter().enumerate() {
        let id = format!("pm-{n}");
        let record = json!({"version": 1, "id": id, "method": method, "params": params});
        cases.push((record.to_string(), ir, message, Some(id)));
    }
    cases
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn decoding_rejects_malformed_requests_with_exact_codes_messages_and_ids() {
    let mock = mock().await;
    let env = Env::with_model(&mock);
    let mut p = env.spawn().await;

    for (record, code, message, id) in decode_cases() {
        let mut bytes = record.clone().into_bytes();
        bytes.push(b'\n');
        p.send_raw(&bytes).await;
        let frame = next_reply(&mut p).await;
        let what: String = record.chars().take(160).collect();
        assert_protocol_error(&frame, code, &message, id.as_deref(), &what);
    }

    // The connection is still open and nothing was launched.
    let state = p.request_ok("alive", "session.get_state", None).await;
    assert_eq!(state["messageCount"], 0);
    assert_eq!(
        state["queuedInputs"],
        json!({"steering": [], "followUp": []})
    );
    assert_eq!(state["activity"], json!({"type": "idle"}));
    assert!(
        mock.requests().is_empty(),
        "a rejected prompt reached the provider"
    );
    p.close_stdin().await;
    assert_eq!(p.wait_exit(WAIT).await.code, Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn decoding_accepts_bounds_and_null_defaults() {
    let mock = mock().await;
    let env = Env::with_model(&mock);
    let mut p = env.spawn().await;

    // Request ids of exactly 256 bytes (ASCII and multibyte).
    for id in ["a".repeat(256), "\u{e9}".repeat(128)] {
        let frame = p.request(&id, "session.get_state", None).await;
        assert_success(&frame, &id, "session.get_state");
    }

    // JSON edge cases (docs/rpc.md decision 7): 1.0 is the integer 1, the last duplicate key wins.
    p.send_raw(b"{\"version\":1.0,\"id\":\"float\",\"method\":\"session.get_state\"}\n")
        .await;
    assert_success(&next_reply(&mut p).await, "float", "session.get_state");
    p.send_raw(
        b"{\"version\":1,\"id\":\"first\",\"id\":\"last\",\"method\":\"session.get_state\"}\n",
    )
    .await;
    assert_success(&next_reply(&mut p).await, "last", "session.get_state");
    p.send_raw(b"{\"version\":1,\"id\":\"f2\",\"method\":\"session.get_messages\",\"params\":{\"start\":2.0,\"limit\":1.0}}\n")
        .await;
    let page = assert_success(&next_reply(&mut p).await, "f2", "session.get_messages");
    assert_eq!(page["start"], 2);
    p.send_raw(b"{\"version\":1,\"id\":\"sur\\ud800\",\"method\":\"session.get_state\"}\n")
        .await;
    assert_protocol_error(
        &next_reply(&mut p).await,
        "invalid_json",
        INVALID_JSON,
        None,
        "lone surrogate",
    );

    // null for start/limit means the default.
    let page = p
        .request_ok(
            "gm",
            "session.get_messages",
            Some(json!({"start": null, "limit": null})),
        )
        .await;
    assert_eq!(
        page,
        json!({"start": 0, "total": 0, "nextStart": null, "messages": []})
    );
    let page = p
        .request_ok(
            "go",
            "session.get_outcomes",
            Some(json!({"start": null, "limit": null})),
        )
        .await;
    assert_eq!(
        page,
        json!({"start": 0, "total": 0, "nextStart": null, "outcomes": []})
    );
    // params are optional for the pages; limit 100 and start 0 are in range.
    let page = p
        .request_ok("gm2", "session.get_messages", Some(json!({"limit": 100})))
        .await;
    assert_eq!(page["start"], 0);
    let page = p
        .request_ok("gm3", "session.get_messages", Some(json!({})))
        .await;
    assert_eq!(page["start"], 0);

    // null scope means global.
    let selected = p
        .request_ok(
            "ts",
            "thinking.select",
            Some(json!({"level": "off", "scope": null})),
        )
        .await;
    assert_eq!(
        selected,
        json!({"scope": "global", "requested": "off", "effective": "off"})
    );

    // Bounds that are exactly at the limit decode; the operation then decides.
    let frame = p
        .request(
            "ci",
            "command.invoke",
            Some(json!({"name": "a".repeat(64), "arguments": "a".repeat(262_144)})),
        )
        .await;
    assert_failure(
        &frame,
        "ci",
        "command.invoke",
        "not_found",
        &format!("Command not found: {}", "a".repeat(64)),
    );
    let provider = "p".repeat(256);
    let frame = p
        .request(
            "ms",
            "model.select",
            Some(json!({"provider": provider, "id": "x"})),
        )
        .await;
    assert_failure(
        &frame,
        "ms",
        "model.select",
        "not_found",
        &format!("Model not found: {provider}/x"),
    );
    let cid = "c".repeat(256);
    let frame = p
        .request(
            "aw",
            "session.await_idle",
            Some(json!({"completionId": cid})),
        )
        .await;
    assert_failure(
        &frame,
        "aw",
        "session.await_idle",
        "operation_failed",
        &format!("Completion watch is not active: {cid}"),
    );

    // Empty prompt text is allowed; steer while idle only queues.
    let queued = p
        .request_ok(
            "st",
            "session.prompt",
            Some(json!({"delivery": "steer", "text": ""})),
        )
        .await;
    assert_eq!(queued, json!({"delivery": "steer"}));
    let state = p.request_ok("s", "session.get_state", None).await;
    assert_eq!(state["activity"], json!({"type": "idle"}));
    assert_eq!(state["queuedInputs"]["steering"][0]["text"], "");
    assert_eq!(state["queuedInputs"]["steering"][0]["delivery"], "steer");

    p.close_stdin().await;
    assert_eq!(p.wait_exit(WAIT).await.code, Some(0));
    assert!(mock.requests().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn decoding_rejects_prompt_text_over_8_mib() {
    let env = Env::without_model();
    let mut p = env.spawn().await;
    let text = "x".repeat(8_388_609);
    let frame = p
        .request(
            "big",
            "session.prompt",
            Some(json!({"delivery": "steer", "text": text})),
        )
        .await;
    assert_protocol_error(
        &frame,
        "invalid_request",
        "Prompt text must be a string of at most 8388608 bytes",
        Some("big"),
        "8 MiB + 1",
    );
    // Exactly 8 MiB decodes (steer does not need a model).
    let text = "x".repeat(8_388_608);
    let ok = p
        .request_ok(
            "max",
            "session.prompt",
            Some(json!({"delivery": "steer", "text": text})),
        )
        .await;
    assert_eq!(ok, json!({"delivery": "steer"}));
    p.close_stdin().await;
    assert_eq!(p.wait_exit(WAIT).await.code, Some(0));
}

// ---------------------------------------------------------------------------------------------
// 4. Request ids (docs/rpc.md#request-ids-and-capacity)
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ids_duplicate_in_flight_is_rejected_with_id_and_original_still_answers_once() {
    let mock = mock().await;
    let env = Env::with_model(&mock);
    let mut p = env.spawn().await;
    start_hanging_run(&mut p, &mock, "run").await;

    p.send("w", "session.await_idle", None).await;
    p.send("w", "session.await_idle", None).await;
    let frame = p.protocol_error(Some("w")).await;
    assert_protocol_error(
        &frame,
        "invalid_request",
        IN_FLIGHT,
        Some("w"),
        "duplicate w",
    );

    // The same id in the reserved interruption slot is rejected and not launched.
    p.send("w", "session.interrupt", None).await;
    let frame = p.protocol_error(Some("w")).await;
    assert_protocol_error(
        &frame,
        "invalid_request",
        IN_FLIGHT,
        Some("w"),
        "interrupt w",
    );
    // A different method with the same id, with params, is also a duplicate.
    p.send("w", "session.get_messages", Some(json!({"start": 0})))
        .await;
    let frame = p.protocol_error(Some("w")).await;
    assert_protocol_error(
        &frame,
        "invalid_request",
        IN_FLIGHT,
        Some("w"),
        "get_messages w",
    );

    let state = p.request_ok("s1", "session.get_state", None).await;
    assert_eq!(
        state["activity"],
        json!({"type": "running"}),
        "the run goes on"
    );
    assert_eq!(
        mock.disconnects(),
        0,
        "the duplicate interrupt was not launched"
    );

    // The original is unaffected: an interrupt ends the run and w is answered once.
    let frame = p.request("stop", "session.interrupt", None).await;
    assert_eq!(
        assert_success(&frame, "stop", "session.interrupt"),
        json!({})
    );
    let frame = p.response("w").await;
    assert_eq!(assert_success(&frame, "w", "session.await_idle"), json!({}));
    assert_eq!(mock.wait_for_disconnects(1, WAIT).await, 1);

    // Once answered, the id is free again: reuse starts a new operation.
    let frame = p.request("w", "session.get_state", None).await;
    let state = assert_success(&frame, "w", "session.get_state");
    assert_eq!(state["activity"], json!({"type": "idle"}));

    // Across the slots the other way: an interrupt is in flight and an ordinary request reuses
    // its id.
    let (i, frame) = while_interrupt_in_flight(&mut p, &mock, "i", "session.get_state", None).await;
    assert_protocol_error(&frame, "invalid_request", IN_FLIGHT, Some(&i), "ordinary i");
    let frame = p.request(&i, "session.interrupt", None).await;
    assert_eq!(assert_success(&frame, &i, "session.interrupt"), json!({}));

    p.close_stdin().await;
    assert_eq!(p.wait_exit(WAIT).await.code, Some(0));
    let responses_w = count_frames(&p, |f| f["type"] == "response" && f["id"] == "w");
    assert_eq!(responses_w, 2, "the first w once, the reuse once");
    let responses_i = count_frames(&p, |f| f["type"] == "response" && f["id"] == i.as_str());
    assert_eq!(responses_i, 2, "the interrupt once, the reuse once");
    let errors_w = count_frames(&p, |f| f["type"] == "protocol_error" && f["id"] == "w");
    assert_eq!(errors_w, 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ids_are_reusable_after_success_failure_and_rejection() {
    let env = Env::without_model();
    let mut p = env.spawn().await;

    // After a success.
    for _ in 0..3 {
        let frame = p.request("same", "session.get_state", None).await;
        assert_success(&frame, "same", "session.get_state");
    }
    // After a failure response: a new operation, not a replay.
    let frame = p
        .request(
            "f",
            "model.select",
            Some(json!({"provider": "p", "id": "x"})),
        )
        .await;
    assert_failure(
        &frame,
        "f",
        "model.select",
        "not_found",
        "Model not found: p/x",
    );
    let frame = p.request("f", "command.list", None).await;
    assert_eq!(
        assert_success(&frame, "f", "command.list"),
        json!({"commands": []})
    );
    let frame = p
        .request(
            "f",
            "session.prompt",
            Some(json!({"delivery": "direct", "text": "hi"})),
        )
        .await;
    assert_failure(
        &frame,
        "f",
        "session.prompt",
        "operation_failed",
        "No model selected. Use /login, then /model.",
    );
    let frame = p.request("f", "session.get_state", None).await;
    assert_success(&frame, "f", "session.get_state");

    // A record rejected before admission never occupies its id.
    let frame = p.request("x", "session.nope", None).await;
    assert_protocol_error(
        &frame,
        "unknown_method",
        "Unknown RPC method: session.nope",
        Some("x"),
        "x",
    );
    let frame = p.request("x", "session.get_state", None).await;
    assert_success(&frame, "x", "session.get_state");

    p.close_stdin().await;
    assert_eq!(p.wait_exit(WAIT).await.code, Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ids_can_be_reused_as_soon_as_the_response_is_read() {
    let env = Env::without_model();
    let mut p = env.spawn().await;
    // docs/rpc.md#request-ids-and-capacity: an id is free once its response has been written, so a
    // client may reuse it as soon as it has read the response, however fast it is.
    for n in 0..1000 {
        let frame = p.request("fast", "session.get_state", None).await;
        assert_eq!(frame["type"], "response", "iteration {n}: {frame}");
    }

    p.close_stdin().await;
    assert_eq!(p.wait_exit(WAIT).await.code, Some(0));
}

// ---------------------------------------------------------------------------------------------
// 5. Capacity (docs/rpc.md#request-ids-and-capacity)
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn capacity_bounds_waits_and_reserves_one_interruption() {
    let mock = mock().await;
    let env = Env::with_model(&mock);
    let mut p = env.spawn().await;
    start_hanging_run(&mut p, &mock, "run").await;

    for n in 0..33 {
        p.send(&format!("wait-{n}"), "session.await_idle", None)
            .await;
    }
    let frame = p.response("wait-32").await;
    assert_failure(
        &frame,
        "wait-32",
        "session.await_idle",
        "capacity",
        CAPACITY_ORDINARY,
    );
    // Nothing else was answered meanwhile: the run hangs.
    assert_eq!(
        count_frames(&p, |f| f["type"] == "response"
            && f["id"].as_str().is_some_and(|id| id.starts_with("wait-"))),
        1
    );

    // The rejected id is free, and the interruption slot is independent of the 32. A second
    // interrupt follows in the same write, normally arriving while the first is in flight.
    let mut both = line("wait-32", "session.interrupt", None);
    both.extend(line("int-2", "session.interrupt", None));
    p.send_raw(&both).await;
    let first = p.response("wait-32").await;
    assert_eq!(
        assert_success(&first, "wait-32", "session.interrupt"),
        json!({})
    );
    let second = p.response("int-2").await;
    let overlapped = second["ok"] == false;
    if overlapped {
        assert_failure(
            &second,
            "int-2",
            "session.interrupt",
            "capacity",
            CAPACITY_INTERRUPT,
        );
    } else {
        // The first interrupt settled before int-2 was read: then int-2 must come after it.
        assert!(
            second["sequence"].as_u64() > first["sequence"].as_u64(),
            "two interrupts ran at once: {first} / {second}"
        );
    }

    for n in 0..32 {
        let id = format!("wait-{n}");
        let frame = p.response(&id).await;
        assert_eq!(assert_success(&frame, &id, "session.await_idle"), json!({}));
    }
    assert!(mock.wait_for_disconnects(1, WAIT).await >= 1);

    if !overlapped {
        let (_, frame) =
            while_interrupt_in_flight(&mut p, &mock, "ia", "session.interrupt", Some("ib")).await;
        let id = frame["id"].as_str().unwrap_or_default().to_string();
        assert_failure(
            &frame,
            &id,
            "session.interrupt",
            "capacity",
            CAPACITY_INTERRUPT,
        );
    }

    // Every slot is free again.
    let state = p.request_ok("s", "session.get_state", None).await;
    assert_eq!(state["activity"], json!({"type": "idle"}));
    let frame = p.request("int-3", "session.interrupt", None).await;
    assert_success(&frame, "int-3", "session.interrupt");

    p.close_stdin().await;
    assert_eq!(p.wait_exit(WAIT).await.code, Some(0));
    assert_eq!(
        count_frames(&p, |f| f["type"] == "response" && f["id"] == "wait-32"),
        2
    );
}

// ---------------------------------------------------------------------------------------------
// 6. Event modes (docs/rpc.md#connectionset_events)
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn event_modes_none_suppresses_only_session_events() {
    let mock = mock().await;
    let env = Env::with_model(&mock);
    let mut p = env.spawn().await;

    let frame = p
        .request("e1", "connection.set_events", Some(json!({"mode": "none"})))
        .await;
    assert_eq!(
        assert_success(&frame, "e1", "connection.set_events"),
        json!({"mode": "none"})
    );

    mock.push(Step::text("hello"));
    let result = p
        .request_ok(
            "p1",
            "session.prompt",
            Some(json!({"delivery": "direct", "text": "hi", "completionId": "c1"})),
        )
        .await;
    assert_eq!(
        result,
        json!({"delivery": "direct", "completionRevision": 1})
    );
    // The completion watch still observes the run while events are suppressed.
    let idle = p
        .request_ok(
            "w1",
            "session.await_idle",
            Some(json!({"completionId": "c1"})),
        )
        .await;
    // The v1 keys, plus the cycle's usage (issue 14.3): the one assistant message's.
    let mut idle = idle;
    let usage = idle.as_object_mut().and_then(|o| o.remove("usage"));
    assert_eq!(
        idle,
        json!({
            "completionRevision": 1,
            "messageCount": 2,
            "completion": {"text": "hello", "stopReason": "stop", "originalBytes": 5, "omittedBytes": 0}
        })
    );
    let page = p.request_ok("m1", "session.get_messages", None).await;
    assert_eq!(usage.as_ref(), Some(&page["messages"][1]["usage"]));
    let state = p.request_ok("s1", "session.get_state", None).await;
    assert_eq!(state["messageCount"], 2);
    // Protocol errors are never suppressed.
    p.send_raw(b"\n").await;
    let frame = p.protocol_error(None).await;
    assert_eq!(frame["code"], "invalid_json");

    let frame = p
        .request("e2", "connection.set_events", Some(json!({"mode": "all"})))
        .await;
    assert_eq!(
        assert_success(&frame, "e2", "connection.set_events"),
        json!({"mode": "all"})
    );
    assert_eq!(
        p.event_types(),
        Vec::<String>::new(),
        "no session_event while the mode was none"
    );

    mock.push(Step::text("again"));
    p.request_ok("p2", "session.prompt", prompt_params("more"))
        .await;
    p.request_ok("w2", "session.await_idle", None).await;
    p.event("agent_settled").await;
    let types = p.event_types();
    assert_eq!(
        types.first().map(String::as_str),
        Some("agent_start"),
        "{types:?}"
    );
    assert!(types.iter().any(|t| t == "message_end"), "{types:?}");

    // activity is accepted and events flow (never leaving sequence gaps; the harness checks).
    let frame = p
        .request(
            "e3",
            "connection.set_events",
            Some(json!({"mode": "activity"})),
        )
        .await;
    assert_eq!(
        assert_success(&frame, "e3", "connection.set_events"),
        json!({"mode": "activity"})
    );
    let before = p.event_types().len();
    mock.push(Step::text("third"));
    p.request_ok("p3", "session.prompt", prompt_params("third"))
        .await;
    p.request_ok("w3", "session.await_idle", None).await;
    p.event("agent_settled").await;
    assert!(p.event_types().len() > before);
    let state = p.request_ok("s2", "session.get_state", None).await;
    assert_eq!(state["messageCount"], 6);

    p.close_stdin().await;
    assert_eq!(p.wait_exit(WAIT).await.code, Some(0));
    let seq = sequences(&p);
    assert_eq!(seq, (1..=seq.len() as u64).collect::<Vec<_>>());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn event_mode_changes_apply_in_input_order() {
    let mock = mock().await;
    let env = Env::with_model(&mock);
    let mut p = env.spawn().await;
    mock.push(Step::text("quiet"));
    // Mode none, then a prompt, in one write: not a single event of the run may be sent.
    let mut bytes = line("e", "connection.set_events", Some(json!({"mode": "none"})));
    bytes.extend(line("p", "session.prompt", prompt_params("x")));
    bytes.extend(line("w", "session.await_idle", None));
    p.send_raw(&bytes).await;
    p.response("w").await;
    let frame = p
        .request("e2", "connection.set_events", Some(json!({"mode": "all"})))
        .await;
    assert_success(&frame, "e2", "connection.set_events");
    assert_eq!(p.event_types(), Vec::<String>::new());
    let order: Vec<&str> = p.frames().iter().filter_map(|f| f["id"].as_str()).collect();
    assert_eq!(order, ["e", "p", "w", "e2"]);
    p.close_stdin().await;
    assert_eq!(p.wait_exit(WAIT).await.code, Some(0));
}

/// 17 MiB of reply text in one delta: every event carrying it is larger than an output record.
const HUGE_REPLY: usize = 17 * 1024 * 1024;
const HUGE_REPLY_DEADLINE: Duration = Duration::from_secs(180);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn event_mode_activity_drops_oversized_events_without_sequence_gaps() {
    let mock = mock().await;
    let env = Env::with_model(&mock);
    let mut p = env.spawn().await;
    // 17 MiB through a debug build on a loaded machine: a deadline for hangs, not speed.
    p.set_timeout(HUGE_REPLY_DEADLINE);
    p.request_ok(
        "e",
        "connection.set_events",
        Some(json!({"mode": "activity"})),
    )
    .await;
    mock.push(Step::Bytes {
        total_bytes: HUGE_REPLY,
        delta_bytes: HUGE_REPLY,
    });
    p.request_ok(
        "p",
        "session.prompt",
        Some(json!({"delivery": "direct", "text": "big", "completionId": "huge"})),
    )
    .await;
    let idle = p
        .request_ok(
            "w",
            "session.await_idle",
            Some(json!({"completionId": "huge"})),
        )
        .await;
    assert_eq!(idle["completionRevision"], 1);
    assert_eq!(idle["messageCount"], 2);
    let completion = &idle["completion"];
    assert_eq!(completion["stopReason"], "stop");
    assert_eq!(completion["originalBytes"], HUGE_REPLY);
    assert_eq!(completion["omittedBytes"], HUGE_REPLY - 51_200);
    assert_eq!(completion["text"].as_str().map(str::len), Some(51_200));
    p.event("agent_settled").await;

    // The connection survived; the oversized events were dropped, the small ones delivered.
    let types = p.event_types();
    assert!(types.iter().any(|t| t == "agent_start"), "{types:?}");
    assert!(
        !p.frames().iter().any(|f| f["type"] == "session_event"
            && f["event"]["type"] == "message_end"
            && f["event"]["message"]["role"] == "assistant"),
        "an assistant message_end over 16 MiB was sent"
    );

    // A message over the page byte bound fails the page that reaches it.
    let frame = p.request("m", "session.get_messages", None).await;
    assert_failure(
        &frame,
        "m",
        "session.get_messages",
        "operation_failed",
        "Session message 1 exceeds the RPC page byte bound",
    );
    let page = p
        .request_ok("m0", "session.get_messages", Some(json!({"limit": 1})))
        .await;
    assert_eq!(page["total"], 2);
    assert_eq!(page["nextStart"], 1);
    assert_eq!(page["messages"][0]["role"], "user");

    p.close_stdin().await;
    let exited = p.wait_exit(WAIT).await;
    assert_eq!(exited.code, Some(0), "{}", exited.stderr);
    let seq = sequences(&p);
    assert_eq!(seq, (1..=seq.len() as u64).collect::<Vec<_>>());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn event_mode_all_fails_the_connection_on_an_oversized_event() {
    let mock = mock().await;
    let env = Env::with_model(&mock);
    let mut p = env.spawn().await;
    // 17 MiB through a debug build on a loaded machine: a deadline for hangs, not speed.
    p.set_timeout(HUGE_REPLY_DEADLINE);
    mock.push(Step::Bytes {
        total_bytes: HUGE_REPLY,
        delta_bytes: HUGE_REPLY,
    });
    p.request_ok("p", "session.prompt", prompt_params("big"))
        .await;
    let exited = p.wait_exit(HUGE_REPLY_DEADLINE).await;
    assert_eq!(exited.code, Some(1));
    assert!(
        exited
            .stderr
            .lines()
            .any(|l| l == "RPC output records cannot exceed 16777216 bytes"),
        "{}",
        exited.stderr
    );
    let seq = sequences(&p);
    assert_eq!(seq, (1..=seq.len() as u64).collect::<Vec<_>>());
}

// ---------------------------------------------------------------------------------------------
// 7. Paging (docs/rpc.md#sessionget_messages, docs/rpc.md#sessionget_outcomes)
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paging_messages_and_outcomes() {
    let mock = mock().await;
    let env = Env::with_model(&mock);
    let mut p = env.spawn().await;
    mock.push(Step::text("one"));
    mock.push(Step::text("two"));
    p.request_ok("p1", "session.prompt", prompt_params("first"))
        .await;
    p.request_ok("w1", "session.await_idle", None).await;
    p.request_ok("p2", "session.prompt", prompt_params("second"))
        .await;
    p.request_ok("w2", "session.await_idle", None).await;

    let page = p.request_ok("m0", "session.get_messages", None).await;
    assert_eq!(keys(&page), ["start", "total", "nextStart", "messages"]);
    assert_eq!(page["start"], 0);
    assert_eq!(page["total"], 4);
    assert_eq!(page["nextStart"], Value::Null);
    let messages = page["messages"].as_array().unwrap();
    let roles: Vec<&str> = messages
        .iter()
        .map(|m| m["role"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(roles, ["user", "assistant", "user", "assistant"]);
    let texts: Vec<&str> = messages
        .iter()
        .map(|m| m["content"][0]["text"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(texts, ["first", "one", "second", "two"]);

    let page = p
        .request_ok(
            "m1",
            "session.get_messages",
            Some(json!({"start": 1, "limit": 2})),
        )
        .await;
    assert_eq!(page["start"], 1);
    assert_eq!(page["total"], 4);
    assert_eq!(page["nextStart"], 3);
    assert_eq!(page["messages"].as_array().unwrap().len(), 2);
    assert_eq!(page["messages"][0], messages[1]);
    assert_eq!(page["messages"][1], messages[2]);

    let page = p
        .request_ok(
            "m2",
            "session.get_messages",
            Some(json!({"start": 3, "limit": 1})),
        )
        .await;
    assert_eq!(page["nextStart"], Value::Null);
    assert_eq!(page["messages"], json!([messages[3]]));

    let page = p
        .request_ok(
            "m3",
            "session.get_messages",
            Some(json!({"start": 0, "limit": 3})),
        )
        .await;
    assert_eq!(page["nextStart"], 3);

    for start in [4, 99] {
        let page = p
            .request_ok(
                &format!("m-{start}"),
                "session.get_messages",
                Some(json!({"start": start})),
            )
            .await;
        assert_eq!(
            page,
            json!({"start": start, "total": 4, "nextStart": null, "messages": []})
        );
    }

    let page = p.request_ok("o0", "session.get_outcomes", None).await;
    assert_eq!(keys(&page), ["start", "total", "nextStart", "outcomes"]);
    assert_eq!(
        page,
        json!({"start": 0, "total": 0, "nextStart": null, "outcomes": []})
    );
    let page = p
        .request_ok(
            "o1",
            "session.get_outcomes",
            Some(json!({"start": 5, "limit": 2})),
        )
        .await;
    assert_eq!(
        page,
        json!({"start": 5, "total": 0, "nextStart": null, "outcomes": []})
    );

    p.close_stdin().await;
    assert_eq!(p.wait_exit(WAIT).await.code, Some(0));
}

// ---------------------------------------------------------------------------------------------
// 8. Shutdown, EOF, signals (docs/rpc.md#shutdown-eof-signals-and-exit-codes)
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_eof_while_idle_exits_zero_silently() {
    let env = Env::without_model();
    let mut p = env.spawn().await;
    let pid = p.pid();
    let kids = descendants(pid);
    p.close_stdin().await;
    let exited = p.wait_exit(SETTLE).await;
    assert_eq!(exited.code, Some(0));
    assert_eq!(exited.stderr, "");
    assert_eq!(sequences(&p), [1]);
    assert_nothing_left(pid, &kids).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_eof_during_a_run_interrupts_it_and_answers_in_flight_requests() {
    let mock = mock().await;
    let env = Env::with_model(&mock);
    let mut p = env.spawn().await;
    let pid = p.pid();
    start_hanging_run(&mut p, &mock, "run").await;
    p.event("message_update").await;
    p.send("w", "session.await_idle", None).await;
    let kids = descendants(pid);
    let started = std::time::Instant::now();
    p.close_stdin().await;
    let frame = p.response("w").await;
    assert_eq!(assert_success(&frame, "w", "session.await_idle"), json!({}));
    let exited = p.wait_exit(SETTLE).await;
    assert!(started.elapsed() < SETTLE, "{:?}", started.elapsed());
    assert_eq!(exited.code, Some(0), "stderr: {}", exited.stderr);
    assert!(
        mock.wait_for_disconnects(1, WAIT).await >= 1,
        "the provider request was not dropped"
    );
    // Events stop with the connection: the interrupted run's end is not forwarded.
    let types = p.event_types();
    assert!(
        !types
            .iter()
            .any(|t| t == "agent_end" || t == "agent_settled"),
        "session events after EOF: {types:?}"
    );
    assert_nothing_left(pid, &kids).await;
}

async fn signal_case(sig: i32, code: i32) {
    // Idle.
    let env = Env::without_model();
    let mut p = env.spawn().await;
    let pid = p.pid();
    let kids = descendants(pid);
    p.signal(sig);
    let exited = p.wait_exit(SETTLE + Duration::from_secs(1)).await;
    assert_eq!(exited.code, Some(code), "idle, signal {sig}: {exited:?}");
    assert_nothing_left(pid, &kids).await;

    // During a run, with an await_idle in flight.
    let mock = mock().await;
    let env = Env::with_model(&mock);
    let mut p = env.spawn().await;
    let pid = p.pid();
    start_hanging_run(&mut p, &mock, "run").await;
    p.send("w", "session.await_idle", None).await;
    // The wait is admitted (a later synchronous response proves it).
    p.request_ok("s", "session.get_state", None).await;
    let kids = descendants(pid);
    p.signal(sig);
    let exited = p.wait_exit(SETTLE + Duration::from_secs(1)).await;
    assert_eq!(exited.code, Some(code), "running, signal {sig}: {exited:?}");
    let frame = p.response("w").await;
    assert_success(&frame, "w", "session.await_idle");
    assert!(mock.wait_for_disconnects(1, WAIT).await >= 1);
    assert_nothing_left(pid, &kids).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_sigterm_exits_143() {
    signal_case(libc::SIGTERM, 143).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_sigint_exits_130() {
    signal_case(libc::SIGINT, 130).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_sighup_exits_129() {
    signal_case(libc::SIGHUP, 129).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn positional_prompts_are_rejected_in_rpc_mode() {
    let env = Env::without_model();
    let finished = env
        .builder()
        .arg("hello")
        .run_to_end(
            b"{\"version\":1,\"id\":\"a\",\"method\":\"session.get_state\"}\n",
            WAIT,
        )
        .await
        .expect("zi finishes");
    assert_eq!(finished.code, Some(1));
    assert_eq!(
        finished.stderr_text(),
        "RPC mode accepts input only through its JSONL protocol\n"
    );
    assert!(finished.stdout.is_empty(), "{}", finished.stdout_text());

    // The same through ZI_MODE.
    let finished = ZiCommand::new(ZI)
        .no_session()
        .agent_dir(&env.agent)
        .args(["--", "hello", "world"])
        .env("ZI_MODE", "rpc")
        .current_dir(&env.cwd.path)
        .run_to_end(b"", WAIT)
        .await
        .expect("zi finishes");
    assert_eq!(finished.code, Some(1));
    assert_eq!(
        finished.stderr_text(),
        "RPC mode accepts input only through its JSONL protocol\n"
    );
    assert!(finished.stdout.is_empty());
}

// ---------------------------------------------------------------------------------------------
// 9. Sequences across a session (docs/rpc.md#frames)
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sequences_are_exactly_one_to_n_and_the_run_settles() {
    let mock = mock().await;
    let env = Env::with_model(&mock);
    let mut p = env.spawn().await;
    mock.push(Step::Text(vec!["Hel".into(), "lo".into()]));
    mock.push(Step::text("second"));

    p.request_ok("p1", "session.prompt", prompt_params("hello"))
        .await;
    p.request_ok("w1", "session.await_idle", None).await;
    p.event("agent_settled").await;
    p.request_ok("s1", "session.get_state", None).await;
    p.request_ok("p2", "session.prompt", prompt_params("again"))
        .await;
    p.request_ok("w2", "session.await_idle", None).await;
    p.event("agent_settled").await;
    p.request_ok("m", "session.get_messages", None).await;
    p.close_stdin().await;
    let exited = p.wait_exit(WAIT).await;
    assert_eq!(exited.code, Some(0));

    let seq = sequences(&p);
    assert_eq!(seq, (1..=seq.len() as u64).collect::<Vec<_>>());
    let frames = p.frames().to_vec();
    assert_eq!(frames[0]["type"], "ready");
    for f in &frames[1..] {
        assert_ne!(f["type"], "ready");
    }

    // Each prompt's response precedes the first event of the run it starts (zi's decision),
    // every run starts with agent_start and ends with exactly one agent_settled after agent_end.
    for (prompt, next) in [("p1", "p2"), ("p2", "m")] {
        let at = frames
            .iter()
            .position(|f| f["type"] == "response" && f["id"] == prompt)
            .unwrap();
        let end = frames
            .iter()
            .position(|f| f["type"] == "response" && f["id"] == next)
            .unwrap();
        let before: Vec<&Value> = frames[..at]
            .iter()
            .rev()
            .take_while(|f| f["type"] == "session_event")
            .collect();
        assert!(
            before.iter().all(|f| f["event"]["type"] != "agent_start"),
            "{prompt}: agent_start before the prompt response"
        );
        let run: Vec<&str> = frames[at..end]
            .iter()
            .filter(|f| f["type"] == "session_event")
            .map(|f| f["event"]["type"].as_str().unwrap_or_default())
            .collect();
        assert_eq!(run.first(), Some(&"agent_start"), "{prompt}: {run:?}");
        assert_eq!(
            run.iter().filter(|t| **t == "agent_settled").count(),
            1,
            "{prompt}: {run:?}"
        );
        let settled = run.iter().position(|t| *t == "agent_settled").unwrap();
        let ended = run
            .iter()
            .position(|t| *t == "agent_end")
            .expect("agent_end");
        assert!(ended < settled, "{prompt}: {run:?}");
    }
    let deltas: String = frames
        .iter()
        .filter(|f| f["type"] == "session_event" && f["event"]["type"] == "message_update")
        .filter_map(|f| {
            f["event"]["assistantMessageEvent"]["delta"]
                .as_str()
                .map(str::to_string)
        })
        .collect();
    assert!(deltas.contains("Hello"), "{deltas:?}");
}

// ---------------------------------------------------------------------------------------------
// 10. Commands, models, synchronous ordering (docs/rpc.md#methods-by-example,
//     docs/rpc.md#zis-decisions)
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commands_and_unknown_models() {
    let env = Env::without_model();
    let mut p = env.spawn().await;

    let frame = p.request("c1", "command.list", None).await;
    assert_eq!(
        assert_success(&frame, "c1", "command.list"),
        json!({"commands": []})
    );
    let frame = p
        .request(
            "c2",
            "command.invoke",
            Some(json!({"name": "missing", "arguments": "x y"})),
        )
        .await;
    assert_failure(
        &frame,
        "c2",
        "command.invoke",
        "not_found",
        "Command not found: missing",
    );
    let frame = p
        .request(
            "ms",
            "model.select",
            Some(json!({"provider": "p", "id": "x"})),
        )
        .await;
    assert_failure(
        &frame,
        "ms",
        "model.select",
        "not_found",
        "Model not found: p/x",
    );
    let frame = p.request("ml", "model.list", None).await;
    let models = assert_success(&frame, "ml", "model.list")["models"].clone();
    // Only the built-in catalog, none of it configured.
    assert!(
        models
            .as_array()
            .is_some_and(|list| !list.is_empty() && list.iter().all(|m| m["configured"] == false)),
        "{models}"
    );
    let state = p.request_ok("s", "session.get_state", None).await;
    assert_eq!(state["model"], json!({"type": "unselected"}));
    p.close_stdin().await;
    assert_eq!(p.wait_exit(WAIT).await.code, Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn synchronous_responses_come_in_input_order() {
    let env = Env::without_model();
    let mut p = env.spawn().await;
    let mut bytes = Vec::new();
    bytes.extend(line("a", "session.get_state", None));
    bytes.extend(line("b", "command.list", None));
    bytes.extend(b"\n");
    bytes.extend(line(
        "c",
        "model.select",
        Some(json!({"provider": "p", "id": "x"})),
    ));
    bytes.extend(line("d", "session.nope", None));
    bytes.extend(line("e", "thinking.list", None));
    bytes.extend(line("f", "session.get_messages", None));
    bytes.extend(line(
        "g",
        "connection.set_events",
        Some(json!({"mode": "none"})),
    ));
    bytes.extend(line("h", "session.get_outcomes", None));
    bytes.extend(line("i", "session.interrupt", None));
    bytes.extend(line("j", "session.await_idle", None));
    bytes.extend(line("k", "model.list", None));
    p.send_raw(&bytes).await;
    let mut seen = Vec::new();
    for _ in 0..12 {
        let f = next_reply(&mut p).await;
        seen.push(
            f["id"]
                .as_str()
                .map(str::to_string)
                .unwrap_or_else(|| format!("<{}>", f["code"].as_str().unwrap_or("?"))),
        );
    }
    // interrupt and await_idle run as tasks and may overtake or trail; the rest is in input order.
    let synchronous: Vec<&str> = seen
        .iter()
        .map(String::as_str)
        .filter(|id| *id != "i" && *id != "j")
        .collect();
    assert_eq!(
        synchronous,
        [
            "a",
            "b",
            "<invalid_json>",
            "c",
            "d",
            "e",
            "f",
            "g",
            "h",
            "k"
        ]
    );
    assert!(seen.contains(&"i".to_string()) && seen.contains(&"j".to_string()));
    p.close_stdin().await;
    assert_eq!(p.wait_exit(WAIT).await.code, Some(0));
}
