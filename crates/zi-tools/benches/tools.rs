//! Tool benchmark: `read` of a 16 MiB file and `bash` of a command printing 64 MiB, with time
//! and peak memory. Memory must stay bounded by the truncation limits, not the input size.
//!
//! Run with `cargo bench -p zi-tools --bench tools`. Figures are printed, not asserted.

// A benchmark fails loudly: a panic with its reason is the right report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Write as _;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use zi_agent::{SessionHost, Tool, ToolCallContext};
use zi_tools::{BashTool, ReadTool, TaskRegistry, ToolEnv};

/// `VmRSS` and `VmHWM` of this process, in KiB.
fn memory() -> (u64, u64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// Resets the peak-RSS counter (Linux: writing 5 to clear_refs).
fn reset_peak() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

async fn measure(tool: &dyn Tool, args: Value, runs: usize) -> (Vec<Duration>, u64, u64, Value) {
    let mut times = Vec::new();
    let (baseline, _) = memory();
    reset_peak();
    let mut details = Value::Null;
    for _ in 0..runs {
        let started = Instant::now();
        let output = tool
            .execute_json(ToolCallContext {
                call_id: "bench".into(),
                raw_arguments: args.clone(),
                cancel: CancellationToken::new(),
                progress: Arc::new(|_| {}),
                host: SessionHost::detached(),
            })
            .await;
        times.push(started.elapsed());
        details = output.details.unwrap_or_default();
    }
    let (_, peak) = memory();
    times.sort();
    (times, baseline, peak, details)
}

fn report(name: &str, (times, baseline, peak, details): (Vec<Duration>, u64, u64, Value)) {
    println!(
        "{name}: median {:.1} ms, min {:.1} ms over {} runs; RSS before {:.1} MiB, peak {:.1} MiB (+{:.1} MiB)",
        times[times.len() / 2].as_secs_f64() * 1000.0,
        times[0].as_secs_f64() * 1000.0,
        times.len(),
        baseline as f64 / 1024.0,
        peak as f64 / 1024.0,
        peak.saturating_sub(baseline) as f64 / 1024.0,
    );
    println!("  details: {details}");
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap_or_else(|e| panic!("runtime: {e}"));
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let env = ToolEnv::new(dir.path().to_path_buf(), Some("/bin/bash".into()));

    // A 16 MiB file of 100-byte lines, written in chunks.
    let path = dir.path().join("big.txt");
    {
        let mut file = std::fs::File::create(&path).unwrap_or_else(|e| panic!("{e}"));
        let line = format!("{}\n", "r".repeat(99));
        let chunk = line.repeat(10_000);
        let mut written = 0;
        while written + chunk.len() <= 16 * 1024 * 1024 {
            file.write_all(chunk.as_bytes())
                .unwrap_or_else(|e| panic!("{e}"));
            written += chunk.len();
        }
        let rest = 16 * 1024 * 1024 - written;
        file.write_all(&chunk.as_bytes()[..rest])
            .unwrap_or_else(|e| panic!("{e}"));
    }
    let read = ReadTool::new(env.clone());
    let bash = BashTool::new(env, TaskRegistry::new());
    runtime.block_on(async {
        report(
            "read 16 MiB file (first window)",
            measure(&read, json!({"path": "big.txt"}), 10).await,
        );
        report(
            "read 16 MiB file (last window, offset 167000)",
            measure(&read, json!({"path": "big.txt", "offset": 167_000}), 10).await,
        );
        report(
            "bash printing 64 MiB (64-byte lines)",
            measure(
                &bash,
                json!({"command": "yes \"$(printf '%063d' 0)\" | head -c 67108864"}),
                3,
            )
            .await,
        );
        report(
            "bash printing 64 MiB (one line)",
            measure(
                &bash,
                json!({"command": "head -c 67108864 /dev/zero | tr '\\0' z"}),
                3,
            )
            .await,
        );
    });
    // Spill files of the benchmark runs.
    for entry in std::fs::read_dir(std::env::temp_dir())
        .into_iter()
        .flatten()
        .flatten()
    {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with("zi-bash-")
            && entry.metadata().is_ok_and(|m| m.len() == 64 * 1024 * 1024)
        {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}
