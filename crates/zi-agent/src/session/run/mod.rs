//! The run driver and agent loop (docs/architecture.md#the-run).
//!
//! One run is one logical prompt: it emits `agent_start`, one or more turns, `agent_end` and,
//! once everything has settled, exactly one `agent_settled`. Each turn streams one assistant
//! message, runs its tool calls and then polls the steering queue; when the loop would stop,
//! the follow-up queue is polled.

use tokio_util::sync::CancellationToken;
use zi_os::clock::now_millis;
use zi_protocol::event::AgentSessionEvent;
use zi_protocol::image::ImageContent;
use zi_protocol::message::{
    AgentMessage, AssistantMessage, ContentBlock, MessageContent, UserMessage,
};
use zi_protocol::state::{CompactionReason, RetryStatus};

use crate::session::custom::CustomMessageInput;
use crate::session::{AgentSession, RunActivity};

mod commit;
mod compaction;
pub(super) use compaction::manual as manual_compaction;
mod retry;
mod tools;
mod turn;

/// What a run reports in the state snapshot while it runs. Only the run writes it; the rest of
/// the session reads it through the accessors.
pub(super) struct RunProgress {
    /// The assistant message being streamed.
    streaming: Option<AssistantMessage>,
    /// A scheduled automatic retry (`retry` of docs/rpc.md#the-state-snapshot).
    retry: RetryStatus,
    /// The automatic compaction in progress: operation id and reason.
    compacting: Option<(u64, CompactionReason)>,
    /// The compaction backoff already announced (its `reported_at`), so it is said once.
    backoff_announced: Option<i64>,
}

impl Default for RunProgress {
    fn default() -> Self {
        RunProgress {
            streaming: None,
            retry: RetryStatus::Idle,
            compacting: None,
            backoff_announced: None,
        }
    }
}

impl RunProgress {
    pub(in crate::session) fn streaming(&self) -> Option<&AssistantMessage> {
        self.streaming.as_ref()
    }

    pub(in crate::session) fn retry(&self) -> &RetryStatus {
        &self.retry
    }

    pub(in crate::session) fn compacting(&self) -> Option<(u64, CompactionReason)> {
        self.compacting
    }
}

/// A message waiting to be delivered at the start of a turn.
enum Pending {
    Message(AgentMessage),
    Custom(CustomMessageInput),
}

/// Why the turn loop stopped early.
struct RunStopped;

struct Run {
    session: AgentSession,
    cancel: CancellationToken,
    /// Every message the current loop pass committed, for `agent_end`.
    messages: Vec<AgentMessage>,
    /// Automatic compactions attempted in this run (at most 4).
    auto_compactions: u32,
    /// Overflow recoveries in this run (at most 1).
    overflow_recoveries: u32,
    /// Set when a threshold compaction failed: no further threshold attempts this run.
    threshold_suppressed: bool,
    /// The last assistant message committed, whatever its stop reason.
    last_assistant: Option<AssistantMessage>,
    /// The attempt of an automatic retry in flight, until its `auto_retry_end`.
    retry_attempt: Option<u32>,
    /// Set when a journal append failed: the run stops and is not retried.
    journal_failed: bool,
}

pub(super) async fn run(
    session: AgentSession,
    run_id: u64,
    cancel: CancellationToken,
    held: Vec<CustomMessageInput>,
    prompt: Option<super::admission::UserInput>,
) {
    let mut run = Run::new(session, cancel);
    let mut input: Vec<Pending> = held.into_iter().map(Pending::Custom).collect();
    input.extend(prompt.map(|input| Pending::Message(user_message(input.text, input.images))));
    // Pre-run compaction: recover from an overflow left by the previous run, then make room
    // for the prompt if the context is over the threshold. It precedes `agent_start`.
    let prepared = run.pre_run_compaction(&input).await;
    let mut attempts = 0u32;
    loop {
        run.emit(AgentSessionEvent::AgentStart);
        run.last_assistant = None;
        let stopped = prepared.is_err() || run.turn_loop(std::mem::take(&mut input)).await.is_err();
        let plan = if stopped {
            run.plan_retry(attempts)
        } else {
            None
        };
        let messages = std::mem::take(&mut run.messages);
        // Every large frame (`agent_end` carries the run's messages) waits for output room.
        run.wait_for_output_room().await;
        run.emit(AgentSessionEvent::AgentEnd {
            messages,
            will_retry: plan.is_some(),
        });
        let Some(plan) = plan else {
            run.end_retry_after_failure();
            break;
        };
        attempts = plan.attempt;
        if !run.wait_for_retry(plan).await {
            break;
        }
    }
    run.finish(run_id);
}

/// A user message as Zi builds it: `[{type:"text", text}, ...images]` (`UserMessage` in
/// docs/rpc-schema.json).
fn user_message(text: String, images: Vec<ImageContent>) -> AgentMessage {
    let mut content = Vec::with_capacity(1 + images.len());
    content.push(ContentBlock::text(text));
    content.extend(images.into_iter().map(ContentBlock::from));
    AgentMessage::User(UserMessage {
        content: MessageContent::Parts(content),
        timestamp: now_millis(),
    })
}

impl Run {
    fn new(session: AgentSession, cancel: CancellationToken) -> Run {
        Run {
            session,
            cancel,
            messages: Vec::new(),
            auto_compactions: 0,
            overflow_recoveries: 0,
            threshold_suppressed: false,
            last_assistant: None,
            retry_attempt: None,
            journal_failed: false,
        }
    }

    fn emit(&self, event: AgentSessionEvent) {
        self.session.lock().emit(event);
    }

    /// Durable sync, idle, then `agent_settled`.
    fn finish(self, run_id: u64) {
        let mut state = self.session.lock();
        state.progress.streaming = None;
        state.progress.retry = RetryStatus::Idle;
        state.approvals.end_run();
        if let Err(error) = state.journal.sync() {
            tracing::error!("{error}");
        }
        if matches!(state.activity, RunActivity::Running { run_id: current, .. } if current == run_id)
        {
            state.activity = RunActivity::Idle;
        }
        state.emit(AgentSessionEvent::AgentSettled);
        drop(state);
        if let Some(delivery) = self.session.context_delivery() {
            delivery.run_ended();
        }
        self.session
            .inner
            .settled
            .send_modify(|generation| *generation += 1);
    }
}
