//! Start and end of a connection: `ready` (docs/rpc.md#frames), positional prompts refused in rpc mode,
//! and shutdown by EOF or signal (docs/rpc.md#shutdown-eof-signals-and-exit-codes).

use super::*;

const SETTLE: Duration = Duration::from_secs(5);

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
    let (_env, mut p) = Env::started_without_model().await;
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
    p.exit_by_eof().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ready_with_model_carries_only_the_public_descriptor() {
    let (mock, _env, mut p) = Env::started_with_model().await;
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
    p.exit_by_eof().await;
}

// ---------------------------------------------------------------------------------------------
// 8. Shutdown, EOF, signals (docs/rpc.md#shutdown-eof-signals-and-exit-codes)
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_eof_while_idle_exits_zero_silently() {
    let (_env, mut p) = Env::started_without_model().await;
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
    let (mock, _env, mut p) = Env::started_with_model().await;
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
    let (_env, mut p) = Env::started_without_model().await;
    let pid = p.pid();
    let kids = descendants(pid);
    p.signal(sig);
    let exited = p.wait_exit(SETTLE + Duration::from_secs(1)).await;
    assert_eq!(exited.code, Some(code), "idle, signal {sig}: {exited:?}");
    assert_nothing_left(pid, &kids).await;

    // During a run, with an await_idle in flight.
    let (mock, _env, mut p) = Env::started_with_model().await;
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
