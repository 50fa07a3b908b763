//! Read-only views of the session: the state snapshot, the message and outcome pages
//! (docs/rpc.md#sessionget_messages, docs/rpc.md#sessionget_outcomes,
//! docs/rpc.md#the-state-snapshot) and the usage statistics.

use zi_ai::model::supported_levels;
use zi_journal::stats::tally_prefix;
use zi_protocol::ThinkingLevel;
use zi_protocol::encoded::Encoded;
use zi_protocol::event::{EntryData, SessionEntry};
use zi_protocol::message::{AgentMessage, AssistantMessage};
use zi_protocol::results::{MessagePage, OutcomePage, SessionStats};
use zi_protocol::state::{
    Activity, CommandPhase, CompactionReason, CompactionStatus, ModelState, SessionState,
};

use super::{AgentSession, RunActivity, State};
use crate::errors::SessionError;

/// Largest message page in bytes, and the accumulator's starting value
/// (docs/rpc.md#sessionget_messages).
pub const PAGE_BYTE_BOUND: u64 = 8 * 1024 * 1024;
pub(super) const PAGE_BYTE_START: u64 = 256;

impl AgentSession {
    /// One page of the journal's operation outcomes, in journal order
    /// (docs/rpc.md#sessionget_outcomes).
    pub fn outcomes_page(&self, start: u64, limit: u64) -> OutcomePage {
        let state = self.lock();
        let all: Vec<&SessionEntry> = state
            .journal
            .all_entries()
            .filter(|e| matches!(e.data, EntryData::OperationOutcome(_)))
            .collect();
        let total = all.len() as u64;
        let outcomes: Vec<SessionEntry> = all
            .into_iter()
            .skip(usize::try_from(start).unwrap_or(usize::MAX))
            .take(usize::try_from(limit).unwrap_or(usize::MAX))
            .cloned()
            .collect();
        let next = start.saturating_add(outcomes.len() as u64);
        OutcomePage {
            start,
            total,
            next_start: (next < total).then_some(next),
            outcomes,
        }
    }

    /// Usage statistics of the whole journal (`session.get_stats`). The first call on a
    /// resumed, compacted journal reads the compacted history from disk, outside the lock (the
    /// file only grows, so what it reads cannot change).
    pub fn stats(&self) -> Result<SessionStats, SessionError> {
        loop {
            let on_disk = {
                let state = self.lock();
                match state.journal.stats_tally() {
                    Ok(tally) => {
                        return Ok(tally.stats(&|provider, id, usage| {
                            let model = state.catalog.find(provider, id);
                            if let Some(model) = model {
                                zi_ai::stream::apply_cost(model, usage);
                            }
                            model.is_some()
                        }));
                    }
                    Err(on_disk) => on_disk,
                }
            };
            let tally = tally_prefix(&on_disk.path, &on_disk.first_resident_id)
                .map_err(|error| SessionError::Journal(error.to_string().into()))?;
            // A compaction that moved the tail meanwhile makes the next pass read further.
            self.lock().journal.set_stats_base(&on_disk, tally);
        }
    }

    /// The state snapshot (docs/rpc.md#the-state-snapshot).
    pub fn state(&self) -> SessionState {
        snapshot(&mut self.lock())
    }

    /// The state snapshot serialized, built only when the state changed since the last call:
    /// pipelined `session.get_state` then costs a copy of the bytes.
    pub fn encoded_state(&self) -> Result<Encoded<SessionState>, serde_json::Error> {
        let mut guard = self.lock();
        if let Some(encoded) = guard.encoded_snapshot() {
            return Ok(encoded.clone());
        }
        let encoded = Encoded::new(&snapshot(&mut guard))?;
        guard.store_encoded_snapshot(encoded.clone());
        Ok(encoded)
    }
    /// Whether a run is active (running or aborting).
    pub fn is_streaming(&self) -> bool {
        self.lock().is_streaming()
    }

    /// How many messages the conversation shows (`state.messageCount`).
    pub fn message_count(&self) -> u64 {
        self.lock().journal.presentation_len() as u64
    }

    /// One page of the presentation messages (docs/rpc.md#sessionget_messages).
    pub fn messages_page(&self, start: u64, limit: u64) -> Result<MessagePage, SessionError> {
        let state = self.lock();
        let total = state.journal.presentation_len() as u64;
        let end = total.min(start.saturating_add(limit));
        let mut accumulated = PAGE_BYTE_START;
        let mut messages = Vec::new();
        let mut index = start;
        while index < end {
            let Some(message) = state.journal.presentation_message(index as usize) else {
                break;
            };
            let bytes = encoded_len(&message).map_or(u64::MAX, |len| len + 1);
            if bytes > PAGE_BYTE_BOUND {
                return Err(SessionError::PageTooLarge(index));
            }
            if !messages.is_empty() && accumulated + bytes > PAGE_BYTE_BOUND {
                break;
            }
            messages.push(message.into_owned());
            accumulated += bytes;
            index += 1;
        }
        let next = start + messages.len() as u64;
        Ok(MessagePage {
            start,
            total,
            next_start: (next < total).then_some(next),
            messages,
        })
    }

    /// Levels the selected model supports.
    pub fn thinking_levels(&self) -> Vec<ThinkingLevel> {
        supported_levels(self.lock().model.as_deref())
    }

    /// The final assistant message of the presentation list, if any (one-shot modes).
    pub fn last_assistant(&self) -> Option<AssistantMessage> {
        let state = self.lock();
        (0..state.journal.presentation_len()).rev().find_map(|i| {
            state
                .journal
                .presentation_message(i)
                .and_then(|m| m.as_assistant().cloned())
        })
    }
}

/// Length of a value's compact JSON, counted without building it.
pub(super) fn encoded_len<T: serde::Serialize>(value: &T) -> Result<u64, serde_json::Error> {
    struct Counter(u64);
    impl std::io::Write for Counter {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0 += bytes.len() as u64;
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut counter = Counter(0);
    serde_json::to_writer(&mut counter, value)?;
    Ok(counter.0)
}

/// Builds the snapshot from the state (the derived parts come from the snapshot cache).
pub(super) fn snapshot(state: &mut State) -> SessionState {
    let activity = match (&state.activity, state.progress.compacting()) {
        (RunActivity::Running { aborting: true, .. }, _)
        | (RunActivity::Compacting { aborting: true, .. }, _) => Activity::Aborting,
        (RunActivity::Compacting { operation_id, .. }, _) => Activity::Compacting {
            operation_id: *operation_id,
            reason: CompactionReason::Manual,
        },
        (RunActivity::Running { .. }, Some((operation_id, reason))) => Activity::Compacting {
            operation_id,
            reason,
        },
        (RunActivity::Running { .. }, None) => Activity::Running,
        (
            RunActivity::ExtensionCommand {
                name, cancelling, ..
            },
            _,
        ) => Activity::ExtensionCommand {
            name: name.clone(),
            phase: if *cancelling {
                CommandPhase::Cancelling
            } else {
                CommandPhase::Executing
            },
        },
        (RunActivity::Idle | RunActivity::Disposed, _) => Activity::Idle,
    };
    let model = state.model.as_deref();
    let settings = state.settings.effective();
    SessionState {
        session_id: state.session_id.clone(),
        activity,
        model: match model {
            Some(model) => ModelState::Selected {
                model: model.public(),
            },
            None => ModelState::Unselected,
        },
        thinking_level: state.thinking,
        supported_thinking_levels: supported_levels(model),
        steering_mode: settings.steering_mode,
        follow_up_mode: settings.follow_up_mode,
        queued_inputs: state.queues.snapshot(),
        work_plan: state.snapshot_cache.work_plan(&state.journal),
        message_count: state.journal.presentation_len() as u64,
        streaming_message: state
            .progress
            .streaming()
            .cloned()
            .map(AgentMessage::Assistant),
        compaction: match (&state.activity, state.progress.compacting()) {
            (_, Some((operation_id, reason))) => CompactionStatus::Running {
                operation_id,
                reason,
            },
            // Admitted, its task not yet started.
            (RunActivity::Compacting { operation_id, .. }, None) => CompactionStatus::Running {
                operation_id: *operation_id,
                reason: CompactionReason::Manual,
            },
            (_, None) => CompactionStatus::Idle,
        },
        retry: state.progress.retry().clone(),
        context_usage: state
            .snapshot_cache
            .context_usage(&state.journal, state.model.as_ref()),
        approvals: None,
    }
}
