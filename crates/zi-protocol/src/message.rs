//! Conversation messages as they appear in events, message pages and journals; their exact
//! shapes are `#/$defs/AgentMessage` of docs/rpc-schema.json (docs/rpc.md#for-client-authors).

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Milliseconds since the Unix epoch.
pub type EpochMillis = i64;

/// One part of a message's content.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum ContentBlock {
    /// Text.
    Text {
        /// The text.
        text: String,
        /// The provider's signature of the text, if any.
        #[serde(
            rename = "textSignature",
            skip_serializing_if = "Option::is_none",
            default
        )]
        text_signature: Option<String>,
    },
    /// Model reasoning.
    Thinking {
        /// The thinking text.
        thinking: String,
        /// The provider's signature of the thinking, if any.
        #[serde(
            rename = "thinkingSignature",
            skip_serializing_if = "Option::is_none",
            default
        )]
        thinking_signature: Option<String>,
        /// Whether the provider redacted the thinking.
        #[serde(skip_serializing_if = "Option::is_none", default)]
        redacted: Option<bool>,
    },
    /// An image.
    Image {
        /// The base64 image data.
        data: String,
        /// The image MIME type.
        #[serde(rename = "mimeType")]
        mime_type: String,
    },
    /// A tool call.
    ToolCall(ToolCall),
}

impl ContentBlock {
    /// A text block without a signature.
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
    /// The call id.
    pub id: String,
    /// The tool name.
    pub name: String,
    /// The call arguments (a JSON object).
    pub arguments: Value,
    /// The provider's thought signature, if any.
    #[serde(
        rename = "thoughtSignature",
        skip_serializing_if = "Option::is_none",
        default
    )]
    pub thought_signature: Option<String>,
}

// Serialized untagged; decoded by `content_visitor` (see there why not derived).
/// Content that may be a plain string or a list of parts (user and custom messages).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(untagged)]
pub enum MessageContent {
    /// Text.
    Text(String),
    /// Content blocks.
    Parts(Vec<ContentBlock>),
}

impl<'de> Deserialize<'de> for MessageContent {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(content_visitor::ContentVisitor)
    }
}

/// The decoder of [`MessageContent`]. serde's derived untagged decoding buffers the whole
/// value, tries it as a string (building an error for every array), then decodes the buffered
/// copy as parts; on a resumed journal that was a tenth of the open. The JSON type alone says
/// which variant a value is, so this visitor takes a string or an array as it comes.
mod content_visitor {
    use std::fmt;

    use serde::Deserialize;
    use serde::de::value::SeqAccessDeserializer;
    use serde::de::{Error, SeqAccess, Visitor};

    use super::{ContentBlock, MessageContent};

    pub struct ContentVisitor;

    impl<'de> Visitor<'de> for ContentVisitor {
        type Value = MessageContent;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a string or an array of content blocks")
        }

        fn visit_str<E: Error>(self, text: &str) -> Result<MessageContent, E> {
            Ok(MessageContent::Text(text.to_owned()))
        }

        fn visit_string<E: Error>(self, text: String) -> Result<MessageContent, E> {
            Ok(MessageContent::Text(text))
        }

        fn visit_seq<A: SeqAccess<'de>>(self, parts: A) -> Result<MessageContent, A::Error> {
            Vec::<ContentBlock>::deserialize(SeqAccessDeserializer::new(parts))
                .map(MessageContent::Parts)
        }
    }
}

impl MessageContent {
    /// Concatenated text of the text parts.
    pub fn text(&self) -> String {
        match self {
            MessageContent::Text(text) => text.clone(),
            MessageContent::Parts(parts) => concat_text(parts),
        }
    }

    /// Whether an image part is among the parts.
    pub fn has_images(&self) -> bool {
        matches!(self, MessageContent::Parts(parts)
            if parts.iter().any(|part| matches!(part, ContentBlock::Image { .. })))
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

/// Why an assistant message stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub enum StopReason {
    /// The model finished.
    Stop,
    /// The output limit was reached.
    Length,
    /// The model called tools.
    ToolUse,
    /// The request failed.
    Error,
    /// The run was interrupted.
    Aborted,
}

impl StopReason {
    /// The wire string.
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

/// The cost of a response, in USD.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct Cost {
    /// Input tokens.
    pub input: f64,
    /// Output tokens.
    pub output: f64,
    /// Tokens read from the cache.
    pub cache_read: f64,
    /// Tokens written to the cache.
    pub cache_write: f64,
    /// The total.
    pub total: f64,
}

impl Cost {
    /// Adds another cost to this one, field by field.
    pub fn add(&mut self, other: &Cost) {
        self.input += other.input;
        self.output += other.output;
        self.cache_read += other.cache_read;
        self.cache_write += other.cache_write;
        self.total += other.total;
    }
}

/// Token usage of a response.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct Usage {
    /// Input tokens.
    pub input: u64,
    /// Output tokens.
    pub output: u64,
    /// Tokens read from the cache.
    pub cache_read: u64,
    /// Tokens written to the cache.
    pub cache_write: u64,
    /// All tokens.
    pub total_tokens: u64,
    /// The cost in USD.
    pub cost: Cost,
}

impl Usage {
    /// Adds another usage to this one, tokens and costs field by field.
    pub fn add(&mut self, other: &Usage) {
        self.input += other.input;
        self.output += other.output;
        self.cache_read += other.cache_read;
        self.cache_write += other.cache_write;
        self.total_tokens += other.total_tokens;
        self.cost.add(&other.cost);
    }

    /// Tokens the usage accounts for: `totalTokens`, or the sum of its parts.
    pub fn tokens(&self) -> u64 {
        if self.total_tokens > 0 {
            self.total_tokens
        } else {
            self.input + self.output + self.cache_read + self.cache_write
        }
    }
}

/// A user message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct UserMessage {
    /// The content.
    pub content: MessageContent,
    /// When it was created.
    pub timestamp: EpochMillis,
}

/// A model response.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct AssistantMessage {
    /// The content.
    pub content: Vec<ContentBlock>,
    /// The wire API that produced it.
    pub api: String,
    /// The provider id.
    pub provider: String,
    /// The model id.
    pub model: String,
    /// Token usage and cost.
    pub usage: Usage,
    /// How it stopped.
    pub stop_reason: StopReason,
    /// The error, when it stopped with `error` or `aborted`.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub error_message: Option<String>,
    /// The provider's response id, if any.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub response_id: Option<String>,
    /// When it was created.
    pub timestamp: EpochMillis,
}

impl AssistantMessage {
    /// The tool calls, in content order.
    pub fn tool_calls(&self) -> impl Iterator<Item = &ToolCall> {
        self.content.iter().filter_map(|block| match block {
            ContentBlock::ToolCall(call) => Some(call),
            _ => None,
        })
    }

    /// The concatenated text blocks.
    pub fn text(&self) -> String {
        concat_text(&self.content)
    }
}

/// The result of one tool call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ToolResultMessage {
    /// The call this result answers.
    pub tool_call_id: String,
    /// The tool name.
    pub tool_name: String,
    /// The content.
    pub content: Vec<ContentBlock>,
    /// Tool- or extension-defined details.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub details: Option<Value>,
    /// Whether the tool failed.
    pub is_error: bool,
    /// When it was created.
    pub timestamp: EpochMillis,
}

/// A message an extension added to the context.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct CustomMessage {
    /// The extension-defined type.
    pub custom_type: String,
    /// The content.
    pub content: MessageContent,
    /// Whether clients display it.
    pub display: bool,
    /// Tool- or extension-defined details.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub details: Option<Value>,
    /// When it was created.
    pub timestamp: EpochMillis,
}

/// The summary that stands in for compacted history.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct CompactionSummaryMessage {
    /// The summary text.
    pub summary: String,
    /// Context tokens before compaction.
    pub tokens_before: u64,
    /// Estimated context tokens after it.
    pub estimated_tokens_after: u64,
    /// When it was created.
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

    /// Serializes the message with `role: "assistant"`.
    pub fn serialize<S: Serializer>(
        message: &AssistantMessage,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        Tagged::Assistant(message).serialize(serializer)
    }

    /// Deserializes an assistant message, rejecting other roles.
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
    /// A user message.
    User(UserMessage),
    /// An assistant message.
    Assistant(AssistantMessage),
    /// A tool result.
    ToolResult(ToolResultMessage),
    /// An extension message.
    Custom(CustomMessage),
    /// A compaction summary.
    CompactionSummary(CompactionSummaryMessage),
}

impl AgentMessage {
    /// The assistant message, if this is one.
    pub fn as_assistant(&self) -> Option<&AssistantMessage> {
        match self {
            AgentMessage::Assistant(message) => Some(message),
            _ => None,
        }
    }

    /// When the message was created.
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

    #[test]
    fn content_decodes_from_json_text_and_values_and_refuses_other_types() {
        let parts =
            r#"[{"type":"text","text":"a"},{"type":"image","data":"AA==","mimeType":"image/png"}]"#;
        let from_text: MessageContent =
            serde_json::from_str(parts).unwrap_or_else(|e| panic!("{e}"));
        let value: Value = serde_json::from_str(parts).unwrap_or_else(|e| panic!("{e}"));
        let from_value: MessageContent =
            serde_json::from_value(value).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(from_text, from_value);
        assert!(matches!(&from_text, MessageContent::Parts(p) if p.len() == 2));
        let escaped: MessageContent =
            serde_json::from_str(r#""line\none""#).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(escaped, MessageContent::Text("line\none".into()));
        for bad in [
            r#"5"#,
            r#"{"type":"text","text":"a"}"#,
            r#"[{"type":"nope"}]"#,
            "null",
        ] {
            assert!(
                serde_json::from_str::<MessageContent>(bad).is_err(),
                "{bad} was accepted"
            );
        }
    }
}
