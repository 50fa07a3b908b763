//! The `openai-completions` API: OpenAI chat completions with `stream: true`, as served by OpenAI
//! and by OpenAI-compatible servers (vLLM, llama.cpp, Ollama, LM Studio, gateways).
//!
//! One call sends one request and turns its SSE chunks into [`AssistantMessageEvent`]s. It never
//! retries: every failure becomes an assistant message with `stopReason` `error` (or `aborted`
//! on cancellation) so that the session's retry policy decides, visibly, what happens next.
//!
//! The body loop is on the hot path of long replies: chunks are decoded into small borrowing
//! structs, each delta is moved into exactly one event, and accumulated text lives only in the
//! consumer's partial message.

use reqwest::header::{AUTHORIZATION, HeaderMap};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::borrow::Cow;
use zi_protocol::ThinkingLevel;
use zi_protocol::message::{AgentMessage, ContentBlock, MessageContent, StopReason, Usage};
use zi_protocol::state::InputKind;

use super::common::{
    Assembler, Halt, PREMATURE_END_MESSAGE, SseHandler, SseRequest, TextKind,
    compaction_summary_text, drive, failure, replay_messages, stream_sse,
};
use crate::model::{MaxTokensField, Model, ThinkingFormat};
use crate::stream::{EventSink, LlmContext, StreamOptions, apply_cost};

/// Streams one assistant message from `{model.base_url}/chat/completions` into `sink`.
pub(crate) async fn stream(
    model: &Model,
    context: &LlmContext,
    options: &StreamOptions,
    sink: EventSink,
) {
    drive(sink, async |out: &mut Assembler| {
        run(model, context, options, out).await
    })
    .await;
}

async fn run(
    model: &Model,
    context: &LlmContext,
    options: &StreamOptions,
    out: &mut Assembler,
) -> Result<StopReason, Halt> {
    let replay = replay_messages(&context.messages);
    let body = request_body(model, context, &replay, options);
    let auth = options
        .api_key
        .as_deref()
        .filter(|key| !key.is_empty())
        .map(|key| (AUTHORIZATION, format!("Bearer {key}")));
    let request = SseRequest {
        url: format!("{}/chat/completions", model.base_url.trim_end_matches('/')),
        auth,
        headers: HeaderMap::new(),
        body: &body,
    };
    let mut state = StreamState::default();
    stream_sse(model, request, options, out, &mut state).await?;
    state.complete(model, out).await
}

impl SseHandler for StreamState {
    async fn on_data(&mut self, data: &str, out: &mut Assembler) -> Result<bool, Halt> {
        if data == "[DONE]" {
            return Ok(true);
        }
        match serde_json::from_str::<Chunk<'_>>(data) {
            Ok(chunk) => self.apply(chunk, out).await?,
            Err(error) => {
                tracing::debug!("ignoring an undecodable chat-completions chunk: {error}")
            }
        }
        Ok(false)
    }
}

// ---------------------------------------------------------------------------------------------
// Response chunks

/// One `data:` payload of the stream. Unknown fields (`object`, `timings`, …) are skipped.
#[derive(Deserialize)]
struct Chunk<'a> {
    #[serde(borrow, default)]
    id: Option<Borrowed<'a>>,
    #[serde(borrow, default)]
    choices: Option<Vec<Choice<'a>>>,
    #[serde(default)]
    usage: Option<ChunkUsage>,
    #[serde(default)]
    error: Option<Value>,
}

/// A string that borrows from the chunk text unless it had escapes.
#[derive(Deserialize)]
struct Borrowed<'a>(#[serde(borrow)] Cow<'a, str>);

#[derive(Deserialize)]
struct Choice<'a> {
    #[serde(borrow, default)]
    delta: Option<Delta<'a>>,
    #[serde(borrow, default)]
    finish_reason: Option<Borrowed<'a>>,
}

#[derive(Deserialize)]
struct Delta<'a> {
    // Deltas become owned event strings anyway, so decoding straight into `String` costs one
    // allocation either way.
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    reasoning_content: Option<String>,
    /// vLLM and OpenRouter name the reasoning text `reasoning`.
    #[serde(default)]
    reasoning: Option<String>,
    #[serde(borrow, default)]
    tool_calls: Option<Vec<ToolCallChunk<'a>>>,
}

#[derive(Deserialize)]
struct ToolCallChunk<'a> {
    #[serde(default)]
    index: Option<usize>,
    #[serde(borrow, default)]
    id: Option<Borrowed<'a>>,
    #[serde(borrow, default)]
    function: Option<FunctionChunk<'a>>,
}

#[derive(Deserialize)]
struct FunctionChunk<'a> {
    #[serde(borrow, default)]
    name: Option<Borrowed<'a>>,
    #[serde(default)]
    arguments: Option<String>,
}

#[derive(Deserialize, Default)]
struct ChunkUsage {
    #[serde(default)]
    prompt_tokens: u64,
    #[serde(default)]
    completion_tokens: u64,
    #[serde(default)]
    total_tokens: Option<u64>,
    #[serde(default)]
    prompt_tokens_details: Option<PromptTokensDetails>,
}

#[derive(Deserialize, Default)]
struct PromptTokensDetails {
    #[serde(default)]
    cached_tokens: Option<u64>,
}

/// A tool call of this reply: the provider's `index` when it sends one, and the call's block.
struct CallKey {
    key: Option<usize>,
    content_index: usize,
}

/// What the body has told so far beyond the content blocks, which the assembler builds.
#[derive(Default)]
struct StreamState {
    tool_calls: Vec<CallKey>,
    finish_reason: Option<String>,
    usage: Option<ChunkUsage>,
}

impl StreamState {
    async fn apply(&mut self, chunk: Chunk<'_>, out: &mut Assembler) -> Result<(), Halt> {
        if let Some(error) = chunk.error.filter(|error| !error.is_null()) {
            return Err(failure(stream_error_message(&error)));
        }
        // Set at once so that a failed message still names the response it came from.
        if !out.has_response_id()
            && let Some(Borrowed(id)) = chunk.id.filter(|id| !id.0.is_empty())
        {
            out.set_response_id(id.into_owned());
        }
        if let Some(usage) = chunk.usage {
            self.usage = Some(usage);
        }
        for choice in chunk.choices.into_iter().flatten() {
            if let Some(delta) = choice.delta {
                // Some servers send the same reasoning under both names; take one.
                if let Some(thinking) = delta
                    .reasoning_content
                    .or(delta.reasoning)
                    .filter(|t| !t.is_empty())
                {
                    out.extend(TextKind::Thinking, thinking).await?;
                }
                if let Some(text) = delta.content.filter(|t| !t.is_empty()) {
                    out.extend(TextKind::Text, text).await?;
                }
                for call in delta.tool_calls.into_iter().flatten() {
                    self.tool_call_delta(call, out).await?;
                }
            }
            if let Some(Borrowed(reason)) =
                choice.finish_reason.filter(|reason| !reason.0.is_empty())
            {
                self.finish_reason = Some(reason.into_owned());
            }
        }
        Ok(())
    }

    async fn tool_call_delta(
        &mut self,
        chunk: ToolCallChunk<'_>,
        out: &mut Assembler,
    ) -> Result<(), Halt> {
        let id = chunk.id.map(|Borrowed(id)| id).filter(|id| !id.is_empty());
        let (name, arguments) = match chunk.function {
            Some(function) => (function.name.map(|Borrowed(name)| name), function.arguments),
            None => (None, None),
        };
        // Calls are keyed by `index`; servers that omit it send each call whole or continue the
        // last one.
        let existing = match (chunk.index, &id) {
            (Some(index), _) => self.tool_calls.iter().find(|call| call.key == Some(index)),
            (None, Some(id)) => self
                .tool_calls
                .iter()
                .find(|call| out.open_tool_call_id(call.content_index) == Some(id.as_ref())),
            (None, None) => self.tool_calls.last(),
        };
        let content_index = match existing {
            Some(call) => {
                let content_index = call.content_index;
                if let Some(name) = name {
                    out.name_tool_call(content_index, &name);
                }
                content_index
            }
            None => {
                let next_index = out.next_index();
                let id = id.map_or_else(|| format!("call_{next_index}"), Cow::into_owned);
                let name = name.map(Cow::into_owned).unwrap_or_default();
                let content_index = out.start_tool_call(id, name).await?;
                self.tool_calls.push(CallKey {
                    key: chunk.index,
                    content_index,
                });
                content_index
            }
        };
        if let Some(fragment) = arguments.filter(|fragment| !fragment.is_empty()) {
            out.delta(content_index, fragment).await?;
        }
        Ok(())
    }

    /// Closes every block, records usage, and maps the finish reason.
    async fn complete(mut self, model: &Model, out: &mut Assembler) -> Result<StopReason, Halt> {
        let Some(finish_reason) = self.finish_reason.take() else {
            return Err(failure(PREMATURE_END_MESSAGE));
        };
        out.close().await?;
        let has_tool_calls = !self.tool_calls.is_empty();
        out.end_tool_calls().await?;
        if let Some(usage) = self.usage.take() {
            let cached = usage
                .prompt_tokens_details
                .and_then(|details| details.cached_tokens)
                .unwrap_or(0);
            let input = usage.prompt_tokens.saturating_sub(cached);
            let mut total = Usage {
                input,
                output: usage.completion_tokens,
                cache_read: cached,
                cache_write: 0,
                total_tokens: usage
                    .total_tokens
                    .unwrap_or(input + cached + usage.completion_tokens),
                cost: Default::default(),
            };
            apply_cost(model, &mut total);
            out.set_usage(total);
        }
        match finish_reason.as_str() {
            // Some servers report "stop" even when the reply is a tool call.
            "stop" if has_tool_calls => Ok(StopReason::ToolUse),
            "stop" => Ok(StopReason::Stop),
            "length" => Ok(StopReason::Length),
            "tool_calls" | "function_call" => Ok(StopReason::ToolUse),
            other => Err(failure(format!(
                "Provider stopped with finish_reason {other}"
            ))),
        }
    }
}

fn stream_error_message(error: &Value) -> String {
    error
        .get("message")
        .and_then(Value::as_str)
        .or_else(|| error.as_str())
        .map_or_else(|| format!("Provider error: {error}"), str::to_string)
}

// ---------------------------------------------------------------------------------------------
// Request body

#[derive(Serialize)]
struct RequestBody<'a> {
    model: &'a str,
    messages: Vec<WireMessage<'a>>,
    stream: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    stream_options: Option<WireStreamOptions>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_tokens: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_completion_tokens: Option<u64>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<WireTool<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reasoning_effort: Option<String>,
    /// OpenRouter: `{"effort": …}`.
    #[serde(skip_serializing_if = "Option::is_none")]
    reasoning: Option<Value>,
    /// Qwen-style servers.
    #[serde(skip_serializing_if = "Option::is_none")]
    enable_thinking: Option<bool>,
    /// Z.ai-style servers: `{"type": "enabled" | "disabled"}`.
    #[serde(skip_serializing_if = "Option::is_none")]
    thinking: Option<Value>,
}

#[derive(Serialize)]
struct WireStreamOptions {
    include_usage: bool,
}

#[derive(Serialize)]
#[serde(tag = "role", rename_all = "lowercase")]
enum WireMessage<'a> {
    System {
        content: &'a str,
    },
    Developer {
        content: &'a str,
    },
    User {
        content: WireContent<'a>,
    },
    Assistant {
        content: Option<String>,
        #[serde(skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<WireToolCall<'a>>,
    },
    Tool {
        tool_call_id: Cow<'a, str>,
        #[serde(skip_serializing_if = "Option::is_none")]
        name: Option<&'a str>,
        content: String,
    },
}

#[derive(Serialize)]
#[serde(untagged)]
enum WireContent<'a> {
    Text(Cow<'a, str>),
    Parts(Vec<WirePart<'a>>),
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum WirePart<'a> {
    Text { text: &'a str },
    ImageUrl { image_url: WireImageUrl },
}

#[derive(Serialize)]
struct WireImageUrl {
    url: String,
}

#[derive(Serialize)]
struct WireToolCall<'a> {
    id: Cow<'a, str>,
    #[serde(rename = "type")]
    kind: &'static str,
    function: WireFunctionCall<'a>,
}

#[derive(Serialize)]
struct WireFunctionCall<'a> {
    name: &'a str,
    arguments: String,
}

#[derive(Serialize)]
struct WireTool<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    function: WireFunction<'a>,
}

#[derive(Serialize)]
struct WireFunction<'a> {
    name: &'a str,
    description: &'a str,
    parameters: &'a Value,
}

fn request_body<'a>(
    model: &'a Model,
    context: &'a LlmContext,
    replay: &'a [Cow<'a, AgentMessage>],
    options: &StreamOptions,
) -> RequestBody<'a> {
    let compat = &model.compat;
    let (max_tokens, max_completion_tokens) = match compat.max_tokens_field {
        MaxTokensField::MaxTokens => (Some(model.max_tokens), None),
        MaxTokensField::MaxCompletionTokens => (None, Some(model.max_tokens)),
    };
    let effort = model.request_effort(options.thinking);
    let thinking_on = model.reasoning && options.thinking != ThinkingLevel::Off;
    let (mut reasoning_effort, mut reasoning, mut enable_thinking, mut thinking) =
        (None, None, None, None);
    if model.reasoning && compat.supports_reasoning_effort {
        match compat.thinking_format {
            ThinkingFormat::OpenAi => reasoning_effort = effort,
            ThinkingFormat::OpenRouter => {
                reasoning = Some(match effort {
                    Some(effort) if thinking_on => serde_json::json!({"effort": effort}),
                    _ => serde_json::json!({"enabled": false}),
                });
            }
            ThinkingFormat::Qwen => enable_thinking = Some(thinking_on),
            ThinkingFormat::Zai => {
                let kind = if thinking_on { "enabled" } else { "disabled" };
                thinking = Some(serde_json::json!({"type": kind}));
            }
        }
    }
    RequestBody {
        model: &model.id,
        messages: wire_messages(model, &context.system_prompt, replay),
        stream: true,
        stream_options: compat
            .supports_usage_in_streaming
            .then_some(WireStreamOptions {
                include_usage: true,
            }),
        max_tokens,
        max_completion_tokens,
        tools: context
            .tools
            .iter()
            .map(|tool| WireTool {
                kind: "function",
                function: WireFunction {
                    name: &tool.name,
                    description: &tool.description,
                    parameters: &tool.parameters,
                },
            })
            .collect(),
        reasoning_effort,
        reasoning,
        enable_thinking,
        thinking,
    }
}

/// The chat messages: the system prompt, then the replayed conversation
/// ([`super::common::replay_messages`]: failures dropped, every tool call answered).
fn wire_messages<'a>(
    model: &Model,
    system_prompt: &'a str,
    replay: &'a [Cow<'a, AgentMessage>],
) -> Vec<WireMessage<'a>> {
    let accepts_images = model.input.contains(&InputKind::Image);
    let mut messages = Vec::with_capacity(replay.len() + 1);
    if !system_prompt.is_empty() {
        let content = system_prompt;
        messages.push(if model.compat.supports_developer_role && model.reasoning {
            WireMessage::Developer { content }
        } else {
            WireMessage::System { content }
        });
    }
    // Tool messages must directly follow their assistant message, so images returned by tools
    // wait for the end of the run of tool results and then go in one user message.
    let mut tool_images: Vec<&'a ContentBlock> = Vec::new();
    for message in replay.iter().map(Cow::as_ref) {
        if !matches!(message, AgentMessage::ToolResult(_)) && !tool_images.is_empty() {
            messages.push(tool_images_message(std::mem::take(&mut tool_images)));
        }
        if model.compat.requires_assistant_after_tool_result
            && matches!(messages.last(), Some(WireMessage::Tool { .. }))
            && !matches!(
                message,
                AgentMessage::ToolResult(_) | AgentMessage::Assistant(_)
            )
        {
            messages.push(WireMessage::Assistant {
                content: Some(TOOL_RESULTS_PROCESSED.to_string()),
                tool_calls: Vec::new(),
            });
        }
        match message {
            AgentMessage::User(user) => messages.push(WireMessage::User {
                content: user_content(&user.content, accepts_images),
            }),
            AgentMessage::Assistant(assistant) => {
                let text = assistant.text();
                let tool_calls: Vec<WireToolCall<'a>> = assistant
                    .tool_calls()
                    .map(|call| WireToolCall {
                        id: wire_tool_id(model, &call.id),
                        kind: "function",
                        function: WireFunctionCall {
                            name: &call.name,
                            arguments: call.arguments.to_string(),
                        },
                    })
                    .collect();
                // Thinking is not replayed; a message with nothing else to say (typically an
                // error or abort before any output) would be rejected by the API.
                if text.is_empty() && tool_calls.is_empty() {
                    continue;
                }
                messages.push(WireMessage::Assistant {
                    content: (!text.is_empty()).then_some(text),
                    tool_calls,
                });
            }
            AgentMessage::ToolResult(result) => {
                messages.push(WireMessage::Tool {
                    tool_call_id: wire_tool_id(model, &result.tool_call_id),
                    name: model
                        .compat
                        .requires_tool_result_name
                        .then_some(result.tool_name.as_str()),
                    content: zi_protocol::message::concat_text(&result.content),
                });
                if accepts_images {
                    tool_images.extend(
                        result
                            .content
                            .iter()
                            .filter(|block| matches!(block, ContentBlock::Image { .. })),
                    );
                }
            }
            AgentMessage::Custom(custom) => messages.push(WireMessage::User {
                content: WireContent::Text(Cow::Owned(custom.content.text())),
            }),
            AgentMessage::CompactionSummary(summary) => messages.push(WireMessage::User {
                content: WireContent::Text(Cow::Owned(compaction_summary_text(&summary.summary))),
            }),
        }
    }
    if !tool_images.is_empty() {
        messages.push(tool_images_message(tool_images));
    }
    messages
}

/// What zi says between tool results and a user message for servers that require it.
const TOOL_RESULTS_PROCESSED: &str = "I have processed the tool results.";

/// A tool call id as the server accepts it: unchanged, or for Mistral a stable 9-character
/// alphanumeric digest of it.
fn wire_tool_id<'a>(model: &Model, id: &'a str) -> Cow<'a, str> {
    if !model.compat.requires_mistral_tool_ids
        || (id.len() == 9 && id.bytes().all(|b| b.is_ascii_alphanumeric()))
    {
        return Cow::Borrowed(id);
    }
    // FNV-1a, then base 62.
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in id.bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    const ALPHABET: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
    let mut out = String::with_capacity(9);
    for _ in 0..9 {
        out.push(ALPHABET[(hash % 62) as usize] as char);
        hash /= 62;
        if hash == 0 {
            hash = 0x9e37_79b9_7f4a_7c15 ^ id.len() as u64;
        }
    }
    Cow::Owned(out)
}

fn tool_images_message(images: Vec<&ContentBlock>) -> WireMessage<'_> {
    let mut parts = vec![WirePart::Text {
        text: "Attached image(s) from tool result:",
    }];
    parts.extend(images.into_iter().filter_map(image_part));
    WireMessage::User {
        content: WireContent::Parts(parts),
    }
}

fn image_part(block: &ContentBlock) -> Option<WirePart<'_>> {
    match block {
        ContentBlock::Image { data, mime_type } => Some(WirePart::ImageUrl {
            image_url: WireImageUrl {
                url: format!("data:{mime_type};base64,{data}"),
            },
        }),
        _ => None,
    }
}

/// A plain string unless images must go along, in which case content parts in order.
fn user_content(content: &MessageContent, accepts_images: bool) -> WireContent<'_> {
    let parts = match content {
        MessageContent::Text(text) => return WireContent::Text(Cow::Borrowed(text)),
        MessageContent::Parts(parts) => parts,
    };
    let has_images = parts
        .iter()
        .any(|part| matches!(part, ContentBlock::Image { .. }));
    if accepts_images && has_images {
        let wire = parts
            .iter()
            .filter_map(|part| match part {
                ContentBlock::Text { text, .. } => Some(WirePart::Text { text }),
                image @ ContentBlock::Image { .. } => image_part(image),
                _ => None,
            })
            .collect();
        return WireContent::Parts(wire);
    }
    let mut texts = parts.iter().filter_map(|part| match part {
        ContentBlock::Text { text, .. } => Some(text.as_str()),
        _ => None,
    });
    match (texts.next(), texts.next()) {
        (None, _) if has_images => WireContent::Text(Cow::Borrowed(
            "(image omitted: this model does not accept images)",
        )),
        (None, _) => WireContent::Text(Cow::Borrowed("")),
        (Some(only), None) => WireContent::Text(Cow::Borrowed(only)),
        (Some(first), Some(second)) => {
            let mut joined = format!("{first}\n{second}");
            for text in texts {
                joined.push('\n');
                joined.push_str(text);
            }
            WireContent::Text(Cow::Owned(joined))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::test_model;
    use zi_protocol::event::AssistantMessageEvent;
    use zi_protocol::message::{AssistantMessage, ToolCall, UserMessage};

    fn body_json(model: &Model, context: &LlmContext) -> Value {
        body_with(model, context, ThinkingLevel::Off)
    }

    fn body_with(model: &Model, context: &LlmContext, thinking: ThinkingLevel) -> Value {
        let options = StreamOptions {
            api_key: None,
            thinking,
            cancel: Default::default(),
            idle_timeout: std::time::Duration::from_secs(1),
            session_id: String::new(),
        };
        let replay = replay_messages(&context.messages);
        serde_json::to_value(request_body(model, context, &replay, &options)).unwrap_or_default()
    }

    fn assistant(content: Vec<ContentBlock>, stop_reason: StopReason) -> AgentMessage {
        AgentMessage::Assistant(AssistantMessage {
            content,
            api: "openai-completions".into(),
            provider: "p".into(),
            model: "m".into(),
            usage: Usage::default(),
            stop_reason,
            error_message: None,
            response_id: None,
            timestamp: 0,
        })
    }

    #[test]
    fn compat_thinking_formats_and_max_tokens_field() {
        let context = LlmContext::default();
        let mut model = test_model();
        model.compat.max_tokens_field = MaxTokensField::MaxTokens;
        let body = body_with(&model, &context, ThinkingLevel::High);
        assert_eq!(body["reasoning_effort"], "high");
        assert_eq!(body["max_tokens"], 100);
        assert!(body.get("max_completion_tokens").is_none());
        assert!(
            body_with(&model, &context, ThinkingLevel::Off)
                .get("reasoning_effort")
                .is_none()
        );
        model
            .thinking_level_map
            .insert(ThinkingLevel::Off, Some("none".into()));
        assert_eq!(
            body_with(&model, &context, ThinkingLevel::Off)["reasoning_effort"],
            "none"
        );
        model.compat.thinking_format = ThinkingFormat::OpenRouter;
        assert_eq!(
            body_with(&model, &context, ThinkingLevel::Low)["reasoning"],
            serde_json::json!({"effort": "low"})
        );
        assert_eq!(
            body_with(&model, &context, ThinkingLevel::Off)["reasoning"],
            serde_json::json!({"enabled": false})
        );
        model.compat.thinking_format = ThinkingFormat::Qwen;
        assert_eq!(
            body_with(&model, &context, ThinkingLevel::Low)["enable_thinking"],
            true
        );
        model.compat.thinking_format = ThinkingFormat::Zai;
        assert_eq!(
            body_with(&model, &context, ThinkingLevel::Off)["thinking"],
            serde_json::json!({"type": "disabled"})
        );
        model.compat.supports_reasoning_effort = false;
        let body = body_with(&model, &context, ThinkingLevel::High);
        assert!(body.get("thinking").is_none() && body.get("reasoning_effort").is_none());
    }

    #[test]
    fn mistral_compat_maps_ids_names_tool_results_and_inserts_an_assistant() {
        let call = ToolCall {
            id: "call_abc|fc_123".into(),
            name: "read".into(),
            arguments: serde_json::json!({}),
            thought_signature: None,
        };
        let context = LlmContext {
            messages: vec![
                assistant(vec![ContentBlock::ToolCall(call)], StopReason::ToolUse),
                AgentMessage::ToolResult(zi_protocol::message::ToolResultMessage {
                    tool_call_id: "call_abc|fc_123".into(),
                    tool_name: "read".into(),
                    content: vec![ContentBlock::text("A")],
                    details: None,
                    is_error: false,
                    timestamp: 0,
                }),
                AgentMessage::User(UserMessage {
                    content: MessageContent::Text("next".into()),
                    timestamp: 0,
                }),
            ],
            ..Default::default()
        };
        let mut model = test_model();
        model.compat.requires_tool_result_name = true;
        model.compat.requires_mistral_tool_ids = true;
        model.compat.requires_assistant_after_tool_result = true;
        let messages = body_json(&model, &context)["messages"].clone();
        let id = messages[0]["tool_calls"][0]["id"]
            .as_str()
            .unwrap_or("")
            .to_string();
        assert_eq!(id.len(), 9);
        assert!(id.bytes().all(|b| b.is_ascii_alphanumeric()));
        assert_eq!(messages[1]["tool_call_id"], id.as_str());
        assert_eq!(messages[1]["name"], "read");
        assert_eq!(
            messages[2],
            serde_json::json!({"role": "assistant", "content": "I have processed the tool results."})
        );
        assert_eq!(messages[3]["role"], "user");
        // Without the flags nothing changes.
        let plain = body_json(&test_model(), &context)["messages"].clone();
        assert_eq!(plain[0]["tool_calls"][0]["id"], "call_abc|fc_123");
        assert!(plain[1].get("name").is_none());
        assert_eq!(plain[2]["role"], "user");
    }

    #[test]
    fn compat_reads_pi_models_json_names() {
        let compat: crate::model::Compat = serde_json::from_str(
            r#"{"supportsDeveloperRole":true,"supportsReasoningEffort":false,"maxTokensField":"max_tokens","thinkingFormat":"qwen"}"#,
        )
        .unwrap_or_default();
        assert!(compat.supports_developer_role && !compat.supports_reasoning_effort);
        assert_eq!(compat.max_tokens_field, MaxTokensField::MaxTokens);
        assert_eq!(compat.thinking_format, ThinkingFormat::Qwen);
    }

    #[test]
    fn images_are_parts_for_vision_models_and_dropped_otherwise() {
        let content = MessageContent::Parts(vec![
            ContentBlock::text("look"),
            ContentBlock::Image {
                data: "QUJD".into(),
                mime_type: "image/png".into(),
            },
        ]);
        let context = LlmContext {
            messages: vec![AgentMessage::User(UserMessage {
                content,
                timestamp: 0,
            })],
            ..Default::default()
        };
        let mut model = test_model();
        assert_eq!(
            body_json(&model, &context)["messages"][0],
            serde_json::json!({"role": "user", "content": "look"})
        );
        model.input.push(InputKind::Image);
        assert_eq!(
            body_json(&model, &context)["messages"][0]["content"],
            serde_json::json!([{"type": "text", "text": "look"}, {"type": "image_url", "image_url": {"url": "data:image/png;base64,QUJD"}}])
        );
    }

    #[test]
    fn assistant_replay_drops_thinking_and_empty_failures() {
        let call = ToolCall {
            id: "c1".into(),
            name: "read".into(),
            arguments: serde_json::json!({"path": "a"}),
            thought_signature: None,
        };
        let context = LlmContext {
            messages: vec![
                assistant(vec![], StopReason::Error),
                assistant(
                    vec![
                        ContentBlock::Thinking {
                            thinking: "hmm".into(),
                            thinking_signature: None,
                            redacted: None,
                        },
                        ContentBlock::ToolCall(call),
                    ],
                    StopReason::ToolUse,
                ),
            ],
            ..Default::default()
        };
        let messages = body_json(&test_model(), &context)["messages"].clone();
        assert_eq!(
            messages,
            serde_json::json!([{"role": "assistant", "content": null, "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "read", "arguments": "{\"path\":\"a\"}"}}]},
                {"role": "tool", "tool_call_id": "c1", "content": "No result provided"}])
        );
    }

    #[tokio::test]
    async fn usage_may_come_first_and_tool_calls_may_lack_an_index() {
        let model = test_model();
        let (sender, mut receiver) = tokio::sync::mpsc::channel(64);
        let mut out = Assembler::new(EventSink::new(sender, &model));
        let mut state = StreamState::default();
        let chunks = [
            r#"{"id":"r1","choices":[],"usage":{"prompt_tokens":10,"completion_tokens":2,"prompt_tokens_details":null}}"#,
            r#"{"id":"r2","choices":[{"index":0,"delta":{"tool_calls":[{"id":"a","type":"function","function":{"name":"read","arguments":"{\"p\":1}"}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"id":"b","type":"function","function":{"name":"bash","arguments":""}}]},"finish_reason":"stop"}]}"#,
        ];
        for text in chunks {
            let chunk = serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}"));
            assert!(state.apply(chunk, &mut out).await.is_ok());
        }
        let reason = state.complete(&model, &mut out).await;
        assert!(
            matches!(reason, Ok(StopReason::ToolUse)),
            "stop with tool calls is tool use"
        );
        out.finish(StopReason::ToolUse).await;
        let mut partial = crate::stream::empty_assistant(&model);
        let mut starts = 0;
        while let Some(update) = receiver.recv().await {
            let event = update.apply(&mut partial);
            starts += usize::from(matches!(
                event,
                Some(AssistantMessageEvent::ToolCallStart { .. })
            ));
        }
        assert_eq!(starts, 2);
        assert_eq!(partial.response_id.as_deref(), Some("r1"));
        assert_eq!(
            (
                partial.usage.input,
                partial.usage.output,
                partial.usage.total_tokens
            ),
            (10, 2, 12)
        );
        let calls: Vec<(&str, &Value)> = partial
            .tool_calls()
            .map(|c| (c.id.as_str(), &c.arguments))
            .collect();
        assert_eq!(
            calls,
            vec![
                ("a", &serde_json::json!({"p": 1})),
                ("b", &serde_json::json!({}))
            ]
        );
    }

    #[test]
    fn chunks_decode_llama_cpp_quirks() {
        let text = r#"{"choices":[{"finish_reason":null,"index":0,"delta":{"role":"assistant","content":null}}],"created":1,"id":"chatcmpl-x","model":"m","object":"chat.completion.chunk","timings":{"prompt_n":3}}"#;
        let chunk: Chunk<'_> = serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}"));
        assert!(matches!(
            chunk.id,
            Some(Borrowed(Cow::Borrowed("chatcmpl-x")))
        ));
        let usage = r#"{"choices":[],"usage":{"completion_tokens":5,"prompt_tokens":9,"total_tokens":14},"id":"x"}"#;
        let chunk: Chunk<'_> = serde_json::from_str(usage).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(chunk.usage.map(|u| u.completion_tokens), Some(5));
    }
}
