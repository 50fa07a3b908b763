//! The request body: reasoning, tools and the replayed conversation as input items.

use std::borrow::Cow;

use serde::Serialize;
use serde_json::Value;
use zi_protocol::message::{
    AgentMessage, AssistantMessage, ContentBlock, CustomMessage, MessageContent, ToolResultMessage,
    UserMessage,
};
use zi_protocol::state::InputKind;

use super::Flavor;
use crate::model::Model;
use crate::providers::common::{same_model, user_text_of};
use crate::stream::{LlmContext, StreamOptions};

/// `call_id|item_id` → (`call_id`, `item_id`); ids from other APIs have no item id.
fn split_id(id: &str) -> (&str, Option<&str>) {
    match id.split_once('|') {
        Some((call, item)) if item.starts_with("fc") => (call, Some(item)),
        _ => (id, None),
    }
}

#[derive(Serialize)]
pub(super) struct RequestBody<'a> {
    model: &'a str,
    /// Codex: the system prompt (the plain API takes it as the first input item).
    #[serde(skip_serializing_if = "Option::is_none")]
    instructions: Option<&'a str>,
    input: Vec<InputItem<'a>>,
    stream: bool,
    store: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    prompt_cache_key: Option<&'a str>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<WireTool<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_choice: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    parallel_tool_calls: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    text: Option<TextOptions>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reasoning: Option<Reasoning>,
    #[serde(skip_serializing_if = "Option::is_none")]
    include: Option<[&'static str; 1]>,
    /// Codex with `codexFastMode`: `priority`.
    #[serde(skip_serializing_if = "Option::is_none")]
    service_tier: Option<&'static str>,
}

#[derive(Serialize)]
struct TextOptions {
    verbosity: &'static str,
}

/// The instructions Codex gets when zi has no system prompt (it requires some).
const DEFAULT_INSTRUCTIONS: &str = "You are a helpful assistant.";

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

pub(super) fn request_body<'a>(
    model: &'a Model,
    context: &'a LlmContext,
    replay: &'a [Cow<'a, AgentMessage>],
    options: &'a StreamOptions,
    flavor: Flavor,
) -> RequestBody<'a> {
    let effort = model.request_effort(options.thinking);
    let codex = flavor == Flavor::Codex;
    let (instructions, input_prompt) = if codex {
        let prompt = context.system_prompt.as_str();
        (
            Some(if prompt.is_empty() {
                DEFAULT_INSTRUCTIONS
            } else {
                prompt
            }),
            "",
        )
    } else {
        (None, context.system_prompt.as_str())
    };
    RequestBody {
        model: &model.id,
        instructions,
        input: input_items(model, input_prompt, replay),
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
        tool_choice: codex.then_some("auto"),
        parallel_tool_calls: codex.then_some(true),
        text: codex.then_some(TextOptions {
            verbosity: "medium",
        }),
        // Codex keeps nothing (`store: false`): encrypted reasoning travels with every request.
        include: (codex || effort.is_some()).then_some(["reasoning.encrypted_content"]),
        reasoning: effort.map(|effort| Reasoning {
            effort,
            summary: "auto",
        }),
        service_tier: (codex && options.fast_mode).then_some("priority"),
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

/// An assistant message's items: its own reasoning items (same model only), texts and calls.
fn push_assistant<'a>(items: &mut Vec<InputItem<'a>>, assistant: &'a AssistantMessage, same: bool) {
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

/// A tool result: its text as the call's output, its images (the output cannot carry them) in
/// a user message right after.
fn push_tool_result<'a>(
    items: &mut Vec<InputItem<'a>>,
    result: &'a ToolResultMessage,
    accepts_images: bool,
) {
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
        ContentBlock::Image { data, mime_type } => Some(InputPart::image(data, mime_type)),
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
            // A custom message with images goes as a user message does, images included.
            AgentMessage::User(UserMessage { content, .. })
            | AgentMessage::Custom(CustomMessage { content, .. })
                if matches!(message, AgentMessage::User(_)) || content.has_images() =>
            {
                let parts = user_parts(content, accepts_images);
                if !parts.is_empty() {
                    items.push(InputItem::Role {
                        role: "user",
                        content: RoleContent::Parts(parts),
                    });
                }
            }
            AgentMessage::Assistant(assistant) => {
                push_assistant(&mut items, assistant, same_model(model, assistant));
            }
            AgentMessage::ToolResult(result) => {
                push_tool_result(&mut items, result, accepts_images)
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
