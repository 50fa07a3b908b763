//! The supervisor view every tool reports (docs/delegation.md#tools).

use serde_json::{Value, json};

use super::{Lifecycle, State, Supervisor};
use crate::completion::Completion;
use crate::ledger::LedgerEntry;

#[derive(Debug, Clone)]
pub struct Snapshot {
    pub name: String,
    pub lifecycle: &'static str,
    pub work_cycle: Option<u64>,
    pub task: Option<String>,
    pub elapsed_ms: Option<u64>,
    /// `completionDelivery` of the shown ledger entry.
    pub delivery: Option<&'static str>,
    /// Shown only while pending, durable or delivered.
    pub completion: Option<Completion>,
    /// Set on the snapshots a claiming tool returns.
    pub captured_work_cycle: Option<u64>,
}

impl Snapshot {
    pub fn unknown(name: &str) -> Snapshot {
        Snapshot {
            name: name.to_string(),
            lifecycle: "exited",
            work_cycle: None,
            task: None,
            elapsed_ms: None,
            delivery: None,
            completion: None,
            captured_work_cycle: None,
        }
    }

    /// `AgentDetails` (docs/delegation.md#tools).
    pub fn details(&self) -> Value {
        let mut value = json!({"name": self.name, "lifecycle": self.lifecycle});
        if let Some(cycle) = self.work_cycle {
            value["workCycle"] = json!(cycle);
        }
        if let Some(cycle) = self.captured_work_cycle {
            value["capturedWorkCycle"] = json!(cycle);
        }
        if let Some(task) = &self.task {
            value["task"] = json!(task);
        }
        if let Some(elapsed) = self.elapsed_ms {
            value["elapsedMs"] = json!(elapsed);
        }
        if let Some(delivery) = self.delivery {
            value["completionDelivery"] = json!(delivery);
        }
        if let Some(completion) = &self.completion {
            value["completion"] = completion.details_projection();
        }
        value
    }

    /// The projection in wait/interrupt/close result texts.
    pub fn text_projection(&self) -> Value {
        match &self.completion {
            Some(completion) => {
                json!({"name": self.name, "completion": completion.text_projection()})
            }
            None => json!({"name": self.name, "status": self.lifecycle}),
        }
    }
}

fn shown_completion(entry: Option<&LedgerEntry>) -> (Option<&'static str>, Option<Completion>) {
    let Some(entry) = entry else {
        return (None, None);
    };
    let delivery = entry.delivery_name();
    let completion = match delivery {
        Some("pending" | "durable" | "delivered") => entry.completion.clone(),
        _ => None,
    };
    (delivery, completion)
}

impl State {
    pub(crate) fn snapshot(&self, name: &str) -> Option<Snapshot> {
        let shown = self.ledger.shown(name);
        let (delivery, completion) = shown_completion(shown);
        if let Some(child) = self.child(name) {
            let st = &child.state;
            let lifecycle = st.lifecycle;
            let work_cycle = match lifecycle {
                Lifecycle::Starting => None,
                _ if st.cycle == 0 => None,
                _ => Some(st.cycle),
            };
            let elapsed_ms = match lifecycle {
                Lifecycle::Starting | Lifecycle::SpawnAdmitting | Lifecycle::Running => {
                    Some(st.since.elapsed().as_millis() as u64)
                }
                Lifecycle::Interrupting(_) => Some(st.cycle_started.elapsed().as_millis() as u64),
                _ => shown
                    .and_then(|e| e.completion.as_ref())
                    .map(|c| c.duration_ms),
            };
            return Some(Snapshot {
                name: name.to_string(),
                lifecycle: lifecycle.as_str(),
                work_cycle,
                task: st.task.clone(),
                elapsed_ms,
                delivery,
                completion,
                captured_work_cycle: None,
            });
        }
        let exited = self.exited.iter().find(|e| e.name == name)?;
        Some(Snapshot {
            name: name.to_string(),
            lifecycle: "exited",
            work_cycle: (exited.cycle > 0).then_some(exited.cycle),
            task: exited.task.clone(),
            elapsed_ms: shown
                .and_then(|e| e.completion.as_ref())
                .map(|c| c.duration_ms),
            delivery,
            completion,
            captured_work_cycle: None,
        })
    }

    /// Live children in spawn order, then retained exited ones, oldest first.
    pub(crate) fn snapshots(&self) -> Vec<Snapshot> {
        self.live
            .iter()
            .map(|c| c.handle.name.as_str())
            .chain(self.exited.iter().map(|e| e.name.as_str()))
            .filter_map(|name| self.snapshot(name))
            .collect()
    }

    /// The snapshot of `name` as a claiming tool returns it: cycle `cycle` with `completion`.
    pub(crate) fn captured(
        &self,
        name: &str,
        cycle: u64,
        completion: Option<Completion>,
        delivery: Option<&'static str>,
    ) -> Snapshot {
        let mut snapshot = self
            .snapshot(name)
            .unwrap_or_else(|| Snapshot::unknown(name));
        snapshot.captured_work_cycle = Some(cycle);
        snapshot.completion = completion;
        snapshot.delivery = delivery;
        snapshot
    }
}

impl Supervisor {
    /// What the tools show of the child `name`, live or exited.
    pub fn snapshot(&self, name: &str) -> Option<Snapshot> {
        self.lock().snapshot(name)
    }

    /// What the tools show of every child, after recording any pending evidence.
    pub fn snapshots(&self) -> Vec<Snapshot> {
        self.flush_durable();
        self.lock().snapshots()
    }

    /// Names working now and names with an undelivered durable completion.
    pub fn working_and_ready(&self) -> (Vec<String>, Vec<String>) {
        let state = self.lock();
        let working = state
            .live
            .iter()
            .filter(|c| c.state.lifecycle.is_working())
            .map(|c| c.handle.name.clone())
            .collect();
        let mut ready: Vec<String> = Vec::new();
        for (name, _) in state.ledger.durable_ready() {
            if !ready.contains(&name) {
                ready.push(name);
            }
        }
        (working, ready)
    }
}
