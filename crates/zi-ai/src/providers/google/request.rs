//! The request body: generation and thinking config, tools, the replayed conversation.

use std::borrow::Cow;

use serde::Serialize;
use serde_json::Value;
use zi_protocol::ThinkingLevel;
use zi_protocol::message::{
    AgentMessage, AssistantMessage, ContentBlock, CustomMessage, MessageContent, UserMessage,
};
use zi_protocol::state::InputKind;

use crate::model::Model;
use crate::providers::common::{Conversation, same_model, user_text_of};
use crate::stream::{LlmContext, StreamOptions};

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

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct RequestBody<'a> {
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

pub(super) fn request_body<'a>(
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
    // Function responses of one turn go together in one user content.
    let mut out = Conversation::new(|role, parts| WireContent { role, parts });
    for message in replay.iter().map(Cow::as_ref) {
        match message {
            AgentMessage::ToolResult(result) => {
                out.tool_result(function_response(
                    &result.tool_name,
                    zi_protocol::message::concat_text(&result.content),
                    result.is_error,
                ));
                if accepts_images {
                    for block in &result.content {
                        if let ContentBlock::Image { data, mime_type } = block {
                            out.tool_result(WirePart::image(data, mime_type));
                        }
                    }
                }
            }
            // A custom message with images goes as a user message does, images included.
            AgentMessage::User(UserMessage { content, .. })
            | AgentMessage::Custom(CustomMessage { content, .. })
                if matches!(message, AgentMessage::User(_)) || content.has_images() =>
            {
                out.push("user", user_parts(content, accepts_images));
            }
            AgentMessage::Assistant(assistant) => {
                let parts = model_parts(assistant, same_model(model, assistant), gemini_3);
                out.push("model", parts);
            }
            other => {
                let text = user_text_of(other).map(WirePart::text);
                out.push("user", text.into_iter().collect());
            }
        }
    }
    out.finish()
}

/// An assistant message's parts. Thought text and signatures are replayed to the same model
/// only; Gemini 3 requires a signature on every function call, so foreign calls get the skip
/// signature.
fn model_parts(assistant: &AssistantMessage, same: bool, gemini_3: bool) -> Vec<WirePart<'_>> {
    assistant
        .content
        .iter()
        .filter_map(|block| match block {
            ContentBlock::Thinking {
                thinking,
                thinking_signature,
                redacted,
            } if same && redacted != &Some(true) && !thinking.is_empty() => Some(WirePart::Text {
                text: Cow::Borrowed(thinking),
                thought: true,
                thought_signature: thinking_signature.as_deref(),
            }),
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
        .collect()
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
