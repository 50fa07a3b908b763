//! Typed errors of the `AgentSession`. Each `Display` is the exact text the specs name
//! (docs/rpc.md#admission-while-busy); RPC reports it as the `operation_failed` message.

use zi_config::settings::SettingsError;
use zi_journal::JournalError;
use zi_journal::fork::ForkError;

use crate::session::custom::CustomError;
use crate::session::host::OutcomeError;

mod busy;
mod rpc;
#[cfg(test)]
mod tests;

pub use busy::{Activity, Operation};

/// Error text of a tool call that was never run because the response hit the output limit.
pub const TOOL_SKIPPED_LENGTH: &str = "Tool call was not executed: the response hit the output token limit (stopReason \"length\") before the call was complete.";
/// Error text of a tool call cut short by an interruption.
pub const TOOL_ABORTED: &str = "Tool execution was aborted";

pub fn model_not_found(provider: &str, id: &str) -> String {
    format!("Model not found: {provider}/{id}")
}

pub fn tool_not_found(name: &str) -> String {
    format!("Tool {name} not found")
}

/// `errorMessage` of the assistant message that ends a run whose journal append failed;
/// `error` names the journal.
pub fn journal_write_failed(error: &str) -> String {
    format!("The run stopped because the session journal could not be written: {error}")
}

/// A failure of a session operation.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SessionError {
    #[error("AgentSession is disposed")]
    Disposed,
    #[error("No model selected. Use /login, then /model.")]
    NoModel,
    /// `operation` refused because the session is busy with `activity`
    /// (docs/rpc.md#admission-while-busy); the text is the table's cell.
    #[error("{}", busy::BusyText(.operation, .activity))]
    Busy {
        /// The refused operation.
        operation: Operation,
        /// What the session was doing.
        activity: Activity,
    },
    #[error("Queue capacity exceeded (maximum 32 messages or 8 MiB).")]
    QueueCapacity,
    #[error("Custom messages can be steered or queued for follow-up only during an active run")]
    CustomQueueWhileIdle,
    #[error("Compaction was cancelled")]
    CompactionCancelled,
    /// A manual compaction failed: the `compaction_end` failure message (planning, summary,
    /// validation, a stale commit or the journal).
    #[error("{0}")]
    CompactionFailed(String),
    /// A prompt carries images and the model's `input` lacks `image`; `{0}` is `provider/id`.
    #[error("Model {0} does not accept images")]
    ModelRejectsImages(String),
    #[error("Model {0} is not authenticated")]
    ModelNotAuthenticated(String),
    #[error("Session message {0} exceeds the RPC page byte bound")]
    PageTooLarge(u64),
    #[error("Session entry {0} exceeds the RPC page byte bound")]
    EntryPageTooLarge(u64),
    #[error("Cannot fork a session that runs with --no-session")]
    ForkWithoutJournal,
    #[error("Extension command arguments exceed 256 KiB")]
    CommandArgumentsTooLarge,
    #[error("Extension command result exceeds 16 KiB")]
    CommandResultTooLarge,
    #[error("Extension command was abandoned")]
    CommandAbandoned,
    #[error("Unknown extension command: {0}")]
    UnknownCommand(String),
    /// The handler failed; its own message.
    #[error("{0}")]
    CommandFailed(String),
    #[error("Operation outcome already exists: {0}")]
    DuplicateOutcome(String),
    #[error(transparent)]
    Outcome(#[from] OutcomeError),
    #[error(transparent)]
    Custom(#[from] CustomError),
    /// `session.fork` failed: an unknown entry (RPC `not_found`) or the new journal could not
    /// be written.
    #[error(transparent)]
    Fork(#[from] ForkError),
    #[error(transparent)]
    Journal(#[from] JournalError),
    #[error(transparent)]
    Settings(#[from] SettingsError),
}
