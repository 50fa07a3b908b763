//! Refresh before expiry under the auth.json lock (docs/providers.md#subscriptions): one refresh
//! for two processes, other entries and external edits kept, an invalid file never written
//! over, and a failed refresh that leaves the provider not configured without crashing or
//! retrying.

use std::fs::OpenOptions;

use serde_json::json;
use zi_test_support::dirs::{AgentDir, temp_cwd};
use zi_test_support::mock_auth::start_auth;
use zi_test_support::mock_llm::{Step, start_mock};

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expiring_token_is_refreshed_before_the_request() {
    let (auth, llm) = (start_auth().await, start_mock().await);
    auth.seed_refresh_token(CODEX_REFRESH);
    auth.set_account(ACCOUNT);
    let agent = AgentDir::new().auth(&json!({
        "openai-codex": codex_entry(60_000),
        "anthropic": {"type": "api_key", "key": "sk-ant-kept"},
    }));
    let (cwd, sessions) = (temp_cwd(), temp_cwd());
    let mut p = rpc(&agent, &cwd.path, &auth, &llm)
        .arg("--session-dir")
        .arg(&sessions.path)
        .model("openai-codex/gpt-5.5")
        .spawn_rpc()
        .await;
    llm.push(Step::text("fresh"));
    let message = prompt(&mut p, "p1", text("go")).await;
    assert_eq!(message["stopReason"], "stop", "{message}");

    let refreshes = auth.token_requests("refresh_token");
    assert_eq!(refreshes.len(), 1);
    let form: Vec<(&str, &str)> = refreshes[0]
        .form
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    assert_eq!(
        form,
        [
            ("grant_type", "refresh_token"),
            ("refresh_token", CODEX_REFRESH),
            ("client_id", "app_EMoamEEZ73f0CkXaXp7hrann")
        ]
    );
    assert_eq!(
        refreshes[0].header("content-type"),
        Some("application/x-www-form-urlencoded")
    );
    let (new_refresh, new_access) = auth.current_tokens();
    let (new_refresh, new_access) = (new_refresh.unwrap(), new_access.unwrap());
    let bearer = format!("Bearer {new_access}");
    assert_eq!(
        llm.requests()[0].header("authorization"),
        Some(bearer.as_str())
    );
    let stored = auth_json(&agent);
    assert_eq!(stored["openai-codex"]["access"], new_access.as_str());
    assert_eq!(stored["openai-codex"]["refresh"], new_refresh.as_str());
    assert_eq!(stored["openai-codex"]["accountId"], ACCOUNT);
    let expires = stored["openai-codex"]["expires"].as_i64().unwrap();
    assert!(
        (expires - (now_ms() + 3_600_000)).abs() < 60_000,
        "{expires}"
    );
    assert_eq!(stored["anthropic"]["key"], "sk-ant-kept");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(agent.path().join("auth.json"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }

    // The new token is good for an hour: the next request refreshes nothing.
    llm.push(Step::text("again"));
    prompt(&mut p, "p2", text("again")).await;
    assert_eq!(auth.token_requests("refresh_token").len(), 1);
    p.exit_by_eof().await;
    let old_access = fake_jwt(ACCOUNT, 0);
    assert_no_secrets(
        &written(&p, &[&sessions.path]),
        &[
            CODEX_REFRESH,
            &new_refresh,
            &old_access,
            &new_access,
            ACCOUNT,
        ],
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_processes_refresh_once() {
    let (auth, llm) = (start_auth().await, start_mock().await);
    auth.seed_refresh_token(CODEX_REFRESH);
    // A slow token endpoint keeps the first refresher holding the lock while the second waits.
    auth.set_token_delay(Duration::from_millis(500));
    let agent = AgentDir::new().auth(&json!({"openai-codex": codex_entry(-1_000)}));
    let cwd = temp_cwd();
    llm.push(Step::text("one"));
    llm.push(Step::text("two"));
    let one_shot = || {
        endpoints(
            ZiCommand::new(env!("CARGO_BIN_EXE_zi"))
                .agent_dir(&agent)
                .no_session()
                .model("openai-codex/gpt-5.5")
                .args(["-p", "hello"])
                .current_dir(&cwd.path),
            &auth,
            &llm,
        )
        .spawn_one_shot()
    };
    let start = |mut run: zi_test_support::zi_command::OneShot| {
        run.close_stdin();
        run
    };
    let (mut first, mut second) = (start(one_shot()), start(one_shot()));
    let (a, b) = (first.wait(WAIT).await, second.wait(WAIT).await);
    assert_eq!(a.code, Some(0), "{}", a.stderr_text());
    assert_eq!(b.code, Some(0), "{}", b.stderr_text());
    assert_eq!(auth.token_requests("refresh_token").len(), 1, "one refresh");
    let (refresh, access) = auth.current_tokens();
    let bearer = format!("Bearer {}", access.unwrap());
    let requests = llm.requests();
    assert_eq!(requests.len(), 2);
    for request in &requests {
        assert_eq!(request.header("authorization"), Some(bearer.as_str()));
    }
    assert_eq!(
        auth_json(&agent)["openai-codex"]["refresh"],
        refresh.unwrap()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refresh_keeps_external_edits() {
    let (auth, llm) = (start_auth().await, start_mock().await);
    auth.seed_refresh_token(CODEX_REFRESH);
    let agent = AgentDir::new().auth(&json!({"openai-codex": codex_entry(3_600_000)}));
    let cwd = temp_cwd();
    let mut p = session(&agent, &cwd.path, (&auth, &llm), "openai-codex/gpt-5.5").await;
    llm.push(Step::text("one"));
    prompt(&mut p, "p1", text("one")).await;
    assert!(auth.token_requests("refresh_token").is_empty());
    // Meanwhile the person adds a key and the sign-in nears its expiry; an unknown field of the
    // entry (another tool's) must survive too.
    let mut entry = codex_entry(30_000);
    entry["note"] = json!({"by": "another tool"});
    agent.write(
        "auth.json",
        &json!({"openai-codex": entry, "xai": {"type": "api_key", "key": "xai-added"}}).to_string(),
    );
    llm.push(Step::text("two"));
    prompt(&mut p, "p2", text("two")).await;
    assert_eq!(auth.token_requests("refresh_token").len(), 1);
    let stored = auth_json(&agent);
    assert_eq!(stored["xai"]["key"], "xai-added");
    assert_eq!(stored["openai-codex"]["note"]["by"], "another tool");
    assert_eq!(
        stored["openai-codex"]["refresh"],
        auth.current_tokens().0.unwrap()
    );
}

/// Whether process `pid` has `path` open.
fn has_open(pid: u32, path: &Path) -> bool {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .into_iter()
        .flatten()
        .flatten()
        .any(|fd| std::fs::read_link(fd.path()).is_ok_and(|target| target == path))
}

#[cfg(target_os = "linux")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_auth_json_is_never_overwritten() {
    let (auth, llm) = (start_auth().await, start_mock().await);
    auth.seed_refresh_token(CODEX_REFRESH);
    let agent = AgentDir::new().auth(&json!({"openai-codex": codex_entry(-1_000)}));
    let cwd = temp_cwd();
    let mut p = session(&agent, &cwd.path, (&auth, &llm), "openai-codex/gpt-5.5").await;
    // The test holds the lock, so zi's refresh waits for it; meanwhile the file breaks.
    let lock_path = agent.path().join(".auth.json.lock");
    let lock = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .unwrap();
    lock.lock().unwrap();
    p.send(
        "p1",
        "session.prompt",
        Some(json!({"delivery": "direct", "text": "go"})),
    )
    .await;
    let deadline = std::time::Instant::now() + WAIT;
    while !has_open(p.pid(), &lock_path) {
        assert!(
            std::time::Instant::now() < deadline,
            "zi never waited for the lock"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let broken = "{\"openai-codex\": {\"type\": \"oauth\", \"refresh\": \"rt-broken-secret\"";
    agent.write("auth.json", broken);
    lock.unlock().unwrap();
    p.event("agent_settled").await;
    let message = p.last_assistant_after(0);
    let error = message["errorMessage"].as_str().unwrap_or("");
    assert!(
        error.starts_with("Could not refresh the openai-codex sign-in (")
            && error.contains("auth.json is not a valid JSON object; zi leaves it as it is)")
            && error.ends_with("; run zi login openai-codex"),
        "{error}"
    );
    assert!(
        auth.token_requests("refresh_token").is_empty(),
        "no token call"
    );
    assert!(llm.requests().is_empty());
    assert_eq!(
        std::fs::read_to_string(agent.path().join("auth.json")).unwrap(),
        broken
    );
    assert!(
        p.stderr_text()
            .contains("Warning: (auth) Could not refresh the openai-codex sign-in"),
        "{}",
        p.stderr_text()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refresh_failure_marks_the_model_not_configured() {
    let (auth, llm) = (start_auth().await, start_mock().await);
    auth.seed_refresh_token(CODEX_REFRESH);
    // The server echoes the refresh token back in its error.
    auth.fail_next_token(
        400,
        json!({"error": "invalid_grant", "error_description": format!("{CODEX_REFRESH} was revoked")}),
    );
    let agent = AgentDir::new()
        .auth(&json!({"openai-codex": codex_entry(10_000)}))
        .settings(r#"{"retryBaseDelayMs": 0}"#);
    let (cwd, sessions) = (temp_cwd(), temp_cwd());
    let mut p = rpc(&agent, &cwd.path, &auth, &llm)
        .arg("--session-dir")
        .arg(&sessions.path)
        .model("openai-codex/gpt-5.5")
        .spawn_rpc()
        .await;
    let after = p.last_sequence();
    let message = prompt(&mut p, "p1", text("go")).await;
    assert_eq!(
        message["errorMessage"],
        "Could not refresh the openai-codex sign-in (400 invalid_grant: <secret> was revoked); run zi login openai-codex"
    );
    let retried = p.frames().iter().any(|f| {
        f["sequence"].as_u64().unwrap_or(0) > after && f["event"]["type"] == "auto_retry_start"
    });
    assert!(!retried, "a failed refresh is not retried");
    assert_eq!(auth.token_requests("refresh_token").len(), 1);
    let list = p.request_ok("l1", "model.list", None).await;
    assert!(!configured(&list, "openai-codex"), "{list}");
    let message = prompt(&mut p, "p2", text("again")).await;
    assert_eq!(
        message["errorMessage"],
        "Model openai-codex/gpt-5.5 is not authenticated: run zi login openai-codex"
    );
    assert_eq!(
        auth.token_requests("refresh_token").len(),
        1,
        "no loop of refreshes"
    );
    assert!(llm.requests().is_empty());
    let warnings = p
        .stderr_text()
        .matches("Warning: (auth) Could not refresh the openai-codex sign-in")
        .count();
    assert_eq!(warnings, 1, "{}", p.stderr_text());

    // A new sign-in (another zi login) re-enables the provider without a restart.
    agent.write(
        "auth.json",
        &json!({"openai-codex": {"type": "oauth", "access": fake_jwt(ACCOUNT, 9),
                "refresh": "rt-new-login-secret", "expires": now_ms() + 3_600_000,
                "accountId": ACCOUNT}})
        .to_string(),
    );
    let list = p.request_ok("l2", "model.list", None).await;
    assert!(configured(&list, "openai-codex"), "{list}");
    llm.push(Step::text("back"));
    let message = prompt(&mut p, "p3", text("back")).await;
    assert_eq!(message["stopReason"], "stop", "{message}");
    p.exit_by_eof().await;
    assert_no_secrets(
        &written(&p, &[&sessions.path]),
        &[CODEX_REFRESH, "rt-new-login-secret", ACCOUNT],
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copilot_token_is_reexchanged_when_expiring() {
    let (auth, llm) = (start_auth().await, start_mock().await);
    auth.accept_github_token(GITHUB_TOKEN);
    let mut entry = copilot_entry(60_000);
    entry["enterpriseUrl"] = json!("ghe.example.invalid");
    let agent = AgentDir::new().auth(&json!({"github-copilot": entry}));
    let cwd = temp_cwd();
    let mut p = session(&agent, &cwd.path, (&auth, &llm), "github-copilot/gpt-4.1").await;
    llm.push(Step::text("ok"));
    let message = prompt(&mut p, "p1", text("go")).await;
    assert_eq!(message["stopReason"], "stop", "{message}");
    let exchanges = auth.requests_to("/copilot_internal/v2/token");
    assert_eq!(exchanges.len(), 1);
    let github = format!("Bearer {GITHUB_TOKEN}");
    assert_eq!(exchanges[0].header("authorization"), Some(github.as_str()));
    assert_eq!(
        exchanges[0].header("user-agent"),
        Some("GitHubCopilotChat/0.35.0")
    );
    assert_eq!(
        exchanges[0].header("editor-version"),
        Some("vscode/1.107.0")
    );
    assert_eq!(
        exchanges[0].header("copilot-integration-id"),
        Some("vscode-chat")
    );
    let token = auth.last_copilot_token().unwrap();
    let bearer = format!("Bearer {token}");
    assert_eq!(
        llm.requests()[0].header("authorization"),
        Some(bearer.as_str())
    );
    let stored = auth_json(&agent);
    assert_eq!(stored["github-copilot"]["access"], token.as_str());
    assert_eq!(stored["github-copilot"]["refresh"], GITHUB_TOKEN);
    assert_eq!(
        stored["github-copilot"]["enterpriseUrl"],
        "ghe.example.invalid"
    );
    // Stored 5 minutes before the server's expiry, as pi and Zi store it.
    let expires = stored["github-copilot"]["expires"].as_i64().unwrap();
    assert!(
        (expires - (now_ms() + 1_500_000)).abs() < 60_000,
        "{expires}"
    );
}
