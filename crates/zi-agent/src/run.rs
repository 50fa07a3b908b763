//! The run driver and agent loop (runtime-reference §5).
//!
//! One run is one logical prompt: it emits `agent_start`, one or more turns, `agent_end` and,
//! once everything has settled, exactly one `agent_settled`. Each turn streams one assistant
//! message, runs its tool calls and then polls the steering queue; when the loop would stop,
//! the follow-up queue is polled.

use std::sync::Arc;

use futures::stream::{FuturesUnordered, StreamExt};
use serde_json::Value;
use tokio_util::sync::CancellationToken;
use zi_ai::classify;
use zi_ai::stream::{ABORTED_MESSAGE, empty_assistant, stream_assistant};
use zi_ai::{AssistantMessageEvent, LlmContext, Model, StreamOptions};
use zi_protocol::event::{AgentSessionEvent, CompactionOutcome, CompactionResult, EntryData};
use zi_protocol::message::{
    AgentMessage, AssistantMessage, ContentBlock, MessageContent, StopReason, ToolCall,
    ToolResultMessage, UserMessage,
};
use zi_protocol::state::{CompactionReason, QueuedDelivery, RetryStatus, RetryWait};

use crate::compaction::{self, Limits, SummaryError};
use crate::context_usage::{context_usage, estimate_message};
use crate::custom::CustomMessageInput;
use crate::errors;
use crate::journal::now_millis;
use crate::queue::QueueItem;
use crate::session::{AgentSession, RunActivity};
use crate::tool::{ExecutionMode, ProgressSink, ToolCallContext, ToolOutput};

/// How long a tool may keep running after cancellation before it is abandoned.
const TOOL_CANCEL_GRACE: std::time::Duration = std::time::Duration::from_secs(5);

/// `auto_retry_end.finalError` when an interruption cancels a scheduled retry.
pub const RETRY_CANCELLED: &str = "Retry cancelled";

/// Longest `errorMessage` carried by `auto_retry_start` and the retry state.
const MAX_RETRY_ERROR_BYTES: usize = 2_000;

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
}

/// What follows a loop pass that ended with a failed assistant message.
struct RetryPlan {
    attempt: u32,
    max_attempts: u32,
    delay_ms: u64,
    failed_entry_id: String,
    error_message: String,
}

/// Automatic compactions allowed per run.
const MAX_AUTO_COMPACTIONS: u32 = 4;

fn estimate_pending(pending: &[Pending]) -> u64 {
    pending
        .iter()
        .map(|item| match item {
            Pending::Message(message) => estimate_message(message),
            Pending::Custom(message) => message.content_bytes().div_ceil(4),
        })
        .sum()
}

pub(crate) async fn run(
    session: AgentSession,
    run_id: u64,
    cancel: CancellationToken,
    prompt: Option<String>,
) {
    let mut run = Run {
        session,
        cancel,
        messages: Vec::new(),
        auto_compactions: 0,
        overflow_recoveries: 0,
        threshold_suppressed: false,
        last_assistant: None,
        retry_attempt: None,
    };
    let mut input: Vec<Pending> = prompt
        .map(|text| Pending::Message(user_message(text)))
        .into_iter()
        .collect();
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

fn user_message(text: String) -> AgentMessage {
    AgentMessage::User(UserMessage {
        content: MessageContent::Parts(vec![ContentBlock::text(text)]),
        timestamp: now_millis(),
    })
}

impl Run {
    fn emit(&self, event: AgentSessionEvent) {
        self.session.lock().emit(event);
    }

    async fn turn_loop(&mut self, initial: Vec<Pending>) -> Result<(), RunStopped> {
        let mut pending = initial;
        // Steering queued before the run is delivered before the first provider call.
        pending.extend(self.take_queued(QueuedDelivery::Steer));
        let mut first_turn = true;
        loop {
            loop {
                if !first_turn {
                    self.maybe_threshold_compact(estimate_pending(&pending))
                        .await?;
                }
                first_turn = false;
                self.emit(AgentSessionEvent::TurnStart);
                for item in std::mem::take(&mut pending) {
                    match item {
                        Pending::Message(message) => self.commit_started(message)?,
                        Pending::Custom(message) => self.commit_custom(message)?,
                    }
                }
                let assistant = self.stream_turn().await?;
                if matches!(
                    assistant.stop_reason,
                    StopReason::Error | StopReason::Aborted
                ) {
                    let overflowed = assistant.stop_reason == StopReason::Error
                        && assistant
                            .error_message
                            .as_deref()
                            .is_some_and(classify::is_context_overflow);
                    self.emit(AgentSessionEvent::TurnEnd {
                        message: AgentMessage::Assistant(assistant),
                        tool_results: Vec::new(),
                    });
                    if overflowed && self.recover_overflow().await? {
                        continue;
                    }
                    return Err(RunStopped);
                }
                let results = self.execute_tools(&assistant).await?;
                let had_tool_calls = !results.is_empty();
                self.emit(AgentSessionEvent::TurnEnd {
                    message: AgentMessage::Assistant(assistant),
                    tool_results: results,
                });
                if self.cancel.is_cancelled() {
                    return Err(RunStopped);
                }
                pending = self.take_queued(QueuedDelivery::Steer);
                if !had_tool_calls && pending.is_empty() {
                    break;
                }
            }
            pending = self.take_queued(QueuedDelivery::FollowUp);
            if pending.is_empty() {
                return Ok(());
            }
        }
    }

    /// Compaction limits and current context tokens, when compaction applies.
    fn compaction_budget(&self) -> Option<(Limits, u64)> {
        let state = self.session.lock();
        let settings = state.settings.effective().compaction;
        let model = state.model.as_deref()?;
        if !settings.enabled || model.context_window == 0 {
            return None;
        }
        let (messages, anchor) = state.journal.context_view();
        let tokens = match context_usage(Some(model), &messages, anchor) {
            zi_protocol::state::ContextUsage::Measured { tokens, .. }
            | zi_protocol::state::ContextUsage::Estimated { tokens, .. } => tokens,
            zi_protocol::state::ContextUsage::Unavailable { .. } => return None,
        };
        Some((Limits::new(model, &settings), tokens))
    }

    /// Waits `delay_ms` unless the run is interrupted first; true when the wait completed.
    async fn sleep_unless_cancelled(&self, delay_ms: u64) -> bool {
        tokio::select! {
            biased;
            () = self.cancel.cancelled() => false,
            () = tokio::time::sleep(std::time::Duration::from_millis(delay_ms)) => true,
        }
    }

    async fn pre_run_compaction(&mut self, input: &[Pending]) -> Result<(), RunStopped> {
        self.recover_previous_overflow().await?;
        self.maybe_threshold_compact(estimate_pending(input)).await
    }

    /// Decides whether the failure that stopped the loop is retried (runtime-reference §7):
    /// an `error` from the selected model, not a context overflow, classified retryable, with
    /// retries enabled and attempts left.
    fn plan_retry(&self, attempts: u32) -> Option<RetryPlan> {
        if self.cancel.is_cancelled() {
            return None;
        }
        let failed = self.last_assistant.as_ref()?;
        if failed.stop_reason != StopReason::Error {
            return None;
        }
        let error_message = failed.error_message.clone().unwrap_or_default();
        if classify::is_context_overflow(&error_message) || !classify::is_retryable(&error_message)
        {
            return None;
        }
        let state = self.session.lock();
        let from_selected = state
            .model
            .as_ref()
            .is_some_and(|m| m.provider == failed.provider && m.id == failed.model);
        let retry = state.settings.effective().retry;
        if !from_selected || !retry.enabled || attempts >= retry.max_retries {
            return None;
        }
        let failed_entry_id = state.journal.last_failed_assistant()?.id.clone();
        let attempt = attempts + 1;
        Some(RetryPlan {
            attempt,
            max_attempts: retry.max_retries,
            delay_ms: retry.delay_ms(attempt),
            failed_entry_id,
            error_message: zi_protocol::results::clip_utf8(&error_message, MAX_RETRY_ERROR_BYTES)
                .0
                .to_string(),
        })
    }

    /// Journals the retry, announces it, waits (cancellably) and returns whether to run again.
    async fn wait_for_retry(&mut self, plan: RetryPlan) -> bool {
        let retry_at = now_millis().saturating_add(plan.delay_ms as i64);
        {
            let mut state = self.session.lock();
            if let Err(error) = state.append_announced(EntryData::Retry {
                failed_entry_id: plan.failed_entry_id.clone(),
                attempt: plan.attempt,
            }) {
                tracing::error!("not retrying: {error}");
                state.emit(AgentSessionEvent::AutoRetryEnd {
                    success: false,
                    attempt: plan.attempt,
                    final_error: Some(error),
                });
                return false;
            }
            state.retry = RetryStatus::Waiting(RetryWait::Agent {
                attempt: plan.attempt,
                max_attempts: plan.max_attempts,
                delay_ms: plan.delay_ms,
                retry_at,
                error_message: plan.error_message.clone(),
            });
            state.emit(AgentSessionEvent::AutoRetryStart {
                attempt: plan.attempt,
                max_attempts: plan.max_attempts,
                delay_ms: plan.delay_ms,
                retry_at,
                error_message: plan.error_message,
            });
        }
        self.retry_attempt = Some(plan.attempt);
        let cancelled = !self.sleep_unless_cancelled(plan.delay_ms).await;
        let mut state = self.session.lock();
        state.retry = RetryStatus::Idle;
        if cancelled {
            self.retry_attempt = None;
            state.emit(AgentSessionEvent::AutoRetryEnd {
                success: false,
                attempt: plan.attempt,
                final_error: Some(RETRY_CANCELLED.to_string()),
            });
        }
        !cancelled
    }

    /// Ends a retry in flight whose attempt failed and will not be retried again.
    fn end_retry_after_failure(&mut self) {
        let Some(attempt) = self.retry_attempt.take() else {
            return;
        };
        let final_error = self
            .last_assistant
            .as_ref()
            .and_then(|m| m.error_message.clone())
            .unwrap_or_else(|| "Run stopped".to_string());
        self.emit(AgentSessionEvent::AutoRetryEnd {
            success: false,
            attempt,
            final_error: Some(final_error),
        });
    }

    /// `auto_retry_end` at the first assistant message after a retry that is not an error.
    fn note_assistant(&mut self, state: &crate::session::State, message: &AssistantMessage) {
        self.last_assistant = Some(message.clone());
        if message.stop_reason == StopReason::Error {
            return;
        }
        if let Some(attempt) = self.retry_attempt.take() {
            state.emit(AgentSessionEvent::AutoRetryEnd {
                success: message.stop_reason != StopReason::Aborted,
                attempt,
                final_error: None,
            });
        }
    }

    /// Threshold compaction when the context plus `extra` tokens exceeds the trigger.
    async fn maybe_threshold_compact(&mut self, extra: u64) -> Result<(), RunStopped> {
        if self.threshold_suppressed || self.auto_compactions >= MAX_AUTO_COMPACTIONS {
            return Ok(());
        }
        let Some((limits, tokens)) = self.compaction_budget() else {
            return Ok(());
        };
        if tokens + extra <= limits.trigger {
            return Ok(());
        }
        if !self.compact(CompactionReason::Threshold, None).await? {
            self.threshold_suppressed = true;
        }
        Ok(())
    }

    /// A run that starts right after an overflowed one compacts first (no retry).
    async fn recover_previous_overflow(&mut self) -> Result<(), RunStopped> {
        let failed = {
            let state = self.session.lock();
            state
                .journal
                .last_failed_assistant()
                .and_then(|entry| match &entry.data {
                    zi_protocol::event::EntryData::Message {
                        message: AgentMessage::Assistant(a),
                    } if a
                        .error_message
                        .as_deref()
                        .is_some_and(classify::is_context_overflow) =>
                    {
                        Some(entry.id.clone())
                    }
                    _ => None,
                })
        };
        if let Some(id) = failed
            && self.compaction_budget().is_some()
        {
            self.compact(CompactionReason::Overflow, Some(id)).await?;
        }
        Ok(())
    }

    /// Overflow recovery inside a run: exclude the failed message, compact, and let the turn
    /// loop continue. Once per run; true when the loop should continue.
    async fn recover_overflow(&mut self) -> Result<bool, RunStopped> {
        if self.compaction_budget().is_none() {
            return Ok(false);
        }
        if self.overflow_recoveries >= 1 {
            tracing::warn!("{}", compaction::SECOND_OVERFLOW);
            return Ok(false);
        }
        if self.auto_compactions >= MAX_AUTO_COMPACTIONS {
            return Ok(false);
        }
        self.overflow_recoveries += 1;
        let failed = self
            .session
            .lock()
            .journal
            .last_failed_assistant()
            .map(|entry| entry.id.clone());
        self.compact(CompactionReason::Overflow, failed).await
    }

    /// Samples the summary, retrying transient failures with the run's retry policy and the
    /// `summarization_retry_*` events (runtime-reference §7).
    #[allow(clippy::too_many_arguments)]
    async fn summarize_with_retry(
        &self,
        operation_id: u64,
        reason: CompactionReason,
        model: &Arc<Model>,
        plan: &compaction::Plan,
        limits: &Limits,
        thinking: zi_protocol::ThinkingLevel,
        key: Option<String>,
    ) -> Result<String, SummaryError> {
        let idle_timeout = self.session.inner.idle_timeout;
        let mut attempt = 0u32;
        loop {
            let result = compaction::summarize(
                model,
                plan,
                limits,
                thinking,
                key.clone(),
                idle_timeout,
                &self.cancel,
            )
            .await;
            let retry = self.session.lock().settings.effective().retry;
            let error = match result {
                Err(SummaryError::Failed(error))
                    if classify::is_retryable(&error)
                        && retry.enabled
                        && attempt < retry.max_retries =>
                {
                    error
                }
                other => {
                    if attempt > 0 {
                        self.emit(AgentSessionEvent::SummarizationRetryFinished {
                            operation_id,
                            reason,
                        });
                    }
                    return other;
                }
            };
            attempt += 1;
            let delay_ms = retry.delay_ms(attempt);
            let retry_at = now_millis().saturating_add(delay_ms as i64);
            let error_message = zi_protocol::results::clip_utf8(&error, MAX_RETRY_ERROR_BYTES)
                .0
                .to_string();
            {
                let mut state = self.session.lock();
                state.retry = RetryStatus::Waiting(RetryWait::Compaction {
                    operation_id,
                    reason,
                    attempt,
                    max_attempts: retry.max_retries,
                    delay_ms,
                    retry_at,
                    error_message: error_message.clone(),
                });
                state.emit(AgentSessionEvent::SummarizationRetryScheduled {
                    operation_id,
                    reason,
                    attempt,
                    max_attempts: retry.max_retries,
                    delay_ms,
                    retry_at,
                    error_message,
                });
            }
            let cancelled = !self.sleep_unless_cancelled(delay_ms).await;
            self.session.lock().retry = RetryStatus::Idle;
            if cancelled {
                return Err(SummaryError::Cancelled);
            }
            self.emit(AgentSessionEvent::SummarizationRetryAttemptStart {
                operation_id,
                reason,
            });
        }
    }

    /// Runs one automatic compaction. `Ok(true)` when it committed, `Ok(false)` when it failed,
    /// `Err` when the run was interrupted.
    async fn compact(
        &mut self,
        reason: CompactionReason,
        excluded: Option<String>,
    ) -> Result<bool, RunStopped> {
        self.auto_compactions += 1;
        let session = self.session.clone();
        let (operation_id, prepared) = {
            let mut state = session.lock();
            state.next_operation += 1;
            let operation_id = state.next_operation;
            state.compacting = Some((operation_id, reason));
            state.emit(AgentSessionEvent::CompactionStart {
                operation_id,
                reason,
            });
            let prepared = state
                .model
                .clone()
                .ok_or_else(|| errors::NO_MODEL.to_string())
                .and_then(|model| {
                    let limits = Limits::new(&model, &state.settings.effective().compaction);
                    compaction::plan(&state.journal, limits.keep_recent, excluded.as_deref())
                        .map(|plan| (model, limits, plan, state.thinking))
                });
            (operation_id, prepared)
        };
        let outcome = match prepared {
            Err(message) => Err(SummaryError::Failed(message)),
            Ok((model, limits, plan, thinking)) => {
                let summary = match self.resolve_key(&model).await {
                    Err(error) => Err(SummaryError::Failed(error)),
                    Ok(key) => {
                        self.summarize_with_retry(
                            operation_id,
                            reason,
                            &model,
                            &plan,
                            &limits,
                            thinking,
                            key,
                        )
                        .await
                    }
                };
                summary.and_then(|summary| {
                    compaction::entry_for(&plan, summary, reason, excluded.clone())
                        .map(|entry| (model, plan, entry))
                        .map_err(SummaryError::Failed)
                })
            }
        };
        let mut state = session.lock();
        state.compacting = None;
        let end = |state: &crate::session::State, outcome: CompactionOutcome| {
            state.emit(AgentSessionEvent::CompactionEnd {
                operation_id,
                reason,
                outcome,
            });
        };
        match outcome {
            Err(SummaryError::Cancelled) => {
                end(&state, CompactionOutcome::Cancelled);
                Err(RunStopped)
            }
            Err(SummaryError::Failed(message)) => {
                let (message, _) = zi_protocol::results::clip_utf8(&message, 2000);
                end(
                    &state,
                    CompactionOutcome::Failed {
                        message: message.to_string(),
                    },
                );
                Ok(false)
            }
            Ok((model, plan, entry)) => {
                if self.cancel.is_cancelled() {
                    end(&state, CompactionOutcome::Cancelled);
                    return Err(RunStopped);
                }
                let stale = state.journal.leaf_id() != plan.leaf_id.as_deref()
                    || state.model.as_ref().map(|m| m.reference()) != Some(model.reference());
                if stale {
                    end(
                        &state,
                        CompactionOutcome::Failed {
                            message: "Compaction is stale: the session changed while it ran"
                                .to_string(),
                        },
                    );
                    return Ok(false);
                }
                let result = CompactionResult {
                    reason,
                    summary: entry.summary.clone(),
                    first_kept_entry_id: entry.first_kept_entry_id.clone(),
                    tokens_before: entry.tokens_before,
                    estimated_tokens_after: entry.estimated_tokens_after,
                    compacted_entries: plan.compacted_entries,
                    details: entry.details.clone(),
                };
                match state.append_announced(zi_protocol::event::EntryData::Compaction(entry)) {
                    Ok(_) => {
                        end(&state, CompactionOutcome::Completed { result });
                        Ok(true)
                    }
                    Err(error) => {
                        end(&state, CompactionOutcome::Failed { message: error });
                        Ok(false)
                    }
                }
            }
        }
    }

    /// Takes queued user inputs per the queue's mode; the `queue_update` that removes them
    /// precedes their `message_start`.
    fn take_queued(&self, delivery: QueuedDelivery) -> Vec<Pending> {
        let mut state = self.session.lock();
        if !state.queues.has(delivery) {
            return Vec::new();
        }
        let settings = state.settings.effective();
        let mode = match delivery {
            QueuedDelivery::Steer => settings.steering_mode,
            QueuedDelivery::FollowUp => settings.follow_up_mode,
        };
        let taken = state.queues.take(delivery, mode);
        state.emit_queue_update();
        taken
            .into_iter()
            .map(|item| match item {
                QueueItem::User(input) => Pending::Message(user_message(input.text)),
                QueueItem::Custom { message, .. } => Pending::Custom(message),
            })
            .collect()
    }

    /// A delivered custom message: `message_start`, journal (`custom_message`),
    /// `entry_appended`, `message_end`.
    fn commit_custom(&mut self, message: CustomMessageInput) -> Result<(), RunStopped> {
        let session = self.session.clone();
        let mut state = session.lock();
        let preview = AgentMessage::Custom(zi_protocol::message::CustomMessage {
            custom_type: message.custom_type.clone(),
            content: message.content.clone(),
            display: message.display,
            details: message.details.clone(),
            timestamp: now_millis(),
        });
        state.emit(AgentSessionEvent::MessageStart { message: preview });
        match state.commit_custom_message(message) {
            Ok(projected) => {
                self.messages.push(projected);
                Ok(())
            }
            Err(error) => {
                tracing::error!("stopping the run: {error}");
                Err(RunStopped)
            }
        }
    }

    /// `message_start`, journal, `entry_appended`, `message_end` for a complete message.
    fn commit_started(&mut self, message: AgentMessage) -> Result<(), RunStopped> {
        let session = self.session.clone();
        let mut state = session.lock();
        state.emit(AgentSessionEvent::MessageStart {
            message: message.clone(),
        });
        self.commit_locked(&mut state, message)
    }

    fn commit_locked(
        &mut self,
        state: &mut crate::session::State,
        message: AgentMessage,
    ) -> Result<(), RunStopped> {
        match state.commit_message(message.clone()) {
            Ok(()) => {
                self.messages.push(message);
                Ok(())
            }
            Err(error) => {
                tracing::error!("stopping the run: {error}");
                Err(RunStopped)
            }
        }
    }

    async fn stream_turn(&mut self) -> Result<AssistantMessage, RunStopped> {
        let (model, context, thinking, session_id) = {
            let state = self.session.lock();
            let Some(model) = state.model.clone() else {
                drop(state);
                return self.commit_failure(None, errors::NO_MODEL.to_string());
            };
            let context = LlmContext {
                system_prompt: state.system_prompt.clone(),
                messages: state.journal.context_messages(),
                tools: self.session.inner.tools.specs(),
            };
            (model, context, state.thinking, state.session_id.clone())
        };
        if self.cancel.is_cancelled() {
            return self.commit_failure(Some(&model), ABORTED_MESSAGE.to_string());
        }
        let api_key = match self.resolve_key(&model).await {
            Ok(key) => key,
            Err(error) => return self.commit_failure(Some(&model), error),
        };
        let options = StreamOptions {
            api_key,
            thinking,
            cancel: self.cancel.child_token(),
            idle_timeout: self.session.inner.idle_timeout,
            session_id,
        };
        {
            let mut state = self.session.lock();
            let partial = empty_assistant(&model);
            state.emit(AgentSessionEvent::MessageStart {
                message: AgentMessage::Assistant(partial.clone()),
            });
            state.streaming = Some(partial);
        }
        let mut events = stream_assistant(model.clone(), context, options);
        let mut finished: Option<AssistantMessage> = None;
        while let Some(event) = events.recv().await {
            self.wait_for_output_room().await;
            let mut state = self.session.lock();
            if let Some(partial) = state.streaming.as_mut() {
                zi_ai::stream::apply_event(partial, &event);
            }
            match &event {
                AssistantMessageEvent::Done { message, .. } => finished = Some(message.clone()),
                AssistantMessageEvent::Error { error, .. } => finished = Some(error.clone()),
                _ => {}
            }
            state.emit(AgentSessionEvent::MessageUpdate {
                assistant_message_event: event,
            });
        }
        let session = self.session.clone();
        let mut state = session.lock();
        let partial = state.streaming.take();
        let message = finished.unwrap_or_else(|| {
            let mut message = partial.unwrap_or_else(|| empty_assistant(&model));
            message.stop_reason = StopReason::Error;
            message.error_message = Some("Provider stream ended unexpectedly".to_string());
            message
        });
        self.commit_locked(&mut state, AgentMessage::Assistant(message.clone()))?;
        self.note_assistant(&state, &message);
        Ok(message)
    }

    async fn resolve_key(&self, model: &Arc<Model>) -> Result<Option<String>, String> {
        let credentials = self.session.refreshed_credentials();
        let model = model.clone();
        let needs_key = model.api_key.is_some() || credentials.is_configured(&model);
        if !needs_key {
            return Ok(None);
        }
        tokio::task::spawn_blocking(move || {
            credentials
                .api_key(&model)
                .map(Some)
                .map_err(|e| e.to_string())
        })
        .await
        .map_err(|error| format!("Could not resolve credentials: {error}"))?
    }

    /// Commits an assistant failure produced without a provider call.
    fn commit_failure(
        &mut self,
        model: Option<&Model>,
        error: String,
    ) -> Result<AssistantMessage, RunStopped> {
        let mut message = match model {
            Some(model) => empty_assistant(model),
            None => AssistantMessage {
                content: Vec::new(),
                api: String::new(),
                provider: String::new(),
                model: String::new(),
                usage: Default::default(),
                stop_reason: StopReason::Error,
                error_message: None,
                response_id: None,
                timestamp: now_millis(),
            },
        };
        message.stop_reason = if error == ABORTED_MESSAGE {
            StopReason::Aborted
        } else {
            StopReason::Error
        };
        message.error_message = Some(error);
        let session = self.session.clone();
        let mut state = session.lock();
        state.emit(AgentSessionEvent::MessageStart {
            message: AgentMessage::Assistant(message.clone()),
        });
        self.commit_locked(&mut state, AgentMessage::Assistant(message.clone()))?;
        self.note_assistant(&state, &message);
        Ok(message)
    }

    async fn wait_for_output_room(&self) {
        let wait = {
            let state = self.session.lock();
            state.backpressure.as_ref().and_then(|b| b.wait_for_room())
        };
        if let Some(wait) = wait {
            tokio::select! {
                () = wait => {}
                () = self.cancel.cancelled() => {}
            }
        }
    }

    /// Runs the assistant's tool calls and commits their results in call order.
    async fn execute_tools(
        &mut self,
        assistant: &AssistantMessage,
    ) -> Result<Vec<AgentMessage>, RunStopped> {
        let calls: Vec<ToolCall> = assistant.tool_calls().cloned().collect();
        if calls.is_empty() {
            return Ok(Vec::new());
        }
        for call in &calls {
            self.emit(AgentSessionEvent::ToolExecutionStart {
                tool_call_id: call.id.clone(),
                tool_name: call.name.clone(),
                args: call.arguments.clone(),
            });
        }
        let outputs = if assistant.stop_reason == StopReason::Length {
            let outputs: Vec<ToolOutput> = calls
                .iter()
                .map(|_| ToolOutput::error(errors::TOOL_SKIPPED_LENGTH))
                .collect();
            for (call, output) in calls.iter().zip(&outputs) {
                self.emit_tool_end(call, output);
            }
            outputs
        } else {
            self.run_tool_calls(&calls).await
        };
        let mut results = Vec::with_capacity(calls.len());
        for (call, output) in calls.iter().zip(outputs) {
            let message = AgentMessage::ToolResult(ToolResultMessage {
                tool_call_id: call.id.clone(),
                tool_name: call.name.clone(),
                content: output.content,
                details: output.details,
                is_error: output.is_error,
                timestamp: now_millis(),
            });
            self.commit_started(message.clone())?;
            results.push(message);
        }
        Ok(results)
    }

    fn emit_tool_end(&self, call: &ToolCall, output: &ToolOutput) {
        self.emit(AgentSessionEvent::ToolExecutionEnd {
            tool_call_id: call.id.clone(),
            tool_name: call.name.clone(),
            result: output.to_result(),
            is_error: output.is_error,
        });
    }

    /// Executes validated calls in parallel, or one by one when any tool is sequential. Ends
    /// are emitted as calls finish; outputs are returned in call order.
    async fn run_tool_calls(&self, calls: &[ToolCall]) -> Vec<ToolOutput> {
        let tools = &self.session.inner.tools;
        let sequential = calls.iter().any(|call| {
            tools
                .get(&call.name)
                .is_some_and(|t| t.tool.execution_mode() == ExecutionMode::Sequential)
        });
        let mut outputs: Vec<Option<ToolOutput>> = vec![None; calls.len()];
        if sequential {
            for (index, call) in calls.iter().enumerate() {
                let output = self.run_one(call).await;
                self.emit_tool_end(call, &output);
                outputs[index] = Some(output);
            }
        } else {
            let mut running: FuturesUnordered<_> = calls
                .iter()
                .enumerate()
                .map(|(index, call)| async move { (index, self.run_one(call).await) })
                .collect();
            while let Some((index, output)) = running.next().await {
                self.emit_tool_end(&calls[index], &output);
                outputs[index] = Some(output);
            }
        }
        outputs
            .into_iter()
            .map(|o| o.unwrap_or_else(|| ToolOutput::error(errors::TOOL_ABORTED)))
            .collect()
    }

    /// Validates and runs one call in its own task, so a panicking tool becomes an error result
    /// and a tool that ignores cancellation is abandoned after a grace period.
    async fn run_one(&self, call: &ToolCall) -> ToolOutput {
        let Some(registered) = self.session.inner.tools.get(&call.name) else {
            return ToolOutput::error(errors::tool_not_found(&call.name));
        };
        if let Err(problem) = registered.validate(&call.arguments) {
            return ToolOutput::error(problem);
        }
        let progress = self.progress_sink(call);
        let context = ToolCallContext {
            call_id: call.id.clone(),
            arguments: call.arguments.clone(),
            cancel: self.cancel.child_token(),
            progress,
            host: self.session.host(),
        };
        let mut task = tokio::spawn(registered.tool.execute(context));
        let joined = tokio::select! {
            joined = &mut task => joined,
            () = self.cancel.cancelled() => {
                match tokio::time::timeout(TOOL_CANCEL_GRACE, &mut task).await {
                    Ok(joined) => joined,
                    Err(_) => {
                        task.abort();
                        return ToolOutput::error(errors::TOOL_ABORTED);
                    }
                }
            }
        };
        let mut output = joined.unwrap_or_else(|error| {
            ToolOutput::error(format!("Tool {} failed: {error}", call.name))
        });
        // A result whose details say `outcome: "error"` is an error (runtime-reference §15.1).
        if output
            .details
            .as_ref()
            .and_then(|d| d.get("outcome"))
            .is_some_and(|o| o == "error")
        {
            output.is_error = true;
        }
        output
    }

    fn progress_sink(&self, call: &ToolCall) -> ProgressSink {
        let session = self.session.clone();
        let id = call.id.clone();
        let name = call.name.clone();
        let args = call.arguments.clone();
        Arc::new(move |partial: Value| {
            session.lock().emit(AgentSessionEvent::ToolExecutionUpdate {
                tool_call_id: id.clone(),
                tool_name: name.clone(),
                args: args.clone(),
                partial_result: partial,
            });
        })
    }

    /// Durable sync, idle, then `agent_settled`.
    fn finish(self, run_id: u64) {
        let mut state = self.session.lock();
        state.streaming = None;
        state.retry = RetryStatus::Idle;
        if let Err(error) = state.journal.sync() {
            tracing::error!("{error}");
        }
        if matches!(state.activity, RunActivity::Running { run_id: current, .. } if current == run_id)
        {
            state.activity = RunActivity::Idle;
        }
        state.emit(AgentSessionEvent::AgentSettled);
        drop(state);
        self.session
            .inner
            .settled
            .send_modify(|generation| *generation += 1);
    }
}
