//! The `anthropic-messages` API: `POST {base}/v1/messages` with `stream: true`.
//!
//! The stream is a sequence of typed events (`message_start`, `content_block_start`,
//! `content_block_delta`, `content_block_stop`, `message_delta`, `message_stop`, `ping`,
//! `error`); `message_stop` is the terminal event. Thinking blocks keep their signature (and
//! redacted thinking its opaque data) so that they can be replayed to the same model, which
//! Anthropic requires when thinking precedes a tool call.

use std::collections::BTreeMap;

use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use serde::Deserialize;
use serde_json::{Value, json};
use zi_protocol::ThinkingLevel;
use zi_protocol::event::AssistantMessageEvent;
use zi_protocol::message::{
    AgentMessage, ContentBlock, MessageContent, StopReason, ToolCall, Usage,
};
use zi_protocol::state::InputKind;

use super::common::{
    Halt, PREMATURE_END_MESSAGE, SseHandler, SseRequest, drive, emit, event_error_message, failure,
    finish_usage, parse_arguments, replay_messages, same_model, stream_sse, user_text_of,
    versioned_url,
};
use crate::model::Model;
use crate::stream::{EventSink, LlmContext, StreamOptions};

pub const ANTHROPIC_VERSION: &str = "2023-06-01";

/// Beta flag that lets budget thinking interleave with tool calls.
const INTERLEAVED_THINKING_BETA: &str = "interleaved-thinking-2025-05-14";

/// Output tokens requested when thinking is off (bounded by the model's maximum).
const DEFAULT_MAX_TOKENS: u64 = 32_000;

/// Answer tokens kept beyond a thinking budget.
const MIN_ANSWER_TOKENS: u64 = 1_024;

/// Default thinking budgets (runtime-reference §11.4); `xhigh` and `max` use the `high` budget.
pub fn thinking_budget(level: ThinkingLevel) -> Option<u64> {
    match level {
        ThinkingLevel::Off => None,
        ThinkingLevel::Minimal => Some(1_024),
        ThinkingLevel::Low => Some(2_048),
        ThinkingLevel::Medium => Some(8_192),
        ThinkingLevel::High | ThinkingLevel::Xhigh | ThinkingLevel::Max => Some(16_384),
    }
}

pub async fn stream(model: &Model, context: &LlmContext, options: &StreamOptions, sink: EventSink) {
    drive(sink, async |sink: &mut EventSink| {
        let body = request_body(model, context, options);
        let mut headers = HeaderMap::new();
        headers.insert(
            HeaderName::from_static("anthropic-version"),
            HeaderValue::from_static(ANTHROPIC_VERSION),
        );
        if body
            .get("thinking")
            .and_then(|t| t.get("budget_tokens"))
            .is_some()
        {
            headers.insert(
                HeaderName::from_static("anthropic-beta"),
                HeaderValue::from_static(INTERLEAVED_THINKING_BETA),
            );
        }
        let auth = options
            .api_key
            .as_deref()
            .filter(|key| !key.is_empty())
            .map(|key| (HeaderName::from_static("x-api-key"), key.to_string()));
        let request = SseRequest {
            url: versioned_url(&model.base_url, "v1", "messages"),
            auth,
            headers,
            body: &body,
        };
        let mut state = StreamState::default();
        let terminal = stream_sse(model, request, options, sink, &mut state).await?;
        if !terminal {
            return Err(failure(PREMATURE_END_MESSAGE));
        }
        state.complete(model, sink)
    })
    .await;
}

// ---------------------------------------------------------------------------------------------
// Response events

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Event {
    MessageStart {
        message: StartMessage,
    },
    ContentBlockStart {
        index: usize,
        content_block: Value,
    },
    ContentBlockDelta {
        index: usize,
        delta: Value,
    },
    ContentBlockStop {
        index: usize,
    },
    MessageDelta {
        #[serde(default)]
        delta: Value,
        #[serde(default)]
        usage: Option<WireUsage>,
    },
    MessageStop,
    Ping,
    Error {
        error: Value,
    },
    #[serde(other)]
    Unknown,
}

#[derive(Deserialize)]
struct StartMessage {
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    usage: Option<WireUsage>,
}

#[derive(Deserialize, Default, Clone, Copy)]
struct WireUsage {
    #[serde(default)]
    input_tokens: Option<u64>,
    #[serde(default)]
    output_tokens: Option<u64>,
    #[serde(default)]
    cache_creation_input_tokens: Option<u64>,
    #[serde(default)]
    cache_read_input_tokens: Option<u64>,
}

enum Block {
    Text,
    Thinking,
    Redacted,
    Tool {
        id: String,
        name: String,
        json: String,
    },
}

#[derive(Default)]
struct StreamState {
    /// Anthropic block index → (content index, kind).
    blocks: BTreeMap<usize, (usize, Block)>,
    usage: Usage,
    stop_reason: Option<String>,
}

impl SseHandler for StreamState {
    async fn on_data(&mut self, data: &str, sink: &mut EventSink) -> Result<bool, Halt> {
        let event: Event = match serde_json::from_str(data) {
            Ok(event) => event,
            Err(error) => {
                tracing::debug!("ignoring an undecodable anthropic event: {error}");
                return Ok(false);
            }
        };
        match event {
            Event::MessageStart { message } => {
                if let Some(id) = message.id {
                    sink.partial.response_id = Some(id);
                }
                if let Some(usage) = message.usage {
                    self.add_usage(usage);
                }
            }
            Event::ContentBlockStart {
                index,
                content_block,
            } => self.start_block(index, &content_block, sink).await?,
            Event::ContentBlockDelta { index, delta } => self.delta(index, &delta, sink).await?,
            Event::ContentBlockStop { index } => self.stop_block(index, sink).await?,
            Event::MessageDelta { delta, usage } => {
                if let Some(reason) = delta.get("stop_reason").and_then(Value::as_str) {
                    self.stop_reason = Some(reason.to_string());
                }
                if let Some(usage) = usage {
                    self.add_usage(usage);
                }
            }
            Event::MessageStop => return Ok(true),
            Event::Error { error } => return Err(failure(stream_error(&error))),
            Event::Ping | Event::Unknown => {}
        }
        Ok(false)
    }
}

/// `overloaded_error: Overloaded` keeps the type, which classification relies on.
fn stream_error(error: &Value) -> String {
    let message = event_error_message(error);
    match error.get("type").and_then(Value::as_str) {
        Some(kind) if !message.contains(kind) => format!("{kind}: {message}"),
        _ => message,
    }
}

impl StreamState {
    /// Later reports replace earlier ones field by field (`message_delta` carries cumulative
    /// output tokens and may repeat the input counts).
    fn add_usage(&mut self, usage: WireUsage) {
        if let Some(n) = usage.input_tokens {
            self.usage.input = n;
        }
        if let Some(n) = usage.output_tokens {
            self.usage.output = n;
        }
        if let Some(n) = usage.cache_creation_input_tokens {
            self.usage.cache_write = n;
        }
        if let Some(n) = usage.cache_read_input_tokens {
            self.usage.cache_read = n;
        }
    }

    async fn start_block(
        &mut self,
        index: usize,
        block: &Value,
        sink: &mut EventSink,
    ) -> Result<(), Halt> {
        let content_index = sink.partial.content.len();
        let text = |key: &str| block.get(key).and_then(Value::as_str).unwrap_or("");
        let kind = match block.get("type").and_then(Value::as_str) {
            Some("text") => {
                emit(sink, AssistantMessageEvent::TextStart { content_index }).await?;
                if !text("text").is_empty() {
                    let delta = text("text").to_string();
                    emit(
                        sink,
                        AssistantMessageEvent::TextDelta {
                            content_index,
                            delta,
                        },
                    )
                    .await?;
                }
                Block::Text
            }
            Some("thinking") => {
                emit(sink, AssistantMessageEvent::ThinkingStart { content_index }).await?;
                Block::Thinking
            }
            Some("redacted_thinking") => {
                emit(sink, AssistantMessageEvent::ThinkingStart { content_index }).await?;
                if let Some(ContentBlock::Thinking {
                    thinking_signature,
                    redacted,
                    ..
                }) = sink.partial.content.get_mut(content_index)
                {
                    *thinking_signature = Some(text("data").to_string());
                    *redacted = Some(true);
                }
                Block::Redacted
            }
            Some("tool_use") => {
                let id = text("id").to_string();
                let name = text("name").to_string();
                emit(
                    sink,
                    AssistantMessageEvent::ToolCallStart {
                        content_index,
                        id: id.clone(),
                        name: name.clone(),
                    },
                )
                .await?;
                Block::Tool {
                    id,
                    name,
                    json: String::new(),
                }
            }
            other => {
                tracing::debug!("ignoring an anthropic content block of type {other:?}");
                return Ok(());
            }
        };
        self.blocks.insert(index, (content_index, kind));
        Ok(())
    }

    async fn delta(
        &mut self,
        index: usize,
        delta: &Value,
        sink: &mut EventSink,
    ) -> Result<(), Halt> {
        let Some((content_index, block)) = self.blocks.get_mut(&index) else {
            return Ok(());
        };
        let content_index = *content_index;
        let text = |key: &str| {
            delta
                .get(key)
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        };
        match (delta.get("type").and_then(Value::as_str), block) {
            (Some("text_delta"), Block::Text) => {
                let delta = text("text");
                emit(
                    sink,
                    AssistantMessageEvent::TextDelta {
                        content_index,
                        delta,
                    },
                )
                .await
            }
            (Some("thinking_delta"), Block::Thinking) => {
                let delta = text("thinking");
                emit(
                    sink,
                    AssistantMessageEvent::ThinkingDelta {
                        content_index,
                        delta,
                    },
                )
                .await
            }
            (Some("signature_delta"), Block::Thinking) => {
                if let Some(ContentBlock::Thinking {
                    thinking_signature, ..
                }) = sink.partial.content.get_mut(content_index)
                {
                    thinking_signature
                        .get_or_insert_with(String::new)
                        .push_str(&text("signature"));
                }
                Ok(())
            }
            (Some("input_json_delta"), Block::Tool { json, .. }) => {
                let fragment = text("partial_json");
                if fragment.is_empty() {
                    return Ok(());
                }
                json.push_str(&fragment);
                emit(
                    sink,
                    AssistantMessageEvent::ToolCallDelta {
                        content_index,
                        delta: fragment,
                    },
                )
                .await
            }
            _ => Ok(()),
        }
    }

    async fn stop_block(&mut self, index: usize, sink: &mut EventSink) -> Result<(), Halt> {
        let Some((content_index, block)) = self.blocks.remove(&index) else {
            return Ok(());
        };
        let event = match (block, sink.partial.content.get(content_index)) {
            (Block::Text, Some(ContentBlock::Text { text, .. })) => {
                AssistantMessageEvent::TextEnd {
                    content_index,
                    content: text.clone(),
                }
            }
            (Block::Thinking | Block::Redacted, Some(ContentBlock::Thinking { thinking, .. })) => {
                AssistantMessageEvent::ThinkingEnd {
                    content_index,
                    content: thinking.clone(),
                }
            }
            (Block::Tool { id, name, json }, _) => AssistantMessageEvent::ToolCallEnd {
                content_index,
                tool_call: ToolCall {
                    id,
                    name,
                    arguments: parse_arguments(&json),
                    thought_signature: None,
                },
            },
            _ => return Ok(()),
        };
        emit(sink, event).await
    }

    fn complete(&mut self, model: &Model, sink: &mut EventSink) -> Result<StopReason, Halt> {
        sink.partial.usage = finish_usage(model, std::mem::take(&mut self.usage));
        match self.stop_reason.as_deref() {
            Some("end_turn" | "stop_sequence" | "pause_turn") | None => Ok(StopReason::Stop),
            Some("max_tokens") | Some("model_context_window_exceeded") => Ok(StopReason::Length),
            Some("tool_use") => Ok(StopReason::ToolUse),
            Some("refusal") => Err(failure("The model refused to answer (stop_reason refusal)")),
            Some(other) => Err(failure(format!(
                "Provider stopped with stop_reason {other}"
            ))),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Request body

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

/// The thinking parameters and `max_tokens` for a level.
fn thinking_params(model: &Model, level: ThinkingLevel) -> (Option<Value>, Option<Value>, u64) {
    let base = model.max_tokens.clamp(1, DEFAULT_MAX_TOKENS);
    if !model.reasoning || level == ThinkingLevel::Off {
        return (None, None, base);
    }
    if model.compat.adaptive_thinking {
        let effort = model
            .effort_for(level)
            .unwrap_or_else(|| "high".to_string());
        return (
            Some(json!({"type": "adaptive"})),
            Some(json!({"effort": effort})),
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
        Some(json!({"type": "enabled", "budget_tokens": budget})),
        None,
        max_tokens,
    )
}

pub(crate) fn request_body(model: &Model, context: &LlmContext, options: &StreamOptions) -> Value {
    let (thinking, output_config, max_tokens) = thinking_params(model, options.thinking);
    let mut body = json!({
        "model": model.id,
        "max_tokens": max_tokens,
        "stream": true,
        "messages": wire_messages(model, context),
    });
    if !context.system_prompt.is_empty() {
        body["system"] = json!([{
            "type": "text",
            "text": context.system_prompt,
            "cache_control": {"type": "ephemeral"},
        }]);
    }
    if !context.tools.is_empty() {
        body["tools"] = context
            .tools
            .iter()
            .map(|tool| {
                json!({
                    "name": tool.name,
                    "description": tool.description,
                    "input_schema": tool.parameters,
                })
            })
            .collect();
    }
    if let Some(thinking) = thinking {
        body["thinking"] = thinking;
    }
    if let Some(config) = output_config {
        body["output_config"] = config;
    }
    body
}

fn image_block(data: &str, mime_type: &str) -> Value {
    json!({"type": "image", "source": {"type": "base64", "media_type": mime_type, "data": data}})
}

fn user_blocks(content: &MessageContent, accepts_images: bool) -> Vec<Value> {
    match content {
        // The API rejects empty text blocks.
        MessageContent::Text(text) if text.is_empty() => Vec::new(),
        MessageContent::Text(text) => vec![json!({"type": "text", "text": text})],
        MessageContent::Parts(parts) => parts
            .iter()
            .filter_map(|part| match part {
                ContentBlock::Text { text, .. } if text.is_empty() => None,
                ContentBlock::Text { text, .. } => Some(json!({"type": "text", "text": text})),
                ContentBlock::Image { data, mime_type } if accepts_images => {
                    Some(image_block(data, mime_type))
                }
                ContentBlock::Image { .. } => Some(
                    json!({"type": "text", "text": "(image omitted: this model does not accept images)"}),
                ),
                _ => None,
            })
            .collect(),
    }
}

fn wire_messages(model: &Model, context: &LlmContext) -> Vec<Value> {
    let accepts_images = model.input.contains(&InputKind::Image);
    let mut out: Vec<Value> = Vec::new();
    // Consecutive tool results go into one user message, as the API requires.
    let mut results: Vec<Value> = Vec::new();
    let flush = |out: &mut Vec<Value>, results: &mut Vec<Value>| {
        if !results.is_empty() {
            out.push(json!({"role": "user", "content": std::mem::take(results)}));
        }
    };
    for message in replay_messages(&context.messages) {
        match message.as_ref() {
            AgentMessage::ToolResult(result) => {
                let content: Vec<Value> = result
                    .content
                    .iter()
                    .filter_map(|block| match block {
                        ContentBlock::Text { text, .. } if !text.is_empty() => {
                            Some(json!({"type": "text", "text": text}))
                        }
                        ContentBlock::Image { data, mime_type } if accepts_images => {
                            Some(image_block(data, mime_type))
                        }
                        _ => None,
                    })
                    .collect();
                let mut block = json!({
                    "type": "tool_result",
                    "tool_use_id": tool_id(&result.tool_call_id),
                    "content": content,
                });
                if result.is_error {
                    block["is_error"] = json!(true);
                }
                results.push(block);
                continue;
            }
            AgentMessage::User(user) => {
                flush(&mut out, &mut results);
                let blocks = user_blocks(&user.content, accepts_images);
                if !blocks.is_empty() {
                    out.push(json!({"role": "user", "content": blocks}));
                }
            }
            AgentMessage::Assistant(assistant) => {
                flush(&mut out, &mut results);
                let replay_thinking = same_model(model, assistant);
                let blocks: Vec<Value> = assistant
                    .content
                    .iter()
                    .filter_map(|block| match block {
                        ContentBlock::Text { text, .. } if !text.is_empty() => {
                            Some(json!({"type": "text", "text": text}))
                        }
                        ContentBlock::Thinking {
                            thinking_signature: Some(signature),
                            redacted: Some(true),
                            ..
                        } if replay_thinking => {
                            Some(json!({"type": "redacted_thinking", "data": signature}))
                        }
                        ContentBlock::Thinking {
                            thinking,
                            thinking_signature: Some(signature),
                            ..
                        } if replay_thinking && !signature.is_empty() => Some(
                            json!({"type": "thinking", "thinking": thinking, "signature": signature}),
                        ),
                        // Unsigned or foreign thinking cannot be verified by the API; it goes
                        // as plain text so the reasoning is not lost.
                        ContentBlock::Thinking { thinking, .. } if !thinking.trim().is_empty() => {
                            Some(json!({"type": "text", "text": thinking}))
                        }
                        ContentBlock::ToolCall(call) => Some(json!({
                            "type": "tool_use",
                            "id": tool_id(&call.id),
                            "name": call.name,
                            "input": call.arguments,
                        })),
                        _ => None,
                    })
                    .collect();
                if !blocks.is_empty() {
                    out.push(json!({"role": "assistant", "content": blocks}));
                }
            }
            other => {
                flush(&mut out, &mut results);
                if let Some(text) = user_text_of(other) {
                    out.push(json!({"role": "user", "content": [{"type": "text", "text": text}]}));
                }
            }
        }
    }
    flush(&mut out, &mut results);
    // Cache the conversation prefix: mark the last block of the last user message.
    if let Some(last) = out
        .iter_mut()
        .rev()
        .find(|m| m["role"] == "user")
        .and_then(|m| m["content"].as_array_mut())
        .and_then(|blocks| blocks.last_mut())
    {
        last["cache_control"] = json!({"type": "ephemeral"});
    }
    out
}
