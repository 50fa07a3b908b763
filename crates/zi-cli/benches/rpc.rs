//! RPC benchmark: spawn-to-ready latency, RSS after ready, end-to-end streaming of a long
//! reply sent as tiny deltas, in `none` and `all` event modes, and pipelined queries
//! (`thinking.list` and `session.get_state` with 32 requests in flight).
//!
//! Run with `cargo bench -p zi-cli --bench rpc` (release build). Figures are printed, not
//! asserted: timing never decides a pass or fail.

// A benchmark fails loudly: a panic with its reason is the right report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Write;
use std::path::Path;
use std::time::Instant;

use serde_json::json;
use zi_test_support::mock_llm::{MockLlm, Step};

mod support;
use support::{Zi, contains, median, mock_server, ms, rpc_command};

/// zi on `mock/m1`; `ephemeral` adds `--no-session`.
fn spawn(agent_dir: &Path, ephemeral: bool) -> Zi {
    let mut command = rpc_command(agent_dir);
    command.args(["--model", "mock/m1"]);
    if ephemeral {
        command.arg("--no-session");
    }
    Zi::start(command)
}

/// Spawn → `ready` and RSS at `ready` (100 starts), each start paired with one of the floor: the
/// same binary's `zi --version` from spawn to exit (exec, the dynamic loader, argument parsing:
/// what every start pays before zi does any work of its own).
fn bench_ready(agent_dir: &Path) {
    let mut times = Vec::new();
    let mut floor = Vec::new();
    let mut rss = Vec::new();
    for _ in 0..100 {
        let start = Instant::now();
        let mut zi = spawn(agent_dir, true);
        let line = zi.line();
        times.push(ms(start));
        assert!(contains(&line, b"\"type\":\"ready\""));
        rss.push(zi.status_kib("VmRSS:") as f64);
        zi.finish();
        let start = Instant::now();
        let status = std::process::Command::new(support::zi_binary())
            .arg("--version")
            .stdout(std::process::Stdio::null())
            .status()
            .expect("zi --version");
        floor.push(ms(start));
        assert!(status.success());
    }
    println!(
        "spawn to ready: median {:.2} ms, min {:.2} ms (100 runs)",
        median(times.clone()),
        times.iter().cloned().fold(f64::MAX, f64::min)
    );
    println!(
        "floor, zi --version spawn to exit: median {:.2} ms, min {:.2} ms (100 runs, interleaved)",
        median(floor.clone()),
        floor.iter().cloned().fold(f64::MAX, f64::min)
    );
    println!("RSS after ready: median {:.1} MiB", median(rss) / 1024.0);
}

fn bench_stream(
    mock: &MockLlm,
    agent_dir: &Path,
    mode: &str,
    total_bytes: usize,
) -> (f64, f64, u64, u64) {
    let mut zi = spawn(agent_dir, true);
    zi.line();
    zi.send(json!({"version":1,"id":"e","method":"connection.set_events","params":{"mode":mode}}));
    zi.response("e");
    mock.push(Step::Bytes {
        total_bytes,
        delta_bytes: 4,
    });
    let (frames_before, bytes_before) = (zi.frames, zi.bytes);
    let cpu_before = zi.cpu_seconds();
    let start = Instant::now();
    zi.send(json!({"version":1,"id":"p","method":"session.prompt","params":{"delivery":"direct","text":"go","completionId":"c"}}));
    zi.send(
        json!({"version":1,"id":"w","method":"session.await_idle","params":{"completionId":"c"}}),
    );
    let result = zi.response("w");
    let elapsed = start.elapsed().as_secs_f64();
    let cpu = zi.cpu_seconds() - cpu_before;
    let original = result["result"]["completion"]["originalBytes"]
        .as_u64()
        .unwrap_or(0);
    assert_eq!(
        original as usize, total_bytes,
        "unexpected completion: {result}"
    );
    let frames = zi.frames - frames_before;
    let bytes = zi.bytes - bytes_before;
    zi.finish();
    (elapsed, cpu, frames, bytes)
}

/// Median prompt round trip (prompt → await_idle) over `rounds` short replies.
fn bench_round_trips(mock: &MockLlm, agent_dir: &Path, ephemeral: bool, rounds: usize) -> f64 {
    let mut zi = spawn(agent_dir, ephemeral);
    zi.line();
    let mut times = Vec::new();
    for round in 0..rounds {
        mock.push(Step::text("ok"));
        let start = Instant::now();
        zi.send(json!({"version":1,"id":format!("p{round}"),"method":"session.prompt","params":{"delivery":"direct","text":"hi"}}));
        zi.send(json!({"version":1,"id":format!("w{round}"),"method":"session.await_idle"}));
        zi.response(&format!("w{round}"));
        times.push(ms(start));
    }
    zi.finish();
    median(times)
}

/// Pipelined queries: `total` requests of `method`, keeping `window` in flight (a new request is
/// written as each response arrives). Returns requests per second and the p50 and p99 latency
/// (send to response) in microseconds.
fn bench_pipelined(agent_dir: &Path, method: &str, total: usize, window: usize) -> (f64, f64, f64) {
    let mut zi = spawn(agent_dir, true);
    zi.line();
    let request = |i: usize| format!("{{\"version\":1,\"id\":\"q{i}\",\"method\":\"{method}\"}}\n");
    let mut sent_at = vec![Instant::now(); total];
    let mut latencies = Vec::with_capacity(total);
    let start = Instant::now();
    let mut sent = 0;
    let mut initial = String::new();
    while sent < window.min(total) {
        initial.push_str(&request(sent));
        sent_at[sent] = Instant::now();
        sent += 1;
    }
    zi.stdin
        .write_all(initial.as_bytes())
        .expect("write requests");
    let mut received = 0;
    while received < total {
        let line = zi.line();
        let Some(index) = response_index(&line) else {
            continue;
        };
        assert!(
            contains(&line, b"\"ok\":true"),
            "pipelined {method} failed: {}",
            String::from_utf8_lossy(&line)
        );
        latencies.push(sent_at[index].elapsed().as_secs_f64() * 1e6);
        received += 1;
        if sent < total {
            sent_at[sent] = Instant::now();
            zi.stdin
                .write_all(request(sent).as_bytes())
                .expect("write request");
            sent += 1;
        }
    }
    let elapsed = start.elapsed().as_secs_f64();
    zi.finish();
    latencies.sort_by(|a, b| a.total_cmp(b));
    let p99 = latencies[latencies.len() * 99 / 100];
    (total as f64 / elapsed, median(latencies), p99)
}

/// `thinking.list` (no snapshot) beside `session.get_state` (the full state snapshot); the
/// median of 5 runs each.
fn bench_pipelined_queries(agent_dir: &Path) {
    for method in ["thinking.list", "session.get_state"] {
        let mut runs: Vec<(f64, f64, f64)> = (0..5)
            .map(|_| bench_pipelined(agent_dir, method, 10_000, 32))
            .collect();
        runs.sort_by(|a, b| a.0.total_cmp(&b.0));
        let (rate, p50, p99) = runs[runs.len() / 2];
        println!(
            "pipelined {method}, 10,000 requests, 32 in flight: median {rate:.0} req/s (p50 {p50:.0} µs, p99 {p99:.0} µs), best {:.0} req/s",
            runs[runs.len() - 1].0
        );
    }
}

/// The request index of a pipelined response (`"id":"q<index>"`).
fn response_index(line: &[u8]) -> Option<usize> {
    let needle = b"\"id\":\"q";
    let at = line.windows(needle.len()).position(|w| w == needle)? + needle.len();
    let digits = line[at..].iter().take_while(|b| b.is_ascii_digit()).count();
    std::str::from_utf8(&line[at..at + digits])
        .ok()?
        .parse()
        .ok()
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let (_runtime, mock) = mock_server();
    let agent_dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        agent_dir.path().join("models.json"),
        mock.models_json(
            "bench-key",
            &[json!({"id": "m1", "contextWindow": 1_000_000})],
        ),
    )
    .expect("models.json");

    // `cargo bench -p zi-cli --bench rpc -- ready` runs only spawn → `ready`.
    if std::env::args().any(|a| a == "ready") {
        bench_ready(agent_dir.path());
        drop(mock);
        return;
    }
    // `cargo bench -p zi-cli --bench rpc -- pipelined` runs only the pipelined queries.
    if std::env::args().any(|a| a == "pipelined") {
        bench_pipelined_queries(agent_dir.path());
        drop(mock);
        return;
    }

    bench_ready(agent_dir.path());

    let deltas = 65_536 / 4;
    let mut none_runs = Vec::new();
    for _ in 0..5 {
        none_runs.push(bench_stream(&mock, agent_dir.path(), "none", 65_536));
    }
    none_runs.sort_by(|a, b| a.0.total_cmp(&b.0));
    let (elapsed, cpu, _, _) = none_runs[none_runs.len() / 2];
    let best = none_runs[0].0;
    println!(
        "none mode, 64 KiB in 4-byte deltas: median {:.1} ms ({:.0} deltas/s), best {:.1} ms ({:.0} deltas/s), zi CPU {:.3} s",
        elapsed * 1000.0,
        deltas as f64 / elapsed,
        best * 1000.0,
        deltas as f64 / best,
        cpu
    );

    for total in [16_384usize, 65_536, 262_144] {
        let (elapsed, cpu, frames, bytes) = bench_stream(&mock, agent_dir.path(), "all", total);
        println!(
            "all mode, {} KiB reply: {:.1} ms, {} frames ({:.0} frames/s), {} bytes written ({:.1} MiB/s, {:.1} bytes per reply byte), zi CPU {:.3} s",
            total / 1024,
            elapsed * 1000.0,
            frames,
            frames as f64 / elapsed,
            bytes,
            bytes as f64 / elapsed / 1_048_576.0,
            bytes as f64 / total as f64,
            cpu
        );
    }
    bench_pipelined_queries(agent_dir.path());
    let ephemeral = bench_round_trips(&mock, agent_dir.path(), true, 50);
    let durable = bench_round_trips(&mock, agent_dir.path(), false, 50);
    println!(
        "prompt round trip (median of 50): --no-session {ephemeral:.2} ms, persistent journal {durable:.2} ms (journal appends + fsync at settle: {:.2} ms)",
        durable - ephemeral
    );
    drop(mock);
}
