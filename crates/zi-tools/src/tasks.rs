//! Background tasks (docs/tools.md#background-tasks, docs/tools.md#task_output,
//! docs/tools.md#kill_task): at most 8 live tasks per session, `task_output`, `kill_task`, and one
//! operation outcome per finished task.

use std::collections::BTreeMap;
use std::sync::{Arc, LazyLock, Mutex};
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Map, Value, json};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use zi_agent::tool::{KEY_ORDER, parameters_schema};
use zi_agent::{SessionHost, ToolCallContext, ToolOutput, TypedTool};
use zi_os::sync::lock;
use zi_protocol::event::{OperationOutcome, OutcomeResult};

use crate::bash::render;
use crate::shell::{self, Capture, ShellRequest, Termination};

/// Most background tasks running at once.
pub const MAX_LIVE_TASKS: usize = 8;
/// Longest `task_output` wait.
pub const MAX_WAIT: Duration = Duration::from_secs(600);
/// How long session shutdown waits for killed tasks to finish.
const SHUTDOWN_WAIT: Duration = Duration::from_secs(5);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum StopReason {
    Killed,
    Disposed,
}

struct Task {
    capture: Arc<Mutex<Capture>>,
    cancel: CancellationToken,
    stop: Mutex<Option<StopReason>>,
    timeout: Duration,
    /// `Some` once the task has finished.
    done: watch::Sender<Option<Termination>>,
}

impl Task {
    fn finished(&self) -> Option<Termination> {
        self.done.borrow().clone()
    }
}

#[derive(Default)]
struct Registry {
    next_id: u64,
    tasks: BTreeMap<u64, (String, Arc<Task>)>,
    disposed: bool,
}

/// The background tasks of one session, shared by `bash`, `task_output` and `kill_task`.
#[derive(Clone, Default)]
pub struct TaskRegistry {
    inner: Arc<Mutex<Registry>>,
}

impl TaskRegistry {
    /// An empty registry.
    pub fn new() -> Self {
        TaskRegistry::default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Registry> {
        lock(&self.inner)
    }

    fn find(&self, id: &str) -> Option<Arc<Task>> {
        self.lock()
            .tasks
            .values()
            .find(|(task_id, _)| task_id == id)
            .map(|(_, task)| task.clone())
    }

    /// Starts a background task; returns its id (`task-N`).
    pub(crate) fn start(
        &self,
        request: ShellRequest,
        host: SessionHost,
    ) -> Result<String, ToolOutput> {
        let (id, task) = {
            let mut registry = self.lock();
            if registry.disposed {
                return Err(ToolOutput::failure(
                    "unavailable",
                    "The session is shutting down",
                ));
            }
            let live = registry
                .tasks
                .values()
                .filter(|(_, t)| t.finished().is_none())
                .count();
            if live >= MAX_LIVE_TASKS {
                return Err(ToolOutput::failure(
                    "too_many_tasks",
                    format!(
                        "At most {MAX_LIVE_TASKS} background tasks can run at once. Wait for one with task_output or stop one with kill_task."
                    ),
                ));
            }
            registry.next_id += 1;
            let id = format!("task-{}", registry.next_id);
            let (done, _) = watch::channel(None);
            let task = Arc::new(Task {
                capture: Arc::new(Mutex::new(Capture::default())),
                cancel: CancellationToken::new(),
                stop: Mutex::new(None),
                timeout: request.timeout,
                done,
            });
            let number = registry.next_id;
            registry.tasks.insert(number, (id.clone(), task.clone()));
            (id, task)
        };
        host.shell_task_changed(&id);
        let task_id = id.clone();
        tokio::spawn(async move {
            let started = Instant::now();
            let termination =
                shell::run(request, task.capture.clone(), task.cancel.clone(), None).await;
            let stop = *lock(&task.stop);
            let output_bytes = lock(&task.capture).total_bytes();
            let outcome = outcome_of(
                &task_id,
                &termination,
                stop,
                output_bytes,
                started.elapsed(),
            );
            // The outcome is journaled before the task counts as done, so a shutdown that waits
            // for its tasks never disposes the session under an outcome still being written.
            if let Err(error) = host.append_outcome(outcome) {
                tracing::warn!("background task {task_id}: outcome not recorded: {error}");
            }
            host.shell_task_changed(&task_id);
            task.done.send_replace(Some(termination));
        });
        Ok(id)
    }

    /// Kills every live task (cancellation code `disposed`) and waits for their outcomes.
    pub async fn shutdown(&self) {
        let tasks: Vec<Arc<Task>> = {
            let mut registry = self.lock();
            registry.disposed = true;
            registry.tasks.values().map(|(_, t)| t.clone()).collect()
        };
        let mut waits = Vec::new();
        for task in tasks {
            if task.finished().is_some() {
                continue;
            }
            lock(&task.stop).get_or_insert(StopReason::Disposed);
            task.cancel.cancel();
            let mut done = task.done.subscribe();
            waits.push(async move {
                let _ = done.wait_for(Option::is_some).await;
            });
        }
        let _ = tokio::time::timeout(SHUTDOWN_WAIT, futures::future::join_all(waits)).await;
    }
}

/// The operation outcome of a finished task (docs/rpc.md#operation-outcomes). Evidence never
/// contains the command or its output.
fn outcome_of(
    task_id: &str,
    termination: &Termination,
    stop: Option<StopReason>,
    output_bytes: u64,
    elapsed: Duration,
) -> OperationOutcome {
    let mut evidence = Map::new();
    evidence.insert("taskId".into(), json!(task_id));
    evidence.insert("origin".into(), json!("requested"));
    evidence.insert("outputBytes".into(), json!(output_bytes));
    let result = match termination {
        Termination::Exited(0) => {
            evidence.insert("exitCode".into(), json!(0));
            OutcomeResult::Succeeded
        }
        Termination::Exited(code) => {
            evidence.insert("errorCode".into(), json!("exit_nonzero"));
            evidence.insert("exitCode".into(), json!(code));
            OutcomeResult::Failed
        }
        Termination::Signaled(signal) => {
            evidence.insert("errorCode".into(), json!("signaled"));
            evidence.insert("signal".into(), json!(zi_os::process::signal_name(*signal)));
            OutcomeResult::Failed
        }
        Termination::TimedOut => {
            evidence.insert("errorCode".into(), json!("timed_out"));
            OutcomeResult::Failed
        }
        Termination::OutputLimit => {
            evidence.insert("errorCode".into(), json!("output_limit"));
            OutcomeResult::Failed
        }
        Termination::SpawnFailed(_) | Termination::SandboxFailed(_) => {
            evidence.insert("errorCode".into(), json!("execution_failed"));
            OutcomeResult::Failed
        }
        Termination::Cancelled => {
            let code = match stop {
                Some(StopReason::Disposed) => "disposed",
                _ => "killed",
            };
            evidence.insert("cancellationCode".into(), json!(code));
            OutcomeResult::Cancelled
        }
    };
    OperationOutcome {
        operation_id: format!("shell/background_task/{task_id}"),
        capability: "shell".into(),
        operation: "background_task".into(),
        result,
        duration_ms: u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX),
        evidence: Value::Object(evidence),
    }
}

fn unknown_task(id: &str) -> ToolOutput {
    ToolOutput::failure("not_found", format!("No background task with ID {id}"))
}

static TASK_OUTPUT_PARAMETERS: LazyLock<Value> =
    LazyLock::new(|| parameters_schema::<TaskOutputArgs>(KEY_ORDER));

/// The arguments of `task_output`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct TaskOutputArgs {
    /// The background task ID (task-N)
    pub task_id: String,
    /// Seconds to wait for the task to finish; 0 (the default) polls
    #[schemars(range(min = 0))]
    pub timeout: Option<f64>,
}

/// The `task_output` tool (docs/tools.md#task_output).
pub struct TaskOutputTool {
    tasks: TaskRegistry,
}

impl TaskOutputTool {
    /// `task_output` over the session's `tasks`.
    pub fn new(tasks: TaskRegistry) -> Self {
        TaskOutputTool { tasks }
    }
}

impl TypedTool for TaskOutputTool {
    type Args = TaskOutputArgs;

    fn name(&self) -> &str {
        "task_output"
    }

    fn description(&self) -> &str {
        "Read a background task's status and the last 2000 lines / 50KB of its output, optionally waiting up to timeout seconds for it to finish."
    }

    fn parameters(&self) -> &Value {
        &TASK_OUTPUT_PARAMETERS
    }

    fn execute(
        &self,
        args: TaskOutputArgs,
        call: ToolCallContext,
    ) -> BoxFuture<'static, ToolOutput> {
        let tasks = self.tasks.clone();
        Box::pin(async move {
            let id = args.task_id;
            let Some(task) = tasks.find(&id) else {
                return unknown_task(&id);
            };
            let wait = args
                .timeout
                .filter(|t| t.is_finite() && *t > 0.0)
                .map(|t| Duration::from_secs_f64(t.min(MAX_WAIT.as_secs_f64())));
            if let Some(wait) = wait {
                let mut done = task.done.subscribe();
                tokio::select! {
                    _ = tokio::time::timeout(wait, done.wait_for(Option::is_some)) => {}
                    () = call.cancel.cancelled() => {}
                }
            }
            let view = lock(&task.capture).view();
            match task.finished() {
                None => {
                    let mut text = if view.text.is_empty() {
                        "(no output yet)".to_string()
                    } else {
                        view.text.clone()
                    };
                    text.push_str(&format!("\n\n[Task {id} is still running]"));
                    ToolOutput::success(
                        text,
                        json!({"taskId": id, "status": "running", "truncated": view.truncated, "outputBytes": view.total_bytes}),
                    )
                }
                Some(termination) => {
                    let stop = *lock(&task.stop);
                    let cancelled = match stop {
                        Some(StopReason::Disposed) => "disposed",
                        _ => "killed",
                    };
                    let (mut text, task_details, _) =
                        render(&view, &termination, task.timeout, cancelled);
                    text.push_str(&format!("\n\n[Task {id} finished]"));
                    let mut details = json!({"taskId": id});
                    if let (Some(target), Value::Object(source)) =
                        (details.as_object_mut(), task_details)
                    {
                        for (key, value) in source {
                            if key != "outcome" {
                                target.insert(key, value);
                            }
                        }
                    }
                    ToolOutput::success(text, details)
                }
            }
        })
    }
}

static KILL_TASK_PARAMETERS: LazyLock<Value> =
    LazyLock::new(|| parameters_schema::<KillTaskArgs>(KEY_ORDER));

/// The arguments of `kill_task`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct KillTaskArgs {
    /// The background task ID (task-N)
    pub task_id: String,
}

/// The `kill_task` tool (docs/tools.md#kill_task).
pub struct KillTaskTool {
    tasks: TaskRegistry,
}

impl KillTaskTool {
    /// `kill_task` over the session's `tasks`.
    pub fn new(tasks: TaskRegistry) -> Self {
        KillTaskTool { tasks }
    }
}

impl TypedTool for KillTaskTool {
    type Args = KillTaskArgs;

    fn name(&self) -> &str {
        "kill_task"
    }

    fn description(&self) -> &str {
        "Stop a background task and its whole process group."
    }

    fn parameters(&self) -> &Value {
        &KILL_TASK_PARAMETERS
    }

    fn execute(
        &self,
        args: KillTaskArgs,
        _call: ToolCallContext,
    ) -> BoxFuture<'static, ToolOutput> {
        let tasks = self.tasks.clone();
        Box::pin(async move {
            let id = args.task_id;
            let Some(task) = tasks.find(&id) else {
                return unknown_task(&id);
            };
            if task.finished().is_some() {
                return ToolOutput::success(
                    format!("Task {id} already completed."),
                    json!({"taskId": id, "result": "already_completed"}),
                );
            }
            let first = {
                let mut stop = lock(&task.stop);
                let first = stop.is_none();
                stop.get_or_insert(StopReason::Killed);
                first
            };
            if !first || task.cancel.is_cancelled() {
                return ToolOutput::success(
                    format!("Task {id} is already stopping."),
                    json!({"taskId": id, "result": "settling"}),
                );
            }
            task.cancel.cancel();
            ToolOutput::success(
                format!("Task {id} is stopping."),
                json!({"taskId": id, "result": "stopping"}),
            )
        })
    }
}
