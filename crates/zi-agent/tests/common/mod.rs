//! What the agent-loop, custom-message and extension-host tests share: the session they build
//! ([`session`], [`harness`]), the tools they run ([`tools`]), event labels and the messages of a
//! chat-completions request body as the mock LLM received it.

use std::time::Duration;

use serde_json::Value;
use zi_protocol::event::AgentSessionEvent;
use zi_protocol::message::AgentMessage;

pub(crate) mod harness;
pub(crate) mod session;
pub(crate) mod tools;

/// Upper bound for anything the tests wait for; only reached when something is broken.
pub(crate) const WAIT: Duration = Duration::from_secs(30);
/// How long a blocking test tool waits before giving up on its own.
pub(crate) const TOOL_WAIT: Duration = Duration::from_secs(15);

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

/// The three provider calls of a run that started with `go`, called a tool, was steered with
/// `steer` and followed up with `follow_up`: the steer reaches the second call right after the
/// tool result, the follow-up the third.
pub(crate) fn assert_steer_then_follow_up_on_the_wire(
    bodies: &[Value],
    steer: &str,
    follow_up: &str,
) {
    assert_eq!(bodies.len(), 3);
    assert_eq!(wire_user_texts(&bodies[0]), ["go"]);
    let second = wire_messages(&bodies[1]);
    assert_eq!(
        wire_user_texts(&bodies[1]),
        ["go", steer],
        "steer at the turn boundary"
    );
    assert_eq!(second.last().map(wire_text).as_deref(), Some(steer));
    assert_eq!(
        second[second.len() - 2]["role"],
        "tool",
        "the steer follows the tool result"
    );
    assert_eq!(
        wire_user_texts(&bodies[2]),
        ["go", steer, follow_up],
        "follow-up when the run would stop"
    );
}
