//! Profile-driven delegation (docs/delegation.md): each subagent is a child
//! `zi --mode rpc --no-session` process driven over Zi RPC v1 through `zi-rpc-client`, exposed
//! to the parent model as the eight standard tools, with its work-cycle results delivered to
//! the parent model at most once and its lifecycle recorded as durable evidence.
//!
//! - [`limits`]: bounds and the shared input checks;
//! - [`child`]: one child process, its RPC conversation, close and kill (zi-os's process tree);
//! - [`supervisor`]: children, names, the work cycles and their timeouts;
//! - [`ledger`], [`completion`]: the completion ledger and the completion record;
//! - [`evidence`]: `subagent` entries and operation outcomes;
//! - [`delivery`]: hidden context, acknowledgement, claim release;
//! - [`restore`]: the ledger, names and `lost` children after `--continue`;
//! - [`tools`]: the eight tools.
//!
//! `zi-cli` builds a [`Delegation`] when the session is not itself a child, adds its tool
//! source to the tool set (the tools exist only while the profile catalog is not empty), and
//! attaches it to the session.

use std::sync::Arc;

use zi_agent::{AgentSession, ToolSource};

mod child;
mod completion;
mod delivery;
mod error;
mod evidence;
mod ledger;
mod limits;
mod restore;
mod supervisor;
mod tools;

pub use error::SubagentError;
pub use supervisor::{ModelResolver, Supervisor, SupervisorConfig};

/// `ZI_SUBAGENT_DEPTH`: `"1"` marks a child, which gets no delegation tools.
pub const DEPTH_VARIABLE: &str = "ZI_SUBAGENT_DEPTH";
/// The parent → child key handoff, read by a child as if it were `--api-key`.
pub const API_KEY_VARIABLE: &str = supervisor::spawn::API_KEY_VARIABLE;

/// A parent session's delegation: the supervisor and its tools.
pub struct Delegation {
    supervisor: Arc<Supervisor>,
}

impl Delegation {
    /// A supervisor with no children; nothing starts until the model spawns one.
    pub fn new(config: SupervisorConfig) -> Delegation {
        Delegation {
            supervisor: Supervisor::new(config),
        }
    }

    /// The eight tools while the catalog is not empty, rebuilt when it changes; the source's
    /// shutdown closes every child.
    pub fn tool_source(&self) -> Arc<dyn ToolSource> {
        Arc::new(tools::DelegationTools::new(self.supervisor.clone()))
    }

    /// Binds the session: evidence goes to its journal, completions into its context. On a
    /// resumed session the ledger and names are restored first; returns the warnings.
    pub fn attach(&self, session: &AgentSession) -> Vec<String> {
        self.supervisor.attach(session.host());
        let warnings = self.supervisor.restore();
        session.set_context_delivery(Arc::new(delivery::Delivery::new(self.supervisor.clone())));
        warnings
    }
}
