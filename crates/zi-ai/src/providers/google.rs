//! The `google-generative-ai` API (Gemini):
//! `POST {base}/models/{model}:streamGenerateContent?alt=sse`.
//!
//! Every SSE event is a whole `GenerateContentResponse` whose first candidate carries new parts:
//! text, thought text (`thought: true`), and function calls (sent whole). The stream has no
//! terminal event beyond a candidate's `finishReason`; a body that ends without one is a
//! premature end. Thought signatures are kept on the block they arrived with and replayed to
//! the same model.

use std::borrow::Cow;

use reqwest::header::{HeaderMap, HeaderName};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use zi_protocol::ThinkingLevel;
use zi_protocol::message::{AgentMessage, ContentBlock, MessageContent, StopReason, Usage};
use zi_protocol::state::InputKind;

use super::common::{
    Assembler, Halt, MaybeBool, MaybeStr, MaybeU64, PREMATURE_END_MESSAGE, SseHandler, SseRequest,
    TextKind, drive, failure, finish_usage, present, replay_messages, same_model, stream_sse,
    user_text_of, versioned_url,
};
use crate::model::Model;
use crate::stream::{EventSink, LlmContext, StreamOptions};

/// Signature Gemini 3 accepts for function calls it did not sign (calls from other models).
const SKIP_SIGNATURE: &str = "skip_thought_signature_validator";

/// Thinking budgets for models that take a token budget (Gemini 2.5).
pub fn thinking_budget(level: ThinkingLevel) -> Option<u64> {
    match level {
        ThinkingLevel::Off => None,
        ThinkingLevel::Minimal => Some(1_024),
        ThinkingLevel::Low => Some(2_048),
        ThinkingLevel::Medium => Some(8_192),
        ThinkingLevel::High | ThinkingLevel::Xhigh | ThinkingLevel::Max => Some(24_576),
    }
}

/// Gemini 3 models take a `thinkingLevel` instead of a budget.
fn uses_thinking_levels(model: &Model) -> bool {
    model.id.contains("gemini-3") || !model.thinking_level_map.is_empty()
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
        let auth = options
            .api_key
            .as_deref()
            .filter(|key| !key.is_empty())
            .map(|key| (HeaderName::from_static("x-goog-api-key"), key.to_string()));
        let path = format!("models/{}:streamGenerateContent?alt=sse", model.id);
        let request = SseRequest {
            url: versioned_url(&model.base_url, "v1beta", &path),
            auth,
            headers: HeaderMap::new(),
            body: &body,
        };
        let mut state = StreamState::default();
        stream_sse(model, request, options, out, &mut state).await?;
        state.complete(model, out).await
    })
    .await;
}

// ---------------------------------------------------------------------------------------------
// Response chunks

/// One SSE event: a whole `GenerateContentResponse`.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Chunk<'a> {
    #[serde(default)]
    error: Option<Value>,
    #[serde(borrow, default)]
    response_id: MaybeStr<'a>,
    #[serde(default)]
    usage_metadata: Option<UsageMetadata>,
    #[serde(borrow, default)]
    candidates: Option<Vec<Candidate<'a>>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct UsageMetadata {
    #[serde(default)]
    prompt_token_count: MaybeU64,
    #[serde(default)]
    cached_content_token_count: MaybeU64,
    #[serde(default)]
    candidates_token_count: MaybeU64,
    #[serde(default)]
    thoughts_token_count: MaybeU64,
    #[serde(default)]
    total_token_count: MaybeU64,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Candidate<'a> {
    #[serde(borrow, default)]
    content: Option<CandidateContent<'a>>,
    #[serde(borrow, default)]
    finish_reason: MaybeStr<'a>,
}

#[derive(Deserialize)]
struct CandidateContent<'a> {
    #[serde(borrow, default)]
    parts: Option<Vec<ResponsePart<'a>>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ResponsePart<'a> {
    #[serde(borrow, default)]
    text: MaybeStr<'a>,
    #[serde(default)]
    thought: MaybeBool,
    #[serde(borrow, default)]
    thought_signature: MaybeStr<'a>,
    #[serde(borrow, default)]
    function_call: Option<ResponseFunctionCall<'a>>,
}

#[derive(Deserialize)]
struct ResponseFunctionCall<'a> {
    #[serde(borrow, default)]
    id: MaybeStr<'a>,
    #[serde(borrow, default)]
    name: MaybeStr<'a>,
    #[serde(default, deserialize_with = "present")]
    args: Option<Value>,
}

#[derive(Default)]
struct StreamState {
    finish_reason: Option<String>,
    usage: Option<Usage>,
}

fn error_text(error: &Value) -> String {
    let message = error
        .get("message")
        .and_then(Value::as_str)
        .unwrap_or("Provider error");
    match error.get("code").and_then(Value::as_u64) {
        Some(code) => format!("{code} {message}"),
        None => message.to_string(),
    }
}

impl SseHandler for StreamState {
    async fn on_data(&mut self, data: &str, out: &mut Assembler) -> Result<bool, Halt> {
        let chunk: Chunk<'_> = match serde_json::from_str(data) {
            Ok(chunk) => chunk,
            Err(error) => {
                tracing::debug!("ignoring an undecodable gemini chunk: {error}");
                return Ok(false);
            }
        };
        if let Some(error) = chunk.error.filter(|e| !e.is_null()) {
            return Err(failure(error_text(&error)));
        }
        if !out.has_response_id()
            && let Some(id) = chunk.response_id.into_owned()
        {
            out.set_response_id(id);
        }
        if let Some(usage) = chunk.usage_metadata {
            let cached = usage.cached_content_token_count.or_zero();
            self.usage = Some(Usage {
                input: usage.prompt_token_count.or_zero().saturating_sub(cached),
                output: usage.candidates_token_count.or_zero()
                    + usage.thoughts_token_count.or_zero(),
                cache_read: cached,
                cache_write: 0,
                total_tokens: usage.total_token_count.or_zero(),
                cost: Default::default(),
            });
        }
        let Some(candidate) = chunk.candidates.and_then(|c| c.into_iter().next()) else {
            return Ok(false);
        };
        let parts = candidate.content.and_then(|content| content.parts);
        for part in parts.into_iter().flatten() {
            part_update(part, out).await?;
        }
        if let Some(reason) = candidate.finish_reason.into_owned() {
            self.finish_reason = Some(reason);
        }
        Ok(false)
    }
}

/// One part: a whole function call, or text or thought text extending the open block.
async fn part_update(part: ResponsePart<'_>, out: &mut Assembler) -> Result<(), Halt> {
    let signature = part.thought_signature.into_owned();
    if let Some(call) = part.function_call {
        let name = call.name.or_empty();
        let number = out.tool_call_count() + 1;
        let id = call
            .id
            .into_owned()
            .unwrap_or_else(|| format!("{name}_{number}"));
        let arguments = call.args.unwrap_or_else(|| json!({}));
        let content_index = out.start_tool_call(id, name).await?;
        out.delta(content_index, arguments.to_string()).await?;
        return out.end_tool_call(content_index, arguments, signature).await;
    }
    let Some(text) = part.text.0 else {
        return Ok(());
    };
    let kind = if part.thought.0 == Some(true) {
        TextKind::Thinking
    } else {
        TextKind::Text
    };
    let content_index = out.extend(kind, text.into_owned()).await?;
    if let Some(signature) = signature {
        out.set_signature(content_index, signature);
    }
    Ok(())
}

impl StreamState {
    async fn complete(&mut self, model: &Model, out: &mut Assembler) -> Result<StopReason, Halt> {
        let Some(reason) = self.finish_reason.take() else {
            return Err(failure(PREMATURE_END_MESSAGE));
        };
        out.close().await?;
        if let Some(usage) = self.usage.take() {
            out.set_usage(finish_usage(model, usage));
        }
        match reason.as_str() {
            "STOP" if out.tool_call_count() > 0 => Ok(StopReason::ToolUse),
            "STOP" => Ok(StopReason::Stop),
            "MAX_TOKENS" => Ok(StopReason::Length),
            other => Err(failure(format!(
                "Provider stopped with finishReason {other}"
            ))),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Request body

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct RequestBody<'a> {
    contents: Vec<WireContent<'a>>,
    generation_config: GenerationConfig,
    #[serde(skip_serializing_if = "Option::is_none")]
    system_instruction: Option<SystemInstruction<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<WireTools<'a>>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct GenerationConfig {
    max_output_tokens: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    thinking_config: Option<ThinkingConfig>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ThinkingConfig {
    #[serde(skip_serializing_if = "Option::is_none")]
    include_thoughts: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    thinking_level: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    thinking_budget: Option<u64>,
}

#[derive(Serialize)]
struct SystemInstruction<'a> {
    parts: [TextPart<'a>; 1],
}

#[derive(Serialize)]
struct TextPart<'a> {
    text: &'a str,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct WireTools<'a> {
    function_declarations: Vec<FunctionDeclaration<'a>>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct FunctionDeclaration<'a> {
    name: &'a str,
    description: &'a str,
    parameters_json_schema: &'a Value,
}

#[derive(Serialize)]
struct WireContent<'a> {
    role: &'static str,
    parts: Vec<WirePart<'a>>,
}

#[derive(Serialize)]
#[serde(untagged)]
enum WirePart<'a> {
    Text {
        text: Cow<'a, str>,
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        thought: bool,
        #[serde(rename = "thoughtSignature", skip_serializing_if = "Option::is_none")]
        thought_signature: Option<&'a str>,
    },
    InlineData {
        #[serde(rename = "inlineData")]
        inline_data: InlineData<'a>,
    },
    FunctionCall {
        #[serde(rename = "functionCall")]
        function_call: WireFunctionCall<'a>,
        #[serde(rename = "thoughtSignature", skip_serializing_if = "Option::is_none")]
        thought_signature: Option<&'a str>,
    },
    FunctionResponse {
        #[serde(rename = "functionResponse")]
        function_response: FunctionResponse<'a>,
    },
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct InlineData<'a> {
    mime_type: &'a str,
    data: &'a str,
}

#[derive(Serialize)]
struct WireFunctionCall<'a> {
    name: &'a str,
    args: &'a Value,
}

#[derive(Serialize)]
struct FunctionResponse<'a> {
    name: &'a str,
    response: FunctionResult,
}

/// `{"output": text}` or, for a failed tool, `{"error": text}`.
#[derive(Serialize)]
#[serde(rename_all = "lowercase")]
enum FunctionResult {
    Output(String),
    Error(String),
}

impl<'a> WirePart<'a> {
    fn text(text: impl Into<Cow<'a, str>>) -> Self {
        WirePart::Text {
            text: text.into(),
            thought: false,
            thought_signature: None,
        }
    }

    fn image(data: &'a str, mime_type: &'a str) -> Self {
        WirePart::InlineData {
            inline_data: InlineData { mime_type, data },
        }
    }
}

fn thinking_config(model: &Model, level: ThinkingLevel) -> Option<ThinkingConfig> {
    if !model.reasoning {
        return None;
    }
    if uses_thinking_levels(model) {
        if level == ThinkingLevel::Off {
            return None;
        }
        let effort = model.effort_for(level)?;
        return Some(ThinkingConfig {
            include_thoughts: Some(true),
            thinking_level: Some(effort.to_ascii_uppercase()),
            thinking_budget: None,
        });
    }
    match thinking_budget(level) {
        Some(budget) => Some(ThinkingConfig {
            include_thoughts: Some(true),
            thinking_level: None,
            thinking_budget: Some(budget),
        }),
        // Pro models cannot turn thinking off; the others take a zero budget.
        None if model.id.contains("pro") => None,
        None => Some(ThinkingConfig {
            include_thoughts: None,
            thinking_level: None,
            thinking_budget: Some(0),
        }),
    }
}

fn request_body<'a>(
    model: &Model,
    context: &'a LlmContext,
    replay: &'a [Cow<'a, AgentMessage>],
    options: &StreamOptions,
) -> RequestBody<'a> {
    let tools = if context.tools.is_empty() {
        Vec::new()
    } else {
        vec![WireTools {
            function_declarations: context
                .tools
                .iter()
                .map(|tool| FunctionDeclaration {
                    name: &tool.name,
                    description: &tool.description,
                    parameters_json_schema: &tool.parameters,
                })
                .collect(),
        }]
    };
    RequestBody {
        contents: contents(model, replay),
        generation_config: GenerationConfig {
            max_output_tokens: model.max_tokens,
            thinking_config: thinking_config(model, options.thinking),
        },
        system_instruction: (!context.system_prompt.is_empty()).then(|| SystemInstruction {
            parts: [TextPart {
                text: &context.system_prompt,
            }],
        }),
        tools,
    }
}

fn user_parts<'a>(content: &'a MessageContent, accepts_images: bool) -> Vec<WirePart<'a>> {
    let part = |block: &'a ContentBlock| match block {
        ContentBlock::Text { text, .. } => Some(WirePart::text(text.as_str())),
        ContentBlock::Image { data, mime_type } if accepts_images => {
            Some(WirePart::image(data, mime_type))
        }
        ContentBlock::Image { .. } => Some(WirePart::text(
            "(image omitted: this model does not accept images)",
        )),
        _ => None,
    };
    match content {
        MessageContent::Text(text) => vec![WirePart::text(text.as_str())],
        MessageContent::Parts(parts) => parts.iter().filter_map(part).collect(),
    }
}

/// The conversation ([`replay_messages`]: failures dropped, every tool call answered).
fn contents<'a>(model: &Model, replay: &'a [Cow<'a, AgentMessage>]) -> Vec<WireContent<'a>> {
    let accepts_images = model.input.contains(&InputKind::Image);
    let gemini_3 = uses_thinking_levels(model);
    let mut out: Vec<WireContent<'a>> = Vec::new();
    // Function responses of one turn go together in one user content.
    let mut responses: Vec<WirePart<'a>> = Vec::new();
    let flush = |out: &mut Vec<WireContent<'a>>, responses: &mut Vec<WirePart<'a>>| {
        if !responses.is_empty() {
            out.push(WireContent {
                role: "user",
                parts: std::mem::take(responses),
            });
        }
    };
    for message in replay.iter().map(Cow::as_ref) {
        match message {
            AgentMessage::ToolResult(result) => {
                responses.push(function_response(
                    &result.tool_name,
                    zi_protocol::message::concat_text(&result.content),
                    result.is_error,
                ));
                if accepts_images {
                    for block in &result.content {
                        if let ContentBlock::Image { data, mime_type } = block {
                            responses.push(WirePart::image(data, mime_type));
                        }
                    }
                }
            }
            AgentMessage::User(user) => {
                flush(&mut out, &mut responses);
                let parts = user_parts(&user.content, accepts_images);
                if !parts.is_empty() {
                    out.push(WireContent {
                        role: "user",
                        parts,
                    });
                }
            }
            AgentMessage::Assistant(assistant) => {
                flush(&mut out, &mut responses);
                let same = same_model(model, assistant);
                let parts: Vec<WirePart<'a>> = assistant
                    .content
                    .iter()
                    .filter_map(|block| match block {
                        ContentBlock::Thinking {
                            thinking,
                            thinking_signature,
                            redacted,
                        } if same && redacted != &Some(true) && !thinking.is_empty() => {
                            Some(WirePart::Text {
                                text: Cow::Borrowed(thinking),
                                thought: true,
                                thought_signature: thinking_signature.as_deref(),
                            })
                        }
                        ContentBlock::Text {
                            text,
                            text_signature,
                        } if !text.is_empty() => Some(WirePart::Text {
                            text: Cow::Borrowed(text),
                            thought: false,
                            thought_signature: text_signature.as_deref().filter(|_| same),
                        }),
                        ContentBlock::ToolCall(call) => Some(WirePart::FunctionCall {
                            function_call: WireFunctionCall {
                                name: &call.name,
                                args: &call.arguments,
                            },
                            thought_signature: call
                                .thought_signature
                                .as_deref()
                                .filter(|_| same)
                                .or_else(|| gemini_3.then_some(SKIP_SIGNATURE)),
                        }),
                        _ => None,
                    })
                    .collect();
                if !parts.is_empty() {
                    out.push(WireContent {
                        role: "model",
                        parts,
                    });
                }
            }
            other => {
                flush(&mut out, &mut responses);
                if let Some(text) = user_text_of(other) {
                    out.push(WireContent {
                        role: "user",
                        parts: vec![WirePart::text(text)],
                    });
                }
            }
        }
    }
    flush(&mut out, &mut responses);
    out
}

fn function_response(name: &str, text: String, is_error: bool) -> WirePart<'_> {
    WirePart::FunctionResponse {
        function_response: FunctionResponse {
            name,
            response: if is_error {
                FunctionResult::Error(text)
            } else {
                FunctionResult::Output(text)
            },
        },
    }
}
