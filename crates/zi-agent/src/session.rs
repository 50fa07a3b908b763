//! `AgentSession`: the state machine, admission and queries (runtime-reference §4).
//!
//! All mutable state sits behind one mutex that is only ever held for short, synchronous
//! sections: admission, queries and event emission. A run executes in its own task
//! ([`crate::run`]) and takes the lock briefly per event, so queries and interrupts are
//! answered at any moment of a run. Events are delivered to subscribers synchronously while the
//! lock is held, which gives every subscriber the exact emission order.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use futures::future::BoxFuture;
use serde_json::{Map, Value};
use tokio::sync::{oneshot, watch};
use tokio_util::sync::CancellationToken;
use zi_ai::Model;
use zi_ai::catalog::Catalog;
use zi_ai::credentials::Credentials;
use zi_ai::model::{clamp_thinking, supported_levels};
use zi_protocol::ThinkingLevel;
use zi_protocol::event::{AgentSessionEvent, EntryData, SessionEntry};
use zi_protocol::message::{AgentMessage, AssistantMessage};
use zi_protocol::request::{Delivery, SettingsScope};
use zi_protocol::results::{MessagePage, OutcomePage, ThinkingSelection};
use zi_protocol::state::{
    Activity, CatalogModel, CommandPhase, CompactionReason, CompactionStatus, ModelState,
    QueuedDelivery, RetryStatus, RpcModel, SessionState,
};

use crate::context_usage::context_usage;
use crate::errors::{self, SessionError};
use crate::journal::Journal;
use crate::queue::InputQueues;
use crate::settings::SettingsStore;
use crate::tool::ToolSet;

/// Largest message page in bytes, and the accumulator's starting value (rpc-reference §4.2).
pub const PAGE_BYTE_BOUND: u64 = 8 * 1024 * 1024;
const PAGE_BYTE_START: u64 = 256;

/// Context handed to subscribers with each event.
pub struct EventContext {
    /// Length of the presentation message list after the event.
    pub message_count: u64,
}

/// A synchronous event observer. It runs while the session lock is held: it must be quick and
/// must never call back into the session.
pub type Subscriber = Arc<dyn Fn(&AgentSessionEvent, &EventContext) + Send + Sync>;

/// Lets a consumer slow the agent loop down instead of letting its buffers grow.
pub trait Backpressure: Send + Sync {
    /// `None` when there is room now; otherwise a future that resolves when there is.
    fn wait_for_room(&self) -> Option<BoxFuture<'static, ()>>;
}

/// Everything needed to build a session.
pub struct SessionConfig {
    pub session_id: String,
    pub cwd: PathBuf,
    pub agent_dir: PathBuf,
    pub journal: Journal,
    pub catalog: Catalog,
    pub credentials: Credentials,
    pub model: Option<Arc<Model>>,
    pub thinking: ThinkingLevel,
    pub settings: SettingsStore,
    pub tools: ToolSet,
    pub system_prompt: String,
    pub idle_timeout: Duration,
    /// Skills and prompt templates applied to prompt text (runtime-reference §5.6).
    pub expander: crate::resources::InputExpander,
}

#[derive(Debug, Clone)]
pub(crate) enum RunActivity {
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

pub(crate) struct State {
    pub(crate) session_id: String,
    pub(crate) activity: RunActivity,
    pub(crate) model: Option<Arc<Model>>,
    pub(crate) thinking: ThinkingLevel,
    pub(crate) catalog: Catalog,
    pub(crate) settings: SettingsStore,
    pub(crate) queues: InputQueues,
    pub(crate) journal: Journal,
    pub(crate) streaming: Option<AssistantMessage>,
    pub(crate) system_prompt: String,
    /// A scheduled automatic retry (rpc-reference §5 `retry`).
    pub(crate) retry: RetryStatus,
    subscribers: Vec<(u64, Subscriber)>,
    next_subscriber: u64,
    next_run: u64,
    pub(crate) backpressure: Option<Arc<dyn Backpressure>>,
    /// The automatic compaction in progress inside a run.
    pub(crate) compacting: Option<(u64, CompactionReason)>,
    pub(crate) next_operation: u64,
    /// Custom messages an extension command appended; committed when it settles.
    pub(crate) deferred_custom: Vec<crate::custom::CustomMessageInput>,
}

impl State {
    /// Delivers an event to every subscriber, in subscription order.
    pub(crate) fn emit(&self, event: AgentSessionEvent) {
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
    pub(crate) fn append_announced(&mut self, data: EntryData) -> Result<SessionEntry, String> {
        let entry = self.journal.append(data)?;
        self.emit(AgentSessionEvent::EntryAppended {
            entry: entry.clone(),
        });
        Ok(entry)
    }

    /// Commits a finished message: journal, `entry_appended`, then `message_end`.
    pub(crate) fn commit_message(&mut self, message: AgentMessage) -> Result<(), String> {
        self.append_announced(EntryData::Message {
            message: message.clone(),
        })?;
        self.emit(AgentSessionEvent::MessageEnd { message });
        Ok(())
    }

    pub(crate) fn emit_queue_update(&self) {
        let snapshot = self.queues.snapshot();
        self.emit(AgentSessionEvent::QueueUpdate {
            steering: snapshot.steering,
            follow_up: snapshot.follow_up,
        });
    }

    fn is_streaming(&self) -> bool {
        matches!(self.activity, RunActivity::Running { .. })
    }

    /// A run or an extension command is active.
    fn is_busy(&self) -> bool {
        matches!(
            self.activity,
            RunActivity::Running { .. } | RunActivity::ExtensionCommand { .. }
        )
    }
}

pub(crate) struct Inner {
    pub(crate) state: Mutex<State>,
    /// Bumped every time a run settles; waiters compare generations.
    pub(crate) settled: watch::Sender<u64>,
    pub(crate) cwd: PathBuf,
    pub(crate) agent_dir: PathBuf,
    /// Behind a mutex because auth.json is re-read when the catalog is listed or a request is
    /// made; never held across an await.
    pub(crate) credentials: Mutex<Credentials>,
    pub(crate) tools: ToolSet,
    pub(crate) idle_timeout: Duration,
    pub(crate) expander: crate::resources::InputExpander,
    pub(crate) extensions: std::sync::OnceLock<Arc<dyn crate::extension::ExtensionHost>>,
}

/// A cheap, cloneable handle to one session.
#[derive(Clone)]
pub struct AgentSession {
    pub(crate) inner: Arc<Inner>,
}

/// Releases an admitted run. The run emits nothing until this is dropped, which lets the RPC
/// connection write the prompt's response before the run's first event.
pub struct RunStarter(Option<oneshot::Sender<()>>);

impl Drop for RunStarter {
    fn drop(&mut self) {
        if let Some(sender) = self.0.take() {
            let _ = sender.send(());
        }
    }
}

/// What a successful prompt admission did.
pub struct PromptAdmission {
    /// Present when the prompt started a run.
    pub starter: Option<RunStarter>,
}

/// Why `model.select` failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SelectModelError {
    NotFound(String),
    Failed(SessionError),
}

impl AgentSession {
    /// Builds a session. A model change and thinking level are journaled for new sessions by the
    /// caller (see [`AgentSession::record_bootstrap`]).
    pub fn new(config: SessionConfig) -> AgentSession {
        let (settled, _) = watch::channel(0);
        let state = State {
            session_id: config.session_id,
            activity: RunActivity::Idle,
            model: config.model,
            thinking: config.thinking,
            catalog: config.catalog,
            settings: config.settings,
            queues: InputQueues::default(),
            journal: config.journal,
            streaming: None,
            system_prompt: config.system_prompt,
            retry: RetryStatus::Idle,
            subscribers: Vec::new(),
            next_subscriber: 0,
            next_run: 0,
            backpressure: None,
            compacting: None,
            next_operation: 0,
            deferred_custom: Vec::new(),
        };
        AgentSession {
            inner: Arc::new(Inner {
                state: Mutex::new(state),
                settled,
                cwd: config.cwd,
                agent_dir: config.agent_dir,
                credentials: Mutex::new(config.credentials),
                tools: config.tools,
                idle_timeout: config.idle_timeout,
                expander: config.expander,
                extensions: std::sync::OnceLock::new(),
            }),
        }
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, State> {
        self.inner
            .state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Journals the initial model and thinking level of a new session (no events).
    pub fn record_bootstrap(&self) -> Result<(), String> {
        let mut state = self.lock();
        if let Some(model) = state.model.clone() {
            state.journal.append(EntryData::ModelChange {
                provider: model.provider.clone(),
                model_id: model.id.clone(),
            })?;
        }
        let level = state.thinking;
        state.journal.append(EntryData::ThinkingLevelChange {
            thinking_level: level,
        })?;
        Ok(())
    }

    /// Journals what a resumed session changed: the model (when it differs from the saved
    /// one) and the thinking level (when it differs, or was never recorded).
    pub fn record_resume(&self, model_changed: bool, thinking_changed: bool) -> Result<(), String> {
        let mut state = self.lock();
        if model_changed && let Some(model) = state.model.clone() {
            state.journal.append(EntryData::ModelChange {
                provider: model.provider.clone(),
                model_id: model.id.clone(),
            })?;
        }
        if thinking_changed {
            let level = state.thinking;
            state.journal.append(EntryData::ThinkingLevelChange {
                thinking_level: level,
            })?;
        }
        Ok(())
    }

    /// The handle tools use to reach this session.
    pub fn host(&self) -> crate::host::SessionHost {
        crate::host::SessionHost {
            inner: Arc::downgrade(&self.inner),
        }
    }

    /// The current system prompt.
    pub fn system_prompt(&self) -> String {
        self.lock().system_prompt.clone()
    }

    /// One page of the journal's operation outcomes, in journal order (rpc-reference §4.3).
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

    pub fn cwd(&self) -> &Path {
        &self.inner.cwd
    }

    pub fn session_id(&self) -> String {
        self.lock().session_id.clone()
    }

    pub fn journal_path(&self) -> Option<PathBuf> {
        self.lock().journal.file_path().map(Path::to_path_buf)
    }

    /// Registers a subscriber; returns its id for [`AgentSession::unsubscribe`].
    pub fn subscribe(&self, subscriber: Subscriber) -> u64 {
        let mut state = self.lock();
        state.next_subscriber += 1;
        let id = state.next_subscriber;
        state.subscribers.push((id, subscriber));
        id
    }

    pub fn unsubscribe(&self, id: u64) {
        self.lock().subscribers.retain(|(sid, _)| *sid != id);
    }

    pub fn subscriber_count(&self) -> usize {
        self.lock().subscribers.len()
    }

    pub fn set_backpressure(&self, backpressure: Option<Arc<dyn Backpressure>>) {
        self.lock().backpressure = backpressure;
    }

    /// The state snapshot (rpc-reference §5).
    pub fn state(&self) -> SessionState {
        let state = self.lock();
        let activity = match (&state.activity, state.compacting) {
            (RunActivity::Running { aborting: true, .. }, _) => Activity::Aborting,
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
            work_plan: state
                .journal
                .latest_work_plan()
                .cloned()
                .unwrap_or_default(),
            message_count: state.journal.presentation_len() as u64,
            streaming_message: state.streaming.clone().map(AgentMessage::Assistant),
            compaction: match state.compacting {
                Some((operation_id, reason)) => CompactionStatus::Running {
                    operation_id,
                    reason,
                },
                None => CompactionStatus::Idle,
            },
            retry: state.retry.clone(),
            context_usage: {
                let (messages, anchor) = state.journal.context_view();
                context_usage(model, &messages, anchor)
            },
        }
    }

    /// Whether a run is active (running or aborting).
    pub fn is_streaming(&self) -> bool {
        self.lock().is_streaming()
    }

    pub fn message_count(&self) -> u64 {
        self.lock().journal.presentation_len() as u64
    }

    /// One page of the presentation messages (rpc-reference §4.2).
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
                return Err(SessionError(format!(
                    "Session message {index} exceeds the RPC page byte bound"
                )));
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

    /// Admits a prompt (runtime-reference §4.3).
    pub fn prompt(
        &self,
        delivery: Delivery,
        text: String,
    ) -> Result<PromptAdmission, SessionError> {
        self.prompt_with(delivery, text, |_| ()).1
    }

    /// Admits a prompt after running `before` under the session lock with whether a run is
    /// active. Nothing is emitted between `before` and the admission decision, which is what
    /// completion-watch bookkeeping needs.
    pub fn prompt_with<R>(
        &self,
        delivery: Delivery,
        text: String,
        before: impl FnOnce(bool) -> R,
    ) -> (R, Result<PromptAdmission, SessionError>) {
        let text = self.inner.expander.expand(&text);
        let mut state = self.lock();
        let observed = before(state.is_streaming());
        let result = self.admit(&mut state, delivery, text);
        (observed, result)
    }

    fn admit(
        &self,
        state: &mut State,
        delivery: Delivery,
        text: String,
    ) -> Result<PromptAdmission, SessionError> {
        match (delivery, &state.activity) {
            (_, RunActivity::Disposed) => Err(errors::DISPOSED.into()),
            (Delivery::Direct | Delivery::Continue, RunActivity::ExtensionCommand { .. }) => {
                Err(errors::PROMPT_WHILE_COMMAND.into())
            }
            (Delivery::Steer | Delivery::FollowUp, RunActivity::ExtensionCommand { .. }) => {
                Err(errors::QUEUE_WHILE_COMMAND.into())
            }
            (
                Delivery::Direct | Delivery::Continue,
                RunActivity::Running { aborting: true, .. },
            ) => Err(errors::PROMPT_WHILE_ABORTING.into()),
            (Delivery::Steer | Delivery::FollowUp, RunActivity::Running { aborting: true, .. }) => {
                Err(errors::QUEUE_WHILE_ABORTING.into())
            }
            (Delivery::Direct, RunActivity::Running { .. }) => {
                Err(errors::PROMPT_WHILE_RUNNING.into())
            }
            (Delivery::Continue, RunActivity::Running { .. }) | (Delivery::FollowUp, _) => {
                self.enqueue(state, QueuedDelivery::FollowUp, text)
            }
            (Delivery::Steer, _) => self.enqueue(state, QueuedDelivery::Steer, text),
            (Delivery::Direct | Delivery::Continue, RunActivity::Idle) => {
                if state.model.is_none() {
                    return Err(errors::NO_MODEL.into());
                }
                Ok(PromptAdmission {
                    starter: Some(self.start_run(state, Some(text))),
                })
            }
        }
    }

    fn enqueue(
        &self,
        state: &mut State,
        delivery: QueuedDelivery,
        text: String,
    ) -> Result<PromptAdmission, SessionError> {
        state
            .queues
            .push(delivery, text)
            .map_err(|_| SessionError::from(errors::QUEUE_CAPACITY))?;
        state.emit_queue_update();
        Ok(PromptAdmission { starter: None })
    }

    pub(crate) fn start_run(&self, state: &mut State, prompt: Option<String>) -> RunStarter {
        state.next_run += 1;
        let run_id = state.next_run;
        let cancel = CancellationToken::new();
        state.activity = RunActivity::Running {
            run_id,
            cancel: cancel.clone(),
            aborting: false,
        };
        let (gate_tx, gate_rx) = oneshot::channel();
        let session = self.clone();
        tokio::spawn(async move {
            let _ = gate_rx.await;
            crate::run::run(session, run_id, cancel, prompt).await;
        });
        RunStarter(Some(gate_tx))
    }

    /// Interrupts the active run and returns once it has settled (runtime-reference §6).
    /// Queued user input is kept.
    pub async fn abort(&self) -> Result<(), SessionError> {
        let mut settled = self.inner.settled.subscribe();
        let generation = *settled.borrow_and_update();
        {
            let mut state = self.lock();
            match &mut state.activity {
                RunActivity::Disposed => return Err(errors::DISPOSED.into()),
                RunActivity::Idle => return Ok(()),
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
            }
            // Pending custom (extension) inputs are discarded; user input stays queued.
            state.deferred_custom.clear();
            if state.queues.clear_custom() {
                state.emit_queue_update();
            }
        }
        wait_for_settle(&mut settled, generation, || !self.lock().is_busy()).await;
        Ok(())
    }

    /// Drops every queued input, then aborts (shutdown, EOF and signals).
    pub async fn abort_and_discard(&self) {
        {
            let mut state = self.lock();
            if !state.queues.is_empty() {
                state.queues.clear();
                state.emit_queue_update();
            }
        }
        let _ = self.abort().await;
    }

    /// Aborts, discards queued input and refuses every later operation.
    /// Tools are shut down (background tasks killed, their outcomes appended) before the session
    /// refuses operations.
    pub async fn dispose(&self) {
        self.abort_and_discard().await;
        if let Some(host) = self.inner.extensions.get() {
            host.shutdown().await;
        }
        self.inner.tools.shutdown().await;
        self.lock().activity = RunActivity::Disposed;
    }

    /// Returns once the session is idle: immediately if it is, else at the next settle.
    pub async fn wait_idle(&self) {
        let mut settled = self.inner.settled.subscribe();
        let generation = *settled.borrow_and_update();
        if !self.lock().is_busy() {
            return;
        }
        wait_for_settle(&mut settled, generation, || !self.lock().is_busy()).await;
    }

    /// Re-reads models.json and lists every model with whether it is configured.
    pub fn model_list(&self) -> Result<Vec<CatalogModel>, SessionError> {
        let catalog = self.reload_catalog();
        let credentials = self.refreshed_credentials();
        let mut state = self.lock();
        if matches!(state.activity, RunActivity::Disposed) {
            return Err(errors::DISPOSED.into());
        }
        let models = catalog
            .models
            .iter()
            .map(|model| CatalogModel {
                model: model.public(),
                configured: credentials.is_configured(model),
            })
            .collect();
        state.catalog = catalog;
        Ok(models)
    }

    /// The credentials with auth.json re-read. Its problems were reported as `Warning:` lines at
    /// start-up; later ones only reach the debug log, so listing models never floods stderr.
    pub(crate) fn refreshed_credentials(&self) -> Credentials {
        let mut credentials = self
            .inner
            .credentials
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        for problem in credentials.reload_stored(&self.inner.agent_dir) {
            tracing::debug!("{problem}");
        }
        credentials.clone()
    }

    fn reload_catalog(&self) -> Catalog {
        let catalog = Catalog::load(&self.inner.agent_dir);
        for warning in &catalog.warnings {
            tracing::warn!("{warning}");
        }
        catalog
    }

    /// `model.select` (rpc-reference §4.11).
    pub fn select_model(&self, provider: &str, id: &str) -> Result<RpcModel, SelectModelError> {
        let catalog = self.reload_catalog();
        let mut state = self.lock();
        state.catalog = catalog;
        let Some(model) = state.catalog.find(provider, id).cloned().map(Arc::new) else {
            return Err(SelectModelError::NotFound(errors::model_not_found(
                provider, id,
            )));
        };
        let fail = |message: &str| Err(SelectModelError::Failed(SessionError::from(message)));
        match state.activity {
            RunActivity::Disposed => return fail(errors::DISPOSED),
            RunActivity::Running { aborting: true, .. } => {
                return fail(errors::MODEL_WHILE_ABORTING);
            }
            RunActivity::Running { .. } => return fail(errors::MODEL_WHILE_RUNNING),
            RunActivity::ExtensionCommand { .. } => return fail(errors::MODEL_WHILE_COMMAND),
            RunActivity::Idle => {}
        }
        if !self.refreshed_credentials().is_configured(&model) {
            return Err(SelectModelError::Failed(SessionError(
                errors::model_not_authenticated(&model.reference()),
            )));
        }
        let previous_reasoned = state.model.as_ref().is_some_and(|m| m.reasoning);
        let preferred = if previous_reasoned {
            state.thinking
        } else {
            state
                .settings
                .effective()
                .default_thinking_level
                .unwrap_or(ThinkingLevel::Medium)
        };
        let level = clamp_thinking(&model.supported_thinking_levels(), preferred);
        let changed = level != state.thinking;
        let journal = state
            .journal
            .append(EntryData::ModelChange {
                provider: model.provider.clone(),
                model_id: model.id.clone(),
            })
            .and_then(|_| {
                if changed {
                    state
                        .journal
                        .append(EntryData::ThinkingLevelChange {
                            thinking_level: level,
                        })
                        .map(|_| ())
                } else {
                    Ok(())
                }
            });
        if let Err(error) = journal {
            return Err(SelectModelError::Failed(SessionError(error)));
        }
        state.model = Some(model.clone());
        state.thinking = level;
        let mut patch = Map::new();
        patch.insert(
            "defaultProvider".into(),
            Value::from(model.provider.clone()),
        );
        patch.insert("defaultModel".into(), Value::from(model.id.clone()));
        if changed && (model.reasoning || level != ThinkingLevel::Off) {
            patch.insert("defaultThinkingLevel".into(), Value::from(level.as_str()));
        }
        let write = state.settings.write(SettingsScope::Global, patch);
        if changed {
            state.emit(AgentSessionEvent::ThinkingLevelChanged { level });
        }
        state.emit(AgentSessionEvent::ModelChanged {
            model: model.public(),
        });
        if let Err(error) = write {
            tracing::warn!("model selected but not saved as the default: {error}");
        }
        Ok(model.public())
    }

    /// Levels the selected model supports.
    pub fn thinking_levels(&self) -> Vec<ThinkingLevel> {
        supported_levels(self.lock().model.as_deref())
    }

    /// `thinking.select` (rpc-reference §12.3).
    pub fn select_thinking(
        &self,
        requested: ThinkingLevel,
        scope: SettingsScope,
    ) -> Result<ThinkingSelection, SessionError> {
        let mut state = self.lock();
        match state.activity {
            RunActivity::Disposed => return Err(errors::DISPOSED.into()),
            RunActivity::Running { aborting: true, .. } => {
                return Err(errors::THINKING_WHILE_ABORTING.into());
            }
            RunActivity::Running { .. } => return Err(errors::THINKING_WHILE_RUNNING.into()),
            RunActivity::ExtensionCommand { .. } => {
                return Err(errors::THINKING_WHILE_COMMAND.into());
            }
            RunActivity::Idle => {}
        }
        let Some(model) = state.model.clone() else {
            return Err(errors::NO_MODEL.into());
        };
        let supported = model.supported_thinking_levels();
        let persisted = clamp_thinking(&supported, requested);
        if model.reasoning || persisted != ThinkingLevel::Off {
            let mut patch = Map::new();
            patch.insert(
                "defaultThinkingLevel".into(),
                Value::from(persisted.as_str()),
            );
            state.settings.write(scope, patch).map_err(SessionError)?;
        }
        let merged = state
            .settings
            .effective()
            .default_thinking_level
            .unwrap_or(ThinkingLevel::Medium);
        let effective = clamp_thinking(&supported, merged);
        if effective != state.thinking {
            state
                .journal
                .append(EntryData::ThinkingLevelChange {
                    thinking_level: effective,
                })
                .map_err(SessionError)?;
            state.thinking = effective;
            state.emit(AgentSessionEvent::ThinkingLevelChanged { level: effective });
        }
        Ok(ThinkingSelection {
            scope,
            requested,
            effective,
        })
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
fn encoded_len<T: serde::Serialize>(value: &T) -> Result<u64, serde_json::Error> {
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

/// Waits until the settle generation moves past `generation` or `done()` holds.
async fn wait_for_settle(
    settled: &mut watch::Receiver<u64>,
    generation: u64,
    done: impl Fn() -> bool,
) {
    loop {
        if *settled.borrow_and_update() != generation || done() {
            return;
        }
        if settled.changed().await.is_err() {
            return;
        }
    }
}
