//! The host loop of one cell: ready → start → frames and nested calls → done (or interrupt,
//! backstop, crash) → reap.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt as _;
use futures::future::BoxFuture;
use futures::stream::FuturesUnordered;
use serde_json::{Value, json};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::process::{Incoming, Worker, WorkerProgram};
use super::scheduler::Scheduler;
use super::{ApprovalClock, CallHandler, CellOutcome, CellSpec, NestedAnswer, NestedRequest};
use crate::protocol::{CellError, MAX_DEPTH, MAX_VALUE_BYTES, VERSION, WorkerFrame, json_depth};
use crate::trace::{CallState, Trace};

/// How long a worker may take to confine itself and say `ready` (exec of a large binary on a
/// loaded machine included).
const READY_TIMEOUT: Duration = Duration::from_secs(10);
/// The host's own stop, after the worker's deadline: one long builtin (a huge
/// `JSON.stringify`, a garbage collection near the memory limit) does not reach the engine's
/// interrupt handler.
const BACKSTOP: Duration = Duration::from_secs(1);
/// How long a worker that said `done` may take to exit.
const EXIT_GRACE: Duration = Duration::from_millis(200);
/// How long nested calls may take to end once the cell is over (they are cancelled).
const NESTED_GRACE: Duration = Duration::from_secs(2);
/// How often the host looks at its deadline again (it moves while a call awaits approval).
const RECHECK: Duration = Duration::from_millis(100);

type Running = FuturesUnordered<BoxFuture<'static, (u64, bool, NestedAnswer)>>;

/// Everything the loop changes.
struct Cell<'a> {
    spec: &'a CellSpec,
    handler: Arc<dyn CallHandler>,
    worker: Worker,
    trace: Trace,
    scheduler: Scheduler,
    pending: Vec<(u64, String, Value)>,
    running: Running,
    nested: CancellationToken,
    next_id: u64,
    log_bytes: usize,
    clock: ApprovalClock,
    started: Instant,
}

/// Runs one cell to its end. `on_trace` sees the trace after every change (calls, logs).
pub async fn run_cell(
    program: &WorkerProgram,
    spec: CellSpec,
    handler: Arc<dyn CallHandler>,
    cancel: &CancellationToken,
    on_trace: &(dyn Fn(&Trace) + Send + Sync),
) -> CellOutcome {
    let failed = |kind: &str, message: String| CellOutcome {
        result: Err(CellError::new(kind, message)),
        trace: Trace::default(),
        enforcement: String::new(),
        landlock_abi: 0,
    };
    let mut worker = match Worker::spawn(program) {
        Ok(worker) => worker,
        Err(error) => return failed("internal", format!("the worker could not start: {error}")),
    };
    let (enforcement, landlock_abi) = match ready(&mut worker, spec.require_seccomp, cancel).await {
        Ok(ready) => ready,
        Err(error) => {
            worker.kill();
            worker.reap(EXIT_GRACE).await;
            return CellOutcome {
                result: Err(error),
                trace: Trace::default(),
                enforcement: String::new(),
                landlock_abi: 0,
            };
        }
    };
    let tools: Vec<&str> = spec.tools.iter().map(|t| t.name.as_str()).collect();
    let limits = json!({"timeoutMs": spec.limits.timeout_ms, "maxCalls": spec.limits.max_calls,
                        "memoryMiB": spec.limits.memory_mib, "logBytes": spec.limits.log_bytes});
    let start = json!({"t": "start", "v": VERSION, "code": spec.code, "tools": tools,
                       "limits": limits});
    worker.send(start.to_string().as_bytes());
    let mut cell = Cell {
        spec: &spec,
        handler,
        worker,
        trace: Trace::default(),
        scheduler: Scheduler::default(),
        pending: Vec::new(),
        running: FuturesUnordered::new(),
        nested: cancel.child_token(),
        next_id: 1,
        log_bytes: 0,
        clock: ApprovalClock::default(),
        started: Instant::now(),
    };
    let result = cell.drive(cancel, on_trace).await;
    cell.finish(&result).await;
    on_trace(&cell.trace);
    CellOutcome {
        result,
        trace: cell.trace,
        enforcement,
        landlock_abi,
    }
}

/// Waits for `ready` and checks the confinement the worker reports.
async fn ready(
    worker: &mut Worker,
    require_seccomp: bool,
    cancel: &CancellationToken,
) -> Result<(String, u32), CellError> {
    let frame = tokio::select! {
        frame = tokio::time::timeout(READY_TIMEOUT, worker.frames.recv()) => frame,
        () = cancel.cancelled() => {
            return Err(CellError::new("interrupted", "the cell was interrupted"));
        }
    };
    match frame {
        Ok(Some(Ok(WorkerFrame::Ready {
            enforcement,
            landlock_abi,
        }))) => {
            if require_seccomp && !enforcement.contains("seccomp") {
                return Err(CellError::new(
                    "sandbox",
                    format!(
                        "the worker could not be confined (enforcement {enforcement}); the cell was not run"
                    ),
                ));
            }
            Ok((enforcement, landlock_abi))
        }
        Ok(Some(Ok(WorkerFrame::NotReady { problem }))) => Err(CellError::new(
            "sandbox",
            format!("the worker could not confine itself ({problem}); the cell was not run"),
        )),
        Ok(Some(Ok(other))) => Err(CellError::new(
            "protocol",
            format!("the worker sent {other:?} before ready"),
        )),
        Ok(Some(Err(problem))) => Err(CellError::new("protocol", problem.to_string())),
        Ok(None) => {
            let ended = worker.reap(EXIT_GRACE).await;
            Err(CellError::new(
                "crashed",
                format!(
                    "the worker ended before it was ready ({ended}) {}",
                    worker.stderr()
                ),
            ))
        }
        Err(_) => Err(CellError::new(
            "crashed",
            "the worker did not get ready in time",
        )),
    }
}

impl Cell<'_> {
    // Long on purpose: the one select loop over the worker's frames, the finishing nested
    // calls, the interrupt and the backstop; each arm is short and they share the cell's state.
    async fn drive(
        &mut self,
        cancel: &CancellationToken,
        on_trace: &(dyn Fn(&Trace) + Send + Sync),
    ) -> Result<Option<Value>, CellError> {
        loop {
            let (deadline, waiting) = self.deadline();
            let backstop = deadline + BACKSTOP;
            tokio::select! {
                () = cancel.cancelled() => {
                    self.worker.kill();
                    return Err(CellError::new("interrupted", "the cell was interrupted"));
                }
                () = tokio::time::sleep_until(backstop.min(Instant::now() + RECHECK)) => {
                    if waiting || Instant::now() < self.deadline().0 + BACKSTOP {
                        continue;
                    }
                    self.worker.kill();
                    return Err(CellError::new(
                        "timeout",
                        format!("the cell ran past its time limit ({} ms) and was stopped", self.spec.limits.timeout_ms),
                    ));
                }
                Some((id, parallel, answer)) = self.running.next(), if !self.running.is_empty() => {
                    self.answered(id, parallel, answer);
                    self.start_ready();
                    on_trace(&self.trace);
                }
                incoming = self.worker.frames.recv() => {
                    match self.frame(incoming).await {
                        Ok(Some(done)) => return done,
                        Ok(None) => on_trace(&self.trace),
                        Err(error) => {
                            self.worker.kill();
                            return Err(error);
                        }
                    }
                }
            }
        }
    }

    /// One frame from the worker: `Ok(Some(end))` when the cell is over.
    async fn frame(
        &mut self,
        incoming: Option<Incoming>,
    ) -> Result<Option<Result<Option<Value>, CellError>>, CellError> {
        let frame = match incoming {
            None => return Err(self.crashed().await),
            Some(Err(problem)) => return Err(CellError::new("protocol", problem.to_string())),
            Some(Ok(frame)) => frame,
        };
        match frame {
            WorkerFrame::Call { id, name, input } => {
                self.call(id, name, input.get())?;
                self.start_ready();
                Ok(None)
            }
            WorkerFrame::Log { text, truncated } => {
                // The host keeps its own budget: a worker past it is ignored, not believed.
                if self.log_bytes <= self.spec.limits.log_bytes {
                    self.log_bytes += text.len() + 1;
                    self.trace.log(text, truncated);
                }
                Ok(None)
            }
            WorkerFrame::Done(result) => {
                Ok(Some(result.map(|value| {
                    value.and_then(|raw| serde_json::from_str(raw.get()).ok())
                })))
            }
            other => Err(CellError::new(
                "protocol",
                format!("unexpected frame from the worker: {other:?}"),
            )),
        }
    }

    /// When the cell's time is up: its start plus the limit plus the time nested calls waited
    /// for approval; and whether one waits now.
    fn deadline(&self) -> (Instant, bool) {
        let (paused, waiting) = self.clock.paused();
        let limit = Duration::from_millis(self.spec.limits.timeout_ms);
        (self.started + limit + paused, waiting)
    }

    /// A `call` frame, checked again: ids in order, the call limit, the input's shape.
    fn call(&mut self, id: u64, name: String, input: &str) -> Result<(), CellError> {
        if id != self.next_id || id > self.spec.limits.max_calls {
            return Err(CellError::new(
                "protocol",
                format!(
                    "the worker sent call {id} (expected {} of at most {})",
                    self.next_id, self.spec.limits.max_calls
                ),
            ));
        }
        self.next_id += 1;
        if input.len() > crate::protocol::MAX_INPUT_BYTES || json_depth(input) > MAX_DEPTH {
            return Err(CellError::new("protocol", "a call input over the bounds"));
        }
        let input: Value = serde_json::from_str(input).map_err(|e| {
            CellError::new("protocol", format!("a call input that is not JSON: {e}"))
        })?;
        self.trace.queue_call(id, &name, &input);
        match self.spec.tools.iter().find(|t| t.name == name) {
            Some(tool) => {
                self.scheduler.push(id, tool.parallel);
                self.pending.push((id, name, input));
            }
            None => {
                // Not a tool of this cell: an error result, as for the model.
                self.trace.end_call(id, CallState::Error);
                self.send_answer(
                    id,
                    &name,
                    NestedAnswer::Error {
                        message: format!("zi.{name} is not an active tool"),
                        details: None,
                    },
                );
            }
        }
        Ok(())
    }

    /// Starts every queued call the scheduler allows now.
    fn start_ready(&mut self) {
        while let Some(id) = self.scheduler.next() {
            let Some(index) = self.pending.iter().position(|(pending, ..)| *pending == id) else {
                continue;
            };
            let (id, name, input) = self.pending.swap_remove(index);
            let parallel = self.spec.tools.iter().any(|t| t.name == name && t.parallel);
            self.trace.start_call(id);
            let future = self.handler.call(
                NestedRequest { id, name, input },
                self.nested.child_token(),
                self.clock.clone(),
            );
            self.running
                .push(Box::pin(async move { (id, parallel, future.await) }));
        }
    }

    fn answered(&mut self, id: u64, parallel: bool, answer: NestedAnswer) {
        self.scheduler.finished(parallel);
        let state = match &answer {
            NestedAnswer::Ok(_) => CallState::Ok,
            NestedAnswer::Error { .. } => CallState::Error,
            NestedAnswer::Interrupted => CallState::Interrupted,
        };
        self.trace.end_call(id, state);
        let name = self
            .trace
            .calls
            .iter()
            .find(|c| c.id == id)
            .map(|c| c.name.clone())
            .unwrap_or_default();
        self.send_answer(id, &name, answer);
    }

    fn send_answer(&self, id: u64, name: &str, answer: NestedAnswer) {
        let mut frame = match answer {
            NestedAnswer::Ok(value) => {
                let text = value.as_ref().map(Value::to_string);
                match text {
                    Some(text) if text.len() > MAX_VALUE_BYTES || json_depth(&text) > MAX_DEPTH => {
                        json!({"t": "result", "id": id, "ok": false, "error": {"message": format!(
                            "the value of zi.{name} is too large or too deep to cross to the cell ({} bytes of JSON; at most {MAX_VALUE_BYTES}, {MAX_DEPTH} levels)", text.len())}})
                    }
                    _ => {
                        let mut frame = json!({"t": "result", "id": id, "ok": true});
                        if let Some(value) = value {
                            frame["value"] = value;
                        }
                        frame
                    }
                }
            }
            NestedAnswer::Error { message, details } => {
                let mut error = json!({"message": message});
                if let Some(details) = details {
                    error["details"] = details;
                }
                json!({"t": "result", "id": id, "ok": false, "error": error})
            }
            NestedAnswer::Interrupted => json!({"t": "result", "id": id, "ok": false,
                "error": {"message": format!("zi.{name} was interrupted")}}),
        };
        // The worker re-arms its own deadline: the time approvals took is given back.
        let left = self.deadline().0.saturating_duration_since(Instant::now());
        frame["deadlineMs"] = json!(left.as_millis() as u64);
        self.worker.send(frame.to_string().as_bytes());
    }

    /// The worker's output ended without `done`.
    async fn crashed(&mut self) -> CellError {
        let ended = self.worker.reap(EXIT_GRACE).await;
        let stderr = self.worker.stderr();
        let detail = if stderr.is_empty() {
            String::new()
        } else {
            format!(": {stderr}")
        };
        if ended == "SIGSYS" {
            CellError::new(
                "sandbox",
                format!(
                    "the worker was stopped by its sandbox (SIGSYS: a forbidden system call){detail}"
                ),
            )
        } else {
            CellError::new(
                "crashed",
                format!("the worker ended without an answer ({ended}){detail}"),
            )
        }
    }

    /// The cell is over: nested calls still queued never start, running ones are cancelled
    /// (and waited for briefly, so their state is known), the worker is reaped.
    async fn finish(&mut self, result: &Result<Option<Value>, CellError>) {
        let never_started = self.scheduler.drain();
        for id in never_started {
            self.trace.end_call(id, CallState::Interrupted);
        }
        self.pending.clear();
        self.nested.cancel();
        let deadline = Instant::now() + NESTED_GRACE;
        while !self.running.is_empty() {
            match tokio::time::timeout_at(deadline, self.running.next()).await {
                Ok(Some((id, _, answer))) => {
                    let state = match answer {
                        NestedAnswer::Ok(_) => CallState::Ok,
                        NestedAnswer::Error { .. } if result.is_ok() => CallState::Error,
                        _ => CallState::Interrupted,
                    };
                    self.trace.end_call(id, state);
                }
                _ => break,
            }
        }
        self.trace.end_unfinished(CallState::Interrupted);
        self.worker.reap(EXIT_GRACE).await;
    }
}
