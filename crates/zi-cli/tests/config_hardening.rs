//! Black-box tests of hostile configuration (issue 10): configuration files that are FIFOs or
//! devices, `!command` values that never end, secrets a provider echoes back, context files and
//! trust, and invalid base URLs. Every run has its own deadline, so a regression to a hang fails
//! instead of stalling the suite.

use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};
use zi_test_support::dirs::{AgentDir, temp_cwd};
use zi_test_support::harness::Harness;
use zi_test_support::mock_llm::{MockLlm, Step, start_mock};
use zi_test_support::process::{process_group_members, wait_until_gone};
use zi_test_support::zi_command::{Finished, ZiCommand};

const WAIT: Duration = Duration::from_secs(30);
const SIGTERM: i32 = 15;

fn zi(cwd: &Path) -> ZiCommand {
    ZiCommand::new(env!("CARGO_BIN_EXE_zi"))
        .current_dir(cwd)
        .timeout(WAIT)
}

fn mkfifo(path: &Path) {
    let c_path = std::ffi::CString::new(path.as_os_str().as_encoded_bytes())
        .unwrap_or_else(|e| panic!("path: {e}"));
    // SAFETY: mkfifo reads a NUL-terminated path that outlives the call.
    let status = unsafe { libc::mkfifo(c_path.as_ptr(), 0o600) };
    assert_eq!(status, 0, "mkfifo {}", path.display());
}

fn link_to_dev_zero(path: &Path) {
    symlink("/dev/zero", path).unwrap_or_else(|e| panic!("symlink {}: {e}", path.display()));
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

// ---------------------------------------------------------------------------------------------
// Configuration files are regular files read with a bound (point 4)
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifo_and_device_configuration_files_are_refused_before_ready() {
    let agent = AgentDir::new();
    let cwd = temp_cwd();
    let refused: Vec<PathBuf> = vec![
        agent.path().join("models.json"),
        agent.path().join("settings.json"),
        agent.path().join("auth.json"),
        agent.path().join("trust.json"),
        agent.path().join("AGENTS.md"),
        cwd.path.join("AGENTS.md"),
    ];
    for (n, path) in refused.iter().enumerate() {
        if n % 2 == 0 {
            mkfifo(path);
        } else {
            link_to_dev_zero(path);
        }
    }
    let mut p = zi(&cwd.path)
        .args(["--mode", "rpc", "--no-session", "--agent-dir"])
        .arg(agent.path())
        .spawn_rpc()
        .await;
    p.request_ok("s", "session.get_state", None).await;
    p.request_ok("l", "model.list", None).await;
    p.close_stdin().await;
    let exited = p.wait_exit(WAIT).await;
    assert_eq!(exited.code, Some(0), "{}", exited.stderr);
    let warnings = warning_lines(&exited.stderr);
    for path in &refused {
        let named = format!("{} is not a regular file", path.display());
        assert!(
            warnings.iter().any(|w| w.contains(&named)),
            "no warning names {}: {}",
            path.display(),
            exited.stderr
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fifo_extension_source_is_refused_before_ready() {
    let agent = AgentDir::new();
    let cwd = temp_cwd();
    let extensions = agent.path().join("extensions");
    std::fs::create_dir_all(&extensions).unwrap_or_else(|e| panic!("{e}"));
    let fifo = extensions.join("fifo.lua");
    mkfifo(&fifo);
    let mut p = zi(&cwd.path)
        .args(["--mode", "rpc", "--no-session", "--agent-dir"])
        .arg(agent.path())
        .spawn_rpc()
        .await;
    p.close_stdin().await;
    let exited = p.wait_exit(WAIT).await;
    assert_eq!(exited.code, Some(0), "{}", exited.stderr);
    let named = format!("{} is not a regular file (a FIFO)", fifo.display());
    assert!(
        warning_lines(&exited.stderr)
            .iter()
            .any(|w| w.contains(&named)),
        "{}",
        exited.stderr
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oversized_skill_is_refused_with_a_warning() {
    let agent = AgentDir::new();
    let cwd = temp_cwd();
    let body = "x".repeat(1024 * 1024);
    agent.write(
        "skills/big/SKILL.md",
        &format!("---\ndescription: too big\n---\n{body}"),
    );
    let finished = run(
        zi(&cwd.path)
            .args(["--mode", "rpc", "--no-session", "--agent-dir"])
            .arg(agent.path()),
        b"",
    )
    .await;
    assert_eq!(finished.code, Some(0), "{}", finished.stderr_text());
    let stderr = finished.stderr_text();
    assert!(
        warning_lines(&stderr)
            .iter()
            .any(|w| w.starts_with("Warning: (skills)")
                && w.ends_with("SKILL.md exceeds 1048576 bytes")),
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resume_refuses_fifo_and_device_journals_at_once() {
    let agent = AgentDir::new();
    let cwd = temp_cwd();
    let fifo = cwd.path.join("fifo.jsonl");
    mkfifo(&fifo);
    let zero = cwd.path.join("zero.jsonl");
    link_to_dev_zero(&zero);
    for journal in [&fifo, &zero] {
        let finished = run(
            zi(&cwd.path)
                .args(["--mode", "rpc", "--agent-dir"])
                .arg(agent.path())
                .arg("-r")
                .arg(journal),
            b"",
        )
        .await;
        assert_eq!(finished.code, Some(1), "{}", finished.stderr_text());
        assert!(finished.stdout.is_empty(), "no frame before the failure");
        let stderr = finished.stderr_text();
        assert!(
            stderr.contains(&format!("{} is not a regular file", journal.display())),
            "{stderr}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn continue_skips_a_fifo_in_the_session_directory() {
    let agent = AgentDir::new();
    let cwd = temp_cwd();
    let sessions = temp_cwd();
    mkfifo(&sessions.path.join("newest.jsonl"));
    let mut p = zi(&cwd.path)
        .args(["--mode", "rpc", "-c", "--agent-dir"])
        .arg(agent.path())
        .arg("--session-dir")
        .arg(&sessions.path)
        .spawn_rpc()
        .await;
    let state = p.ready();
    assert_eq!(state["messageCount"], 0, "a new session: {state}");
    p.close_stdin().await;
    assert_eq!(p.wait_exit(WAIT).await.code, Some(0));
}

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
    p.request_ok(
        "p",
        "session.prompt",
        Some(json!({"delivery": "direct", "text": "hello"})),
    )
    .await;
}

fn last_assistant(p: &Harness) -> Value {
    p.frames()
        .iter()
        .filter(|f| f["type"] == "session_event" && f["event"]["type"] == "message_end")
        .map(|f| f["event"]["message"].clone())
        .rfind(|m| m["role"] == "assistant")
        .unwrap_or_default()
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
    let message = last_assistant(&p);
    // Aborted, not the command's timeout: the interrupt ended it.
    assert_eq!(message["stopReason"], "aborted", "{message}");
    assert_command_gone(pids).await;
    assert!(context.0.requests().is_empty(), "no request without a key");
    p.close_stdin().await;
    assert_eq!(p.wait_exit(WAIT).await.code, Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eof_ends_zi_and_a_running_header_command() {
    let (mut p, pids, _context) = prompt_with_running_command(true).await;
    p.close_stdin().await;
    let exited = p.wait_exit(WAIT).await;
    assert_eq!(exited.code, Some(0), "{}", exited.stderr);
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
    let message = last_assistant(&p);
    assert_eq!(message["stopReason"], "error", "{message}");
    assert_eq!(
        message["errorMessage"],
        "API key command for mock failed: timed out after 10s"
    );
    assert_command_gone(pids).await;
    p.close_stdin().await;
    assert_eq!(p.wait_exit(WAIT).await.code, Some(0));
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
    let message = last_assistant(&p);
    assert_eq!(message["stopReason"], "error", "{message}");
    p.close_stdin().await;
    assert_eq!(p.wait_exit(WAIT).await.code, Some(0));
    message["errorMessage"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// Issue 23 C11: a tool reads neither the `--api-key` value in zi's command line, nor a built-in
/// provider's key variable in its own environment or in zi's (`/proc/<zi>/environ`), nor in its
/// own environment a variable zi resolved a header from; the provider still gets them all. The
/// tool writes what it saw to files, so zi's redaction of results cannot hide a leak.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_key_and_key_variables_are_out_of_reach_of_tools() {
    const CLI: &str = "cli-key-secret-5f1b";
    const BUILTIN: &str = "sk-builtin-variable-secret-9d3e";
    const HEADER: &str = "header-variable-secret-1c7a";
    let mock = start_mock().await;
    let agent = AgentDir::new();
    agent.write(
        "models.json",
        &json!({"providers": {"mock": {
            "baseUrl": mock.base_url(),
            "api": "openai-completions",
            "apiKey": "unused",
            "headers": {"x-env": "ZI_C11_HEADER"},
            "models": [{"id": "m1"}],
        }}})
        .to_string(),
    );
    let cwd = temp_cwd();
    let script = "tr '\\0' ' ' < /proc/$PPID/cmdline > cmdline; env > env; \
                  tr '\\0' '\\n' < /proc/$PPID/environ > environ";
    mock.push(Step::tool_call("c1", "bash", json!({"command": script})));
    mock.push(Step::text("done"));
    let mut p = zi(&cwd.path)
        .args(["--mode", "rpc", "--no-session", "--model", "mock/m1"])
        .args(["--api-key", CLI, "--agent-dir"])
        .arg(agent.path())
        .env("OPENAI_API_KEY", BUILTIN)
        .env("ZI_C11_HEADER", HEADER)
        .env("ZI_C11_OTHER", "visible")
        .spawn_rpc()
        .await;
    start_prompt(&mut p).await;
    p.event("agent_settled").await;
    let requests = mock.requests();
    assert_eq!(requests.len(), 2);
    for request in &requests {
        let bearer = format!("Bearer {CLI}");
        assert_eq!(request.header("authorization"), Some(bearer.as_str()));
        assert_eq!(request.header("x-env"), Some(HEADER));
    }
    let read = |name: &str| std::fs::read_to_string(cwd.path.join(name)).unwrap();
    let cmdline = read("cmdline");
    assert!(cmdline.contains("--api-key *"), "{cmdline}");
    assert!(!cmdline.contains(CLI), "{cmdline}");
    let env = read("env");
    assert!(env.contains("ZI_C11_OTHER=visible"), "{env}");
    for secret in [CLI, BUILTIN, HEADER] {
        assert!(!env.contains(secret), "{secret}: {env}");
    }
    let environ = read("environ");
    assert!(environ.contains("ZI_C11_OTHER=visible"), "{environ}");
    assert!(!environ.contains(BUILTIN), "{environ}");
    p.close_stdin().await;
    assert_eq!(p.wait_exit(WAIT).await.code, Some(0));
}

// ---------------------------------------------------------------------------------------------
// Every configured secret is scrubbed (point 6)
// ---------------------------------------------------------------------------------------------

const KEY_SECRET: &str = "key-command-secret-4e2a";
const HEADER_LITERAL: &str = "header-literal-secret-8b3f";
const HEADER_COMMAND: &str = "header-command-secret-2d9c";
const HEADER_ENV: &str = "header-env-secret-6a0e";
const URL_PASSWORD: &str = "url-password-7c1d";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secrets_echoed_by_a_provider_never_leave_zi() {
    use base64::Engine as _;
    let mock = start_mock().await;
    let base = mock
        .base_url()
        .replacen("http://", &format!("http://zi-user:{URL_PASSWORD}@"), 1);
    let agent = AgentDir::new();
    agent.write(
        "models.json",
        &json!({"providers": {"mock": {
            "baseUrl": base,
            "api": "openai-completions",
            "apiKey": format!("!printf {KEY_SECRET}"),
            "headers": {
                "x-literal": HEADER_LITERAL,
                "x-command": format!("!printf {HEADER_COMMAND}"),
                "x-env": "ZI_HARDENING_HEADER",
            },
            "models": [{"id": "m1"}],
        }}})
        .to_string(),
    );
    agent.write("settings.json", r#"{"retryEnabled": false}"#);
    let basic = base64::engine::general_purpose::STANDARD.encode(format!("zi-user:{URL_PASSWORD}"));
    let secrets = [
        KEY_SECRET,
        HEADER_LITERAL,
        HEADER_COMMAND,
        HEADER_ENV,
        URL_PASSWORD,
        basic.as_str(),
    ];
    let echo = format!("denied; you sent {}", secrets.join(" and "));
    let cwd = temp_cwd();
    let sessions = temp_cwd();

    // RPC: frames and the journal.
    mock.push(Step::HttpError {
        status: 401,
        message: echo.clone(),
    });
    let mut p = zi(&cwd.path)
        .args(["--mode", "rpc", "--model", "mock/m1", "--agent-dir"])
        .arg(agent.path())
        .arg("--session-dir")
        .arg(&sessions.path)
        .env("ZI_HARDENING_HEADER", HEADER_ENV)
        .spawn_rpc()
        .await;
    start_prompt(&mut p).await;
    p.event("agent_settled").await;
    let message = last_assistant(&p);
    assert_eq!(message["stopReason"], "error", "{message}");
    assert!(
        message["errorMessage"]
            .as_str()
            .is_some_and(|m| m.starts_with("401 denied; you sent")),
        "{message}"
    );
    p.close_stdin().await;
    let exited = p.wait_exit(WAIT).await;
    assert_eq!(exited.code, Some(0), "{}", exited.stderr);

    // Text mode: the error goes to stderr.
    mock.push(Step::HttpError {
        status: 401,
        message: echo,
    });
    let oneshot = run(
        zi(&cwd.path)
            .args(["-p", "--no-session", "--model", "mock/m1", "--agent-dir"])
            .arg(agent.path())
            .env("ZI_HARDENING_HEADER", HEADER_ENV)
            .arg("hello"),
        b"",
    )
    .await;
    assert_eq!(oneshot.code, Some(1));
    assert!(
        oneshot.stderr_text().contains("401 denied"),
        "{}",
        oneshot.stderr_text()
    );

    // The secrets did reach the provider, so the scan below means something.
    let requests = mock.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[0].header("x-literal"), Some(HEADER_LITERAL));
    assert_eq!(requests[0].header("x-command"), Some(HEADER_COMMAND));
    assert_eq!(requests[0].header("x-env"), Some(HEADER_ENV));

    let mut written: Vec<(String, String)> = p
        .frames()
        .iter()
        .map(|f| ("frame".to_string(), f.to_string()))
        .collect();
    written.push(("rpc stderr".into(), exited.stderr.clone()));
    written.push(("text stdout".into(), oneshot.stdout_text()));
    written.push(("text stderr".into(), oneshot.stderr_text()));
    let files = zi_test_support::dirs::all_files(&sessions.path);
    assert!(!files.is_empty(), "a journal was written");
    for file in files {
        written.push((
            file.display().to_string(),
            std::fs::read_to_string(&file).unwrap_or_default(),
        ));
    }
    for (source, text) in &written {
        for secret in secrets {
            assert!(
                !text.contains(secret),
                "{source} contains {secret:?}: {text}"
            );
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Context files, trust.json, base URLs, auth.json entries (point 8)
// ---------------------------------------------------------------------------------------------

fn agent_for(mock: &MockLlm) -> AgentDir {
    let agent = AgentDir::new();
    agent.write(
        "models.json",
        &mock.models_json("k", &[json!({"id": "m1", "reasoning": true})]),
    );
    agent
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn context_files_load_in_untrusted_projects() {
    let mock = start_mock().await;
    let agent = agent_for(&mock);
    agent.write("AGENTS.md", "global-rule-d41c");
    let project = temp_cwd();
    std::fs::write(project.path.join("AGENTS.md"), "project-rule-93fa")
        .unwrap_or_else(|e| panic!("{e}"));
    let sub = project.path.join("sub");
    std::fs::create_dir_all(&sub).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(sub.join("CLAUDE.md"), "sub-rule-5b07").unwrap_or_else(|e| panic!("{e}"));
    mock.push(Step::text("ok"));
    let finished = run(
        zi(&sub)
            .args(["-p", "--no-session", "--model", "mock/m1", "--agent-dir"])
            .arg(agent.path())
            .arg("hello"),
        b"",
    )
    .await;
    assert_eq!(finished.code, Some(0), "{}", finished.stderr_text());
    let requests = mock.requests();
    let body = requests[0].body.to_string();
    for rule in ["global-rule-d41c", "project-rule-93fa", "sub-rule-5b07"] {
        assert!(
            body.contains(rule),
            "{rule} missing from the request: {body}"
        );
    }
}

/// The initial thinking level of a project whose `.zi/settings.json` asks for `high`, with the
/// trust.json `trust` gives for the project's directory, and zi's stderr.
async fn thinking_level_with_trust(trust: impl Fn(&str) -> Option<Value>) -> (String, String) {
    let mock = start_mock().await;
    let agent = agent_for(&mock);
    let project = temp_cwd();
    if let Some(trust) = trust(&project.path.display().to_string()) {
        agent.write("trust.json", &trust.to_string());
    }
    let zi_dir = project.path.join(".zi");
    std::fs::create_dir_all(&zi_dir).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(
        zi_dir.join("settings.json"),
        r#"{"defaultThinkingLevel": "high"}"#,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let mut p = spawn_m1(&agent, &project.path).await;
    let state = p.ready();
    p.close_stdin().await;
    let exited = p.wait_exit(WAIT).await;
    (
        state["thinkingLevel"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
        exited.stderr,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trust_json_in_zi_format_is_read_and_the_list_format_still_works() {
    let (level, stderr) = thinking_level_with_trust(|dir| Some(json!({ dir: true }))).await;
    assert_eq!(level, "high", "Zi's format trusts the project: {stderr}");
    assert!(!stderr.contains("(trust)"), "{stderr}");
    let (level, stderr) = thinking_level_with_trust(|dir| {
        let parent = Path::new(dir).parent().map(|p| p.display().to_string());
        Some(json!({ parent.unwrap_or_default(): true, dir: false }))
    })
    .await;
    assert_eq!(level, "medium", "the nearer false wins: {stderr}");
    let (level, stderr) = thinking_level_with_trust(|dir| Some(json!({"trusted": [dir]}))).await;
    assert_eq!(level, "high", "the earlier list format: {stderr}");
    let (level, _) = thinking_level_with_trust(|_| None).await;
    assert_eq!(level, "medium", "no trust.json: untrusted");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invalid_base_url_is_a_configuration_error_without_retries() {
    for base_url in ["file:///tmp/zi-no-endpoint", "127.0.0.1:9/v1"] {
        let agent = AgentDir::new();
        agent.write(
            "models.json",
            &json!({"providers": {"bad": {
                "baseUrl": base_url, "api": "openai-completions", "apiKey": "k",
                "models": [{"id": "m1"}]}}})
            .to_string(),
        );
        let cwd = temp_cwd();
        let finished = run(
            zi(&cwd.path)
                .args([
                    "--mode",
                    "json",
                    "--no-session",
                    "--model",
                    "bad/m1",
                    "--agent-dir",
                ])
                .arg(agent.path())
                .arg("hello"),
            b"",
        )
        .await;
        assert_eq!(finished.code, Some(1), "{}", finished.stderr_text());
        let events = finished.json_lines();
        let types: Vec<&str> = events.iter().filter_map(|e| e["type"].as_str()).collect();
        assert!(
            !types.contains(&"auto_retry_start"),
            "{base_url}: {types:?}"
        );
        let stderr = finished.stderr_text();
        assert!(
            stderr.contains("Invalid baseUrl for provider bad"),
            "{base_url}: {stderr}"
        );
        assert!(
            !stderr.contains(base_url),
            "the URL is not output: {stderr}"
        );
    }
}

/// Issue 23 L2: every auth.json entry of the wrong shape gets its own `Warning:` naming the
/// file and the entry, and no value.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auth_entries_of_the_wrong_shape_each_get_a_warning() {
    let agent = AgentDir::new();
    agent.write(
        "auth.json",
        &json!({
            "openai": {"type": "api_key", "key": 4242},
            "anthropic": {"type": "api_key", "key": {"secret": "sk-nested-secret"}},
            "groq": {"type": "api_key"},
            "xai": {"type": "api_key", "key": "k-fine"},
            "mistral": {"type": "apikey", "key": "sk-typo-secret"},
            "openai-codex": {"type": "oauth", "access": 1, "refresh": null, "expires": "soon"},
            "github-copilot": {"type": "oauth", "access": "a", "refresh": "r", "expires": 1},
        })
        .to_string(),
    );
    let cwd = temp_cwd();
    let finished = run(
        zi(&cwd.path)
            .args(["--mode", "rpc", "--no-session", "--agent-dir"])
            .arg(agent.path()),
        b"",
    )
    .await;
    assert_eq!(finished.code, Some(0), "{}", finished.stderr_text());
    let stderr = finished.stderr_text();
    let path = agent.path().join("auth.json");
    let named = |provider: &str| -> Vec<String> {
        warning_lines(&stderr)
            .into_iter()
            .filter(|w| w.contains(&format!("(auth) entry {provider} in {}", path.display())))
            .map(str::to_string)
            .collect()
    };
    for (provider, problem) in [
        ("openai", "\"key\" must be a string"),
        ("anthropic", "\"key\" must be a string"),
        ("groq", "has no \"key\""),
        ("mistral", "has no known \"type\""),
        ("openai-codex", "\"refresh\" must be a string"),
    ] {
        let lines = named(provider);
        assert_eq!(lines.len(), 1, "{provider}: {stderr}");
        assert!(lines[0].contains(problem), "{provider}: {stderr}");
    }
    assert!(named("openai-codex")[0].contains("\"expires\" must be a number"));
    for fine in ["xai", "github-copilot"] {
        assert!(named(fine).is_empty(), "{fine}: {stderr}");
    }
    for secret in ["4242", "sk-nested-secret", "sk-typo-secret", "k-fine"] {
        assert!(!stderr.contains(secret), "{secret}: {stderr}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auth_entries_that_are_not_objects_are_named_in_warnings() {
    let agent = AgentDir::new();
    agent.write(
        "auth.json",
        r#"{"openai": "sk-bare-string-secret", "groq": null, "xai": {"type": "api_key", "key": "k"}}"#,
    );
    let cwd = temp_cwd();
    let finished = run(
        zi(&cwd.path)
            .args(["--mode", "rpc", "--no-session", "--agent-dir"])
            .arg(agent.path()),
        b"",
    )
    .await;
    assert_eq!(finished.code, Some(0), "{}", finished.stderr_text());
    let stderr = finished.stderr_text();
    let warnings = warning_lines(&stderr);
    for provider in ["openai", "groq"] {
        assert!(
            warnings
                .iter()
                .any(|w| w.contains(&format!("(auth) entry {provider} in "))
                    && w.contains("is not an object")),
            "{provider}: {stderr}"
        );
    }
    assert!(!stderr.contains("sk-bare-string-secret"), "{stderr}");
}
