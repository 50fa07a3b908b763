//! ACP benchmark (docs/performance.md, "ACP"): spawn to the `initialize` answer, `session/new`
//! answered, the memory of 100 idle sessions in one process (PSS), and the bytes a 64 KiB
//! answer in 4-byte deltas writes (16, 64 and 256 KiB: linear in the answer).
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
    let needle = format!("\"id\":{id},");
    loop {
        let line = zi.line();
        if contains(&line, needle.as_bytes()) && !contains(&line, b"\"method\"") {
            return serde_json::from_slice(&line).expect("a JSON response");
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

/// Proportional set size of a process and its children (KiB), from `smaps_rollup`.
fn pss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup"))
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with("Pss:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

fn bench_startup(name: &str, make: impl Fn() -> Command, cwd: &Path) {
    let mut init = Vec::new();
    let mut new = Vec::new();
    for _ in 0..20 {
        let (elapsed, mut zi) = spawn_to_initialized(make());
        init.push(elapsed);
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
        }
        zi.finish();
    }
    println!(
        "{name}: spawn to initialize answered: median {:.2} ms, p95 {:.2} ms (20 runs)",
        median(init.clone()),
        p95(init)
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
    zi.finish();
}

/// Bytes on stdout while one answer of `total` bytes streams in 4-byte deltas.
fn bench_stream(dirs: &Dirs, mock: &zi_test_support::mock_llm::MockLlm, total: usize) {
    let (_, mut zi) = spawn_to_initialized(acp_command(dirs));
    request(
        &mut zi,
        2,
        "session/new",
        json!({"cwd": dirs.cwd, "mcpServers": []}),
    );
    let session = answer(&mut zi, 2)["result"]["sessionId"]
        .as_str()
        .unwrap()
        .to_string();
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
    zi.finish();
}

/// The npm adapters, when `ZI_ACP_PEERS` names where they are installed.
fn bench_peers(dirs: &Dirs) {
    let Ok(peers) = std::env::var("ZI_ACP_PEERS") else {
        println!("peers: set ZI_ACP_PEERS to an npm prefix with the adapters to compare");
        return;
    };
    let bin = Path::new(&peers).join("node_modules/.bin");
    for name in ["codex-acp", "claude-code-acp"] {
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
                .stderr(std::process::Stdio::null());
            command
        };
        bench_startup(name, make, &dirs.cwd);
        let (_, mut zi) = spawn_to_initialized(make());
        let (_, before, after) = sessions(&mut zi, &dirs.cwd, 10);
        println!(
            "{name}: 10 idle sessions: PSS {:.1} MiB before, {:.1} MiB after (this process only)",
            before as f64 / 1024.0,
            after as f64 / 1024.0
        );
        zi.finish();
    }
}

fn main() {
    let (_runtime, mock) = mock_server();
    let dirs = Dirs::new("zi-bench-acp-", &mock);
    bench_startup("zi", || acp_command(&dirs), &dirs.cwd);
    bench_sessions(&dirs);
    for total in [16 * 1024, 64 * 1024, 256 * 1024] {
        bench_stream(&dirs, &mock, total);
    }
    bench_peers(&dirs);
}
