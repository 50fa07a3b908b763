//! What the compaction tests (`compaction`, `rpc_compact_stats`, `rpc_catalog`) share: a zi on a
//! model with a 4,000-token window, and mock replies that report chosen usage, so a test decides
//! exactly when the context passes the compaction trigger (docs/configuration.md#compaction).

use std::time::Duration;

use serde_json::Value;
use zi_test_support::dirs::{AgentDir, TempCwd, temp_cwd};
use zi_test_support::harness::Harness;
use zi_test_support::mock_llm::{MockLlm, MockUsage, Step};
use zi_test_support::zi_command::ZiCommand;

/// How long a compaction test waits for any one frame.
pub const WAIT: Duration = Duration::from_secs(30);
/// The summary the mock returns for a compaction.
pub const SUMMARY: &str = "## Goal\nKeep going.\n## Progress\n### Done\nEarlier work.";

/// The mock, the agent directory, the working directory and a HOME, shared by every spawn of a
/// test so a resumed session finds the same world.
pub struct SmallWindow {
    pub mock: MockLlm,
    pub agent: AgentDir,
    pub cwd: TempCwd,
    pub home: tempfile::TempDir,
}

impl SmallWindow {
    /// The provider `mock` with `models` (the first named `small`; a 4,000-token window means
    /// reserve 1,000, trigger 3,000, keep-recent 1,500, summary max 500) and `settings.json`.
    pub async fn start(models: &[Value], settings: &str) -> SmallWindow {
        let mock = MockLlm::start()
            .await
            .unwrap_or_else(|e| panic!("mock: {e}"));
        let agent = AgentDir::new()
            .models(&mock, "k", models)
            .settings(settings);
        let cwd = temp_cwd();
        let home = tempfile::tempdir().unwrap_or_else(|e| panic!("home: {e}"));
        SmallWindow {
            mock,
            agent,
            cwd,
            home,
        }
    }

    /// `zi --mode rpc --model mock/small EXTRA…` in this world, `ready` read.
    pub async fn spawn(&self, extra: &[&str]) -> Harness {
        ZiCommand::rpc(env!("CARGO_BIN_EXE_zi"), &self.agent, &self.cwd.path)
            .model("mock/small")
            .args(extra)
            .env("HOME", self.home.path())
            .timeout(WAIT)
            .spawn_rpc()
            .await
    }
}

/// A reply of `bytes` bytes reporting `input` prompt and `output` completion tokens.
pub fn reply_with_usage(bytes: usize, input: u64, output: u64) -> Step {
    Step::Reply {
        thinking: Vec::new(),
        text: vec!["y".repeat(bytes)],
        tool_calls: Vec::new(),
        finish_reason: "stop".to_string(),
        usage: Some(MockUsage {
            prompt_tokens: input,
            completion_tokens: output,
            cached_tokens: 0,
        }),
    }
}

/// A reply of `bytes` bytes reporting `total` tokens of usage, a quarter of its bytes as output.
pub fn reply(bytes: usize, total: u64) -> Step {
    let output = bytes as u64 / 4;
    reply_with_usage(bytes, total.saturating_sub(output), output)
}
