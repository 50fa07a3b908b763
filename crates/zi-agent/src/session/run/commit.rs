//! Committing a run's messages to the journal, and stopping the run visibly when an append
//! fails (docs/configuration.md#session-journals, "When the journal cannot be written").

use zi_ai::Model;
use zi_ai::stream::empty_assistant;
use zi_os::clock::now_millis;
use zi_protocol::event::AgentSessionEvent;
use zi_protocol::message::{AgentMessage, AssistantMessage, StopReason};

use super::{Pending, Run, RunStopped};
use crate::errors;

impl Pending {
    /// The message as `message_start` shows it.
    fn preview(&self) -> AgentMessage {
        match self {
            Pending::Message(message) => message.clone(),
            Pending::Custom(message) => AgentMessage::Custom(zi_protocol::message::CustomMessage {
                custom_type: message.custom_type.clone(),
                content: message.content.clone(),
                display: message.display,
                details: message.details.clone(),
                timestamp: now_millis(),
            }),
        }
    }
}

/// An assistant message with stop reason `error` made without a provider call.
pub(super) fn failed_assistant(model: Option<&Model>, error: String) -> AssistantMessage {
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
    message.stop_reason = StopReason::Error;
    message.error_message = Some(error);
    message
}

impl Run {
    /// Delivers messages in order, each with `message_start`, journal, `entry_appended` and
    /// `message_end` (a custom message's `message_end` carries the journal's projection).
    /// When an append fails, that message and every later one get `message_end` with no
    /// `entry_appended` (they were not saved) and the run stops with the journal failure.
    pub(super) fn commit_all(
        &mut self,
        items: Vec<Pending>,
    ) -> Result<Vec<AgentMessage>, RunStopped> {
        let session = self.session.clone();
        let mut committed = Vec::with_capacity(items.len());
        let mut items = items.into_iter();
        while let Some(item) = items.next() {
            let mut state = session.lock();
            let shown = item.preview();
            state.emit(AgentSessionEvent::MessageStart {
                message: shown.clone(),
            });
            let result = match item {
                Pending::Message(message) => {
                    state.commit_message(message.clone()).map(|()| message)
                }
                Pending::Custom(message) => state.commit_custom_message(message),
            };
            match result {
                Ok(message) => {
                    self.messages.push(message.clone());
                    committed.push(message);
                }
                Err(error) => {
                    state.emit(AgentSessionEvent::MessageEnd { message: shown });
                    for unsaved in items {
                        let message = unsaved.preview();
                        state.emit(AgentSessionEvent::MessageStart {
                            message: message.clone(),
                        });
                        state.emit(AgentSessionEvent::MessageEnd { message });
                    }
                    self.stop_unsaved(&mut state, &error, None);
                    return Err(RunStopped);
                }
            }
        }
        // Outside the lock: the supervisor acknowledges through the session host.
        if let Some(delivery) = session.context_delivery() {
            for message in &committed {
                delivery.committed(message);
            }
        }
        Ok(committed)
    }

    /// Commits a finished assistant message whose `message_start` announced `id`.
    pub(super) fn commit_assistant(
        &mut self,
        state: &mut crate::session::State,
        message: AssistantMessage,
        id: String,
    ) -> Result<(), RunStopped> {
        if let Err(error) = state.commit_message_as(AgentMessage::Assistant(message.clone()), id) {
            self.stop_unsaved(state, &error, Some(message));
            return Err(RunStopped);
        }
        self.messages.push(AgentMessage::Assistant(message.clone()));
        self.note_assistant(state, &message);
        Ok(())
    }

    /// Ends the run's current turn after a failed journal append, visibly: the run's last
    /// message is an assistant error naming the journal — `unsaved` itself (its `message_end`,
    /// marked `error`) when the assistant message failed, else a new one. Nothing is added to
    /// the journal or to memory, which stay equal.
    fn stop_unsaved(
        &mut self,
        state: &mut crate::session::State,
        error: &zi_journal::memory::JournalError,
        unsaved: Option<AssistantMessage>,
    ) {
        tracing::error!("stopping the run: {error}");
        let error_message = errors::journal_write_failed(&error.to_string());
        let failure = match unsaved {
            Some(mut message) => {
                message.stop_reason = StopReason::Error;
                message.error_message = Some(error_message);
                message
            }
            None => {
                let notice = failed_assistant(state.model.as_deref(), error_message);
                state.emit(AgentSessionEvent::MessageStart {
                    message: AgentMessage::Assistant(notice.clone()),
                });
                notice
            }
        };
        state.emit(AgentSessionEvent::MessageEnd {
            message: AgentMessage::Assistant(failure.clone()),
        });
        state.emit(AgentSessionEvent::TurnEnd {
            message: AgentMessage::Assistant(failure.clone()),
            tool_results: Vec::new(),
        });
        self.messages.push(AgentMessage::Assistant(failure.clone()));
        self.last_assistant = Some(failure);
        self.journal_failed = true;
    }
}
