//! Black-box tests of hostile configuration (issue 10): configuration files that are FIFOs or
//! devices, `!command` values that never end, secrets a provider echoes back, context files and
//! trust, and invalid base URLs. Every run has its own deadline, so a regression to a hang fails
//! instead of stalling the suite.

use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};
use zi_test_support::dirs::{AgentDir, TempCwd, temp_cwd};
use zi_test_support::harness::{Exited, Harness};
use zi_test_support::mock_llm::{MockLlm, Step, start_mock};
use zi_test_support::process::{process_group_members, wait_until_gone};
use zi_test_support::zi_command::{Finished, ZiCommand};

mod commands;
mod secrets;
mod special_files;
mod trust_and_auth;

const WAIT: Duration = Duration::from_secs(30);

fn zi(cwd: &Path) -> ZiCommand {
    ZiCommand::new(env!("CARGO_BIN_EXE_zi"))
        .current_dir(cwd)
        .timeout(WAIT)
}

async fn run(builder: ZiCommand, stdin: &[u8]) -> Finished {
    builder
        .run_to_end(stdin, WAIT)
        .await
        .unwrap_or_else(|e| panic!("zi did not finish within {WAIT:?}: {e}"))
}

fn warning_lines(stderr: &str) -> Vec<&str> {
    stderr
        .lines()
        .filter(|l| l.starts_with("Warning: "))
        .collect()
}

async fn spawn_m1(agent: &AgentDir, cwd: &Path) -> Harness {
    zi(cwd)
        .args([
            "--mode",
            "rpc",
            "--no-session",
            "--model",
            "mock/m1",
            "--agent-dir",
        ])
        .arg(agent.path())
        .spawn_rpc()
        .await
}

async fn start_prompt(p: &mut Harness) {
    p.prompt("p", "hello").await;
}
