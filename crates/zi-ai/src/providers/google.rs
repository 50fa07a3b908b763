//! The `google-generative-ai` API (Gemini):
//! `POST {base}/models/{model}:streamGenerateContent?alt=sse`.
//!
//! Every SSE event is a whole `GenerateContentResponse` whose first candidate carries new parts:
//! text, thought text (`thought: true`), and function calls (sent whole). The stream has no
//! terminal event beyond a candidate's `finishReason`; a body that ends without one is a
//! premature end. Thought signatures are kept on the block they arrived with and replayed to
//! the same model.

use reqwest::header::{HeaderMap, HeaderName};
use serde_json::{Value, json};
use zi_protocol::ThinkingLevel;
use zi_protocol::event::AssistantMessageEvent;
use zi_protocol::message::{
    AgentMessage, ContentBlock, MessageContent, StopReason, ToolCall, Usage,
};
use zi_protocol::state::InputKind;

use super::common::{
    Halt, PREMATURE_END_MESSAGE, SseHandler, SseRequest, drive, emit, failure, finish_usage,
    replay_messages, same_model, stream_sse, user_text_of, versioned_url,
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

pub async fn stream(model: &Model, context: &LlmContext, options: &StreamOptions, sink: EventSink) {
    drive(sink, async |sink: &mut EventSink| {
        let body = request_body(model, context, options);
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
        stream_sse(model, request, options, sink, &mut state).await?;
        state.complete(model, sink).await
    })
    .await;
}

// ---------------------------------------------------------------------------------------------
// Response chunks

#[derive(Clone, Copy, PartialEq, Eq)]
enum Open {
    Text,
    Thinking,
}

#[derive(Default)]
struct StreamState {
    open: Option<(Open, usize)>,
    finish_reason: Option<String>,
    usage: Option<Usage>,
    calls: usize,
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
    async fn on_data(&mut self, data: &str, sink: &mut EventSink) -> Result<bool, Halt> {
        let chunk: Value = match serde_json::from_str(data) {
            Ok(chunk) => chunk,
            Err(error) => {
                tracing::debug!("ignoring an undecodable gemini chunk: {error}");
                return Ok(false);
            }
        };
        if let Some(error) = chunk.get("error").filter(|e| !e.is_null()) {
            return Err(failure(error_text(error)));
        }
        if sink.partial.response_id.is_none()
            && let Some(id) = chunk.get("responseId").and_then(Value::as_str)
        {
            sink.partial.response_id = Some(id.to_string());
        }
        if let Some(usage) = chunk.get("usageMetadata").filter(|u| u.is_object()) {
            let number = |key: &str| usage.get(key).and_then(Value::as_u64).unwrap_or(0);
            let cached = number("cachedContentTokenCount");
            self.usage = Some(Usage {
                input: number("promptTokenCount").saturating_sub(cached),
                output: number("candidatesTokenCount") + number("thoughtsTokenCount"),
                cache_read: cached,
                cache_write: 0,
                total_tokens: number("totalTokenCount"),
                cost: Default::default(),
            });
        }
        let Some(candidate) = chunk.pointer("/candidates/0") else {
            return Ok(false);
        };
        if let Some(parts) = candidate
            .pointer("/content/parts")
            .and_then(Value::as_array)
        {
            for part in parts {
                self.part(part, sink).await?;
            }
        }
        if let Some(reason) = candidate.get("finishReason").and_then(Value::as_str) {
            self.finish_reason = Some(reason.to_string());
        }
        Ok(false)
    }
}

impl StreamState {
    async fn part(&mut self, part: &Value, sink: &mut EventSink) -> Result<(), Halt> {
        let signature = part
            .get("thoughtSignature")
            .and_then(Value::as_str)
            .map(str::to_string);
        if let Some(call) = part.get("functionCall") {
            self.close(sink).await?;
            let content_index = sink.partial.content.len();
            let name = call
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            self.calls += 1;
            let id = call
                .get("id")
                .and_then(Value::as_str)
                .map_or_else(|| format!("{name}_{}", self.calls), str::to_string);
            let arguments = call.get("args").cloned().unwrap_or_else(|| json!({}));
            emit(
                sink,
                AssistantMessageEvent::ToolCallStart {
                    content_index,
                    id: id.clone(),
                    name: name.clone(),
                },
            )
            .await?;
            emit(
                sink,
                AssistantMessageEvent::ToolCallDelta {
                    content_index,
                    delta: arguments.to_string(),
                },
            )
            .await?;
            return emit(
                sink,
                AssistantMessageEvent::ToolCallEnd {
                    content_index,
                    tool_call: ToolCall {
                        id,
                        name,
                        arguments,
                        thought_signature: signature,
                    },
                },
            )
            .await;
        }
        let Some(text) = part.get("text").and_then(Value::as_str) else {
            return Ok(());
        };
        let kind = if part.get("thought").and_then(Value::as_bool) == Some(true) {
            Open::Thinking
        } else {
            Open::Text
        };
        let content_index = match self.open {
            Some((open, index)) if open == kind => index,
            _ => {
                self.close(sink).await?;
                let index = sink.partial.content.len();
                self.open = Some((kind, index));
                let start = match kind {
                    Open::Text => AssistantMessageEvent::TextStart {
                        content_index: index,
                    },
                    Open::Thinking => AssistantMessageEvent::ThinkingStart {
                        content_index: index,
                    },
                };
                emit(sink, start).await?;
                index
            }
        };
        if !text.is_empty() {
            let delta = text.to_string();
            let event = match kind {
                Open::Text => AssistantMessageEvent::TextDelta {
                    content_index,
                    delta,
                },
                Open::Thinking => AssistantMessageEvent::ThinkingDelta {
                    content_index,
                    delta,
                },
            };
            emit(sink, event).await?;
        }
        if let Some(signature) = signature {
            match sink.partial.content.get_mut(content_index) {
                Some(ContentBlock::Thinking {
                    thinking_signature, ..
                }) => *thinking_signature = Some(signature),
                Some(ContentBlock::Text { text_signature, .. }) => {
                    *text_signature = Some(signature);
                }
                _ => {}
            }
        }
        Ok(())
    }

    async fn close(&mut self, sink: &mut EventSink) -> Result<(), Halt> {
        let Some((kind, content_index)) = self.open.take() else {
            return Ok(());
        };
        let event = match (kind, sink.partial.content.get(content_index)) {
            (Open::Text, Some(ContentBlock::Text { text, .. })) => AssistantMessageEvent::TextEnd {
                content_index,
                content: text.clone(),
            },
            (Open::Thinking, Some(ContentBlock::Thinking { thinking, .. })) => {
                AssistantMessageEvent::ThinkingEnd {
                    content_index,
                    content: thinking.clone(),
                }
            }
            _ => return Ok(()),
        };
        emit(sink, event).await
    }

    async fn complete(&mut self, model: &Model, sink: &mut EventSink) -> Result<StopReason, Halt> {
        let Some(reason) = self.finish_reason.take() else {
            return Err(failure(PREMATURE_END_MESSAGE));
        };
        self.close(sink).await?;
        if let Some(usage) = self.usage.take() {
            sink.partial.usage = finish_usage(model, usage);
        }
        match reason.as_str() {
            "STOP" if self.calls > 0 => Ok(StopReason::ToolUse),
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

fn thinking_config(model: &Model, level: ThinkingLevel) -> Option<Value> {
    if !model.reasoning {
        return None;
    }
    if uses_thinking_levels(model) {
        if level == ThinkingLevel::Off {
            return None;
        }
        let effort = model.effort_for(level)?;
        return Some(
            json!({"includeThoughts": true, "thinkingLevel": effort.to_ascii_uppercase()}),
        );
    }
    match thinking_budget(level) {
        Some(budget) => Some(json!({"includeThoughts": true, "thinkingBudget": budget})),
        // Pro models cannot turn thinking off; the others take a zero budget.
        None if model.id.contains("pro") => None,
        None => Some(json!({"thinkingBudget": 0})),
    }
}

pub(crate) fn request_body(model: &Model, context: &LlmContext, options: &StreamOptions) -> Value {
    let mut generation = json!({"maxOutputTokens": model.max_tokens});
    if let Some(config) = thinking_config(model, options.thinking) {
        generation["thinkingConfig"] = config;
    }
    let mut body = json!({
        "contents": contents(model, context),
        "generationConfig": generation,
    });
    if !context.system_prompt.is_empty() {
        body["systemInstruction"] = json!({"parts": [{"text": context.system_prompt}]});
    }
    if !context.tools.is_empty() {
        let declarations: Vec<Value> = context
            .tools
            .iter()
            .map(|tool| {
                json!({"name": tool.name, "description": tool.description,
                       "parametersJsonSchema": tool.parameters})
            })
            .collect();
        body["tools"] = json!([{"functionDeclarations": declarations}]);
    }
    body
}

fn user_parts(content: &MessageContent, accepts_images: bool) -> Vec<Value> {
    let part = |block: &ContentBlock| match block {
        ContentBlock::Text { text, .. } => Some(json!({"text": text})),
        ContentBlock::Image { data, mime_type } if accepts_images => {
            Some(json!({"inlineData": {"mimeType": mime_type, "data": data}}))
        }
        ContentBlock::Image { .. } => {
            Some(json!({"text": "(image omitted: this model does not accept images)"}))
        }
        _ => None,
    };
    match content {
        MessageContent::Text(text) => vec![json!({"text": text})],
        MessageContent::Parts(parts) => parts.iter().filter_map(part).collect(),
    }
}

fn contents(model: &Model, context: &LlmContext) -> Vec<Value> {
    let accepts_images = model.input.contains(&InputKind::Image);
    let gemini_3 = uses_thinking_levels(model);
    let mut out: Vec<Value> = Vec::new();
    // Function responses of one turn go together in one user content.
    let mut responses: Vec<Value> = Vec::new();
    let flush = |out: &mut Vec<Value>, responses: &mut Vec<Value>| {
        if !responses.is_empty() {
            out.push(json!({"role": "user", "parts": std::mem::take(responses)}));
        }
    };
    for message in replay_messages(&context.messages) {
        match message.as_ref() {
            AgentMessage::ToolResult(result) => {
                let text = zi_protocol::message::concat_text(&result.content);
                let key = if result.is_error { "error" } else { "output" };
                responses.push(json!({"functionResponse": {"name": result.tool_name,
                    "response": {key: text}}}));
                if accepts_images {
                    for block in &result.content {
                        if let ContentBlock::Image { data, mime_type } = block {
                            responses
                                .push(json!({"inlineData": {"mimeType": mime_type, "data": data}}));
                        }
                    }
                }
            }
            AgentMessage::User(user) => {
                flush(&mut out, &mut responses);
                let parts = user_parts(&user.content, accepts_images);
                if !parts.is_empty() {
                    out.push(json!({"role": "user", "parts": parts}));
                }
            }
            AgentMessage::Assistant(assistant) => {
                flush(&mut out, &mut responses);
                let same = same_model(model, assistant);
                let parts: Vec<Value> = assistant
                    .content
                    .iter()
                    .filter_map(|block| match block {
                        ContentBlock::Thinking {
                            thinking,
                            thinking_signature,
                            redacted,
                        } if same && redacted != &Some(true) && !thinking.is_empty() => {
                            let mut part = json!({"text": thinking, "thought": true});
                            if let Some(signature) = thinking_signature {
                                part["thoughtSignature"] = json!(signature);
                            }
                            Some(part)
                        }
                        ContentBlock::Text {
                            text,
                            text_signature,
                        } if !text.is_empty() => {
                            let mut part = json!({"text": text});
                            if let Some(signature) = text_signature.as_ref().filter(|_| same) {
                                part["thoughtSignature"] = json!(signature);
                            }
                            Some(part)
                        }
                        ContentBlock::ToolCall(call) => {
                            let mut part = json!({"functionCall": {"name": call.name,
                                "args": call.arguments}});
                            let signature = call
                                .thought_signature
                                .clone()
                                .filter(|_| same)
                                .or_else(|| gemini_3.then(|| SKIP_SIGNATURE.to_string()));
                            if let Some(signature) = signature {
                                part["thoughtSignature"] = json!(signature);
                            }
                            Some(part)
                        }
                        _ => None,
                    })
                    .collect();
                if !parts.is_empty() {
                    out.push(json!({"role": "model", "parts": parts}));
                }
            }
            other => {
                flush(&mut out, &mut responses);
                if let Some(text) = user_text_of(other) {
                    out.push(json!({"role": "user", "parts": [{"text": text}]}));
                }
            }
        }
    }
    flush(&mut out, &mut responses);
    out
}
