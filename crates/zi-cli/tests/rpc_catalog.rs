//! Black-box tests of the session catalog, raw entry pages and forks (issue 14 points 4–6:
//! `session.list`, `session.get_entries`, `session.fork`), through the real binary against the
//! mock LLM, with real journals under a temporary agent dir: decode errors, happy paths,
//! answers while a run is active (all three are read-only for the running session), and
//! behaviour after `--continue` and `-r`.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use serde_json::{Value, json};
use zi_test_support::dirs::{AgentDir, temp_cwd};
use zi_test_support::harness::Harness;
use zi_test_support::mock_llm::start_mock;
use zi_test_support::mock_llm::{MockLlm, Step};
use zi_test_support::zi_command::ZiCommand;

use crate::compaction_support::reply;

mod entries_and_forks;
mod list;

const WAIT: Duration = Duration::from_secs(30);
const KEY: &str = "catalog-test-key";

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

fn agent_with(mock: &MockLlm) -> AgentDir {
    let agent = AgentDir::new();
    agent.write(
        "models.json",
        &mock.models_json(KEY, &[json!({"id": "m1", "reasoning": true})]),
    );
    agent
}

async fn spawn(agent: &AgentDir, cwd: &Path, extra: &[&str]) -> Harness {
    ZiCommand::rpc(env!("CARGO_BIN_EXE_zi"), agent, cwd)
        .args(extra)
        .timeout(WAIT)
        .spawn_rpc()
        .await
}

fn seq(frame: &Value) -> u64 {
    frame["sequence"].as_u64().unwrap_or(0)
}

fn encoded_cwd(cwd: &Path) -> String {
    let text = cwd.display().to_string();
    let trimmed = text.strip_prefix('/').unwrap_or(&text);
    format!("--{}--", trimmed.replace(['/', '\\', ':'], "-"))
}

fn session_dir(agent: &AgentDir, cwd: &Path) -> PathBuf {
    agent.path().join("sessions").join(encoded_cwd(cwd))
}

fn ids(page: &Value) -> Vec<String> {
    page["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["sessionId"].as_str().unwrap().to_string())
        .collect()
}
