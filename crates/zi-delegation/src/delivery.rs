//! Completion delivery to the parent model (docs/delegation.md#delivery): hidden context before
//! each provider request, acknowledgement of committed tool results and hidden messages, and
//! release of a finished run's claims. The restore after `--continue` is [`crate::restore`].

use std::sync::Arc;

use serde_json::{Value, json};
use zi_agent::custom::CustomMessageInput;
use zi_agent::delivery::ContextDelivery;
use zi_protocol::event::SubagentEntry;
use zi_protocol::message::{AgentMessage, MessageContent};

use crate::completion::Completion;
use crate::evidence::append_best_effort;
use crate::limits::{HIDDEN_TEXT_MAX_BYTES, clip};
use crate::supervisor::Supervisor;

pub const COMPLETION_CUSTOM_TYPE: &str = "zi.subagent_completion";
/// The claim id of completions handed to the hidden-context path.
const HIDDEN_CLAIM: &str = "hidden-context";
/// Encoded details larger than this acknowledge nothing (docs/delegation.md#tools).
const DETAILS_MAX_BYTES: usize = 64 * 1024;

/// The hidden `custom_message` of docs/delegation.md#delivery.
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
pub(crate) fn delivered_keys(message: &AgentMessage) -> Vec<(String, u64)> {
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

pub(crate) fn key_of(details: &Value) -> Option<(String, u64)> {
    let name = details.get("name")?.as_str()?;
    let cycle = details.get("workCycle")?.as_u64()?;
    Some((name.to_string(), cycle))
}

/// The completions a wait/interrupt/close result carries in its details
/// (docs/delegation.md#delivery).
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
