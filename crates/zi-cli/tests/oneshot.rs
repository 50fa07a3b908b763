//! Black-box tests of zi's one-shot modes (`-p` / `--mode text`, `--mode json`) and of the CLI
//! surface around them (docs/cli.md).

use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;
use std::time::Duration;

use serde_json::json;
use zi_test_support::dirs::{AgentDir, temp_cwd};
use zi_test_support::mock_llm::start_mock;
use zi_test_support::mock_llm::{MockLlm, Step};
use zi_test_support::zi_command::{Finished, ZiCommand};

use crate::wire_support::{system_text, text_of, user_texts};

const WAIT: Duration = Duration::from_secs(30);
const KEY: &str = "oneshot-key";
const SIGTERM: i32 = 15;

fn agent_with(mock: &MockLlm) -> AgentDir {
    // Retry policy is not under test here.
    AgentDir::new()
        .models(mock, KEY, &[json!({"id": "m1", "reasoning": true})])
        .settings(r#"{"retryEnabled": false}"#)
}

fn zi(cwd: &Path) -> ZiCommand {
    ZiCommand::new(env!("CARGO_BIN_EXE_zi")).current_dir(cwd)
}

/// `zi --no-session --agent-dir A --model mock/m1 ARGS…`.
fn zi_m1(agent: &AgentDir, cwd: &Path, args: &[&str]) -> ZiCommand {
    zi(cwd)
        .no_session()
        .agent_dir(agent)
        .model("mock/m1")
        .args(args)
}

async fn run(builder: ZiCommand, stdin: &[u8]) -> Finished {
    builder
        .run_to_end(stdin, WAIT)
        .await
        .unwrap_or_else(|e| panic!("run zi: {e}"))
}

fn describe(finished: &Finished) -> String {
    format!(
        "exit {:?}\n--- stdout ---\n{}\n--- stderr ---\n{}",
        finished.code,
        finished.stdout_text(),
        finished.stderr_text()
    )
}

// ---------------------------------------------------------------------------------------------
// Text mode
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn print_mode_prints_exactly_the_reply() {
    let mock = start_mock().await;
    mock.push(Step::Text(vec!["Hel".into(), "lo there".into()]));
    let agent = agent_with(&mock);
    let cwd = temp_cwd();
    let finished = run(zi_m1(&agent, &cwd.path, &["-p", "hello"]), b"").await;
    assert_eq!(finished.code, Some(0), "{}", describe(&finished));
    assert_eq!(
        finished.stdout_text(),
        "Hello there\n",
        "{}",
        describe(&finished)
    );
    let requests = mock.wait_for_requests(1, WAIT).await;
    assert_eq!(requests.len(), 1);
    assert_eq!(user_texts(&requests[0].body), ["hello"]);
    assert_eq!(
        requests[0].header("authorization"),
        Some(format!("Bearer {KEY}").as_str())
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn piped_stdin_is_the_first_prompt() {
    let mock = start_mock().await;
    mock.push(Step::text("first reply"));
    mock.push(Step::text("second reply"));
    let agent = agent_with(&mock);
    let cwd = temp_cwd();
    let finished = run(
        zi_m1(&agent, &cwd.path, &["--mode", "text", "then this"]),
        b"from stdin",
    )
    .await;
    assert_eq!(finished.code, Some(0), "{}", describe(&finished));
    assert_eq!(
        finished.stdout_text(),
        "second reply\n",
        "only the final assistant message is printed"
    );
    let requests = mock.wait_for_requests(2, WAIT).await;
    assert_eq!(requests.len(), 2, "one provider call per prompt");
    assert_eq!(user_texts(&requests[0].body), ["from stdin"]);
    assert_eq!(user_texts(&requests[1].body), ["from stdin", "then this"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn system_prompt_flag_replaces_the_base_prompt() {
    let mock = start_mock().await;
    mock.push(Step::text("ok"));
    let agent = agent_with(&mock);
    let cwd = temp_cwd();
    let finished = run(
        zi_m1(
            &agent,
            &cwd.path,
            &[
                "-p",
                "--system-prompt",
                "You are a terse test double.",
                "--append-system-prompt",
                "Appended rule.",
                "hi",
            ],
        ),
        b"",
    )
    .await;
    assert_eq!(finished.code, Some(0), "{}", describe(&finished));
    let requests = mock.wait_for_requests(1, WAIT).await;
    let system = system_text(&requests[0].body);
    assert!(
        system.starts_with("You are a terse test double."),
        "{system}"
    );
    assert!(system.contains("Appended rule."), "{system}");
    assert!(
        !system.contains("You are an expert coding assistant"),
        "the built-in base prompt is replaced: {system}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn provider_error_exits_1_with_the_error_on_stderr() {
    let mock = start_mock().await;
    mock.push(Step::HttpError {
        status: 400,
        message: "context too fancy".into(),
    });
    let agent = agent_with(&mock);
    let cwd = temp_cwd();
    let finished = run(zi_m1(&agent, &cwd.path, &["-p", "hello"]), b"").await;
    assert_eq!(finished.code, Some(1), "{}", describe(&finished));
    assert!(
        finished.stderr_text().contains("context too fancy"),
        "{}",
        describe(&finished)
    );
    assert!(
        !finished.stdout_text().contains("context too fancy"),
        "diagnostics stay off stdout: {}",
        describe(&finished)
    );

    // JSON mode follows the same exit code.
    mock.push(Step::HttpError {
        status: 400,
        message: "context too fancy".into(),
    });
    let finished = run(zi_m1(&agent, &cwd.path, &["--mode", "json", "hello"]), b"").await;
    assert_eq!(finished.code, Some(1), "{}", describe(&finished));
    let lines = finished.json_lines();
    assert_eq!(
        lines.last().map(|l| l["type"].clone()),
        Some(json!("agent_settled"))
    );
}

// ---------------------------------------------------------------------------------------------
// JSON mode
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_mode_prints_the_header_then_delta_only_events() {
    let mock = start_mock().await;
    mock.push(Step::Text(vec!["Hel".into(), "lo".into()]));
    let agent = agent_with(&mock);
    let cwd = temp_cwd();
    let finished = run(zi_m1(&agent, &cwd.path, &["--mode", "json", "hello"]), b"").await;
    assert_eq!(finished.code, Some(0), "{}", describe(&finished));
    let lines = finished.json_lines();
    let header = &lines[0];
    assert_eq!(header["type"], "session", "{header}");
    assert_eq!(header["version"], 2, "{header}");
    assert!(
        header["id"].as_str().is_some_and(|id| id.len() == 36),
        "{header}"
    );
    assert!(header["timestamp"].is_string(), "{header}");
    assert_eq!(header["cwd"], cwd.path.display().to_string(), "{header}");

    let events = &lines[1..];
    let types: Vec<&str> = events
        .iter()
        .map(|e| e["type"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(types.first(), Some(&"agent_start"), "{types:?}");
    assert_eq!(types.last(), Some(&"agent_settled"), "{types:?}");
    assert_eq!(types.iter().filter(|t| **t == "agent_settled").count(), 1);
    let mut deltas = String::new();
    for event in events.iter().filter(|e| e["type"] == "message_update") {
        let keys: Vec<&String> = event
            .as_object()
            .map(|o| o.keys().collect())
            .unwrap_or_default();
        assert_eq!(keys, ["type", "assistantMessageEvent"], "{event}");
        let inner = &event["assistantMessageEvent"];
        assert!(inner.get("partial").is_none(), "{event}");
        if inner["type"] == "text_delta" {
            deltas.push_str(inner["delta"].as_str().unwrap_or_default());
        }
    }
    assert_eq!(deltas, "Hello");
    let end = events
        .iter()
        .rev()
        .find(|e| e["type"] == "message_end" && e["message"]["role"] == "assistant")
        .cloned()
        .unwrap_or_default();
    assert_eq!(text_of(&end["message"]["content"]), "Hello", "{end}");
    assert_eq!(end["message"]["stopReason"], "stop");
    assert!(
        finished.stderr.is_empty(),
        "nothing on stderr: {}",
        describe(&finished)
    );
    // Ephemeral: nothing persisted.
    assert!(!agent.path().join("sessions").exists());
}

// ---------------------------------------------------------------------------------------------
// CLI surface
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_prompt_is_an_error() {
    let agent = AgentDir::new();
    let cwd = temp_cwd();
    let finished = run(
        zi(&cwd.path)
            .args(["--mode", "text", "--no-session", "--agent-dir"])
            .arg(agent.path()),
        b"",
    )
    .await;
    assert_eq!(finished.code, Some(1), "{}", describe(&finished));
    assert!(
        finished
            .stderr_text()
            .contains("Headless mode requires a prompt or piped stdin"),
        "{}",
        describe(&finished)
    );
    assert!(finished.stdout.is_empty(), "{}", describe(&finished));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn help_lists_every_flag_and_environment_variable() {
    let cwd = temp_cwd();
    let finished = run(zi(&cwd.path).arg("--help"), b"").await;
    assert_eq!(finished.code, Some(0), "{}", describe(&finished));
    let help = finished.stdout_text();
    let mut missing = Vec::new();
    for item in [
        "--mode",
        "--print",
        "--cwd",
        "--agent-dir",
        "--session-dir",
        "--model",
        "--thinking",
        "--api-key",
        "--system-prompt",
        "--append-system-prompt",
        "--extension",
        "--no-session",
        "--new-session",
        "--continue",
        "--resume",
        "--help",
        "--version",
        "ZI_MODE",
        "ZI_AGENT_DIR",
        "ZI_SESSION_DIR",
        "ZI_DEFAULT_MODEL",
        "ZI_DEFAULT_THINKING",
    ] {
        if !help.contains(item) {
            missing.push(item);
        }
    }
    assert!(missing.is_empty(), "--help lacks {missing:?}:\n{help}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn version_needs_no_home_and_no_agent_dir() {
    let cwd = temp_cwd();
    let unreadable = cwd.path.join("agent");
    std::fs::create_dir(&unreadable).unwrap_or_else(|e| panic!("mkdir: {e}"));
    std::fs::write(unreadable.join("settings.json"), "{ not json")
        .unwrap_or_else(|e| panic!("write: {e}"));
    std::fs::set_permissions(&unreadable, std::fs::Permissions::from_mode(0o000))
        .unwrap_or_else(|e| panic!("chmod: {e}"));
    // `env -u HOME` runs zi with HOME unset.
    let finished = run(
        ZiCommand::new("/usr/bin/env")
            .current_dir(&cwd.path)
            .args(["-u", "HOME"])
            .arg(env!("CARGO_BIN_EXE_zi"))
            .arg("--version")
            .env("ZI_AGENT_DIR", &unreadable),
        b"",
    )
    .await;
    let _ = std::fs::set_permissions(&unreadable, std::fs::Permissions::from_mode(0o700));
    assert_eq!(finished.code, Some(0), "{}", describe(&finished));
    let version = finished.stdout_text();
    assert!(
        version.starts_with("zi ") && version.contains(env!("CARGO_PKG_VERSION")),
        "{}",
        describe(&finished)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interactive_mode_without_a_tty_exits_1() {
    let agent = AgentDir::new();
    let cwd = temp_cwd();
    let finished = run(
        zi(&cwd.path)
            .args(["--mode", "interactive", "--no-session", "--agent-dir"])
            .arg(agent.path()),
        b"",
    )
    .await;
    assert_eq!(finished.code, Some(1), "{}", describe(&finished));
    assert!(finished.stdout.is_empty(), "{}", describe(&finished));
    assert!(
        finished
            .stderr_text()
            .contains("Interactive mode requires TTY stdin and stdout"),
        "{}",
        describe(&finished)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_flag_exits_1() {
    let cwd = temp_cwd();
    let finished = run(zi(&cwd.path).args(["--bogus", "hello"]), b"").await;
    assert_eq!(finished.code, Some(1), "{}", describe(&finished));
    assert!(
        finished
            .stderr_text()
            .lines()
            .any(|l| l.trim() == "Unknown argument: --bogus"),
        "{}",
        describe(&finished)
    );
    assert!(finished.stdout.is_empty(), "{}", describe(&finished));
}

/// docs/cli.md#environment: an empty `ZI_*` variable fails with `X must not be empty`, an empty
/// flag with `--flag requires a value`, before anything starts (not clap's generic error; an
/// empty `--cwd` got clap's).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn empty_variables_and_flags_are_named() {
    let agent = AgentDir::new();
    let cwd = temp_cwd();
    for variable in [
        "ZI_MODE",
        "ZI_AGENT_DIR",
        "ZI_SESSION_DIR",
        "ZI_DEFAULT_MODEL",
        "ZI_DEFAULT_THINKING",
        "ZI_SANDBOX",
    ] {
        let finished = run(
            zi(&cwd.path)
                .args(["-p", "hello", "--no-session"])
                .env(variable, ""),
            b"",
        )
        .await;
        assert_eq!(
            finished.code,
            Some(1),
            "{variable}: {}",
            describe(&finished)
        );
        assert_eq!(
            finished.stderr_text().trim_end(),
            format!("{variable} must not be empty"),
            "{variable}: {}",
            describe(&finished)
        );
        assert!(finished.stdout.is_empty(), "{}", describe(&finished));
    }
    for flag in ["--agent-dir", "--mode", "--sandbox", "--cwd"] {
        // The flag wins over its variable, and its empty value is the flag's error.
        let finished = run(
            zi(&cwd.path)
                .args(["-p", "hello", "--no-session", &format!("{flag}=")])
                .env("ZI_AGENT_DIR", agent.path()),
            b"",
        )
        .await;
        assert_eq!(finished.code, Some(1), "{flag}: {}", describe(&finished));
        assert_eq!(
            finished.stderr_text().trim_end(),
            format!("{flag} requires a value"),
            "{flag}: {}",
            describe(&finished)
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_model_exits_1() {
    let mock = start_mock().await;
    let agent = agent_with(&mock);
    let cwd = temp_cwd();
    let finished = run(
        zi(&cwd.path)
            .args(["-p", "hello", "--no-session", "--agent-dir"])
            .arg(agent.path())
            .args(["--model", "nope/x"]),
        b"",
    )
    .await;
    assert_eq!(finished.code, Some(1), "{}", describe(&finished));
    assert!(
        finished
            .stderr_text()
            .contains("Unknown model: nope/x. Use provider/model-id."),
        "{}",
        describe(&finished)
    );
    assert!(finished.stdout.is_empty(), "{}", describe(&finished));
    assert_eq!(mock.requests().len(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_during_a_one_shot_exits_143() {
    let mock = start_mock().await;
    mock.push(Step::Hang(vec!["thinking…".into()]));
    let agent = agent_with(&mock);
    let cwd = temp_cwd();
    let mut p = zi_m1(&agent, &cwd.path, &["-p", "hello"]).spawn_one_shot();
    // Piped stdin is read to its end before the first prompt.
    p.close_stdin();
    let requests = mock.wait_for_requests(1, WAIT).await;
    assert_eq!(requests.len(), 1, "the prompt reached the provider");
    p.signal(SIGTERM);
    let exited = p.wait(WAIT).await;
    assert_eq!(exited.code, Some(143), "stderr: {}", exited.stderr_text());
    assert_eq!(
        mock.wait_for_disconnects(1, WAIT).await,
        1,
        "the provider request was aborted"
    );
}
