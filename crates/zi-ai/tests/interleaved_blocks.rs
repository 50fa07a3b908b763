//! One reply — thinking, text, a tool call, thinking again, a second tool call, closing text —
//! sent in each API's own event format (Codex speaks the Responses format), over real loopback HTTP, must come out of all four
//! clients as the same blocks with the same events: the clients share one block assembler.

use std::collections::BTreeMap;

use crate::support::*;
use serde_json::{Value, json};
use zi_ai::{Api, AssistantMessageEvent as E};
use zi_protocol::message::{ContentBlock, StopReason};
use zi_test_support::mock_llm::Step;

fn sse(events: Vec<Value>, done: bool) -> String {
    let mut body: String = events
        .into_iter()
        .map(|event| format!("data: {event}\n\n"))
        .collect();
    if done {
        body.push_str("data: [DONE]\n\n");
    }
    body
}

// Long on purpose: one reply written in each of the four wire formats, side by side; splitting
// it would separate the formats the test compares.
fn body(api: Api) -> String {
    match api {
        Api::AnthropicMessages => {
            let start = |index: usize, block: Value| json!({"type":"content_block_start","index":index,"content_block":block});
            let delta = |index: usize, delta: Value| json!({"type":"content_block_delta","index":index,"delta":delta});
            let stop = |index: usize| json!({"type":"content_block_stop","index":index});
            sse(
                vec![
                    json!({"type":"message_start","message":{"id":"m","usage":{"input_tokens":1}}}),
                    start(0, json!({"type":"thinking","thinking":""})),
                    delta(0, json!({"type":"thinking_delta","thinking":"Plan "})),
                    delta(0, json!({"type":"thinking_delta","thinking":"first."})),
                    stop(0),
                    start(1, json!({"type":"text","text":""})),
                    delta(1, json!({"type":"text_delta","text":"Hel"})),
                    delta(1, json!({"type":"text_delta","text":"lo"})),
                    stop(1),
                    start(
                        2,
                        json!({"type":"tool_use","id":"call_1","name":"read","input":{}}),
                    ),
                    delta(
                        2,
                        json!({"type":"input_json_delta","partial_json":"{\"path\":"}),
                    ),
                    delta(
                        2,
                        json!({"type":"input_json_delta","partial_json":"\"a\"}"}),
                    ),
                    stop(2),
                    start(3, json!({"type":"thinking","thinking":""})),
                    delta(3, json!({"type":"thinking_delta","thinking":"Then b."})),
                    stop(3),
                    start(
                        4,
                        json!({"type":"tool_use","id":"call_2","name":"read","input":{}}),
                    ),
                    delta(
                        4,
                        json!({"type":"input_json_delta","partial_json":"{\"path\":\"b\"}"}),
                    ),
                    stop(4),
                    start(5, json!({"type":"text","text":""})),
                    delta(5, json!({"type":"text_delta","text":"Done."})),
                    stop(5),
                    json!({"type":"message_delta","delta":{"stop_reason":"tool_use"}}),
                    json!({"type":"message_stop"}),
                ],
                false,
            )
        }
        Api::OpenAiResponses | Api::OpenAiCodexResponses => {
            let added = |index: usize, item: Value| json!({"type":"response.output_item.added","output_index":index,"item":item});
            let done = |index: usize, item: Value| json!({"type":"response.output_item.done","output_index":index,"item":item});
            let delta = |kind: &str, index: usize, text: &str| json!({"type":kind,"output_index":index,"delta":text});
            let call = |id: &str, arguments: &str| json!({"type":"function_call","id":format!("fc_{id}"),"call_id":format!("call_{id}"),"name":"read","arguments":arguments});
            sse(
                vec![
                    json!({"type":"response.created","response":{"id":"r"}}),
                    added(0, json!({"type":"reasoning"})),
                    delta("response.reasoning_summary_text.delta", 0, "Plan "),
                    delta("response.reasoning_summary_text.delta", 0, "first."),
                    done(0, json!({"type":"reasoning"})),
                    added(1, json!({"type":"message"})),
                    delta("response.output_text.delta", 1, "Hel"),
                    delta("response.output_text.delta", 1, "lo"),
                    done(1, json!({"type":"message"})),
                    added(2, call("1", "")),
                    delta("response.function_call_arguments.delta", 2, "{\"path\":"),
                    delta("response.function_call_arguments.delta", 2, "\"a\"}"),
                    done(2, call("1", "{\"path\":\"a\"}")),
                    added(3, json!({"type":"reasoning"})),
                    delta("response.reasoning_text.delta", 3, "Then b."),
                    done(3, json!({"type":"reasoning"})),
                    added(4, call("2", "")),
                    delta(
                        "response.function_call_arguments.delta",
                        4,
                        "{\"path\":\"b\"}",
                    ),
                    done(4, call("2", "{\"path\":\"b\"}")),
                    added(5, json!({"type":"message"})),
                    delta("response.output_text.delta", 5, "Done."),
                    done(5, json!({"type":"message"})),
                    json!({"type":"response.completed","response":{"status":"completed"}}),
                ],
                false,
            )
        }
        Api::GoogleGenerativeAi => {
            let parts =
                |parts: Value| json!({"candidates":[{"content":{"role":"model","parts":parts}}]});
            sse(
                vec![
                    parts(json!([{"text":"Plan ","thought":true}])),
                    parts(json!([{"text":"first.","thought":true}])),
                    parts(json!([{"text":"Hel"}, {"text":"lo"}])),
                    parts(
                        json!([{"functionCall":{"id":"call_1","name":"read","args":{"path":"a"}}}]),
                    ),
                    parts(json!([{"text":"Then b.","thought":true}])),
                    parts(
                        json!([{"functionCall":{"id":"call_2","name":"read","args":{"path":"b"}}}, {"text":"Done."}]),
                    ),
                    json!({"candidates":[{"content":{"parts":[]},"finishReason":"STOP"}]}),
                ],
                false,
            )
        }
        Api::OpenAiCompletions => {
            let delta = |delta: Value| json!({"choices":[{"index":0,"delta":delta}]});
            let call = |index: usize, id: Option<&str>, arguments: &str| {
                let mut call = json!({"index":index,"function":{"arguments":arguments}});
                if let Some(id) = id {
                    call["id"] = json!(id);
                    call["function"]["name"] = json!("read");
                }
                delta(json!({"tool_calls":[call]}))
            };
            sse(
                vec![
                    delta(json!({"reasoning_content":"Plan "})),
                    delta(json!({"reasoning_content":"first."})),
                    delta(json!({"content":"Hel"})),
                    delta(json!({"content":"lo"})),
                    call(0, Some("call_1"), "{\"path\":"),
                    call(0, None, "\"a\"}"),
                    delta(json!({"reasoning_content":"Then b."})),
                    call(1, Some("call_2"), "{\"path\":\"b\"}"),
                    delta(json!({"content":"Done."})),
                    json!({"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}),
                ],
                true,
            )
        }
    }
}

/// What one content block went through: its start, the concatenation of its deltas, its end.
#[derive(Debug, PartialEq)]
struct BlockStory {
    start: String,
    deltas: String,
    end: String,
}

/// The events of each block, by content index, with the API's tool-call id suffix
/// (`call_id|item_id`) dropped; and the content indices in the order their blocks started.
fn stories(events: &[E]) -> (BTreeMap<usize, BlockStory>, Vec<usize>) {
    let mut stories: BTreeMap<usize, BlockStory> = BTreeMap::new();
    let mut order = Vec::new();
    let call_id = |id: &str| id.split('|').next().unwrap_or("").to_string();
    for event in events {
        let (index, start, delta, end) = match event {
            E::TextStart { content_index } => {
                (*content_index, Some("text".to_string()), None, None)
            }
            E::ThinkingStart { content_index } => {
                (*content_index, Some("thinking".to_string()), None, None)
            }
            E::ToolCallStart {
                content_index,
                id,
                name,
            } => (
                *content_index,
                Some(format!("call {} {name}", call_id(id))),
                None,
                None,
            ),
            E::TextDelta {
                content_index,
                delta,
            }
            | E::ThinkingDelta {
                content_index,
                delta,
            }
            | E::ToolCallDelta {
                content_index,
                delta,
            } => (*content_index, None, Some(delta.clone()), None),
            E::TextEnd {
                content_index,
                content,
            }
            | E::ThinkingEnd {
                content_index,
                content,
            } => (*content_index, None, None, Some(content.clone())),
            E::ToolCallEnd {
                content_index,
                tool_call,
            } => (
                *content_index,
                None,
                None,
                Some(format!(
                    "{} {} {}",
                    call_id(&tool_call.id),
                    tool_call.name,
                    tool_call.arguments
                )),
            ),
            E::Start | E::Done { .. } | E::Error { .. } => continue,
        };
        let story = stories.entry(index).or_insert_with(|| BlockStory {
            start: String::new(),
            deltas: String::new(),
            end: String::new(),
        });
        if let Some(start) = start {
            assert!(story.start.is_empty(), "block {index} started twice");
            story.start = start;
            order.push(index);
        }
        if let Some(delta) = delta {
            assert!(story.end.is_empty(), "delta after the end of block {index}");
            story.deltas.push_str(&delta);
        }
        if let Some(end) = end {
            assert!(story.end.is_empty(), "block {index} ended twice");
            story.end = end;
        }
    }
    (stories, order)
}

#[tokio::test]
async fn interleaved_blocks_come_out_the_same_from_every_api() {
    let mock = start().await;
    let apis = [
        Api::OpenAiCompletions,
        Api::AnthropicMessages,
        Api::OpenAiResponses,
        Api::OpenAiCodexResponses,
        Api::GoogleGenerativeAi,
    ];
    let mut results = Vec::new();
    for api in apis {
        mock.push(Step::Sse {
            body: body(api),
            hang: false,
        });
        let mut options = options();
        // Codex requests name the ChatGPT account.
        options.account_id = Some("acct-1".into());
        let events = run(model(&mock, api), context("go"), options).await;
        let (reason, message) = outcome(&events);
        assert_eq!(reason, StopReason::ToolUse, "{api:?}");
        let (stories, order) = stories(&events);
        assert_eq!(order, [0, 1, 2, 3, 4, 5], "{api:?}: blocks start in order");
        // A text or thinking block ends before the next block starts.
        let position = |wanted: &dyn Fn(&E) -> bool| events.iter().position(wanted);
        for index in [0, 1, 3] {
            let end = position(
                &|e| matches!(e, E::TextEnd { content_index, .. } | E::ThinkingEnd { content_index, .. } if *content_index == index),
            );
            let next = position(
                &|e| matches!(e, E::TextStart { content_index } | E::ThinkingStart { content_index } | E::ToolCallStart { content_index, .. } if *content_index == index + 1),
            );
            assert!(
                end < next,
                "{api:?}: block {index} ends before the next starts"
            );
        }
        let content: Vec<ContentBlock> = message
            .content
            .into_iter()
            .map(|block| match block {
                ContentBlock::ToolCall(mut call) => {
                    call.id = call.id.split('|').next().unwrap_or("").to_string();
                    ContentBlock::ToolCall(call)
                }
                // Signatures are each API's own (Responses keeps its reasoning items).
                ContentBlock::Thinking { thinking, .. } => ContentBlock::Thinking {
                    thinking,
                    thinking_signature: None,
                    redacted: None,
                },
                ContentBlock::Text { text, .. } => ContentBlock::text(text),
                other => other,
            })
            .collect();
        results.push((api, stories, content));
    }
    let expected = |start: &str, deltas: &str, end: &str| BlockStory {
        start: start.into(),
        deltas: deltas.into(),
        end: end.into(),
    };
    let want = BTreeMap::from([
        (0, expected("thinking", "Plan first.", "Plan first.")),
        (1, expected("text", "Hello", "Hello")),
        (
            2,
            expected(
                "call call_1 read",
                r#"{"path":"a"}"#,
                r#"call_1 read {"path":"a"}"#,
            ),
        ),
        (3, expected("thinking", "Then b.", "Then b.")),
        (
            4,
            expected(
                "call call_2 read",
                r#"{"path":"b"}"#,
                r#"call_2 read {"path":"b"}"#,
            ),
        ),
        (5, expected("text", "Done.", "Done.")),
    ]);
    let (_, _, first_content) = &results[0];
    for (api, stories, content) in &results {
        assert_eq!(stories, &want, "{api:?}");
        assert_eq!(content, first_content, "{api:?}: final content");
    }
    assert_eq!(first_content.len(), 6);
}
