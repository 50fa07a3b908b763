//! Black-box tests of `zi --mode rpc` driven through the typed Rust client `zi-rpc-client`, and
//! tests of the client's own failure handling against scripted fake servers.

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use zi_rpc_client::{
    Client, ClientBuilder, Delivery, Error, EventMode, ProtocolErrorCode, ResponseErrorCode,
};
use zi_test_support::dirs::{AgentDir, TempCwd, temp_cwd};
use zi_test_support::mock_llm::{MockLlm, Step};

const KEY: &str = "test-key-abc";

struct Env {
    mock: MockLlm,
    agent: AgentDir,
    home: tempfile::TempDir,
    cwd: TempCwd,
}

async fn env() -> Env {
    let mock = MockLlm::start()
        .await
        .unwrap_or_else(|e| panic!("start the mock LLM: {e}"));
    let agent = AgentDir::new().models(&mock, KEY, &[json!({"id": "m1", "reasoning": true})]);
    let home = tempfile::tempdir().unwrap_or_else(|e| panic!("home: {e}"));
    let cwd = temp_cwd();
    Env {
        mock,
        agent,
        home,
        cwd,
    }
}

fn builder(env: &Env) -> ClientBuilder {
    ClientBuilder::new(env!("CARGO_BIN_EXE_zi"))
        .args([
            "--mode",
            "rpc",
            "--no-session",
            "--model",
            "mock/m1",
            "--agent-dir",
        ])
        .arg(env.agent.path())
        .current_dir(&env.cwd.path)
        .env_clear()
        .env("HOME", env.home.path())
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
}

async fn spawn(env: &Env) -> Client {
    builder(env)
        .spawn()
        .await
        .unwrap_or_else(|e| panic!("spawn zi: {e}"))
}

fn sh(script: &str) -> ClientBuilder {
    ClientBuilder::new("sh").args(["-c", script])
}

const READY: &str = r#"{"version":1,"sequence":1,"type":"ready","state":{"sessionId":"fake"}}"#;

#[tokio::test]
async fn run_prompt_returns_the_completion_text_and_events_arrive_in_order() {
    let env = env().await;
    env.mock.push(Step::Text(vec!["Hel".into(), "lo".into()]));
    let client = spawn(&env).await;
    assert_eq!(client.ready_state().map(|s| s.message_count).ok(), Some(0));
    let mut events = client.subscribe();
    let text = client
        .run_prompt("hi")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(text, "Hello");
    let mut kinds = Vec::new();
    let mut last = 0;
    while let Ok(event) = events.try_next() {
        assert!(event.sequence > last, "events out of order");
        last = event.sequence;
        event.typed().unwrap_or_else(|e| panic!("{e}"));
        kinds.push(event.kind().to_string());
    }
    assert_eq!(kinds.first().map(String::as_str), Some("agent_start"));
    assert!(kinds.iter().any(|k| k == "agent_settled"), "{kinds:?}");
    let status = client.close().await.unwrap_or_else(|e| panic!("{e}"));
    assert!(status.success());
}

#[tokio::test]
async fn one_shot_run_prompt_helper() {
    let env = env().await;
    env.mock.push(Step::text("one shot"));
    let text = zi_rpc_client::run_prompt(builder(&env), "go")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(text, "one shot");
}

#[tokio::test]
async fn three_hundred_concurrent_requests_per_batch_stay_within_capacity() {
    let env = env().await;
    let client = Arc::new(spawn(&env).await);
    for batch in 0..10 {
        let mut tasks = Vec::new();
        for _ in 0..300 {
            let client = client.clone();
            tasks.push(tokio::spawn(async move { client.get_state().await }));
        }
        for task in tasks {
            let state = task
                .await
                .unwrap_or_else(|e| panic!("join: {e}"))
                .unwrap_or_else(|e| panic!("batch {batch}: {e}"));
            assert_eq!(state.message_count, 0);
        }
        assert_eq!(client.pending_requests(), 0, "batch {batch} leaked");
    }
    let status = client.close().await.unwrap_or_else(|e| panic!("{e}"));
    assert!(status.success());
}

#[tokio::test]
async fn completion_watch_interrupt_and_paging() {
    let env = env().await;
    env.mock.push(Step::text("first"));
    env.mock.push(Step::Hang(vec!["par".into(), "tial".into()]));
    let client = Arc::new(spawn(&env).await);

    let admitted = client
        .prompt(Delivery::Direct, "one", Some("c1"))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(admitted.completion_revision, Some(1));
    let done = client
        .await_completion("c1", 1)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(done.completion.map(|c| c.text).as_deref(), Some("first"));

    let mut events = client.subscribe();
    client
        .prompt(Delivery::Direct, "two", Some("c2"))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    events.next_of("message_update").await;
    let watch = {
        let client = client.clone();
        tokio::spawn(async move { client.await_idle(Some("c2")).await })
    };
    client.interrupt().await.unwrap_or_else(|e| panic!("{e}"));
    let settled = watch
        .await
        .unwrap_or_else(|e| panic!("join: {e}"))
        .unwrap_or_else(|e| panic!("{e}"));
    let completion = settled
        .and_then(|r| r.completion)
        .unwrap_or_else(|| panic!("no completion"));
    assert_eq!(completion.stop_reason.as_str(), "aborted");

    let state = client.get_state().await.unwrap_or_else(|e| panic!("{e}"));
    let messages = client
        .all_messages()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(messages.len() as u64, state.message_count);
    let page = client
        .get_messages(0, 1)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(page.next_start, Some(1));
    assert_eq!(page.total, state.message_count);
    let outcomes = client
        .all_outcomes()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(outcomes.is_empty());
    client.close().await.unwrap_or_else(|e| panic!("{e}"));
}

#[tokio::test]
async fn typed_failures_and_event_modes() {
    let env = env().await;
    let client = spawn(&env).await;
    let error = client
        .command_invoke("missing", "")
        .await
        .err()
        .unwrap_or_else(|| panic!("invoke succeeded"));
    assert_eq!(error.response_code(), Some(ResponseErrorCode::NotFound));
    assert!(matches!(
        client.run_command("missing", "").await,
        Err(Error::Usage(m)) if m == "Command not found: missing"
    ));
    let error = client
        .model_select("mock", "nope")
        .await
        .err()
        .unwrap_or_else(|| panic!("select succeeded"));
    assert_eq!(error.response_code(), Some(ResponseErrorCode::NotFound));
    // A request the server rejects with a recoverable protocol_error fails alone.
    let error = client
        .request("session.get_state", Some(json!({})))
        .await
        .err()
        .unwrap_or_else(|| panic!("accepted params"));
    assert!(
        matches!(
            &error,
            Error::Protocol {
                code: ProtocolErrorCode::InvalidRequest,
                id: Some(_),
                ..
            }
        ),
        "{error}"
    );
    assert_eq!(
        client.set_events(EventMode::None).await.ok(),
        Some(EventMode::None)
    );
    let models = client.model_list().await.unwrap_or_else(|e| panic!("{e}"));
    // The built-in catalog is listed too; exactly one model comes from the mock provider.
    assert_eq!(
        models
            .models
            .iter()
            .filter(|m| m.model.provider == "mock")
            .count(),
        1
    );
    let levels = client
        .thinking_list()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(levels.contains(&zi_rpc_client::ThinkingLevel::High));
    client.get_state().await.unwrap_or_else(|e| panic!("{e}"));
    client.close().await.unwrap_or_else(|e| panic!("{e}"));
}

#[tokio::test]
async fn sequence_gaps_are_fatal() {
    let script = format!(
        "echo '{READY}'; read line; echo '{}'; sleep 5",
        r#"{"version":1,"sequence":3,"type":"response","id":"1","method":"session.get_state","ok":true,"result":{}}"#
    );
    let client = sh(&script).spawn().await.unwrap_or_else(|e| panic!("{e}"));
    let error = client.request("session.get_state", None).await.err();
    assert!(
        matches!(
            error,
            Some(Error::SequenceGap {
                expected: 2,
                received: 3
            })
        ),
        "{error:?}"
    );
    client.kill().await;
}

#[tokio::test]
async fn unknown_frame_types_and_protocol_errors_without_id_are_fatal() {
    let script = format!(
        "echo '{READY}'; read line; echo '{}'; sleep 5",
        r#"{"version":1,"sequence":2,"type":"peer_request","id":"x"}"#
    );
    let client = sh(&script).spawn().await.unwrap_or_else(|e| panic!("{e}"));
    let error = client.request("model.list", None).await.err();
    assert!(
        matches!(error, Some(Error::UnknownFrameType(_))),
        "{error:?}"
    );
    client.kill().await;

    let script = format!(
        "echo '{READY}'; read line; echo '{}'; sleep 5",
        r#"{"version":1,"sequence":2,"type":"protocol_error","code":"invalid_json","message":"m"}"#
    );
    let client = sh(&script).spawn().await.unwrap_or_else(|e| panic!("{e}"));
    let error = client.request("model.list", None).await.err();
    assert!(
        matches!(
            error,
            Some(Error::Protocol {
                code: ProtocolErrorCode::InvalidJson,
                ..
            })
        ),
        "{error:?}"
    );
    client.kill().await;
}

#[tokio::test]
async fn ready_deadline_and_stderr_tail() {
    let started = std::time::Instant::now();
    let error = sh("echo starting >&2; sleep 10")
        .ready_timeout(Duration::from_millis(300))
        .spawn()
        .await
        .err();
    assert!(started.elapsed() < Duration::from_secs(5));
    match error {
        Some(Error::ReadyTimeout { stderr, .. }) => {
            assert!(stderr.contains("starting"), "{stderr}")
        }
        other => panic!("{other:?}"),
    }
    let client = sh(&format!(
        "echo '{READY}'; cat >/dev/null; echo boom >&2; exit 3"
    ))
    .spawn()
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    match client.close().await {
        Err(Error::Exit { stderr, .. }) => assert!(stderr.contains("boom"), "{stderr}"),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn a_server_ignoring_eof_is_killed_after_the_grace_period() {
    let client = sh(&format!("trap '' TERM HUP; echo '{READY}'; exec sleep 30"))
        .close_grace(Duration::from_millis(300))
        .spawn()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let started = std::time::Instant::now();
    let status = client.close().await.unwrap_or_else(|e| panic!("{e}"));
    assert!(!status.success());
    assert!(started.elapsed() < Duration::from_secs(10));
}

#[tokio::test]
async fn abandoned_requests_keep_their_slot_until_answered() {
    let env = env().await;
    env.mock.push(Step::Hang(vec!["busy".into()]));
    let client = Arc::new(spawn(&env).await);
    let mut events = client.subscribe();
    client
        .prompt(Delivery::Direct, "go", None)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    events.next_of("message_update").await;
    let waits: Vec<_> = (0..40)
        .map(|_| {
            let client = client.clone();
            tokio::spawn(async move { client.await_idle(None).await })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(
        client.pending_requests(),
        32,
        "the client exceeded 32 in flight"
    );
    for wait in &waits {
        wait.abort();
    }
    // The 32 abandoned waits still hold the server's slots; the interrupt has its own.
    client.interrupt().await.unwrap_or_else(|e| panic!("{e}"));
    let state = client.get_state().await.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(state.activity, zi_protocol::state::Activity::Idle);
    assert_eq!(client.pending_requests(), 0);
    drop(events);
    client.get_state().await.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        client.subscribers(),
        0,
        "a dropped event stream stayed subscribed"
    );
    client.close().await.unwrap_or_else(|e| panic!("{e}"));
}
