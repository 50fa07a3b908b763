//! Session events (docs/rpc.md#event-catalogue); the journal entries they carry are in `entry`.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::ThinkingLevel;
use crate::message::{AgentMessage, AssistantMessage, ContentBlock, StopReason, ToolCall};
use crate::state::{CompactionReason, QueueMode, QueuedInput, RpcModel, WorkPlan};

mod entry;
pub use entry::{
    CompactionDetails, CompactionEntry, CompactionOutcome, CompactionResult, EntryData,
    OperationOutcome, OutcomeResult, SessionEntry, SubagentEntry,
};

/// What the provider stream reports while an assistant message streams. On the wire this is
/// delta-only: no cumulative `partial` snapshot (DESIGN.md, compatibility choices).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum AssistantMessageEvent {
    /// The stream started.
    Start,
    /// A text block starts.
    TextStart {
        /// The index of the content block.
        #[serde(rename = "contentIndex")]
        content_index: usize,
    },
    /// Text was appended.
    TextDelta {
        /// The index of the content block.
        #[serde(rename = "contentIndex")]
        content_index: usize,
        /// The appended text.
        delta: String,
    },
    /// A text block ended.
    TextEnd {
        /// The index of the content block.
        #[serde(rename = "contentIndex")]
        content_index: usize,
        /// The content.
        content: String,
    },
    /// A thinking block starts.
    ThinkingStart {
        /// The index of the content block.
        #[serde(rename = "contentIndex")]
        content_index: usize,
    },
    /// Thinking was appended.
    ThinkingDelta {
        /// The index of the content block.
        #[serde(rename = "contentIndex")]
        content_index: usize,
        /// The appended text.
        delta: String,
    },
    /// A thinking block ended.
    ThinkingEnd {
        /// The index of the content block.
        #[serde(rename = "contentIndex")]
        content_index: usize,
        /// The content.
        content: String,
    },
    /// zi adds the call's `id` and `name`, which a delta-only client cannot learn otherwise
    /// until `toolcall_end`.
    #[serde(rename = "toolcall_start")]
    ToolCallStart {
        /// The index of the content block.
        #[serde(rename = "contentIndex")]
        content_index: usize,
        /// The id.
        id: String,
        /// The name.
        name: String,
    },
    /// Tool call arguments were appended.
    #[serde(rename = "toolcall_delta")]
    ToolCallDelta {
        /// The index of the content block.
        #[serde(rename = "contentIndex")]
        content_index: usize,
        /// The appended text.
        delta: String,
    },
    /// A tool call is complete.
    #[serde(rename = "toolcall_end")]
    ToolCallEnd {
        /// The index of the content block.
        #[serde(rename = "contentIndex")]
        content_index: usize,
        /// The complete call.
        #[serde(rename = "toolCall")]
        tool_call: ToolCall,
    },
    /// The message completed.
    Done {
        /// How the message stopped.
        reason: StopReason,
        /// The completed message.
        #[serde(with = "crate::message::assistant_with_role")]
        #[cfg_attr(
            feature = "schema",
            schemars(with = "crate::schema::AssistantWithRole")
        )]
        message: AssistantMessage,
    },
    /// The message ended with an error.
    Error {
        /// How the message stopped.
        reason: StopReason,
        /// The failed message.
        #[serde(with = "crate::message::assistant_with_role")]
        #[cfg_attr(
            feature = "schema",
            schemars(with = "crate::schema::AssistantWithRole")
        )]
        error: AssistantMessage,
    },
}

/// A tool's result as carried by `tool_execution_end` and `tool_execution_update`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ToolResult {
    /// The content.
    pub content: Vec<ContentBlock>,
    /// Extension-defined details.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub details: Option<Value>,
}

/// Every event an `AgentSession` emits, in source order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum AgentSessionEvent {
    /// A run attempt starts.
    AgentStart,
    /// A run attempt ended.
    AgentEnd {
        /// The messages of the run.
        messages: Vec<AgentMessage>,
        /// Whether the run driver retries after this attempt.
        #[serde(rename = "willRetry")]
        will_retry: bool,
    },
    /// A turn starts.
    TurnStart,
    /// A turn ended.
    TurnEnd {
        /// The message.
        message: AgentMessage,
        /// The tool-result messages of the turn.
        #[serde(rename = "toolResults")]
        tool_results: Vec<AgentMessage>,
    },
    /// A message starts.
    MessageStart {
        /// The message.
        message: AgentMessage,
    },
    /// The streaming assistant message changed (delta only).
    MessageUpdate {
        /// What the provider stream reported.
        #[serde(rename = "assistantMessageEvent")]
        assistant_message_event: AssistantMessageEvent,
    },
    /// A message is complete.
    MessageEnd {
        /// The message.
        message: AgentMessage,
    },
    /// A tool call starts.
    ToolExecutionStart {
        /// The tool call id.
        #[serde(rename = "toolCallId")]
        tool_call_id: String,
        /// The tool name.
        #[serde(rename = "toolName")]
        tool_name: String,
        /// The call arguments.
        args: Value,
    },
    /// A tool reported progress.
    ToolExecutionUpdate {
        /// The tool call id.
        #[serde(rename = "toolCallId")]
        tool_call_id: String,
        /// The tool name.
        #[serde(rename = "toolName")]
        tool_name: String,
        /// The call arguments.
        args: Value,
        /// The partial result so far.
        #[serde(rename = "partialResult")]
        partial_result: Value,
    },
    /// A tool call finished.
    ToolExecutionEnd {
        /// The tool call id.
        #[serde(rename = "toolCallId")]
        tool_call_id: String,
        /// The tool name.
        #[serde(rename = "toolName")]
        tool_name: String,
        /// The result.
        result: ToolResult,
        /// Whether the tool failed.
        #[serde(rename = "isError")]
        is_error: bool,
    },
    /// The run settled and the session is idle again.
    AgentSettled,
    /// A retryable provider error will be retried.
    AutoRetryStart {
        /// The attempt number (1-based).
        attempt: u32,
        /// The most attempts that will be made.
        #[serde(rename = "maxAttempts")]
        max_attempts: u32,
        /// The wait before the attempt.
        #[serde(rename = "delayMs")]
        delay_ms: u64,
        /// When the attempt starts (Unix milliseconds).
        #[serde(rename = "retryAt")]
        retry_at: i64,
        /// The error that is retried (clipped).
        #[serde(rename = "errorMessage")]
        error_message: String,
    },
    /// The retries ended.
    AutoRetryEnd {
        /// Whether a retry succeeded.
        success: bool,
        /// The attempt number (1-based).
        attempt: u32,
        /// The last error, when every attempt failed.
        #[serde(
            rename = "finalError",
            skip_serializing_if = "Option::is_none",
            default
        )]
        final_error: Option<String>,
    },
    /// A queue changed.
    QueueUpdate {
        /// The steering queue.
        steering: Vec<QueuedInput>,
        /// The follow-up queue.
        #[serde(rename = "followUp")]
        follow_up: Vec<QueuedInput>,
    },
    /// An entry was appended to the journal.
    EntryAppended {
        /// The appended journal entry.
        entry: SessionEntry,
    },
    /// The selected model changed.
    ModelChanged {
        /// The model's public descriptor.
        model: RpcModel,
    },
    /// The thinking level changed.
    ThinkingLevelChanged {
        /// The new level.
        level: ThinkingLevel,
    },
    /// The steering mode changed.
    SteeringModeChanged {
        /// The new mode.
        mode: QueueMode,
    },
    /// The follow-up mode changed.
    FollowUpModeChanged {
        /// The new mode.
        mode: QueueMode,
    },
    /// The work plan changed.
    WorkPlanChanged {
        /// The new plan.
        plan: WorkPlan,
    },
    /// A compaction starts.
    CompactionStart {
        /// The compaction's operation id.
        #[serde(rename = "operationId")]
        operation_id: u64,
        /// Why the compaction runs.
        reason: CompactionReason,
    },
    /// A compaction summary request will be retried.
    SummarizationRetryScheduled {
        /// The compaction's operation id.
        #[serde(rename = "operationId")]
        operation_id: u64,
        /// Why the compaction runs.
        reason: CompactionReason,
        /// The attempt number (1-based).
        attempt: u32,
        /// The most attempts that will be made.
        #[serde(rename = "maxAttempts")]
        max_attempts: u32,
        /// The wait before the attempt.
        #[serde(rename = "delayMs")]
        delay_ms: u64,
        /// When the attempt starts (Unix milliseconds).
        #[serde(rename = "retryAt")]
        retry_at: i64,
        /// The error that is retried (clipped).
        #[serde(rename = "errorMessage")]
        error_message: String,
    },
    /// A summary retry attempt starts.
    SummarizationRetryAttemptStart {
        /// The compaction's operation id.
        #[serde(rename = "operationId")]
        operation_id: u64,
        /// Why the compaction runs.
        reason: CompactionReason,
    },
    /// The summary retries ended.
    SummarizationRetryFinished {
        /// The compaction's operation id.
        #[serde(rename = "operationId")]
        operation_id: u64,
        /// Why the compaction runs.
        reason: CompactionReason,
    },
    /// A compaction ended.
    CompactionEnd {
        /// The compaction's operation id.
        #[serde(rename = "operationId")]
        operation_id: u64,
        /// Why the compaction runs.
        reason: CompactionReason,
        /// How it ended.
        outcome: CompactionOutcome,
    },
    /// zi: threshold compaction is held back because the latest compaction did not bring the
    /// usage the provider reported under the trigger (docs/configuration.md#compaction). Emitted
    /// once per such compaction, the first time a compaction would otherwise have run.
    CompactionBackoff {
        /// The context tokens now, with the input about to be sent.
        tokens: u64,
        /// The compaction trigger: the context window minus the reserve.
        trigger: u64,
        /// The first usage the provider reported after the latest compaction.
        #[serde(rename = "tokensAfterCompaction")]
        tokens_after_compaction: u64,
        /// Threshold compaction resumes once the context exceeds this, or the model changes.
        #[serde(rename = "resumeAbove")]
        resume_above: u64,
    },
    /// The same object that `entry_appended` carried just before.
    OperationOutcome {
        /// How it ended.
        outcome: SessionEntry,
    },
    /// A background shell task changed.
    ShellTaskChanged {
        /// The background task id.
        #[serde(rename = "taskId")]
        task_id: String,
    },
    /// Something about a subagent changed (lifecycle, bookkeeping, its completion ledger);
    /// clients re-read what they need.
    SubagentChanged {
        /// The runtime name.
        name: String,
    },
}

impl AgentSessionEvent {
    /// The event `type` on the wire.
    pub fn type_name(&self) -> &'static str {
        match self {
            AgentSessionEvent::AgentStart => "agent_start",
            AgentSessionEvent::AgentEnd { .. } => "agent_end",
            AgentSessionEvent::TurnStart => "turn_start",
            AgentSessionEvent::TurnEnd { .. } => "turn_end",
            AgentSessionEvent::MessageStart { .. } => "message_start",
            AgentSessionEvent::MessageUpdate { .. } => "message_update",
            AgentSessionEvent::MessageEnd { .. } => "message_end",
            AgentSessionEvent::ToolExecutionStart { .. } => "tool_execution_start",
            AgentSessionEvent::ToolExecutionUpdate { .. } => "tool_execution_update",
            AgentSessionEvent::ToolExecutionEnd { .. } => "tool_execution_end",
            AgentSessionEvent::AgentSettled => "agent_settled",
            AgentSessionEvent::AutoRetryStart { .. } => "auto_retry_start",
            AgentSessionEvent::AutoRetryEnd { .. } => "auto_retry_end",
            AgentSessionEvent::QueueUpdate { .. } => "queue_update",
            AgentSessionEvent::EntryAppended { .. } => "entry_appended",
            AgentSessionEvent::ModelChanged { .. } => "model_changed",
            AgentSessionEvent::ThinkingLevelChanged { .. } => "thinking_level_changed",
            AgentSessionEvent::SteeringModeChanged { .. } => "steering_mode_changed",
            AgentSessionEvent::FollowUpModeChanged { .. } => "follow_up_mode_changed",
            AgentSessionEvent::WorkPlanChanged { .. } => "work_plan_changed",
            AgentSessionEvent::CompactionStart { .. } => "compaction_start",
            AgentSessionEvent::SummarizationRetryScheduled { .. } => {
                "summarization_retry_scheduled"
            }
            AgentSessionEvent::SummarizationRetryAttemptStart { .. } => {
                "summarization_retry_attempt_start"
            }
            AgentSessionEvent::SummarizationRetryFinished { .. } => "summarization_retry_finished",
            AgentSessionEvent::CompactionEnd { .. } => "compaction_end",
            AgentSessionEvent::CompactionBackoff { .. } => "compaction_backoff",
            AgentSessionEvent::OperationOutcome { .. } => "operation_outcome",
            AgentSessionEvent::ShellTaskChanged { .. } => "shell_task_changed",
            AgentSessionEvent::SubagentChanged { .. } => "subagent_changed",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::UserMessage;

    #[test]
    fn entry_serializes_data_fields_first() {
        let entry = SessionEntry {
            data: EntryData::Message {
                message: AgentMessage::User(UserMessage {
                    content: crate::message::MessageContent::Text("hi".into()),
                    timestamp: 1,
                }),
            },
            id: "a".into(),
            parent_id: None,
            timestamp: "2026-01-01T00:00:00.000Z".into(),
        };
        let json = serde_json::to_string(&entry).unwrap_or_default();
        assert_eq!(
            json,
            r#"{"type":"message","message":{"role":"user","content":"hi","timestamp":1},"id":"a","parentId":null,"timestamp":"2026-01-01T00:00:00.000Z"}"#
        );
        let back: SessionEntry = serde_json::from_str(&json).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(back, entry);
    }

    #[test]
    fn outcome_entry_keys_follow_the_envelope_order() {
        let entry = SessionEntry {
            data: EntryData::OperationOutcome(OperationOutcome {
                operation_id: "shell/background_task/task-1".into(),
                capability: "shell".into(),
                operation: "background_task".into(),
                result: OutcomeResult::Succeeded,
                duration_ms: 5,
                evidence: serde_json::json!({"taskId": "task-1"}),
            }),
            id: "b".into(),
            parent_id: Some("a".into()),
            timestamp: "2026-01-01T00:00:00.000Z".into(),
        };
        let json = serde_json::to_string(&entry).unwrap_or_default();
        assert_eq!(
            json,
            r#"{"type":"operation_outcome","operationId":"shell/background_task/task-1","capability":"shell","operation":"background_task","result":"succeeded","durationMs":5,"evidence":{"taskId":"task-1"},"id":"b","parentId":"a","timestamp":"2026-01-01T00:00:00.000Z"}"#
        );
        let back: SessionEntry = serde_json::from_str(&json).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(back, entry);
    }

    #[test]
    fn subagent_entry_keys_follow_the_reference() {
        let data = EntryData::Subagent(SubagentEntry::WorkCycleStarted {
            name: "worker".into(),
            work_cycle: 2,
            task: Some("fix it".into()),
        });
        let json = serde_json::to_string(&data).unwrap_or_default();
        assert_eq!(
            json,
            r#"{"type":"subagent","event":"work_cycle_started","name":"worker","workCycle":2,"task":"fix it"}"#
        );
        let back: EntryData = serde_json::from_str(&json).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(back, data);
    }

    #[test]
    fn delta_only_update_has_no_partial() {
        let event = AgentSessionEvent::MessageUpdate {
            assistant_message_event: AssistantMessageEvent::TextDelta {
                content_index: 0,
                delta: "abc".into(),
            },
        };
        assert_eq!(
            serde_json::to_string(&event).unwrap_or_default(),
            r#"{"type":"message_update","assistantMessageEvent":{"type":"text_delta","contentIndex":0,"delta":"abc"}}"#
        );
    }
}
