//! The extension-host seam (docs/extensions.md): what the session needs from an extension
//! runtime, without knowing which language the extensions are written in.
//!
//! A host lists its commands, runs one by name, and observes lifecycle events. The session owns
//! admission (commands are idle-only), the `extension_command` activity, interruption and the
//! return to idle; the host owns execution, deadlines and fault containment.

use futures::future::BoxFuture;
use tokio_util::sync::CancellationToken;
use zi_protocol::results::CommandDescriptor;

use crate::errors::{Operation, SessionError};
use crate::session::{AgentSession, RunActivity};

/// Largest command argument string (docs/extensions.md#commands-over-rpc).
pub(crate) const MAX_COMMAND_ARGUMENT_BYTES: usize = 256 * 1024;
/// Largest command feedback message.
pub(crate) const MAX_COMMAND_RESULT_BYTES: usize = 16 * 1024;

/// A lifecycle notification (docs/extensions.md#zionevent-handler). `agent_start` and
/// `agent_settled` are observational: the session never waits for their handlers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LifecycleEvent {
    /// The session was created or loaded.
    SessionStart {
        /// `startup`, `reload`, `new` or `resume` (docs/extensions.md#zionevent-handler).
        reason: String,
    },
    /// The session is about to end.
    SessionShutdown {
        /// `quit`, `new`, `resume` or `reload`.
        reason: String,
    },
    /// A run started.
    AgentStart,
    /// A run settled: the session is idle again.
    AgentSettled,
}

impl LifecycleEvent {
    /// The event name handlers register for.
    pub fn name(&self) -> &'static str {
        match self {
            LifecycleEvent::SessionStart { .. } => "session_start",
            LifecycleEvent::SessionShutdown { .. } => "session_shutdown",
            LifecycleEvent::AgentStart => "agent_start",
            LifecycleEvent::AgentSettled => "agent_settled",
        }
    }
}

/// What a command returned: feedback text, or nothing. The error stays a `String` on purpose:
/// it is the extension's own message (whatever a script raised), reported as it is, so there is
/// no spec wording to type; this is the seam's API, implemented outside zi-agent.
pub type CommandOutcome = Result<Option<String>, String>;

/// An extension runtime the session can drive.
pub trait ExtensionHost: Send + Sync {
    /// The admitted commands, in catalog order.
    fn commands(&self) -> Vec<CommandDescriptor>;
    /// Starts a command. `None` when the command is unknown. The future resolves once the
    /// handler finished, failed, hit its deadline or was cancelled through `cancel` (within the
    /// host's cancellation grace).
    fn invoke(
        &self,
        name: &str,
        arguments: String,
        cancel: CancellationToken,
    ) -> Option<BoxFuture<'static, CommandOutcome>>;
    /// Delivers a lifecycle event without waiting for its handlers.
    fn notify(&self, event: LifecycleEvent);
    /// Delivers `session_shutdown` and stops the runtime, within the host's budget.
    fn shutdown(&self) -> BoxFuture<'static, ()>;
    /// [`ExtensionHost::shutdown`] with the reason `session_shutdown` carries: `quit`, or `new`
    /// / `resume` when the interactive mode replaces the session
    /// (docs/extensions.md#zionevent-handler).
    fn shutdown_for(&self, reason: &str) -> BoxFuture<'static, ()> {
        let _ = reason;
        self.shutdown()
    }
}

/// Why `command.invoke` failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvokeError {
    /// No such command in the catalog (RPC `not_found`); the text names it.
    #[error("{0}")]
    NotFound(String),
    /// Refused or failed (RPC `operation_failed`).
    #[error(transparent)]
    Failed(SessionError),
}

/// The text of `command.invoke` for a command the catalog lacks.
pub(crate) fn command_not_found(name: &str) -> String {
    format!("Command not found: {name}")
}

/// The text of a command the extension host has no handler for.
pub fn unknown_command(name: &str) -> String {
    SessionError::UnknownCommand(name.to_string()).to_string()
}

impl AgentSession {
    /// Attaches the extension host and forwards `agent_start` / `agent_settled` to it. Call once,
    /// before the session is served.
    pub fn set_extension_host(&self, host: std::sync::Arc<dyn ExtensionHost>) {
        let observer = host.clone();
        if self.inner.extensions.set(host).is_err() {
            return;
        }
        self.subscribe(std::sync::Arc::new(move |event, _| match event {
            zi_protocol::event::AgentSessionEvent::AgentStart => {
                observer.notify(LifecycleEvent::AgentStart);
            }
            zi_protocol::event::AgentSessionEvent::AgentSettled => {
                observer.notify(LifecycleEvent::AgentSettled);
            }
            _ => {}
        }));
    }

    /// The extension host, if one is attached.
    pub fn extension_host(&self) -> Option<&std::sync::Arc<dyn ExtensionHost>> {
        self.inner.extensions.get()
    }

    /// `command.list` (docs/rpc.md#commandlist): empty without a host.
    pub fn extension_commands(&self) -> Vec<CommandDescriptor> {
        self.extension_host()
            .map(|host| host.commands())
            .unwrap_or_default()
    }

    /// Admits `command.invoke` synchronously (docs/rpc.md#commandinvoke) and returns the future
    /// that runs it. While it runs the activity is `extension_command`; afterwards the session is
    /// idle again, whatever the handler did.
    pub fn invoke_command(
        &self,
        name: &str,
        arguments: String,
    ) -> Result<BoxFuture<'static, Result<Option<String>, SessionError>>, InvokeError> {
        let Some(host) = self.extension_host().cloned() else {
            return Err(InvokeError::NotFound(command_not_found(name)));
        };
        if !host.commands().iter().any(|c| c.name == name) {
            return Err(InvokeError::NotFound(command_not_found(name)));
        }
        if arguments.len() > MAX_COMMAND_ARGUMENT_BYTES {
            return Err(InvokeError::Failed(SessionError::CommandArgumentsTooLarge));
        }
        let mut state = self.lock();
        state
            .require_idle(Operation::InvokeCommand)
            .map_err(InvokeError::Failed)?;
        state
            .require_empty_queues(Operation::InvokeCommand)
            .map_err(InvokeError::Failed)?;
        let cancel = CancellationToken::new();
        let Some(running) = host.invoke(name, arguments, cancel.clone()) else {
            return Err(InvokeError::Failed(SessionError::UnknownCommand(
                name.to_string(),
            )));
        };
        let operation_id = state.next_operation_id();
        state.begin_busy(RunActivity::ExtensionCommand {
            operation_id,
            name: name.to_string(),
            cancel: cancel.clone(),
            cancelling: false,
        });
        drop(state);
        // The command runs in its own task, so the session returns to idle even if the caller
        // stops waiting.
        let session = self.clone();
        let (reply, result) = tokio::sync::oneshot::channel();
        tokio::spawn(async move {
            let outcome = running.await;
            session.finish_command(&cancel);
            let _ = reply.send(match outcome {
                Ok(Some(message)) if message.len() > MAX_COMMAND_RESULT_BYTES => {
                    Err(SessionError::CommandResultTooLarge)
                }
                Ok(message) => Ok(message),
                Err(message) => Err(SessionError::CommandFailed(message)),
            });
        });
        Ok(Box::pin(async move {
            result.await.unwrap_or(Err(SessionError::CommandAbandoned))
        }))
    }

    /// Back to idle; custom messages the command appended are committed unless it was
    /// interrupted (interruption discards pending custom input, docs/rpc.md#admission-while-busy).
    fn finish_command(&self, cancel: &CancellationToken) {
        let mut state = self.lock();
        if matches!(state.activity, RunActivity::ExtensionCommand { .. }) {
            state.activity = RunActivity::Idle;
        }
        let deferred = std::mem::take(&mut state.deferred_custom);
        if !cancel.is_cancelled() {
            for message in deferred {
                if let Err(error) = state.commit_custom_message(message) {
                    tracing::warn!("could not commit an extension's custom message: {error}");
                }
            }
        }
        drop(state);
        self.inner
            .settled
            .send_modify(|generation| *generation += 1);
    }
}
