//! Black-box tests of the interactive mode (docs/interactive.md): the real binary in a real
//! terminal (tmux), against the mock LLM, typed at with `send-keys` and read with
//! `capture-pane`.

// A test fails by panicking with its reason.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};
use zi_test_support::dirs::{AgentDir, temp_cwd};
use zi_test_support::mock_llm::{MockLlm, Step, start_mock};
use zi_test_support::tmux::Tmux;
use zi_test_support::zi_command::ZiCommand;

const WAIT: Duration = Duration::from_secs(60);
const SIGTERM: i32 = 15;

fn agent_with(mock: &MockLlm) -> AgentDir {
    AgentDir::new()
        .models(
            mock,
            "tui-key",
            &[
                json!({"id": "m1", "reasoning": true, "contextWindow": 100000}),
                json!({"id": "m2", "contextWindow": 100000}),
            ],
        )
        .settings(r#"{"retryEnabled": false}"#)
}

/// `zi` with no mode flag: a terminal on both ends makes it interactive.
fn zi(agent: &AgentDir, cwd: &Path, extra: &[&str]) -> ZiCommand {
    ZiCommand::new(env!("CARGO_BIN_EXE_zi"))
        .agent_dir(agent)
        .model("mock/m1")
        .arg("--cwd")
        .arg(cwd)
        .args(extra)
        .current_dir(cwd)
}

fn user_texts(body: &Value) -> Vec<String> {
    body["messages"]
        .as_array()
        .map(|m| {
            m.iter()
                .filter(|m| m["role"] == "user")
                .map(|m| match &m["content"] {
                    Value::String(s) => s.clone(),
                    Value::Array(parts) => {
                        parts.iter().filter_map(|p| p["text"].as_str()).collect()
                    }
                    _ => String::new(),
                })
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streamed_answer_renders_and_sigterm_restores_the_terminal() {
    let mock = start_mock().await;
    mock.push(Step::Text(vec![
        "Hel".into(),
        "lo from ".into(),
        "the **mock**".into(),
    ]));
    let agent = agent_with(&mock);
    let cwd = temp_cwd();
    let tmux = Tmux::start(&zi(&agent, &cwd.path, &["--no-session"]), 80, 24);
    let screen = tmux.wait_for("ready").await;
    assert!(
        screen.contains("mock/m1"),
        "the status line names the model:\n{screen}"
    );
    assert_eq!(
        tmux.display("#{alternate_on}"),
        "1",
        "the screen is the alternate one"
    );
    tmux.type_text("say hello");
    tmux.keys(&["Enter"]);
    let screen = tmux.wait_for("Hello from the mock").await;
    assert!(
        screen.contains("› say hello"),
        "the prompt is in the transcript:\n{screen}"
    );
    let requests = mock.wait_for_requests(1, WAIT).await;
    assert_eq!(user_texts(&requests[0].body), ["say hello"]);
    tmux.wait_for("ready").await;

    tmux.signal(SIGTERM).await;
    assert_eq!(tmux.exit_status().await, 128 + SIGTERM);
    tmux.assert_restored().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_d_on_an_empty_composer_quits_and_restores_the_terminal() {
    let mock = start_mock().await;
    let agent = agent_with(&mock);
    let cwd = temp_cwd();
    let tmux = Tmux::start(&zi(&agent, &cwd.path, &["--no-session"]), 80, 24);
    tmux.wait_for("ready").await;
    tmux.type_text("x");
    // Ctrl+D with text deletes under the cursor instead; Ctrl+U empties the line.
    tmux.keys(&["C-u", "C-d"]);
    assert_eq!(tmux.exit_status().await, 0);
    tmux.assert_restored().await;
    assert!(
        !agent.path().join("interactive.log").exists()
            || std::fs::read_to_string(agent.path().join("interactive.log"))
                .unwrap()
                .lines()
                .all(|l| !l.contains("panicked")),
        "no panic was logged"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_twice_quits() {
    let mock = start_mock().await;
    let agent = agent_with(&mock);
    let cwd = temp_cwd();
    let tmux = Tmux::start(&zi(&agent, &cwd.path, &["--no-session"]), 80, 24);
    tmux.wait_for("ready").await;
    tmux.type_text("draft text");
    tmux.keys(&["C-c"]);
    let screen = tmux.wait_for("Press Ctrl+C again to quit").await;
    assert!(
        !screen.contains("draft text"),
        "the first Ctrl+C clears the composer:\n{screen}"
    );
    tmux.keys(&["C-c"]);
    assert_eq!(tmux.exit_status().await, 0);
    tmux.assert_restored().await;
}
