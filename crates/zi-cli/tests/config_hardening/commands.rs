//! Key and header commands: interrupt, EOF, SIGTERM and timeouts end them.

use super::*;

const SIGTERM: i32 = 15;

// ---------------------------------------------------------------------------------------------
// `!command` values are bounded and cancellable (point 3)
// ---------------------------------------------------------------------------------------------

/// A command that records its shell's pid (its process group) and a child's pid, then waits
/// for the child, which would sleep far longer than any test.
fn hanging_command(dir: &Path) -> String {
    format!(
        "!echo $$ > {0}/sh.pid; sleep 1000 & echo $! > {0}/sleep.pid; wait",
        dir.display()
    )
}

/// Waits until the command has started; returns the shell's and the sleeper's pids.
async fn command_pids(dir: &Path) -> (u32, u32) {
    let read = |name: &str| -> Option<u32> {
        let text = std::fs::read_to_string(dir.join(name)).ok()?;
        text.strip_suffix('\n')?.parse().ok()
    };
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        if let (Some(sh), Some(sleep)) = (read("sh.pid"), read("sleep.pid")) {
            return (sh, sleep);
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the command did not start within {WAIT:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn assert_command_gone(pids: (u32, u32)) {
    let alive = wait_until_gone(&[pids.0, pids.1], WAIT).await;
    assert!(alive.is_empty(), "left running: {alive:?}");
    assert!(process_group_members(pids.0).is_empty());
}

/// An agent dir whose model `mock/m1` takes its key (or, with `in_header`, a header) from
/// `command`; retries off, so a failure ends the run.
fn agent_with_command(mock: &MockLlm, command: &str, in_header: bool) -> AgentDir {
    let agent = AgentDir::new();
    let mut provider = json!({
        "baseUrl": mock.base_url(),
        "api": "openai-completions",
        "apiKey": if in_header { "literal-key" } else { command },
        "models": [{"id": "m1"}],
    });
    if in_header {
        provider["headers"] = json!({"x-from-command": command});
    }
    agent.write(
        "models.json",
        &json!({"providers": {"mock": provider}}).to_string(),
    );
    agent.write("settings.json", r#"{"retryEnabled": false}"#);
    agent
}

/// What a test with a running command keeps alive: the mock, the cwd and the agent dir.
type CommandContext = (MockLlm, zi_test_support::dirs::TempCwd, AgentDir);

/// zi with `mock/m1` whose key (or header) is a hanging command, prompted; returns once the
/// command runs, with its pids.
async fn prompt_with_running_command(in_header: bool) -> (Harness, (u32, u32), CommandContext) {
    let mock = start_mock().await;
    let cwd = temp_cwd();
    let agent = agent_with_command(&mock, &hanging_command(&cwd.path), in_header);
    let mut p = spawn_m1(&agent, &cwd.path).await;
    start_prompt(&mut p).await;
    let pids = command_pids(&cwd.path).await;
    (p, pids, (mock, cwd, agent))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interrupt_kills_a_running_key_command_and_is_answered() {
    let (mut p, pids, context) = prompt_with_running_command(false).await;
    p.request_ok("i", "session.interrupt", None).await;
    p.event("agent_settled").await;
    let message = p.last_assistant_after(0);
    // Aborted, not the command's timeout: the interrupt ended it.
    assert_eq!(message["stopReason"], "aborted", "{message}");
    assert_command_gone(pids).await;
    assert!(context.0.requests().is_empty(), "no request without a key");
    p.exit_by_eof().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eof_ends_zi_and_a_running_header_command() {
    let (mut p, pids, _context) = prompt_with_running_command(true).await;
    p.exit_by_eof().await;
    assert_command_gone(pids).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_ends_zi_and_a_running_key_command() {
    let (mut p, pids, _context) = prompt_with_running_command(false).await;
    p.signal(SIGTERM);
    let exited = p.wait_exit(WAIT).await;
    assert_eq!(exited.code, Some(128 + SIGTERM), "{}", exited.stderr);
    assert_command_gone(pids).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_command_times_out_after_ten_seconds() {
    let (mut p, pids, _context) = prompt_with_running_command(false).await;
    p.event("agent_settled").await;
    let message = p.last_assistant_after(0);
    assert_eq!(message["stopReason"], "error", "{message}");
    assert_eq!(
        message["errorMessage"],
        "API key command for mock failed: timed out after 10s"
    );
    assert_command_gone(pids).await;
    p.exit_by_eof().await;
}

/// Issue 23 L1: a key or header command that times out is a configuration error: the run
/// fails once, at the 10 s bound, naming the provider, with retries on (the defaults) and no
/// `auto_retry_start`; the command ran once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timed_out_key_or_header_command_fails_the_run_once_without_retrying() {
    let (key, header) = tokio::join!(timed_out_once(false), timed_out_once(true));
    assert_eq!(key, "API key command for mock failed: timed out after 10s");
    assert_eq!(
        header,
        "Could not resolve header x-from-command for provider mock: timed out after 10s"
    );
}

/// The error message of a run whose key (or header) command hangs.
async fn timed_out_once(in_header: bool) -> String {
    let mock = start_mock().await;
    let cwd = temp_cwd();
    let runs = cwd.path.join("runs");
    let command = format!("!echo run >> {}; sleep 1000", runs.display());
    let agent = agent_with_command(&mock, &command, in_header);
    // The defaults: retries on.
    agent.write("settings.json", "{}");
    let mut p = spawn_m1(&agent, &cwd.path).await;
    start_prompt(&mut p).await;
    p.event("agent_settled").await;
    let retries: Vec<&Value> = p
        .frames()
        .iter()
        .filter(|f| f["event"]["type"] == "auto_retry_start")
        .collect();
    assert!(retries.is_empty(), "{retries:?}");
    assert_eq!(
        std::fs::read_to_string(&runs).unwrap_or_default(),
        "run\n",
        "the command ran once"
    );
    assert!(mock.requests().is_empty(), "no request without the value");
    let message = p.last_assistant_after(0);
    assert_eq!(message["stopReason"], "error", "{message}");
    p.exit_by_eof().await;
    message["errorMessage"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}
