//! `AgentSession`: the state machine, admission and queries (docs/rpc.md#the-state-snapshot,
//! docs/rpc.md#admission-while-busy).
//!
//! All mutable state sits behind one mutex that is only ever held for short, synchronous
//! sections: admission, queries and event emission. A run executes in its own task ([`run`])
//! and takes the lock briefly per event, so queries and interrupts are answered at any moment
//! of a run. Events are delivered to subscribers synchronously while the lock is held, which
//! gives every subscriber the exact emission order.
//!
//! Where each part lives:
//! - `mod.rs`: construction, the lock, subscribers, journal bootstrap;
//! - [`state`]: what sits behind the lock (activity, queues, journal, …) and event emission;
//! - [`admission`]: prompts, interrupt, dispose, waiting for idle;
//! - [`manual_compaction`]: manual compaction (`session.compact`);
//! - [`models`]: the catalog, `model.select`, `thinking.select`;
//! - [`queries`]: the state snapshot and the message/outcome pages;
//! - [`custom`], [`extension`], [`host`]: what extensions and tools may do to the session;
//! - [`queue`]: the steering and follow-up queues;
//! - [`run`]: the run driver and the agent loop (turns, tools, retry, compaction).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use tokio::sync::watch;
use zi_ai::Model;
use zi_ai::catalog::Catalog;
use zi_ai::credentials::Credentials;
use zi_config::settings::SettingsStore;
use zi_journal::memory::{Journal, JournalError};
use zi_os::sync::lock;
use zi_protocol::ThinkingLevel;
use zi_protocol::event::{AgentSessionEvent, EntryData};

use crate::system_prompt::SystemPrompt;
use crate::tool::ToolSet;

mod admission;
pub mod approvals;
mod catalog;
pub mod custom;
pub mod delivery;
pub mod extension;
pub mod host;
mod manual_compaction;
mod models;
mod queries;
mod queue;
mod run;
#[cfg(test)]
mod settle_tests;
mod state;
pub(crate) mod tool_call;

pub use admission::{PromptAdmission, RunStarter};
pub use manual_compaction::{CompactOutcome, CompactionStarted};
pub use models::SelectModelError;
use state::{RunActivity, State, StateGuard};

/// Context handed to subscribers with each event.
pub struct EventContext {
    /// Length of the presentation message list after the event.
    pub message_count: u64,
    /// On an assistant message's `message_start`: the id of the journal entry the message will
    /// be committed as, so a subscriber can name the streaming message as the journal does.
    pub message_id: Option<String>,
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
    /// The id the journal and every frame carry.
    pub session_id: String,
    /// The working directory tools and approvals resolve paths against.
    pub cwd: PathBuf,
    /// Where settings, credentials and journals live (`~/.zi/agent` by default).
    pub agent_dir: PathBuf,
    /// The conversation so far (empty for a new session), with its file.
    pub journal: Journal,
    /// The models `model.select` chooses from, shared with whoever else resolves model
    /// references against the same catalog (the subagent supervisor).
    pub catalog: Arc<Catalog>,
    /// Where each request's key or token comes from.
    pub credentials: Credentials,
    /// The model to start with; `None` until one is selected (prompts fail until then).
    pub model: Option<Arc<Model>>,
    /// The thinking level to start with.
    pub thinking: ThinkingLevel,
    /// The settings files; compaction, retry and queue modes are read from them per run.
    pub settings: SettingsStore,
    /// The tools the model may call.
    pub tools: ToolSet,
    /// Follows the tool set: rebuilt before a provider request when the active tools changed.
    pub system_prompt: SystemPrompt,
    /// Longest silence between a provider's stream chunks before the request fails.
    pub idle_timeout: Duration,
    /// Skills and prompt templates applied to prompt text (docs/configuration.md#skills,
    /// docs/configuration.md#prompt-templates).
    pub expander: zi_config::resources::InputExpander,
}

struct Inner {
    state: Mutex<State>,
    /// Bumped every time a run settles; waiters compare generations.
    settled: watch::Sender<u64>,
    cwd: PathBuf,
    agent_dir: PathBuf,
    /// Behind a mutex because auth.json is re-read when the catalog is listed or a request is
    /// made; never held across an await.
    credentials: Mutex<Credentials>,
    tools: ToolSet,
    idle_timeout: Duration,
    expander: zi_config::resources::InputExpander,
    extensions: std::sync::OnceLock<Arc<dyn crate::extension::ExtensionHost>>,
    /// The delegation supervisor's delivery of child completions (none without profiles).
    delivery: std::sync::OnceLock<Arc<dyn delivery::ContextDelivery>>,
    /// The session directory of the cwd, when it is not the default (`--session-dir`).
    session_dir: std::sync::OnceLock<PathBuf>,
}

/// A cheap, cloneable handle to one session.
#[derive(Clone)]
pub struct AgentSession {
    inner: Arc<Inner>,
}

impl AgentSession {
    /// Builds a session. A model change and thinking level are journaled for new sessions by the
    /// caller (see [`AgentSession::record_bootstrap`]).
    pub fn new(config: SessionConfig) -> AgentSession {
        let (settled, _) = watch::channel(0);
        let mut state = State::new(
            config.session_id,
            config.model,
            config.thinking,
            config.catalog,
            config.settings,
            config.journal,
            config.system_prompt,
        );
        state.approvals = approvals::ApprovalBroker::new(&config.cwd);
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
                delivery: std::sync::OnceLock::new(),
                session_dir: std::sync::OnceLock::new(),
            }),
        }
    }

    fn lock(&self) -> StateGuard<'_> {
        StateGuard(lock(&self.inner.state))
    }

    /// Journals the initial model and thinking level of a new session (no events).
    pub fn record_bootstrap(&self) -> Result<(), JournalError> {
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
    pub fn record_resume(
        &self,
        model_changed: bool,
        thinking_changed: bool,
    ) -> Result<(), JournalError> {
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
    pub fn host(&self) -> crate::session::host::SessionHost {
        crate::session::host::SessionHost {
            inner: Arc::downgrade(&self.inner),
        }
    }

    /// Attaches the delegation supervisor's context delivery (once; later calls are ignored).
    pub fn set_context_delivery(&self, delivery: Arc<dyn delivery::ContextDelivery>) {
        let _ = self.inner.delivery.set(delivery);
    }

    fn context_delivery(&self) -> Option<&Arc<dyn delivery::ContextDelivery>> {
        self.inner.delivery.get()
    }

    /// The current system prompt.
    pub fn system_prompt(&self) -> String {
        self.lock().system_prompt.text().to_string()
    }

    /// Every tool of the session and which are active (extensions change the active set).
    pub fn tools(&self) -> &ToolSet {
        &self.inner.tools
    }

    /// The session's working directory.
    pub fn cwd(&self) -> &Path {
        &self.inner.cwd
    }

    /// The skills and prompt templates prompt text is expanded with (the interactive mode
    /// offers them in its slash completion).
    pub fn input_expander(&self) -> &zi_config::resources::InputExpander {
        &self.inner.expander
    }

    /// The session's id.
    pub fn session_id(&self) -> String {
        self.lock().session_id.clone()
    }

    /// The journal's file; `None` for an in-memory session.
    pub fn journal_path(&self) -> Option<PathBuf> {
        self.lock().journal.file_path().map(Path::to_path_buf)
    }

    /// Registers a subscriber; returns its id for [`AgentSession::unsubscribe`].
    pub fn subscribe(&self, subscriber: Subscriber) -> u64 {
        self.lock().subscribers.add(subscriber)
    }

    /// Removes the subscriber [`AgentSession::subscribe`] returned `id` for.
    pub fn unsubscribe(&self, id: u64) {
        self.lock().subscribers.remove(id);
    }

    /// Installs (or with `None` removes) the consumer that may slow the agent loop down.
    pub fn set_backpressure(&self, backpressure: Option<Arc<dyn Backpressure>>) {
        self.lock().backpressure = backpressure;
    }
}

/// Waits until the settle generation reaches `target` (the busy activity the caller saw has
/// settled) or, at a settle, `done()` holds. Comparing with the activity's own target rather than
/// "the generation moved" matters: the previous activity's settle is published just after it
/// goes idle, so under load it can arrive after the next activity has begun, and must not end a
/// wait for that next one (an `await_idle` answered while the next prompt still streamed).
async fn wait_for_settle(settled: &mut watch::Receiver<u64>, target: u64, done: impl Fn() -> bool) {
    loop {
        if *settled.borrow_and_update() >= target || done() {
            return;
        }
        if settled.changed().await.is_err() {
            return;
        }
    }
}
