//! Exact rejection messages of the `AgentSession` (runtime-reference §4.4).

pub const DISPOSED: &str = "AgentSession is disposed";
pub const NO_MODEL: &str = "No model selected. Use /login, then /model.";
pub const PROMPT_WHILE_RUNNING: &str = "streamingBehavior is required while the agent is running";
pub const PROMPT_WHILE_ABORTING: &str = "Cannot prompt while the agent is aborting";
pub const QUEUE_WHILE_ABORTING: &str = "Cannot queue input while the agent is aborting";
pub const QUEUE_CAPACITY: &str = "Queue capacity exceeded (maximum 32 messages or 8 MiB).";
pub const MODEL_WHILE_RUNNING: &str = "Cannot change model while the agent is running";
pub const THINKING_WHILE_RUNNING: &str = "Cannot change thinking level while the agent is running";
pub const MODEL_WHILE_ABORTING: &str = "Cannot change model while the agent is aborting";
pub const THINKING_WHILE_ABORTING: &str =
    "Cannot change thinking level while the agent is aborting";
pub const COMMAND_WHILE_RUNNING: &str =
    "Cannot run an extension command while the agent is running";
pub const CUSTOM_MESSAGE_WHILE_RUNNING: &str =
    "Cannot append or trigger a custom message while the agent is running";
pub const CUSTOM_QUEUE_WHILE_IDLE: &str =
    "Custom messages can be steered or queued for follow-up only during an active run";
pub const COMMAND_WHILE_QUEUED: &str =
    "Cannot run an extension command while queued input is pending";
pub const COMMAND_WHILE_COMMAND: &str =
    "Cannot run an extension command while another extension command is active";
pub const PROMPT_WHILE_COMMAND: &str = "Cannot prompt while an extension command is active";
pub const QUEUE_WHILE_COMMAND: &str = "Cannot queue input while an extension command is active";
pub const MODEL_WHILE_COMMAND: &str = "Cannot change model while an extension command is active";
pub const THINKING_WHILE_COMMAND: &str =
    "Cannot change thinking level while an extension command is active";
pub const TRIGGER_WHILE_COMMAND: &str =
    "Cannot trigger a turn while an extension command is active";

/// Error text of a tool call that was never run because the response hit the output limit.
pub const TOOL_SKIPPED_LENGTH: &str = "Tool call was not executed: the response hit the output token limit (stopReason \"length\") before the call was complete.";
/// Error text of a tool call cut short by an interruption.
pub const TOOL_ABORTED: &str = "Tool execution was aborted";

pub fn model_not_authenticated(reference: &str) -> String {
    format!("Model {reference} is not authenticated")
}

pub fn model_not_found(provider: &str, id: &str) -> String {
    format!("Model not found: {provider}/{id}")
}

pub fn tool_not_found(name: &str) -> String {
    format!("Tool {name} not found")
}

pub fn project_untrusted(path: &std::path::Path) -> String {
    format!(
        "Cannot update project settings before project trust: {}",
        path.display()
    )
}

pub fn invalid_settings(scope: &str, path: &std::path::Path) -> String {
    format!("Cannot update invalid {scope} settings: {}", path.display())
}

/// `errorMessage` of the assistant message that ends a run whose journal append failed;
/// `error` names the journal.
pub fn journal_write_failed(error: &str) -> String {
    format!("The run stopped because the session journal could not be written: {error}")
}

/// A failure of a session operation; its message is what RPC reports as `operation_failed`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct SessionError(pub String);

impl SessionError {
    pub fn new(message: impl Into<String>) -> Self {
        SessionError(message.into())
    }
}

impl From<&str> for SessionError {
    fn from(message: &str) -> Self {
        SessionError(message.to_string())
    }
}
