//! The state behind the session lock and the operations every module uses on it.

use std::ops::{Deref, DerefMut};
use std::sync::{Arc, MutexGuard};

use tokio_util::sync::CancellationToken;
use zi_ai::Model;
use zi_ai::catalog::Catalog;
use zi_config::settings::SettingsStore;
use zi_journal::memory::{Journal, JournalError};
use zi_protocol::ThinkingLevel;
use zi_protocol::encoded::Encoded;
use zi_protocol::event::{AgentSessionEvent, EntryData, SessionEntry};
use zi_protocol::message::AgentMessage;
use zi_protocol::state::SessionState;

use super::run::RunProgress;
use super::{Backpressure, EventContext, Subscriber};
use crate::errors::{Activity, Operation, SessionError};
use crate::session::queue::InputQueues;
use crate::system_prompt::SystemPrompt;

#[derive(Debug, Clone)]
pub(super) enum RunActivity {
    Idle,
    Running {
        run_id: u64,
        cancel: CancellationToken,
        aborting: bool,
    },
    /// An extension command owns the session (docs/extensions.md#commands-over-rpc).
    ExtensionCommand {
        #[allow(dead_code)]
        operation_id: u64,
        name: String,
        cancel: CancellationToken,
        cancelling: bool,
    },
    /// A manual compaction (`session.compact`) owns the session (docs/rpc.md#the-state-snapshot).
    Compacting {
        operation_id: u64,
        cancel: CancellationToken,
        aborting: bool,
    },
    Disposed,
}

/// The event subscribers, in subscription order.
#[derive(Default)]
pub(super) struct Subscribers {
    list: Vec<(u64, Subscriber)>,
    next_id: u64,
}

impl Subscribers {
    /// Adds a subscriber and returns its id.
    pub(super) fn add(&mut self, subscriber: Subscriber) -> u64 {
        self.next_id += 1;
        self.list.push((self.next_id, subscriber));
        self.next_id
    }

    pub(super) fn remove(&mut self, id: u64) {
        self.list.retain(|(sid, _)| *sid != id);
    }
}

/// What sits behind the session lock. It is visible only inside `session`; what one module owns
/// is a type of that module with private fields: the subscribers (here), the run's progress
/// ([`RunProgress`], owned by the run) and the run and operation counters (here).
pub(super) struct State {
    pub(super) session_id: String,
    pub(super) activity: RunActivity,
    pub(super) model: Option<Arc<Model>>,
    pub(super) thinking: ThinkingLevel,
    pub(super) catalog: Arc<Catalog>,
    pub(super) settings: SettingsStore,
    pub(super) queues: InputQueues,
    pub(super) journal: Journal,
    pub(super) system_prompt: SystemPrompt,
    pub(super) subscribers: Subscribers,
    pub(super) backpressure: Option<Arc<dyn Backpressure>>,
    /// The streaming message, a scheduled retry and a compaction in progress.
    pub(super) progress: RunProgress,
    /// Custom messages an extension command appended; committed when it settles.
    pub(super) deferred_custom: Vec<crate::session::custom::CustomMessageInput>,
    /// Custom messages sent with `next_turn`; committed before the next prompt's user message.
    pub(super) next_turn_custom: Vec<crate::session::custom::CustomMessageInput>,
    /// Snapshot parts derived from the journal, kept until it moves on.
    pub(super) snapshot_cache: crate::snapshot_cache::SnapshotCache,
    /// The serialized state snapshot, valid until the state is next borrowed mutably (see
    /// [`StateGuard`]).
    encoded_snapshot: Option<Encoded<SessionState>>,
    /// Approval configuration, pending requests and grants.
    pub(super) approvals: super::approvals::ApprovalBroker,
    next_run: u64,
    /// How many busy activities (runs, extension commands, manual compactions) have begun; the
    /// settle generation counts the ones that settled, so waiters compare the two.
    busy_begun: u64,
    next_operation: u64,
}

/// The session lock's guard. Reading the state goes through `Deref`; every mutable borrow
/// goes through `DerefMut`, which drops the serialized snapshot first, so a cached snapshot can
/// never outlive a change to what it was built from (the state has no interior mutability).
pub(super) struct StateGuard<'a>(pub(super) MutexGuard<'a, State>);

impl Deref for StateGuard<'_> {
    type Target = State;

    fn deref(&self) -> &State {
        &self.0
    }
}

impl DerefMut for StateGuard<'_> {
    fn deref_mut(&mut self) -> &mut State {
        let state = &mut *self.0;
        state.encoded_snapshot = None;
        state
    }
}

impl StateGuard<'_> {
    /// The serialized snapshot, if nothing changed since it was stored.
    pub(super) fn encoded_snapshot(&self) -> Option<&Encoded<SessionState>> {
        self.0.encoded_snapshot.as_ref()
    }

    /// Keeps `encoded` as the serialized snapshot of the state as it is now.
    pub(super) fn store_encoded_snapshot(&mut self, encoded: Encoded<SessionState>) {
        self.0.encoded_snapshot = Some(encoded);
    }
}

impl State {
    pub(super) fn new(
        session_id: String,
        model: Option<Arc<Model>>,
        thinking: ThinkingLevel,
        catalog: Arc<Catalog>,
        settings: SettingsStore,
        journal: Journal,
        system_prompt: SystemPrompt,
    ) -> State {
        State {
            session_id,
            activity: RunActivity::Idle,
            model,
            thinking,
            catalog,
            settings,
            queues: InputQueues::default(),
            journal,
            system_prompt,
            subscribers: Subscribers::default(),
            backpressure: None,
            progress: RunProgress::default(),
            deferred_custom: Vec::new(),
            next_turn_custom: Vec::new(),
            snapshot_cache: Default::default(),
            encoded_snapshot: None,
            approvals: super::approvals::ApprovalBroker::new(std::path::Path::new(".")),
            next_run: 0,
            busy_begun: 0,
            next_operation: 0,
        }
    }

    /// Makes `activity` (a run, an extension command or a manual compaction) the session's busy
    /// activity. Its finisher bumps the settle generation exactly once.
    pub(super) fn begin_busy(&mut self, activity: RunActivity) {
        self.busy_begun += 1;
        self.activity = activity;
    }

    /// The settle generation at which the current busy activity will have settled: every busy
    /// activity settles once, in the order they began.
    pub(super) fn settle_target(&self) -> u64 {
        self.busy_begun
    }

    /// The id of the next run.
    pub(super) fn next_run_id(&mut self) -> u64 {
        self.next_run += 1;
        self.next_run
    }

    /// The id of the next operation (extension command, compaction).
    pub(super) fn next_operation_id(&mut self) -> u64 {
        self.next_operation += 1;
        self.next_operation
    }

    /// What the session is doing that refuses busy-sensitive operations: `None` when idle,
    /// [`SessionError::Disposed`] once disposed.
    pub(super) fn busy_activity(&self) -> Result<Option<Activity>, SessionError> {
        Ok(Some(match self.activity {
            RunActivity::Idle => return Ok(None),
            RunActivity::Disposed => return Err(SessionError::Disposed),
            RunActivity::Running { aborting: true, .. }
            | RunActivity::Compacting { aborting: true, .. } => Activity::Aborting,
            RunActivity::Running { .. } => Activity::Running,
            RunActivity::ExtensionCommand { .. } => Activity::ExtensionCommand,
            RunActivity::Compacting { .. } => Activity::Compacting,
        }))
    }

    /// The one busy-state guard: `Ok` when the session is idle, else `operation` refused for
    /// the current activity (docs/rpc.md#admission-while-busy).
    pub(super) fn require_idle(&self, operation: Operation) -> Result<(), SessionError> {
        match self.busy_activity()? {
            None => Ok(()),
            Some(activity) => Err(SessionError::Busy {
                operation,
                activity,
            }),
        }
    }

    /// The guard of the operations that also need empty queues (`command.invoke`,
    /// `session.compact`), after [`State::require_idle`].
    pub(super) fn require_empty_queues(&self, operation: Operation) -> Result<(), SessionError> {
        if self.queues.is_empty() {
            return Ok(());
        }
        Err(SessionError::Busy {
            operation,
            activity: Activity::QueuedInput,
        })
    }

    /// The guard of queued input (steer, follow-up): admitted while idle or during a run;
    /// refused once disposed, while the run (or a manual compaction) is being aborted, while an
    /// extension command owns the session and while a manual compaction does.
    pub(super) fn require_queueable(&self) -> Result<(), SessionError> {
        match self.busy_activity()? {
            None | Some(Activity::Running) => Ok(()),
            Some(activity) => Err(SessionError::Busy {
                operation: Operation::QueueInput,
                activity,
            }),
        }
    }

    /// Delivers an event to every subscriber, in subscription order.
    pub(super) fn emit(&self, event: AgentSessionEvent) {
        self.emit_in(event, None);
    }

    /// Emits an assistant message's `message_start` with the entry id it will be committed as.
    pub(super) fn emit_with_message_id(&self, event: AgentSessionEvent, message_id: &str) {
        self.emit_in(event, Some(message_id));
    }

    fn emit_in(&self, event: AgentSessionEvent, message_id: Option<&str>) {
        if self.subscribers.list.is_empty() {
            return;
        }
        let context = EventContext {
            message_count: self.journal.presentation_len() as u64,
            message_id: message_id.map(str::to_string),
        };
        for (_, subscriber) in &self.subscribers.list {
            subscriber(&event, &context);
        }
    }

    /// Appends a journal entry and announces it with `entry_appended`.
    pub(super) fn append_announced(
        &mut self,
        data: EntryData,
    ) -> Result<SessionEntry, JournalError> {
        let entry = self.journal.append(data)?;
        self.emit(AgentSessionEvent::EntryAppended {
            entry: entry.clone(),
        });
        Ok(entry)
    }

    /// Commits a finished message: journal, `entry_appended`, then `message_end`.
    pub(super) fn commit_message(&mut self, message: AgentMessage) -> Result<(), JournalError> {
        self.commit_message_as(message, zi_journal::memory::new_entry_id())
    }

    /// [`State::commit_message`] under the entry id its `message_start` announced.
    pub(super) fn commit_message_as(
        &mut self,
        message: AgentMessage,
        id: String,
    ) -> Result<(), JournalError> {
        let entry = self.journal.append_with_id(
            EntryData::Message {
                message: message.clone(),
            },
            id,
        )?;
        self.emit(AgentSessionEvent::EntryAppended { entry });
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

    /// The synchronous part of an abort: cancels the active run or extension command and
    /// resolves pending approval requests as interrupted. False when nothing was active.
    pub(super) fn begin_abort(&mut self) -> Result<bool, SessionError> {
        match &mut self.activity {
            RunActivity::Disposed => return Err(SessionError::Disposed),
            RunActivity::Idle => return Ok(false),
            RunActivity::Running {
                cancel, aborting, ..
            } => {
                *aborting = true;
                cancel.cancel();
            }
            RunActivity::ExtensionCommand {
                cancel, cancelling, ..
            } => {
                *cancelling = true;
                cancel.cancel();
            }
            RunActivity::Compacting {
                cancel, aborting, ..
            } => {
                *aborting = true;
                cancel.cancel();
            }
        }
        self.cancel_pending_approvals(zi_protocol::approval::ResolutionSource::Interrupt);
        // Pending custom (extension) inputs are discarded; user input stays queued.
        self.deferred_custom.clear();
        self.next_turn_custom.clear();
        if self.queues.clear_custom() {
            self.emit_queue_update();
        }
        Ok(true)
    }

    /// Drops every queued input (shutdown, EOF and signals).
    pub(super) fn discard_queued_input(&mut self) {
        if !self.queues.is_empty() {
            self.queues.clear();
            self.emit_queue_update();
        }
    }

    pub(super) fn is_streaming(&self) -> bool {
        matches!(self.activity, RunActivity::Running { .. })
    }

    /// A run, an extension command or a manual compaction is active.
    pub(super) fn is_busy(&self) -> bool {
        matches!(
            self.activity,
            RunActivity::Running { .. }
                | RunActivity::ExtensionCommand { .. }
                | RunActivity::Compacting { .. }
        )
    }
}
