//! The completion ledger (docs/delegation.md#delivery): one entry per `{name, workCycle}`, at
//! most 32, from reservation through durability to a single delivery.

use crate::completion::Completion;
use crate::limits::LEDGER_CAPACITY;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// The completion exists in memory only; its outcome append is retried.
    Pending,
    /// Its work-cycle outcome is in the journal.
    Durable,
}

#[derive(Debug, Clone, PartialEq)]
pub enum EntryState {
    Reserved,
    Ready(Durability),
    /// Returned by the tool call (or hidden delivery) `claim`, not yet committed.
    Claimed {
        claim: String,
        durability: Durability,
    },
    Delivered(Durability),
}

#[derive(Debug, Clone)]
pub struct LedgerEntry {
    pub name: String,
    pub work_cycle: u64,
    pub state: EntryState,
    pub completion: Option<Completion>,
    /// The profile the child was spawned from (outcome evidence).
    pub profile: Option<String>,
}

impl LedgerEntry {
    /// The projection's `completionDelivery`.
    pub fn delivery_name(&self) -> Option<&'static str> {
        match &self.state {
            EntryState::Reserved => None,
            EntryState::Ready(Durability::Pending) => Some("pending"),
            EntryState::Ready(Durability::Durable) => Some("durable"),
            EntryState::Claimed { .. } => Some("claimed"),
            EntryState::Delivered(_) => Some("delivered"),
        }
    }

    pub fn is_ready(&self) -> bool {
        matches!(self.state, EntryState::Ready(_))
    }

    pub fn is_durable_ready(&self) -> bool {
        self.state == EntryState::Ready(Durability::Durable)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("Subagent completion capacity exceeded: undelivered completions fill the mailbox")]
pub struct LedgerFull;

#[derive(Debug, Default)]
pub struct Ledger {
    entries: Vec<LedgerEntry>,
}

impl Ledger {
    pub fn entries(&self) -> &[LedgerEntry] {
        &self.entries
    }

    pub fn get(&self, name: &str, work_cycle: u64) -> Option<&LedgerEntry> {
        self.entries
            .iter()
            .find(|e| e.name == name && e.work_cycle == work_cycle)
    }

    fn get_mut(&mut self, name: &str, work_cycle: u64) -> Option<&mut LedgerEntry> {
        self.entries
            .iter_mut()
            .find(|e| e.name == name && e.work_cycle == work_cycle)
    }

    /// Makes room by evicting the oldest delivered entry, or refuses.
    fn make_room(&mut self) -> Result<(), LedgerFull> {
        if self.entries.len() < LEDGER_CAPACITY {
            return Ok(());
        }
        let delivered = self
            .entries
            .iter()
            .position(|e| matches!(e.state, EntryState::Delivered(_)))
            .ok_or(LedgerFull)?;
        self.entries.remove(delivered);
        Ok(())
    }

    pub fn reserve(
        &mut self,
        name: &str,
        work_cycle: u64,
        profile: Option<String>,
    ) -> Result<(), LedgerFull> {
        self.make_room()?;
        self.entries.push(LedgerEntry {
            name: name.to_string(),
            work_cycle,
            state: EntryState::Reserved,
            completion: None,
            profile,
        });
        Ok(())
    }

    pub fn cancel_reservation(&mut self, name: &str, work_cycle: u64) {
        self.entries.retain(|e| {
            !(e.name == name && e.work_cycle == work_cycle && e.state == EntryState::Reserved)
        });
    }

    /// Records a completion for a reserved key; anything else (stale, duplicate) is ignored.
    pub fn publish(&mut self, completion: Completion) -> bool {
        match self.get_mut(&completion.name, completion.work_cycle) {
            Some(entry) if entry.state == EntryState::Reserved => {
                entry.state = EntryState::Ready(Durability::Pending);
                entry.completion = Some(completion);
                true
            }
            _ => false,
        }
    }

    /// A restored completion (resume): durable or delivered.
    pub fn restore(&mut self, entry: LedgerEntry) {
        self.entries.push(entry);
    }

    /// Entries whose outcome still has to be appended (ready, claimed or delivered).
    pub fn pending_durability(&self) -> Vec<(String, u64)> {
        self.entries
            .iter()
            .filter(|e| {
                matches!(
                    e.state,
                    EntryState::Ready(Durability::Pending)
                        | EntryState::Claimed {
                            durability: Durability::Pending,
                            ..
                        }
                        | EntryState::Delivered(Durability::Pending)
                )
            })
            .map(|e| (e.name.clone(), e.work_cycle))
            .collect()
    }

    pub fn mark_durable(&mut self, name: &str, work_cycle: u64) {
        if let Some(entry) = self.get_mut(name, work_cycle) {
            entry.state = match std::mem::replace(&mut entry.state, EntryState::Reserved) {
                EntryState::Ready(_) => EntryState::Ready(Durability::Durable),
                EntryState::Claimed { claim, .. } => EntryState::Claimed {
                    claim,
                    durability: Durability::Durable,
                },
                EntryState::Delivered(_) => EntryState::Delivered(Durability::Durable),
                EntryState::Reserved => EntryState::Reserved,
            };
        }
    }

    /// Claims a ready completion for `claim`; returns the completion.
    pub fn claim(&mut self, name: &str, work_cycle: u64, claim: &str) -> Option<Completion> {
        let entry = self.get_mut(name, work_cycle)?;
        let EntryState::Ready(durability) = entry.state else {
            return None;
        };
        entry.state = EntryState::Claimed {
            claim: claim.to_string(),
            durability,
        };
        entry.completion.clone()
    }

    /// Delivers a claimed (or still ready) entry; returns whether the state changed.
    pub fn deliver(&mut self, name: &str, work_cycle: u64) -> bool {
        let Some(entry) = self.get_mut(name, work_cycle) else {
            return false;
        };
        let durability = match &entry.state {
            EntryState::Claimed { durability, .. } | EntryState::Ready(durability) => *durability,
            _ => return false,
        };
        entry.state = EntryState::Delivered(durability);
        true
    }

    /// Releases every claim (back to ready); returns the names whose entries changed.
    pub fn release_all(&mut self) -> Vec<String> {
        let mut names = Vec::new();
        for entry in &mut self.entries {
            if let EntryState::Claimed { durability, .. } = entry.state {
                entry.state = EntryState::Ready(durability);
                names.push(entry.name.clone());
            }
        }
        names
    }

    /// The oldest ready (pending or durable) entry of `name`.
    pub fn oldest_ready(&self, name: &str) -> Option<&LedgerEntry> {
        self.entries.iter().find(|e| e.name == name && e.is_ready())
    }

    /// The entry a snapshot shows: the oldest durable one, else the latest of any state.
    pub fn shown(&self, name: &str) -> Option<&LedgerEntry> {
        self.entries
            .iter()
            .find(|e| e.name == name && e.is_durable_ready())
            .or_else(|| {
                self.entries
                    .iter()
                    .rev()
                    .find(|e| e.name == name && e.state != EntryState::Reserved)
            })
    }

    /// Every durable, unclaimed, undelivered entry, oldest first.
    pub fn durable_ready(&self) -> Vec<(String, u64)> {
        self.entries
            .iter()
            .filter(|e| e.is_durable_ready())
            .map(|e| (e.name.clone(), e.work_cycle))
            .collect()
    }
}

#[cfg(test)]
#[path = "ledger_tests.rs"]
mod tests;
