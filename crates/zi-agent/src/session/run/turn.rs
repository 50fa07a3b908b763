//! One pass of the agent loop: turns, queued input delivery, streaming one assistant message,
//! and committing messages.

use std::sync::Arc;

use zi_ai::classify;
use zi_ai::credentials::RequestAuth;
use zi_ai::stream::{ABORTED_MESSAGE, empty_assistant, stream_assistant};
use zi_ai::{AssistantMessageEvent, LlmContext, Model, StreamOptions};
use zi_protocol::event::AgentSessionEvent;
use zi_protocol::message::{AgentMessage, AssistantMessage, StopReason};
use zi_protocol::state::QueuedDelivery;

use super::commit::failed_assistant;
use super::compaction::estimate_pending;
use super::{Pending, Run, RunStopped, user_message};
use crate::errors::SessionError;
use crate::session::queue::QueueItem;
use zi_journal::memory::new_entry_id;

/// Why no API key could be had for a provider call; `Display` is the assistant message's
/// `errorMessage` (an interruption reads as any other abort).
#[derive(Debug, thiserror::Error)]
pub(super) enum KeyError {
    #[error("{}", ABORTED_MESSAGE)]
    Aborted,
    #[error(transparent)]
    Credentials(#[from] zi_ai::credentials::CredentialError),
}

impl Run {
    pub(super) async fn turn_loop(&mut self, initial: Vec<Pending>) -> Result<(), RunStopped> {
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
                let mut batch = std::mem::take(&mut pending);
                // Child completions nobody waited for enter the context before each provider
                // request (docs/delegation.md#delivery).
                if let Some(delivery) = self.session.context_delivery() {
                    batch.extend(
                        delivery
                            .before_provider_request()
                            .into_iter()
                            .map(Pending::Custom),
                    );
                }
                self.commit_all(batch)?;
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
                    self.wait_for_output_room().await;
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
                self.wait_for_output_room().await;
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
    pub(super) fn take_queued(&self, delivery: QueuedDelivery) -> Vec<Pending> {
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
                QueueItem::User(input) => Pending::Message(user_message(input.text, input.images)),
                QueueItem::Custom { message, .. } => Pending::Custom(message),
            })
            .collect()
    }

    pub(super) async fn stream_turn(&mut self) -> Result<AssistantMessage, RunStopped> {
        let (model, context, thinking, session_id) = {
            let mut state = self.session.lock();
            let Some(model) = state.model.clone() else {
                drop(state);
                return self.commit_failure(None, SessionError::NoModel.to_string());
            };
            let tools = self.session.inner.tools.specs();
            // The prompt lists the tools this request offers; it changes only when they do.
            state.system_prompt.follow_tools(
                tools
                    .iter()
                    .map(|t| (t.name.as_str(), t.description.as_str())),
            );
            let context = LlmContext {
                system_prompt: state.system_prompt.text().to_string(),
                messages: state.journal.context_messages(),
                tools,
            };
            (model, context, state.thinking, state.session_id.clone())
        };
        if self.cancel.is_cancelled() {
            return self.commit_failure(Some(&model), ABORTED_MESSAGE.to_string());
        }
        let auth = match self.resolve_auth(&model).await {
            Ok(auth) => auth,
            Err(error) => return self.commit_failure(Some(&model), error.to_string()),
        };
        let fast_mode = self.session.lock().settings.codex_fast_mode();
        let options = StreamOptions {
            thinking,
            cancel: self.cancel.child_token(),
            idle_timeout: self.session.inner.idle_timeout,
            session_id,
            fast_mode,
            ..StreamOptions::with_auth(auth)
        };
        let message_id = new_entry_id();
        {
            let mut state = self.session.lock();
            let partial = empty_assistant(&model);
            state.emit_with_message_id(
                AgentSessionEvent::MessageStart {
                    message: AgentMessage::Assistant(partial.clone()),
                },
                &message_id,
            );
            state.progress.streaming = Some(partial);
        }
        let mut stream = stream_assistant(model.clone(), context, options);
        let mut finished: Option<AssistantMessage> = None;
        while let Some(update) = stream.recv().await {
            self.wait_for_output_room().await;
            let mut state = self.session.lock();
            // The streaming message is the one place the reply accumulates; applying the
            // update to it yields the event to report.
            let partial = state
                .progress
                .streaming
                .get_or_insert_with(|| empty_assistant(&model));
            let Some(event) = update.apply(partial) else {
                continue;
            };
            match &event {
                AssistantMessageEvent::Done { message, .. } => finished = Some(message.clone()),
                AssistantMessageEvent::Error { error, .. } => finished = Some(error.clone()),
                _ => {}
            }
            state.emit(AgentSessionEvent::MessageUpdate {
                assistant_message_event: event,
            });
        }
        // `message_end` repeats the whole message right after `done` carried it.
        self.wait_for_output_room().await;
        let session = self.session.clone();
        let mut state = session.lock();
        let partial = state.progress.streaming.take();
        let message = finished.unwrap_or_else(|| {
            let mut message = partial.unwrap_or_else(|| empty_assistant(&model));
            message.stop_reason = StopReason::Error;
            message.error_message = Some("Provider stream ended unexpectedly".to_string());
            message
        });
        self.commit_assistant(&mut state, message.clone(), message_id)?;
        Ok(message)
    }

    /// What the request carries: a key (a `!command` runs), or a subscription's token
    /// (refreshed first when it expires soon) with the endpoint and account it names.
    pub(super) async fn resolve_auth(&self, model: &Arc<Model>) -> Result<RequestAuth, KeyError> {
        let credentials = self.session.refreshed_credentials();
        let model = model.clone();
        // A `!command` key dies with its future, so an interrupt, EOF or signal ends it at once;
        // a refresh already sent finishes in its own task and is saved.
        tokio::select! {
            biased;
            () = self.cancel.cancelled() => Err(KeyError::Aborted),
            auth = credentials.resolve(&model) => Ok(auth?),
        }
    }

    /// Commits an assistant failure produced without a provider call.
    pub(super) fn commit_failure(
        &mut self,
        model: Option<&Model>,
        error: String,
    ) -> Result<AssistantMessage, RunStopped> {
        let aborted = error == ABORTED_MESSAGE;
        let mut message = failed_assistant(model, error);
        if aborted {
            message.stop_reason = StopReason::Aborted;
        }
        let session = self.session.clone();
        let mut state = session.lock();
        let message_id = new_entry_id();
        state.emit_with_message_id(
            AgentSessionEvent::MessageStart {
                message: AgentMessage::Assistant(message.clone()),
            },
            &message_id,
        );
        self.commit_assistant(&mut state, message.clone(), message_id)?;
        Ok(message)
    }

    pub(super) async fn wait_for_output_room(&self) {
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
}
