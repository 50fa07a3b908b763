//! The `openai-responses` API: `POST {base}/responses` with `stream: true` and `store: false`.
//!
//! The stream is a sequence of typed events (`response.created`, `response.output_item.added`,
//! `response.output_text.delta`, `response.reasoning_summary_text.delta`,
//! `response.function_call_arguments.delta`, `response.output_item.done`, …) ending with
//! `response.completed`, `response.incomplete` or `response.failed`. Reasoning items are kept
//! whole (with their encrypted content) in the thinking block's signature, so they can be
//! replayed to the same model; a tool call's id is `call_id|item_id`, which keeps both.

use std::borrow::Cow;
use std::collections::BTreeMap;

use reqwest::header::{AUTHORIZATION, HeaderMap};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use zi_protocol::message::{AgentMessage, ContentBlock, MessageContent, StopReason, Usage};
use zi_protocol::state::InputKind;

use super::common::{
    Assembler, Halt, MaybeStr, MaybeU64, PREMATURE_END_MESSAGE, SseHandler, SseRequest, TextKind,
    drive, failure, finish_usage, parse_arguments, replay_messages, same_model, stream_sse,
    user_text_of, versioned_url,
};
use crate::model::Model;
use crate::stream::{EventSink, LlmContext, StreamOptions};

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
            .map(|key| (AUTHORIZATION, format!("Bearer {key}")));
        let request = SseRequest {
            url: versioned_url(&model.base_url, "v1", "responses"),
            auth,
            headers: HeaderMap::new(),
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
#[serde(tag = "type")]
enum Event<'a> {
    #[serde(rename = "response.created", alias = "response.in_progress")]
    Created {
        #[serde(borrow, default)]
        response: Option<ResponseId<'a>>,
    },
    #[serde(rename = "response.output_item.added")]
    ItemAdded {
        #[serde(default)]
        output_index: MaybeU64,
        #[serde(borrow, default)]
        item: Option<AddedItem<'a>>,
    },
    /// Summary parts are paragraphs of one thinking block.
    #[serde(rename = "response.reasoning_summary_part.added")]
    SummaryPartAdded {
        #[serde(default)]
        output_index: MaybeU64,
        #[serde(default)]
        summary_index: MaybeU64,
    },
    #[serde(
        rename = "response.output_text.delta",
        alias = "response.reasoning_summary_text.delta",
        alias = "response.reasoning_text.delta",
        alias = "response.refusal.delta",
        alias = "response.function_call_arguments.delta"
    )]
    Delta {
        #[serde(default)]
        output_index: MaybeU64,
        #[serde(borrow, default)]
        delta: MaybeStr<'a>,
    },
    #[serde(rename = "response.output_item.done")]
    ItemDone {
        #[serde(default)]
        output_index: MaybeU64,
        #[serde(borrow, default)]
        item: Option<DoneItem<'a>>,
    },
    #[serde(rename = "response.completed", alias = "response.incomplete")]
    Completed {
        #[serde(borrow, default)]
        response: Option<FinalResponse<'a>>,
    },
    #[serde(rename = "response.failed")]
    Failed {
        #[serde(default)]
        response: Option<FailedResponse>,
    },
    #[serde(rename = "error")]
    Error,
    #[serde(other)]
    Unknown,
}

#[derive(Deserialize)]
struct ResponseId<'a> {
    #[serde(borrow, default)]
    id: MaybeStr<'a>,
}

#[derive(Deserialize)]
struct AddedItem<'a> {
    #[serde(rename = "type", borrow, default)]
    kind: MaybeStr<'a>,
    #[serde(borrow, default)]
    id: MaybeStr<'a>,
    #[serde(borrow, default)]
    call_id: MaybeStr<'a>,
    #[serde(borrow, default)]
    name: MaybeStr<'a>,
}

#[derive(Deserialize)]
struct DoneItem<'a> {
    #[serde(borrow, default)]
    id: MaybeStr<'a>,
    #[serde(borrow, default)]
    arguments: MaybeStr<'a>,
}

#[derive(Deserialize)]
struct FinalResponse<'a> {
    #[serde(borrow, default)]
    status: MaybeStr<'a>,
    #[serde(borrow, default)]
    incomplete_details: Option<IncompleteDetails<'a>>,
    #[serde(default)]
    usage: Option<ResponseUsage>,
}

#[derive(Deserialize)]
struct IncompleteDetails<'a> {
    #[serde(borrow, default)]
    reason: MaybeStr<'a>,
}

#[derive(Deserialize)]
struct ResponseUsage {
    #[serde(default)]
    input_tokens: MaybeU64,
    #[serde(default)]
    output_tokens: MaybeU64,
    #[serde(default)]
    total_tokens: MaybeU64,
    #[serde(default)]
    input_tokens_details: Option<InputTokensDetails>,
}

#[derive(Deserialize)]
struct InputTokensDetails {
    #[serde(default)]
    cached_tokens: MaybeU64,
}

#[derive(Deserialize)]
struct FailedResponse {
    #[serde(default)]
    error: Option<Value>,
}

/// What an output item is, by its `output_index`.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Item {
    Reasoning,
    Message,
    Call,
}

#[derive(Default)]
struct StreamState {
    /// `output_index` → (content index, item).
    items: BTreeMap<u64, (usize, Item)>,
    usage: Option<Usage>,
    status: Option<String>,
    incomplete_reason: Option<String>,
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
    async fn on_data(&mut self, data: &str, out: &mut Assembler) -> Result<bool, Halt> {
        let event: Event<'_> = match serde_json::from_str(data) {
            Ok(event) => event,
            Err(error) => {
                tracing::debug!("ignoring an undecodable responses event: {error}");
                return Ok(false);
            }
        };
        match event {
            Event::Created { response } => {
                if let Some(id) = response.and_then(|response| response.id.into_owned()) {
                    out.set_response_id(id);
                }
            }
            Event::ItemAdded { output_index, item } => {
                if let Some(index) = output_index.0 {
                    self.item_added(index, item, out).await?;
                }
            }
            Event::SummaryPartAdded {
                output_index,
                summary_index,
            } => {
                if summary_index.0 != Some(0) {
                    self.delta(output_index.0, "\n\n".to_string(), out).await?;
                }
            }
            Event::Delta {
                output_index,
                delta,
            } => self.delta(output_index.0, delta.or_empty(), out).await?,
            Event::ItemDone { output_index, item } => {
                if let Some(index) = output_index.0 {
                    self.item_done(index, item, data, out).await?;
                }
            }
            Event::Completed { response } => {
                self.finish_response(response);
                return Ok(true);
            }
            Event::Failed { response } => {
                let error = response.and_then(|r| r.error).filter(|e| !e.is_null());
                return Err(failure(error.map_or_else(
                    || "The provider reported the response as failed".to_string(),
                    |error| error_text(&error),
                )));
            }
            Event::Error => {
                // The whole event is the error; read it again as it came.
                let event: Value = serde_json::from_str(data).unwrap_or_default();
                return Err(failure(error_text(&event)));
            }
            Event::Unknown => {}
        }
        Ok(false)
    }
}

impl StreamState {
    async fn item_added(
        &mut self,
        index: u64,
        item: Option<AddedItem<'_>>,
        out: &mut Assembler,
    ) -> Result<(), Halt> {
        let Some(item) = item else {
            return Ok(());
        };
        let (content_index, kind) = match item.kind.as_deref() {
            Some("reasoning") => (out.start(TextKind::Thinking).await?, Item::Reasoning),
            Some("message") => (out.start(TextKind::Text).await?, Item::Message),
            Some("function_call") => {
                let id = format!(
                    "{}|{}",
                    item.call_id.as_deref().unwrap_or(""),
                    item.id.as_deref().unwrap_or("")
                );
                (
                    out.start_tool_call(id, item.name.or_empty()).await?,
                    Item::Call,
                )
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
        out: &mut Assembler,
    ) -> Result<(), Halt> {
        let Some(&(content_index, _)) = index.and_then(|i| self.items.get(&i)) else {
            return Ok(());
        };
        if delta.is_empty() {
            return Ok(());
        }
        out.delta(content_index, delta).await
    }

    async fn item_done(
        &mut self,
        index: u64,
        item: Option<DoneItem<'_>>,
        data: &str,
        out: &mut Assembler,
    ) -> Result<(), Halt> {
        let Some((content_index, kind)) = self.items.remove(&index) else {
            return Ok(());
        };
        match kind {
            Item::Reasoning => {
                // The whole item, encrypted content included, is what replay sends back.
                let event: Value = serde_json::from_str(data).unwrap_or_default();
                out.set_signature(content_index, event["item"].to_string());
                out.end(content_index).await
            }
            Item::Message => {
                if let Some(id) = item
                    .and_then(|item| item.id.into_owned())
                    .filter(|id| !id.is_empty())
                {
                    out.set_signature(content_index, id);
                }
                out.end(content_index).await
            }
            Item::Call => match item.and_then(|item| item.arguments.0) {
                Some(arguments) => {
                    out.end_tool_call(content_index, parse_arguments(&arguments), None)
                        .await
                }
                None => out.end(content_index).await,
            },
        }
    }

    fn finish_response(&mut self, response: Option<FinalResponse<'_>>) {
        let Some(response) = response else {
            self.status = None;
            self.incomplete_reason = None;
            return;
        };
        self.status = response.status.into_owned();
        self.incomplete_reason = response
            .incomplete_details
            .and_then(|details| details.reason.into_owned());
        if let Some(usage) = response.usage {
            let cached = usage
                .input_tokens_details
                .map_or(0, |details| details.cached_tokens.or_zero());
            self.usage = Some(Usage {
                input: usage.input_tokens.or_zero().saturating_sub(cached),
                output: usage.output_tokens.or_zero(),
                cache_read: cached,
                cache_write: 0,
                total_tokens: usage.total_tokens.or_zero(),
                cost: Default::default(),
            });
        }
    }

    fn complete(&mut self, model: &Model, out: &mut Assembler) -> Result<StopReason, Halt> {
        if let Some(usage) = self.usage.take() {
            out.set_usage(finish_usage(model, usage));
        }
        match (self.status.as_deref(), self.incomplete_reason.as_deref()) {
            (Some("incomplete"), Some("max_output_tokens")) => Ok(StopReason::Length),
            (Some("incomplete"), reason) => Err(failure(format!(
                "The response is incomplete ({})",
                reason.unwrap_or("no reason given")
            ))),
            _ if out.tool_call_count() > 0 => Ok(StopReason::ToolUse),
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

#[derive(Serialize)]
struct RequestBody<'a> {
    model: &'a str,
    input: Vec<InputItem<'a>>,
    stream: bool,
    store: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    prompt_cache_key: Option<&'a str>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<WireTool<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reasoning: Option<Reasoning>,
    #[serde(skip_serializing_if = "Option::is_none")]
    include: Option<[&'static str; 1]>,
}

#[derive(Serialize)]
struct WireTool<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    name: &'a str,
    description: &'a str,
    parameters: &'a Value,
    strict: bool,
}

#[derive(Serialize)]
struct Reasoning {
    effort: String,
    summary: &'static str,
}

#[derive(Serialize)]
#[serde(untagged)]
enum InputItem<'a> {
    Role {
        role: &'static str,
        content: RoleContent<'a>,
    },
    Typed(TypedItem<'a>),
    /// A reasoning item replayed exactly as the API sent it.
    Replayed(Value),
}

#[derive(Serialize)]
#[serde(untagged)]
enum RoleContent<'a> {
    Text(&'a str),
    Parts(Vec<InputPart<'a>>),
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum InputPart<'a> {
    InputText {
        text: Cow<'a, str>,
    },
    InputImage {
        image_url: String,
        detail: &'static str,
    },
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum TypedItem<'a> {
    Message {
        role: &'static str,
        status: &'static str,
        content: [OutputText<'a>; 1],
        #[serde(skip_serializing_if = "Option::is_none")]
        id: Option<&'a str>,
    },
    FunctionCall {
        call_id: &'a str,
        name: &'a str,
        arguments: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        id: Option<&'a str>,
    },
    FunctionCallOutput {
        call_id: &'a str,
        output: String,
    },
}

#[derive(Serialize)]
struct OutputText<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    text: &'a str,
    annotations: &'static [()],
}

impl<'a> InputPart<'a> {
    fn text(text: impl Into<Cow<'a, str>>) -> Self {
        InputPart::InputText { text: text.into() }
    }

    fn image(data: &str, mime_type: &str) -> Self {
        InputPart::InputImage {
            image_url: format!("data:{mime_type};base64,{data}"),
            detail: "auto",
        }
    }
}

fn request_body<'a>(
    model: &'a Model,
    context: &'a LlmContext,
    replay: &'a [Cow<'a, AgentMessage>],
    options: &'a StreamOptions,
) -> RequestBody<'a> {
    let effort = model.request_effort(options.thinking);
    RequestBody {
        model: &model.id,
        input: input_items(model, &context.system_prompt, replay),
        stream: true,
        store: false,
        prompt_cache_key: (!options.session_id.is_empty()).then_some(options.session_id.as_str()),
        tools: context
            .tools
            .iter()
            .map(|tool| WireTool {
                kind: "function",
                name: &tool.name,
                description: &tool.description,
                parameters: &tool.parameters,
                strict: false,
            })
            .collect(),
        include: effort.is_some().then_some(["reasoning.encrypted_content"]),
        reasoning: effort.map(|effort| Reasoning {
            effort,
            summary: "auto",
        }),
    }
}

fn user_parts<'a>(content: &'a MessageContent, accepts_images: bool) -> Vec<InputPart<'a>> {
    let part = |block: &'a ContentBlock| match block {
        ContentBlock::Text { text, .. } => Some(InputPart::text(text.as_str())),
        ContentBlock::Image { data, mime_type } if accepts_images => {
            Some(InputPart::image(data, mime_type))
        }
        ContentBlock::Image { .. } => Some(InputPart::text(
            "(image omitted: this model does not accept images)",
        )),
        _ => None,
    };
    match content {
        MessageContent::Text(text) => vec![InputPart::text(text.as_str())],
        MessageContent::Parts(parts) => parts.iter().filter_map(part).collect(),
    }
}

/// The system prompt, then the conversation ([`replay_messages`]: failures dropped, every tool
/// call answered).
fn input_items<'a>(
    model: &Model,
    system_prompt: &'a str,
    replay: &'a [Cow<'a, AgentMessage>],
) -> Vec<InputItem<'a>> {
    let accepts_images = model.input.contains(&InputKind::Image);
    let mut items = Vec::new();
    if !system_prompt.is_empty() {
        let role = if model.reasoning {
            "developer"
        } else {
            "system"
        };
        items.push(InputItem::Role {
            role,
            content: RoleContent::Text(system_prompt),
        });
    }
    for message in replay.iter().map(Cow::as_ref) {
        match message {
            AgentMessage::User(user) => {
                let parts = user_parts(&user.content, accepts_images);
                if !parts.is_empty() {
                    items.push(InputItem::Role {
                        role: "user",
                        content: RoleContent::Parts(parts),
                    });
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
                                items.push(InputItem::Replayed(item));
                            }
                        }
                        ContentBlock::Text {
                            text,
                            text_signature,
                        } if !text.is_empty() => {
                            items.push(InputItem::Typed(TypedItem::Message {
                                role: "assistant",
                                status: "completed",
                                content: [OutputText {
                                    kind: "output_text",
                                    text,
                                    annotations: &[],
                                }],
                                id: text_signature.as_deref().filter(|_| same),
                            }));
                        }
                        ContentBlock::ToolCall(call) => {
                            let (call_id, item_id) = split_id(&call.id);
                            items.push(InputItem::Typed(TypedItem::FunctionCall {
                                call_id,
                                name: &call.name,
                                arguments: call.arguments.to_string(),
                                id: item_id.filter(|_| same),
                            }));
                        }
                        _ => {}
                    }
                }
            }
            AgentMessage::ToolResult(result) => {
                let (call_id, _) = split_id(&result.tool_call_id);
                let text = zi_protocol::message::concat_text(&result.content);
                items.push(InputItem::Typed(TypedItem::FunctionCallOutput {
                    call_id,
                    output: if text.is_empty() {
                        "(no output)".to_string()
                    } else {
                        text
                    },
                }));
                let mut images = result.content.iter().filter_map(|block| match block {
                    ContentBlock::Image { data, mime_type } => {
                        Some(InputPart::image(data, mime_type))
                    }
                    _ => None,
                });
                if accepts_images && let Some(first) = images.next() {
                    let mut content = vec![
                        InputPart::text("Attached image(s) from tool result:"),
                        first,
                    ];
                    content.extend(images);
                    items.push(InputItem::Role {
                        role: "user",
                        content: RoleContent::Parts(content),
                    });
                }
            }
            other => {
                if let Some(text) = user_text_of(other) {
                    items.push(InputItem::Role {
                        role: "user",
                        content: RoleContent::Parts(vec![InputPart::text(text)]),
                    });
                }
            }
        }
    }
    items
}
