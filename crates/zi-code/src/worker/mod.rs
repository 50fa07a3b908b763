//! `zi __code-worker`: one cell per process (docs/code-mode.md#the-worker).
//!
//! harden → QuickJS runtime and context (selected intrinsics) → confine (zi-sandbox's strictest
//! profile) → `ready` → read `start` → glue and cell → loop { run jobs; settle results } →
//! `done` → `_exit`. The cell is read only after confinement, so untrusted input never meets
//! an unconfined process.

mod cell;
mod io;
mod natives;

use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;
use std::time::{Duration, Instant};

use rquickjs::context::intrinsic;
use rquickjs::{Context, Runtime};
use serde_json::{Value, json};

use crate::protocol::VERSION;
use io::{FrameReader, STDIN, exit, send};

/// The worker's address-space backstop (a Rust-side allocation bug); the engine's own limit is
/// far below it.
const ADDRESS_SPACE: u64 = 1 << 30;
/// How often the interrupt handler looks at stdin for `cancel` or EOF.
const POLL_EVERY: Duration = Duration::from_millis(10);
/// QuickJS checks the C stack pointer; 1 MiB of the 8 MiB main thread is ~1,600 JS frames.
const MAX_STACK: usize = 1 << 20;

/// The intrinsics a cell gets beyond the base objects (Object, Function, Error*, Array, String,
/// Number, Boolean, Symbol, BigInt, Math, Reflect, Iterator, globalThis, parseInt, …). Not
/// included: TypedArrays (Atomics, SharedArrayBuffer), WeakRef/FinalizationRegistry,
/// DOMException. QuickJS-ng has no I/O of its own: std, os, timers and print live in
/// quickjs-libc, which rquickjs does not compile.
type Intrinsics = (
    intrinsic::Date,
    intrinsic::Eval, // evaluating scripts at all needs it (it also gives eval/Function)
    intrinsic::RegExpCompiler,
    intrinsic::RegExp,
    intrinsic::Json,
    intrinsic::Proxy,
    intrinsic::MapSet,
    intrinsic::Promise,
    intrinsic::Performance,
);

/// Why the cell must stop, whatever JavaScript does next.
#[derive(Debug, Clone)]
enum Stop {
    Timeout,
    Cancelled,
    CallLimit(u64),
    Protocol(String),
}

/// What the natives, the interrupt handler and the loop share (one thread).
struct Shared {
    reader: FrameReader,
    inbox: VecDeque<Value>,
    stop: Option<Stop>,
    deadline: Instant,
    last_poll: Instant,
    next_id: u64,
    max_calls: u64,
    outstanding: u64,
    log_bytes: usize,
    max_log: usize,
    log_cut: bool,
}

impl Shared {
    /// Moves complete frames from the reader into the inbox; notes cancel, EOF and junk.
    fn pump(&mut self) {
        if self.reader.eof && self.stop.is_none() {
            self.stop = Some(Stop::Cancelled);
        }
        while let Some(frame) = self.reader.next_frame() {
            match frame {
                Ok(f) if f["t"] == "cancel" => self.stop = Some(Stop::Cancelled),
                Ok(f) if f["t"] == "result" => {
                    // The host gives back the time a nested call spent waiting for a person.
                    if let Some(left) = f["deadlineMs"].as_u64() {
                        self.deadline = Instant::now() + Duration::from_millis(left);
                    }
                    self.inbox.push_back(f);
                }
                Ok(f) => {
                    self.stop = Some(Stop::Protocol(format!("unexpected frame {}", f["t"])));
                }
                Err(e) => self.stop = Some(Stop::Protocol(e.to_string())),
            }
        }
    }
}

/// The limits a `start` frame sets (each bounded by the defaults, which only a lower setting
/// changes).
struct Limits {
    timeout: Duration,
    max_calls: u64,
    memory: usize,
    log_bytes: usize,
}

impl Limits {
    fn from_start(limits: &Value) -> Limits {
        let number = |key: &str, default: u64| limits[key].as_u64().unwrap_or(default).min(default);
        Limits {
            timeout: Duration::from_millis(number("timeoutMs", crate::limits::TIMEOUT_MS)),
            max_calls: number("maxCalls", crate::limits::MAX_CALLS),
            memory: (number("memoryMiB", crate::limits::MEMORY_MIB) as usize) << 20,
            log_bytes: number("logBytes", crate::limits::LOG_BYTES as u64) as usize,
        }
    }
}

/// The worker's whole life. Called by `zi __code-worker` before anything else in the process
/// (no tracing, no runtime, no thread).
pub fn worker_main() -> ! {
    zi_sandbox::harden_code_worker(ADDRESS_SPACE);
    let Ok(runtime) = Runtime::new() else {
        send(&json!({"t": "ready", "v": VERSION, "ok": false, "problem": "no JavaScript runtime"}));
        exit(2);
    };
    runtime.set_memory_limit((crate::limits::MEMORY_MIB as usize) << 20);
    runtime.set_max_stack_size(MAX_STACK);
    let Ok(context) = Context::custom::<Intrinsics>(&runtime) else {
        send(&json!({"t": "ready", "v": VERSION, "ok": false, "problem": "no JavaScript context"}));
        exit(2);
    };
    // The C library reads the time zone file on first use of local time: do it now, while
    // files can still be opened (after confinement an `openat` kills the worker).
    context.with(|ctx| {
        let _: rquickjs::Result<String> = ctx.eval("new Date(0).toString()");
    });
    let enforcement = match zi_sandbox::confine_code_worker() {
        Ok(enforcement) => enforcement,
        Err(problem) => {
            send(&json!({"t": "ready", "v": VERSION, "ok": false, "problem": problem.to_string()}));
            exit(2);
        }
    };
    send(&json!({"t": "ready", "v": VERSION, "ok": true,
                 "enforcement": enforcement.name(), "landlockAbi": enforcement.landlock_abi}));

    let mut reader = FrameReader::new(STDIN);
    let start = match reader.wait_frame() {
        Some(Ok(start)) if start["t"] == "start" && start["v"] == VERSION => start,
        // The host went away before starting a cell, or sent something else.
        None => exit(0),
        Some(_) => exit(4),
    };
    let limits = Limits::from_start(&start["limits"]);
    runtime.set_memory_limit(limits.memory);
    let now = Instant::now();
    let shared = Rc::new(RefCell::new(Shared {
        reader,
        inbox: VecDeque::new(),
        stop: None,
        deadline: now + limits.timeout,
        last_poll: now,
        next_id: 1,
        max_calls: limits.max_calls,
        outstanding: 0,
        log_bytes: 0,
        max_log: limits.log_bytes,
        log_cut: false,
    }));
    let handler = shared.clone();
    runtime.set_interrupt_handler(Some(Box::new(move || interrupt(&handler))));
    let code = start["code"].as_str().unwrap_or_default();
    let tools: Vec<String> = start["tools"]
        .as_array()
        .map(|names| {
            names
                .iter()
                .filter_map(|t| t.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    let done = context.with(|ctx| cell::run(&ctx, &shared, code, tools));
    send(&done);
    exit(0)
}

/// Called by QuickJS every ~10,000 bytecodes and inside regular-expression matching; `true`
/// raises an uncatchable `InternalError: interrupted`.
fn interrupt(state: &Rc<RefCell<Shared>>) -> bool {
    let Ok(mut shared) = state.try_borrow_mut() else {
        return false;
    };
    if shared.stop.is_some() {
        return true;
    }
    let now = Instant::now(); // the vDSO: no system call
    if now >= shared.deadline {
        shared.stop = Some(Stop::Timeout);
        return true;
    }
    if now.duration_since(shared.last_poll) >= POLL_EVERY {
        shared.last_poll = now;
        shared.reader.fill(Some(Duration::ZERO));
        shared.pump();
    }
    shared.stop.is_some()
}
