//! The supervisor (docs/delegation.md#limits): live children, retained exited snapshots,
//! reserved names and the completion ledger, behind one mutex that is never held across an
//! await. Operations on one child run one at a time (its serial lock); children run
//! concurrently.
//!
//! - [`spawn`]: `spawn_subagent` (docs/delegation.md#tools) and the child's command line and
//!   environment (docs/delegation.md#children);
//! - [`cycle`]: driving a work cycle to its completion, timeouts, the exit watch
//!   (docs/delegation.md#children);
//! - [`control`]: send, assign, interrupt, close, wait and shutdown (docs/delegation.md#tools,
//!   docs/delegation.md#lifetime), one module per operation;
//! - [`snapshot`]: what the tools show (docs/delegation.md#tools).

use std::collections::{HashSet, VecDeque};
use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::Instant;

use tokio::sync::{Notify, watch};
use zi_agent::session::host::SessionHost;
use zi_config::subagent_profiles::{SubagentCatalog, SubagentProfileRegistry};
use zi_os::sync::lock;

use crate::child::ChildProcess;
use crate::error::SubagentError;
use crate::ledger::Ledger;

pub mod control;
mod cycle;
mod snapshot;
pub mod spawn;

pub use snapshot::Snapshot;

/// Resolves a profile's `model` to the canonical `provider/id` when it exists and is usable.
pub type ModelResolver = Arc<dyn Fn(&str) -> Option<String> + Send + Sync>;

/// What runtime construction hands the supervisor.
pub struct SupervisorConfig {
    /// The composed profile catalog; an extension reload publishes a new one. Asked on every
    /// look: the first one may read the Markdown profiles.
    pub catalog: Arc<SubagentProfileRegistry>,
    /// The running executable.
    pub program: PathBuf,
    /// The parent session's cwd.
    pub cwd: PathBuf,
    /// The parent's agent directory, which children share (`ZI_AGENT_DIR`).
    pub agent_dir: PathBuf,
    /// The parent's environment captured at start-up.
    pub environment: Vec<(OsString, OsString)>,
    /// The parent's `--api-key`, handed to children that use the parent's model.
    pub api_key: Option<String>,
    /// `subagentWaitTimeoutMs`: the default wait of `wait_subagents`.
    pub wait_timeout_ms: u64,
    /// `subagentWorkTimeoutMs`: how long one work cycle may run.
    pub work_timeout_ms: u64,
    /// Resolves a profile's `model`.
    pub resolve_model: ModelResolver,
    /// Flags every child gets after the standard ones (docs/delegation.md#children): the
    /// parent's effective approval policy, rules and sandbox.
    pub extra_args: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    Open,
    Stopping,
    Closed,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InterruptReason {
    Requested,
    WorkTimeout,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lifecycle {
    Starting,
    Idle,
    SpawnAdmitting,
    Running,
    Interrupting(InterruptReason),
    Closing,
}

impl Lifecycle {
    pub fn as_str(self) -> &'static str {
        match self {
            Lifecycle::Starting => "starting",
            Lifecycle::Idle => "idle",
            Lifecycle::SpawnAdmitting => "spawn_admitting",
            Lifecycle::Running => "running",
            Lifecycle::Interrupting(_) => "interrupting",
            Lifecycle::Closing => "closing",
        }
    }

    pub fn is_working(self) -> bool {
        matches!(
            self,
            Lifecycle::Starting
                | Lifecycle::SpawnAdmitting
                | Lifecycle::Running
                | Lifecycle::Interrupting(_)
        )
    }
}

/// What one live child is doing, kept under the supervisor lock.
pub(crate) struct ChildState {
    pub lifecycle: Lifecycle,
    /// The last started work cycle (0 before the first).
    pub cycle: u64,
    /// Whether `cycle` is still waiting for its completion.
    pub cycle_open: bool,
    pub task: Option<String>,
    pub since: Instant,
    pub cycle_started: Instant,
    pub deadline_expired: bool,
    /// The last completion revision a prompt acknowledged, and the admission fence
    /// (docs/delegation.md#children).
    pub revision: u64,
    pub admissions: u64,
    pub in_flight: u32,
    pub interrupt_started: Option<Instant>,
}

impl ChildState {
    fn new() -> ChildState {
        let now = Instant::now();
        ChildState {
            lifecycle: Lifecycle::Starting,
            cycle: 0,
            cycle_open: false,
            task: None,
            since: now,
            cycle_started: now,
            deadline_expired: false,
            revision: 0,
            admissions: 0,
            in_flight: 0,
            interrupt_started: None,
        }
    }

    pub fn set(&mut self, lifecycle: Lifecycle) {
        self.lifecycle = lifecycle;
        self.since = Instant::now();
    }
}

/// The parts of a child shared with its tasks, outside the supervisor lock.
pub(crate) struct ChildHandle {
    pub name: String,
    pub profile: String,
    /// Serializes send, assign, interrupt and close on this child.
    pub serial: tokio::sync::Mutex<()>,
    pub process: OnceLock<Arc<ChildProcess>>,
    /// Wakes the cycle driver when an interrupt was requested.
    pub wake: Notify,
}

pub(crate) struct LiveChild {
    pub handle: Arc<ChildHandle>,
    pub state: ChildState,
}

/// A child that left, kept for listing, waits and closes (at most 32).
#[derive(Debug, Clone)]
pub(crate) struct ExitedChild {
    pub name: String,
    pub cycle: u64,
    pub task: Option<String>,
}

pub(crate) struct State {
    pub phase: Phase,
    pub live: Vec<LiveChild>,
    pub exited: VecDeque<ExitedChild>,
    pub names: HashSet<String>,
    pub ledger: Ledger,
}

/// The children of one parent session: spawning, work cycles, the completion ledger and
/// shutdown (docs/delegation.md#children).
pub struct Supervisor {
    pub(crate) config: SupervisorConfig,
    pub(crate) host: OnceLock<SessionHost>,
    pub(crate) state: Mutex<State>,
    /// Bumped on every change a waiting tool may care about.
    pub(crate) changes: watch::Sender<u64>,
    /// Resolves once shutdown finished.
    pub(crate) shut_down: watch::Sender<bool>,
}

impl Supervisor {
    /// A supervisor with no children.
    pub fn new(config: SupervisorConfig) -> Arc<Supervisor> {
        Arc::new(Supervisor {
            config,
            host: OnceLock::new(),
            state: Mutex::new(State {
                phase: Phase::Open,
                live: Vec::new(),
                exited: VecDeque::new(),
                names: HashSet::new(),
                ledger: Ledger::default(),
            }),
            changes: watch::Sender::new(0),
            shut_down: watch::Sender::new(false),
        })
    }

    /// The catalog now.
    pub fn catalog(&self) -> Arc<SubagentCatalog> {
        self.config.catalog.catalog()
    }

    /// Binds the session the supervisor records evidence in.
    pub fn attach(&self, host: SessionHost) {
        let _ = self.host.set(host);
    }

    pub(crate) fn host(&self) -> SessionHost {
        self.host.get().cloned().unwrap_or_default()
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, State> {
        lock(&self.state)
    }

    /// `subagent_changed{name}` and a wake-up for waiting tools.
    pub(crate) fn changed(&self, name: &str) {
        self.host().subagent_changed(name);
        self.changes.send_modify(|n| *n += 1);
    }

    pub(crate) fn check_open(state: &State) -> Result<(), SubagentError> {
        match state.phase {
            Phase::Open => Ok(()),
            Phase::Stopping => Err(SubagentError::Stopping),
            Phase::Closed => Err(SubagentError::Closed),
        }
    }

    pub(crate) fn live_handle(&self, name: &str) -> Option<Arc<ChildHandle>> {
        self.lock()
            .live
            .iter()
            .find(|c| c.handle.name == name)
            .map(|c| c.handle.clone())
    }
}

impl State {
    pub(crate) fn child(&self, name: &str) -> Option<&LiveChild> {
        self.live.iter().find(|c| c.handle.name == name)
    }

    pub(crate) fn child_mut(&mut self, name: &str) -> Option<&mut LiveChild> {
        self.live.iter_mut().find(|c| c.handle.name == name)
    }

    pub(crate) fn retain_exited(&mut self, exited: ExitedChild) {
        self.exited.retain(|e| e.name != exited.name);
        self.exited.push_back(exited);
        while self.exited.len() > crate::limits::MAX_RETAINED_EXITED {
            self.exited.pop_front();
        }
    }

    pub(crate) fn known(&self, name: &str) -> bool {
        self.child(name).is_some() || self.exited.iter().any(|e| e.name == name)
    }
}

#[cfg(test)]
#[path = "state_tests.rs"]
mod tests;
