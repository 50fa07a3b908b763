//! The state behind the session lock and the operations every module uses on it.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;
use zi_ai::Model;
use zi_ai::catalog::Catalog;
use zi_protocol::ThinkingLevel;
use zi_protocol::event::{AgentSessionEvent, EntryData, SessionEntry};
use zi_protocol::message::{AgentMessage, AssistantMessage};
use zi_protocol::state::{CompactionReason, RetryStatus};

use super::{Backpressure, EventContext, Subscriber};
use crate::journal::Journal;
use crate::session::queue::InputQueues;
use crate::settings::SettingsStore;

#[derive(Debug, Clone)]
pub(super) enum RunActivity {
    Idle,
    Running {
        run_id: u64,
        cancel: CancellationToken,
        aborting: bool,
    },
    /// An extension command owns the session (runtime-reference §19.3).
    ExtensionCommand {
        #[allow(dead_code)]
        operation_id: u64,
        name: String,
        cancel: CancellationToken,
        cancelling: bool,
    },
    Disposed,
}

pub(super) struct State {
    pub(super) session_id: String,
    pub(super) activity: RunActivity,
    pub(super) model: Option<Arc<Model>>,
    pub(super) thinking: ThinkingLevel,
    pub(super) catalog: Catalog,
    pub(super) settings: SettingsStore,
    pub(super) queues: InputQueues,
    pub(super) journal: Journal,
    pub(super) streaming: Option<AssistantMessage>,
    pub(super) system_prompt: String,
    /// A scheduled automatic retry (rpc-reference §5 `retry`).
    pub(super) retry: RetryStatus,
    pub(super) subscribers: Vec<(u64, Subscriber)>,
    pub(super) next_subscriber: u64,
    pub(super) next_run: u64,
    pub(super) backpressure: Option<Arc<dyn Backpressure>>,
    /// The automatic compaction in progress inside a run.
    pub(super) compacting: Option<(u64, CompactionReason)>,
    pub(super) next_operation: u64,
    /// Custom messages an extension command appended; committed when it settles.
    pub(super) deferred_custom: Vec<crate::custom::CustomMessageInput>,
}

impl State {
    /// Delivers an event to every subscriber, in subscription order.
    pub(super) fn emit(&self, event: AgentSessionEvent) {
        if self.subscribers.is_empty() {
            return;
        }
        let context = EventContext {
            message_count: self.journal.presentation_len() as u64,
        };
        for (_, subscriber) in &self.subscribers {
            subscriber(&event, &context);
        }
    }

    /// Appends a journal entry and announces it with `entry_appended`.
    pub(super) fn append_announced(&mut self, data: EntryData) -> Result<SessionEntry, String> {
        let entry = self.journal.append(data)?;
        self.emit(AgentSessionEvent::EntryAppended {
            entry: entry.clone(),
        });
        Ok(entry)
    }

    /// Commits a finished message: journal, `entry_appended`, then `message_end`.
    pub(super) fn commit_message(&mut self, message: AgentMessage) -> Result<(), String> {
        self.append_announced(EntryData::Message {
            message: message.clone(),
        })?;
        self.emit(AgentSessionEvent::MessageEnd { message });
        Ok(())
    }

    pub(super) fn emit_queue_update(&self) {
        let snapshot = self.queues.snapshot();
        self.emit(AgentSessionEvent::QueueUpdate {
            steering: snapshot.steering,
            follow_up: snapshot.follow_up,
        });
    }

    pub(super) fn is_streaming(&self) -> bool {
        matches!(self.activity, RunActivity::Running { .. })
    }

    /// A run or an extension command is active.
    pub(super) fn is_busy(&self) -> bool {
        matches!(
            self.activity,
            RunActivity::Running { .. } | RunActivity::ExtensionCommand { .. }
        )
    }
}
