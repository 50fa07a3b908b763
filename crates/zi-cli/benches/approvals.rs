//! Approvals benchmark (docs/performance.md#approvals), over the real binary unless noted:
//!
//! - approval round trip: a client that answers `allow_once` at once; `approval.respond`
//!   written → `approval_resolved` read, and `approval_request` read → `tool_execution_end`
//!   read for `bash /bin/true`;
//! - per-call overhead: `session.prompt` written → `agent_settled` read for a turn with one
//!   `bash /bin/true`, `untrusted` + auto-answering client vs `never`;
//! - gate cost (in process): evaluating 3 × 256 rules against a 4 KiB compound command;
//! - memory: 16 pending `write` requests with 64 KiB arguments: RSS delta and the
//!   `session.get_state` frame's bytes;
//! - start-up: spawn → `ready` with `--approvals untrusted --sandbox workspace-write`
//!   configured vs nothing.
//!
//! Run with `cargo bench -p zi-cli --bench approvals` (release build). A clean `HOME` and
//! directories outside `/tmp` are used. Figures are printed, not asserted.

// A benchmark fails loudly: a panic with its reason is the right report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Instant;

use serde_json::json;
use zi_config::approval::{
    Evaluator, Grants, PathBase, Policy, Rule, RuleKind, RuleSet, RuleSource, SourcedRule, Subject,
};
use zi_test_support::mock_llm::{MockLlm, MockToolCall, Step};

mod support;
use support::{Dirs, Zi, median, mock_server, ms, p95};

fn prompt(zi: &mut Zi, run: usize) {
    zi.send(json!({"version": 1, "id": format!("p{run}"), "method": "session.prompt", "params": {"delivery": "direct", "text": "go"}}));
}

/// Per turn with one `bash /bin/true`: (respond → resolved, request → end, prompt → settled).
fn bench_round_trip(mock: &MockLlm, dirs: &Dirs, ask: bool, runs: usize) -> [Vec<f64>; 3] {
    let extra: &[&str] = if ask {
        &["--approvals", "untrusted"]
    } else {
        &[]
    };
    let mut zi = Zi::start(dirs.command(extra));
    assert_eq!(zi.frame()["type"], "ready");
    if ask {
        zi.call(
            "ap",
            "connection.set_approvals",
            Some(json!({"enabled": true})),
        );
    }
    let (mut respond, mut request_to_end, mut turn) = (Vec::new(), Vec::new(), Vec::new());
    for run in 0..runs {
        mock.push(Step::tool_call(
            "c",
            "bash",
            json!({"command": "/bin/true"}),
        ));
        mock.push(Step::text("done"));
        let prompted = Instant::now();
        prompt(&mut zi, run);
        let (mut asked, mut answered) = (None, None);
        loop {
            let frame = zi.frame();
            match frame["type"].as_str().unwrap_or_default() {
                "approval_request" => {
                    asked = Some(Instant::now());
                    let id = frame["approval"]["approvalId"].clone();
                    answered = Some(Instant::now());
                    zi.send(json!({"version": 1, "id": format!("r{run}"), "method": "approval.respond", "params": {"approvalId": id, "decision": "allow_once"}}));
                }
                "approval_resolved" => respond.push(ms(answered.expect("answered first"))),
                "session_event" => match frame["event"]["type"].as_str().unwrap_or_default() {
                    "tool_execution_end" => {
                        assert_eq!(frame["event"]["isError"], false, "{frame}");
                        if let Some(asked) = asked {
                            request_to_end.push(ms(asked));
                        }
                    }
                    "agent_settled" => {
                        turn.push(ms(prompted));
                        break;
                    }
                    _ => {}
                },
                _ => {}
            }
        }
    }
    zi.finish();
    [respond, request_to_end, turn]
}

/// µs per evaluation of a 4 KiB compound command against 3 × 256 rules that do not match.
fn bench_gate() -> f64 {
    let base = PathBase {
        cwd: "/work/project".into(),
        home: Some("/home/u".into()),
    };
    let mut rules = RuleSet::default();
    for i in 0..256 {
        for (kind, text) in [
            (RuleKind::Allow, format!("bash(tool{i} run:*)")),
            (RuleKind::Ask, format!("bash(deploy{i}:*)")),
            (RuleKind::Deny, format!("bash(rm{i} -rf:*)")),
        ] {
            let rule = Rule::parse(&text).unwrap();
            rules.push(kind, SourcedRule::new(rule, RuleSource::Global, &base));
        }
    }
    let mut command = String::new();
    while command.len() < 4096 {
        command.push_str("cargo test --workspace -- --nocapture && echo ok; ");
    }
    let subject = Subject::exec(&command, false);
    let grants = Grants::default();
    let evaluator = Evaluator {
        policy: Policy::Untrusted,
        broken: None,
        rules: &rules,
        grants: &grants,
        base: &base,
    };
    const RUNS: usize = 2_000;
    let start = Instant::now();
    for _ in 0..RUNS {
        std::hint::black_box(evaluator.evaluate("bash", &subject, None));
    }
    start.elapsed().as_secs_f64() * 1e6 / RUNS as f64
}

/// RSS delta (KiB) with 16 pending `write` requests of 64 KiB each, and the state frame bytes.
fn bench_memory(mock: &MockLlm, dirs: &Dirs) -> (i64, usize) {
    let mut zi = Zi::start(dirs.command(&["--approvals", "untrusted"]));
    assert_eq!(zi.frame()["type"], "ready");
    zi.call(
        "ap",
        "connection.set_approvals",
        Some(json!({"enabled": true})),
    );
    let before = zi.status_kib("VmRSS:") as i64;
    let content = "x".repeat(64 * 1024);
    let calls = (0..16)
        .map(|i| MockToolCall {
            id: format!("w{i}"),
            name: "write".into(),
            args_chunks: vec![json!({"path": format!("f{i}.txt"), "content": content}).to_string()],
        })
        .collect();
    mock.push(Step::Reply {
        thinking: Vec::new(),
        text: Vec::new(),
        tool_calls: calls,
        finish_reason: "tool_calls".into(),
        usage: None,
    });
    mock.push(Step::text("done"));
    prompt(&mut zi, 0);
    let mut asked = 0;
    while asked < 16 {
        if zi.frame()["type"] == "approval_request" {
            asked += 1;
        }
    }
    let after = zi.status_kib("VmRSS:") as i64;
    zi.send(json!({"version": 1, "id": "s", "method": "session.get_state"}));
    let bytes = loop {
        let (frame, bytes) = zi.frame_sized();
        if frame["type"] == "response" && frame["id"] == "s" {
            assert_eq!(
                frame["result"]["approvals"]["pending"]
                    .as_array()
                    .unwrap()
                    .len(),
                16
            );
            break bytes;
        }
    };
    zi.send(json!({"version": 1, "id": "i", "method": "session.interrupt"}));
    zi.finish();
    (after - before, bytes)
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let (_runtime, mock) = mock_server();
    let dirs = Dirs::new("zi-approvals-bench-", &mock);
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let abi = zi_sandbox::kernel_landlock_abi()
        .map(|abi| abi.to_string())
        .unwrap_or_else(|reason| format!("unavailable ({reason})"));
    println!(
        "machine: {} CPUs, kernel {}, Landlock ABI {abi}",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        release.trim()
    );
    const RUNS: usize = 200;
    let [respond, request_to_end, asked_turn] = bench_round_trip(&mock, &dirs, true, RUNS);
    let [_, _, plain_turn] = bench_round_trip(&mock, &dirs, false, RUNS);
    println!(
        "approval round trip ({RUNS} runs): approval.respond written → approval_resolved read median {:.3} ms (p95 {:.3}); approval_request read → tool_execution_end read median {:.3} ms (p95 {:.3})",
        median(respond.clone()),
        p95(respond),
        median(request_to_end.clone()),
        p95(request_to_end)
    );
    println!(
        "per-call overhead ({RUNS} turns of one bash /bin/true, prompt → agent_settled): never median {:.3} ms; untrusted + auto-answer {:.3} ms (+{:.3})",
        median(plain_turn.clone()),
        median(asked_turn.clone()),
        median(asked_turn) - median(plain_turn)
    );
    println!(
        "gate cost: 3 × 256 rules against a 4 KiB compound command: {:.1} µs per call",
        bench_gate()
    );
    let (rss, bytes) = bench_memory(&mock, &dirs);
    println!(
        "memory: 16 pending write requests with 64 KiB args: RSS +{} KiB, get_state frame {} bytes",
        rss, bytes
    );
    println!(
        "spawn to ready (30 runs): nothing configured median {:.2} ms; --approvals untrusted --sandbox workspace-write {:.2} ms",
        dirs.ready_median_ms(&[]),
        dirs.ready_median_ms(&["--approvals", "untrusted", "--sandbox", "workspace-write"])
    );
    drop(mock);
}
