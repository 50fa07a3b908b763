//! Black-box tests of issue 23 C5: no process zi starts outlives it, whatever ends first
//! (docs/cli.md#processes-zi-starts). The escapes are processes that left zi's tree on their
//! own: a `setsid` child of a subshell that exits at once is re-parented away from the shell,
//! out of every process group zi knows.

use std::time::{Duration, Instant};

use serde_json::json;
use zi_test_support::dirs::{AgentDir, temp_cwd};
use zi_test_support::mock_llm::{Step, start_mock};
use zi_test_support::process::{pgrep, wait_until_gone};
use zi_test_support::zi_command::ZiCommand;

const ZI: &str = env!("CARGO_BIN_EXE_zi");
const WAIT: Duration = Duration::from_secs(30);
const KEY: &str = "test-key-lifetime";

/// Waits until `count` processes match `pattern`; returns them.
async fn running(pattern: &str, count: usize) -> Vec<u32> {
    let deadline = Instant::now() + WAIT;
    loop {
        let found = pgrep("-fx", pattern);
        if found.len() >= count {
            return found;
        }
        assert!(Instant::now() < deadline, "{pattern} runs: {found:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A command that leaves a `setsid` sleeper behind, re-parented away from the shell at once.
fn escape(marker: &str) -> String {
    format!("(setsid {marker} > /dev/null 2>&1 < /dev/null &)")
}

/// A sleep command unique to this test run and `case`.
fn sleeper(case: u32) -> String {
    format!("sleep 4{case}{:04}", std::process::id() % 10_000)
}

/// An interrupted command ends with everything it started, a `setsid` escape included.
#[tokio::test]
async fn an_interrupted_commands_setsid_escape_ends_with_it() {
    let mock = start_mock().await;
    let agent = AgentDir::with_m1(&mock, KEY);
    let cwd = temp_cwd();
    let marker = sleeper(1);
    let command = format!("{}; sleep 300", escape(&marker));
    mock.push(Step::tool_call("c1", "bash", json!({"command": command})));
    let mut p = ZiCommand::rpc_m1(ZI, &agent, &cwd.path)
        .timeout(WAIT)
        .spawn_rpc()
        .await;
    let response = p
        .request(
            "p1",
            "session.prompt",
            Some(json!({"delivery": "direct", "text": "run it"})),
        )
        .await;
    assert_eq!(response["ok"], json!(true), "{response}");
    let pids = running(&marker, 1).await;
    p.request_ok("i1", "session.interrupt", None).await;
    p.event("agent_settled").await;
    let left = wait_until_gone(&pids, Duration::from_secs(5)).await;
    assert!(left.is_empty(), "left after the interrupt: {left:?}");
    p.exit_by_eof().await;
}

enum Ending {
    Eof,
    Sigterm,
    Sigkill,
}

/// A background task that left a `setsid` sleeper behind and still runs when zi ends: both
/// are gone after EOF, SIGTERM and SIGKILL of zi.
#[tokio::test]
async fn a_background_tasks_setsid_escape_ends_with_zi_however_zi_ends() {
    for (case, ending) in [(2, Ending::Eof), (3, Ending::Sigterm), (4, Ending::Sigkill)] {
        let mock = start_mock().await;
        let agent = AgentDir::with_m1(&mock, KEY);
        let cwd = temp_cwd();
        let marker = sleeper(case);
        let task = format!("sleep 5{case}{:04}", std::process::id() % 10_000);
        let command = format!("{}; {task}", escape(&marker));
        mock.push(Step::tool_call(
            "b1",
            "bash",
            json!({"command": command, "background": true}),
        ));
        mock.push(Step::text("started"));
        let mut p = ZiCommand::rpc_m1(ZI, &agent, &cwd.path)
            .timeout(WAIT)
            .spawn_rpc()
            .await;
        p.prompt_and_settle("p1", "start it").await;
        let mut pids = running(&marker, 1).await;
        pids.extend(running(&task, 1).await);
        match ending {
            Ending::Eof => {
                p.exit_by_eof().await;
            }
            Ending::Sigterm => {
                p.signal(libc::SIGTERM);
                assert_eq!(p.wait_exit(WAIT).await.code, Some(143));
            }
            Ending::Sigkill => {
                p.signal(libc::SIGKILL);
                assert_eq!(p.wait_exit(WAIT).await.signal, Some(libc::SIGKILL));
            }
        }
        let left = wait_until_gone(&pids, Duration::from_secs(10)).await;
        assert!(left.is_empty(), "case {case}: left {left:?}");
    }
}
