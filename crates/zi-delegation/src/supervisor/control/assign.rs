//! `assign_subagent_task` (docs/delegation.md#tools): a new work cycle when the child is idle,
//! else the task joins the running cycle.

use std::sync::Arc;
use std::time::Instant;

use serde_json::json;
use zi_protocol::event::{OutcomeResult, SubagentEntry};
use zi_rpc_client::{Delivery, PromptResult};

use super::{Assigned, live_process, unknown_live};
use crate::error::SubagentError;
use crate::evidence::{ControlOperation, append_required, listed_task};
use crate::limits::check_text;
use crate::supervisor::{Lifecycle, Snapshot, State, Supervisor};

/// Why an assignment failed: the message, the control outcome's code and the target cycle.
type Failure = (SubagentError, &'static str, Option<u64>);

/// The cycle an assignment targets, and whether it started that cycle.
struct Target {
    cycle: u64,
    new_cycle: bool,
}

impl Supervisor {
    /// `assign_subagent_task`: a new cycle when idle, else joins the running one.
    pub async fn assign(
        self: &Arc<Self>,
        name: &str,
        text: &str,
    ) -> Result<(Assigned, Snapshot), SubagentError> {
        let control = ControlOperation::start("task_assignment");
        let mut evidence = json!({"source": "host", "target": name});
        let result = self.assign_admitted(name, text).await;
        let host = self.host();
        match result {
            Ok((assigned, snapshot, cycle)) => {
                evidence["targetWorkCycle"] = json!(cycle);
                evidence["taskBytes"] = json!(text.len().max(1));
                evidence["delivery"] = json!(match assigned {
                    Assigned::StartedCycle => "started_cycle",
                    Assigned::Joined => "follow_up",
                });
                control.finish(&host, OutcomeResult::Succeeded, evidence);
                Ok((assigned, snapshot))
            }
            Err((message, code, cycle)) => {
                if let Some(cycle) = cycle {
                    evidence["targetWorkCycle"] = json!(cycle);
                }
                evidence["taskBytes"] = json!(text.len().max(1));
                evidence["errorCode"] = json!(code);
                control.finish(&host, OutcomeResult::Failed, evidence);
                Err(message)
            }
        }
    }

    async fn assign_admitted(
        self: &Arc<Self>,
        name: &str,
        text: &str,
    ) -> Result<(Assigned, Snapshot, u64), Failure> {
        check_text(text, "message").map_err(|m| (m, "assignment_failed", None))?;
        let handle = self
            .live_target(name)
            .map_err(|m| (m, "target_not_live", None))?;
        let _serial = handle.serial.lock().await;
        let process = live_process(&handle, name).map_err(|m| (m, "target_not_live", None))?;
        let target = self.choose_target(name, &handle.profile, text)?;
        let Target { cycle, new_cycle } = target;
        if new_cycle {
            self.changed(name);
        }
        let id = cycle.to_string();
        let result = process.prompt(Delivery::Continue, text, Some(&id)).await;
        if let Err(error) = self.acknowledge_admission(name, &target, result)? {
            if new_cycle {
                self.fail_assigned_cycle(name, cycle, error.to_string());
            }
            return Err((error, "assignment_failed", Some(cycle)));
        }
        if new_cycle {
            self.drive_cycle(handle.clone(), process, cycle);
        } else {
            handle.wake.notify_waiters();
        }
        let snapshot = self
            .snapshot(name)
            .unwrap_or_else(|| Snapshot::unknown(name));
        let assigned = if new_cycle {
            Assigned::StartedCycle
        } else {
            Assigned::Joined
        };
        Ok((assigned, snapshot, cycle))
    }

    /// Decides under the lock: an idle child gets a new cycle, reserved and journaled before
    /// the child sees it; a running one is joined; any other state refuses.
    fn choose_target(&self, name: &str, profile: &str, text: &str) -> Result<Target, Failure> {
        let mut state = self.lock();
        let Some(child) = state.child(name) else {
            return Err((unknown_live(name), "target_not_live", None));
        };
        let (lifecycle, last) = (child.state.lifecycle, child.state.cycle);
        if child.state.deadline_expired {
            return Err((
                SubagentError::DeadlineExpired(name.to_string()),
                "assignment_failed",
                Some(last),
            ));
        }
        let target = match lifecycle {
            Lifecycle::Idle => {
                self.start_assigned_cycle(&mut state, name, profile, last + 1, text)?;
                Target {
                    cycle: last + 1,
                    new_cycle: true,
                }
            }
            Lifecycle::Running => Target {
                cycle: last,
                new_cycle: false,
            },
            other => {
                return Err((
                    SubagentError::WrongState {
                        name: name.to_string(),
                        operation: "continue",
                        lifecycle: other.as_str(),
                    },
                    "assignment_failed",
                    Some(last),
                ));
            }
        };
        if let Some(child) = state.child_mut(name) {
            child.state.admissions += 1;
            child.state.in_flight += 1;
        }
        Ok(target)
    }

    /// Cycle `n` of an idle child: the ledger slot, `work_cycle_started`, then the state.
    fn start_assigned_cycle(
        &self,
        state: &mut State,
        name: &str,
        profile: &str,
        n: u64,
        text: &str,
    ) -> Result<(), Failure> {
        state
            .ledger
            .reserve(name, n, Some(profile.to_string()))
            .map_err(|e| (e.into(), "assignment_failed", Some(n)))?;
        if let Err(error) = append_required(
            &self.host(),
            SubagentEntry::WorkCycleStarted {
                name: name.to_string(),
                work_cycle: n,
                task: listed_task(text),
            },
        ) {
            state.ledger.cancel_reservation(name, n);
            return Err((error, "assignment_failed", Some(n)));
        }
        if let Some(child) = state.child_mut(name) {
            child.state.cycle = n;
            child.state.cycle_open = true;
            child.state.task = listed_task(text);
            child.state.cycle_started = Instant::now();
            child.state.set(Lifecycle::Running);
        }
        Ok(())
    }

    /// The child's answer to the `continue` prompt: the admission fence is released and the
    /// revision must advance (docs/delegation.md#children). The outer error is a child that left
    /// meanwhile.
    fn acknowledge_admission(
        &self,
        name: &str,
        target: &Target,
        result: Result<PromptResult, zi_rpc_client::Error>,
    ) -> Result<Result<(), SubagentError>, Failure> {
        let mut state = self.lock();
        let Some(child) = state.child_mut(name) else {
            return Err((unknown_live(name), "target_not_live", Some(target.cycle)));
        };
        child.state.in_flight = child.state.in_flight.saturating_sub(1);
        // A new cycle has a new completion id, so the child's watch starts again from 0.
        let floor = if target.new_cycle {
            0
        } else {
            child.state.revision
        };
        Ok(match result {
            Ok(admitted) => match admitted.completion_revision {
                Some(revision) if revision > floor => {
                    child.state.revision = revision;
                    if target.new_cycle {
                        child.state.cycle_started = Instant::now();
                    }
                    Ok(())
                }
                Some(_) => Err(SubagentError::RevisionStale),
                None => Err(SubagentError::InvalidAdmission),
            },
            Err(error) => Err(SubagentError::connection(name, error)),
        })
    }

    /// A started cycle the child did not admit fails with `assignment_failed`
    /// (docs/delegation.md#completions) and the child is idle again.
    fn fail_assigned_cycle(&self, name: &str, cycle: u64, message: String) {
        self.fail_cycle(name, cycle, "assignment_failed", message);
        if let Some(child) = self.lock().child_mut(name)
            && child.state.lifecycle == Lifecycle::Running
        {
            child.state.set(Lifecycle::Idle);
        }
        self.changed(name);
    }
}
