//! ACP benchmark (docs/performance.md#acp): spawn to the `initialize` answer, `session/new`
//! answered, the memory of 100 idle sessions in one process (PSS), and the bytes a 64 KiB
//! answer in 4-byte deltas writes (16, 64 and 256 KiB: linear in the answer), and
//! `session/cancel` to the `cancelled` answer.
//!
//! `ZI_ACP_PEERS=DIR` also measures the npm adapters installed in DIR
//! (`npm install --prefix DIR @zed-industries/codex-acp @zed-industries/claude-code-acp`) the
//! same way, as far as they start without a model.
//!
//! Run with `cargo bench -p zi-cli --bench acp` (release build). Figures are printed, not
//! asserted: timing never decides a pass or fail.

// A benchmark fails loudly: a panic with its reason is the right report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use serde_json::{Value, json};
use zi_test_support::mock_llm::Step;

mod support;
use support::{Dirs, Zi, contains, median, mock_server, ms, p95, zi_binary};

/// `zi acp --agent-dir … --model mock/m1` (ephemeral sessions, full access: no questions).
fn acp_command(dirs: &Dirs) -> Command {
    let mut command = Command::new(zi_binary());
    command
        .args([
            "acp",
            "--no-session",
            "--model",
            "mock/m1",
            "--approvals",
            "never",
        ])
        .arg("--agent-dir")
        .arg(&dirs.agent)
        .current_dir(&dirs.cwd)
        .env("HOME", &dirs.home)
        .env("SHELL", "/bin/bash")
        .env_remove("ZI_MODE")
        .env_remove("ZI_SANDBOX")
        .env_remove("ZI_APPROVALS");
    command
}

fn request(zi: &mut Zi, id: u64, method: &str, params: Value) {
    zi.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
}

/// Reads lines until the response to `id`; returns it.
fn answer(zi: &mut Zi, id: u64) -> Value {
    let needle = format!("\"id\":{id}");
    loop {
        let line = zi.line();
        // Cheap pre-filter: updates and zi's requests are not responses.
        if !contains(&line, needle.as_bytes()) || contains(&line, b"\"method\"") {
            continue;
        }
        let message: Value = serde_json::from_slice(&line).expect("a JSON line");
        if message["id"] == id {
            return message;
        }
    }
}

const INITIALIZE: &str = r#"{"protocolVersion":1,"clientCapabilities":{}}"#;

/// Milliseconds from spawning `command` to its `initialize` answer; the process is left
/// running for the caller.
fn spawn_to_initialized(command: Command) -> (f64, Zi) {
    let start = Instant::now();
    let mut zi = Zi::start(command);
    request(
        &mut zi,
        1,
        "initialize",
        serde_json::from_str(INITIALIZE).unwrap(),
    );
    let response = answer(&mut zi, 1);
    let elapsed = ms(start);
    assert!(response.get("result").is_some(), "{response}");
    (elapsed, zi)
}

/// `session/new` latencies (ms) of `count` sessions created one after another, and the
/// process's PSS (KiB) before and after them.
fn sessions(zi: &mut Zi, cwd: &Path, count: u64) -> (Vec<f64>, u64, u64) {
    let before = pss_kib(zi.child.id());
    let mut times = Vec::new();
    for n in 0..count {
        let start = Instant::now();
        request(
            zi,
            100 + n,
            "session/new",
            json!({"cwd": cwd, "mcpServers": []}),
        );
        let response = answer(zi, 100 + n);
        times.push(ms(start));
        assert!(response.get("result").is_some(), "{response}");
    }
    // Let the updates that follow each response (available commands) arrive.
    std::thread::sleep(std::time::Duration::from_millis(300));
    (times, before, pss_kib(zi.child.id()))
}

/// Proportional set size of a process and its descendants (KiB), from `smaps_rollup` (an
/// npm adapter's launcher runs the agent as a child).
fn pss_kib(pid: u32) -> u64 {
    let one = |pid: u32| -> u64 {
        std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup"))
            .unwrap_or_default()
            .lines()
            .find(|l| l.starts_with("Pss:"))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    one(pid)
        + zi_test_support::process::descendants(pid)
            .into_iter()
            .map(one)
            .sum::<u64>()
}

/// `authenticate {methodId}` (an adapter that wants it before `session/new`).
fn authenticate(zi: &mut Zi, method: Option<&str>) {
    if let Some(method) = method {
        request(zi, 9, "authenticate", json!({"methodId": method}));
        let response = answer(zi, 9);
        assert!(response.get("result").is_some(), "{response}");
    }
}

/// Ends an agent: EOF, a moment to exit, then SIGKILL for it and its descendants (an npm
/// adapter's launcher does not exit at EOF).
fn stop(mut zi: Zi) {
    let pid = zi.child.id();
    let children = zi_test_support::process::descendants(pid);
    drop(zi.stdin);
    let deadline = Instant::now() + std::time::Duration::from_secs(2);
    while Instant::now() < deadline {
        if zi.child.try_wait().ok().flatten().is_some() {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    for child in children {
        // SAFETY: kill(2) has no memory-safety preconditions.
        unsafe {
            libc::kill(child as libc::pid_t, libc::SIGKILL);
        }
    }
    let _ = zi.child.kill();
    let _ = zi.child.wait();
}

fn bench_startup(name: &str, make: impl Fn() -> Command, cwd: &Path, auth: Option<&str>) {
    let mut init = Vec::new();
    let mut new = Vec::new();
    for _ in 0..20 {
        let (elapsed, mut zi) = spawn_to_initialized(make());
        init.push(elapsed);
        authenticate(&mut zi, auth);
        let start = Instant::now();
        request(
            &mut zi,
            2,
            "session/new",
            json!({"cwd": cwd, "mcpServers": []}),
        );
        let response = answer(&mut zi, 2);
        if response.get("result").is_some() {
            new.push(ms(start));
        } else {
            println!("{name}: session/new failed: {response}");
            stop(zi);
            break;
        }
        stop(zi);
    }
    println!(
        "{name}: spawn to initialize answered: median {:.2} ms, p95 {:.2} ms ({} runs)",
        median(init.clone()),
        p95(init.clone()),
        init.len()
    );
    if !new.is_empty() {
        println!(
            "{name}: first session/new answered: median {:.2} ms, p95 {:.2} ms ({} runs)",
            median(new.clone()),
            p95(new.clone()),
            new.len()
        );
    }
}

fn bench_sessions(dirs: &Dirs) {
    let (_, mut zi) = spawn_to_initialized(acp_command(dirs));
    let (times, before, after) = sessions(&mut zi, &dirs.cwd, 100);
    println!(
        "zi: session/new in a process with sessions: median {:.2} ms, p95 {:.2} ms (100 sessions)",
        median(times.clone()),
        p95(times)
    );
    println!(
        "zi: 100 idle sessions: PSS {:.1} MiB before, {:.1} MiB after: {:.0} KiB per session",
        before as f64 / 1024.0,
        after as f64 / 1024.0,
        (after.saturating_sub(before)) as f64 / 100.0
    );
    stop(zi);
}

/// `session/new` in the benchmark's directory; the session id.
fn new_session(zi: &mut Zi, dirs: &Dirs) -> String {
    request(
        zi,
        2,
        "session/new",
        json!({"cwd": dirs.cwd, "mcpServers": []}),
    );
    answer(zi, 2)["result"]["sessionId"]
        .as_str()
        .unwrap()
        .to_string()
}

/// Bytes on stdout while one answer of `total` bytes streams in 4-byte deltas.
fn bench_stream(dirs: &Dirs, mock: &zi_test_support::mock_llm::MockLlm, total: usize) {
    let (_, mut zi) = spawn_to_initialized(acp_command(dirs));
    let session = new_session(&mut zi, dirs);
    std::thread::sleep(std::time::Duration::from_millis(200));
    mock.push(Step::Bytes {
        total_bytes: total,
        delta_bytes: 4,
    });
    let bytes_before = zi.bytes;
    let cpu_before = zi.cpu_seconds();
    let start = Instant::now();
    request(
        &mut zi,
        3,
        "session/prompt",
        json!({"sessionId": session, "prompt": [{"type": "text", "text": "go"}]}),
    );
    let response = answer(&mut zi, 3);
    let elapsed = start.elapsed().as_secs_f64();
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let written = zi.bytes - bytes_before;
    println!(
        "zi: {} KiB answer in 4-byte deltas: {:.1} MiB written ({:.1} bytes per answer byte), {:.2} s, {:.2} s CPU",
        total / 1024,
        written as f64 / (1024.0 * 1024.0),
        written as f64 / total as f64,
        elapsed,
        zi.cpu_seconds() - cpu_before
    );
    stop(zi);
}

/// Reads lines until one contains `needle`.
fn wait_line(zi: &mut Zi, needle: &[u8]) {
    while !contains(&zi.line(), needle) {}
}

/// `session/cancel` to the prompt's `cancelled` answer, while the model streams (a request that
/// hangs after a first chunk) and while a command runs (one that prints a line every 50 ms,
/// once its output showed), 20 times each.
fn bench_cancel(dirs: &Dirs, mock: &zi_test_support::mock_llm::MockLlm) {
    let (_, mut zi) = spawn_to_initialized(acp_command(dirs));
    let session = new_session(&mut zi, dirs);
    for (what, command) in [("model stream", false), ("running command", true)] {
        let mut times = Vec::new();
        for n in 0..20u64 {
            if command {
                mock.push(Step::tool_call(
                    "c1",
                    "bash",
                    json!({"command": "while :; do echo tick; sleep 0.05; done"}),
                ));
            } else {
                mock.push(Step::Hang(vec!["partial ".into()]));
            }
            let id = 1000 + n;
            request(
                &mut zi,
                id,
                "session/prompt",
                json!({"sessionId": session, "prompt": [{"type": "text", "text": "go"}]}),
            );
            if command {
                wait_line(&mut zi, b"\"status\":\"in_progress\"");
            } else {
                wait_line(&mut zi, b"agent_message_chunk");
            }
            let start = Instant::now();
            zi.send(json!({"jsonrpc": "2.0", "method": "session/cancel",
                           "params": {"sessionId": session}}));
            let response = answer(&mut zi, id);
            times.push(ms(start));
            assert_eq!(response["result"]["stopReason"], "cancelled", "{response}");
        }
        println!(
            "zi: session/cancel to the cancelled answer ({what}): median {:.2} ms, p95 {:.2} ms (20 runs)",
            median(times.clone()),
            p95(times)
        );
    }
    stop(zi);
}

/// Sessions an adapter opens for the memory figure.
const PEER_SESSIONS: u64 = 10;

/// The npm adapters, when `ZI_ACP_PEERS` names where they are installed.
fn bench_peers(dirs: &Dirs) {
    let Ok(peers) = std::env::var("ZI_ACP_PEERS") else {
        println!("peers: set ZI_ACP_PEERS to an npm prefix with the adapters to compare");
        return;
    };
    let bin = Path::new(&peers).join("node_modules/.bin");
    // codex-acp creates sessions once told to use OPENAI_API_KEY, claude-code-acp with an
    // ANTHROPIC_API_KEY (dummies: nothing is asked of a model); claude-code-acp's session/new
    // starts the Claude Code CLI, which refuses to run as root unless IS_SANDBOX=1 says the
    // machine is a sandbox (these benchmark machines run as root).
    for (name, auth) in [
        ("codex-acp", Some("openai-api-key")),
        ("claude-code-acp", None),
    ] {
        let program = bin.join(name);
        if !program.exists() {
            println!("{name}: not installed in {peers}");
            continue;
        }
        let make = || {
            let mut command = Command::new(&program);
            command
                .current_dir(&dirs.cwd)
                .env("HOME", &dirs.home)
                .env("OPENAI_API_KEY", "sk-bench-not-a-key")
                .env("ANTHROPIC_API_KEY", "sk-ant-bench-not-a-key")
                .env("IS_SANDBOX", "1")
                .stderr(std::process::Stdio::null());
            command
        };
        bench_startup(name, make, &dirs.cwd, auth);
        let (_, mut zi) = spawn_to_initialized(make());
        authenticate(&mut zi, auth);
        // 10, not 100: claude-code-acp starts a Claude Code process per session.
        let (times, before, after) = sessions(&mut zi, &dirs.cwd, PEER_SESSIONS);
        println!(
            "{name}: session/new in a process with sessions: median {:.2} ms, p95 {:.2} ms",
            median(times.clone()),
            p95(times)
        );
        println!(
            "{name}: {PEER_SESSIONS} idle sessions: PSS {:.1} MiB before, {:.1} MiB after: {:.0} KiB per session",
            before as f64 / 1024.0,
            after as f64 / 1024.0,
            (after.saturating_sub(before)) as f64 / PEER_SESSIONS as f64
        );
        stop(zi);
    }
}

fn main() {
    let (_runtime, mock) = mock_server();
    let dirs = Dirs::new("zi-bench-acp-", &mock);
    bench_startup("zi", || acp_command(&dirs), &dirs.cwd, None);
    bench_sessions(&dirs);
    for total in [16 * 1024, 64 * 1024, 256 * 1024] {
        bench_stream(&dirs, &mock, total);
    }
    bench_cancel(&dirs, &mock);
    bench_peers(&dirs);
}
