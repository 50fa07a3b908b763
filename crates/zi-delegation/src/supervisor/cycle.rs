//! Driving one work cycle to its completion (docs/delegation.md#children,
//! docs/delegation.md#limits): the idle watch with its admission fence, the work deadline,
//! interrupt settlement, and the exit watch that turns a crash, a bad frame or a sequence gap into
//! `exited` with evidence.

use std::sync::Arc;
use std::time::{Duration, Instant};

use zi_protocol::event::SubagentEntry;

use super::{ChildHandle, ExitedChild, InterruptReason, Lifecycle, Supervisor};
use crate::child::{ChildProcess, ExitOutcome, connection_error};
use crate::completion::{Completion, Status};
use crate::evidence::{append_best_effort, work_cycle_outcome};
use crate::limits::INTERRUPT_SETTLEMENT;

/// What the driver does after the child's watch settled.
enum Observation {
    /// Input was admitted after the watch was armed: watch again.
    Stale,
    Settled,
}

impl Supervisor {
    /// Spawns the task that waits for cycle `n`'s completion.
    pub(crate) fn drive_cycle(
        self: &Arc<Self>,
        handle: Arc<ChildHandle>,
        process: Arc<ChildProcess>,
        n: u64,
    ) {
        let supervisor = self.clone();
        tokio::spawn(async move { supervisor.run_cycle(handle, process, n).await });
    }

    async fn run_cycle(
        self: Arc<Self>,
        handle: Arc<ChildHandle>,
        process: Arc<ChildProcess>,
        n: u64,
    ) {
        let name = handle.name.clone();
        let id = n.to_string();
        let work_timeout = Duration::from_millis(self.config.work_timeout_ms);
        let deadline = {
            let state = self.lock();
            let Some(child) = state.child(&name) else {
                return;
            };
            tokio::time::Instant::from_std(child.state.cycle_started + work_timeout)
        };
        let watch = |process: Arc<ChildProcess>, id: String| {
            Box::pin(async move { process.await_idle(&id).await })
        };
        let mut armed = self.lock().child(&name).map_or(0, |c| c.state.admissions);
        let mut idle = watch(process.clone(), id.clone());
        let mut expired = false;
        loop {
            let settlement = self.settlement_deadline(&name);
            tokio::select! {
                result = &mut idle => {
                    let result = match result {
                        Ok(result) => result,
                        // A failed watch on a live connection is fatal
                        // (docs/delegation.md#children): the child would otherwise stay working for
                        // ever.
                        Err(
                            error @ (zi_rpc_client::Error::Response { .. }
                            | zi_rpc_client::Error::Decode { .. }
                            | zi_rpc_client::Error::Usage(_)),
                        ) => {
                            let message = connection_error(&name, &error);
                            self.fatal(&handle, &process, message).await;
                            return;
                        }
                        // The exit watch reports a dead connection.
                        Err(_) => return,
                    };
                    match self.observe(&name, n, armed, &result) {
                        Observation::Stale => {
                            armed = self.lock().child(&name).map_or(0, |c| c.state.admissions);
                            idle = watch(process.clone(), id.clone());
                        }
                        Observation::Settled => return,
                    }
                }
                () = tokio::time::sleep_until(deadline), if !expired => {
                    expired = true;
                    self.expire_work(&handle, &process, n).await;
                }
                () = sleep_until_opt(settlement), if settlement.is_some() => {
                    self.settlement_expired(&handle, &process, n).await;
                    return;
                }
                () = handle.wake.notified() => {}
            }
        }
    }

    fn settlement_deadline(&self, name: &str) -> Option<tokio::time::Instant> {
        let state = self.lock();
        let started = state.child(name)?.state.interrupt_started?;
        Some(tokio::time::Instant::from_std(
            started + INTERRUPT_SETTLEMENT,
        ))
    }

    /// Accepts an idle observation only behind the admission fence (docs/delegation.md#children),
    /// then publishes.
    fn observe(
        &self,
        name: &str,
        n: u64,
        armed: u64,
        result: &zi_rpc_client::CompletionResult,
    ) -> Observation {
        let completion = {
            let mut state = self.lock();
            let Some(child) = state.child_mut(name) else {
                return Observation::Settled;
            };
            if child.state.in_flight > 0
                || child.state.admissions != armed
                || result.completion_revision != child.state.revision
            {
                return Observation::Stale;
            }
            let duration = child.state.cycle_started.elapsed().as_millis() as u64;
            let mut completion = Completion::from_idle(name, n, result, duration);
            if child.state.deadline_expired {
                completion.status = Status::Failed;
                completion.reason = Some("work_cycle_timeout");
                completion.error = Some(format!(
                    "Subagent work cycle exceeded {}ms",
                    self.config.work_timeout_ms
                ));
            }
            child.state.cycle_open = false;
            child.state.deadline_expired = false;
            child.state.interrupt_started = None;
            if matches!(
                child.state.lifecycle,
                Lifecycle::Running | Lifecycle::SpawnAdmitting | Lifecycle::Interrupting(_)
            ) {
                child.state.set(Lifecycle::Idle);
            }
            completion
        };
        self.publish(completion);
        Observation::Settled
    }

    /// The work deadline passed: interrupt the child and give it 10 s to settle.
    async fn expire_work(&self, handle: &Arc<ChildHandle>, process: &Arc<ChildProcess>, n: u64) {
        {
            let mut state = self.lock();
            let Some(child) = state.child_mut(&handle.name) else {
                return;
            };
            if !child.state.cycle_open || child.state.cycle != n {
                return;
            }
            child.state.deadline_expired = true;
            child
                .state
                .set(Lifecycle::Interrupting(InterruptReason::WorkTimeout));
            child.state.interrupt_started = Some(Instant::now());
        }
        self.changed(&handle.name);
        if let Err(error) = process.interrupt().await {
            let message = format!(
                "Subagent {} work cycle {n} exceeded {}ms; interruption failed: {}",
                handle.name,
                self.config.work_timeout_ms,
                connection_error(&handle.name, &error)
            );
            self.fail_cycle(&handle.name, n, "work_cycle_timeout", message.clone());
            self.fatal(handle, process, message).await;
        }
        // The interrupt response arrives once the child settled; the idle watch reports it.
    }

    /// The interrupt did not settle within 10 s: failed evidence, then the child is killed.
    async fn settlement_expired(
        &self,
        handle: &Arc<ChildHandle>,
        process: &Arc<ChildProcess>,
        n: u64,
    ) {
        let reason = {
            let state = self.lock();
            state.child(&handle.name).map(|c| c.state.lifecycle)
        };
        let name = &handle.name;
        let (code, message) = match reason {
            Some(Lifecycle::Interrupting(InterruptReason::WorkTimeout)) => (
                "work_cycle_timeout",
                format!(
                    "Subagent {name} work cycle {n} exceeded {}ms and did not settle within 10000ms",
                    self.config.work_timeout_ms
                ),
            ),
            _ => (
                "interrupt_settlement_timeout",
                format!("Subagent {name} interruption did not settle within 10000ms"),
            ),
        };
        self.fail_cycle(name, n, code, message.clone());
        self.fatal(handle, process, message).await;
    }

    /// Publishes a failed completion for cycle `n` (empty text) if it is still open.
    pub(crate) fn fail_cycle(&self, name: &str, n: u64, code: &'static str, error: String) {
        let completion = {
            let mut state = self.lock();
            let Some(child) = state.child_mut(name) else {
                return;
            };
            if !child.state.cycle_open || child.state.cycle != n {
                return;
            }
            child.state.cycle_open = false;
            let duration = child.state.cycle_started.elapsed().as_millis() as u64;
            Completion::failure(name, n, code, Some(error), duration)
        };
        self.publish(completion);
    }

    /// The ledger takes the completion (ignored when stale), then it is made durable.
    pub(crate) fn publish(&self, completion: Completion) {
        let name = completion.name.clone();
        let published = self.lock().ledger.publish(completion);
        if published {
            self.changed(&name);
        }
        self.flush_durable();
    }

    /// Appends the work-cycle outcome of every pending completion (retried on every operation).
    pub(crate) fn flush_durable(&self) {
        let host = self.host();
        let pending = self.lock().ledger.pending_durability();
        for (name, n) in pending {
            let outcome = {
                let state = self.lock();
                let Some(entry) = state.ledger.get(&name, n) else {
                    continue;
                };
                let Some(completion) = &entry.completion else {
                    continue;
                };
                work_cycle_outcome(completion, entry.profile.as_deref())
            };
            match host.append_outcome(outcome) {
                Ok(_) => {
                    self.lock().ledger.mark_durable(&name, n);
                    self.changed(&name);
                }
                Err(zi_agent::errors::SessionError::DuplicateOutcome(_)) => {
                    self.lock().ledger.mark_durable(&name, n);
                }
                Err(error) => {
                    tracing::warn!("could not record subagent {name} cycle {n}: {error}");
                }
            }
        }
    }

    /// Watches the connection; an end nobody asked for is fatal for the child
    /// (docs/delegation.md#children).
    pub(crate) fn watch_exit(
        self: &Arc<Self>,
        handle: Arc<ChildHandle>,
        process: Arc<ChildProcess>,
    ) {
        let supervisor = self.clone();
        tokio::spawn(async move {
            let error = process.ended().await;
            let closing = supervisor
                .lock()
                .child(&handle.name)
                .is_none_or(|c| c.state.lifecycle == Lifecycle::Closing);
            if closing {
                return;
            }
            let message = connection_error(&handle.name, &error);
            supervisor.fatal(&handle, &process, message).await;
        });
    }

    /// Fatal handling: state `closing` (not journaled), SIGKILL, wait, then `exited`.
    pub(crate) async fn fatal(
        &self,
        handle: &Arc<ChildHandle>,
        process: &Arc<ChildProcess>,
        message: String,
    ) {
        {
            let mut state = self.lock();
            let Some(child) = state.child_mut(&handle.name) else {
                return;
            };
            if child.state.lifecycle == Lifecycle::Closing {
                return;
            }
            child.state.set(Lifecycle::Closing);
        }
        self.changed(&handle.name);
        let outcome = process.kill_after_fatal(&handle.name, message).await;
        self.finish_exit(&handle.name, outcome);
    }

    /// The child left: its open cycle fails (docs/delegation.md#completions), it becomes a retained
    /// exited snapshot, and `exited{outcome}` is journaled.
    pub(crate) fn finish_exit(&self, name: &str, outcome: ExitOutcome) {
        let failure = {
            let mut state = self.lock();
            let Some(index) = state.live.iter().position(|c| c.handle.name == name) else {
                return;
            };
            let child = state.live.remove(index);
            let failure = child.state.cycle_open.then(|| {
                let (code, error) = outcome.open_cycle_failure();
                // Measured from cycle start (docs/delegation.md#completions).
                let duration = child.state.cycle_started.elapsed().as_millis() as u64;
                Completion::failure(name, child.state.cycle, code, error, duration)
            });
            state.retain_exited(ExitedChild {
                name: name.to_string(),
                cycle: child.state.cycle,
                task: child.state.task.clone(),
            });
            failure
        };
        if let Some(failure) = failure {
            self.publish(failure);
        }
        append_best_effort(
            &self.host(),
            SubagentEntry::Exited {
                name: name.to_string(),
                outcome: outcome.to_json(),
            },
        );
        self.changed(name);
    }
}

async fn sleep_until_opt(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}
