//! The replay twin of the live mapper: a journal's entries, in order, as the updates
//! `session/load` sends before it answers (docs/acp.md#loading-a-session). The whole
//! conversation is replayed (entries a compaction retired too); each message is one chunk per
//! block, under its journal entry id, and each tool call is built by the same view functions
//! as live.

use std::collections::HashMap;
use std::path::PathBuf;

use agent_client_protocol_schema::v1::{Cost, SessionInfoUpdate, SessionUpdate, UsageUpdate};
use serde_json::Value;
use zi_protocol::event::{EntryData, SessionEntry};
use zi_protocol::message::{AgentMessage, ContentBlock as ZiBlock};
use zi_protocol::state::WorkPlan;

use super::Display;

/// Replays one journal, entry by entry.
#[derive(Debug)]
pub struct Replay {
    cwd: PathBuf,
    display: Display,
    /// Calls announced and not yet answered: name and arguments.
    calls: HashMap<String, (String, Value)>,
    /// In announcement order, for the calls that never got a result.
    order: Vec<String>,
    plan: Option<WorkPlan>,
    cost: f64,
    last_tokens: u64,
    title: Option<String>,
}

impl Replay {
    pub fn new(cwd: PathBuf, display: Display) -> Replay {
        Replay {
            cwd,
            display,
            calls: HashMap::new(),
            order: Vec::new(),
            plan: None,
            cost: 0.0,
            last_tokens: 0,
            title: None,
        }
    }

    /// The updates of one entry.
    pub fn entry(&mut self, entry: &SessionEntry) -> Vec<SessionUpdate> {
        match &entry.data {
            EntryData::Message { message } => self.message(&entry.id, message),
            EntryData::CustomMessage {
                content,
                display: true,
                ..
            } => super::custom_message(content, &entry.id)
                .into_iter()
                .collect(),
            EntryData::WorkPlan(plan) => {
                self.plan = Some(plan.clone());
                Vec::new()
            }
            _ => Vec::new(),
        }
    }

    fn message(&mut self, id: &str, message: &AgentMessage) -> Vec<SessionUpdate> {
        match message {
            AgentMessage::User(user) => {
                if self.title.is_none() {
                    self.title = super::title_from(&super::content_text(&user.content));
                }
                super::user_chunks(&user.content, id)
            }
            AgentMessage::Assistant(assistant) => {
                self.cost += assistant.usage.cost.total;
                let tokens = assistant.usage.tokens();
                if tokens > 0 {
                    self.last_tokens = tokens;
                }
                assistant
                    .content
                    .iter()
                    .filter_map(|block| self.assistant_block(id, block))
                    .collect()
            }
            AgentMessage::ToolResult(result) => {
                let (name, args) = self
                    .calls
                    .remove(&result.tool_call_id)
                    .unwrap_or_else(|| (result.tool_name.clone(), Value::Null));
                self.order.retain(|id| *id != result.tool_call_id);
                let id = &result.tool_call_id;
                let mut updates = Vec::new();
                if self.display.terminal_output && name == "bash" {
                    // The live bytes are gone: the terminal gets the journaled result text.
                    let text = super::tools::result_text(&result.content);
                    updates.push(super::terminal_output(id, &text));
                }
                updates.push(super::tool_result(
                    id,
                    &name,
                    &args,
                    (&result.content, result.details.as_ref(), result.is_error),
                    &self.cwd,
                    self.display,
                ));
                updates
            }
            AgentMessage::Custom(_) | AgentMessage::CompactionSummary(_) => Vec::new(),
        }
    }

    fn assistant_block(&mut self, id: &str, block: &ZiBlock) -> Option<SessionUpdate> {
        match block {
            ZiBlock::Text { text, .. } if !text.is_empty() => Some(super::agent_text(text, id)),
            ZiBlock::Thinking { thinking, .. } if !thinking.is_empty() => {
                Some(super::agent_thought(thinking, id))
            }
            ZiBlock::ToolCall(call) => {
                self.calls
                    .insert(call.id.clone(), (call.name.clone(), call.arguments.clone()));
                self.order.push(call.id.clone());
                Some(super::tool_call(
                    &call.id,
                    &call.name,
                    &call.arguments,
                    &self.cwd,
                    self.display,
                ))
            }
            _ => None,
        }
    }

    /// The total cost of the replayed messages (USD); the live mapper goes on from it.
    pub fn cost(&self) -> f64 {
        self.cost
    }

    /// Whether the conversation has a title (its first user message).
    pub fn titled(&self) -> bool {
        self.title.is_some()
    }

    /// What follows the last entry: calls that never got a result failed, the latest plan, the
    /// title and the usage.
    pub fn finish(&mut self, context_window: u64) -> Vec<SessionUpdate> {
        let mut updates: Vec<SessionUpdate> = self
            .order
            .drain(..)
            .map(|id| super::tool_abandoned(&id))
            .collect();
        self.calls.clear();
        if let Some(plan) = &self.plan {
            updates.push(super::plan(plan));
        }
        if let Some(title) = &self.title {
            updates.push(SessionUpdate::SessionInfoUpdate(
                SessionInfoUpdate::new().title(title.clone()),
            ));
        }
        if self.last_tokens > 0 {
            updates.push(SessionUpdate::UsageUpdate(
                UsageUpdate::new(self.last_tokens, context_window)
                    .cost(Cost::new(self.cost, "USD")),
            ));
        }
        updates
    }
}
