//! What the agent-loop and custom-message tests both read: event labels and the messages of a
//! chat-completions request body as the mock LLM received it.

use serde_json::Value;
use zi_protocol::event::AgentSessionEvent;
use zi_protocol::message::AgentMessage;

/// A message's wire role.
pub(crate) fn role(message: &AgentMessage) -> &'static str {
    match message {
        AgentMessage::User(_) => "user",
        AgentMessage::Assistant(_) => "assistant",
        AgentMessage::ToolResult(_) => "toolResult",
        AgentMessage::Custom(_) => "custom",
        AgentMessage::CompactionSummary(_) => "compactionSummary",
    }
}

/// An event's type, with the role of a message event and the type of an appended entry.
pub(crate) fn label(event: &AgentSessionEvent) -> String {
    match event {
        AgentSessionEvent::MessageStart { message } => format!("message_start:{}", role(message)),
        AgentSessionEvent::MessageEnd { message } => format!("message_end:{}", role(message)),
        AgentSessionEvent::EntryAppended { entry } => {
            format!("entry_appended:{}", entry.data.type_name())
        }
        other => other.type_name().to_string(),
    }
}

/// The wire messages of a chat-completions request body.
pub(crate) fn wire_messages(body: &Value) -> Vec<Value> {
    body["messages"].as_array().cloned().unwrap_or_default()
}

/// The text of a wire message's content (a string or text parts).
pub(crate) fn wire_text(message: &Value) -> String {
    match &message["content"] {
        Value::String(text) => text.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// The texts of the user messages of a request, in order.
pub(crate) fn wire_user_texts(body: &Value) -> Vec<String> {
    wire_messages(body)
        .iter()
        .filter(|m| m["role"] == "user")
        .map(wire_text)
        .collect()
}
