//! Session events (rpc-reference §9) and the journal entries they carry (§11).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::ThinkingLevel;
use crate::message::{
    AgentMessage, AssistantMessage, ContentBlock, MessageContent, StopReason, ToolCall,
};
use crate::state::{CompactionReason, QueueMode, QueuedInput, RpcModel, WorkPlan};

/// A journal entry: its data fields, then `id`, `parentId` and `timestamp`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct SessionEntry {
    #[serde(flatten)]
    pub data: EntryData,
    pub id: String,
    pub parent_id: Option<String>,
    /// ISO-8601 UTC with milliseconds.
    pub timestamp: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum EntryData {
    Message {
        message: AgentMessage,
    },
    ModelChange {
        provider: String,
        #[serde(rename = "modelId")]
        model_id: String,
    },
    ThinkingLevelChange {
        #[serde(rename = "thinkingLevel")]
        thinking_level: ThinkingLevel,
    },
    Retry {
        #[serde(rename = "failedEntryId")]
        failed_entry_id: String,
        attempt: u32,
    },
    Custom {
        #[serde(rename = "customType")]
        custom_type: String,
        #[serde(skip_serializing_if = "Option::is_none", default)]
        data: Option<Value>,
    },
    CustomMessage {
        #[serde(rename = "customType")]
        custom_type: String,
        content: MessageContent,
        display: bool,
        #[serde(skip_serializing_if = "Option::is_none", default)]
        details: Option<Value>,
    },
    WorkPlan(WorkPlan),
    Compaction(CompactionEntry),
    /// Durable evidence that a runtime-owned operation finished (rpc-reference §11.3). The
    /// stored keys are closed: these six plus `type`, `id`, `parentId` and `timestamp`.
    OperationOutcome(OperationOutcome),
}

/// File lists gathered for a compaction (runtime-reference §8.3).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct CompactionDetails {
    pub read_files: Vec<String>,
    pub modified_files: Vec<String>,
    pub omitted_read_files: u64,
    pub omitted_modified_files: u64,
}

/// The data of a `compaction` journal entry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct CompactionEntry {
    pub reason: CompactionReason,
    pub summary: String,
    pub first_kept_entry_id: String,
    pub tokens_before: u64,
    pub estimated_tokens_after: u64,
    pub details: CompactionDetails,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub excluded_failure_entry_id: Option<String>,
}

/// `compaction_end.outcome.result`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct CompactionResult {
    pub reason: CompactionReason,
    pub summary: String,
    pub first_kept_entry_id: String,
    pub tokens_before: u64,
    pub estimated_tokens_after: u64,
    pub compacted_entries: u64,
    pub details: CompactionDetails,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum CompactionOutcome {
    Completed { result: CompactionResult },
    Cancelled,
    Failed { message: String },
}

/// The data fields of an `operation_outcome` entry, in emission order.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OperationOutcome {
    pub operation_id: String,
    pub capability: String,
    pub operation: String,
    pub result: OutcomeResult,
    pub duration_ms: u64,
    pub evidence: Value,
}

#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OutcomeResult {
    Succeeded,
    Failed,
    Cancelled,
}

impl EntryData {
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
        }
    }
}

/// What the provider stream reports while an assistant message streams. On the wire this is
/// delta-only: no cumulative `partial` snapshot (DESIGN.md, compatibility choices).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum AssistantMessageEvent {
    Start,
    TextStart {
        #[serde(rename = "contentIndex")]
        content_index: usize,
    },
    TextDelta {
        #[serde(rename = "contentIndex")]
        content_index: usize,
        delta: String,
    },
    TextEnd {
        #[serde(rename = "contentIndex")]
        content_index: usize,
        content: String,
    },
    ThinkingStart {
        #[serde(rename = "contentIndex")]
        content_index: usize,
    },
    ThinkingDelta {
        #[serde(rename = "contentIndex")]
        content_index: usize,
        delta: String,
    },
    ThinkingEnd {
        #[serde(rename = "contentIndex")]
        content_index: usize,
        content: String,
    },
    /// zi adds the call's `id` and `name`, which a delta-only client cannot learn otherwise
    /// until `toolcall_end`.
    #[serde(rename = "toolcall_start")]
    ToolCallStart {
        #[serde(rename = "contentIndex")]
        content_index: usize,
        id: String,
        name: String,
    },
    #[serde(rename = "toolcall_delta")]
    ToolCallDelta {
        #[serde(rename = "contentIndex")]
        content_index: usize,
        delta: String,
    },
    #[serde(rename = "toolcall_end")]
    ToolCallEnd {
        #[serde(rename = "contentIndex")]
        content_index: usize,
        #[serde(rename = "toolCall")]
        tool_call: ToolCall,
    },
    Done {
        reason: StopReason,
        #[serde(with = "crate::message::assistant_with_role")]
        #[cfg_attr(
            feature = "schema",
            schemars(with = "crate::schema::AssistantWithRole")
        )]
        message: AssistantMessage,
    },
    Error {
        reason: StopReason,
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
    pub content: Vec<ContentBlock>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub details: Option<Value>,
}

/// Every event an `AgentSession` emits, in source order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum AgentSessionEvent {
    AgentStart,
    AgentEnd {
        messages: Vec<AgentMessage>,
        #[serde(rename = "willRetry")]
        will_retry: bool,
    },
    TurnStart,
    TurnEnd {
        message: AgentMessage,
        #[serde(rename = "toolResults")]
        tool_results: Vec<AgentMessage>,
    },
    MessageStart {
        message: AgentMessage,
    },
    MessageUpdate {
        #[serde(rename = "assistantMessageEvent")]
        assistant_message_event: AssistantMessageEvent,
    },
    MessageEnd {
        message: AgentMessage,
    },
    ToolExecutionStart {
        #[serde(rename = "toolCallId")]
        tool_call_id: String,
        #[serde(rename = "toolName")]
        tool_name: String,
        args: Value,
    },
    ToolExecutionUpdate {
        #[serde(rename = "toolCallId")]
        tool_call_id: String,
        #[serde(rename = "toolName")]
        tool_name: String,
        args: Value,
        #[serde(rename = "partialResult")]
        partial_result: Value,
    },
    ToolExecutionEnd {
        #[serde(rename = "toolCallId")]
        tool_call_id: String,
        #[serde(rename = "toolName")]
        tool_name: String,
        result: ToolResult,
        #[serde(rename = "isError")]
        is_error: bool,
    },
    AgentSettled,
    AutoRetryStart {
        attempt: u32,
        #[serde(rename = "maxAttempts")]
        max_attempts: u32,
        #[serde(rename = "delayMs")]
        delay_ms: u64,
        #[serde(rename = "retryAt")]
        retry_at: i64,
        #[serde(rename = "errorMessage")]
        error_message: String,
    },
    AutoRetryEnd {
        success: bool,
        attempt: u32,
        #[serde(
            rename = "finalError",
            skip_serializing_if = "Option::is_none",
            default
        )]
        final_error: Option<String>,
    },
    QueueUpdate {
        steering: Vec<QueuedInput>,
        #[serde(rename = "followUp")]
        follow_up: Vec<QueuedInput>,
    },
    EntryAppended {
        entry: SessionEntry,
    },
    ModelChanged {
        model: RpcModel,
    },
    ThinkingLevelChanged {
        level: ThinkingLevel,
    },
    SteeringModeChanged {
        mode: QueueMode,
    },
    FollowUpModeChanged {
        mode: QueueMode,
    },
    WorkPlanChanged {
        plan: WorkPlan,
    },
    CompactionStart {
        #[serde(rename = "operationId")]
        operation_id: u64,
        reason: CompactionReason,
    },
    SummarizationRetryScheduled {
        #[serde(rename = "operationId")]
        operation_id: u64,
        reason: CompactionReason,
        attempt: u32,
        #[serde(rename = "maxAttempts")]
        max_attempts: u32,
        #[serde(rename = "delayMs")]
        delay_ms: u64,
        #[serde(rename = "retryAt")]
        retry_at: i64,
        #[serde(rename = "errorMessage")]
        error_message: String,
    },
    SummarizationRetryAttemptStart {
        #[serde(rename = "operationId")]
        operation_id: u64,
        reason: CompactionReason,
    },
    SummarizationRetryFinished {
        #[serde(rename = "operationId")]
        operation_id: u64,
        reason: CompactionReason,
    },
    CompactionEnd {
        #[serde(rename = "operationId")]
        operation_id: u64,
        reason: CompactionReason,
        outcome: CompactionOutcome,
    },
    /// The same object that `entry_appended` carried just before.
    OperationOutcome {
        outcome: SessionEntry,
    },
    ShellTaskChanged {
        #[serde(rename = "taskId")]
        task_id: String,
    },
}

impl AgentSessionEvent {
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
            AgentSessionEvent::OperationOutcome { .. } => "operation_outcome",
            AgentSessionEvent::ShellTaskChanged { .. } => "shell_task_changed",
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
