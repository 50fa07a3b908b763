//! `wait_subagents` (docs/delegation.md#tools): capture one cycle per name, claim what is ready.

use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::Collected;
use crate::error::SubagentError;
use crate::limits::{MAX_WAIT_NAMES, MAX_WAIT_TIMEOUT_MS, WAIT_POLL, check_name};
use crate::supervisor::{Snapshot, Supervisor};

impl Supervisor {
    /// `wait_subagents` (docs/delegation.md#tools).
    pub async fn wait(
        &self,
        names: Option<Vec<String>>,
        timeout_ms: Option<u64>,
        claim: &str,
        cancel: &CancellationToken,
    ) -> Result<Collected, SubagentError> {
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
                () = cancel.cancelled() => return Err(SubagentError::WaitCancelled),
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

    /// Validation and one target cycle per name.
    fn capture_targets(&self, names: &[String]) -> Result<Vec<(String, u64)>, SubagentError> {
        let state = self.lock();
        Supervisor::check_open(&state)?;
        if names.is_empty() || names.len() > MAX_WAIT_NAMES {
            return Err(SubagentError::WaitNameCount);
        }
        for (index, name) in names.iter().enumerate() {
            if names[..index].contains(name) {
                return Err(SubagentError::WaitDuplicateNames);
            }
        }
        let mut targets = Vec::with_capacity(names.len());
        for name in names {
            check_name(name)?;
            if !state.known(name) {
                return Err(SubagentError::Unknown(name.clone()));
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
}
