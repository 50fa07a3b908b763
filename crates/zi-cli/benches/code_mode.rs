//! Code Mode benchmark (docs/performance.md#code-mode), with the real binary:
//!
//! - worker start to first statement: `run_cell` called → the cell's first `console.log` line
//!   arrives (exec of zi, engine, confinement, `ready`, `start`, first statement), 50 runs;
//! - per nested call: a cell awaiting 1,000 `zi.echo()` calls one after another, answered by
//!   the host loop at once (protocol + engine + scheduler), timed inside the cell; and a cell of
//!   64 sequential `zi.read()` calls through zi's real tool path (validation, the approval
//!   gate, the read itself), against the same 64 reads made by the model in one turn;
//! - 14 reads as 14 tool calls (4 provider turns) vs one cell (1 turn), against the mock
//!   provider: provider requests, request bytes, prompt → `agent_settled` wall time;
//! - interrupt: `session.interrupt` written → the worker process gone.
//!
//! Run with `cargo bench -p zi-cli --bench code_mode` (release build). Figures are printed, not
//! asserted.

// A benchmark fails loudly: a panic with its reason is the right report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use zi_code::host::{
    ApprovalClock, CallHandler, CellSpec, CellTool, NestedAnswer, NestedRequest, WorkerProgram,
    run_cell,
};
use zi_code::limits::Limits;
use zi_test_support::mock_llm::{MockLlm, Step};

mod support;
use support::{Dirs, Zi, median, mock_server, ms, p95, zi_binary};

/// Answers every call at once with its input.
struct Echo;

impl CallHandler for Echo {
    fn call(
        &self,
        request: NestedRequest,
        _: CancellationToken,
        _: ApprovalClock,
    ) -> BoxFuture<'static, NestedAnswer> {
        Box::pin(async move { NestedAnswer::Ok(Some(request.input)) })
    }
}

fn spec(code: &str, max_calls: u64) -> CellSpec {
    CellSpec {
        code: code.to_string(),
        tools: vec![CellTool {
            name: "echo".into(),
            parallel: true,
        }],
        limits: Limits {
            max_calls,
            ..Limits::default()
        },
        require_seccomp: true,
    }
}

fn program() -> WorkerProgram {
    WorkerProgram {
        program: PathBuf::from(zi_binary()),
    }
}

fn bench_start(runtime: &tokio::runtime::Runtime, runs: usize) -> Vec<f64> {
    let mut first = Vec::new();
    for _ in 0..runs {
        let seen: Arc<Mutex<Option<f64>>> = Arc::new(Mutex::new(None));
        let started = Instant::now();
        let sink = seen.clone();
        let outcome = runtime.block_on(run_cell(
            &program(),
            spec("console.log(1); return 1", 1),
            Arc::new(Echo),
            &CancellationToken::new(),
            &move |trace| {
                let mut seen = sink.lock().unwrap();
                if seen.is_none() && !trace.logs.is_empty() {
                    *seen = Some(ms(started));
                }
            },
        ));
        assert!(outcome.result.is_ok(), "{:?}", outcome.result);
        first.push(seen.lock().unwrap().expect("the first statement logged"));
    }
    first
}

fn bench_echo(runtime: &tokio::runtime::Runtime, calls: u64, runs: usize) -> Vec<f64> {
    let code = format!(
        "const t = performance.now(); for (let i = 0; i < {calls}; i++) await zi.echo({{i}}); return (performance.now() - t) / {calls}"
    );
    (0..runs)
        .map(|_| {
            let outcome = runtime.block_on(run_cell(
                &program(),
                spec(&code, calls),
                Arc::new(Echo),
                &CancellationToken::new(),
                &|_| {},
            ));
            outcome.result.unwrap().unwrap().as_f64().unwrap() * 1000.0
        })
        .collect()
}

fn prompt(zi: &mut Zi, id: &str) {
    zi.send(json!({"version": 1, "id": id, "method": "session.prompt", "params": {"delivery": "direct", "text": "go"}}));
}

/// Reads frames until `agent_settled`; returns the `tool_execution_end` events seen.
fn until_settled(zi: &mut Zi) -> Vec<Value> {
    let mut ends = Vec::new();
    loop {
        let frame = zi.frame();
        match frame["event"]["type"].as_str().unwrap_or_default() {
            "tool_execution_end" => ends.push(frame["event"].clone()),
            "agent_settled" => return ends,
            _ => {}
        }
    }
}

fn read_calls(files: usize, from: usize) -> Vec<(String, String, Value)> {
    (from..from + files)
        .map(|i| {
            (
                format!("r{i}"),
                "read".to_string(),
                json!({"path": format!("f{i}.txt")}),
            )
        })
        .collect()
}

fn push_calls(mock: &MockLlm, calls: &[(String, String, Value)]) {
    let borrowed: Vec<(&str, &str, Value)> = calls
        .iter()
        .map(|(a, b, c)| (a.as_str(), b.as_str(), c.clone()))
        .collect();
    mock.push(Step::tool_calls(&borrowed));
}

/// (requests, request bytes, wall ms) of one prompt scripted by `script`.
fn measure(
    mock: &MockLlm,
    zi: &mut Zi,
    id: &str,
    script: impl Fn(&MockLlm),
) -> (usize, usize, f64) {
    let before = mock.requests().len();
    script(mock);
    let started = Instant::now();
    prompt(zi, id);
    let ends = until_settled(zi);
    let wall = ms(started);
    assert!(ends.iter().all(|e| e["isError"] == false), "{ends:?}");
    let requests = mock.requests();
    let new = &requests[before..];
    (
        new.len(),
        new.iter().map(|r| r.body.to_string().len()).sum(),
        wall,
    )
}

fn fourteen_reads(mock: &MockLlm, dirs: &Dirs, runs: usize) {
    for i in 0..64 {
        std::fs::write(
            dirs.cwd.join(format!("f{i}.txt")),
            format!("file {i}\n").repeat(40),
        )
        .unwrap();
    }
    let mut zi = Zi::start(dirs.command(&["--code-mode"]));
    assert_eq!(zi.frame()["type"], "ready");
    let (mut calls, mut cell) = (Vec::new(), Vec::new());
    for run in 0..runs {
        calls.push(measure(mock, &mut zi, &format!("a{run}"), |mock| {
            for (from, n) in [(0, 4), (4, 4), (8, 3), (11, 3)] {
                push_calls(mock, &read_calls(n, from));
            }
            mock.push(Step::text("done"));
        }));
        let code = "const names = Array.from({length: 14}, (_, i) => `f${i}.txt`);\nconst texts = await Promise.all(names.map(path => zi.read({path})));\nreturn texts.map((t, i) => ({file: names[i], lines: t.split(\"\\n\").length}));";
        cell.push(measure(mock, &mut zi, &format!("b{run}"), |mock| {
            mock.push(Step::tool_call(
                "c",
                "code",
                json!({"description": "read 14 files", "code": code}),
            ));
            mock.push(Step::text("done"));
        }));
    }
    let show = |name: &str, m: &[(usize, usize, f64)]| {
        println!(
            "  {name}: {} provider requests, {} request bytes, wall median {:.1} ms (p95 {:.1})",
            m[0].0,
            m[0].1,
            median(m.iter().map(|x| x.2).collect()),
            p95(m.iter().map(|x| x.2).collect())
        );
    };
    println!("14 reads, {runs} runs each:");
    show("14 tool calls over 4 turns", &calls);
    show("one code cell", &cell);
    // 64 sequential nested reads through zi's tool path, timed inside the cell.
    let mut per_read = Vec::new();
    for run in 0..runs {
        let code = "const t = performance.now(); for (let i = 0; i < 64; i++) await zi.read({path: `f${i}.txt`}); return (performance.now() - t) / 64;";
        mock.push(Step::tool_call("n", "code", json!({"code": code})));
        mock.push(Step::text("done"));
        prompt(&mut zi, &format!("n{run}"));
        let ends = until_settled(&mut zi);
        let text = ends[0]["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .to_string();
        let value: f64 = text.rsplit('\n').next().unwrap().parse().unwrap();
        per_read.push(value * 1000.0);
    }
    println!(
        "  nested read through zi's tool path (64 sequential per cell): median {:.0} µs per call (p95 {:.0})",
        median(per_read.clone()),
        p95(per_read)
    );
    // Interrupt → worker gone.
    let mut interrupt = Vec::new();
    for run in 0..runs {
        mock.push(Step::tool_call(
            "s",
            "code",
            json!({"code": "while (true) {}"}),
        ));
        prompt(&mut zi, &format!("s{run}"));
        let worker = loop {
            if let Some(pid) = worker_of(zi.child.id()) {
                break pid;
            }
            std::thread::sleep(Duration::from_millis(2));
        };
        std::thread::sleep(Duration::from_millis(50));
        let sent = Instant::now();
        zi.send(json!({"version": 1, "id": format!("i{run}"), "method": "session.interrupt"}));
        while std::path::Path::new(&format!("/proc/{worker}/cmdline")).exists()
            && std::fs::read(format!("/proc/{worker}/cmdline")).is_ok_and(|c| !c.is_empty())
        {
            std::thread::sleep(Duration::from_micros(200));
        }
        interrupt.push(ms(sent));
        until_settled(&mut zi);
    }
    println!(
        "  session.interrupt → worker gone: median {:.1} ms (p95 {:.1}, max {:.1})",
        median(interrupt.clone()),
        p95(interrupt.clone()),
        interrupt.iter().cloned().fold(0.0, f64::max)
    );
    zi.finish();
}

/// The `__code-worker` child of `zi`, if one runs.
fn worker_of(zi: u32) -> Option<u32> {
    std::fs::read_dir("/proc")
        .ok()?
        .flatten()
        .find_map(|entry| {
            let pid: u32 = entry.file_name().to_str()?.parse().ok()?;
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            let ppid: u32 = stat
                .rsplit(')')
                .next()?
                .split_whitespace()
                .nth(1)?
                .parse()
                .ok()?;
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
            (ppid == zi && String::from_utf8_lossy(&cmdline).contains("__code-worker"))
                .then_some(pid)
        })
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let starts = bench_start(&runtime, 50);
    println!(
        "worker start → first statement (50 runs): median {:.2} ms, p95 {:.2}, min {:.2}",
        median(starts.clone()),
        p95(starts.clone()),
        starts.iter().cloned().fold(f64::MAX, f64::min)
    );
    let echo = bench_echo(&runtime, 64, 30);
    println!(
        "nested call, host loop answering at once (64 sequential per cell, 30 cells): median {:.1} µs per call (p95 {:.1})",
        median(echo.clone()),
        p95(echo)
    );
    let (_mock_runtime, mock) = mock_server();
    let dirs = Dirs::new("zi-bench-code-", &mock);
    fourteen_reads(&mock, &dirs, 10);
}
