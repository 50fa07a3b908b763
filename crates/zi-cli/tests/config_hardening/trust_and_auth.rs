//! Trust, context files, base URLs and auth entries of the wrong shape.

use super::*;

// ---------------------------------------------------------------------------------------------
// Context files, trust.json, base URLs, auth.json entries (point 8)
// ---------------------------------------------------------------------------------------------

fn agent_for(mock: &MockLlm) -> AgentDir {
    let agent = AgentDir::new();
    agent.write(
        "models.json",
        &mock.models_json("k", &[json!({"id": "m1", "reasoning": true})]),
    );
    agent
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn context_files_load_in_untrusted_projects() {
    let mock = start_mock().await;
    let agent = agent_for(&mock);
    agent.write("AGENTS.md", "global-rule-d41c");
    let project = temp_cwd();
    std::fs::write(project.path.join("AGENTS.md"), "project-rule-93fa")
        .unwrap_or_else(|e| panic!("{e}"));
    let sub = project.path.join("sub");
    std::fs::create_dir_all(&sub).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(sub.join("CLAUDE.md"), "sub-rule-5b07").unwrap_or_else(|e| panic!("{e}"));
    mock.push(Step::text("ok"));
    let finished = run(
        zi(&sub)
            .args(["-p", "--no-session", "--model", "mock/m1", "--agent-dir"])
            .arg(agent.path())
            .arg("hello"),
        b"",
    )
    .await;
    assert_eq!(finished.code, Some(0), "{}", finished.stderr_text());
    let requests = mock.requests();
    let body = requests[0].body.to_string();
    for rule in ["global-rule-d41c", "project-rule-93fa", "sub-rule-5b07"] {
        assert!(
            body.contains(rule),
            "{rule} missing from the request: {body}"
        );
    }
}

/// The initial thinking level of a project whose `.zi/settings.json` asks for `high`, with the
/// trust.json `trust` gives for the project's directory, and zi's stderr.
async fn thinking_level_with_trust(trust: impl Fn(&str) -> Option<Value>) -> (String, String) {
    let mock = start_mock().await;
    let agent = agent_for(&mock);
    let project = temp_cwd();
    if let Some(trust) = trust(&project.path.display().to_string()) {
        agent.write("trust.json", &trust.to_string());
    }
    let zi_dir = project.path.join(".zi");
    std::fs::create_dir_all(&zi_dir).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(
        zi_dir.join("settings.json"),
        r#"{"defaultThinkingLevel": "high"}"#,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let mut p = spawn_m1(&agent, &project.path).await;
    let state = p.ready();
    p.close_stdin().await;
    let exited = p.wait_exit(WAIT).await;
    (
        state["thinkingLevel"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
        exited.stderr,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trust_json_in_zi_format_is_read_and_the_list_format_still_works() {
    let (level, stderr) = thinking_level_with_trust(|dir| Some(json!({ dir: true }))).await;
    assert_eq!(level, "high", "Zi's format trusts the project: {stderr}");
    assert!(!stderr.contains("(trust)"), "{stderr}");
    let (level, stderr) = thinking_level_with_trust(|dir| {
        let parent = Path::new(dir).parent().map(|p| p.display().to_string());
        Some(json!({ parent.unwrap_or_default(): true, dir: false }))
    })
    .await;
    assert_eq!(level, "medium", "the nearer false wins: {stderr}");
    let (level, stderr) = thinking_level_with_trust(|dir| Some(json!({"trusted": [dir]}))).await;
    assert_eq!(level, "high", "the earlier list format: {stderr}");
    let (level, _) = thinking_level_with_trust(|_| None).await;
    assert_eq!(level, "medium", "no trust.json: untrusted");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invalid_base_url_is_a_configuration_error_without_retries() {
    for base_url in ["file:///tmp/zi-no-endpoint", "127.0.0.1:9/v1"] {
        let agent = AgentDir::new();
        agent.write(
            "models.json",
            &json!({"providers": {"bad": {
                "baseUrl": base_url, "api": "openai-completions", "apiKey": "k",
                "models": [{"id": "m1"}]}}})
            .to_string(),
        );
        let cwd = temp_cwd();
        let finished = run(
            zi(&cwd.path)
                .args([
                    "--mode",
                    "json",
                    "--no-session",
                    "--model",
                    "bad/m1",
                    "--agent-dir",
                ])
                .arg(agent.path())
                .arg("hello"),
            b"",
        )
        .await;
        assert_eq!(finished.code, Some(1), "{}", finished.stderr_text());
        let events = finished.json_lines();
        let types: Vec<&str> = events.iter().filter_map(|e| e["type"].as_str()).collect();
        assert!(
            !types.contains(&"auto_retry_start"),
            "{base_url}: {types:?}"
        );
        let stderr = finished.stderr_text();
        assert!(
            stderr.contains("Invalid baseUrl for provider bad"),
            "{base_url}: {stderr}"
        );
        assert!(
            !stderr.contains(base_url),
            "the URL is not output: {stderr}"
        );
    }
}

/// Issue 23 L2: every auth.json entry of the wrong shape gets its own `Warning:` naming the
/// file and the entry, and no value.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auth_entries_of_the_wrong_shape_each_get_a_warning() {
    let agent = AgentDir::new();
    agent.write(
        "auth.json",
        &json!({
            "openai": {"type": "api_key", "key": 4242},
            "anthropic": {"type": "api_key", "key": {"secret": "sk-nested-secret"}},
            "groq": {"type": "api_key"},
            "xai": {"type": "api_key", "key": "k-fine"},
            "mistral": {"type": "apikey", "key": "sk-typo-secret"},
            "openai-codex": {"type": "oauth", "access": 1, "refresh": null, "expires": "soon"},
            "github-copilot": {"type": "oauth", "access": "a", "refresh": "r", "expires": 1},
        })
        .to_string(),
    );
    let cwd = temp_cwd();
    let finished = run(
        zi(&cwd.path)
            .args(["--mode", "rpc", "--no-session", "--agent-dir"])
            .arg(agent.path()),
        b"",
    )
    .await;
    assert_eq!(finished.code, Some(0), "{}", finished.stderr_text());
    let stderr = finished.stderr_text();
    let path = agent.path().join("auth.json");
    let named = |provider: &str| -> Vec<String> {
        warning_lines(&stderr)
            .into_iter()
            .filter(|w| w.contains(&format!("(auth) entry {provider} in {}", path.display())))
            .map(str::to_string)
            .collect()
    };
    for (provider, problem) in [
        ("openai", "\"key\" must be a string"),
        ("anthropic", "\"key\" must be a string"),
        ("groq", "has no \"key\""),
        ("mistral", "has no known \"type\""),
        ("openai-codex", "\"refresh\" must be a string"),
    ] {
        let lines = named(provider);
        assert_eq!(lines.len(), 1, "{provider}: {stderr}");
        assert!(lines[0].contains(problem), "{provider}: {stderr}");
    }
    assert!(named("openai-codex")[0].contains("\"expires\" must be a number"));
    for fine in ["xai", "github-copilot"] {
        assert!(named(fine).is_empty(), "{fine}: {stderr}");
    }
    for secret in ["4242", "sk-nested-secret", "sk-typo-secret", "k-fine"] {
        assert!(!stderr.contains(secret), "{secret}: {stderr}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auth_entries_that_are_not_objects_are_named_in_warnings() {
    let agent = AgentDir::new();
    agent.write(
        "auth.json",
        r#"{"openai": "sk-bare-string-secret", "groq": null, "xai": {"type": "api_key", "key": "k"}}"#,
    );
    let cwd = temp_cwd();
    let finished = run(
        zi(&cwd.path)
            .args(["--mode", "rpc", "--no-session", "--agent-dir"])
            .arg(agent.path()),
        b"",
    )
    .await;
    assert_eq!(finished.code, Some(0), "{}", finished.stderr_text());
    let stderr = finished.stderr_text();
    let warnings = warning_lines(&stderr);
    for provider in ["openai", "groq"] {
        assert!(
            warnings
                .iter()
                .any(|w| w.contains(&format!("(auth) entry {provider} in "))
                    && w.contains("is not an object")),
            "{provider}: {stderr}"
        );
    }
    assert!(!stderr.contains("sk-bare-string-secret"), "{stderr}");
}
