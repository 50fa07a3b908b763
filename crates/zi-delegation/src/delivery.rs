//! Completion delivery to the parent model (delegation-reference §9): hidden context before
//! each provider request, acknowledgement of committed tool results and hidden messages,
//! release of a finished run's claims, and the ledger's restore after `--continue`.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::{Value, json};
use zi_agent::custom::CustomMessageInput;
use zi_agent::delivery::ContextDelivery;
use zi_protocol::event::{EntryData, OutcomeResult, SessionEntry, SubagentEntry};
use zi_protocol::message::{AgentMessage, MessageContent};

use crate::completion::{Completion, FAILURE_CODES, Status};
use crate::evidence::append_best_effort;
use crate::ledger::{Durability, EntryState, LedgerEntry};
use crate::limits::{HIDDEN_TEXT_MAX_BYTES, LEDGER_CAPACITY, MAX_RETAINED_EXITED, clip};
use crate::supervisor::Supervisor;

pub const COMPLETION_CUSTOM_TYPE: &str = "zi.subagent_completion";
/// The claim id of completions handed to the hidden-context path.
const HIDDEN_CLAIM: &str = "hidden-context";
/// Encoded details larger than this acknowledge nothing (§5.1).
const DETAILS_MAX_BYTES: usize = 64 * 1024;

/// The hidden `custom_message` of §9.2.
fn hidden_message(completion: &Completion) -> CustomMessageInput {
    let text = clip(&completion.text, HIDDEN_TEXT_MAX_BYTES);
    let clipped = (completion.text.len() - text.len()) as u64;
    let omitted = completion.omitted_bytes + clipped;
    let truncated = completion.truncated || clipped > 0;
    let mut payload = json!({
        "name": completion.name,
        "work_cycle": completion.work_cycle,
        "status": completion.status.as_str(),
        "text": text,
        "original_bytes": completion.original_bytes,
        "omitted_bytes": omitted,
        "truncated": truncated,
        "duration_ms": completion.duration_ms,
    });
    if let Some(reason) = completion.reason {
        payload["reason"] = json!(reason);
    }
    if let Some(error) = &completion.error {
        payload["error"] = json!(error);
    }
    CustomMessageInput {
        custom_type: COMPLETION_CUSTOM_TYPE.to_string(),
        content: MessageContent::Text(format!(
            "<subagent_completion>\n{payload}\n</subagent_completion>"
        )),
        display: false,
        details: Some(json!({
            "name": completion.name,
            "workCycle": completion.work_cycle,
            "status": completion.status.as_str(),
            "originalBytes": completion.original_bytes,
            "omittedBytes": omitted,
            "truncated": truncated,
            "durationMs": completion.duration_ms,
        })),
    }
}

/// `{name, workCycle}` pairs a committed message delivered.
fn delivered_keys(message: &AgentMessage) -> Vec<(String, u64)> {
    match message {
        AgentMessage::Custom(custom) if custom.custom_type == COMPLETION_CUSTOM_TYPE => custom
            .details
            .as_ref()
            .and_then(key_of)
            .into_iter()
            .collect(),
        AgentMessage::ToolResult(result) => result
            .details
            .as_ref()
            .map(tool_result_keys)
            .unwrap_or_default(),
        _ => Vec::new(),
    }
}

fn key_of(details: &Value) -> Option<(String, u64)> {
    let name = details.get("name")?.as_str()?;
    let cycle = details.get("workCycle")?.as_u64()?;
    Some((name.to_string(), cycle))
}

/// The completions a wait/interrupt/close result carries in its details (§9.1).
fn tool_result_keys(details: &Value) -> Vec<(String, u64)> {
    if details.get("type").and_then(Value::as_str) != Some("subagent")
        || serde_json::to_vec(details).map_or(true, |b| b.len() > DETAILS_MAX_BYTES)
    {
        return Vec::new();
    }
    let agents: Vec<&Value> = match details.get("operation").and_then(Value::as_str) {
        Some("wait") => details
            .get("agents")
            .and_then(Value::as_array)
            .map(|a| a.iter().collect())
            .unwrap_or_default(),
        Some("interrupt" | "close") => details.get("agent").into_iter().collect(),
        _ => Vec::new(),
    };
    agents
        .into_iter()
        .filter_map(|agent| {
            let name = agent.get("name")?.as_str()?;
            let cycle = agent.get("completion")?.get("workCycle")?.as_u64()?;
            Some((name.to_string(), cycle))
        })
        .collect()
}

/// The supervisor's side of the session's delivery seam.
pub struct Delivery {
    supervisor: Arc<Supervisor>,
}

impl Delivery {
    pub fn new(supervisor: Arc<Supervisor>) -> Delivery {
        Delivery { supervisor }
    }
}

impl Supervisor {
    /// Ledger `delivered`, `subagent_changed`, then `work_cycle_delivered`.
    pub(crate) fn acknowledge(&self, name: &str, work_cycle: u64) {
        if !self.lock().ledger.deliver(name, work_cycle) {
            return;
        }
        self.changed(name);
        append_best_effort(
            &self.host(),
            SubagentEntry::WorkCycleDelivered {
                name: name.to_string(),
                work_cycle,
            },
        );
    }
}

impl ContextDelivery for Delivery {
    fn before_provider_request(&self) -> Vec<CustomMessageInput> {
        let supervisor = &self.supervisor;
        supervisor.flush_durable();
        let claimed: Vec<Completion> = {
            let mut state = supervisor.lock();
            state
                .ledger
                .durable_ready()
                .into_iter()
                .filter_map(|(name, n)| state.ledger.claim(&name, n, HIDDEN_CLAIM))
                .collect()
        };
        for completion in &claimed {
            supervisor.changed(&completion.name);
        }
        claimed.iter().map(hidden_message).collect()
    }

    fn committed(&self, message: &AgentMessage) {
        for (name, cycle) in delivered_keys(message) {
            self.supervisor.acknowledge(&name, cycle);
        }
    }

    fn run_ended(&self) {
        let released = self.supervisor.lock().ledger.release_all();
        for name in released {
            self.supervisor.changed(&name);
        }
    }
}

/// What the journal says about one runtime name.
#[derive(Default)]
struct NameHistory {
    started: bool,
    last_index: usize,
    last_event_terminal: bool,
    cycle: u64,
    task: Option<String>,
}

/// A completion restored from a work-cycle outcome (its text is the outcome's preview).
fn restored_completion(entry: &SessionEntry) -> Option<(Completion, Option<String>)> {
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
    let completion = Completion {
        name,
        work_cycle: cycle,
        status,
        text: evidence
            .get("preview")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string(),
        original_bytes: evidence.get("originalBytes").and_then(Value::as_u64)?,
        omitted_bytes: evidence.get("omittedBytes").and_then(Value::as_u64)?,
        truncated: evidence.get("truncated").and_then(Value::as_bool)?,
        duration_ms: outcome.duration_ms,
        reason: if status == Status::Failed {
            reason
        } else {
            None
        },
        error: evidence
            .get("errorMessage")
            .and_then(Value::as_str)
            .map(str::to_string),
    };
    let profile = evidence
        .get("profile")
        .and_then(Value::as_str)
        .map(str::to_string);
    Some((completion, profile))
}

impl Supervisor {
    /// Rebuilds the ledger and names from the journal of a resumed session (§9.4); returns
    /// the warnings to print (more than 32 undelivered completions degrade, §13 item 12).
    pub fn restore(&self) -> Vec<String> {
        let host = self.host();
        let mut completions: Vec<(Completion, Option<String>)> = Vec::new();
        let mut delivered: Vec<(String, u64)> = Vec::new();
        let mut histories: HashMap<String, NameHistory> = HashMap::new();
        let mut order: Vec<String> = Vec::new();
        let mut warnings = Vec::new();
        let mut index = 0usize;
        let _ = host.visit_entries(|entry| {
            index += 1;
            match &entry.data {
                EntryData::Subagent(event) => {
                    let name = event.name().to_string();
                    if !histories.contains_key(&name) {
                        order.push(name.clone());
                    }
                    let history = histories.entry(name.clone()).or_default();
                    history.last_index = index;
                    history.last_event_terminal = matches!(
                        event,
                        SubagentEntry::Exited { .. } | SubagentEntry::Lost { .. }
                    );
                    match event {
                        SubagentEntry::Starting { .. } => history.started = true,
                        SubagentEntry::WorkCycleStarted {
                            work_cycle, task, ..
                        } => {
                            history.cycle = *work_cycle;
                            history.task = task.clone();
                        }
                        SubagentEntry::WorkCycleDelivered { work_cycle, .. } => {
                            delivered.push((name, *work_cycle));
                        }
                        _ => {}
                    }
                }
                EntryData::OperationOutcome(_) => {
                    if let Some(restored) = restored_completion(entry) {
                        completions.push(restored);
                    }
                }
                EntryData::Message { message } => delivered.extend(delivered_keys(message)),
                EntryData::CustomMessage {
                    custom_type,
                    details: Some(details),
                    ..
                } if custom_type == COMPLETION_CUSTOM_TYPE => {
                    delivered.extend(key_of(details));
                }
                _ => {}
            }
        });
        let acknowledged_in_journal: Vec<(String, u64)> = {
            // Only explicit `work_cycle_delivered` entries need no new acknowledgement.
            let mut keys = Vec::new();
            let _ = host.visit_entries(|entry| {
                if let EntryData::Subagent(SubagentEntry::WorkCycleDelivered { name, work_cycle }) =
                    &entry.data
                {
                    keys.push((name.clone(), *work_cycle));
                }
            });
            keys
        };
        let mut undelivered: Vec<(Completion, Option<String>)> = Vec::new();
        let mut to_acknowledge: Vec<(String, u64)> = Vec::new();
        for (completion, profile) in completions {
            let key = (completion.name.clone(), completion.work_cycle);
            if delivered.contains(&key) {
                if !acknowledged_in_journal.contains(&key) {
                    to_acknowledge.push(key);
                }
            } else {
                undelivered.push((completion, profile));
            }
        }
        if undelivered.len() > LEDGER_CAPACITY {
            warnings.push(format!(
                "Session contains more than 32 undelivered subagent completions; restoring the newest 32 ({} stay in the journal as outcomes only)",
                undelivered.len() - LEDGER_CAPACITY
            ));
            let drop = undelivered.len() - LEDGER_CAPACITY;
            undelivered.drain(..drop);
        }
        let mut lost: Vec<String> = Vec::new();
        {
            let mut state = self.lock();
            for (completion, profile) in undelivered {
                state.ledger.restore(LedgerEntry {
                    name: completion.name.clone(),
                    work_cycle: completion.work_cycle,
                    state: EntryState::Ready(Durability::Durable),
                    completion: Some(completion),
                    profile,
                });
            }
            for (name, history) in &histories {
                if history.started {
                    state.names.insert(name.clone());
                }
            }
            let mut ranked: Vec<&String> = order.iter().collect();
            ranked.sort_by_key(|name| histories.get(*name).map_or(0, |h| h.last_index));
            let newest: Vec<&String> = ranked.into_iter().rev().take(MAX_RETAINED_EXITED).collect();
            for name in newest.into_iter().rev() {
                let Some(history) = histories.get(name) else {
                    continue;
                };
                state.retain_exited(crate::supervisor::ExitedChild {
                    name: name.clone(),
                    cycle: history.cycle,
                    task: history.task.clone(),
                });
                if !history.last_event_terminal {
                    lost.push(name.clone());
                }
            }
        }
        for name in lost {
            append_best_effort(
                &host,
                SubagentEntry::Lost {
                    name,
                    reason: "session_restored".to_string(),
                },
            );
        }
        for (name, cycle) in to_acknowledge {
            append_best_effort(
                &host,
                SubagentEntry::WorkCycleDelivered {
                    name,
                    work_cycle: cycle,
                },
            );
        }
        warnings
    }
}
