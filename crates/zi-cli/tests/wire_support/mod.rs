//! Reading message content the way the tests compare it: in a chat-completions request body as
//! the mock LLM received it, in journal entries and frames (the same content shapes), and in a
//! tool call's result.

use serde_json::Value;

/// The text of a message's content: a string, or its `text` parts joined.
pub fn text_of(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter(|p| p["type"] == "text")
            .filter_map(|p| p["text"].as_str())
            .collect(),
        _ => String::new(),
    }
}

/// The texts of the user messages of a chat-completions request body, in order.
pub fn user_texts(body: &Value) -> Vec<String> {
    body["messages"]
        .as_array()
        .map(|m| {
            m.iter()
                .filter(|m| m["role"] == "user")
                .map(|m| text_of(&m["content"]))
                .collect()
        })
        .unwrap_or_default()
}

/// The system prompt of a chat-completions request body: the text of its first message, which
/// must have the role `system` (or `developer`, which OpenAI's reasoning models take instead).
pub fn system_text(body: &Value) -> String {
    let first = &body["messages"][0];
    assert!(
        first["role"] == "system" || first["role"] == "developer",
        "the first message is the system prompt: {first}"
    );
    text_of(&first["content"])
}

/// The text of a `tool_execution_end` event's first result block.
pub fn result_text(end: &Value) -> String {
    end["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// The texts of all of a `tool_execution_end` event's result blocks, one a line.
pub fn result_texts(end: &Value) -> String {
    end["result"]["content"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["text"].as_str())
        .collect::<Vec<_>>()
        .join("\n")
}
