//! zi's session events and journal entries as ACP `session/update`s (docs/acp.md#prompt-turns).
//!
//! [`live::LiveMapper`] follows a running session's events; [`replay`] turns a journal into the
//! updates `session/load` sends before it answers. Both build every message chunk, tool call and
//! plan with the functions here and in [`tools`], so a loaded session looks as it did live.

pub mod live;
pub mod replay;
pub mod terminal;
pub mod tools;

#[cfg(test)]
mod tests;

use agent_client_protocol_schema::v1::{
    ContentBlock, ContentChunk, ImageContent, MessageId, Plan, PlanEntry, PlanEntryPriority,
    PlanEntryStatus, SessionUpdate, TextContent, ToolCall, ToolCallContent, ToolCallStatus,
    ToolCallUpdate, ToolCallUpdateFields,
};
use serde_json::{Map, Value, json};
use zi_protocol::message::{ContentBlock as ZiBlock, MessageContent};
use zi_protocol::state::{PlanStepStatus, WorkPlan};

/// Longest session title (bytes, cut at a character boundary).
pub const MAX_TITLE_BYTES: usize = 256;

/// How the client shows command output (docs/acp.md#command-output).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Display {
    /// The client advertised Zed's `_meta.terminal_output`.
    pub terminal_output: bool,
}

/// The id of a message's thinking (ACP separates thought chunks from the reply's).
pub fn thinking_id(message_id: &str) -> String {
    format!("{message_id}:thinking")
}

fn chunk(block: ContentBlock, message_id: &str) -> ContentChunk {
    ContentChunk::new(block).message_id(MessageId::new(message_id))
}

pub fn agent_text(text: &str, message_id: &str) -> SessionUpdate {
    SessionUpdate::AgentMessageChunk(chunk(
        ContentBlock::Text(TextContent::new(text)),
        message_id,
    ))
}

pub fn agent_thought(text: &str, message_id: &str) -> SessionUpdate {
    SessionUpdate::AgentThoughtChunk(chunk(
        ContentBlock::Text(TextContent::new(text)),
        &thinking_id(message_id),
    ))
}

/// A user message, one chunk per text or image block.
pub fn user_chunks(content: &MessageContent, message_id: &str) -> Vec<SessionUpdate> {
    let block = |b: ContentBlock| SessionUpdate::UserMessageChunk(chunk(b, message_id));
    match content {
        MessageContent::Text(text) => vec![block(ContentBlock::Text(TextContent::new(text)))],
        MessageContent::Parts(parts) => parts
            .iter()
            .filter_map(|part| match part {
                ZiBlock::Text { text, .. } => {
                    Some(block(ContentBlock::Text(TextContent::new(text.as_str()))))
                }
                ZiBlock::Image { data, mime_type } => Some(block(ContentBlock::Image(
                    ImageContent::new(data.as_str(), mime_type.as_str()),
                ))),
                _ => None,
            })
            .collect(),
    }
}

/// An extension's message shown to the user, as an agent message (none when it has no text).
pub fn custom_message(content: &MessageContent, id: &str) -> Option<SessionUpdate> {
    let text = content_text(content);
    (!text.is_empty()).then(|| agent_text(&text, id))
}

/// The text of a message's content (text blocks joined).
pub fn content_text(content: &MessageContent) -> String {
    match content {
        MessageContent::Text(text) => text.clone(),
        MessageContent::Parts(parts) => tools::result_text(parts),
    }
}

/// A session title from a user message: its first non-empty line, bounded.
pub fn title_from(text: &str) -> Option<String> {
    let line = text.lines().map(str::trim).find(|line| !line.is_empty())?;
    Some(tools::clip(line, MAX_TITLE_BYTES).to_string())
}

/// The whole plan (ACP's `plan` replaces the client's copy). A cancelled step stays visible
/// as completed, marked.
pub fn plan(plan: &WorkPlan) -> SessionUpdate {
    let entries = plan
        .steps
        .iter()
        .map(|step| {
            let (status, suffix) = match step.status {
                PlanStepStatus::Pending => (PlanEntryStatus::Pending, ""),
                PlanStepStatus::InProgress => (PlanEntryStatus::InProgress, ""),
                PlanStepStatus::Completed => (PlanEntryStatus::Completed, ""),
                PlanStepStatus::Cancelled => (PlanEntryStatus::Completed, " (cancelled)"),
            };
            PlanEntry::new(
                format!("{}{suffix}", step.text),
                PlanEntryPriority::Medium,
                status,
            )
        })
        .collect();
    SessionUpdate::Plan(Plan::new(entries))
}

/// `tool_call` at a call's start.
pub fn tool_call(
    call_id: &str,
    name: &str,
    args: &Value,
    cwd: &std::path::Path,
    display: Display,
) -> SessionUpdate {
    let view = tools::start_view(name, args, cwd);
    let mut call = ToolCall::new(call_id.to_string(), view.title)
        .name(name.to_string())
        .kind(view.kind)
        .status(ToolCallStatus::Pending)
        .locations(view.locations)
        .raw_input(view.raw_input);
    if display.terminal_output && name == "bash" {
        let mut meta = Map::new();
        meta.insert(
            "terminal_info".into(),
            json!({"terminal_id": call_id, "cwd": cwd.display().to_string()}),
        );
        call = call
            .content(vec![ToolCallContent::Terminal(
                agent_client_protocol_schema::v1::Terminal::new(call_id.to_string()),
            )])
            .meta(meta);
    } else if !view.content.is_empty() {
        call = call.content(view.content);
    }
    SessionUpdate::ToolCall(call)
}

/// `tool_call_update` at a call's end.
pub fn tool_result(
    call_id: &str,
    name: &str,
    args: &Value,
    result: (&[ZiBlock], Option<&Value>, bool),
    cwd: &std::path::Path,
    display: Display,
) -> SessionUpdate {
    let (content, details, is_error) = result;
    let view = tools::end_view(name, args, content, details, is_error, cwd);
    let mut fields = ToolCallUpdateFields::new()
        .status(view.status)
        .raw_output(view.raw_output);
    if display.terminal_output && name == "bash" {
        // No content: it would replace the terminal the client shows (codex-acp does the same).
        let exit = details.and_then(|d| d.get("exitCode")).cloned();
        let signal = details.and_then(|d| d.get("signal")).cloned();
        let mut meta = Map::new();
        meta.insert(
            "terminal_exit".into(),
            json!({"terminal_id": call_id, "exit_code": exit, "signal": signal}),
        );
        return SessionUpdate::ToolCallUpdate(
            ToolCallUpdate::new(call_id.to_string(), fields).meta(meta),
        );
    }
    if let Some(content) = view.content {
        fields = fields.content(content);
    }
    if let Some(locations) = view.locations {
        fields = fields.locations(locations);
    }
    SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(call_id.to_string(), fields))
}

/// A call that never got its result (the run was interrupted): failed.
pub fn tool_abandoned(call_id: &str) -> SessionUpdate {
    SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(
        call_id.to_string(),
        ToolCallUpdateFields::new().status(ToolCallStatus::Failed),
    ))
}

/// Command output for a terminal client: the new bytes only.
pub fn terminal_output(call_id: &str, data: &str) -> SessionUpdate {
    let mut meta = Map::new();
    meta.insert(
        "terminal_output".into(),
        json!({"terminal_id": call_id, "data": data}),
    );
    SessionUpdate::ToolCallUpdate(
        ToolCallUpdate::new(call_id.to_string(), ToolCallUpdateFields::new()).meta(meta),
    )
}

/// Command output for other clients: a bounded tail replacing the previous one.
pub fn output_tail(call_id: &str, tail: &str, first: bool) -> SessionUpdate {
    let mut fields = ToolCallUpdateFields::new().content(vec![ToolCallContent::from(
        ContentBlock::Text(TextContent::new(terminal::bounded_tail(tail))),
    )]);
    if first {
        fields = fields.status(ToolCallStatus::InProgress);
    }
    SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(call_id.to_string(), fields))
}

/// `tool_call_update{status: in_progress}` (an approved call starts).
pub fn tool_started(call_id: &str) -> SessionUpdate {
    SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(
        call_id.to_string(),
        ToolCallUpdateFields::new().status(ToolCallStatus::InProgress),
    ))
}
