//! The exact wire of all four clients, pinned: for a set of conversations, thinking levels and
//! replies (interleaved text, thinking and tool-call blocks, failures), the request body bytes
//! and every event with its final message are compared with `tests/golden/<api>.txt`.
//!
//! The golden files were recorded from the clients before they were moved onto the shared
//! block assembler and typed wire structs, so they prove that refactoring changed nothing on
//! the wire. The mock server parses bodies with `serde_json`'s `preserve_order`, so writing a
//! recorded body back out reproduces the bytes zi sent. Set `ZI_UPDATE_GOLDEN=1` to re-record
//! after an intended wire change.

use crate::support::*;
use serde_json::{Value, json};
use zi_ai::{Api, AssistantMessageEvent, LlmContext, Model, StreamOptions};
use zi_protocol::ThinkingLevel;
use zi_protocol::message::{
    AgentMessage, AssistantMessage, CompactionSummaryMessage, ContentBlock, CustomMessage,
    MessageContent, StopReason, ToolCall, ToolResultMessage, UserMessage,
};
use zi_protocol::state::InputKind;
use zi_test_support::mock_llm::{MockLlm, MockToolCall, MockUsage, Step};

const IMAGE: &str = "iVBORw0KGgo=";

fn image() -> ContentBlock {
    ContentBlock::Image {
        data: IMAGE.into(),
        mime_type: "image/png".into(),
    }
}

fn assistant_from(model: &Model, content: Vec<ContentBlock>) -> AgentMessage {
    AgentMessage::Assistant(AssistantMessage {
        content,
        stop_reason: StopReason::ToolUse,
        response_id: Some("resp-old".into()),
        timestamp: 3,
        ..zi_ai::stream::empty_assistant(model)
    })
}

/// Every kind of message and block the replay handles, from this model and a foreign one.
// Long on purpose: one conversation holding every kind of message and block, written out as data.
fn rich_context(model: &Model) -> LlmContext {
    let mut foreign = model.clone();
    foreign.provider = "elsewhere".into();
    foreign.id = "other-model".into();
    let call = |id: &str, path: &str| {
        ContentBlock::ToolCall(ToolCall {
            id: id.into(),
            name: "read".into(),
            arguments: json!({"path": path, "n": 1.5, "deep": {"z": [1, null, true]}}),
            thought_signature: Some("tsig".into()),
        })
    };
    let mut failed = zi_ai::stream::empty_assistant(model);
    failed.stop_reason = StopReason::Aborted;
    failed.error_message = Some("Request was aborted".into());
    failed.content = vec![ContentBlock::text("half")];
    LlmContext {
        system_prompt: "Be exact.\nQuote \"paths\" and use \\ sparingly.".into(),
        messages: vec![
            AgentMessage::User(UserMessage {
                content: MessageContent::Parts(vec![
                    ContentBlock::text("look at this é ☃"),
                    image(),
                    ContentBlock::text("and this"),
                ]),
                timestamp: 1,
            }),
            AgentMessage::Assistant(failed),
            assistant_from(
                model,
                vec![
                    ContentBlock::Thinking {
                        thinking: "plan".into(),
                        thinking_signature: Some(
                            r#"{"type":"reasoning","id":"rs_1","summary":[],"encrypted_content":"enc"}"#
                                .into(),
                        ),
                        redacted: None,
                    },
                    ContentBlock::Thinking {
                        thinking: String::new(),
                        thinking_signature: Some("opaque".into()),
                        redacted: Some(true),
                    },
                    ContentBlock::Text {
                        text: "Reading.".into(),
                        text_signature: Some("msg_1".into()),
                    },
                    call("call_1|fc_1", "a"),
                    call("call_2", "b"),
                ],
            ),
            AgentMessage::ToolResult(ToolResultMessage {
                tool_call_id: "call_1|fc_1".into(),
                tool_name: "read".into(),
                content: vec![ContentBlock::text("A\tline"), image()],
                details: None,
                is_error: false,
                timestamp: 4,
            }),
            AgentMessage::Custom(CustomMessage {
                custom_type: "note".into(),
                content: MessageContent::Text("a custom note".into()),
                display: true,
                details: None,
                timestamp: 5,
            }),
            AgentMessage::CompactionSummary(CompactionSummaryMessage {
                summary: "earlier work".into(),
                tokens_before: 10,
                estimated_tokens_after: 2,
                timestamp: 6,
            }),
            assistant_from(
                &foreign,
                vec![
                    ContentBlock::Thinking {
                        thinking: "foreign thought".into(),
                        thinking_signature: Some("foreign-sig".into()),
                        redacted: None,
                    },
                    ContentBlock::Text {
                        text: "Foreign text.".into(),
                        text_signature: Some("foreign-text-sig".into()),
                    },
                    call("call_3", "c"),
                ],
            ),
            AgentMessage::ToolResult(ToolResultMessage {
                tool_call_id: "call_3".into(),
                tool_name: "read".into(),
                content: vec![ContentBlock::text("")],
                details: None,
                is_error: true,
                timestamp: 7,
            }),
            AgentMessage::User(UserMessage {
                content: MessageContent::Text(String::new()),
                timestamp: 8,
            }),
            user("now finish"),
        ],
        tools: context_with_tools("x").tools,
    }
}

/// One logical reply in each API's own event format: thinking, text, a tool call, thinking
/// again, a second tool call and closing text, with signatures, ids and usage.
fn interleaved_body(api: Api) -> String {
    let events: Vec<Value> = match api {
        Api::AnthropicMessages => vec![
            json!({"type":"message_start","message":{"id":"msg_01","usage":{"input_tokens":100,"output_tokens":1,"cache_read_input_tokens":20,"cache_creation_input_tokens":5}}}),
            json!({"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":""}}),
            json!({"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"Plan "}}),
            json!({"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"first."}}),
            json!({"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"sig-"}}),
            json!({"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"A"}}),
            json!({"type":"content_block_stop","index":0}),
            json!({"type":"ping"}),
            json!({"type":"content_block_start","index":1,"content_block":{"type":"text","text":"Hel"}}),
            json!({"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"lo \"x\""}}),
            json!({"type":"content_block_stop","index":1}),
            json!({"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"toolu_1","name":"read","input":{}}}),
            json!({"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":""}}),
            json!({"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"{\"path\":"}}),
            json!({"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"\"a\"}"}}),
            json!({"type":"content_block_stop","index":2}),
            json!({"type":"content_block_start","index":3,"content_block":{"type":"redacted_thinking","data":"opaque-data"}}),
            json!({"type":"content_block_stop","index":3}),
            json!({"type":"content_block_start","index":4,"content_block":{"type":"thinking","thinking":""}}),
            json!({"type":"content_block_delta","index":4,"delta":{"type":"thinking_delta","thinking":"Then b."}}),
            json!({"type":"content_block_stop","index":4}),
            json!({"type":"content_block_start","index":5,"content_block":{"type":"tool_use","id":"toolu_2","name":"read","input":{}}}),
            json!({"type":"content_block_delta","index":5,"delta":{"type":"input_json_delta","partial_json":"{\"path\":\"b\"}"}}),
            json!({"type":"content_block_stop","index":5}),
            json!({"type":"content_block_start","index":6,"content_block":{"type":"text","text":""}}),
            json!({"type":"content_block_delta","index":6,"delta":{"type":"text_delta","text":"Done."}}),
            json!({"type":"content_block_stop","index":6}),
            json!({"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":42}}),
            json!({"type":"message_stop"}),
        ],
        Api::OpenAiResponses | Api::OpenAiCodexResponses => vec![
            json!({"type":"response.created","response":{"id":"resp_1","status":"in_progress"}}),
            json!({"type":"response.in_progress","response":{"id":"resp_1"}}),
            json!({"type":"response.output_item.added","output_index":0,"item":{"type":"reasoning","id":"rs_1","summary":[]}}),
            json!({"type":"response.reasoning_summary_part.added","output_index":0,"summary_index":0}),
            json!({"type":"response.reasoning_summary_text.delta","output_index":0,"delta":"Plan "}),
            json!({"type":"response.reasoning_summary_text.delta","output_index":0,"delta":"first."}),
            json!({"type":"response.reasoning_summary_part.added","output_index":0,"summary_index":1}),
            json!({"type":"response.reasoning_summary_text.delta","output_index":0,"delta":"Really."}),
            json!({"type":"response.output_item.done","output_index":0,"item":{"type":"reasoning","id":"rs_1","summary":[{"type":"summary_text","text":"Plan first."}],"encrypted_content":"enc-1"}}),
            json!({"type":"response.output_item.added","output_index":1,"item":{"type":"message","id":"msg_1","role":"assistant","content":[]}}),
            json!({"type":"response.output_text.delta","output_index":1,"delta":"Hel"}),
            json!({"type":"response.output_text.delta","output_index":1,"delta":""}),
            json!({"type":"response.output_text.delta","output_index":1,"delta":"lo \"x\""}),
            json!({"type":"response.output_item.done","output_index":1,"item":{"type":"message","id":"msg_1","role":"assistant"}}),
            json!({"type":"response.output_item.added","output_index":2,"item":{"type":"function_call","id":"fc_1","call_id":"call_1","name":"read","arguments":""}}),
            json!({"type":"response.function_call_arguments.delta","output_index":2,"delta":"{\"path\":"}),
            json!({"type":"response.function_call_arguments.delta","output_index":2,"delta":"\"a\"}"}),
            json!({"type":"response.output_item.done","output_index":2,"item":{"type":"function_call","id":"fc_1","call_id":"call_1","name":"read","arguments":"{\"path\":\"a\"}"}}),
            json!({"type":"response.output_item.added","output_index":3,"item":{"type":"reasoning","id":"rs_2"}}),
            json!({"type":"response.reasoning_text.delta","output_index":3,"delta":"Then b."}),
            json!({"type":"response.output_item.done","output_index":3,"item":{"type":"reasoning","id":"rs_2","summary":[]}}),
            json!({"type":"response.output_item.added","output_index":4,"item":{"type":"function_call","id":"fc_2","call_id":"call_2","name":"read"}}),
            json!({"type":"response.function_call_arguments.delta","output_index":4,"delta":"{\"path\":\"b\"}"}),
            json!({"type":"response.output_item.done","output_index":4,"item":{"type":"function_call","id":"fc_2","call_id":"call_2","name":"read"}}),
            json!({"type":"response.output_item.added","output_index":5,"item":{"type":"message","id":"msg_2"}}),
            json!({"type":"response.refusal.delta","output_index":5,"delta":"Done."}),
            json!({"type":"response.output_item.done","output_index":5,"item":{"type":"message"}}),
            json!({"type":"response.completed","response":{"id":"resp_1","status":"completed","usage":{"input_tokens":100,"input_tokens_details":{"cached_tokens":20},"output_tokens":42,"total_tokens":142}}}),
        ],
        Api::GoogleGenerativeAi => vec![
            json!({"responseId":"g-1","candidates":[{"content":{"role":"model","parts":[{"text":"Plan ","thought":true}]}}]}),
            json!({"candidates":[{"content":{"parts":[{"text":"first.","thought":true,"thoughtSignature":"sig-A"}]}}]}),
            json!({"responseId":"g-2","candidates":[{"content":{"parts":[{"text":"Hel"},{"text":""},{"text":"lo \"x\"","thoughtSignature":"text-sig"}]}}]}),
            json!({"candidates":[{"content":{"parts":[{"functionCall":{"name":"read","args":{"path":"a","n":1.5}},"thoughtSignature":"call-sig"}]}}]}),
            json!({"candidates":[{"content":{"parts":[{"text":"Then b.","thought":true}]}}]}),
            json!({"candidates":[{"content":{"parts":[{"functionCall":{"id":"given-id","name":"read","args":{"path":"b"}}},{"text":"Done."}]}}]}),
            json!({"candidates":[{"content":{"parts":[]},"finishReason":"STOP"}],"usageMetadata":{"promptTokenCount":100,"cachedContentTokenCount":20,"candidatesTokenCount":30,"thoughtsTokenCount":12,"totalTokenCount":142}}),
        ],
        Api::OpenAiCompletions => vec![
            json!({"id":"chatcmpl-1","choices":[{"index":0,"delta":{"role":"assistant","reasoning_content":"Plan "}}]}),
            json!({"id":"chatcmpl-1","choices":[{"index":0,"delta":{"reasoning":"first."}}]}),
            json!({"id":"chatcmpl-1","choices":[{"index":0,"delta":{"content":"Hel"}}]}),
            json!({"id":"chatcmpl-1","choices":[{"index":0,"delta":{"content":"","reasoning_content":""}}]}),
            json!({"id":"chatcmpl-1","choices":[{"index":0,"delta":{"content":"lo \"x\""}}]}),
            json!({"id":"chatcmpl-1","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"read","arguments":"{\"path\":"}}]}}]}),
            json!({"id":"chatcmpl-1","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"a\"}"}}]}}]}),
            json!({"id":"chatcmpl-1","choices":[{"index":0,"delta":{"reasoning_content":"Then b."}}]}),
            json!({"id":"chatcmpl-1","choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"call_2","function":{"arguments":""}}]}}]}),
            json!({"id":"chatcmpl-1","choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"function":{"name":"read","arguments":"{\"path\":\"b\"}"}}]}}]}),
            json!({"id":"chatcmpl-1","choices":[{"index":0,"delta":{"content":"Done."},"finish_reason":"tool_calls"}]}),
            json!({"id":"chatcmpl-1","choices":[],"usage":{"prompt_tokens":100,"completion_tokens":42,"total_tokens":142,"prompt_tokens_details":{"cached_tokens":20}}}),
        ],
    };
    let mut body = String::new();
    for event in events {
        body.push_str(&format!("data: {event}\n\n"));
    }
    if api == Api::OpenAiCompletions {
        body.push_str("data: [DONE]\n\n");
    }
    body
}

fn reply() -> Step {
    Step::Reply {
        thinking: vec!["Let me ".into(), "think.".into()],
        text: vec!["Reading ".into(), "both.".into()],
        tool_calls: vec![
            MockToolCall {
                id: "toolu_01".into(),
                name: "read".into(),
                args_chunks: vec!["{\"path\":".into(), "\"a\"}".into()],
            },
            MockToolCall {
                id: "toolu_02".into(),
                name: "read".into(),
                args_chunks: vec!["{\"path\":\"b\"}".into()],
            },
        ],
        finish_reason: "tool_calls".into(),
        usage: Some(MockUsage {
            prompt_tokens: 1_000,
            completion_tokens: 50,
            cached_tokens: 400,
        }),
    }
}

/// The event as the wire shows it, with the final message's clock reading zeroed.
fn event_line(event: &AssistantMessageEvent) -> String {
    let mut value = serde_json::to_value(event).unwrap_or_else(|e| panic!("{e}"));
    for key in ["message", "error"] {
        if let Some(message) = value.get_mut(key) {
            message["timestamp"] = json!(0);
        }
    }
    value.to_string()
}

struct Case {
    name: String,
    model: Model,
    context: LlmContext,
    options: StreamOptions,
    step: Step,
}

// Long on purpose: the table of pinned conversations, one case per entry, in the golden files' order.
fn cases(mock: &MockLlm, api: Api) -> Vec<Case> {
    let mut plain = model(mock, api);
    plain.cost.input = 3.0;
    plain.cost.output = 15.0;
    plain.cost.cache_read = 0.3;
    plain.cost.cache_write = 3.75;
    let mut rich = plain.clone();
    rich.reasoning = true;
    rich.input.push(InputKind::Image);
    let with = |level: ThinkingLevel| {
        let mut options = options();
        options.thinking = level;
        options
    };
    let mut cases = vec![
        Case {
            name: "interleaved blocks, rich history, tools, high thinking".into(),
            model: rich.clone(),
            context: rich_context(&rich),
            options: with(ThinkingLevel::High),
            step: Step::Sse {
                body: interleaved_body(api),
                hang: false,
            },
        },
        Case {
            name: "rich history for a text-only model without reasoning".into(),
            model: plain.clone(),
            context: rich_context(&plain),
            options: options(),
            step: Step::text("ok"),
        },
        Case {
            name: "history with signed and redacted thinking".into(),
            model: plain.clone(),
            context: history_context(&plain),
            options: options(),
            step: reply(),
        },
        Case {
            name: "text only, no system prompt".into(),
            model: plain.clone(),
            context: LlmContext {
                system_prompt: String::new(),
                ..context("hi")
            },
            options: options(),
            step: Step::Text(vec!["a".into(), "b".into(), "c".into()]),
        },
        Case {
            name: "mid-stream error".into(),
            model: plain.clone(),
            context: context("hi"),
            options: options(),
            step: Step::MidStreamError {
                text: vec!["par".into(), "tial".into()],
                message: "The model is overloaded.".into(),
            },
        },
        Case {
            name: "truncated body".into(),
            model: plain.clone(),
            context: context("hi"),
            options: options(),
            step: Step::Truncated(vec!["cut".into()]),
        },
        Case {
            name: "http error".into(),
            model: plain.clone(),
            context: context("hi"),
            options: options(),
            step: Step::HttpError {
                status: 429,
                message: "Slow down".into(),
            },
        },
    ];
    let levels = [
        ThinkingLevel::Off,
        ThinkingLevel::Minimal,
        ThinkingLevel::Low,
        ThinkingLevel::Medium,
        ThinkingLevel::Xhigh,
    ];
    let mut variants = vec![("reasoning", rich.clone())];
    let mut mapped = rich.clone();
    mapped
        .thinking_level_map
        .insert(ThinkingLevel::Off, Some("none".into()));
    mapped
        .thinking_level_map
        .insert(ThinkingLevel::Low, Some("minimal".into()));
    variants.push(("level map", mapped));
    let mut adaptive = rich.clone();
    adaptive.compat.adaptive_thinking = true;
    variants.push(("adaptive", adaptive));
    let mut small = rich.clone();
    small.max_tokens = 3_000;
    variants.push(("small max_tokens", small));
    let mut gemini = rich.clone();
    gemini.id = "gemini-2.5-pro".into();
    variants.push(("gemini pro", gemini));
    let mut gemini3 = rich.clone();
    gemini3.id = "gemini-3-flash".into();
    variants.push(("gemini 3", gemini3));
    for (variant, model) in variants {
        for level in levels {
            cases.push(Case {
                name: format!("thinking {level:?}, {variant}"),
                model: model.clone(),
                context: context_with_tools("hi"),
                options: with(level),
                step: Step::text("ok"),
            });
        }
    }
    cases
}

async fn record(api: Api) -> String {
    let mock = start().await;
    let mut out = String::new();
    for (number, case) in cases(&mock, api).into_iter().enumerate() {
        mock.push(case.step);
        let events = run(case.model, case.context, case.options).await;
        let requests = mock.requests();
        let request = &requests[number];
        out.push_str(&format!("## {}\n", case.name));
        out.push_str(&format!("path {}\n", request.path));
        for (name, value) in &request.headers {
            if name.starts_with("anthropic") || name == "authorization" || name.starts_with("x-") {
                out.push_str(&format!("header {name}: {value}\n"));
            }
        }
        out.push_str(&format!("body {}\n", request.body));
        for event in &events {
            out.push_str(&format!("event {}\n", event_line(event)));
        }
    }
    out
}

async fn check(api: Api, file: &str) {
    let recorded = record(api).await;
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(file);
    if std::env::var_os("ZI_UPDATE_GOLDEN").is_some() {
        std::fs::create_dir_all(path.parent().unwrap_or(&path)).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(&path, &recorded).unwrap_or_else(|e| panic!("{e}"));
        return;
    }
    let golden = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    for (number, (got, want)) in recorded.lines().zip(golden.lines()).enumerate() {
        assert_eq!(got, want, "{file} line {} differs", number + 1);
    }
    assert_eq!(
        recorded.lines().count(),
        golden.lines().count(),
        "{file}: line count differs"
    );
}

#[tokio::test]
async fn anthropic_wire_is_unchanged() {
    check(Api::AnthropicMessages, "anthropic.txt").await;
}

#[tokio::test]
async fn openai_completions_wire_is_unchanged() {
    check(Api::OpenAiCompletions, "openai_completions.txt").await;
}

#[tokio::test]
async fn openai_responses_wire_is_unchanged() {
    check(Api::OpenAiResponses, "openai_responses.txt").await;
}

#[tokio::test]
async fn google_wire_is_unchanged() {
    check(Api::GoogleGenerativeAi, "google.txt").await;
}
