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
use zi_protocol::event::{AgentSessionEvent, EntryData};
use zi_protocol::message::{
    AgentMessage, AssistantMessage, ContentBlock, MessageContent, StopReason, ToolCall,
    ToolResultMessage, UserMessage,
};
use zi_protocol::state::{QueuedDelivery, RetryStatus, RetryWait};

use crate::errors;
use crate::journal::now_millis;
use crate::session::{AgentSession, RunActivity};
use crate::tool::{ExecutionMode, ProgressSink, ToolCallContext, ToolOutput};

/// How long a tool may keep running after cancellation before it is abandoned.
const TOOL_CANCEL_GRACE: std::time::Duration = std::time::Duration::from_secs(5);

/// Why the turn loop stopped early.
struct RunStopped;

/// `auto_retry_end.finalError` when an interruption cancels a scheduled retry.
pub const RETRY_CANCELLED: &str = "Retry cancelled";

/// Longest `errorMessage` carried by `auto_retry_start` and the retry state.
const MAX_RETRY_ERROR_BYTES: usize = 2_000;

struct Run {
    session: AgentSession,
    cancel: CancellationToken,
    /// Every message the current loop pass committed, for `agent_end`.
    messages: Vec<AgentMessage>,
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
        last_assistant: None,
        retry_attempt: None,
    };
    let mut input: Vec<AgentMessage> = prompt.map(user_message).into_iter().collect();
    let mut attempts = 0u32;
    loop {
        run.emit(AgentSessionEvent::AgentStart);
        run.last_assistant = None;
        let stopped = run.turn_loop(std::mem::take(&mut input)).await.is_err();
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
            error_message: clip(&error_message, MAX_RETRY_ERROR_BYTES).to_string(),
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
        let cancelled = tokio::select! {
            biased;
            () = self.cancel.cancelled() => true,
            () = tokio::time::sleep(std::time::Duration::from_millis(plan.delay_ms)) => false,
        };
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

    async fn turn_loop(&mut self, initial: Vec<AgentMessage>) -> Result<(), RunStopped> {
        let mut pending = initial;
        // Steering queued before the run is delivered before the first provider call.
        pending.extend(self.take_queued(QueuedDelivery::Steer));
        loop {
            loop {
                self.emit(AgentSessionEvent::TurnStart);
                for message in std::mem::take(&mut pending) {
                    self.commit_started(message)?;
                }
                let assistant = self.stream_turn().await?;
                if matches!(
                    assistant.stop_reason,
                    StopReason::Error | StopReason::Aborted
                ) {
                    self.emit(AgentSessionEvent::TurnEnd {
                        message: AgentMessage::Assistant(assistant),
                        tool_results: Vec::new(),
                    });
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

    /// Takes queued user inputs per the queue's mode; the `queue_update` that removes them
    /// precedes their `message_start`.
    fn take_queued(&self, delivery: QueuedDelivery) -> Vec<AgentMessage> {
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
            .map(|input| user_message(input.text))
            .collect()
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
        let credentials = self.session.inner.credentials.clone();
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
        joined.unwrap_or_else(|error| {
            ToolOutput::error(format!("Tool {} failed: {error}", call.name))
        })
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

/// The longest prefix of `text` of at most `max` bytes that ends on a char boundary.
fn clip(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}
