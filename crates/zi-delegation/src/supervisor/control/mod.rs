//! Operations on existing children (docs/delegation.md#tools) and shutdown
//! (docs/delegation.md#lifetime), one tool's operation per module: [`send`], [`assign`],
//! [`interrupt`], [`close`] (with closing one child and shutdown) and [`wait`]. Each public
//! operation records its control outcome when it settles; its `*_admitted` part does the work.

use std::sync::Arc;

use super::{ChildHandle, Snapshot, Supervisor};
use crate::child::ChildProcess;
use crate::error::SubagentError;
use crate::limits::check_name;

mod assign;
mod close;
mod interrupt;
mod send;
mod wait;

/// What `assign_subagent_task` did.
pub enum Assigned {
    StartedCycle,
    Joined,
}

/// What a wait collected.
pub struct Collected {
    pub snapshots: Vec<Snapshot>,
    pub pending_names: Vec<String>,
    pub timed_out: bool,
}

/// `interrupt_subagent`'s disposition.
pub enum Interrupted {
    Interrupted,
    AlreadyIdle,
}

fn unknown_live(name: &str) -> SubagentError {
    SubagentError::UnknownLive(name.to_string())
}

/// The process of a live child whose serial lock the caller holds (a child between spawn and
/// start has none yet: it is not live to the controls).
fn live_process(handle: &ChildHandle, name: &str) -> Result<Arc<ChildProcess>, SubagentError> {
    handle
        .process
        .get()
        .cloned()
        .ok_or_else(|| unknown_live(name))
}

impl Supervisor {
    /// The live child's handle, or the `target_not_live` failure.
    fn live_target(&self, name: &str) -> Result<Arc<ChildHandle>, SubagentError> {
        Supervisor::check_open(&self.lock())?;
        check_name(name)?;
        self.live_handle(name).ok_or_else(|| unknown_live(name))
    }

    /// Claims the captured cycle's completion for `claim`, or shows a delivered one again.
    fn settle_captured(&self, name: &str, cycle: u64, claim: &str) -> Snapshot {
        self.flush_durable();
        let mut state = self.lock();
        let claimed = state.ledger.claim(name, cycle, claim);
        let snapshot = match claimed {
            Some(completion) => state.captured(name, cycle, Some(completion), Some("claimed")),
            None => {
                let delivered = state
                    .ledger
                    .get(name, cycle)
                    .filter(|e| e.delivery_name() == Some("delivered"))
                    .and_then(|e| e.completion.clone());
                let delivery = delivered.as_ref().map(|_| "delivered");
                state.captured(name, cycle, delivered, delivery)
            }
        };
        drop(state);
        if snapshot.delivery == Some("claimed") {
            self.changed(name);
        }
        snapshot
    }
}
