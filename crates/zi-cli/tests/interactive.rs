//! Black-box tests of the interactive mode (docs/interactive.md): the real binary in a real
//! terminal (tmux), against the mock LLM, typed at with `send-keys` and read with
//! `capture-pane`.

use std::path::Path;
use std::time::Duration;

use serde_json::json;
use zi_test_support::dirs::{AgentDir, temp_cwd};
use zi_test_support::mock_llm::{MockLlm, Step, start_mock};
use zi_test_support::process::{descendants, wait_until_gone};
use zi_test_support::tmux::Tmux;
use zi_test_support::zi_command::ZiCommand;

use crate::wire_support::user_texts;

mod commands;
mod input;
mod lifecycle;
mod rendering;

const WAIT: Duration = Duration::from_secs(60);

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
