//! The `anthropic-messages` API: `POST {base}/v1/messages` with `stream: true`.
//!
//! The stream is a sequence of typed events (`message_start`, `content_block_start`,
//! `content_block_delta`, `content_block_stop`, `message_delta`, `message_stop`, `ping`,
//! `error`); `message_stop` is the terminal event. Thinking blocks keep their signature (and
//! redacted thinking its opaque data) so that they can be replayed to the same model, which
//! Anthropic requires when thinking precedes a tool call.

use std::borrow::Cow;
use std::collections::BTreeMap;

use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use zi_protocol::ThinkingLevel;
use zi_protocol::message::{AgentMessage, ContentBlock, MessageContent, StopReason, Usage};
use zi_protocol::state::InputKind;

use super::common::{
    Assembler, BlockKind, Halt, MaybeStr, PREMATURE_END_MESSAGE, SseHandler, SseRequest, TextKind,
    drive, event_error_message, failure, finish_usage, replay_messages, same_model, stream_sse,
    user_text_of, versioned_url,
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

pub(crate) async fn stream(
    model: &Model,
    context: &LlmContext,
    options: &StreamOptions,
    sink: EventSink,
) {
    drive(sink, async |out: &mut Assembler| {
        let replay = replay_messages(&context.messages);
        let body = request_body(model, context, &replay, options);
        let mut headers = HeaderMap::new();
        headers.insert(
            HeaderName::from_static("anthropic-version"),
            HeaderValue::from_static(ANTHROPIC_VERSION),
        );
        if matches!(body.thinking, Some(Thinking::Enabled { .. })) {
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
        let terminal = stream_sse(model, request, options, out, &mut state).await?;
        if !terminal {
            return Err(failure(PREMATURE_END_MESSAGE));
        }
        state.complete(model, out)
    })
    .await;
}

// ---------------------------------------------------------------------------------------------
// Response events

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Event<'a> {
    MessageStart {
        #[serde(borrow)]
        message: StartMessage<'a>,
    },
    ContentBlockStart {
        index: usize,
        #[serde(borrow)]
        content_block: StartBlock<'a>,
    },
    ContentBlockDelta {
        index: usize,
        #[serde(borrow)]
        delta: Delta<'a>,
    },
    ContentBlockStop {
        index: usize,
    },
    MessageDelta {
        #[serde(borrow, default)]
        delta: Option<MessageDelta<'a>>,
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
struct StartMessage<'a> {
    #[serde(borrow, default)]
    id: MaybeStr<'a>,
    #[serde(default)]
    usage: Option<WireUsage>,
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum StartBlock<'a> {
    Text {
        #[serde(borrow, default)]
        text: MaybeStr<'a>,
    },
    Thinking,
    RedactedThinking {
        #[serde(borrow, default)]
        data: MaybeStr<'a>,
    },
    ToolUse {
        #[serde(borrow, default)]
        id: MaybeStr<'a>,
        #[serde(borrow, default)]
        name: MaybeStr<'a>,
    },
    #[serde(other)]
    Unknown,
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Delta<'a> {
    #[serde(rename = "text_delta")]
    Text {
        #[serde(borrow, default)]
        text: MaybeStr<'a>,
    },
    #[serde(rename = "thinking_delta")]
    Thinking {
        #[serde(borrow, default)]
        thinking: MaybeStr<'a>,
    },
    #[serde(rename = "signature_delta")]
    Signature {
        #[serde(borrow, default)]
        signature: MaybeStr<'a>,
    },
    #[serde(rename = "input_json_delta")]
    InputJson {
        #[serde(borrow, default)]
        partial_json: MaybeStr<'a>,
    },
    #[serde(other)]
    Unknown,
}

#[derive(Deserialize)]
struct MessageDelta<'a> {
    #[serde(borrow, default)]
    stop_reason: MaybeStr<'a>,
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

#[derive(Default)]
struct StreamState {
    /// Anthropic block index → content index.
    blocks: BTreeMap<usize, usize>,
    usage: Usage,
    stop_reason: Option<String>,
}

impl SseHandler for StreamState {
    async fn on_data(&mut self, data: &str, out: &mut Assembler) -> Result<bool, Halt> {
        let event: Event<'_> = match serde_json::from_str(data) {
            Ok(event) => event,
            Err(error) => {
                tracing::debug!("ignoring an undecodable anthropic event: {error}");
                return Ok(false);
            }
        };
        match event {
            Event::MessageStart { message } => {
                if let Some(id) = message.id.into_owned() {
                    out.set_response_id(id);
                }
                if let Some(usage) = message.usage {
                    self.add_usage(usage);
                }
            }
            Event::ContentBlockStart {
                index,
                content_block,
            } => self.start_block(index, content_block, out).await?,
            Event::ContentBlockDelta { index, delta } => self.delta(index, delta, out).await?,
            Event::ContentBlockStop { index } => {
                if let Some(content_index) = self.blocks.remove(&index) {
                    out.end(content_index).await?;
                }
            }
            Event::MessageDelta { delta, usage } => {
                if let Some(reason) = delta.and_then(|delta| delta.stop_reason.into_owned()) {
                    self.stop_reason = Some(reason);
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
        block: StartBlock<'_>,
        out: &mut Assembler,
    ) -> Result<(), Halt> {
        let content_index = match block {
            StartBlock::Text { text } => {
                let content_index = out.start(TextKind::Text).await?;
                if let Some(text) = text.0.filter(|text| !text.is_empty()) {
                    out.delta(content_index, text.into_owned()).await?;
                }
                content_index
            }
            StartBlock::Thinking => out.start(TextKind::Thinking).await?,
            StartBlock::RedactedThinking { data } => {
                out.start_redacted_thinking(data.or_empty()).await?
            }
            StartBlock::ToolUse { id, name } => {
                out.start_tool_call(id.or_empty(), name.or_empty()).await?
            }
            StartBlock::Unknown => {
                tracing::debug!("ignoring an anthropic content block of an unknown type");
                return Ok(());
            }
        };
        self.blocks.insert(index, content_index);
        Ok(())
    }

    async fn delta(
        &mut self,
        index: usize,
        delta: Delta<'_>,
        out: &mut Assembler,
    ) -> Result<(), Halt> {
        let Some(&content_index) = self.blocks.get(&index) else {
            return Ok(());
        };
        match (delta, out.kind(content_index)) {
            (Delta::Text { text }, Some(BlockKind::Text)) => {
                out.delta(content_index, text.or_empty()).await
            }
            (Delta::Thinking { thinking }, Some(BlockKind::Thinking)) => {
                out.delta(content_index, thinking.or_empty()).await
            }
            (Delta::Signature { signature }, Some(BlockKind::Thinking)) => {
                out.append_signature(content_index, signature.as_deref().unwrap_or(""));
                Ok(())
            }
            (Delta::InputJson { partial_json }, Some(BlockKind::ToolCall)) => {
                match partial_json.0.filter(|fragment| !fragment.is_empty()) {
                    Some(fragment) => out.delta(content_index, fragment.into_owned()).await,
                    None => Ok(()),
                }
            }
            _ => Ok(()),
        }
    }

    fn complete(&mut self, model: &Model, out: &mut Assembler) -> Result<StopReason, Halt> {
        out.set_usage(finish_usage(model, std::mem::take(&mut self.usage)));
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

#[derive(Serialize)]
struct RequestBody<'a> {
    model: &'a str,
    max_tokens: u64,
    stream: bool,
    messages: Vec<WireMessage<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    system: Option<[WireBlock<'a>; 1]>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<WireTool<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    thinking: Option<Thinking>,
    #[serde(skip_serializing_if = "Option::is_none")]
    output_config: Option<OutputConfig>,
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Thinking {
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

fn request_body<'a>(
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

/// The conversation ([`replay_messages`]: failures dropped, every tool call answered).
fn wire_messages<'a>(model: &Model, replay: &'a [Cow<'a, AgentMessage>]) -> Vec<WireMessage<'a>> {
    let accepts_images = model.input.contains(&InputKind::Image);
    let mut out: Vec<WireMessage<'a>> = Vec::new();
    // Consecutive tool results go into one user message, as the API requires.
    let mut results: Vec<WireBlock<'a>> = Vec::new();
    let flush = |out: &mut Vec<WireMessage<'a>>, results: &mut Vec<WireBlock<'a>>| {
        if !results.is_empty() {
            out.push(WireMessage {
                role: "user",
                content: std::mem::take(results),
            });
        }
    };
    for message in replay.iter().map(Cow::as_ref) {
        match message {
            AgentMessage::ToolResult(result) => {
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
                results.push(WireBlock::ToolResult {
                    tool_use_id: tool_id(&result.tool_call_id),
                    content,
                    is_error: result.is_error,
                    cache_control: None,
                });
            }
            AgentMessage::User(user) => {
                flush(&mut out, &mut results);
                let blocks = user_blocks(&user.content, accepts_images);
                if !blocks.is_empty() {
                    out.push(WireMessage {
                        role: "user",
                        content: blocks,
                    });
                }
            }
            AgentMessage::Assistant(assistant) => {
                flush(&mut out, &mut results);
                let replay_thinking = same_model(model, assistant);
                let blocks: Vec<WireBlock<'a>> = assistant
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
                        } if replay_thinking => {
                            Some(WireBlock::RedactedThinking { data: signature })
                        }
                        ContentBlock::Thinking {
                            thinking,
                            thinking_signature: Some(signature),
                            ..
                        } if replay_thinking && !signature.is_empty() => {
                            Some(WireBlock::Thinking {
                                thinking,
                                signature,
                            })
                        }
                        // Unsigned or foreign thinking cannot be verified by the API; it goes
                        // as plain text so the reasoning is not lost.
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
                    .collect();
                if !blocks.is_empty() {
                    out.push(WireMessage {
                        role: "assistant",
                        content: blocks,
                    });
                }
            }
            other => {
                flush(&mut out, &mut results);
                if let Some(text) = user_text_of(other) {
                    out.push(WireMessage {
                        role: "user",
                        content: vec![WireBlock::text(text)],
                    });
                }
            }
        }
    }
    flush(&mut out, &mut results);
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
