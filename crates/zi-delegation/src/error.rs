//! What can go wrong in a delegation operation. Each variant's text is the error result the
//! parent model sees (docs/delegation.md#tools), so the wording is part of the contract.

use std::path::PathBuf;

use zi_agent::errors::SessionError;

use crate::child::connection_error;
use crate::ledger::LedgerFull;

/// Why a supervisor operation or a delegation tool failed.
#[derive(Debug, thiserror::Error)]
pub enum SubagentError {
    /// The parent session is shutting its children down.
    #[error("Subagent supervisor is stopping")]
    Stopping,
    /// The parent session has closed its children.
    #[error("Subagent supervisor is closed")]
    Closed,
    /// A runtime name outside 1..=64 bytes or with a NUL.
    #[error("Subagent name must contain 1 through 64 UTF-8 bytes without NUL")]
    NameLength,
    /// A runtime name that does not match `^[a-z][a-z0-9_-]*$`.
    #[error(
        "Subagent names must start with a letter and contain only lowercase letters, numbers, _ or -"
    )]
    NamePattern,
    /// A prompt or message outside 1..=8 MiB or with a NUL; `what` names which.
    #[error("Subagent {what} must contain 1 through 8388608 UTF-8 bytes without NUL")]
    TextLength {
        /// `prompt` (spawn) or `message` (send, assign).
        what: &'static str,
    },
    /// No child, live or exited, has this name.
    #[error("Unknown subagent: {0}")]
    Unknown(String),
    /// No live child has this name.
    #[error("Unknown live subagent: {0}")]
    UnknownLive(String),
    /// The catalog has no profile of this name.
    #[error("Unknown subagent profile: {0}")]
    UnknownProfile(String),
    /// The child's work cycle ran past its deadline.
    #[error("Subagent {0} work cycle deadline has expired")]
    DeadlineExpired(String),
    /// The child's lifecycle does not allow the operation.
    #[error("Subagent {name} cannot {operation} while {lifecycle}")]
    WrongState {
        /// The child.
        name: String,
        /// `continue`, `interrupt` or `accept send`.
        operation: &'static str,
        /// The child's lifecycle word.
        lifecycle: &'static str,
    },
    /// Four children are live already.
    #[error(
        "Subagent capacity exceeded: at most 4 live children. Close a child you no longer need before spawning another."
    )]
    Capacity,
    /// The name belongs to a live or retained child.
    #[error("Subagent name already in use: {0}")]
    NameInUse(String),
    /// The profile asks for a model the parent cannot resolve.
    #[error(
        "Subagent profile {profile} from {} requests unavailable model: {model}",
        source_path.display()
    )]
    UnavailableModel {
        /// The profile's name.
        profile: String,
        /// The file that declared it.
        source_path: PathBuf,
        /// The requested model reference.
        model: String,
    },
    /// Neither the profile nor the parent names a model.
    #[error("No model selected. Use /login, then /model.")]
    NoModel,
    /// The child's model reference is empty, too long or has a NUL.
    #[error("Subagent model must contain 1 through 4096 UTF-8 bytes without NUL")]
    ModelLength,
    /// The handed-over API key is empty, too long or has a NUL.
    #[error("Subagent API key must contain 1 through 65536 UTF-8 bytes without NUL")]
    ApiKeyLength,
    /// The completion ledger has no free slot.
    #[error(transparent)]
    LedgerFull(#[from] LedgerFull),
    /// A required `subagent` entry could not be journaled.
    #[error(transparent)]
    Journal(#[from] SessionError),
    /// The tool call was cancelled while waiting.
    #[error("Subagent wait was cancelled")]
    WaitCancelled,
    /// `wait_subagents` got no names or more than 16.
    #[error("Subagent wait requires 1 through 16 names")]
    WaitNameCount,
    /// `wait_subagents` got a name twice.
    #[error("Subagent wait rejects duplicate names")]
    WaitDuplicateNames,
    /// The spawn was cancelled before the child was admitted.
    #[error("Subagent {0} spawn was cancelled")]
    SpawnCancelled(String),
    /// The spawn was cancelled (or the child left) while its first cycle was being admitted.
    #[error("Subagent {0} spawn admission was cancelled")]
    AdmissionCancelled(String),
    /// The child answered a prompt without advancing its completion revision.
    #[error("RPC completion admission revision did not advance")]
    RevisionStale,
    /// The child answered a prompt without a completion revision.
    #[error("Invalid RPC completion admission")]
    InvalidAdmission,
    /// The operating system started no process for the child.
    #[error("Subagent {0} process did not start")]
    NotStarted(String),
    /// The child's RPC connection failed (docs/delegation.md#children).
    #[error("{}", connection_error(name, source))]
    Connection {
        /// The child.
        name: String,
        /// What the connection reported.
        source: zi_rpc_client::Error,
    },
    /// A wait, interrupt or close text cannot fit `max` bytes even with every field clipped.
    #[error("Subagent wait metadata exceeds {0} bytes")]
    WaitMetadata(usize),
    /// The `details` agent list cannot fit 16 KiB even with every field clipped.
    #[error("Subagent tool metadata exceeds 16384 bytes")]
    DetailsMetadata,
    /// The profile list cannot fit `max` bytes even with every description clipped.
    #[error("Subagent profile metadata exceeds {0} bytes")]
    ProfileMetadata(usize),
}

impl SubagentError {
    /// The connection failure of child `name`.
    pub(crate) fn connection(name: &str, source: zi_rpc_client::Error) -> SubagentError {
        SubagentError::Connection {
            name: name.to_string(),
            source,
        }
    }
}
