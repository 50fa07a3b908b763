//! One cell seen from zi (docs/code-mode.md#the-worker): the worker process, the
//! scheduler of nested calls, the deadline, interruption and the outcome. Every bound the worker
//! enforces is enforced here again: a well-behaved worker never trips these, so tripping one
//! means it is broken or compromised and it is killed.

mod cell;
mod process;
mod scheduler;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

pub use cell::run_cell;
pub use process::WorkerProgram;

use crate::limits::Limits;
use crate::protocol::CellError;
use crate::trace::Trace;

/// A tool a cell may call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CellTool {
    /// The tool's name, as the cell calls it (`zi.<name>(input)`).
    pub name: String,
    /// Safe to overlap with other parallel calls (up to 4 at once).
    pub parallel: bool,
}

/// What runs one cell.
pub struct CellSpec {
    /// The JavaScript body of the cell (an async function's body).
    pub code: String,
    /// The tools the cell may call.
    pub tools: Vec<CellTool>,
    /// Its time, call, memory and log limits.
    pub limits: Limits,
    /// A worker without the seccomp allowlist is refused (the default; `false` only with the
    /// `engine-only` opt-in).
    pub require_seccomp: bool,
}

/// One `zi.<tool>(input)` of a cell.
#[derive(Debug, Clone)]
pub struct NestedRequest {
    /// 1, 2, … in the order the cell started them.
    pub id: u64,
    /// The tool's name.
    pub name: String,
    /// The one object argument the cell passed.
    pub input: Value,
}

/// How a nested call ended.
#[derive(Debug, Clone, PartialEq)]
pub enum NestedAnswer {
    /// The tool's structured value (or its text); `None` is `undefined`.
    Ok(Option<Value>),
    /// The tool failed: the cell sees a `ZiToolError` with this message.
    Error {
        /// The tool's error text (`e.message`).
        message: String,
        /// The failed result's `details`, when it had any.
        details: Option<Value>,
    },
    /// The call ended because the cell was interrupted.
    Interrupted,
}

/// Runs nested calls: the session's normal tool path in zi, a fake in benchmarks. A call that
/// waits in the approval gate says so on `clock`.
pub trait CallHandler: Send + Sync {
    /// Runs one nested call until it answers or `cancel` fires; `clock` hears when it waits in
    /// the approval gate.
    fn call(
        &self,
        request: NestedRequest,
        cancel: CancellationToken,
        clock: ApprovalClock,
    ) -> BoxFuture<'static, NestedAnswer>;
}

/// The time nested calls spent waiting for an approval decision, which a cell's time limit
/// does not count (a person may take minutes to decide).
#[derive(Clone, Default)]
pub struct ApprovalClock(Arc<Mutex<ClockState>>);

#[derive(Default)]
struct ClockState {
    waiting: usize,
    since: Option<Instant>,
    paused: Duration,
}

impl ApprovalClock {
    /// A call entered (`true`) or left (`false`) the approval gate.
    pub fn gate(&self, entered: bool) {
        let Ok(mut state) = self.0.lock() else { return };
        if entered {
            if state.waiting == 0 {
                state.since = Some(Instant::now());
            }
            state.waiting += 1;
        } else {
            state.waiting = state.waiting.saturating_sub(1);
            if state.waiting == 0
                && let Some(since) = state.since.take()
            {
                state.paused += since.elapsed();
            }
        }
    }

    /// The time paused so far (the current wait included) and whether a call waits now.
    pub fn paused(&self) -> (Duration, bool) {
        let Ok(state) = self.0.lock() else {
            return (Duration::ZERO, false);
        };
        let current = state.since.map_or(Duration::ZERO, |since| since.elapsed());
        (state.paused + current, state.waiting > 0)
    }
}

/// How a cell ended.
#[derive(Debug)]
pub struct CellOutcome {
    /// The return value (`None`: `undefined`), or why there is none.
    pub result: Result<Option<Value>, CellError>,
    /// The calls the cell made, for the result's evidence.
    pub trace: Trace,
    /// `landlock+seccomp`, `seccomp`, `landlock`, `none`; empty when the worker never got ready.
    pub enforcement: String,
    /// The Landlock ABI the worker was confined with (0 without Landlock).
    pub landlock_abi: u32,
}

impl CellOutcome {
    /// The `outcome` of the details: `ok`, `error`, or `interrupted`.
    pub fn outcome(&self) -> &'static str {
        match &self.result {
            Ok(_) => "ok",
            Err(error) if error.kind == "interrupted" => "interrupted",
            Err(_) => "error",
        }
    }
}
