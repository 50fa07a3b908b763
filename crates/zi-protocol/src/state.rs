//! The session state snapshot carried by `ready` and `session.get_state` (rpc-reference §5).

use serde::{Deserialize, Serialize};

use crate::ThinkingLevel;
use crate::message::AgentMessage;

/// The public model descriptor (rpc-reference §12.1). Never carries base URLs, headers, prices
/// or credentials.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct RpcModel {
    pub provider: String,
    pub id: String,
    pub name: String,
    pub reasoning: bool,
    pub input: Vec<InputKind>,
    pub context_window: u64,
    pub max_tokens: u64,
}

/// A `model.list` item: the public descriptor plus whether credentials resolve for it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct CatalogModel {
    #[serde(flatten)]
    pub model: RpcModel,
    pub configured: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum InputKind {
    Text,
    Image,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Activity {
    Idle,
    Running,
    Aborting,
    Compacting {
        #[serde(rename = "operationId")]
        operation_id: u64,
        reason: CompactionReason,
    },
    ExtensionCommand {
        name: String,
        phase: CommandPhase,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum CommandPhase {
    Executing,
    Cancelling,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum CompactionReason {
    Manual,
    Threshold,
    Overflow,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ModelState {
    Unselected,
    Selected { model: RpcModel },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub enum QueueMode {
    #[serde(rename = "all")]
    All,
    #[default]
    #[serde(rename = "one-at-a-time")]
    OneAtATime,
}

/// A queued user input as listed in `queuedInputs` and `queue_update`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct QueuedInput {
    pub id: u64,
    pub delivery: QueuedDelivery,
    pub text: String,
    pub images: Vec<crate::message::ContentBlock>,
    pub bytes: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub enum QueuedDelivery {
    #[serde(rename = "steer")]
    Steer,
    #[serde(rename = "followUp")]
    FollowUp,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct QueuedInputs {
    pub steering: Vec<QueuedInput>,
    pub follow_up: Vec<QueuedInput>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum PlanStepStatus {
    Pending,
    InProgress,
    Completed,
    Cancelled,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct PlanStep {
    pub text: String,
    pub status: PlanStepStatus,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct WorkPlan {
    pub revision: u64,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub explanation: Option<String>,
    pub steps: Vec<PlanStep>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum CompactionStatus {
    Idle,
    Running {
        #[serde(rename = "operationId")]
        operation_id: u64,
        reason: CompactionReason,
    },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum RetryStatus {
    Idle,
    Waiting(RetryWait),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "source", rename_all = "snake_case")]
pub enum RetryWait {
    Agent {
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
    /// A compaction's summary request waiting to be retried.
    Compaction {
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
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ContextUsage {
    Unavailable {
        reason: UnavailableReason,
    },
    Measured {
        tokens: u64,
        #[serde(rename = "contextWindow")]
        context_window: u64,
        percent: f64,
    },
    Estimated {
        tokens: u64,
        #[serde(rename = "contextWindow")]
        context_window: u64,
        percent: f64,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum UnavailableReason {
    NoModel,
    UnknownWindow,
}

/// The whole snapshot, keys in Zi's emitted order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct SessionState {
    pub session_id: String,
    pub activity: Activity,
    pub model: ModelState,
    pub thinking_level: ThinkingLevel,
    pub supported_thinking_levels: Vec<ThinkingLevel>,
    pub steering_mode: QueueMode,
    pub follow_up_mode: QueueMode,
    pub queued_inputs: QueuedInputs,
    pub work_plan: WorkPlan,
    pub message_count: u64,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub streaming_message: Option<AgentMessage>,
    pub compaction: CompactionStatus,
    pub retry: RetryStatus,
    pub context_usage: ContextUsage,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fresh_state_matches_the_reference_ready_frame() {
        let state = SessionState {
            session_id: "s".into(),
            activity: Activity::Idle,
            model: ModelState::Unselected,
            thinking_level: ThinkingLevel::Off,
            supported_thinking_levels: vec![ThinkingLevel::Off],
            steering_mode: QueueMode::OneAtATime,
            follow_up_mode: QueueMode::OneAtATime,
            queued_inputs: QueuedInputs::default(),
            work_plan: WorkPlan::default(),
            message_count: 0,
            streaming_message: None,
            compaction: CompactionStatus::Idle,
            retry: RetryStatus::Idle,
            context_usage: ContextUsage::Unavailable {
                reason: UnavailableReason::NoModel,
            },
        };
        let json = serde_json::to_string(&state).unwrap_or_default();
        assert_eq!(
            json,
            r#"{"sessionId":"s","activity":{"type":"idle"},"model":{"type":"unselected"},"thinkingLevel":"off","supportedThinkingLevels":["off"],"steeringMode":"one-at-a-time","followUpMode":"one-at-a-time","queuedInputs":{"steering":[],"followUp":[]},"workPlan":{"revision":0,"steps":[]},"messageCount":0,"compaction":{"type":"idle"},"retry":{"type":"idle"},"contextUsage":{"type":"unavailable","reason":"no_model"}}"#
        );
    }

    #[test]
    fn retry_wait_has_type_then_source() {
        let status = RetryStatus::Waiting(RetryWait::Agent {
            attempt: 1,
            max_attempts: 3,
            delay_ms: 2000,
            retry_at: 5,
            error_message: "overloaded".into(),
        });
        let json = serde_json::to_string(&status).unwrap_or_default();
        assert_eq!(
            json,
            r#"{"type":"waiting","source":"agent","attempt":1,"maxAttempts":3,"delayMs":2000,"retryAt":5,"errorMessage":"overloaded"}"#
        );
    }
}
