//! The request body: compat options, tools and the replayed conversation as chat messages.

use serde::Serialize;
use serde_json::Value;
use std::borrow::Cow;
use zi_protocol::ThinkingLevel;
use zi_protocol::message::{AgentMessage, ContentBlock, MessageContent};
use zi_protocol::state::InputKind;

use crate::model::{MaxTokensField, Model, ThinkingFormat};
use crate::providers::common::compaction_summary_text;
use crate::stream::{LlmContext, StreamOptions};

#[derive(Serialize)]
pub(super) struct RequestBody<'a> {
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

pub(super) fn request_body<'a>(
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
                // With images it goes as a user message does, images included.
                content: if custom.content.has_images() {
                    user_content(&custom.content, accepts_images)
                } else {
                    WireContent::Text(Cow::Owned(custom.content.text()))
                },
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
    use crate::providers::common::replay_messages;
    use zi_protocol::message::{AssistantMessage, StopReason, ToolCall, Usage, UserMessage};

    fn body_json(model: &Model, context: &LlmContext) -> Value {
        body_with(model, context, ThinkingLevel::Off)
    }

    fn body_with(model: &Model, context: &LlmContext, thinking: ThinkingLevel) -> Value {
        let options = StreamOptions {
            thinking,
            ..StreamOptions::with_auth(Default::default())
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
}
