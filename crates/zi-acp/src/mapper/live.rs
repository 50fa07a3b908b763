//! A running session's events as `session/update`s (docs/acp.md#prompt-turns). Pure: it runs in
//! the session's subscriber, under the session lock, and only maps.

use std::collections::HashMap;
use std::path::PathBuf;

use agent_client_protocol_schema::v1::{Cost, SessionInfoUpdate, SessionUpdate, UsageUpdate};
use serde_json::Value;
use zi_agent::EventContext;
use zi_protocol::event::{AgentSessionEvent, AssistantMessageEvent, CompactionOutcome, EntryData};
use zi_protocol::message::{AgentMessage, ContentBlock as ZiBlock};

use super::terminal::Deltas;
use super::{Display, tools};

/// What the mapper made of one event.
#[derive(Debug)]
#[expect(
    clippy::large_enum_variant,
    reason = "short-lived: each is sent or dropped right after the event"
)]
pub enum Out {
    Update(SessionUpdate),
    /// A user message was journaled: shown unless it is the client's own prompt (the session
    /// layer knows which prompts are its client's).
    UserMessage(Vec<SessionUpdate>),
    /// The model or thinking level changed: the config options are pushed again.
    ConfigChanged,
}

/// A tool call in flight.
#[derive(Debug)]
struct Call {
    args: Value,
    deltas: Deltas,
    started: bool,
}

/// The live mapper of one session.
#[derive(Debug)]
pub struct LiveMapper {
    cwd: PathBuf,
    display: Display,
    /// The assistant message being streamed.
    message_id: Option<String>,
    calls: HashMap<String, Call>,
    /// The cost of every assistant message so far, in USD.
    cost: f64,
    context_window: u64,
    titled: bool,
}

impl LiveMapper {
    /// `cost` and `titled` carry over from what a loaded session already had.
    pub fn new(
        cwd: PathBuf,
        display: Display,
        context_window: u64,
        cost: f64,
        titled: bool,
    ) -> Self {
        LiveMapper {
            cwd,
            display,
            message_id: None,
            calls: HashMap::new(),
            cost,
            context_window,
            titled,
        }
    }

    /// Maps one event.
    pub fn map(&mut self, event: &AgentSessionEvent, context: &EventContext) -> Vec<Out> {
        let update = |u: SessionUpdate| vec![Out::Update(u)];
        match event {
            AgentSessionEvent::MessageStart {
                message: AgentMessage::Assistant(_),
            } => {
                self.message_id = Some(
                    context
                        .message_id
                        .clone()
                        .unwrap_or_else(|| uuid::Uuid::new_v4().to_string()),
                );
                Vec::new()
            }
            AgentSessionEvent::MessageUpdate {
                assistant_message_event,
            } => match assistant_message_event {
                AssistantMessageEvent::TextDelta { delta, .. } if !delta.is_empty() => {
                    update(super::agent_text(delta, self.message_id()))
                }
                AssistantMessageEvent::ThinkingDelta { delta, .. } if !delta.is_empty() => {
                    update(super::agent_thought(delta, self.message_id()))
                }
                _ => Vec::new(),
            },
            AgentSessionEvent::MessageEnd {
                message: AgentMessage::Assistant(message),
            } => {
                self.cost += message.usage.cost.total;
                let used = message.usage.tokens();
                if used == 0 {
                    return Vec::new();
                }
                update(self.usage(used))
            }
            AgentSessionEvent::EntryAppended { entry } => self.entry(&entry.id, &entry.data),
            AgentSessionEvent::ToolExecutionStart {
                tool_call_id,
                tool_name,
                args,
            } => {
                self.calls.insert(
                    tool_call_id.clone(),
                    Call {
                        args: args.clone(),
                        deltas: Deltas::default(),
                        started: false,
                    },
                );
                update(super::tool_call(
                    tool_call_id,
                    tool_name,
                    args,
                    &self.cwd,
                    self.display,
                ))
            }
            AgentSessionEvent::ToolExecutionUpdate {
                tool_call_id,
                tool_name,
                partial_result,
                ..
            } if tool_name == "bash" => self.output(tool_call_id, partial_result),
            AgentSessionEvent::ToolExecutionEnd {
                tool_call_id,
                tool_name,
                result,
                is_error,
            } => {
                let call = self.calls.remove(tool_call_id);
                let args = call.map(|c| c.args).unwrap_or(Value::Null);
                update(super::tool_result(
                    tool_call_id,
                    tool_name,
                    &args,
                    (&result.content, result.details.as_ref(), *is_error),
                    &self.cwd,
                    self.display,
                ))
            }
            AgentSessionEvent::WorkPlanChanged { plan } => update(super::plan(plan)),
            AgentSessionEvent::CompactionEnd {
                outcome: CompactionOutcome::Completed { result },
                ..
            } => update(self.usage(result.estimated_tokens_after)),
            AgentSessionEvent::ModelChanged { model } => {
                self.context_window = model.context_window;
                vec![Out::ConfigChanged]
            }
            AgentSessionEvent::ThinkingLevelChanged { .. } => vec![Out::ConfigChanged],
            _ => Vec::new(),
        }
    }

    fn message_id(&mut self) -> &str {
        self.message_id
            .get_or_insert_with(|| uuid::Uuid::new_v4().to_string())
    }

    fn usage(&self, used: u64) -> SessionUpdate {
        SessionUpdate::UsageUpdate(
            UsageUpdate::new(used, self.context_window).cost(Cost::new(self.cost, "USD")),
        )
    }

    fn entry(&mut self, id: &str, data: &EntryData) -> Vec<Out> {
        match data {
            EntryData::Message {
                message: AgentMessage::User(message),
            } => {
                let mut out = vec![Out::UserMessage(super::user_chunks(&message.content, id))];
                if !self.titled
                    && let Some(title) = super::title_from(&super::content_text(&message.content))
                {
                    self.titled = true;
                    out.push(Out::Update(SessionUpdate::SessionInfoUpdate(
                        SessionInfoUpdate::new().title(title),
                    )));
                }
                out
            }
            EntryData::CustomMessage {
                content,
                display: true,
                ..
            } => super::custom_message(content, id)
                .map(Out::Update)
                .into_iter()
                .collect(),
            _ => Vec::new(),
        }
    }

    /// A `bash` progress report: the new output (terminal clients) or a bounded tail.
    fn output(&mut self, call_id: &str, partial: &Value) -> Vec<Out> {
        let Some(call) = self.calls.get_mut(call_id) else {
            return Vec::new();
        };
        let tail = partial
            .get("content")
            .and_then(|c| serde_json::from_value::<Vec<ZiBlock>>(c.clone()).ok())
            .map(|blocks| tools::result_text(&blocks))
            .unwrap_or_default();
        let total = partial
            .pointer("/details/outputBytes")
            .and_then(Value::as_u64)
            .unwrap_or(tail.len() as u64);
        let first = !call.started;
        call.started = true;
        let mut out = Vec::new();
        if self.display.terminal_output {
            if first {
                out.push(Out::Update(super::tool_started(call_id)));
            }
            let delta = call.deltas.next(&tail, total);
            if !delta.is_empty() {
                out.push(Out::Update(super::terminal_output(call_id, &delta)));
            }
        } else {
            out.push(Out::Update(super::output_tail(call_id, &tail, first)));
        }
        out
    }

    /// An approved call starts running (once per call).
    pub fn approved(&mut self, call_id: &str) -> Option<SessionUpdate> {
        let call = self.calls.get_mut(call_id)?;
        if call.started {
            return None;
        }
        call.started = true;
        Some(super::tool_started(call_id))
    }
}
