//! Secrets out of reach: of tools, and echoed by a provider.

use super::*;
use zi_test_support::scan::assert_no_secrets;

/// Issue 23 C11: a tool reads neither the `--api-key` value in zi's command line, nor a built-in
/// provider's key variable in its own environment or in zi's (`/proc/<zi>/environ`), nor in its
/// own environment a variable zi resolved a header from; the provider still gets them all. The
/// tool writes what it saw to files, so zi's redaction of results cannot hide a leak.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_key_and_key_variables_are_out_of_reach_of_tools() {
    const CLI: &str = "cli-key-secret-5f1b";
    const BUILTIN: &str = "sk-builtin-variable-secret-9d3e";
    const HEADER: &str = "header-variable-secret-1c7a";
    let mock = start_mock().await;
    let agent = AgentDir::new();
    agent.write(
        "models.json",
        &json!({"providers": {"mock": {
            "baseUrl": mock.base_url(),
            "api": "openai-completions",
            "apiKey": "unused",
            "headers": {"x-env": "ZI_C11_HEADER"},
            "models": [{"id": "m1"}],
        }}})
        .to_string(),
    );
    let cwd = temp_cwd();
    let script = "tr '\\0' ' ' < /proc/$PPID/cmdline > cmdline; env > env; \
                  tr '\\0' '\\n' < /proc/$PPID/environ > environ";
    mock.push(Step::tool_call("c1", "bash", json!({"command": script})));
    mock.push(Step::text("done"));
    let mut p = zi(&cwd.path)
        .args(["--mode", "rpc", "--no-session", "--model", "mock/m1"])
        .args(["--api-key", CLI, "--agent-dir"])
        .arg(agent.path())
        .env("OPENAI_API_KEY", BUILTIN)
        .env("ZI_C11_HEADER", HEADER)
        .env("ZI_C11_OTHER", "visible")
        .spawn_rpc()
        .await;
    start_prompt(&mut p).await;
    p.event("agent_settled").await;
    let requests = mock.requests();
    assert_eq!(requests.len(), 2);
    for request in &requests {
        let bearer = format!("Bearer {CLI}");
        assert_eq!(request.header("authorization"), Some(bearer.as_str()));
        assert_eq!(request.header("x-env"), Some(HEADER));
    }
    let read = |name: &str| std::fs::read_to_string(cwd.path.join(name)).unwrap();
    let cmdline = read("cmdline");
    assert!(cmdline.contains("--api-key *"), "{cmdline}");
    assert!(!cmdline.contains(CLI), "{cmdline}");
    let env = read("env");
    assert!(env.contains("ZI_C11_OTHER=visible"), "{env}");
    for secret in [CLI, BUILTIN, HEADER] {
        assert!(!env.contains(secret), "{secret}: {env}");
    }
    let environ = read("environ");
    assert!(environ.contains("ZI_C11_OTHER=visible"), "{environ}");
    assert!(!environ.contains(BUILTIN), "{environ}");
    p.exit_by_eof().await;
}

// ---------------------------------------------------------------------------------------------
// Every configured secret is scrubbed (point 6)
// ---------------------------------------------------------------------------------------------

const KEY_SECRET: &str = "key-command-secret-4e2a";
const HEADER_LITERAL: &str = "header-literal-secret-8b3f";
const HEADER_COMMAND: &str = "header-command-secret-2d9c";
const HEADER_ENV: &str = "header-env-secret-6a0e";
const URL_PASSWORD: &str = "url-password-7c1d";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secrets_echoed_by_a_provider_never_leave_zi() {
    use base64::Engine as _;
    let mock = start_mock().await;
    let base = mock
        .base_url()
        .replacen("http://", &format!("http://zi-user:{URL_PASSWORD}@"), 1);
    let agent = AgentDir::new();
    agent.write(
        "models.json",
        &json!({"providers": {"mock": {
            "baseUrl": base,
            "api": "openai-completions",
            "apiKey": format!("!printf {KEY_SECRET}"),
            "headers": {
                "x-literal": HEADER_LITERAL,
                "x-command": format!("!printf {HEADER_COMMAND}"),
                "x-env": "ZI_HARDENING_HEADER",
            },
            "models": [{"id": "m1"}],
        }}})
        .to_string(),
    );
    agent.write("settings.json", r#"{"retryEnabled": false}"#);
    let basic = base64::engine::general_purpose::STANDARD.encode(format!("zi-user:{URL_PASSWORD}"));
    let secrets = [
        KEY_SECRET,
        HEADER_LITERAL,
        HEADER_COMMAND,
        HEADER_ENV,
        URL_PASSWORD,
        basic.as_str(),
    ];
    let echo = format!("denied; you sent {}", secrets.join(" and "));
    let cwd = temp_cwd();
    let sessions = temp_cwd();

    // RPC: frames and the journal.
    mock.push(Step::HttpError {
        status: 401,
        message: echo.clone(),
    });
    let mut p = zi(&cwd.path)
        .args(["--mode", "rpc", "--model", "mock/m1", "--agent-dir"])
        .arg(agent.path())
        .arg("--session-dir")
        .arg(&sessions.path)
        .env("ZI_HARDENING_HEADER", HEADER_ENV)
        .spawn_rpc()
        .await;
    start_prompt(&mut p).await;
    p.event("agent_settled").await;
    let message = p.last_assistant_after(0);
    assert_eq!(message["stopReason"], "error", "{message}");
    assert!(
        message["errorMessage"]
            .as_str()
            .is_some_and(|m| m.starts_with("401 denied; you sent")),
        "{message}"
    );
    let exited = p.exit_by_eof().await;

    // Text mode: the error goes to stderr.
    mock.push(Step::HttpError {
        status: 401,
        message: echo,
    });
    let oneshot = run(
        zi(&cwd.path)
            .args(["-p", "--no-session", "--model", "mock/m1", "--agent-dir"])
            .arg(agent.path())
            .env("ZI_HARDENING_HEADER", HEADER_ENV)
            .arg("hello"),
        b"",
    )
    .await;
    assert_eq!(oneshot.code, Some(1));
    assert!(
        oneshot.stderr_text().contains("401 denied"),
        "{}",
        oneshot.stderr_text()
    );

    // The secrets did reach the provider, so the scan below means something.
    let requests = mock.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[0].header("x-literal"), Some(HEADER_LITERAL));
    assert_eq!(requests[0].header("x-command"), Some(HEADER_COMMAND));
    assert_eq!(requests[0].header("x-env"), Some(HEADER_ENV));

    assert_no_secret_written(&p, &exited, &oneshot, &sessions, &secrets);
}

/// No secret in anything zi wrote: frames, stderr, the text mode's output, the journal.
fn assert_no_secret_written(
    p: &Harness,
    exited: &Exited,
    oneshot: &Finished,
    sessions: &TempCwd,
    secrets: &[&str],
) {
    let mut written: Vec<(String, String)> = p
        .frames()
        .iter()
        .map(|f| ("frame".to_string(), f.to_string()))
        .collect();
    written.push(("rpc stderr".into(), exited.stderr.clone()));
    written.push(("text stdout".into(), oneshot.stdout_text()));
    written.push(("text stderr".into(), oneshot.stderr_text()));
    let files = zi_test_support::dirs::all_files(&sessions.path);
    assert!(!files.is_empty(), "a journal was written");
    for file in files {
        written.push((
            file.display().to_string(),
            std::fs::read_to_string(&file).unwrap_or_default(),
        ));
    }
    assert_no_secrets(&written, secrets);
}
