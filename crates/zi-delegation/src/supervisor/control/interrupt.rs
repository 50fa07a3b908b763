//! `interrupt_subagent` (docs/delegation.md#tools): interrupt the current cycle and return its
//! bounded terminal evidence.

use std::time::{Duration, Instant};

use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::{Interrupted, live_process, unknown_live};
use crate::error::SubagentError;
use crate::evidence::{ControlOperation, settle};
use crate::limits::WAIT_POLL;
use crate::supervisor::{InterruptReason, Lifecycle, Snapshot, Supervisor};

impl Supervisor {
    /// Waits (up to `timeout`) for cycle `cycle` of `name` to have a completion.
    async fn wait_for_completion(
        &self,
        name: &str,
        cycle: u64,
        timeout: Duration,
        cancel: &CancellationToken,
    ) -> Result<(), SubagentError> {
        let deadline = tokio::time::Instant::now() + timeout;
        let mut changes = self.changes.subscribe();
        loop {
            self.flush_durable();
            let ready = self
                .lock()
                .ledger
                .get(name, cycle)
                .is_some_and(|e| e.completion.is_some());
            if ready || tokio::time::Instant::now() >= deadline {
                return Ok(());
            }
            tokio::select! {
                () = cancel.cancelled() => return Err(SubagentError::WaitCancelled),
                _ = changes.changed() => {}
                () = tokio::time::sleep(WAIT_POLL) => {}
                () = tokio::time::sleep_until(deadline) => {}
            }
        }
    }

    /// `interrupt_subagent`.
    pub async fn interrupt(
        &self,
        name: &str,
        claim: &str,
        cancel: &CancellationToken,
    ) -> Result<(Interrupted, Snapshot), SubagentError> {
        let control = ControlOperation::start("interrupt");
        let evidence = json!({"source": "host", "target": name});
        let result = self.interrupt_admitted(name, claim, cancel).await;
        settle(
            control,
            &self.host(),
            evidence,
            result,
            |(disposition, _, cycle), evidence| {
                if *cycle > 0 {
                    evidence["targetWorkCycle"] = json!(cycle);
                }
                evidence["disposition"] = json!(match disposition {
                    Interrupted::Interrupted => "interrupted",
                    Interrupted::AlreadyIdle => "already_idle",
                });
            },
        )
        .map(|(disposition, snapshot, _)| (disposition, snapshot))
    }

    async fn interrupt_admitted(
        &self,
        name: &str,
        claim: &str,
        cancel: &CancellationToken,
    ) -> Result<(Interrupted, Snapshot, u64), (SubagentError, &'static str)> {
        let handle = self.live_target(name).map_err(|m| (m, "target_not_live"))?;
        let _serial = handle.serial.lock().await;
        let process = live_process(&handle, name).map_err(|m| (m, "target_not_live"))?;
        let (cycle, previous) = {
            let mut state = self.lock();
            let child = state
                .child_mut(name)
                .ok_or_else(|| (unknown_live(name), "target_not_live"))?;
            let previous = child.state.lifecycle;
            match previous {
                Lifecycle::Idle | Lifecycle::Interrupting(_) => {}
                Lifecycle::Running | Lifecycle::SpawnAdmitting => {
                    child
                        .state
                        .set(Lifecycle::Interrupting(InterruptReason::Requested));
                    child.state.interrupt_started = Some(Instant::now());
                }
                other => {
                    return Err((
                        SubagentError::WrongState {
                            name: name.to_string(),
                            operation: "interrupt",
                            lifecycle: other.as_str(),
                        },
                        "interrupt_failed",
                    ));
                }
            }
            (child.state.cycle, previous)
        };
        if previous == Lifecycle::Idle {
            let snapshot = self.settle_captured(name, cycle, claim);
            return Ok((Interrupted::AlreadyIdle, snapshot, cycle));
        }
        if matches!(previous, Lifecycle::Running | Lifecycle::SpawnAdmitting) {
            self.changed(name);
            handle.wake.notify_waiters();
            if let Err(error) = process.interrupt().await {
                if let Some(child) = self.lock().child_mut(name) {
                    child.state.set(previous);
                    child.state.interrupt_started = None;
                }
                self.changed(name);
                return Err((SubagentError::connection(name, error), "interrupt_failed"));
            }
        }
        let timeout = Duration::from_millis(self.config.wait_timeout_ms);
        self.wait_for_completion(name, cycle, timeout, cancel)
            .await
            .map_err(|m| (m, "interrupt_failed"))?;
        let snapshot = self.settle_captured(name, cycle, claim);
        Ok((Interrupted::Interrupted, snapshot, cycle))
    }
}
