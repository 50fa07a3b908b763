//! MCP benchmark: spawn-to-`ready` with 4 configured stdio servers (against none; servers
//! start once `ready` is written, so `ready` must not move) — Python servers, and a native
//! program (`sleep`) that separates zi's own work from the servers' CPU — and the round trip
//! of one MCP
//! `tools/call` through zi's manager (`McpManager::call`, the path of `mcp_call` and direct
//! tools) against the same call written by hand on the server's stdio pipes.
//!
//! Run with `cargo bench -p zi-cli --bench mcp` (release build). The servers are the Python
//! test server of `tests/fixtures/mcp` (the virtual environment is provisioned on first use).
//! Figures are printed, not asserted.

// A benchmark fails loudly: a panic with its reason is the right report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use zi_test_support::mcp::{python, server_script, stdio_command};

mod support;
use support::{median, rpc_command, spawn_to_ready_ms};

const READY_RUNS: usize = 20;
const CALLS: usize = 500;

/// One spawn of zi until its `ready` frame, then EOF and exit: milliseconds to `ready`.
fn spawn_to_ready(agent_dir: &Path) -> f64 {
    let mut command = rpc_command(agent_dir);
    command.arg("--no-session").stderr(Stdio::null());
    spawn_to_ready_ms(command)
}

/// An agent directory with four stdio servers running `command`.
fn four_servers(command: &[String]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    let servers: serde_json::Map<String, Value> = (0..4)
        .map(|i| (format!("s{i}"), json!({ "command": command })))
        .collect();
    std::fs::write(
        dir.path().join("settings.json"),
        json!({"mcpServers": servers}).to_string(),
    )
    .expect("settings");
    dir
}

fn ready_figures() {
    let markers = tempfile::tempdir().expect("tempdir");
    let none = tempfile::tempdir().expect("tempdir");
    let python = four_servers(&stdio_command(markers.path()));
    // A native program that starts at once and never answers: no interpreter's CPU in the way.
    let native = four_servers(&["sleep".to_string(), "60".to_string()]);
    let dirs = [none.path(), python.path(), native.path()];
    // Warm up the binary and the page cache once each.
    for dir in dirs {
        spawn_to_ready(dir);
    }
    // Interleaved, so a change of the machine's load touches every configuration alike.
    let mut samples: [Vec<f64>; 3] = Default::default();
    for _ in 0..READY_RUNS {
        for (dir, samples) in dirs.iter().zip(samples.iter_mut()) {
            samples.push(spawn_to_ready(dir));
        }
    }
    let [without, with_python, with_native] = samples.map(median);
    println!(
        "spawn to ready, median of {READY_RUNS}: no MCP servers {without:.1} ms, 4 Python stdio servers {with_python:.1} ms, 4 native stdio servers (sleep) {with_native:.1} ms"
    );
}

/// `tools/call echo` written by hand on the server's pipes: the floor any client pays.
fn hand_written_calls() -> Duration {
    let markers = tempfile::tempdir().expect("tempdir");
    let mut child = Command::new(python())
        .arg(server_script())
        .arg("stdio")
        .arg(markers.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn the server");
    let mut stdin = child.stdin.take().expect("stdin");
    let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
    let mut send = |message: Value| {
        writeln!(stdin, "{message}").expect("write");
        stdin.flush().expect("flush");
    };
    let mut receive = |id: u64| loop {
        let mut line = String::new();
        stdout.read_line(&mut line).expect("read");
        let message: Value = serde_json::from_str(&line).expect("json");
        if message["id"] == id {
            return message;
        }
    };
    send(
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "bench", "version": "1"}}}),
    );
    receive(0);
    send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    let call = |id: u64| {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
               "params": {"name": "echo", "arguments": {"text": "x"}}})
    };
    for id in 1..=20 {
        send(call(id));
        receive(id);
    }
    let started = Instant::now();
    for id in 100..100 + CALLS as u64 {
        send(call(id));
        let reply = receive(id);
        assert_eq!(reply["result"]["content"][0]["text"], "echo: x");
    }
    let elapsed = started.elapsed() / CALLS as u32;
    let _ = child.kill();
    let _ = child.wait();
    elapsed
}

/// The same call through zi's MCP manager (rmcp client, bounds, result mapping, scrubbing).
fn manager_calls(runtime: &tokio::runtime::Runtime) -> Duration {
    let markers = tempfile::tempdir().expect("tempdir");
    let config = zi_mcp::config::load(
        Some(&json!({"bench": {"command": stdio_command(markers.path())}})),
        None,
    );
    runtime.block_on(async {
        let env: zi_mcp::EnvLookup = Arc::new(|_| None);
        let manager = zi_mcp::McpManager::new(config.servers, markers.path().to_path_buf(), env);
        manager.start();
        let call = || {
            manager.call(
                "bench",
                "echo",
                Some(json!({"text": "x"})),
                zi_mcp::CallContext {
                    cancel: CancellationToken::new(),
                    progress: Arc::new(|_| {}),
                },
            )
        };
        for _ in 0..20 {
            assert!(!call().await.is_error);
        }
        let started = Instant::now();
        for _ in 0..CALLS {
            let output = call().await;
            assert!(!output.is_error, "{output:?}");
        }
        let elapsed = started.elapsed() / CALLS as u32;
        manager.shutdown().await;
        elapsed
    })
}

fn main() {
    ready_figures();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let direct = hand_written_calls();
    let managed = manager_calls(&runtime);
    println!(
        "tools/call echo round trip, mean of {CALLS}: by hand on the pipes {:.0} µs, through zi's MCP manager {:.0} µs (overhead {:.0} µs)",
        direct.as_secs_f64() * 1e6,
        managed.as_secs_f64() * 1e6,
        (managed.as_secs_f64() - direct.as_secs_f64()) * 1e6
    );
}
