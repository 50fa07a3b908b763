//! Conversation messages as they appear in events, message pages and journals (rpc-reference §10).

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Milliseconds since the Unix epoch.
pub type EpochMillis = i64;

/// One part of a message's content.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum ContentBlock {
    Text {
        text: String,
        #[serde(
            rename = "textSignature",
            skip_serializing_if = "Option::is_none",
            default
        )]
        text_signature: Option<String>,
    },
    Thinking {
        thinking: String,
        #[serde(
            rename = "thinkingSignature",
            skip_serializing_if = "Option::is_none",
            default
        )]
        thinking_signature: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none", default)]
        redacted: Option<bool>,
    },
    Image {
        data: String,
        #[serde(rename = "mimeType")]
        mime_type: String,
    },
    ToolCall(ToolCall),
}

impl ContentBlock {
    pub fn text(text: impl Into<String>) -> Self {
        ContentBlock::Text {
            text: text.into(),
            text_signature: None,
        }
    }
}

/// A tool call requested by the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    pub arguments: Value,
    #[serde(
        rename = "thoughtSignature",
        skip_serializing_if = "Option::is_none",
        default
    )]
    pub thought_signature: Option<String>,
}

/// Content that may be a plain string or a list of parts (user and custom messages).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(untagged)]
pub enum MessageContent {
    Text(String),
    Parts(Vec<ContentBlock>),
}

impl MessageContent {
    /// Concatenated text of the text parts.
    pub fn text(&self) -> String {
        match self {
            MessageContent::Text(text) => text.clone(),
            MessageContent::Parts(parts) => concat_text(parts),
        }
    }
}

/// Concatenates the `text` parts of a content list (thinking, images and tool calls ignored).
pub fn concat_text(parts: &[ContentBlock]) -> String {
    let mut out = String::new();
    for part in parts {
        if let ContentBlock::Text { text, .. } = part {
            out.push_str(text);
        }
    }
    out
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub enum StopReason {
    Stop,
    Length,
    ToolUse,
    Error,
    Aborted,
}

impl StopReason {
    pub fn as_str(self) -> &'static str {
        match self {
            StopReason::Stop => "stop",
            StopReason::Length => "length",
            StopReason::ToolUse => "toolUse",
            StopReason::Error => "error",
            StopReason::Aborted => "aborted",
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct Cost {
    pub input: f64,
    pub output: f64,
    pub cache_read: f64,
    pub cache_write: f64,
    pub total: f64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct Usage {
    pub input: u64,
    pub output: u64,
    pub cache_read: u64,
    pub cache_write: u64,
    pub total_tokens: u64,
    pub cost: Cost,
}

impl Usage {
    /// Tokens the usage accounts for: `totalTokens`, or the sum of its parts.
    pub fn tokens(&self) -> u64 {
        if self.total_tokens > 0 {
            self.total_tokens
        } else {
            self.input + self.output + self.cache_read + self.cache_write
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct UserMessage {
    pub content: MessageContent,
    pub timestamp: EpochMillis,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct AssistantMessage {
    pub content: Vec<ContentBlock>,
    pub api: String,
    pub provider: String,
    pub model: String,
    pub usage: Usage,
    pub stop_reason: StopReason,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub error_message: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub response_id: Option<String>,
    pub timestamp: EpochMillis,
}

impl AssistantMessage {
    pub fn tool_calls(&self) -> impl Iterator<Item = &ToolCall> {
        self.content.iter().filter_map(|block| match block {
            ContentBlock::ToolCall(call) => Some(call),
            _ => None,
        })
    }

    pub fn text(&self) -> String {
        concat_text(&self.content)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ToolResultMessage {
    pub tool_call_id: String,
    pub tool_name: String,
    pub content: Vec<ContentBlock>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub details: Option<Value>,
    pub is_error: bool,
    pub timestamp: EpochMillis,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct CustomMessage {
    pub custom_type: String,
    pub content: MessageContent,
    pub display: bool,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub details: Option<Value>,
    pub timestamp: EpochMillis,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct CompactionSummaryMessage {
    pub summary: String,
    pub tokens_before: u64,
    pub estimated_tokens_after: u64,
    pub timestamp: EpochMillis,
}

/// (De)serializes a bare `AssistantMessage` with its `role: "assistant"` tag, as Zi's
/// assistant events carry it. Use with `#[serde(with = "assistant_with_role")]`.
pub mod assistant_with_role {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    use super::{AgentMessage, AssistantMessage};

    #[derive(Serialize)]
    #[serde(tag = "role", rename_all = "camelCase")]
    enum Tagged<'a> {
        Assistant(&'a AssistantMessage),
    }

    pub fn serialize<S: Serializer>(
        message: &AssistantMessage,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        Tagged::Assistant(message).serialize(serializer)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<AssistantMessage, D::Error> {
        match AgentMessage::deserialize(deserializer)? {
            AgentMessage::Assistant(message) => Ok(message),
            _ => Err(serde::de::Error::custom("expected an assistant message")),
        }
    }
}

/// Any message of the conversation, tagged by `role`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "role", rename_all = "camelCase")]
pub enum AgentMessage {
    User(UserMessage),
    Assistant(AssistantMessage),
    ToolResult(ToolResultMessage),
    Custom(CustomMessage),
    CompactionSummary(CompactionSummaryMessage),
}

impl AgentMessage {
    pub fn as_assistant(&self) -> Option<&AssistantMessage> {
        match self {
            AgentMessage::Assistant(message) => Some(message),
            _ => None,
        }
    }

    pub fn timestamp(&self) -> EpochMillis {
        match self {
            AgentMessage::User(m) => m.timestamp,
            AgentMessage::Assistant(m) => m.timestamp,
            AgentMessage::ToolResult(m) => m.timestamp,
            AgentMessage::Custom(m) => m.timestamp,
            AgentMessage::CompactionSummary(m) => m.timestamp,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn assistant_message_keys_follow_zi_order() {
        let message = AgentMessage::Assistant(AssistantMessage {
            content: vec![ContentBlock::text("done")],
            api: "openai-completions".into(),
            provider: "p".into(),
            model: "m".into(),
            usage: Usage::default(),
            stop_reason: StopReason::Stop,
            error_message: None,
            response_id: None,
            timestamp: 1,
        });
        let json = serde_json::to_string(&message).unwrap_or_default();
        assert_eq!(
            json,
            r#"{"role":"assistant","content":[{"type":"text","text":"done"}],"api":"openai-completions","provider":"p","model":"m","usage":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"totalTokens":0,"cost":{"input":0.0,"output":0.0,"cacheRead":0.0,"cacheWrite":0.0,"total":0.0}},"stopReason":"stop","timestamp":1}"#
        );
        let back: AgentMessage = serde_json::from_str(&json).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(back, message);
    }

    #[test]
    fn user_content_accepts_string_or_parts() {
        let a: AgentMessage =
            serde_json::from_str(r#"{"role":"user","content":"hi","timestamp":3}"#)
                .unwrap_or_else(|e| panic!("{e}"));
        let b: AgentMessage = serde_json::from_str(
            r#"{"role":"user","content":[{"type":"text","text":"hi"}],"timestamp":3}"#,
        )
        .unwrap_or_else(|e| panic!("{e}"));
        match (a, b) {
            (AgentMessage::User(a), AgentMessage::User(b)) => {
                assert_eq!(a.content.text(), b.content.text())
            }
            other => panic!("unexpected {other:?}"),
        }
    }
}
