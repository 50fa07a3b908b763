//! Operations on existing children (delegation-reference §5.4–§5.9) and shutdown (§8.9–8.10).

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use tokio_util::sync::CancellationToken;
use zi_protocol::event::{OutcomeResult, SubagentEntry};
use zi_rpc_client::Delivery;

use super::{ChildHandle, InterruptReason, Lifecycle, Phase, Snapshot, Supervisor};
use crate::child::connection_error;
use crate::completion::Completion;
use crate::evidence::{ControlOperation, append_best_effort, append_required, listed_task};
use crate::limits::{
    CLOSE_FORCED, CLOSE_GRACE, MAX_WAIT_NAMES, MAX_WAIT_TIMEOUT_MS, SHUTDOWN_FORCED,
    SHUTDOWN_GRACE, WAIT_POLL, check_name, check_text,
};

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

fn unknown_live(name: &str) -> String {
    format!("Unknown live subagent: {name}")
}

impl Supervisor {
    /// The live child's handle, or the `target_not_live` failure.
    fn live_target(&self, name: &str) -> Result<Arc<ChildHandle>, String> {
        Supervisor::check_open(&self.lock())?;
        check_name(name)?;
        self.live_handle(name).ok_or_else(|| unknown_live(name))
    }

    /// `send_subagent_message`: a `follow_up` that joins the running cycle or waits, queued in
    /// the child, for its next one.
    pub async fn send(&self, name: &str, text: &str) -> Result<Snapshot, String> {
        let control = ControlOperation::start("message_delivery");
        let mut evidence =
            json!({"channel": "host_to_subagent", "target": name, "messageBytes": text.len()});
        let result = self.send_admitted(name, text).await;
        let host = self.host();
        match result {
            Ok((snapshot, cycle)) => {
                if let Some(cycle) = cycle {
                    evidence["targetWorkCycle"] = json!(cycle);
                }
                control.finish(&host, OutcomeResult::Succeeded, evidence);
                Ok(snapshot)
            }
            Err((message, code)) => {
                evidence["errorCode"] = json!(code);
                control.finish(&host, OutcomeResult::Failed, evidence);
                Err(message)
            }
        }
    }

    async fn send_admitted(
        &self,
        name: &str,
        text: &str,
    ) -> Result<(Snapshot, Option<u64>), (String, &'static str)> {
        check_text(text, "message").map_err(|m| (m, "delivery_failed"))?;
        let handle = self.live_target(name).map_err(|m| (m, "target_not_live"))?;
        let _serial = handle.serial.lock().await;
        let process = handle
            .process
            .get()
            .cloned()
            .ok_or_else(|| (unknown_live(name), "target_not_live"))?;
        let joined = {
            let mut state = self.lock();
            let child = state
                .child_mut(name)
                .ok_or_else(|| (unknown_live(name), "target_not_live"))?;
            if child.state.deadline_expired {
                return Err((
                    format!("Subagent {name} work cycle deadline has expired"),
                    "delivery_failed",
                ));
            }
            match child.state.lifecycle {
                Lifecycle::Running => {
                    child.state.admissions += 1;
                    child.state.in_flight += 1;
                    Some(child.state.cycle)
                }
                Lifecycle::Idle => None,
                other => {
                    return Err((
                        format!(
                            "Subagent {name} cannot accept send while {}",
                            other.as_str()
                        ),
                        "delivery_failed",
                    ));
                }
            }
        };
        let id = joined.map(|n| n.to_string());
        let result = process
            .prompt(Delivery::FollowUp, text, id.as_deref())
            .await;
        let mut state = self.lock();
        if let Some(child) = state.child_mut(name)
            && joined.is_some()
        {
            child.state.in_flight = child.state.in_flight.saturating_sub(1);
            if let Ok(admitted) = &result
                && let Some(revision) = admitted.completion_revision
            {
                child.state.revision = child.state.revision.max(revision);
            }
        }
        result.map_err(|e| (connection_error(name, &e), "delivery_failed"))?;
        let snapshot = state
            .snapshot(name)
            .unwrap_or_else(|| Snapshot::unknown(name));
        drop(state);
        handle.wake.notify_waiters();
        Ok((snapshot, joined))
    }

    /// `assign_subagent_task`: a new cycle when idle, else joins the running one.
    pub async fn assign(
        self: &Arc<Self>,
        name: &str,
        text: &str,
    ) -> Result<(Assigned, Snapshot), String> {
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
    ) -> Result<(Assigned, Snapshot, u64), (String, &'static str, Option<u64>)> {
        check_text(text, "message").map_err(|m| (m, "assignment_failed", None))?;
        let handle = self
            .live_target(name)
            .map_err(|m| (m, "target_not_live", None))?;
        let _serial = handle.serial.lock().await;
        let process = handle
            .process
            .get()
            .cloned()
            .ok_or_else(|| (unknown_live(name), "target_not_live", None))?;
        // Decide under the lock; a new cycle is reserved and journaled before the child sees it.
        let (cycle, new_cycle) = {
            let mut state = self.lock();
            let Some(child) = state.child(name) else {
                return Err((unknown_live(name), "target_not_live", None));
            };
            if child.state.deadline_expired {
                return Err((
                    format!("Subagent {name} work cycle deadline has expired"),
                    "assignment_failed",
                    Some(child.state.cycle),
                ));
            }
            match child.state.lifecycle {
                Lifecycle::Idle => {
                    let n = child.state.cycle + 1;
                    let profile = Some(handle.profile.clone());
                    state
                        .ledger
                        .reserve(name, n, profile)
                        .map_err(|e| (e.to_string(), "assignment_failed", Some(n)))?;
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
                        child.state.admissions += 1;
                        child.state.in_flight += 1;
                    }
                    (n, true)
                }
                Lifecycle::Running => {
                    let n = child.state.cycle;
                    if let Some(child) = state.child_mut(name) {
                        child.state.admissions += 1;
                        child.state.in_flight += 1;
                    }
                    (n, false)
                }
                other => {
                    return Err((
                        format!("Subagent {name} cannot continue while {}", other.as_str()),
                        "assignment_failed",
                        Some(child.state.cycle),
                    ));
                }
            }
        };
        if new_cycle {
            self.changed(name);
        }
        let id = cycle.to_string();
        let result = process.prompt(Delivery::Continue, text, Some(&id)).await;
        let admitted = {
            let mut state = self.lock();
            let Some(child) = state.child_mut(name) else {
                return Err((unknown_live(name), "target_not_live", Some(cycle)));
            };
            child.state.in_flight = child.state.in_flight.saturating_sub(1);
            // A new cycle has a new completion id, so the child's watch starts again from 0.
            let floor = if new_cycle { 0 } else { child.state.revision };
            match result {
                Ok(admitted) => match admitted.completion_revision {
                    Some(revision) if revision > floor => {
                        child.state.revision = revision;
                        if new_cycle {
                            child.state.cycle_started = Instant::now();
                        }
                        Ok(())
                    }
                    Some(_) => Err("RPC completion admission revision did not advance".to_string()),
                    None => Err("Invalid RPC completion admission".to_string()),
                },
                Err(error) => Err(connection_error(name, &error)),
            }
        };
        if let Err(message) = admitted {
            if new_cycle {
                self.fail_cycle(name, cycle, "assignment_failed", message.clone());
                if let Some(child) = self.lock().child_mut(name)
                    && child.state.lifecycle == Lifecycle::Running
                {
                    child.state.set(Lifecycle::Idle);
                }
                self.changed(name);
            }
            return Err((message, "assignment_failed", Some(cycle)));
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

    /// Waits (up to `timeout`) for cycle `cycle` of `name` to have a completion.
    async fn wait_for_completion(
        &self,
        name: &str,
        cycle: u64,
        timeout: Duration,
        cancel: &CancellationToken,
    ) -> Result<(), String> {
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
                () = cancel.cancelled() => return Err("Subagent wait was cancelled".into()),
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
    ) -> Result<(Interrupted, Snapshot), String> {
        let control = ControlOperation::start("interrupt");
        let mut evidence = json!({"source": "host", "target": name});
        let result = self.interrupt_admitted(name, claim, cancel).await;
        let host = self.host();
        match result {
            Ok((disposition, snapshot, cycle)) => {
                if cycle > 0 {
                    evidence["targetWorkCycle"] = json!(cycle);
                }
                evidence["disposition"] = json!(match disposition {
                    Interrupted::Interrupted => "interrupted",
                    Interrupted::AlreadyIdle => "already_idle",
                });
                control.finish(&host, OutcomeResult::Succeeded, evidence);
                Ok((disposition, snapshot))
            }
            Err((message, code)) => {
                evidence["errorCode"] = json!(code);
                control.finish(&host, OutcomeResult::Failed, evidence);
                Err(message)
            }
        }
    }

    async fn interrupt_admitted(
        &self,
        name: &str,
        claim: &str,
        cancel: &CancellationToken,
    ) -> Result<(Interrupted, Snapshot, u64), (String, &'static str)> {
        let handle = self.live_target(name).map_err(|m| (m, "target_not_live"))?;
        let _serial = handle.serial.lock().await;
        let process = handle
            .process
            .get()
            .cloned()
            .ok_or_else(|| (unknown_live(name), "target_not_live"))?;
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
                        format!("Subagent {name} cannot interrupt while {}", other.as_str()),
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
                return Err((connection_error(name, &error), "interrupt_failed"));
            }
        }
        let timeout = Duration::from_millis(self.config.wait_timeout_ms);
        self.wait_for_completion(name, cycle, timeout, cancel)
            .await
            .map_err(|m| (m, "interrupt_failed"))?;
        let snapshot = self.settle_captured(name, cycle, claim);
        Ok((Interrupted::Interrupted, snapshot, cycle))
    }

    /// `close_subagent`: close, then the captured cycle's terminal snapshot.
    pub async fn close(&self, name: &str, claim: &str) -> Result<(Snapshot, Snapshot), String> {
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
                return Err(format!("Unknown subagent: {name}"));
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

    /// Closes a live child (§8.9): `closing{reason}`, EOF, bounded waits, group kill, `exited`.
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

    /// `wait_subagents` (§5.6).
    pub async fn wait(
        &self,
        names: Option<Vec<String>>,
        timeout_ms: Option<u64>,
        claim: &str,
        cancel: &CancellationToken,
    ) -> Result<Collected, String> {
        let names = match names {
            Some(names) => names,
            None => {
                let (working, ready) = self.working_and_ready();
                let mut union: Vec<String> = Vec::new();
                for name in working.into_iter().chain(ready) {
                    if !union.contains(&name) {
                        union.push(name);
                    }
                }
                union.truncate(MAX_WAIT_NAMES);
                if union.is_empty() {
                    return Ok(Collected {
                        snapshots: Vec::new(),
                        pending_names: Vec::new(),
                        timed_out: false,
                    });
                }
                union
            }
        };
        let targets = self.capture_targets(&names)?;
        let wait_ms = timeout_ms
            .unwrap_or(self.config.wait_timeout_ms)
            .min(MAX_WAIT_TIMEOUT_MS);
        let deadline = tokio::time::Instant::now() + Duration::from_millis(wait_ms);
        let mut changes = self.changes.subscribe();
        let collected = loop {
            self.flush_durable();
            let collected = self.claim_targets(&targets, claim);
            if !collected.is_empty() || tokio::time::Instant::now() >= deadline {
                break collected;
            }
            tokio::select! {
                () = cancel.cancelled() => return Err("Subagent wait was cancelled".into()),
                _ = changes.changed() => {}
                () = tokio::time::sleep(WAIT_POLL) => {}
                () = tokio::time::sleep_until(deadline) => {}
            }
        };
        if !collected.is_empty() {
            for snapshot in &collected {
                self.changed(&snapshot.name);
            }
        }
        let (working, ready) = self.working_and_ready();
        let pending_names = names
            .iter()
            .filter(|n| working.contains(n) || ready.contains(n))
            .cloned()
            .collect();
        Ok(Collected {
            timed_out: collected.is_empty(),
            snapshots: collected,
            pending_names,
        })
    }

    /// Steps 2–3 of §5.6: validation and one target cycle per name.
    fn capture_targets(&self, names: &[String]) -> Result<Vec<(String, u64)>, String> {
        let state = self.lock();
        Supervisor::check_open(&state)?;
        if names.is_empty() || names.len() > MAX_WAIT_NAMES {
            return Err("Subagent wait requires 1 through 16 names".into());
        }
        for (index, name) in names.iter().enumerate() {
            if names[..index].contains(name) {
                return Err("Subagent wait rejects duplicate names".into());
            }
        }
        let mut targets = Vec::with_capacity(names.len());
        for name in names {
            check_name(name)?;
            if !state.known(name) {
                return Err(format!("Unknown subagent: {name}"));
            }
            let cycle = match state.ledger.oldest_ready(name) {
                Some(entry) => entry.work_cycle,
                None => match state.child(name) {
                    Some(child) => child.state.cycle,
                    None => state
                        .ledger
                        .entries()
                        .iter()
                        .rev()
                        .find(|e| &e.name == name && e.completion.is_some())
                        .map_or(0, |e| e.work_cycle),
                },
            };
            targets.push((name.clone(), cycle));
        }
        Ok(targets)
    }

    fn claim_targets(&self, targets: &[(String, u64)], claim: &str) -> Vec<Snapshot> {
        let mut state = self.lock();
        let mut collected = Vec::new();
        for (name, cycle) in targets {
            if let Some(completion) = state.ledger.claim(name, *cycle, claim) {
                collected.push(state.captured(name, *cycle, Some(completion), Some("claimed")));
            }
        }
        collected
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
