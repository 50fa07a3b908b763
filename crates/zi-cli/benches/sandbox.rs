//! Sandbox benchmark (docs/performance.md#sandbox): what the bash sandbox adds per command and at
//! start-up.
//!
//! - raw spawn: `bash -c true` from this process, plain vs confined (ruleset + filter built in
//!   the parent, applied in `pre_exec`), and the parent-side build alone;
//! - the `bash` tool over the real binary: `tool_execution_start` → `tool_execution_end` for
//!   `true` under `full`, `workspace-write` and `read-only`;
//! - spawn → `ready` with and without `--sandbox workspace-write` (the probe included).
//!
//! Run with `cargo bench -p zi-cli --bench sandbox` (release build). A clean `HOME` and
//! directories outside `/tmp` are used (login profiles would otherwise dominate). Figures
//! are printed, not asserted: timing never decides a pass or fail.

// A benchmark fails loudly: a panic with its reason is the right report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::os::unix::process::CommandExt as _;
use std::process::Command;
use std::sync::Arc;
use std::time::Instant;

use serde_json::json;
use zi_sandbox::{Mode, Sandbox, SandboxConfig, SandboxEnv, TestHooks, kernel_landlock_abi};
use zi_test_support::mock_llm::{MockLlm, Step};

mod support;
use support::{Dirs, Zi, median, mock_server, ms, p95};

fn sandbox(mode: Mode, dirs: &Dirs) -> Sandbox {
    Sandbox::new(
        SandboxConfig {
            mode,
            ..SandboxConfig::default()
        },
        &SandboxEnv {
            cwd: dirs.cwd.clone(),
            agent_dir: dirs.agent.clone(),
            tmpdir: None,
        },
        &TestHooks::default(),
    )
}

fn bench_raw_spawn(dirs: &Dirs) {
    const RUNS: usize = 300;
    let confined = sandbox(Mode::WorkspaceWrite, dirs);
    let mut build = Vec::new();
    for _ in 0..RUNS {
        let start = Instant::now();
        let confinement = confined.confine().unwrap();
        build.push(start.elapsed().as_secs_f64() * 1e6);
        drop(confinement);
    }
    let runs = |confine: bool| -> Vec<f64> {
        (0..RUNS)
            .map(|_| {
                let start = Instant::now();
                let mut command = Command::new("/bin/bash");
                command.args(["-c", "true"]).current_dir(&dirs.cwd);
                if confine {
                    let confinement = Arc::new(confined.confine().unwrap());
                    // SAFETY: the hook makes only raw system calls.
                    unsafe {
                        command.pre_exec(move || confinement.apply_in_child());
                    }
                }
                let status = command.status().unwrap();
                assert!(status.success());
                ms(start)
            })
            .collect()
    };
    let plain = runs(false);
    let sandboxed = runs(true);
    println!(
        "raw spawn of bash -c true ({RUNS} runs): plain median {:.3} ms, confined median {:.3} ms (+{:.3} ms); parent-side build median {:.1} µs",
        median(plain.clone()),
        median(sandboxed.clone()),
        median(sandboxed) - median(plain),
        median(build)
    );
}

/// `tool_execution_start` → `tool_execution_end` of `bash true`, per prompt.
fn bench_bash_tool(mock: &MockLlm, dirs: &Dirs, extra: &[&str], runs: usize) -> Vec<f64> {
    let mut zi = Zi::start(dirs.command(extra));
    assert_eq!(zi.frame()["type"], "ready");
    let mut times = Vec::new();
    for run in 0..runs {
        mock.push(Step::tool_call("c", "bash", json!({"command": "true"})));
        mock.push(Step::text("done"));
        zi.send(json!({"version": 1, "id": format!("p{run}"), "method": "session.prompt", "params": {"delivery": "direct", "text": "go"}}));
        let mut started = None;
        loop {
            let frame = zi.frame();
            let event = frame["event"]["type"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            match event.as_str() {
                "tool_execution_start" => started = Some(Instant::now()),
                "tool_execution_end" => {
                    times.push(ms(started.expect("start before end")));
                    assert_eq!(frame["event"]["isError"], false, "{frame}");
                }
                "agent_settled" => break,
                _ => {}
            }
        }
    }
    zi.finish();
    times
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let (_runtime, mock) = mock_server();
    let dirs = Dirs::new("zi-sandbox-bench-", &mock);
    let abi = match kernel_landlock_abi() {
        Ok(abi) => abi,
        Err(reason) => {
            println!("SKIP: {reason}");
            return;
        }
    };
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    println!(
        "machine: {} CPUs, kernel {}, Landlock ABI {abi}",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        release.trim()
    );
    bench_raw_spawn(&dirs);
    const RUNS: usize = 300;
    let full = bench_bash_tool(&mock, &dirs, &[], RUNS);
    let write = bench_bash_tool(&mock, &dirs, &["--sandbox", "workspace-write"], RUNS);
    let read = bench_bash_tool(&mock, &dirs, &["--sandbox", "read-only"], RUNS);
    let base = median(full.clone());
    println!(
        "bash tool `true`, start → end ({RUNS} runs): full median {:.3} ms (p95 {:.3}); workspace-write {:.3} ms (p95 {:.3}, +{:.3}); read-only {:.3} ms (p95 {:.3}, +{:.3})",
        base,
        p95(full),
        median(write.clone()),
        p95(write.clone()),
        median(write) - base,
        median(read.clone()),
        p95(read.clone()),
        median(read) - base,
    );
    println!(
        "spawn to ready (30 runs): no sandbox median {:.2} ms; --sandbox workspace-write {:.2} ms",
        dirs.ready_median_ms(&[]),
        dirs.ready_median_ms(&["--sandbox", "workspace-write"])
    );
    drop(mock);
}
