//! Helpers shared by the extension test files: an agent dir on the mock, the examples, spawning
//! zi with extensions, invoking commands and exiting by EOF.

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};
use zi_test_support::dirs::{AgentDir, TempCwd, temp_cwd};
use zi_test_support::harness::Harness;
use zi_test_support::mock_llm::{MockLlm, start_mock};
use zi_test_support::zi_command::ZiCommand;

pub const WAIT: Duration = Duration::from_secs(30);
pub const KEY: &str = "ext-test-key";

pub fn agent_with(mock: &MockLlm) -> AgentDir {
    AgentDir::new().models(mock, KEY, &[json!({"id": "m1"})])
}

/// What every extension test starts from: the mock LLM, an agent directory on it and a cwd.
pub async fn scene() -> (MockLlm, AgentDir, TempCwd) {
    let mock = start_mock().await;
    let agent = agent_with(&mock);
    (mock, agent, temp_cwd())
}

/// The path of `examples/extensions/NAME`.
pub fn example(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples/extensions")
        .join(name)
        .display()
        .to_string()
}

/// Writes a file (and its directory) and returns its path.
pub fn write(path: &Path, text: &str) -> String {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).unwrap_or_else(|e| panic!("mkdir: {e}"));
    }
    std::fs::write(path, text).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
    path.display().to_string()
}

pub async fn spawn(agent: &AgentDir, cwd: &Path, extra: &[&str]) -> Harness {
    ZiCommand::rpc(env!("CARGO_BIN_EXE_zi"), agent, cwd)
        .model("mock/m1")
        .args(extra)
        .timeout(WAIT)
        .spawn_rpc()
        .await
}

pub async fn invoke(p: &mut Harness, id: &str, name: &str, arguments: &str) -> Value {
    p.request(
        id,
        "command.invoke",
        Some(json!({"name": name, "arguments": arguments})),
    )
    .await
}
