//! The journal entries (docs/configuration.md#session-journals) that `entry_appended` and the
//! catalog carry.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::ThinkingLevel;
use crate::message::{AgentMessage, MessageContent};
use crate::state::{CompactionReason, WorkPlan};

/// A journal entry: its data fields, then `id`, `parentId` and `timestamp`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct SessionEntry {
    /// The entry data (flattened).
    #[serde(flatten)]
    pub data: EntryData,
    /// The entry id.
    pub id: String,
    /// The previous entry's id (`null` for the first).
    pub parent_id: Option<String>,
    /// ISO-8601 UTC with milliseconds.
    pub timestamp: String,
}

/// The data of a journal entry, tagged by `type`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum EntryData {
    /// A committed message.
    Message {
        /// The message.
        message: AgentMessage,
    },
    /// The model was selected.
    ModelChange {
        /// The provider id.
        provider: String,
        /// The model id.
        #[serde(rename = "modelId")]
        model_id: String,
    },
    /// The thinking level changed.
    ThinkingLevelChange {
        /// The new level.
        #[serde(rename = "thinkingLevel")]
        thinking_level: ThinkingLevel,
    },
    /// A failed attempt is retried.
    Retry {
        /// The journal id of the failed assistant message.
        #[serde(rename = "failedEntryId")]
        failed_entry_id: String,
        /// The attempt number (1-based).
        attempt: u32,
    },
    /// Extension state, not part of the context.
    Custom {
        /// The extension-defined type.
        #[serde(rename = "customType")]
        custom_type: String,
        /// Extension-defined data.
        #[serde(skip_serializing_if = "Option::is_none", default)]
        data: Option<Value>,
    },
    /// An extension message, part of the context.
    CustomMessage {
        /// The extension-defined type.
        #[serde(rename = "customType")]
        custom_type: String,
        /// The content.
        content: MessageContent,
        /// Whether clients display it.
        display: bool,
        /// Extension-defined details.
        #[serde(skip_serializing_if = "Option::is_none", default)]
        details: Option<Value>,
    },
    /// The work plan changed.
    WorkPlan(WorkPlan),
    /// A compaction summary.
    Compaction(CompactionEntry),
    /// Durable evidence that a runtime-owned operation finished
    /// (docs/rpc.md#operation-outcomes). The stored keys are closed: these six plus `type`,
    /// `id`, `parentId` and `timestamp`.
    OperationOutcome(OperationOutcome),
    /// A delegation lifecycle fact (docs/delegation.md#evidence).
    Subagent(SubagentEntry),
}

/// The data of a `subagent` journal entry, tagged by `event`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum SubagentEntry {
    /// Spawn admitted the name, before the process starts.
    Starting {
        /// The runtime name.
        name: String,
    },
    /// The child's RPC session started.
    Ready {
        /// The runtime name.
        name: String,
        /// The child's session id.
        #[serde(rename = "sessionId", skip_serializing_if = "Option::is_none", default)]
        session_id: Option<String>,
    },
    /// A work cycle was admitted.
    WorkCycleStarted {
        /// The runtime name.
        name: String,
        /// The cycle number (1-based).
        #[serde(rename = "workCycle")]
        work_cycle: u64,
        /// The listed task, clipped to 256 bytes.
        #[serde(skip_serializing_if = "Option::is_none", default)]
        task: Option<String>,
    },
    /// The cycle's completion reached the parent model.
    WorkCycleDelivered {
        /// The runtime name.
        name: String,
        /// The cycle number.
        #[serde(rename = "workCycle")]
        work_cycle: u64,
    },
    /// The child is being closed.
    Closing {
        /// The runtime name.
        name: String,
        /// `close`, `startup_cancelled`, `startup_failed` or `session_disposed`.
        reason: String,
    },
    /// The child left.
    Exited {
        /// The runtime name.
        name: String,
        /// Compact JSON of the exit outcome, or the start error.
        outcome: String,
    },
    /// A child of an earlier process, found live in the journal on resume.
    Lost {
        /// The runtime name.
        name: String,
        /// Always `session_restored`.
        reason: String,
    },
}

impl SubagentEntry {
    /// The runtime name the entry is about.
    pub fn name(&self) -> &str {
        match self {
            SubagentEntry::Starting { name }
            | SubagentEntry::Ready { name, .. }
            | SubagentEntry::WorkCycleStarted { name, .. }
            | SubagentEntry::WorkCycleDelivered { name, .. }
            | SubagentEntry::Closing { name, .. }
            | SubagentEntry::Exited { name, .. }
            | SubagentEntry::Lost { name, .. } => name,
        }
    }
}

/// File lists gathered for a compaction (docs/configuration.md#what-is-kept).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct CompactionDetails {
    /// Files read.
    pub read_files: Vec<String>,
    /// Files modified.
    pub modified_files: Vec<String>,
    /// Read files left out of the list.
    pub omitted_read_files: u64,
    /// Modified files left out of the list.
    pub omitted_modified_files: u64,
}

/// The data of a `compaction` journal entry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct CompactionEntry {
    /// Why the compaction runs.
    pub reason: CompactionReason,
    /// The summary text.
    pub summary: String,
    /// The first entry kept after the summary.
    pub first_kept_entry_id: String,
    /// Context tokens before compaction.
    pub tokens_before: u64,
    /// Estimated context tokens after it.
    pub estimated_tokens_after: u64,
    /// Extension-defined details.
    pub details: CompactionDetails,
    /// A failed entry left out of the summary, if any.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub excluded_failure_entry_id: Option<String>,
}

/// `compaction_end.outcome.result`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct CompactionResult {
    /// Why the compaction runs.
    pub reason: CompactionReason,
    /// The summary text.
    pub summary: String,
    /// The first entry kept after the summary.
    pub first_kept_entry_id: String,
    /// Context tokens before compaction.
    pub tokens_before: u64,
    /// Estimated context tokens after it.
    pub estimated_tokens_after: u64,
    /// How many entries the summary replaced.
    pub compacted_entries: u64,
    /// Extension-defined details.
    pub details: CompactionDetails,
}

/// How a compaction ended (`compaction_end.outcome`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum CompactionOutcome {
    /// The compaction committed.
    Completed {
        /// What the compaction did.
        result: CompactionResult,
    },
    /// It was cancelled.
    Cancelled,
    /// It failed.
    Failed {
        /// Why.
        message: String,
    },
}

/// The data fields of an `operation_outcome` entry, in emission order.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OperationOutcome {
    /// The compaction's operation id.
    pub operation_id: String,
    /// The capability that owns the operation.
    pub capability: String,
    /// What operation ran.
    pub operation: String,
    /// The result.
    pub result: OutcomeResult,
    /// How long it took.
    pub duration_ms: u64,
    /// Operation-specific evidence.
    pub evidence: Value,
}

/// How an operation ended.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OutcomeResult {
    /// It succeeded.
    Succeeded,
    /// It failed.
    Failed,
    /// It was cancelled.
    Cancelled,
}

impl EntryData {
    /// The entry `type` on the wire.
    pub fn type_name(&self) -> &'static str {
        match self {
            EntryData::Message { .. } => "message",
            EntryData::ModelChange { .. } => "model_change",
            EntryData::ThinkingLevelChange { .. } => "thinking_level_change",
            EntryData::Retry { .. } => "retry",
            EntryData::Custom { .. } => "custom",
            EntryData::CustomMessage { .. } => "custom_message",
            EntryData::WorkPlan(_) => "work_plan",
            EntryData::Compaction(_) => "compaction",
            EntryData::OperationOutcome(_) => "operation_outcome",
            EntryData::Subagent(_) => "subagent",
        }
    }
}
