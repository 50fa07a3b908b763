//! Black-box tests of the interactive mode's prompts and code highlighting
//! (docs/interactive.md): the project trust prompt and trust.json, the inline approval prompt
//! answering through the session's approval broker, and highlighted code blocks. The real
//! binary runs in tmux against the mock LLM.

// A test fails by panicking with its reason.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use serde_json::{Value, json};
use zi_test_support::dirs::{AgentDir, temp_cwd};
use zi_test_support::mock_llm::{MockLlm, start_mock};
use zi_test_support::tmux::Tmux;
use zi_test_support::zi_command::ZiCommand;

fn agent_with(mock: &MockLlm) -> AgentDir {
    AgentDir::new()
        .models(
            mock,
            "tui-key",
            &[json!({"id": "m1", "reasoning": true, "contextWindow": 100000})],
        )
        .settings(r#"{"retryEnabled": false}"#)
}

fn zi(agent: &AgentDir, cwd: &Path, extra: &[&str]) -> ZiCommand {
    ZiCommand::new(env!("CARGO_BIN_EXE_zi"))
        .agent_dir(agent)
        .model("mock/m1")
        .arg("--cwd")
        .arg(cwd)
        .arg("--no-session")
        .args(extra)
        .current_dir(cwd)
}

/// A project whose `.zi/settings.json` sets the thinking level to `low` (the status line shows
/// whether it took effect; without it the level is `medium`).
fn project_with_settings() -> zi_test_support::dirs::TempCwd {
    let cwd = temp_cwd();
    std::fs::create_dir(cwd.path.join(".zi")).unwrap();
    std::fs::write(
        cwd.path.join(".zi/settings.json"),
        r#"{"defaultThinkingLevel": "low"}"#,
    )
    .unwrap();
    cwd
}

fn trust_file(agent: &AgentDir) -> Value {
    let text = std::fs::read_to_string(agent.path().join("trust.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

/// Starts zi, answers the trust prompt with `key`, and returns the main screen once ready.
async fn answer_trust_prompt(agent: &AgentDir, cwd: &Path, key: &str) -> String {
    let tmux = Tmux::start(&zi(agent, cwd, &[]), 80, 24);
    let screen = tmux.wait_for("Trust this project?").await;
    assert!(
        screen.contains(&cwd.display().to_string()) && screen.contains("settings.json"),
        "the prompt names the project and its .zi/ content:\n{screen}"
    );
    assert!(
        !agent.path().join("trust.json").exists(),
        "nothing is recorded before the answer"
    );
    tmux.keys(&[key]);
    let screen = tmux.wait_for("ready").await;
    tmux.keys(&["C-d"]);
    assert_eq!(tmux.exit_status().await, 0);
    tmux.assert_restored().await;
    screen
}

/// A second start reaches the main screen without a prompt (the prompt comes before it, so a
/// prompt would hold it back) and shows the thinking level it shows.
async fn second_start_is_not_asked(agent: &AgentDir, cwd: &Path) -> String {
    let tmux = Tmux::start(&zi(agent, cwd, &[]), 80, 24);
    let screen = tmux.wait_for("ready").await;
    assert!(!screen.contains("Trust this project?"), "{screen}");
    tmux.keys(&["C-d"]);
    assert_eq!(tmux.exit_status().await, 0);
    screen
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trusting_a_new_project_records_it_and_loads_its_settings() {
    let mock = start_mock().await;
    let agent = agent_with(&mock);
    let cwd = project_with_settings();
    let screen = answer_trust_prompt(&agent, &cwd.path, "y").await;
    assert!(
        screen.contains("thinking low"),
        "the project's settings took effect:\n{screen}"
    );
    let key = cwd.path.display().to_string();
    assert_eq!(trust_file(&agent), json!({ key: true }));
    let screen = second_start_is_not_asked(&agent, &cwd.path).await;
    assert!(screen.contains("thinking low"), "{screen}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn not_trusting_a_project_records_it_and_leaves_its_settings_out() {
    let mock = start_mock().await;
    let agent = agent_with(&mock);
    let cwd = project_with_settings();
    let screen = answer_trust_prompt(&agent, &cwd.path, "n").await;
    assert!(
        screen.contains("thinking medium"),
        "the project's settings were not loaded:\n{screen}"
    );
    let key = cwd.path.display().to_string();
    assert_eq!(trust_file(&agent), json!({ key: false }));
    let screen = second_start_is_not_asked(&agent, &cwd.path).await;
    assert!(screen.contains("thinking medium"), "{screen}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_project_without_dot_zi_content_is_not_asked_about() {
    let mock = start_mock().await;
    let agent = agent_with(&mock);
    let cwd = temp_cwd();
    std::fs::create_dir(cwd.path.join(".zi")).unwrap();
    second_start_is_not_asked(&agent, &cwd.path).await;
    assert!(
        !agent.path().join("trust.json").exists(),
        "nothing to decide, nothing recorded"
    );
}
