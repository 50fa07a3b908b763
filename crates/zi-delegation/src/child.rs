//! One child `zi --mode rpc --no-session` process and its RPC conversation
//! (docs/delegation.md#children), over `zi-rpc-client`.

use std::ffi::OsString;
use std::os::unix::process::ExitStatusExt as _;
use std::path::PathBuf;
use std::process::ExitStatus;
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use zi_os::process::tree::kill_tree;
use zi_os::process::{SIGKILL, kill_group, signal_name};
use zi_rpc_client::{
    Client, ClientBuilder, CompletionResult, Delivery, Error, EventMode, PromptResult,
};

use crate::error::SubagentError;
use crate::limits::{READY_TIMEOUT, RPC_RESPONSE_TIMEOUT};

/// Everything needed to start a child: the running executable and its argv, cwd and the
/// complete environment (the credential handoff included, never argv).
#[derive(Clone)]
pub struct ChildCommand {
    pub program: PathBuf,
    pub args: Vec<String>,
    pub cwd: PathBuf,
    pub env: Vec<(OsString, OsString)>,
}

/// How a child left (docs/delegation.md#evidence); journaled as compact JSON in `exited.outcome`.
#[derive(Debug, Clone, PartialEq)]
pub enum ExitOutcome {
    Closed { code: i32 },
    Failed { message: String, code: Option<i32> },
    Killed { message: String },
}

impl ExitOutcome {
    pub fn to_json(&self) -> String {
        let value = match self {
            ExitOutcome::Closed { code } => json!({"type": "closed", "code": code}),
            ExitOutcome::Failed { message, code } => {
                json!({"type": "failed", "message": message, "code": code})
            }
            ExitOutcome::Killed { message } => json!({"type": "killed", "message": message}),
        };
        crate::limits::clip(&value.to_string(), crate::limits::ERROR_MAX_BYTES).to_string()
    }

    /// The failure code and error of a cycle the exit left open (docs/delegation.md#completions).
    pub fn open_cycle_failure(&self) -> (&'static str, Option<String>) {
        match self {
            ExitOutcome::Closed { .. } => ("child_exited", None),
            ExitOutcome::Failed { message, .. } => ("child_failed", Some(message.clone())),
            ExitOutcome::Killed { message } => ("child_killed", Some(message.clone())),
        }
    }
}

pub struct ChildProcess {
    client: Arc<Client>,
    pid: i32,
}

/// The wording of what went wrong on a child connection (docs/delegation.md#children).
pub fn connection_error(name: &str, error: &Error) -> String {
    match error {
        Error::SequenceGap { expected, received } => {
            format!("RPC sequence gap: expected {expected}, received {received}")
        }
        Error::UnknownFrameType(kind) => format!("Subagent RPC unknown frame type: {kind}"),
        Error::InvalidFrame(_) => "Subagent RPC emitted an invalid server frame".to_string(),
        Error::Protocol { message, .. } => format!("Subagent RPC protocol error: {message}"),
        Error::Response { message, .. } => message.clone(),
        Error::ReadyTimeout { .. } => {
            format!("Subagent {name} did not become ready within 10000ms")
        }
        Error::Spawn(_) => format!("Subagent {name} process did not start"),
        Error::Closed { stderr, .. } | Error::Exit { stderr, .. } => {
            let mut message = format!("Subagent {name} exited unexpectedly");
            if !stderr.trim().is_empty() {
                message.push_str(": ");
                message.push_str(stderr.trim_end());
            }
            message
        }
        Error::Decode { .. } => "Subagent RPC emitted an invalid response".to_string(),
        Error::Usage(message) => message.clone(),
    }
}

async fn bounded<T>(
    method: &str,
    request: impl std::future::Future<Output = Result<T, Error>>,
) -> Result<T, Error> {
    match tokio::time::timeout(RPC_RESPONSE_TIMEOUT, request).await {
        Ok(result) => result,
        Err(_) => Err(Error::Usage(format!("RPC request {method} timed out"))),
    }
}

impl ChildProcess {
    /// Starts the process in its own session (no controlling terminal; its pid is its process
    /// group) and waits for `ready`.
    pub async fn start(name: &str, command: &ChildCommand) -> Result<ChildProcess, SubagentError> {
        let builder = ClientBuilder::new(&command.program)
            .args(&command.args)
            .current_dir(&command.cwd)
            .env_clear()
            .own_session()
            .ready_timeout(READY_TIMEOUT);
        let builder = command
            .env
            .iter()
            .fold(builder, |builder, (key, value)| builder.env(key, value));
        let client = builder
            .spawn()
            .await
            .map_err(|error| SubagentError::connection(name, error))?;
        let pid = client
            .pid()
            .await
            .and_then(|pid| i32::try_from(pid).ok())
            .ok_or_else(|| SubagentError::NotStarted(name.to_string()))?;
        Ok(ChildProcess {
            client: Arc::new(client),
            pid,
        })
    }

    /// `connection.set_events none`, then the session id from `session.get_state`.
    pub async fn handshake(&self) -> Result<String, Error> {
        bounded(
            "connection.set_events",
            self.client.set_events(EventMode::None),
        )
        .await?;
        let state = bounded("session.get_state", self.client.get_state()).await?;
        Ok(state.session_id)
    }

    pub async fn prompt(
        &self,
        delivery: Delivery,
        text: &str,
        completion_id: Option<&str>,
    ) -> Result<PromptResult, Error> {
        bounded(
            "session.prompt",
            self.client.prompt(delivery, text, completion_id),
        )
        .await
    }

    /// The cycle's idle observation (no response timeout: the work deadline is the parent's).
    pub async fn await_idle(&self, completion_id: &str) -> Result<CompletionResult, Error> {
        self.client
            .await_idle(Some(completion_id))
            .await?
            .ok_or_else(|| Error::Usage("Invalid RPC idle completion result".into()))
    }

    pub async fn interrupt(&self) -> Result<(), Error> {
        self.client.interrupt().await
    }

    /// Resolves when the connection ends (exit, crash, bad frame).
    pub async fn ended(&self) -> Error {
        self.client.ended().await
    }

    pub fn stderr_tail(&self) -> String {
        self.client.stderr_tail()
    }

    fn outcome(&self, name: &str, status: ExitStatus) -> ExitOutcome {
        if let Some(signal) = status.signal() {
            return ExitOutcome::Killed {
                message: format!("Subagent {name} exited after {}", signal_name(signal)),
            };
        }
        match status.code() {
            Some(0) => ExitOutcome::Closed { code: 0 },
            code => ExitOutcome::Failed {
                message: crate::limits::clip(
                    self.stderr_tail().trim_end(),
                    crate::limits::ERROR_MAX_BYTES,
                )
                .to_string(),
                code,
            },
        }
    }

    /// Graceful close: EOF on stdin, up to `grace` for the exit; then SIGKILL of the whole
    /// tree and up to `forced` more.
    pub async fn close(&self, name: &str, grace: Duration, forced: Duration) -> ExitOutcome {
        self.client.close_stdin().await;
        if let Some(status) = self.client.wait_exit(grace).await {
            // What is left of the child's group after the child itself exited.
            kill_group(self.pid, SIGKILL);
            return self.outcome(name, status);
        }
        kill_tree(self.pid);
        match self.client.wait_exit(forced).await {
            Some(status) => self.outcome(name, status),
            None => ExitOutcome::Killed {
                message: format!("Subagent {name} did not exit within close bounds"),
            },
        }
    }

    /// After a fatal connection error: SIGKILL the tree, wait up to 5 s, and report `message`.
    pub async fn kill_after_fatal(&self, name: &str, message: String) -> ExitOutcome {
        let exited = self.client.wait_exit(Duration::from_millis(50)).await;
        let status = match exited {
            Some(status) => Some(status),
            None => {
                kill_tree(self.pid);
                self.client.wait_exit(Duration::from_secs(5)).await
            }
        };
        kill_group(self.pid, SIGKILL);
        let code = status.and_then(|s| s.code());
        let message = match status.and_then(|s| s.signal()) {
            Some(signal) if exited.is_some() => {
                format!(
                    "Subagent {name} exited unexpectedly with signal {}",
                    signal_name(signal)
                )
            }
            _ => match (exited, code) {
                (Some(_), Some(code)) => {
                    let tail = self.stderr_tail();
                    let mut text = format!("Subagent {name} exited unexpectedly with code {code}");
                    if !tail.trim().is_empty() {
                        text.push_str(": ");
                        text.push_str(tail.trim_end());
                    }
                    text
                }
                _ => message,
            },
        };
        ExitOutcome::Failed {
            message: crate::limits::clip(&message, crate::limits::ERROR_MAX_BYTES).to_string(),
            code,
        }
    }
}
