//! `zi login --status`, `zi logout`, the provider picker of a bare `zi login`, `--agent-dir` /
//! `ZI_AGENT_DIR`, refused providers, and an interrupted sign-in.

use serde_json::json;
use zi_test_support::dirs::{AgentDir, temp_cwd};
use zi_test_support::mock_auth::{DevicePoll, USER_CODE, start_auth};
use zi_test_support::zi_command::Finished;

use super::login_codex::start_login;
use super::*;

async fn zi(args: &[&str], env: &[(&str, &str)]) -> Finished {
    let cwd = temp_cwd();
    let mut command = ZiCommand::new(env!("CARGO_BIN_EXE_zi"))
        .args(args)
        .current_dir(&cwd.path);
    for (name, value) in env {
        command = command.env(name, value);
    }
    command.run_to_end(b"", WAIT).await.unwrap()
}

fn dir_arg(agent: &AgentDir) -> String {
    agent.path().display().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_lists_both_and_never_prints_tokens() {
    let agent = AgentDir::new().auth(&json!({"openai-codex": codex_entry(3_600_000)}));
    let status = zi(&["login", "--status", "--agent-dir", &dir_arg(&agent)], &[]).await;
    assert_eq!(status.code, Some(0), "{}", status.stderr_text());
    let text = status.stdout_text();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "{text}");
    assert!(
        lines[0].starts_with("openai-codex    signed in (token valid until ")
            && lines[0].ends_with(" UTC, refreshed automatically)"),
        "{text}"
    );
    assert_eq!(lines[1], "github-copilot  not signed in");
    for secret in [CODEX_REFRESH, ACCOUNT, &fake_jwt(ACCOUNT, 0)] {
        assert!(!text.contains(secret) && !status.stderr_text().contains(secret));
    }
    // An expired token is reported as such (it is refreshed at the next request).
    let expired = AgentDir::new().auth(&json!({"github-copilot": copilot_entry(-60_000)}));
    let status = zi(
        &["login", "--status", "--agent-dir", &dir_arg(&expired)],
        &[],
    )
    .await;
    assert!(
        status
            .stdout_text()
            .contains("github-copilot  signed in (token expired at "),
        "{}",
        status.stdout_text()
    );
    // An invalid auth.json: exit 1, left as it is.
    let broken = AgentDir::new();
    broken.write("auth.json", "[]");
    let status = zi(
        &["login", "--status", "--agent-dir", &dir_arg(&broken)],
        &[],
    )
    .await;
    assert_eq!(status.code, Some(1));
    assert!(status.stderr_text().contains("is not a valid JSON object"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn logout_removes_only_that_entry() {
    let agent = AgentDir::new().auth(&json!({
        "openai-codex": codex_entry(3_600_000),
        "github-copilot": copilot_entry(3_600_000),
        "openai": {"type": "api_key", "key": "sk-kept"},
    }));
    let out = zi(
        &["logout", "openai-codex", "--agent-dir", &dir_arg(&agent)],
        &[],
    )
    .await;
    assert_eq!(out.code, Some(0), "{}", out.stderr_text());
    assert_eq!(out.stdout_text(), "Signed out of openai-codex\n");
    let stored = auth_json(&agent);
    assert!(stored.get("openai-codex").is_none());
    assert_eq!(stored["github-copilot"]["refresh"], GITHUB_TOKEN);
    assert_eq!(stored["openai"]["key"], "sk-kept");
    let again = zi(
        &["logout", "openai-codex", "--agent-dir", &dir_arg(&agent)],
        &[],
    )
    .await;
    assert_eq!(again.code, Some(0));
    assert_eq!(again.stdout_text(), "openai-codex was not signed in\n");
    let missing = zi(&["logout", "--agent-dir", &dir_arg(&agent)], &[]).await;
    assert_eq!(missing.code, Some(1), "a provider is required");

    let broken = AgentDir::new();
    broken.write("auth.json", "{\"github-copilot\": ");
    let out = zi(
        &["logout", "github-copilot", "--agent-dir", &dir_arg(&broken)],
        &[],
    )
    .await;
    assert_eq!(out.code, Some(1));
    assert_eq!(
        std::fs::read_to_string(broken.path().join("auth.json")).unwrap(),
        "{\"github-copilot\": "
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bare_login_offers_a_picker() {
    let auth = start_auth().await;
    auth.push_poll(DevicePoll::Token("gho_picked-secret".into()));
    let agent = AgentDir::new();
    let mut run = start_login(&agent, &auth, &[]).await;
    run.stdout_line(WAIT, |line| line == "  2) GitHub Copilot — github-copilot")
        .await;
    assert!(
        run.stdout_so_far()
            .contains("  1) ChatGPT Plus/Pro (Codex) — openai-codex")
    );
    run.write_stdin("2\n").await;
    run.stdout_line(WAIT, |line| line.contains(USER_CODE)).await;
    let finished = run.wait(WAIT).await;
    assert_eq!(finished.code, Some(0), "{}", finished.stderr_text());
    assert_eq!(
        auth_json(&agent)["github-copilot"]["refresh"],
        "gho_picked-secret"
    );

    // An answer that names nothing zi signs in to.
    let mut run = start_login(&agent, &auth, &[]).await;
    run.write_stdin("7\n").await;
    let finished = run.wait(WAIT).await;
    assert_eq!(finished.code, Some(1));
    assert!(finished.stderr_text().contains("Unknown provider 7"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn login_honours_agent_dir_flag_and_env() {
    let by_env = AgentDir::new().auth(&json!({"openai-codex": codex_entry(3_600_000)}));
    let by_flag = AgentDir::new();
    let env = [("ZI_AGENT_DIR", by_env.path().to_str().unwrap())];
    let status = zi(&["login", "--status"], &env).await;
    assert!(
        status
            .stdout_text()
            .starts_with("openai-codex    signed in")
    );
    let status = zi(
        &["login", "--status", "--agent-dir", &dir_arg(&by_flag)],
        &env,
    )
    .await;
    assert!(
        status
            .stdout_text()
            .starts_with("openai-codex    not signed in")
    );
    let out = zi(&["logout", "openai-codex"], &env).await;
    assert_eq!(out.stdout_text(), "Signed out of openai-codex\n");
    assert!(auth_json(&by_env).get("openai-codex").is_none());
    // Without either, ~/.zi/agent of HOME.
    let home = temp_cwd();
    let home_agent = home.path.join(".zi/agent");
    std::fs::create_dir_all(&home_agent).unwrap();
    std::fs::write(
        home_agent.join("auth.json"),
        json!({"github-copilot": copilot_entry(3_600_000)}).to_string(),
    )
    .unwrap();
    let status = zi(
        &["login", "--status"],
        &[("HOME", home.path.to_str().unwrap())],
    )
    .await;
    assert!(
        status.stdout_text().contains("github-copilot  signed in"),
        "{}",
        status.stdout_text()
    );
}

/// An empty agent directory is named as every zi command names it (docs/cli.md#environment),
/// not with clap's error about `--agent-dir`: the variable when it came from `ZI_AGENT_DIR`
/// (also through `zi acp login`), the flag when it came from `--agent-dir`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_agent_dir_is_named_as_by_every_command() {
    let empty_variable = [("ZI_AGENT_DIR", "")];
    type Case<'a> = (&'a [&'a str], &'a [(&'a str, &'a str)], &'a str);
    let cases: [Case; 6] = [
        (
            &["login", "--status"],
            &empty_variable,
            "ZI_AGENT_DIR must not be empty",
        ),
        (
            &["logout", "openai-codex"],
            &empty_variable,
            "ZI_AGENT_DIR must not be empty",
        ),
        (
            &["acp", "login", "openai-codex"],
            &empty_variable,
            "ZI_AGENT_DIR must not be empty",
        ),
        (
            &["--mode", "rpc"],
            &empty_variable,
            "ZI_AGENT_DIR must not be empty",
        ),
        (
            &["login", "--status", "--agent-dir="],
            &[],
            "--agent-dir requires a value",
        ),
        (
            &["logout", "openai-codex", "--agent-dir", ""],
            &[],
            "--agent-dir requires a value",
        ),
    ];
    for (args, env, message) in cases {
        let out = zi(args, env).await;
        assert_eq!(out.code, Some(1), "{args:?}: {}", out.stderr_text());
        assert_eq!(out.stderr_text().trim_end(), message, "{args:?}");
        assert!(out.stdout.is_empty(), "{args:?}: {}", out.stdout_text());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anthropic_login_is_refused_with_the_reason() {
    let agent = AgentDir::new();
    let out = zi(
        &["login", "anthropic", "--agent-dir", &dir_arg(&agent)],
        &[],
    )
    .await;
    assert_eq!(out.code, Some(1));
    assert_eq!(
        out.stderr_text().trim(),
        "Claude Pro/Max sign-in is not offered: Anthropic's terms forbid third-party tools from using plan credentials. Use ANTHROPIC_API_KEY (or an auth.json api_key entry)."
    );
    let out = zi(&["login", "openai", "--agent-dir", &dir_arg(&agent)], &[]).await;
    assert_eq!(out.code, Some(1));
    assert_eq!(
        out.stderr_text().trim(),
        "Unknown provider openai: zi signs in to openai-codex (ChatGPT) and github-copilot"
    );
    assert!(!agent.path().join("auth.json").exists());
    // `zi -p login` is still a prompt, not the subcommand.
    let out = zi(&["-p", "login", "--agent-dir", &dir_arg(&agent)], &[]).await;
    assert_eq!(out.code, Some(1));
    assert!(!out.stderr_text().contains("Unknown provider"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupted_login_writes_nothing() {
    let auth = start_auth().await;
    let agent = AgentDir::new();
    let mut run = start_login(&agent, &auth, &["openai-codex"]).await;
    run.stdout_line(WAIT, |line| line.contains("/oauth/authorize?"))
        .await;
    run.signal(libc::SIGINT);
    let finished = run.wait(WAIT).await;
    assert_eq!(finished.code, Some(130));
    assert_eq!(finished.stderr_text().trim(), "Sign-in cancelled");
    assert!(!agent.path().join("auth.json").exists());
}
