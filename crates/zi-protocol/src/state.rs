//! The session state snapshot carried by `ready` and `session.get_state`
//! (docs/rpc.md#the-state-snapshot).

use serde::{Deserialize, Serialize};

use crate::ThinkingLevel;
use crate::message::AgentMessage;

/// The public model descriptor (docs/rpc.md#frames). Never carries base URLs, headers, prices
/// or credentials.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct RpcModel {
    /// The provider id (`anthropic`, or a `models.json` provider).
    pub provider: String,
    /// The model id within the provider.
    pub id: String,
    /// The display name.
    pub name: String,
    /// Whether the model reasons (supports thinking levels above `off`).
    pub reasoning: bool,
    /// The input kinds it accepts.
    pub input: Vec<InputKind>,
    /// The context window, in tokens.
    pub context_window: u64,
    /// The largest output, in tokens.
    pub max_tokens: u64,
}

/// A `model.list` item: the public descriptor plus whether credentials resolve for it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct CatalogModel {
    /// The public descriptor (flattened into the item).
    #[serde(flatten)]
    pub model: RpcModel,
    /// Whether credentials resolve for the model's provider.
    pub configured: bool,
}

/// A kind of model input.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum InputKind {
    /// Text.
    Text,
    /// Images.
    Image,
}

/// What the session is doing (`state.activity`), by the precedence of
/// docs/rpc.md#the-state-snapshot.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Activity {
    /// Nothing runs (also the projection of the failed, reloading and disposed states).
    Idle,
    /// A run is streaming.
    Running,
    /// An abort is in progress.
    Aborting,
    /// A compaction runs.
    Compacting {
        /// The compaction's operation id.
        #[serde(rename = "operationId")]
        operation_id: u64,
        /// Why it runs.
        reason: CompactionReason,
    },
    /// An extension command runs.
    ExtensionCommand {
        /// The command name.
        name: String,
        /// Whether it executes or is being cancelled.
        phase: CommandPhase,
    },
}

/// The phase of a running extension command.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum CommandPhase {
    /// Running normally.
    Executing,
    /// Its abort signal has fired.
    Cancelling,
}

/// Why a compaction runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum CompactionReason {
    /// Requested explicitly.
    Manual,
    /// The context went over the compaction threshold.
    Threshold,
    /// The provider reported a context overflow.
    Overflow,
}

/// The selected model (`state.model`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ModelState {
    /// No model is selected.
    Unselected,
    /// A model is selected.
    Selected {
        /// Its public descriptor.
        model: RpcModel,
    },
}

/// How many queued inputs are delivered at once (`steeringMode`, `followUpMode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub enum QueueMode {
    /// The whole queue.
    #[serde(rename = "all")]
    All,
    /// One input per delivery point.
    #[default]
    #[serde(rename = "one-at-a-time")]
    OneAtATime,
}

/// A queued user input as listed in `queuedInputs` and `queue_update`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct QueuedInput {
    /// The queue entry id.
    pub id: u64,
    /// Which queue holds it.
    pub delivery: QueuedDelivery,
    /// The input text.
    pub text: String,
    /// Attached images, in the order they follow the text.
    pub images: Vec<crate::image::ImageContent>,
    /// Its size as counted against the queue bound.
    pub bytes: u64,
}

/// Which queue a queued input is on (camelCase here, unlike `session.prompt`'s delivery).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub enum QueuedDelivery {
    /// The steering queue.
    #[serde(rename = "steer")]
    Steer,
    /// The follow-up queue.
    #[serde(rename = "followUp")]
    FollowUp,
}

/// Both input queues, in delivery order (`state.queuedInputs`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct QueuedInputs {
    /// The steering queue.
    pub steering: Vec<QueuedInput>,
    /// The follow-up queue.
    pub follow_up: Vec<QueuedInput>,
}

/// The status of a work plan step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum PlanStepStatus {
    /// Not started.
    Pending,
    /// Being worked on.
    InProgress,
    /// Done.
    Completed,
    /// Dropped.
    Cancelled,
}

/// One step of the work plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct PlanStep {
    /// What the step does.
    pub text: String,
    /// Its status.
    pub status: PlanStepStatus,
}

/// The work plan (`state.workPlan`); revision 0 with no steps when none exists.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct WorkPlan {
    /// Incremented by every plan update.
    pub revision: u64,
    /// The latest explanation, if any.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub explanation: Option<String>,
    /// The steps, in order.
    pub steps: Vec<PlanStep>,
}

/// Whether a compaction runs (`state.compaction`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum CompactionStatus {
    /// None runs.
    Idle,
    /// One runs.
    Running {
        /// The compaction's operation id.
        #[serde(rename = "operationId")]
        operation_id: u64,
        /// Why it runs.
        reason: CompactionReason,
    },
}

/// Whether a retry is pending (`state.retry`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum RetryStatus {
    /// No retry is pending.
    Idle,
    /// A retry waits for its delay.
    Waiting(RetryWait),
}

/// A pending retry, by what is retried.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "source", rename_all = "snake_case")]
pub enum RetryWait {
    /// A run's provider request waiting to be retried.
    Agent {
        /// The attempt about to be made (1-based).
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
    /// A compaction's summary request waiting to be retried.
    Compaction {
        /// The compaction's operation id.
        #[serde(rename = "operationId")]
        operation_id: u64,
        /// Why the compaction runs.
        reason: CompactionReason,
        /// The attempt about to be made (1-based).
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
}

/// How full the context window is (`state.contextUsage`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ContextUsage {
    /// No figure can be given.
    Unavailable {
        /// Why.
        reason: UnavailableReason,
    },
    /// From the provider's usage report of the last response.
    Measured {
        /// Tokens in the context.
        tokens: u64,
        /// The model's context window.
        #[serde(rename = "contextWindow")]
        context_window: u64,
        /// `tokens` as a percentage of the window.
        percent: f64,
    },
    /// Estimated from the message text.
    Estimated {
        /// Tokens in the context (estimated).
        tokens: u64,
        /// The model's context window.
        #[serde(rename = "contextWindow")]
        context_window: u64,
        /// `tokens` as a percentage of the window.
        percent: f64,
    },
}

/// Why the context usage is unavailable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum UnavailableReason {
    /// No model is selected.
    NoModel,
    /// The model's context window is unknown.
    UnknownWindow,
}

/// The whole snapshot, keys in Zi's emitted order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct SessionState {
    /// The journal header id.
    pub session_id: String,
    /// What the session is doing.
    pub activity: Activity,
    /// The selected model.
    pub model: ModelState,
    /// The effective thinking level.
    pub thinking_level: ThinkingLevel,
    /// The levels the selected model supports (`["off"]` without a model).
    pub supported_thinking_levels: Vec<ThinkingLevel>,
    /// How the steering queue is delivered.
    pub steering_mode: QueueMode,
    /// How the follow-up queue is delivered.
    pub follow_up_mode: QueueMode,
    /// Both input queues.
    pub queued_inputs: QueuedInputs,
    /// The work plan.
    pub work_plan: WorkPlan,
    /// The length of the presentation message list.
    pub message_count: u64,
    /// The partial assistant message, present only while one streams.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub streaming_message: Option<AgentMessage>,
    /// Whether a compaction runs.
    pub compaction: CompactionStatus,
    /// Whether a retry is pending.
    pub retry: RetryStatus,
    /// How full the context window is.
    pub context_usage: ContextUsage,
    /// Approvals, only for connections that called `connection.set_approvals` (never in
    /// `ready`).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub approvals: Option<crate::approval::ApprovalsState>,
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
            approvals: None,
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
