//! The ledger's restore after `--continue` (docs/delegation.md#delivery): undelivered
//! completions come back from their work-cycle outcomes, names stay reserved, the children the
//! old process left are recorded `lost`, and deliveries that lost their acknowledgement in a
//! crash are acknowledged.

use std::collections::HashMap;

use serde_json::Value;
use zi_agent::session::host::SessionHost;
use zi_protocol::event::{EntryData, OutcomeResult, SessionEntry, SubagentEntry};

use crate::completion::{Completion, FAILURE_CODES, Status};
use crate::delivery::{COMPLETION_CUSTOM_TYPE, delivered_keys, key_of};
use crate::evidence::append_best_effort;
use crate::ledger::{Durability, EntryState, LedgerEntry};
use crate::limits::{LEDGER_CAPACITY, MAX_RETAINED_EXITED};
use crate::supervisor::{ExitedChild, State, Supervisor};

/// What the journal says about one runtime name.
#[derive(Default)]
struct NameHistory {
    started: bool,
    last_index: usize,
    last_event_terminal: bool,
    cycle: u64,
    task: Option<String>,
}

/// A completion restored from a work-cycle outcome (its text is the outcome's preview), with
/// the profile it was spawned from.
type Restored = (Completion, Option<String>);

/// One pass over the journal.
#[derive(Default)]
struct JournalScan {
    completions: Vec<Restored>,
    /// Keys with a `work_cycle_delivered` entry.
    acknowledged: Vec<(String, u64)>,
    /// Keys a committed hidden message or tool result carried (acknowledged or not).
    delivered: Vec<(String, u64)>,
    histories: HashMap<String, NameHistory>,
    /// Names in order of first appearance.
    order: Vec<String>,
}

impl JournalScan {
    fn read(host: &SessionHost) -> JournalScan {
        let mut scan = JournalScan::default();
        let mut index = 0usize;
        let _ = host.visit_entries(|entry| {
            index += 1;
            match &entry.data {
                EntryData::Subagent(event) => scan.subagent(event, index),
                EntryData::OperationOutcome(_) => scan.completions.extend(restored(entry)),
                EntryData::Message { message } => scan.delivered.extend(delivered_keys(message)),
                EntryData::CustomMessage {
                    custom_type,
                    details: Some(details),
                    ..
                } if custom_type == COMPLETION_CUSTOM_TYPE => {
                    scan.delivered.extend(key_of(details));
                }
                _ => {}
            }
        });
        scan
    }

    fn subagent(&mut self, event: &SubagentEntry, index: usize) {
        let name = event.name().to_string();
        if !self.histories.contains_key(&name) {
            self.order.push(name.clone());
        }
        let history = self.histories.entry(name.clone()).or_default();
        history.last_index = index;
        // An acknowledgement comes after the child's end when a restored completion is
        // delivered (or acknowledged) by a later run: it says nothing about a live child, so a
        // name already recorded `exited` or `lost` stays ended (no second `lost` per `-c`).
        if !matches!(event, SubagentEntry::WorkCycleDelivered { .. }) {
            history.last_event_terminal = matches!(
                event,
                SubagentEntry::Exited { .. } | SubagentEntry::Lost { .. }
            );
        }
        match event {
            SubagentEntry::Starting { .. } => history.started = true,
            SubagentEntry::WorkCycleStarted {
                work_cycle, task, ..
            } => {
                history.cycle = *work_cycle;
                history.task = task.clone();
            }
            SubagentEntry::WorkCycleDelivered { work_cycle, .. } => {
                self.acknowledged.push((name, *work_cycle));
            }
            _ => {}
        }
    }

    /// The undelivered completions, and the delivered keys still missing their
    /// `work_cycle_delivered`.
    fn split_delivered(&mut self) -> (Vec<Restored>, Vec<(String, u64)>) {
        let mut undelivered = Vec::new();
        let mut unacknowledged = Vec::new();
        for (completion, profile) in std::mem::take(&mut self.completions) {
            let key = (completion.name.clone(), completion.work_cycle);
            if self.acknowledged.contains(&key) {
                continue;
            }
            if self.delivered.contains(&key) {
                unacknowledged.push(key);
            } else {
                undelivered.push((completion, profile));
            }
        }
        (undelivered, unacknowledged)
    }

    /// The names to retain as exited snapshots: the latest 32 by their most recent entry,
    /// oldest first.
    fn newest_names(&self) -> Vec<&String> {
        let mut ranked: Vec<&String> = self.order.iter().collect();
        ranked.sort_by_key(|name| self.histories.get(*name).map_or(0, |h| h.last_index));
        let mut newest: Vec<&String> = ranked.into_iter().rev().take(MAX_RETAINED_EXITED).collect();
        newest.reverse();
        newest
    }
}

fn restored(entry: &SessionEntry) -> Option<Restored> {
    let EntryData::OperationOutcome(outcome) = &entry.data else {
        return None;
    };
    if outcome.capability != "subagent" || outcome.operation != "work_cycle" {
        return None;
    }
    let evidence = &outcome.evidence;
    let name = evidence.get("name")?.as_str()?.to_string();
    let cycle = evidence.get("workCycle")?.as_u64()?;
    if outcome.operation_id != crate::evidence::work_cycle_id(&name, cycle) {
        return None;
    }
    let status = match outcome.result {
        OutcomeResult::Succeeded => Status::Completed,
        OutcomeResult::Cancelled => Status::Cancelled,
        OutcomeResult::Failed => Status::Failed,
    };
    let reason = evidence
        .get("errorCode")
        .and_then(Value::as_str)
        .and_then(|code| FAILURE_CODES.iter().find(|c| **c == code).copied());
    let text = |key: &str| {
        evidence
            .get(key)
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    let completion = Completion {
        name,
        work_cycle: cycle,
        status,
        text: text("preview").unwrap_or_default(),
        original_bytes: evidence.get("originalBytes").and_then(Value::as_u64)?,
        omitted_bytes: evidence.get("omittedBytes").and_then(Value::as_u64)?,
        truncated: evidence.get("truncated").and_then(Value::as_bool)?,
        duration_ms: outcome.duration_ms,
        reason: reason.filter(|_| status == Status::Failed),
        error: text("errorMessage"),
    };
    Some((completion, text("profile")))
}

/// Keeps the newest [`LEDGER_CAPACITY`] undelivered completions; more degrade with one warning
/// instead of failing the session's open (docs/delegation.md#delivery): the rest stay outcomes
/// only.
fn bound_undelivered(undelivered: &mut Vec<Restored>) -> Option<String> {
    let excess = undelivered.len().checked_sub(LEDGER_CAPACITY)?;
    if excess == 0 {
        return None;
    }
    undelivered.drain(..excess);
    Some(format!(
        "Session contains more than 32 undelivered subagent completions; restoring the newest 32 ({excess} stay in the journal as outcomes only)"
    ))
}

impl Supervisor {
    /// Rebuilds the ledger and names from the journal of a resumed session
    /// (docs/delegation.md#delivery); returns the warnings to print.
    pub fn restore(&self) -> Vec<String> {
        let host = self.host();
        let mut scan = JournalScan::read(&host);
        let (mut undelivered, unacknowledged) = scan.split_delivered();
        let warnings: Vec<String> = bound_undelivered(&mut undelivered).into_iter().collect();
        let lost = {
            let mut state = self.lock();
            restore_ledger(&mut state, undelivered);
            restore_names(&mut state, &scan)
        };
        for name in lost {
            append_best_effort(
                &host,
                SubagentEntry::Lost {
                    name,
                    reason: "session_restored".to_string(),
                },
            );
        }
        for (name, work_cycle) in unacknowledged {
            append_best_effort(
                &host,
                SubagentEntry::WorkCycleDelivered { name, work_cycle },
            );
        }
        warnings
    }
}

/// The undelivered completions, durable in the ledger.
fn restore_ledger(state: &mut State, undelivered: Vec<Restored>) {
    for (completion, profile) in undelivered {
        state.ledger.restore(LedgerEntry {
            name: completion.name.clone(),
            work_cycle: completion.work_cycle,
            state: EntryState::Ready(Durability::Durable),
            completion: Some(completion),
            profile,
        });
    }
}

/// Reserves every started name and retains the newest as exited snapshots; returns those whose
/// child the old process left without an `exited` or `lost` entry.
fn restore_names(state: &mut State, scan: &JournalScan) -> Vec<String> {
    for (name, history) in &scan.histories {
        if history.started {
            state.names.insert(name.clone());
        }
    }
    let mut lost = Vec::new();
    for name in scan.newest_names() {
        let Some(history) = scan.histories.get(name) else {
            continue;
        };
        state.retain_exited(ExitedChild {
            name: name.clone(),
            cycle: history.cycle,
            task: history.task.clone(),
        });
        if !history.last_event_terminal {
            lost.push(name.clone());
        }
    }
    lost
}
