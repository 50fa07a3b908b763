//! Models and thinking levels (docs/rpc.md#modellist, docs/providers.md#thinking-levels) and the
//! secrecy of provider configuration.

use super::*;

fn read_json(path: &Path) -> Value {
    let text =
        std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("parse {}: {e}\n{text}", path.display()))
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

/// A `--no-session` zi on `mock/m2` with the two providers above: the mock, the agent
/// directory, the working directory (kept for the zi's lifetime) and the zi.
async fn two_provider_zi_on_m2() -> (MockLlm, AgentDir, TempCwd, Harness) {
    let mock = start_mock().await;
    let agent = AgentDir::new();
    agent.write("models.json", &two_provider_models(&mock));
    let cwd = temp_cwd();
    let p = spawn(&agent, &cwd.path, &["--no-session", "--model", "mock/m2"]).await;
    (mock, agent, cwd, p)
}

fn m1_descriptor() -> Value {
    json!({"provider": "mock", "id": "m1", "name": "Model One", "reasoning": true,
           "input": ["text"], "contextWindow": 64000, "maxTokens": 4096})
}

/// `model.list`: public descriptors plus `configured`, nothing else.
async fn assert_model_list(p: &mut Harness, mock: &MockLlm) {
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
}

/// Selects the reasoning model m1: `thinking_level_changed` (off → medium) precedes
/// `model_changed`, and both persist; returns the level event.
async fn select_the_reasoning_model(p: &mut Harness, settings_path: &Path) -> Value {
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
    let settings = read_json(settings_path);
    assert_eq!(settings["defaultProvider"], "mock", "{settings}");
    assert_eq!(settings["defaultModel"], "m1", "{settings}");
    assert_eq!(settings["defaultThinkingLevel"], "medium", "{settings}");
    let state = p.request_ok("s1", "session.get_state", None).await;
    assert_eq!(
        state["model"],
        json!({"type": "selected", "model": m1_descriptor()})
    );
    assert_eq!(state["thinkingLevel"], "medium");
    level
}

/// `thinking.select`, global: high is stored, max is not mapped for m1 and is clamped down to high.
async fn select_thinking_globally(p: &mut Harness, settings_path: &Path, level: &Value) {
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
    let level = p.event_after("thinking_level_changed", seq(level)).await;
    assert_eq!(level["event"]["level"], "high");
    assert_eq!(read_json(settings_path)["defaultThinkingLevel"], "high");

    // max is not mapped for m1: clamped down to high.
    let selection = p
        .request_ok("ts2", "thinking.select", Some(json!({"level": "max"})))
        .await;
    assert_eq!(
        selection,
        json!({"scope": "global", "requested": "max", "effective": "high"})
    );
    assert_eq!(read_json(settings_path)["defaultThinkingLevel"], "high");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn models_and_thinking_levels_are_listed_selected_and_persisted() {
    let (mock, agent, cwd, mut p) = two_provider_zi_on_m2().await;
    let settings_path = agent.path().join("settings.json");

    assert_model_list(&mut p, &mock).await;

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

    let level = select_the_reasoning_model(&mut p, &settings_path).await;

    assert_eq!(
        p.request_ok("t2", "thinking.list", None).await,
        json!({"levels": ["off", "minimal", "low", "medium", "high"]})
    );

    select_thinking_globally(&mut p, &settings_path, &level).await;

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

const CLI_KEY: &str = "sk-test-SECRET-123";
const HEADER_VALUE: &str = "hdr-SECRET-456";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_base_urls_and_headers_never_reach_stdout_or_stderr() {
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
    let exited = p.exit_by_eof().await;

    // The credentials were used…
    let requests = mock.requests();
    assert_eq!(
        requests[0].header("authorization"),
        Some(format!("Bearer {CLI_KEY}").as_str())
    );
    assert_eq!(requests[0].header("x-team-secret"), Some(HEADER_VALUE));
    assert_never_shown(&p, &exited, &port, &mock);
}

/// …and never shown: no secret on stdout (every frame) or stderr.
fn assert_never_shown(p: &Harness, exited: &Exited, port: &str, mock: &MockLlm) {
    let stdout: String = p
        .frames()
        .iter()
        .map(|f| serde_json::to_string(f).unwrap_or_default() + "\n")
        .collect();
    let mut leaks = Vec::new();
    for secret in [CLI_KEY, HEADER_VALUE, port, mock.base_url().as_str()] {
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

/// zi's `tracing` warnings reach stderr with the default filter (`ZI_LOG` unset) in the
/// formatter's plain layout, though the formatter is only built when the first one is reached
/// (docs/performance.md#start-up-and-idle-memory): a models.json broken after start-up is
/// reported when `model.list` reloads it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tracing_warning_reaches_stderr_with_the_default_filter() {
    let (_mock, agent, _cwd, mut p) = two_provider_zi_on_m2().await;
    agent.write("models.json", "{ not json");
    let list = p.request("l1", "model.list", None).await;
    assert_eq!(list["ok"], true, "{list}");
    p.close_stdin().await;
    p.wait_exit(Duration::from_secs(10)).await;
    let stderr = p.stderr_text();
    let models = agent.path().join("models.json");
    let line = format!(
        " WARN (models) invalid {}: key must be a string at line 1 column 3",
        models.display()
    );
    assert!(
        stderr.lines().any(|l| l == line),
        "expected {line:?} on stderr:\n{stderr}"
    );
}
