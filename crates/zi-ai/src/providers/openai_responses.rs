//! The `openai-responses` API: `POST {base}/responses` with `stream: true` and `store: false`.
//!
//! The stream is a sequence of typed events (`response.created`, `response.output_item.added`,
//! `response.output_text.delta`, `response.reasoning_summary_text.delta`,
//! `response.function_call_arguments.delta`, `response.output_item.done`, …) ending with
//! `response.completed`, `response.incomplete` or `response.failed`. Reasoning items are kept
//! whole (with their encrypted content) in the thinking block's signature, so they can be
//! replayed to the same model; a tool call's id is `call_id|item_id`, which keeps both.

use std::collections::BTreeMap;

use reqwest::header::{AUTHORIZATION, HeaderMap};
use serde_json::{Value, json};
use zi_protocol::ThinkingLevel;
use zi_protocol::event::AssistantMessageEvent;
use zi_protocol::message::{
    AgentMessage, ContentBlock, MessageContent, StopReason, ToolCall, Usage,
};
use zi_protocol::state::InputKind;

use super::common::{
    Halt, PREMATURE_END_MESSAGE, SseHandler, SseRequest, drive, emit, failure, finish_usage,
    parse_arguments, replay_messages, same_model, stream_sse, user_text_of, versioned_url,
};
use crate::model::Model;
use crate::stream::{EventSink, LlmContext, StreamOptions};

pub async fn stream(model: &Model, context: &LlmContext, options: &StreamOptions, sink: EventSink) {
    drive(sink, async |sink: &mut EventSink| {
        let body = request_body(model, context, options);
        let auth = options
            .api_key
            .as_deref()
            .filter(|key| !key.is_empty())
            .map(|key| (AUTHORIZATION, format!("Bearer {key}")));
        let request = SseRequest {
            url: versioned_url(&model.base_url, "v1", "responses"),
            auth,
            headers: HeaderMap::new(),
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

enum Item {
    Reasoning,
    Message,
    Call {
        id: String,
        name: String,
        arguments: String,
    },
}

#[derive(Default)]
struct StreamState {
    /// `output_index` → (content index, item).
    items: BTreeMap<u64, (usize, Item)>,
    usage: Option<Usage>,
    status: Option<String>,
    incomplete_reason: Option<String>,
    has_calls: bool,
}

fn text(value: &Value, key: &str) -> String {
    value
        .get(key)
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string()
}

/// `code: message` unless the message already names the code.
fn error_text(error: &Value) -> String {
    let message = text(error, "message");
    let code = text(error, "code");
    match (code.is_empty(), message.is_empty()) {
        (true, true) => format!("Provider error: {error}"),
        (true, false) => message,
        (false, true) => code,
        (false, false) if message.contains(&code) => message,
        (false, false) => format!("{code}: {message}"),
    }
}

impl SseHandler for StreamState {
    async fn on_data(&mut self, data: &str, sink: &mut EventSink) -> Result<bool, Halt> {
        let event: Value = match serde_json::from_str(data) {
            Ok(event) => event,
            Err(error) => {
                tracing::debug!("ignoring an undecodable responses event: {error}");
                return Ok(false);
            }
        };
        let output_index = event.get("output_index").and_then(Value::as_u64);
        match event.get("type").and_then(Value::as_str).unwrap_or("") {
            "response.created" | "response.in_progress" => {
                if let Some(id) = event.pointer("/response/id").and_then(Value::as_str) {
                    sink.partial.response_id = Some(id.to_string());
                }
            }
            "response.output_item.added" => {
                if let Some(index) = output_index {
                    self.item_added(index, &event["item"], sink).await?;
                }
            }
            "response.reasoning_summary_part.added" => {
                // Summary parts are paragraphs of one thinking block.
                let first = event.get("summary_index").and_then(Value::as_u64) == Some(0);
                if !first {
                    self.delta(output_index, "\n\n".to_string(), sink).await?;
                }
            }
            "response.reasoning_summary_text.delta"
            | "response.reasoning_text.delta"
            | "response.output_text.delta"
            | "response.refusal.delta"
            | "response.function_call_arguments.delta" => {
                self.delta(output_index, text(&event, "delta"), sink)
                    .await?;
            }
            "response.output_item.done" => {
                if let Some(index) = output_index {
                    self.item_done(index, &event["item"], sink).await?;
                }
            }
            "response.completed" | "response.incomplete" => {
                self.finish_response(&event["response"]);
                return Ok(true);
            }
            "response.failed" => {
                let response = &event["response"];
                let error = response.get("error").filter(|e| !e.is_null());
                return Err(failure(error.map_or_else(
                    || "The provider reported the response as failed".to_string(),
                    error_text,
                )));
            }
            "error" => return Err(failure(error_text(&event))),
            _ => {}
        }
        Ok(false)
    }
}

impl StreamState {
    async fn item_added(
        &mut self,
        index: u64,
        item: &Value,
        sink: &mut EventSink,
    ) -> Result<(), Halt> {
        let content_index = sink.partial.content.len();
        let kind = match item.get("type").and_then(Value::as_str) {
            Some("reasoning") => {
                emit(sink, AssistantMessageEvent::ThinkingStart { content_index }).await?;
                Item::Reasoning
            }
            Some("message") => {
                emit(sink, AssistantMessageEvent::TextStart { content_index }).await?;
                Item::Message
            }
            Some("function_call") => {
                let id = format!("{}|{}", text(item, "call_id"), text(item, "id"));
                let name = text(item, "name");
                self.has_calls = true;
                emit(
                    sink,
                    AssistantMessageEvent::ToolCallStart {
                        content_index,
                        id: id.clone(),
                        name: name.clone(),
                    },
                )
                .await?;
                Item::Call {
                    id,
                    name,
                    arguments: String::new(),
                }
            }
            _ => return Ok(()),
        };
        self.items.insert(index, (content_index, kind));
        Ok(())
    }

    async fn delta(
        &mut self,
        index: Option<u64>,
        delta: String,
        sink: &mut EventSink,
    ) -> Result<(), Halt> {
        let Some((content_index, item)) = index.and_then(|i| self.items.get_mut(&i)) else {
            return Ok(());
        };
        if delta.is_empty() {
            return Ok(());
        }
        let content_index = *content_index;
        let event = match item {
            Item::Reasoning => AssistantMessageEvent::ThinkingDelta {
                content_index,
                delta,
            },
            Item::Message => AssistantMessageEvent::TextDelta {
                content_index,
                delta,
            },
            Item::Call { arguments, .. } => {
                arguments.push_str(&delta);
                AssistantMessageEvent::ToolCallDelta {
                    content_index,
                    delta,
                }
            }
        };
        emit(sink, event).await
    }

    async fn item_done(
        &mut self,
        index: u64,
        item: &Value,
        sink: &mut EventSink,
    ) -> Result<(), Halt> {
        let Some((content_index, kind)) = self.items.remove(&index) else {
            return Ok(());
        };
        let event = match kind {
            Item::Reasoning => {
                let Some(ContentBlock::Thinking {
                    thinking,
                    thinking_signature,
                    ..
                }) = sink.partial.content.get_mut(content_index)
                else {
                    return Ok(());
                };
                *thinking_signature = Some(item.to_string());
                AssistantMessageEvent::ThinkingEnd {
                    content_index,
                    content: thinking.clone(),
                }
            }
            Item::Message => {
                let Some(ContentBlock::Text {
                    text: current,
                    text_signature,
                }) = sink.partial.content.get_mut(content_index)
                else {
                    return Ok(());
                };
                let id = text(item, "id");
                if !id.is_empty() {
                    *text_signature = Some(id);
                }
                AssistantMessageEvent::TextEnd {
                    content_index,
                    content: current.clone(),
                }
            }
            Item::Call {
                id,
                name,
                arguments,
            } => {
                let final_arguments = item
                    .get("arguments")
                    .and_then(Value::as_str)
                    .unwrap_or(&arguments);
                AssistantMessageEvent::ToolCallEnd {
                    content_index,
                    tool_call: ToolCall {
                        id,
                        name,
                        arguments: parse_arguments(final_arguments),
                        thought_signature: None,
                    },
                }
            }
        };
        emit(sink, event).await
    }

    fn finish_response(&mut self, response: &Value) {
        self.status = response
            .get("status")
            .and_then(Value::as_str)
            .map(str::to_string);
        self.incomplete_reason = response
            .pointer("/incomplete_details/reason")
            .and_then(Value::as_str)
            .map(str::to_string);
        if let Some(usage) = response.get("usage").filter(|u| u.is_object()) {
            let number =
                |pointer: &str| usage.pointer(pointer).and_then(Value::as_u64).unwrap_or(0);
            let cached = number("/input_tokens_details/cached_tokens");
            self.usage = Some(Usage {
                input: number("/input_tokens").saturating_sub(cached),
                output: number("/output_tokens"),
                cache_read: cached,
                cache_write: 0,
                total_tokens: number("/total_tokens"),
                cost: Default::default(),
            });
        }
    }

    fn complete(&mut self, model: &Model, sink: &mut EventSink) -> Result<StopReason, Halt> {
        if let Some(usage) = self.usage.take() {
            sink.partial.usage = finish_usage(model, usage);
        }
        match (self.status.as_deref(), self.incomplete_reason.as_deref()) {
            (Some("incomplete"), Some("max_output_tokens")) => Ok(StopReason::Length),
            (Some("incomplete"), reason) => Err(failure(format!(
                "The response is incomplete ({})",
                reason.unwrap_or("no reason given")
            ))),
            _ if self.has_calls => Ok(StopReason::ToolUse),
            _ => Ok(StopReason::Stop),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Request body

/// `call_id|item_id` → (`call_id`, `item_id`); ids from other APIs have no item id.
fn split_id(id: &str) -> (&str, Option<&str>) {
    match id.split_once('|') {
        Some((call, item)) if item.starts_with("fc") => (call, Some(item)),
        _ => (id, None),
    }
}

pub(crate) fn request_body(model: &Model, context: &LlmContext, options: &StreamOptions) -> Value {
    let mut body = json!({
        "model": model.id,
        "input": input_items(model, context),
        "stream": true,
        "store": false,
    });
    if !options.session_id.is_empty() {
        body["prompt_cache_key"] = json!(options.session_id);
    }
    if !context.tools.is_empty() {
        body["tools"] = context
            .tools
            .iter()
            .map(|tool| {
                json!({"type": "function", "name": tool.name, "description": tool.description,
                       "parameters": tool.parameters, "strict": false})
            })
            .collect();
    }
    if model.reasoning {
        let effort = if options.thinking == ThinkingLevel::Off {
            model
                .thinking_level_map
                .get(&ThinkingLevel::Off)
                .cloned()
                .flatten()
        } else {
            model.effort_for(options.thinking)
        };
        if let Some(effort) = effort {
            body["reasoning"] = json!({"effort": effort, "summary": "auto"});
            body["include"] = json!(["reasoning.encrypted_content"]);
        }
    }
    body
}

fn user_parts(content: &MessageContent, accepts_images: bool) -> Vec<Value> {
    let part = |block: &ContentBlock| match block {
        ContentBlock::Text { text, .. } => Some(json!({"type": "input_text", "text": text})),
        ContentBlock::Image { data, mime_type } if accepts_images => Some(
            json!({"type": "input_image", "image_url": format!("data:{mime_type};base64,{data}"), "detail": "auto"}),
        ),
        ContentBlock::Image { .. } => Some(
            json!({"type": "input_text", "text": "(image omitted: this model does not accept images)"}),
        ),
        _ => None,
    };
    match content {
        MessageContent::Text(text) => vec![json!({"type": "input_text", "text": text})],
        MessageContent::Parts(parts) => parts.iter().filter_map(part).collect(),
    }
}

fn input_items(model: &Model, context: &LlmContext) -> Vec<Value> {
    let accepts_images = model.input.contains(&InputKind::Image);
    let mut items = Vec::new();
    if !context.system_prompt.is_empty() {
        let role = if model.reasoning {
            "developer"
        } else {
            "system"
        };
        items.push(json!({"role": role, "content": context.system_prompt}));
    }
    for message in replay_messages(&context.messages) {
        match message.as_ref() {
            AgentMessage::User(user) => {
                let parts = user_parts(&user.content, accepts_images);
                if !parts.is_empty() {
                    items.push(json!({"role": "user", "content": parts}));
                }
            }
            AgentMessage::Assistant(assistant) => {
                let same = same_model(model, assistant);
                for block in &assistant.content {
                    match block {
                        ContentBlock::Thinking {
                            thinking_signature: Some(item),
                            ..
                        } if same => {
                            if let Ok(item) = serde_json::from_str::<Value>(item)
                                && item["type"] == "reasoning"
                            {
                                items.push(item);
                            }
                        }
                        ContentBlock::Text {
                            text,
                            text_signature,
                        } if !text.is_empty() => {
                            let mut item = json!({"type": "message", "role": "assistant", "status": "completed",
                                "content": [{"type": "output_text", "text": text, "annotations": []}]});
                            if let Some(id) = text_signature.as_deref().filter(|_| same) {
                                item["id"] = json!(id);
                            }
                            items.push(item);
                        }
                        ContentBlock::ToolCall(call) => {
                            let (call_id, item_id) = split_id(&call.id);
                            let mut item = json!({"type": "function_call", "call_id": call_id,
                                "name": call.name, "arguments": call.arguments.to_string()});
                            if let Some(id) = item_id.filter(|_| same) {
                                item["id"] = json!(id);
                            }
                            items.push(item);
                        }
                        _ => {}
                    }
                }
            }
            AgentMessage::ToolResult(result) => {
                let (call_id, _) = split_id(&result.tool_call_id);
                let text = zi_protocol::message::concat_text(&result.content);
                items.push(json!({"type": "function_call_output", "call_id": call_id,
                    "output": if text.is_empty() { "(no output)".to_string() } else { text }}));
                let images: Vec<Value> = result
                    .content
                    .iter()
                    .filter(|b| matches!(b, ContentBlock::Image { .. }))
                    .filter_map(|b| {
                        user_parts(&MessageContent::Parts(vec![b.clone()]), accepts_images).pop()
                    })
                    .collect();
                if accepts_images && !images.is_empty() {
                    let mut content = vec![
                        json!({"type": "input_text", "text": "Attached image(s) from tool result:"}),
                    ];
                    content.extend(images);
                    items.push(json!({"role": "user", "content": content}));
                }
            }
            other => {
                if let Some(text) = user_text_of(other) {
                    items.push(
                        json!({"role": "user", "content": [{"type": "input_text", "text": text}]}),
                    );
                }
            }
        }
    }
    items
}
