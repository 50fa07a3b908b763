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

/// The text of a model the catalog does not have (`provider/id`).
pub fn model_not_found(provider: &str, id: &str) -> String {
    format!("Model not found: {provider}/{id}")
}

/// The text of a call to a tool the session does not offer.
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
    /// The session was disposed: it takes no more work.
    #[error("AgentSession is disposed")]
    Disposed,
    /// A prompt arrived before any model was selected.
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
    /// The steering and follow-up queues are full.
    #[error("Queue capacity exceeded (maximum 32 messages or 8 MiB).")]
    QueueCapacity,
    /// A custom message asked to be steered or queued while no run was active.
    #[error("Custom messages can be steered or queued for follow-up only during an active run")]
    CustomQueueWhileIdle,
    /// A manual compaction was interrupted before it committed.
    #[error("Compaction was cancelled")]
    CompactionCancelled,
    /// A manual compaction failed: the `compaction_end` failure message (planning, summary,
    /// validation, a stale commit or the journal).
    #[error("{0}")]
    CompactionFailed(String),
    /// A prompt carries images and the model's `input` lacks `image`; `{0}` is `provider/id`.
    #[error("Model {0} does not accept images")]
    ModelRejectsImages(String),
    /// The model's provider has no credentials; `{0}` is `provider/id`.
    #[error("Model {0} is not authenticated")]
    ModelNotAuthenticated(String),
    /// One message (by index) is larger than a whole page may be.
    #[error("Session message {0} exceeds the RPC page byte bound")]
    PageTooLarge(u64),
    /// One journal entry (by index) is larger than a whole page may be.
    #[error("Session entry {0} exceeds the RPC page byte bound")]
    EntryPageTooLarge(u64),
    /// `session.fork` needs a journal file to copy.
    #[error("Cannot fork a session that runs with --no-session")]
    ForkWithoutJournal,
    /// `command.invoke`'s arguments are over their bound.
    #[error("Extension command arguments exceed 256 KiB")]
    CommandArgumentsTooLarge,
    /// The command's feedback is over its bound.
    #[error("Extension command result exceeds 16 KiB")]
    CommandResultTooLarge,
    /// The command's task ended without an answer (it panicked, or the runtime stopped).
    #[error("Extension command was abandoned")]
    CommandAbandoned,
    /// The extension host has no command of this name.
    #[error("Unknown extension command: {0}")]
    UnknownCommand(String),
    /// The handler failed; its own message.
    #[error("{0}")]
    CommandFailed(String),
    /// An outcome with this operation id was already recorded.
    #[error("Operation outcome already exists: {0}")]
    DuplicateOutcome(String),
    /// An operation outcome breaks the envelope rules.
    #[error(transparent)]
    Outcome(#[from] OutcomeError),
    /// A custom entry or message breaks its bounds.
    #[error(transparent)]
    Custom(#[from] CustomError),
    /// `session.fork` failed: an unknown entry (RPC `not_found`) or the new journal could not
    /// be written.
    #[error(transparent)]
    Fork(#[from] ForkError),
    /// The journal could not be read or written.
    #[error(transparent)]
    Journal(#[from] JournalError),
    /// A settings write failed.
    #[error(transparent)]
    Settings(#[from] SettingsError),
}
