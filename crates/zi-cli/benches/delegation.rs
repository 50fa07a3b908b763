//! Delegation benchmark (issue 12 point 8, docs/performance.md#delegation), over the real binary:
//!
//! - child spawn-to-ready: the child command line the supervisor builds
//!   (`ZI_SUBAGENT_DEPTH=1 zi --mode rpc --no-session --cwd --model --thinking`, own process
//!   group) started through `zi-rpc-client` until its `ready` frame is read; and, inside a
//!   parent, `spawn_subagent`'s `tool_execution_start` → `tool_execution_end` (start, ready,
//!   `set_events`, `get_state`, the journal entries and the cycle-1 admission);
//! - per-cycle overhead: a parent with one idle child; per cycle the parent model calls
//!   `assign_subagent_task` and the child answers one text. Measured from the parent's
//!   `session.prompt` written to the parent's `operation_outcome` of that work cycle read (the
//!   parent's provider turn, the assignment, the child's provider turn, its completion and
//!   the outcome), against a direct prompt that does the same two provider turns itself (a
//!   `read` of a small file, then the text), `session.prompt` written → `agent_settled` read.
//!   The difference is what delegating one cycle costs over doing it (the RPC hop to the
//!   child, the completion watch, the outcome append), the child's provider turn included
//!   on both sides.
//!
//! Run with `cargo bench -p zi-cli --bench delegation` (release build). A clean `HOME` and
//! directories outside `/tmp` are used. Figures are printed, not asserted.

// A benchmark fails loudly: a panic with its reason is the right report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use zi_rpc_client::{Client, ClientBuilder, Delivery, EventStream};
use zi_test_support::mock_llm::{MockLlm, Step};

mod support;
use support::{Dirs, median, p95, zi_binary};

const SPAWNS: usize = 20;
const CYCLES: u64 = 50;
const WAIT: Duration = Duration::from_secs(60);

/// The bench's directories ([`Dirs`]) with two models, `mock/parent` and `mock/child`, and a
/// `worker` profile on `mock/child`.
fn dirs(mock: &MockLlm) -> Dirs {
    let dirs = Dirs::new("zi-delegation-bench-", mock);
    std::fs::write(
        dirs.agent.join("models.json"),
        mock.models_json(
            "bench-key",
            &[json!({"id": "parent"}), json!({"id": "child"})],
        ),
    )
    .unwrap();
    std::fs::create_dir_all(dirs.agent.join("subagents")).unwrap();
    std::fs::write(
        dirs.agent.join("subagents/worker.md"),
        "---\ndescription: Does one delegated job\nmodel: mock/child\n---\nWork.\n",
    )
    .unwrap();
    dirs
}

/// A zi with a clean environment (no host `ZI_*` variables or credentials).
fn builder(dirs: &Dirs, args: &[&str]) -> ClientBuilder {
    let path = std::env::var_os("PATH").unwrap_or_default();
    ClientBuilder::new(zi_binary())
        .args(["--mode", "rpc"])
        .args(args)
        .current_dir(&dirs.cwd)
        .env_clear()
        .env("PATH", path)
        .env("HOME", &dirs.home)
        .env("SHELL", "/bin/bash")
        .env("ZI_AGENT_DIR", &dirs.agent)
        .process_group(0)
        .ready_timeout(WAIT)
}

/// A span in milliseconds.
fn span_ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn report(label: &str, values: &[f64]) {
    println!(
        "{label}: median {:.2} ms, p95 {:.2} ms, min {:.2} ms (n = {})",
        median(values.to_vec()),
        p95(values.to_vec()),
        values.iter().copied().fold(f64::INFINITY, f64::min),
        values.len()
    );
}

/// The next event matching `pred`, with the instant it was read.
async fn next_matching(events: &mut EventStream, pred: impl Fn(&Value) -> bool) -> Instant {
    loop {
        let event = tokio::time::timeout(WAIT, events.next())
            .await
            .expect("an event in time")
            .expect("the parent is running");
        if pred(&event.event) {
            return Instant::now();
        }
    }
}

/// Reads events until each predicate matched once, in any order; the instants they were read.
async fn all_of<const N: usize>(
    events: &mut EventStream,
    preds: [&dyn Fn(&Value) -> bool; N],
) -> [Instant; N] {
    let mut seen: [Option<Instant>; N] = [None; N];
    while seen.iter().any(Option::is_none) {
        let event = tokio::time::timeout(WAIT, events.next())
            .await
            .expect("an event in time")
            .expect("the parent is running");
        for (pred, at) in preds.iter().zip(seen.iter_mut()) {
            if at.is_none() && pred(&event.event) {
                *at = Some(Instant::now());
            }
        }
    }
    seen.map(|at| at.expect("matched"))
}

fn is_outcome(event: &Value, operation_id: &str) -> bool {
    event["type"] == "operation_outcome" && event["outcome"]["operationId"] == operation_id
}

async fn close(client: Client) {
    client.close().await.expect("zi exits");
}

/// The child's command line, started as the supervisor starts it, until `ready`.
async fn child_spawn_to_ready(dirs: &Dirs) -> Vec<f64> {
    let cwd = dirs.cwd.to_string_lossy().into_owned();
    let mut samples = Vec::new();
    for _ in 0..SPAWNS {
        let started = Instant::now();
        let client = builder(
            dirs,
            &[
                "--no-session",
                "--cwd",
                &cwd,
                "--model",
                "mock/child",
                "--thinking",
                "medium",
            ],
        )
        .env("ZI_SUBAGENT_DEPTH", "1")
        .spawn()
        .await
        .expect("the child starts");
        samples.push(span_ms(started.elapsed()));
        close(client).await;
    }
    samples
}

/// A direct prompt doing two provider turns (a `read` of a small file, then one text):
/// `session.prompt` written → `agent_settled` read.
async fn direct_cycles(mock: &MockLlm, dirs: &Dirs) -> Vec<f64> {
    std::fs::write(dirs.cwd.join("small.txt"), "small\n").unwrap();
    let client = builder(dirs, &["--no-session", "--model", "mock/child"])
        .spawn()
        .await
        .expect("zi starts");
    let mut events = client.subscribe();
    let mut samples = Vec::new();
    for n in 0..CYCLES {
        mock.push_for(
            "child",
            Step::tool_call(&format!("r{n}"), "read", json!({"path": "small.txt"})),
        );
        mock.push_for("child", Step::text(&format!("done {n}")));
        let started = Instant::now();
        client
            .prompt(Delivery::Direct, &format!("task {n}"), None)
            .await
            .expect("admitted");
        let settled = next_matching(&mut events, |e| e["type"] == "agent_settled").await;
        samples.push(span_ms(settled - started));
    }
    close(client).await;
    samples
}

/// One child driven by a parent: spawn (timed), then `CYCLES` assigned work cycles (timed from
/// the parent's prompt to the cycle's outcome).
async fn delegated_cycles(mock: &MockLlm, dirs: &Dirs) -> (f64, Vec<f64>) {
    let parent = builder(dirs, &["--no-session", "--model", "mock/parent"])
        .spawn()
        .await
        .expect("the parent starts");
    let mut events = parent.subscribe();
    mock.push_for(
        "parent",
        Step::tool_call(
            "s1",
            "spawn_subagent",
            json!({"profile": "worker", "name": "w1", "prompt": "warm up"}),
        ),
    );
    mock.push_for("child", Step::text("ready"));
    mock.push_for("parent", Step::text("spawned"));
    parent
        .prompt(Delivery::Direct, "spawn", None)
        .await
        .expect("admitted");
    let start = next_matching(&mut events, |e| {
        e["type"] == "tool_execution_start" && e["toolName"] == "spawn_subagent"
    })
    .await;
    // The child's first cycle may complete before the spawn's result is out.
    let [end, _, _] = all_of(
        &mut events,
        [
            &|e: &Value| e["type"] == "tool_execution_end" && e["toolName"] == "spawn_subagent",
            &|e: &Value| is_outcome(e, "subagent/w1/work_cycle/1"),
            &|e: &Value| e["type"] == "agent_settled",
        ],
    )
    .await;
    let spawn = span_ms(end - start);

    let mut samples = Vec::new();
    for n in 2..CYCLES + 2 {
        mock.push_for(
            "parent",
            Step::tool_call(
                &format!("a{n}"),
                "assign_subagent_task",
                json!({"name": "w1", "text": format!("task {n}")}),
            ),
        );
        mock.push_for("child", Step::text(&format!("done {n}")));
        mock.push_for("parent", Step::text("assigned"));
        let started = Instant::now();
        parent
            .prompt(Delivery::Direct, &format!("assign {n}"), None)
            .await
            .expect("admitted");
        let id = format!("subagent/w1/work_cycle/{n}");
        // The parent's run may settle before or after the child's cycle does.
        let [outcome, _] = all_of(
            &mut events,
            [&|e: &Value| is_outcome(e, &id), &|e: &Value| {
                e["type"] == "agent_settled"
            }],
        )
        .await;
        samples.push(span_ms(outcome - started));
    }
    close(parent).await;
    (spawn, samples)
}

#[tokio::main]
async fn main() {
    let mock = MockLlm::start().await.expect("the mock LLM starts");
    let dirs = dirs(&mock);
    let ready = child_spawn_to_ready(&dirs).await;
    report("child spawn → ready", &ready);
    let direct = direct_cycles(&mock, &dirs).await;
    report("direct prompt, read + text → agent_settled", &direct);
    let (spawn, delegated) = delegated_cycles(&mock, &dirs).await;
    println!("spawn_subagent (start → end, one sample): {spawn:.2} ms");
    report("delegated cycle, prompt → work-cycle outcome", &delegated);
    println!(
        "overhead per delegated cycle (median delegated − median direct): {:.2} ms",
        median(delegated) - median(direct)
    );
}
