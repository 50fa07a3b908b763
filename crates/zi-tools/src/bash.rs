//! `bash` (docs/tools.md#bash): one foreground command at a time, or a background task.

use std::sync::{Arc, LazyLock, Mutex};
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use zi_agent::tool::{KEY_ORDER, parameters_schema};
use zi_agent::{ExecutionMode, ToolCallContext, ToolOutput, TypedTool};
use zi_config::approval::{Escape, Subject};
use zi_os::sync::lock;
use zi_protocol::message::ContentBlock;

use crate::ToolEnv;
use crate::sandboxing::SpawnPlan;
use crate::shell::{self, Capture, OutputView, Progress, ShellRequest, Termination};
use crate::tasks::TaskRegistry;

/// Largest `command` accepted (256 KiB).
pub const MAX_COMMAND_BYTES: usize = 256 * 1024;
pub const MAX_DESCRIPTION_CHARS: usize = 160;
/// Default foreground timeout.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);
/// Longest timeout, and the default of background tasks (30 minutes).
pub const MAX_TIMEOUT: Duration = Duration::from_secs(30 * 60);
const PROGRESS_EVERY: Duration = Duration::from_millis(250);

static PARAMETERS: LazyLock<Value> = LazyLock::new(|| parameters_schema::<BashArgs>(KEY_ORDER));

/// The arguments of `bash`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BashArgs {
    /// Shell command to run (bash -lc) in the working directory
    pub command: String,
    /// A few words on what the command does
    #[schemars(length(max = MAX_DESCRIPTION_CHARS))]
    pub description: Option<String>,
    /// Timeout in seconds (default 120; background tasks 1800; at most 1800)
    #[schemars(extend("exclusiveMinimum" = 0))]
    pub timeout: Option<f64>,
    /// Run as a background task and return its task ID at once
    pub background: Option<bool>,
}

/// The `bash` tool (docs/tools.md#bash): foreground commands and background tasks.
pub struct BashTool {
    env: ToolEnv,
    tasks: TaskRegistry,
    foreground: Arc<tokio::sync::Mutex<()>>,
}

impl BashTool {
    /// `bash` in `env`, registering background tasks in `tasks`.
    pub fn new(env: ToolEnv, tasks: TaskRegistry) -> Self {
        BashTool {
            env,
            tasks,
            foreground: Arc::new(tokio::sync::Mutex::new(())),
        }
    }
}

/// The timeout argument, clamped to [`MAX_TIMEOUT`].
fn timeout_arg(timeout: Option<f64>, default: Duration) -> Duration {
    timeout
        .filter(|t| t.is_finite() && *t > 0.0)
        .map_or(default, |t| {
            Duration::from_secs_f64(t.min(MAX_TIMEOUT.as_secs_f64()))
        })
}

/// Text and details of a finished command. `cancelled` names the status of a cancellation
/// (`aborted` for an interrupted foreground command, `killed` / `disposed` for tasks).
pub(crate) fn render(
    view: &OutputView,
    termination: &Termination,
    timeout: Duration,
    cancelled: &str,
) -> (String, Value, bool) {
    let mut text = if view.text.is_empty() {
        "(no output)".to_string()
    } else {
        view.text.clone()
    };
    if let Some(path) = &view.full_output_path {
        text.push_str(&format!(
            "\n\n[Output truncated. Full output: {}]",
            path.display()
        ));
    }
    let (status, notice, exit_code, signal): (&str, Option<String>, Option<i32>, Option<String>) =
        match termination {
            Termination::Exited(0) => ("exited", None, Some(0), None),
            Termination::Exited(code) => (
                "exited",
                Some(format!("Command exited with code {code}")),
                Some(*code),
                None,
            ),
            Termination::Signaled(signal) => {
                let name = zi_os::process::signal_name(*signal);
                (
                    "signaled",
                    Some(format!("Command terminated by {name}")),
                    None,
                    Some(name),
                )
            }
            Termination::TimedOut => (
                "timed_out",
                Some(format!(
                    "Command timed out after {} seconds",
                    fmt_secs(timeout)
                )),
                None,
                None,
            ),
            Termination::Cancelled => (
                cancelled,
                Some(match cancelled {
                    "aborted" => "Command aborted".to_string(),
                    "disposed" => "Command killed: the session ended".to_string(),
                    _ => "Command killed".to_string(),
                }),
                None,
                None,
            ),
            Termination::OutputLimit => (
                "output_limit",
                Some(format!(
                    "Command stopped: output exceeded the {} MiB limit",
                    shell::MAX_SPILL_BYTES / (1024 * 1024)
                )),
                None,
                None,
            ),
            Termination::SpawnFailed(error) => (
                "execution_failed",
                Some(format!("Command could not be started: {error}")),
                None,
                None,
            ),
            Termination::SandboxFailed(error) => (
                "execution_failed",
                Some(format!(
                    "Command could not be started: the sandbox could not be applied ({error})"
                )),
                None,
                None,
            ),
        };
    if let Some(notice) = notice {
        text.push_str("\n\n");
        text.push_str(&notice);
    }
    let failed = !matches!(termination, Termination::Exited(0));
    let details = json!({
        "outcome": zi_agent::Outcome::of(failed).as_str(),
        "status": status,
        "exitCode": exit_code,
        "signal": signal,
        "truncated": view.truncated,
        "fullOutputPath": view.full_output_path.as_ref().map(|p| p.display().to_string()),
        "outputBytes": view.total_bytes,
    });
    (text, details, failed)
}

fn fmt_secs(duration: Duration) -> String {
    let secs = duration.as_secs_f64();
    if secs.fract() == 0.0 {
        format!("{}", secs as u64)
    } else {
        format!("{secs}")
    }
}

/// Runs one foreground command with progress reports and renders its result.
async fn run_foreground(
    request: ShellRequest,
    call: &ToolCallContext,
) -> (Termination, ToolOutput) {
    let capture = Arc::new(Mutex::new(Capture::default()));
    let sink = call.progress.clone();
    let progress = Progress {
        every: PROGRESS_EVERY,
        report: Box::new(move |capture: &Capture| {
            let view = capture.view();
            sink(json!({
                "content": [ContentBlock::text(view.text)],
                "details": {"truncated": view.truncated, "outputBytes": view.total_bytes},
            }));
        }),
    };
    let started = Instant::now();
    let timeout = request.timeout;
    let termination = shell::run(
        request,
        capture.clone(),
        call.cancel.clone(),
        Some(progress),
    )
    .await;
    let view = lock(&capture).view();
    let (text, mut details, failed) = render(&view, &termination, timeout, "aborted");
    details["durationMs"] = json!(started.elapsed().as_millis() as u64);
    let output = ToolOutput {
        content: vec![ContentBlock::text(text)],
        details: Some(details),
        is_error: failed,
    };
    (termination, output)
}

impl TypedTool for BashTool {
    type Args = BashArgs;

    fn name(&self) -> &str {
        "bash"
    }

    fn description(&self) -> &str {
        "Run a shell command in the working directory. Output is the last 2000 lines or 50KB; the full output is saved to a file when truncated. Set background: true for long-running commands and poll them with task_output."
    }

    fn parameters(&self) -> &Value {
        &PARAMETERS
    }

    fn execution_mode(&self) -> ExecutionMode {
        ExecutionMode::Sequential
    }

    fn approval_escape(&self, _args: &BashArgs, _subject: &Subject) -> Option<Escape> {
        crate::sandboxing::bash_escape(&self.env)
    }

    fn escape_denied(&self, escape: &Escape) -> ToolOutput {
        crate::sandboxing::bash_escape_denied(&self.env, escape)
    }

    fn approval_subject(&self, args: &BashArgs) -> Result<Subject, ToolOutput> {
        crate::approval_subjects::bash(args)
    }

    fn execute(&self, args: BashArgs, call: ToolCallContext) -> BoxFuture<'static, ToolOutput> {
        let env = self.env.clone();
        let tasks = self.tasks.clone();
        let foreground = self.foreground.clone();
        Box::pin(async move {
            let command = args.command;
            if command.len() > MAX_COMMAND_BYTES {
                return ToolOutput::failure(
                    "too_large",
                    format!(
                        "Command too large: {} bytes (limit {MAX_COMMAND_BYTES} bytes)",
                        command.len()
                    ),
                );
            }
            if command.trim().is_empty() {
                return ToolOutput::failure("invalid_command", "Command must not be empty");
            }
            let background = args.background == Some(true);
            let plan = match SpawnPlan::for_command(
                env.sandbox.get(),
                call.host.escape_approved(&call.call_id),
            ) {
                Ok(plan) => plan,
                Err(output) => return output,
            };
            if background {
                let timeout = timeout_arg(args.timeout, MAX_TIMEOUT);
                let request = ShellRequest {
                    shell: env.shell.clone(),
                    cwd: env.cwd.clone(),
                    command,
                    timeout,
                    login: plan.login(),
                    confinement: plan.confinement(),
                };
                let mut details = json!({"taskId": "", "status": "running"});
                if let Some(sandbox) = plan.details() {
                    details["sandbox"] = sandbox;
                }
                return match tasks.start(request, call.host.clone()) {
                    Ok(id) => {
                        details["taskId"] = json!(id);
                        ToolOutput::success(
                            format!(
                                "Command running in background (task ID: {id}). Use task_output to read its output and kill_task to stop it."
                            ),
                            details,
                        )
                    }
                    Err(output) => output,
                };
            }
            let timeout = timeout_arg(args.timeout, DEFAULT_TIMEOUT);
            let _turn = tokio::select! {
                guard = foreground.lock_owned() => guard,
                () = call.cancel.cancelled() => {
                    return ToolOutput::failure("aborted", "Command aborted before it started");
                }
            };
            let request = ShellRequest {
                shell: env.shell.clone(),
                cwd: env.cwd.clone(),
                command: command.clone(),
                timeout,
                login: plan.login(),
                confinement: plan.confinement(),
            };
            let (termination, output) = run_foreground(request.clone(), &call).await;
            // A likely sandbox denial may be re-run outside the sandbox once the client
            // approves (docs/approvals.md#escalation); otherwise the hint explains it.
            if let Some(escape) = plan.denial(&termination, &output) {
                let subject = SpawnPlan::escalation_subject(&command, &termination, &output);
                let approved = call
                    .host
                    .request_escalation(
                        &call.call_id,
                        &call.raw_arguments,
                        subject,
                        escape,
                        &call.cancel,
                    )
                    .await;
                if let Some(approval_id) = approved {
                    let outside = ShellRequest {
                        confinement: None,
                        ..request
                    };
                    let (_, rerun) = run_foreground(outside, &call).await;
                    return plan.escalated(&termination, rerun, &approval_id);
                }
            }
            plan.finish(&termination, output)
        })
    }

    fn shutdown(&self) -> BoxFuture<'static, ()> {
        let tasks = self.tasks.clone();
        Box::pin(async move { tasks.shutdown().await })
    }
}
