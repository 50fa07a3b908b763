//! Black-box tests of automatic retry (docs/providers.md#automatic-retry): the real
//! `zi --mode rpc` binary against the mock LLM.

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};
use zi_test_support::dirs::{AgentDir, TempCwd as Cwd, temp_cwd};
use zi_test_support::harness::Harness;
use zi_test_support::mock_llm::{MockLlm, Step};
use zi_test_support::zi_command::ZiCommand;

const ZI: &str = env!("CARGO_BIN_EXE_zi");
const WAIT: Duration = Duration::from_secs(30);
const KEY: &str = "retry-test-key-7f3a";

async fn setup(settings: &str) -> (MockLlm, AgentDir, Cwd) {
    let mock = MockLlm::start()
        .await
        .unwrap_or_else(|e| panic!("start the mock LLM: {e}"));
    let agent = AgentDir::new()
        .models(&mock, KEY, &[json!({"id": "m1", "reasoning": true})])
        .settings(settings);
    (mock, agent, temp_cwd())
}

async fn spawn(agent: &AgentDir, cwd: &Path) -> Harness {
    ZiCommand::rpc(ZI, agent, cwd)
        .model("mock/m1")
        .timeout(WAIT)
        .spawn_rpc()
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_successful_retry_after_an_overload() {
    let (mock, agent, cwd) = setup(r#"{"retryBaseDelayMs": 10}"#).await;
    mock.push(Step::HttpError {
        status: 529,
        message: "Overloaded".into(),
    });
    mock.push(Step::text("second time lucky"));
    let mut p = spawn(&agent, &cwd.path).await;
    p.prompt("p1", "hi").await;
    p.event("agent_settled").await;

    let events = p.events();
    let types: Vec<&str> = events.iter().filter_map(|e| e["type"].as_str()).collect();
    let retry_types: Vec<&str> = types
        .iter()
        .copied()
        .filter(|t| t.starts_with("auto_retry") || *t == "agent_settled")
        .collect();
    assert_eq!(
        retry_types,
        ["auto_retry_start", "auto_retry_end", "agent_settled"]
    );
    let will_retry: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "agent_end")
        .map(|e| &e["willRetry"])
        .collect();
    assert_eq!(will_retry, [&json!(true), &json!(false)]);
    assert_eq!(types.iter().filter(|t| **t == "agent_start").count(), 2);

    let start = events
        .iter()
        .find(|e| e["type"] == "auto_retry_start")
        .cloned()
        .unwrap_or_default();
    assert_eq!(start["attempt"], 1);
    assert_eq!(start["maxAttempts"], 3);
    assert_eq!(start["delayMs"], 10);
    assert_eq!(start["errorMessage"], "529 Overloaded");
    assert!(start["retryAt"].as_i64().is_some_and(|t| t > 0));
    let end = events
        .iter()
        .find(|e| e["type"] == "auto_retry_end")
        .cloned()
        .unwrap_or_default();
    assert_eq!(
        end,
        json!({"type": "auto_retry_end", "success": true, "attempt": 1})
    );

    // The retry entry is announced right before auto_retry_start and names the failed message.
    let position = types
        .iter()
        .position(|t| *t == "auto_retry_start")
        .unwrap_or(0);
    let entry = &events[position - 1];
    assert_eq!(entry["type"], "entry_appended");
    assert_eq!(entry["entry"]["type"], "retry");
    assert_eq!(entry["entry"]["attempt"], 1);
    let failed_id = entry["entry"]["failedEntryId"].clone();
    let failed_entry = events
        .iter()
        .find(|e| e["type"] == "entry_appended" && e["entry"]["id"] == failed_id)
        .cloned()
        .unwrap_or_default();
    assert_eq!(failed_entry["entry"]["message"]["stopReason"], "error");

    // Two provider calls; the second does not carry the failed message.
    let requests = mock.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[0].body["messages"], requests[1].body["messages"]);

    // The failure stays visible in message pages.
    let page = p
        .request_ok(
            "m",
            "session.get_messages",
            Some(json!({"start": 0, "limit": 10})),
        )
        .await;
    let stops: Vec<Value> = page["messages"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|m| m["stopReason"].clone())
        .collect();
    assert_eq!(stops, [Value::Null, json!("error"), json!("stop")]);
    let state = p.request_ok("s", "session.get_state", None).await;
    assert_eq!(state["retry"], json!({"type": "idle"}));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interrupt_cancels_a_waiting_retry() {
    let (mock, agent, cwd) = setup(r#"{"retryBaseDelayMs": 17000, "retryMaxRetries": 2}"#).await;
    mock.push(Step::HttpError {
        status: 503,
        message: "Service Unavailable".into(),
    });
    let mut p = spawn(&agent, &cwd.path).await;
    p.prompt("p1", "hi").await;
    let start = p.event("auto_retry_start").await;
    assert_eq!(start["maxAttempts"], 2);
    assert_eq!(start["delayMs"], 17000);

    let state = p.request_ok("s1", "session.get_state", None).await;
    assert_eq!(state["activity"]["type"], "running", "{state}");
    assert_eq!(
        state["retry"],
        json!({"type": "waiting", "source": "agent", "attempt": 1, "maxAttempts": 2,
               "delayMs": 17000, "retryAt": start["retryAt"],
               "errorMessage": "503 Service Unavailable"})
    );

    p.request_ok("i1", "session.interrupt", None).await;
    let end = p.event("auto_retry_end").await;
    assert_eq!(
        end,
        json!({"type": "auto_retry_end", "success": false, "attempt": 1, "finalError": "Retry cancelled"})
    );
    p.event("agent_settled").await;
    let state = p.request_ok("s2", "session.get_state", None).await;
    assert_eq!(state["retry"], json!({"type": "idle"}));
    assert_eq!(state["activity"]["type"], "idle");
    assert_eq!(mock.requests().len(), 1, "the retry never ran");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exhaustion_and_permanent_errors_end_the_retry() {
    let (mock, agent, cwd) = setup(r#"{"retryBaseDelayMs": 1, "retryMaxRetries": 1}"#).await;
    for _ in 0..2 {
        mock.push(Step::HttpError {
            status: 500,
            message: "boom".into(),
        });
    }
    mock.push(Step::HttpError {
        status: 401,
        message: "Incorrect API key provided".into(),
    });
    let mut p = spawn(&agent, &cwd.path).await;
    p.prompt("p1", "first").await;
    p.event("agent_settled").await;
    let events1 = p.events();
    let end = events1
        .iter()
        .find(|e| e["type"] == "auto_retry_end")
        .cloned()
        .unwrap_or_default();
    assert_eq!(
        end,
        json!({"type": "auto_retry_end", "success": false, "attempt": 1, "finalError": "500 boom"})
    );
    assert_eq!(mock.requests().len(), 2);

    let seen = events1.len();
    let last_seq = p.last_sequence();
    p.prompt("p2", "second").await;
    p.event_after("agent_settled", last_seq).await;
    let later: Vec<Value> = p.events()[seen..].to_vec();
    assert!(
        later
            .iter()
            .all(|e| !e["type"].as_str().unwrap_or("").starts_with("auto_retry")),
        "401 is not retried: {later:?}"
    );
    assert_eq!(mock.requests().len(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retry_disabled_in_settings_never_retries() {
    let (mock, agent, cwd) = setup(r#"{"retryEnabled": false}"#).await;
    mock.push(Step::HttpError {
        status: 429,
        message: "Rate limit reached".into(),
    });
    let mut p = spawn(&agent, &cwd.path).await;
    p.prompt("p1", "hi").await;
    let end = p.event("agent_end").await;
    assert_eq!(end["willRetry"], false);
    p.event("agent_settled").await;
    assert!(!p.event_types().iter().any(|t| t.starts_with("auto_retry")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anthropic_overload_mid_stream_is_retried() {
    let mock = MockLlm::start()
        .await
        .unwrap_or_else(|e| panic!("start the mock LLM: {e}"));
    let agent = AgentDir::new()
        .models_for(
            &mock,
            "anthropic-messages",
            KEY,
            &[json!({"id": "m1", "reasoning": true})],
        )
        .settings(r#"{"retryBaseDelayMs": 5}"#);
    let cwd = temp_cwd();
    mock.push(Step::MidStreamError {
        text: vec!["partial ".into()],
        message: "Overloaded".into(),
    });
    mock.push(Step::Truncated(vec!["cut".into()]));
    mock.push(Step::text("finally"));
    let mut p = spawn(&agent, &cwd.path).await;
    p.prompt("p1", "hi").await;
    p.event("agent_settled").await;
    let events = p.events();
    let starts: Vec<Value> = events
        .iter()
        .filter(|e| e["type"] == "auto_retry_start")
        .map(|e| json!([e["attempt"], e["delayMs"], e["errorMessage"]]))
        .collect();
    assert_eq!(
        starts,
        [
            json!([1, 5, "overloaded_error: Overloaded"]),
            json!([2, 10, "Provider stream ended before the final event"])
        ]
    );
    let ends: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "auto_retry_end")
        .collect();
    assert_eq!(
        ends,
        [&json!({"type": "auto_retry_end", "success": true, "attempt": 2})]
    );
    let paths: Vec<String> = mock.requests().into_iter().map(|r| r.path).collect();
    assert_eq!(paths, ["/v1/messages", "/v1/messages", "/v1/messages"]);
    // Each retry sends only the user prompt: both failures left the provider context.
    for request in mock.requests() {
        assert_eq!(
            request.body["messages"],
            json!([{"role": "user", "content": [{"type": "text", "text": "hi", "cache_control": {"type": "ephemeral"}}]}])
        );
    }
}
