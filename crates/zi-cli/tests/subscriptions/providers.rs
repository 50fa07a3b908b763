//! The Codex and Copilot requests through the real binary: exact paths, headers and bodies,
//! encrypted reasoning between turns, usage limits, `codexFastMode`, and `configured` following
//! auth.json while zi runs.

use serde_json::json;
use zi_test_support::dirs::{AgentDir, temp_cwd};
use zi_test_support::mock_auth::start_auth;
use zi_test_support::mock_llm::{MockUsage, Step, start_mock};

use super::*;

fn reasoning_then_call() -> Step {
    Step::Reply {
        thinking: vec!["Look at the file.".into()],
        text: vec![],
        tool_calls: vec![zi_test_support::mock_llm::MockToolCall {
            id: "call_1".into(),
            name: "read".into(),
            args_chunks: vec![json!({"path": "notes.txt"}).to_string()],
        }],
        finish_reason: "tool_calls".into(),
        usage: Some(MockUsage::default()),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_request_headers_and_body() {
    let (auth, llm) = (start_auth().await, start_mock().await);
    let agent = AgentDir::new().auth(&json!({"openai-codex": codex_entry(3_600_000)}));
    let cwd = temp_cwd();
    std::fs::write(cwd.path.join("notes.txt"), "remember this").unwrap();
    let mut p = rpc(&agent, &cwd.path, &auth, &llm)
        .no_session()
        .model("openai-codex/gpt-5.5")
        .args(["--system-prompt", "SYSTEM-MARKER-5e1"])
        .spawn_rpc()
        .await;
    let session_id = p.ready()["sessionId"].as_str().unwrap().to_string();
    llm.push(reasoning_then_call());
    llm.push(Step::text("done"));
    let message = prompt(&mut p, "p1", text("read the notes")).await;
    assert_eq!(message["api"], "openai-codex-responses");
    assert_eq!(message["stopReason"], "stop", "{message}");

    let requests = llm.requests();
    assert_eq!(requests.len(), 2);
    for request in &requests {
        assert_eq!(request.path, "/v1/codex/responses");
        let access = format!("Bearer {}", fake_jwt(ACCOUNT, 0));
        assert_eq!(request.header("authorization"), Some(access.as_str()));
        assert_eq!(request.header("chatgpt-account-id"), Some(ACCOUNT));
        assert_eq!(request.header("originator"), Some("zi"));
        assert_eq!(
            request.header("openai-beta"),
            Some("responses=experimental")
        );
        assert_eq!(request.header("accept"), Some("text/event-stream"));
        assert_eq!(request.header("session_id"), Some(session_id.as_str()));
        let agent_header = request.header("user-agent").unwrap_or("");
        assert!(agent_header.starts_with("zi/"), "{agent_header}");
        let body = &request.body;
        assert_eq!(body["model"], "gpt-5.5");
        assert_eq!(body["store"], false);
        assert_eq!(body["stream"], true);
        let instructions = body["instructions"].as_str().unwrap_or("");
        assert!(instructions.starts_with("SYSTEM-MARKER-5e1"), "{body}");
        assert!(
            body["input"]
                .as_array()
                .unwrap()
                .iter()
                .all(|item| item["role"] != "developer" && item["role"] != "system"),
            "the system prompt is not an input item: {body}"
        );
        assert_eq!(body["include"], json!(["reasoning.encrypted_content"]));
        assert_eq!(body["prompt_cache_key"], session_id.as_str());
        assert_eq!(body["tool_choice"], "auto");
        assert_eq!(body["parallel_tool_calls"], true);
        assert_eq!(body["text"], json!({"verbosity": "medium"}));
        assert_eq!(
            body["reasoning"],
            json!({"effort": "medium", "summary": "auto"})
        );
        assert!(body.get("service_tier").is_none(), "{body}");
        assert!(body.get("max_output_tokens").is_none(), "{body}");
        assert!(body["tools"].as_array().is_some_and(|t| !t.is_empty()));
    }
    // Encrypted reasoning travels with the next request (`store: false`): the reasoning item
    // of turn 1, whole, precedes its function call.
    let input = requests[1].body["input"].as_array().unwrap();
    let reasoning = input
        .iter()
        .position(|item| item["type"] == "reasoning")
        .unwrap_or_else(|| panic!("no reasoning item replayed: {input:?}"));
    assert_eq!(input[reasoning]["encrypted_content"], "mock-signature");
    assert_eq!(input[reasoning + 1]["type"], "function_call");
    assert!(input.iter().any(|item| {
        item["type"] == "function_call_output"
            && item["output"]
                .as_str()
                .unwrap_or("")
                .contains("remember this")
    }));

    // `off` is sent as `none` to general GPT models on Codex.
    p.request_ok("t", "thinking.select", Some(json!({"level": "off"})))
        .await;
    llm.push(Step::text("plain"));
    prompt(&mut p, "p2", text("again")).await;
    let last = llm.requests().pop().unwrap();
    assert_eq!(last.body["reasoning"]["effort"], "none", "{}", last.body);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_fast_mode_sends_priority_only_to_codex() {
    let (auth, llm) = (start_auth().await, start_mock().await);
    let agent = AgentDir::new()
        .auth(&json!({"openai-codex": codex_entry(3_600_000),
                      "openai": {"type": "api_key", "key": "sk-plain-openai"}}))
        .settings(r#"{"codexFastMode": true}"#);
    agent.write(
        "models.json",
        &json!({"providers": {"openai": {"baseUrl": llm.base_url()}}}).to_string(),
    );
    let cwd = temp_cwd();
    let mut p = session(&agent, &cwd.path, (&auth, &llm), "openai-codex/gpt-5.4").await;
    llm.push(Step::text("fast"));
    prompt(&mut p, "p1", text("go")).await;
    p.request_ok(
        "s",
        "model.select",
        Some(json!({"provider": "openai", "id": "gpt-5.5"})),
    )
    .await;
    llm.push(Step::text("plain"));
    prompt(&mut p, "p2", text("go")).await;
    let requests = llm.requests();
    assert_eq!(requests[0].path, "/v1/codex/responses");
    assert_eq!(requests[0].body["service_tier"], "priority");
    assert_eq!(requests[1].path, "/v1/responses");
    assert!(requests[1].body.get("service_tier").is_none());

    // A project layer cannot turn it on: codexFastMode is global only.
    let project = temp_cwd();
    std::fs::create_dir_all(project.path.join(".zi")).unwrap();
    std::fs::write(
        project.path.join(".zi/settings.json"),
        r#"{"codexFastMode": true}"#,
    )
    .unwrap();
    let plain = AgentDir::new()
        .auth(&json!({"openai-codex": codex_entry(3_600_000)}))
        .trust(&[&project.path]);
    let mut p = session(&plain, &project.path, (&auth, &llm), "openai-codex/gpt-5.4").await;
    llm.push(Step::text("slow"));
    prompt(&mut p, "p3", text("go")).await;
    let last = llm.requests().pop().unwrap();
    assert!(last.body.get("service_tier").is_none(), "{}", last.body);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_usage_limit_ends_the_run_with_the_reset_time() {
    let (auth, llm) = (start_auth().await, start_mock().await);
    let agent = AgentDir::new()
        .auth(&json!({"openai-codex": codex_entry(3_600_000)}))
        .settings(r#"{"retryBaseDelayMs": 0}"#);
    let cwd = temp_cwd();
    let mut p = session(&agent, &cwd.path, (&auth, &llm), "openai-codex/gpt-5.5").await;
    let resets_at = now_ms() / 1000 + 92 * 60;
    llm.push(Step::HttpJson {
        status: 429,
        body: json!({"error": {"type": "usage_limit_reached", "message": "The usage limit has been reached",
                               "plan_type": "plus", "resets_at": resets_at}}),
    });
    let after = p.last_sequence();
    let message = prompt(&mut p, "p1", text("go")).await;
    let error = message["errorMessage"].as_str().unwrap_or("");
    assert!(
        error.starts_with("429 You have hit your ChatGPT usage limit (plus plan); it resets at ")
            && error.contains(" UTC (in 1 h 3")
            && error.ends_with(" min)"),
        "{error}"
    );
    assert_eq!(llm.requests().len(), 1, "no blind retries");
    let retried = p.frames().iter().any(|f| {
        f["sequence"].as_u64().unwrap_or(0) > after && f["event"]["type"] == "auto_retry_start"
    });
    assert!(!retried);

    // A 429 that names no reset time is an ordinary rate limit: retried.
    llm.push(Step::HttpJson {
        status: 429,
        body: json!({"error": {"code": "rate_limit_exceeded", "message": "Slow down"}}),
    });
    llm.push(Step::text("after the retry"));
    let message = prompt(&mut p, "p2", text("again")).await;
    assert_eq!(message["stopReason"], "stop", "{message}");
    assert_eq!(llm.requests().len(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copilot_requests_per_api_carry_copilot_headers() {
    let (auth, llm) = (start_auth().await, start_mock().await);
    let agent = AgentDir::new().auth(&json!({"github-copilot": copilot_entry(3_600_000)}));
    let cwd = temp_cwd();
    std::fs::write(cwd.path.join("notes.txt"), "copilot notes").unwrap();
    let mut p = session(
        &agent,
        &cwd.path,
        (&auth, &llm),
        "github-copilot/claude-sonnet-4.5",
    )
    .await;
    // Anthropic Messages: a tool call, then the answer after the tool result.
    llm.push(Step::tool_calls(&[(
        "call_1",
        "read",
        json!({"path": "notes.txt"}),
    )]));
    llm.push(Step::text("read it"));
    prompt(&mut p, "p1", text("read the notes")).await;
    for (id, model) in [("s2", "gpt-4.1"), ("s3", "gpt-5.5")] {
        p.request_ok(
            id,
            "model.select",
            Some(json!({"provider": "github-copilot", "id": model})),
        )
        .await;
        llm.push(Step::text("ok"));
        prompt(&mut p, &format!("p{id}"), text("hello")).await;
    }
    // An image prompt: the vision header.
    let png = "iVBORw0KGgo=";
    llm.push(Step::text("seen"));
    prompt(
        &mut p,
        "p4",
        json!({"delivery": "direct", "text": "look", "images": [{"type": "image", "data": png, "mimeType": "image/png"}]}),
    )
    .await;

    let requests = llm.requests();
    let paths: Vec<&str> = requests.iter().map(|r| r.path.as_str()).collect();
    assert_eq!(
        paths,
        [
            "/v1/messages",
            "/v1/messages",
            "/v1/chat/completions",
            "/v1/responses",
            "/v1/responses"
        ]
    );
    let bearer = format!("Bearer {COPILOT_TOKEN}");
    for request in &requests {
        assert_eq!(request.header("authorization"), Some(bearer.as_str()));
        assert_eq!(request.header("x-api-key"), None);
        assert_eq!(
            request.header("user-agent"),
            Some("GitHubCopilotChat/0.35.0")
        );
        assert_eq!(request.header("editor-version"), Some("vscode/1.107.0"));
        assert_eq!(
            request.header("editor-plugin-version"),
            Some("copilot-chat/0.35.0")
        );
        assert_eq!(
            request.header("copilot-integration-id"),
            Some("vscode-chat")
        );
        assert_eq!(request.header("openai-intent"), Some("conversation-edits"));
    }
    let initiators: Vec<Option<&str>> = requests.iter().map(|r| r.header("x-initiator")).collect();
    assert_eq!(
        initiators,
        [
            Some("user"),
            Some("agent"),
            Some("user"),
            Some("user"),
            Some("user")
        ]
    );
    let vision: Vec<Option<&str>> = requests
        .iter()
        .map(|r| r.header("copilot-vision-request"))
        .collect();
    assert_eq!(vision, [None, None, None, None, Some("true")]);
    assert_eq!(requests[0].header("anthropic-version"), Some("2023-06-01"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn model_list_follows_auth_json_without_restart() {
    let (auth, llm) = (start_auth().await, start_mock().await);
    let agent = AgentDir::new();
    let cwd = temp_cwd();
    let mut p = rpc(&agent, &cwd.path, &auth, &llm)
        .no_session()
        .spawn_rpc()
        .await;
    let list = p.request_ok("l1", "model.list", None).await;
    assert!(!configured(&list, "openai-codex") && !configured(&list, "github-copilot"));
    // Selecting a subscription model without a sign-in is refused.
    let refused = p
        .request(
            "s0",
            "model.select",
            Some(json!({"provider": "openai-codex", "id": "gpt-5.5"})),
        )
        .await;
    assert_eq!(refused["ok"], false, "{refused}");

    agent.write(
        "auth.json",
        &json!({"openai-codex": codex_entry(3_600_000), "github-copilot": copilot_entry(3_600_000)})
            .to_string(),
    );
    let list = p.request_ok("l2", "model.list", None).await;
    assert!(configured(&list, "openai-codex") && configured(&list, "github-copilot"));
    p.request_ok(
        "s1",
        "model.select",
        Some(json!({"provider": "openai-codex", "id": "gpt-5.5"})),
    )
    .await;
    std::fs::remove_file(agent.path().join("auth.json")).unwrap();
    let list = p.request_ok("l3", "model.list", None).await;
    assert!(!configured(&list, "openai-codex"));
    let message = prompt(&mut p, "p1", text("go")).await;
    assert_eq!(
        message["errorMessage"],
        "Model openai-codex/gpt-5.5 is not authenticated: run zi login openai-codex"
    );
    assert!(llm.requests().is_empty(), "no request without a sign-in");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn non_https_endpoint_variables_are_rejected() {
    let agent = AgentDir::new();
    let cwd = temp_cwd();
    for (name, value) in [
        ("ZI_GITHUB_URL", "http://example.com"),
        ("ZI_CODEX_BASE_URL", "ftp://127.0.0.1/x"),
        (
            "ZI_OPENAI_AUTH_URL",
            "https://user:hunter2-secret@auth.example",
        ),
        ("ZI_LOGIN_CALLBACK_PORT", "70000"),
    ] {
        for mode in [&["-p", "hi"][..], &["--mode", "rpc"][..]] {
            let finished = ZiCommand::new(env!("CARGO_BIN_EXE_zi"))
                .agent_dir(&agent)
                .no_session()
                .args(mode)
                .env(name, value)
                .current_dir(&cwd.path)
                .run_to_end(b"", WAIT)
                .await
                .unwrap();
            assert_eq!(finished.code, Some(1), "{name}={value} {mode:?}");
            let stderr = finished.stderr_text();
            assert!(stderr.starts_with(name), "{stderr}");
            assert!(!stderr.contains("hunter2"), "{stderr}");
            assert!(finished.stdout.is_empty());
        }
    }
    let finished = ZiCommand::new(env!("CARGO_BIN_EXE_zi"))
        .agent_dir(&agent)
        .no_session()
        .args(["--mode", "rpc"])
        .env("ZI_GITHUB_URL", "http://127.0.0.1:9/")
        .env("ZI_COPILOT_BASE_URL", "https://copilot.example.invalid")
        .current_dir(&cwd.path)
        .run_to_end(b"", WAIT)
        .await
        .unwrap();
    assert_eq!(finished.code, Some(0), "{}", finished.stderr_text());
}
