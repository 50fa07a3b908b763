//! `close_subagent` (docs/delegation.md#tools), closing one child (docs/delegation.md#limits) and
//! session shutdown (docs/delegation.md#lifetime).

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use zi_protocol::event::{OutcomeResult, SubagentEntry};

use crate::completion::Completion;
use crate::error::SubagentError;
use crate::evidence::{ControlOperation, append_best_effort};
use crate::limits::{CLOSE_FORCED, CLOSE_GRACE, SHUTDOWN_FORCED, SHUTDOWN_GRACE, check_name};
use crate::supervisor::{ChildHandle, Lifecycle, Phase, Snapshot, Supervisor};

impl Supervisor {
    /// `close_subagent`: close, then the captured cycle's terminal snapshot.
    pub async fn close(
        &self,
        name: &str,
        claim: &str,
    ) -> Result<(Snapshot, Snapshot), SubagentError> {
        let control = ControlOperation::start("close");
        let mut evidence = json!({"source": "host", "target": name});
        let host = self.host();
        let checked = Supervisor::check_open(&self.lock()).and_then(|()| check_name(name));
        if let Err(message) = checked {
            evidence["errorCode"] = json!("close_failed");
            control.finish(&host, OutcomeResult::Failed, evidence);
            return Err(message);
        }
        let (previous, cycle, handle) = {
            let state = self.lock();
            let Some(previous) = state.snapshot(name) else {
                drop(state);
                evidence["errorCode"] = json!("target_not_live");
                control.finish(&host, OutcomeResult::Failed, evidence);
                return Err(SubagentError::Unknown(name.to_string()));
            };
            let cycle = match state.child(name) {
                Some(child) => child.state.cycle,
                None => state
                    .exited
                    .iter()
                    .find(|e| e.name == name)
                    .map_or(0, |e| e.cycle),
            };
            let handle = state.child(name).map(|c| c.handle.clone());
            (previous, cycle, handle)
        };
        if let Some(handle) = handle {
            let _serial = handle.serial.lock().await;
            self.close_child(&handle, "close", CLOSE_GRACE, CLOSE_FORCED)
                .await;
        }
        let snapshot = self.settle_captured(name, cycle, claim);
        if cycle > 0 {
            evidence["targetWorkCycle"] = json!(cycle);
        }
        control.finish(&host, OutcomeResult::Succeeded, evidence);
        Ok((previous, snapshot))
    }

    /// Closes a live child (docs/delegation.md#limits): `closing{reason}`, EOF, bounded waits,
    /// group kill, `exited`.
    pub(crate) async fn close_child(
        &self,
        handle: &Arc<ChildHandle>,
        reason: &str,
        grace: Duration,
        forced: Duration,
    ) {
        let name = handle.name.as_str();
        let timeout_failure = {
            let mut state = self.lock();
            let Some(child) = state.child_mut(name) else {
                return;
            };
            if child.state.lifecycle == Lifecycle::Closing {
                return;
            }
            let failure = (child.state.deadline_expired && child.state.cycle_open).then(|| {
                child.state.cycle_open = false;
                Completion::failure(
                    name,
                    child.state.cycle,
                    "work_cycle_timeout",
                    Some(format!(
                        "Subagent work cycle exceeded {}ms",
                        self.config.work_timeout_ms
                    )),
                    child.state.cycle_started.elapsed().as_millis() as u64,
                )
            });
            child.state.set(Lifecycle::Closing);
            failure
        };
        if let Some(failure) = timeout_failure {
            self.publish(failure);
        }
        append_best_effort(
            &self.host(),
            SubagentEntry::Closing {
                name: name.to_string(),
                reason: reason.to_string(),
            },
        );
        self.changed(name);
        let outcome = match handle.process.get() {
            Some(process) => process.close(name, grace, forced).await,
            None => crate::child::ExitOutcome::Killed {
                message: format!("Subagent {name} did not exit within close bounds"),
            },
        };
        self.finish_exit(name, outcome);
    }

    /// Session disposal: every live child closed concurrently (`session_disposed`).
    pub async fn shutdown(&self) {
        let handles: Option<Vec<Arc<ChildHandle>>> = {
            let mut state = self.lock();
            if state.phase == Phase::Open {
                state.phase = Phase::Stopping;
                Some(state.live.iter().map(|c| c.handle.clone()).collect())
            } else {
                None
            }
        };
        let Some(handles) = handles else {
            let mut done = self.shut_down.subscribe();
            let _ = done.wait_for(|done| *done).await;
            return;
        };
        futures::future::join_all(handles.iter().map(|handle| {
            self.close_child(handle, "session_disposed", SHUTDOWN_GRACE, SHUTDOWN_FORCED)
        }))
        .await;
        self.lock().phase = Phase::Closed;
        self.shut_down.send_replace(true);
        self.changes.send_modify(|n| *n += 1);
    }
}
