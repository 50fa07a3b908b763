//! The request body: thinking parameters, tools and the replayed conversation.

use std::borrow::Cow;

use serde::Serialize;
use serde_json::Value;
use zi_protocol::ThinkingLevel;
use zi_protocol::message::{
    AgentMessage, AssistantMessage, ContentBlock, CustomMessage, MessageContent, ToolResultMessage,
    UserMessage,
};
use zi_protocol::state::InputKind;

use crate::model::Model;
use crate::providers::common::{Conversation, same_model, user_text_of};
use crate::stream::{LlmContext, StreamOptions};

/// Output tokens requested when thinking is off (bounded by the model's maximum).
const DEFAULT_MAX_TOKENS: u64 = 32_000;

/// Answer tokens kept beyond a thinking budget.
const MIN_ANSWER_TOKENS: u64 = 1_024;

/// Default thinking budgets (docs/providers.md#thinking-levels); `xhigh` and `max` use the `high`
/// budget.
pub fn thinking_budget(level: ThinkingLevel) -> Option<u64> {
    match level {
        ThinkingLevel::Off => None,
        ThinkingLevel::Minimal => Some(1_024),
        ThinkingLevel::Low => Some(2_048),
        ThinkingLevel::Medium => Some(8_192),
        ThinkingLevel::High | ThinkingLevel::Xhigh | ThinkingLevel::Max => Some(16_384),
    }
}

/// Anthropic tool ids must match `^[a-zA-Z0-9_-]{1,64}$`; ids from other APIs are mapped.
pub fn tool_id(id: &str) -> String {
    let mapped: String = id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .take(64)
        .collect();
    if mapped.is_empty() {
        "tool".to_string()
    } else {
        mapped
    }
}

#[derive(Serialize)]
pub(super) struct RequestBody<'a> {
    model: &'a str,
    max_tokens: u64,
    stream: bool,
    messages: Vec<WireMessage<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    system: Option<[WireBlock<'a>; 1]>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<WireTool<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) thinking: Option<Thinking>,
    #[serde(skip_serializing_if = "Option::is_none")]
    output_config: Option<OutputConfig>,
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(super) enum Thinking {
    Adaptive,
    Enabled { budget_tokens: u64 },
}

#[derive(Serialize)]
struct OutputConfig {
    effort: String,
}

#[derive(Serialize)]
struct WireTool<'a> {
    name: &'a str,
    description: &'a str,
    input_schema: &'a Value,
}

#[derive(Serialize)]
struct WireMessage<'a> {
    role: &'static str,
    content: Vec<WireBlock<'a>>,
}

/// `{"type": "ephemeral"}`: cache the prompt up to here.
#[derive(Serialize)]
struct CacheControl {
    #[serde(rename = "type")]
    kind: &'static str,
}

const EPHEMERAL: CacheControl = CacheControl { kind: "ephemeral" };

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum WireBlock<'a> {
    Text {
        text: Cow<'a, str>,
        #[serde(skip_serializing_if = "Option::is_none")]
        cache_control: Option<CacheControl>,
    },
    Image {
        source: ImageSource<'a>,
        #[serde(skip_serializing_if = "Option::is_none")]
        cache_control: Option<CacheControl>,
    },
    ToolResult {
        tool_use_id: String,
        content: Vec<WireBlock<'a>>,
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        is_error: bool,
        #[serde(skip_serializing_if = "Option::is_none")]
        cache_control: Option<CacheControl>,
    },
    RedactedThinking {
        data: &'a str,
    },
    Thinking {
        thinking: &'a str,
        signature: &'a str,
    },
    ToolUse {
        id: String,
        name: &'a str,
        input: &'a Value,
    },
}

#[derive(Serialize)]
struct ImageSource<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    media_type: &'a str,
    data: &'a str,
}

impl<'a> WireBlock<'a> {
    fn text(text: impl Into<Cow<'a, str>>) -> Self {
        WireBlock::Text {
            text: text.into(),
            cache_control: None,
        }
    }

    fn image(data: &'a str, mime_type: &'a str) -> Self {
        WireBlock::Image {
            source: ImageSource {
                kind: "base64",
                media_type: mime_type,
                data,
            },
            cache_control: None,
        }
    }

    /// Marks the block as the end of the cached prefix (blocks of user messages only).
    fn cache_here(&mut self) {
        match self {
            WireBlock::Text { cache_control, .. }
            | WireBlock::Image { cache_control, .. }
            | WireBlock::ToolResult { cache_control, .. } => *cache_control = Some(EPHEMERAL),
            _ => {}
        }
    }
}

/// The thinking parameters and `max_tokens` for a level.
fn thinking_params(
    model: &Model,
    level: ThinkingLevel,
) -> (Option<Thinking>, Option<OutputConfig>, u64) {
    let base = model.max_tokens.clamp(1, DEFAULT_MAX_TOKENS);
    if !model.reasoning || level == ThinkingLevel::Off {
        return (None, None, base);
    }
    if model.compat.adaptive_thinking {
        let effort = model
            .effort_for(level)
            .unwrap_or_else(|| "high".to_string());
        return (
            Some(Thinking::Adaptive),
            Some(OutputConfig { effort }),
            base,
        );
    }
    let Some(budget) = thinking_budget(level) else {
        return (None, None, base);
    };
    // Raise max_tokens to fit the budget plus answer room, within the model's limit; shrink the
    // budget when the limit is too small.
    let max_tokens = (base + budget).min(model.max_tokens.max(1));
    let budget = budget.min(max_tokens.saturating_sub(MIN_ANSWER_TOKENS));
    if budget < 1_024 {
        return (None, None, base);
    }
    (
        Some(Thinking::Enabled {
            budget_tokens: budget,
        }),
        None,
        max_tokens,
    )
}

pub(super) fn request_body<'a>(
    model: &'a Model,
    context: &'a LlmContext,
    replay: &'a [Cow<'a, AgentMessage>],
    options: &StreamOptions,
) -> RequestBody<'a> {
    let (thinking, output_config, max_tokens) = thinking_params(model, options.thinking);
    RequestBody {
        model: &model.id,
        max_tokens,
        stream: true,
        messages: wire_messages(model, replay),
        system: (!context.system_prompt.is_empty()).then(|| {
            [WireBlock::Text {
                text: Cow::Borrowed(&context.system_prompt),
                cache_control: Some(EPHEMERAL),
            }]
        }),
        tools: context
            .tools
            .iter()
            .map(|tool| WireTool {
                name: &tool.name,
                description: &tool.description,
                input_schema: &tool.parameters,
            })
            .collect(),
        thinking,
        output_config,
    }
}

fn user_blocks(content: &MessageContent, accepts_images: bool) -> Vec<WireBlock<'_>> {
    match content {
        // The API rejects empty text blocks.
        MessageContent::Text(text) if text.is_empty() => Vec::new(),
        MessageContent::Text(text) => vec![WireBlock::text(text.as_str())],
        MessageContent::Parts(parts) => parts
            .iter()
            .filter_map(|part| match part {
                ContentBlock::Text { text, .. } if text.is_empty() => None,
                ContentBlock::Text { text, .. } => Some(WireBlock::text(text.as_str())),
                ContentBlock::Image { data, mime_type } if accepts_images => {
                    Some(WireBlock::image(data, mime_type))
                }
                ContentBlock::Image { .. } => Some(WireBlock::text(
                    "(image omitted: this model does not accept images)",
                )),
                _ => None,
            })
            .collect(),
    }
}

/// One tool result; its text and (when the model accepts them) images.
fn tool_result_block(result: &ToolResultMessage, accepts_images: bool) -> WireBlock<'_> {
    let content = result
        .content
        .iter()
        .filter_map(|block| match block {
            ContentBlock::Text { text, .. } if !text.is_empty() => {
                Some(WireBlock::text(text.as_str()))
            }
            ContentBlock::Image { data, mime_type } if accepts_images => {
                Some(WireBlock::image(data, mime_type))
            }
            _ => None,
        })
        .collect();
    WireBlock::ToolResult {
        tool_use_id: tool_id(&result.tool_call_id),
        content,
        is_error: result.is_error,
        cache_control: None,
    }
}

/// An assistant message's blocks; thinking is replayed signed only to the model that wrote it.
fn assistant_blocks(assistant: &AssistantMessage, replay_thinking: bool) -> Vec<WireBlock<'_>> {
    assistant
        .content
        .iter()
        .filter_map(|block| match block {
            ContentBlock::Text { text, .. } if !text.is_empty() => {
                Some(WireBlock::text(text.as_str()))
            }
            ContentBlock::Thinking {
                thinking_signature: Some(signature),
                redacted: Some(true),
                ..
            } if replay_thinking => Some(WireBlock::RedactedThinking { data: signature }),
            ContentBlock::Thinking {
                thinking,
                thinking_signature: Some(signature),
                ..
            } if replay_thinking && !signature.is_empty() => Some(WireBlock::Thinking {
                thinking,
                signature,
            }),
            // Unsigned or foreign thinking cannot be verified by the API; it goes as plain text
            // so the reasoning is not lost.
            ContentBlock::Thinking { thinking, .. } if !thinking.trim().is_empty() => {
                Some(WireBlock::text(thinking.as_str()))
            }
            ContentBlock::ToolCall(call) => Some(WireBlock::ToolUse {
                id: tool_id(&call.id),
                name: &call.name,
                input: &call.arguments,
            }),
            _ => None,
        })
        .collect()
}

/// The conversation ([`replay_messages`]: failures dropped, every tool call answered).
fn wire_messages<'a>(model: &Model, replay: &'a [Cow<'a, AgentMessage>]) -> Vec<WireMessage<'a>> {
    let accepts_images = model.input.contains(&InputKind::Image);
    // Consecutive tool results go into one user message, as the API requires.
    let mut conversation = Conversation::new(|role, content| WireMessage { role, content });
    for message in replay.iter().map(Cow::as_ref) {
        match message {
            AgentMessage::ToolResult(result) => {
                conversation.tool_result(tool_result_block(result, accepts_images));
            }
            // A custom message with images goes as a user message does, images included.
            AgentMessage::User(UserMessage { content, .. })
            | AgentMessage::Custom(CustomMessage { content, .. })
                if matches!(message, AgentMessage::User(_)) || content.has_images() =>
            {
                conversation.push("user", user_blocks(content, accepts_images));
            }
            AgentMessage::Assistant(assistant) => {
                let blocks = assistant_blocks(assistant, same_model(model, assistant));
                conversation.push("assistant", blocks);
            }
            other => {
                let text = user_text_of(other).map(WireBlock::text);
                conversation.push("user", text.into_iter().collect());
            }
        }
    }
    let mut out = conversation.finish();
    // Cache the conversation prefix: mark the last block of the last user message.
    if let Some(last) = out
        .iter_mut()
        .rev()
        .find(|message| message.role == "user")
        .and_then(|message| message.content.last_mut())
    {
        last.cache_here();
    }
    out
}
