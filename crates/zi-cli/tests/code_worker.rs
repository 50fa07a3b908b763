//! The Code Mode worker (`zi __code-worker`, docs/code-mode.md#the-worker) driven through
//! zi-code's host loop with a small tool table instead of a session: the engine, the glue,
//! the protocol, the worker's own bounds and its sandbox, with the real binary.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use zi_code::host::{
    ApprovalClock, CallHandler, CellOutcome, CellSpec, CellTool, NestedAnswer, NestedRequest,
    WorkerProgram, run_cell,
};
use zi_code::limits::Limits;

const ZI: &str = env!("CARGO_BIN_EXE_zi");

/// `read` answers from a fixed table, `slow` sleeps, `echo` returns its input; `bash` is
/// sequential.
struct Table;

impl CallHandler for Table {
    fn call(
        &self,
        request: NestedRequest,
        cancel: CancellationToken,
        _: ApprovalClock,
    ) -> BoxFuture<'static, NestedAnswer> {
        Box::pin(async move {
            match request.name.as_str() {
                "read" => match request.input["path"].as_str() {
                    Some("a.txt") => NestedAnswer::Ok(Some(json!("alpha"))),
                    Some("b.txt") => NestedAnswer::Ok(Some(json!("beta"))),
                    other => NestedAnswer::Error {
                        message: format!("{}: no such file", other.unwrap_or("?")),
                        details: Some(json!({"code": "not_found"})),
                    },
                },
                "slow" | "bash" => {
                    let ms = request.input["ms"].as_u64().unwrap_or(100);
                    tokio::select! {
                        () = tokio::time::sleep(Duration::from_millis(ms)) => NestedAnswer::Ok(Some(json!({"slept": ms}))),
                        () = cancel.cancelled() => NestedAnswer::Interrupted,
                    }
                }
                _ => NestedAnswer::Ok(Some(request.input)),
            }
        })
    }
}

fn tools() -> Vec<CellTool> {
    ["read", "slow", "echo", "then"]
        .iter()
        .map(|name| CellTool {
            name: name.to_string(),
            parallel: true,
        })
        .chain([CellTool {
            name: "bash".into(),
            parallel: false,
        }])
        .collect()
}

async fn cell_with(code: &str, limits: Limits, cancel: &CancellationToken) -> CellOutcome {
    let spec = CellSpec {
        code: code.to_string(),
        tools: tools(),
        limits,
        require_seccomp: true,
    };
    let program = WorkerProgram {
        program: PathBuf::from(ZI),
    };
    run_cell(&program, spec, Arc::new(Table), cancel, &|_| {}).await
}

async fn cell(code: &str) -> CellOutcome {
    cell_with(code, Limits::default(), &CancellationToken::new()).await
}

fn value(outcome: &CellOutcome) -> Value {
    match &outcome.result {
        Ok(value) => value.clone().unwrap_or(Value::Null),
        Err(error) => panic!("the cell failed: {error:?} (trace {:?})", outcome.trace),
    }
}

fn kind(outcome: &CellOutcome) -> String {
    match &outcome.result {
        Ok(value) => panic!("the cell succeeded: {value:?}"),
        Err(error) => error.kind.clone(),
    }
}

#[tokio::test]
async fn a_cell_returns_values_logs_and_is_confined() {
    let out = cell(r#"const a = await zi.read({path: "a.txt"}); console.log("len", a.length, {a}); return a.slice(0, 3)"#).await;
    assert_eq!(value(&out), json!("alp"));
    assert_eq!(out.trace.logs, ["len 5 {\"a\":\"alpha\"}"]);
    let expected = if out.landlock_abi > 0 {
        "landlock+seccomp"
    } else {
        "seccomp"
    };
    assert_eq!(out.enforcement, expected);
    assert_eq!(out.trace.calls.len(), 1);
    assert_eq!(out.trace.calls[0].arguments, json!({"path": "a.txt"}));
}

#[tokio::test]
async fn tool_errors_are_zi_tool_errors_a_cell_can_catch() {
    let out = cell(r#"try { await zi.read({path: "missing"}); } catch (e) {
        return {name: e.name, toolName: e.toolName, message: e.message, zi: e instanceof ZiToolError,
                error: e instanceof Error, code: e.details && e.details.code, line: e.stack.includes("cell.js:1")}; }"#).await;
    assert_eq!(
        value(&out),
        json!({"name": "ZiToolError", "toolName": "read", "message": "missing: no such file",
        "zi": true, "error": true, "code": "not_found", "line": true})
    );
    let uncaught = cell(r#"return await zi["read"]({path: "nope"})"#).await;
    let Err(error) = &uncaught.result else {
        panic!()
    };
    assert_eq!(
        (
            error.kind.as_str(),
            error.name.as_deref(),
            error.tool_name.as_deref()
        ),
        ("exception", Some("ZiToolError"), Some("read"))
    );
}

#[tokio::test]
async fn nothing_ambient_is_reachable() {
    let out = cell(r#"let imported; try { await import("fs"); imported = "loaded"; } catch (e) { imported = e.name; }
        return {require: typeof require, process: typeof process, fetch: typeof fetch, setTimeout: typeof setTimeout,
                std: typeof std, os: typeof os, WebAssembly: typeof WebAssembly, SharedArrayBuffer: typeof SharedArrayBuffer,
                imported, date: typeof new Date().toString(), keys: Object.keys(zi).join(","), frozen: Object.isFrozen(zi),
                awaitZi: (await zi) === zi}"#).await;
    let v = value(&out);
    for key in [
        "require",
        "process",
        "fetch",
        "setTimeout",
        "std",
        "os",
        "WebAssembly",
        "SharedArrayBuffer",
    ] {
        assert_eq!(v[key], "undefined", "{key}: {v}");
    }
    assert_eq!(v["imported"], "ReferenceError", "{v}");
    assert_eq!(v["date"], "string");
    assert_eq!(v["keys"], "read,slow,echo,bash", "`then` is reserved: {v}");
    assert_eq!(
        (v["frozen"].clone(), v["awaitZi"].clone()),
        (json!(true), json!(true))
    );
    assert_eq!(
        kind(&cell("import fs from 'fs'; return 1").await),
        "exception"
    );
}

#[tokio::test]
async fn parallel_calls_overlap_and_sequential_ones_do_not() {
    let out = cell(
        r#"const t = performance.now();
        await Promise.all([zi.slow({ms: 300}), zi.slow({ms: 300}), zi.read({path: "b.txt"})]);
        const parallel = performance.now() - t;
        const u = performance.now();
        await Promise.all([zi.bash({ms: 200}), zi.bash({ms: 200})]);
        return {parallel, sequential: performance.now() - u}"#,
    )
    .await;
    let v = value(&out);
    assert!(v["parallel"].as_f64().unwrap() < 580.0, "{v}");
    assert!(v["sequential"].as_f64().unwrap() >= 400.0, "{v}");
}

#[tokio::test]
async fn unawaited_calls_fail_the_cell() {
    let out = cell(r#"zi.slow({ms: 50}); return 1"#).await;
    assert_eq!(kind(&out), "unawaited");
    let fine =
        cell(r#"const p = zi.read({path: "a.txt"}); await zi.slow({ms: 20}); return await p"#)
            .await;
    assert_eq!(value(&fine), json!("alpha"));
    assert_eq!(
        kind(&cell("await new Promise(() => {}); return 1").await),
        "deadlock"
    );
}

#[tokio::test]
async fn limits_stop_the_cell() {
    let calls = cell(
        "for (let i = 0; i < 100; i++) { try { await zi.echo({i}); } catch (e) {} } return 'done'",
    )
    .await;
    assert_eq!(kind(&calls), "call_limit");
    assert_eq!(calls.trace.calls.len(), 64);
    let memory = cell("let a = []; while (true) a.push(new Array(1e6).fill(1));").await;
    assert_eq!(kind(&memory), "memory");
    let stack = cell("function f(n) { return f(n + 1) + 1 } return f(0)").await;
    assert_eq!(kind(&stack), "stack");
    let short = Limits {
        timeout_ms: 300,
        ..Limits::default()
    };
    let spin = cell_with(
        "try { while (true) {} } catch (e) { return 'caught' }",
        short,
        &CancellationToken::new(),
    )
    .await;
    assert_eq!(kind(&spin), "timeout");
    let big = cell("return 'x'.repeat(2 << 20)").await;
    assert_eq!(kind(&big), "result_too_large");
    let deep = cell(
        r#"const o = {}; let p = o; for (let i = 0; i < 100; i++) { p.x = {}; p = p.x; }
        try { await zi.echo(o); return "sent"; } catch (e) { return e.name }"#,
    )
    .await;
    assert_eq!(value(&deep), json!("ZiToolError"));
    let logs = cell_with(
        "for (let i = 0; i < 10000; i++) console.log('line', i); return 1",
        Limits {
            log_bytes: 1024,
            ..Limits::default()
        },
        &CancellationToken::new(),
    )
    .await;
    assert!(logs.trace.logs_truncated);
    let kept: usize = logs.trace.logs.iter().map(|l| l.len() + 1).sum();
    assert!(
        kept <= 1024,
        "{kept} bytes in {} lines; last {:?}",
        logs.trace.logs.len(),
        logs.trace.logs.last()
    );
}

#[tokio::test]
async fn cancelling_kills_the_worker_at_once() {
    let cancel = CancellationToken::new();
    let trigger = cancel.clone();
    let started = Instant::now();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        trigger.cancel();
    });
    let out = cell_with(
        "const p = zi.slow({ms: 60000}); while (true) {}",
        Limits::default(),
        &cancel,
    )
    .await;
    assert_eq!(kind(&out), "interrupted");
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(out.trace.calls[0].state.as_str(), "interrupted");
}
