//! The openai-completions client against the mock LLM server over real loopback HTTP.

use std::sync::Arc;
use std::time::Duration;

use crate::support::{
    KEY, WAIT, content_events, context, error_text, options, outcome, run, start, user,
};
use serde_json::{Value, json};
use zi_ai::model::{MaxTokensField, ModelCost};
use zi_ai::stream::ABORTED_MESSAGE;
use zi_ai::{Api, AssistantMessageEvent, LlmContext, Model, ToolSpec, stream_assistant};
use zi_protocol::ThinkingLevel;
use zi_protocol::message::{
    AgentMessage, AssistantMessage, CompactionSummaryMessage, ContentBlock, CustomMessage,
    MessageContent, StopReason, ToolCall, ToolResultMessage, Usage, UserMessage,
};
use zi_test_support::mock_llm::{MockLlm, MockToolCall, MockUsage, Step};

/// The shared test model on this API, with a smaller window and output bound.
fn model(mock: &MockLlm) -> Model {
    Model {
        context_window: 128_000,
        max_tokens: 4_096,
        ..crate::support::model(mock, Api::OpenAiCompletions)
    }
}

fn text_delta(content_index: usize, delta: &str) -> AssistantMessageEvent {
    AssistantMessageEvent::TextDelta {
        content_index,
        delta: delta.into(),
    }
}

#[tokio::test]
async fn plain_text_streams_as_one_text_block() {
    let mock = start().await;
    mock.push(Step::Text(vec![
        "Hel".into(),
        "lo, ".into(),
        "wörld".into(),
    ]));
    let events = run(model(&mock), context("hi"), options()).await;
    assert_eq!(
        content_events(&events),
        &[
            AssistantMessageEvent::TextStart { content_index: 0 },
            text_delta(0, "Hel"),
            text_delta(0, "lo, "),
            text_delta(0, "wörld"),
            AssistantMessageEvent::TextEnd {
                content_index: 0,
                content: "Hello, wörld".into()
            },
        ]
    );
    let (reason, message) = outcome(&events);
    assert_eq!(reason, StopReason::Stop);
    assert_eq!(message.stop_reason, StopReason::Stop);
    assert_eq!(message.content, vec![ContentBlock::text("Hello, wörld")]);
    assert_eq!(message.api, "openai-completions");
    assert_eq!(
        (message.provider.as_str(), message.model.as_str()),
        ("mock", "mock-model")
    );
    assert_eq!(message.response_id.as_deref(), Some("chatcmpl-mock-1"));
    assert_eq!(message.error_message, None);
    assert_eq!(
        message.usage.output, 3,
        "the mock reports one token per delta"
    );
    assert_eq!(mock.wait_for_disconnects(0, Duration::ZERO).await, 0);
}

#[tokio::test]
async fn thinking_then_text_are_two_blocks() {
    let mock = start().await;
    mock.push(Step::Reply {
        thinking: vec!["Let me ".into(), "think.".into()],
        text: vec!["Answer".into()],
        tool_calls: vec![],
        finish_reason: "stop".into(),
        usage: None,
    });
    let events = run(model(&mock), context("hi"), options()).await;
    assert_eq!(
        content_events(&events),
        &[
            AssistantMessageEvent::ThinkingStart { content_index: 0 },
            AssistantMessageEvent::ThinkingDelta {
                content_index: 0,
                delta: "Let me ".into()
            },
            AssistantMessageEvent::ThinkingDelta {
                content_index: 0,
                delta: "think.".into()
            },
            AssistantMessageEvent::ThinkingEnd {
                content_index: 0,
                content: "Let me think.".into()
            },
            AssistantMessageEvent::TextStart { content_index: 1 },
            text_delta(1, "Answer"),
            AssistantMessageEvent::TextEnd {
                content_index: 1,
                content: "Answer".into()
            },
        ]
    );
    let (reason, message) = outcome(&events);
    assert_eq!(reason, StopReason::Stop);
    assert_eq!(
        message.content,
        vec![
            ContentBlock::Thinking {
                thinking: "Let me think.".into(),
                thinking_signature: None,
                redacted: None
            },
            ContentBlock::text("Answer"),
        ]
    );
}

#[tokio::test]
async fn two_tool_calls_stream_argument_fragments() {
    let mock = start().await;
    mock.push(Step::Reply {
        thinking: vec![],
        text: vec!["Looking.".into()],
        tool_calls: vec![
            MockToolCall {
                id: "call_a".into(),
                name: "read".into(),
                args_chunks: vec!["{\"pa".into(), "th\":\"a.txt\"".into(), "}".into()],
            },
            MockToolCall {
                id: "call_b".into(),
                name: "bash".into(),
                args_chunks: vec!["{\"command\":".into(), "\"ls\"}".into()],
            },
        ],
        finish_reason: "tool_calls".into(),
        usage: None,
    });
    let events = run(model(&mock), context("hi"), options()).await;
    let read = ToolCall {
        id: "call_a".into(),
        name: "read".into(),
        arguments: json!({"path": "a.txt"}),
        thought_signature: None,
    };
    let bash = ToolCall {
        id: "call_b".into(),
        name: "bash".into(),
        arguments: json!({"command": "ls"}),
        thought_signature: None,
    };
    let delta = |content_index, delta: &str| AssistantMessageEvent::ToolCallDelta {
        content_index,
        delta: delta.into(),
    };
    assert_eq!(
        content_events(&events),
        &[
            AssistantMessageEvent::TextStart { content_index: 0 },
            text_delta(0, "Looking."),
            AssistantMessageEvent::TextEnd {
                content_index: 0,
                content: "Looking.".into()
            },
            AssistantMessageEvent::ToolCallStart {
                content_index: 1,
                id: "call_a".into(),
                name: "read".into()
            },
            delta(1, "{\"pa"),
            delta(1, "th\":\"a.txt\""),
            delta(1, "}"),
            AssistantMessageEvent::ToolCallStart {
                content_index: 2,
                id: "call_b".into(),
                name: "bash".into()
            },
            delta(2, "{\"command\":"),
            delta(2, "\"ls\"}"),
            AssistantMessageEvent::ToolCallEnd {
                content_index: 1,
                tool_call: read.clone()
            },
            AssistantMessageEvent::ToolCallEnd {
                content_index: 2,
                tool_call: bash.clone()
            },
        ]
    );
    let (reason, message) = outcome(&events);
    assert_eq!(reason, StopReason::ToolUse);
    assert_eq!(
        message.tool_calls().cloned().collect::<Vec<_>>(),
        vec![read, bash]
    );
}

#[tokio::test]
async fn invalid_or_empty_tool_arguments_become_empty_objects() {
    let mock = start().await;
    mock.push(Step::Reply {
        thinking: vec![],
        text: vec![],
        tool_calls: vec![
            MockToolCall {
                id: "c1".into(),
                name: "read".into(),
                args_chunks: vec!["{\"path\":".into()],
            },
            MockToolCall {
                id: "c2".into(),
                name: "kill_task".into(),
                args_chunks: vec![],
            },
        ],
        finish_reason: "tool_calls".into(),
        usage: None,
    });
    let (reason, message) = outcome(&run(model(&mock), context("hi"), options()).await);
    assert_eq!(reason, StopReason::ToolUse);
    let arguments: Vec<Value> = message
        .tool_calls()
        .map(|call| call.arguments.clone())
        .collect();
    assert_eq!(arguments, vec![json!({}), json!({})]);
}

#[tokio::test]
async fn usage_and_cost_come_from_the_usage_chunk() {
    let mock = start().await;
    mock.push(Step::Reply {
        thinking: vec![],
        text: vec!["ok".into()],
        tool_calls: vec![],
        finish_reason: "length".into(),
        usage: Some(MockUsage {
            prompt_tokens: 1_000,
            completion_tokens: 200,
            cached_tokens: 400,
        }),
    });
    let mut priced = model(&mock);
    priced.cost = ModelCost {
        input: 3.0,
        output: 15.0,
        cache_read: 0.3,
        cache_write: 3.75,
    };
    let (reason, message) = outcome(&run(priced, context("hi"), options()).await);
    assert_eq!(reason, StopReason::Length);
    let usage = &message.usage;
    assert_eq!(
        (
            usage.input,
            usage.cache_read,
            usage.output,
            usage.cache_write,
            usage.total_tokens
        ),
        (600, 400, 200, 0, 1_200)
    );
    let close = |a: f64, b: f64| (a - b).abs() < 1e-12;
    assert!(close(usage.cost.input, 0.0018), "{usage:?}");
    assert!(close(usage.cost.output, 0.003), "{usage:?}");
    assert!(close(usage.cost.cache_read, 0.00012), "{usage:?}");
    assert!(close(usage.cost.cache_write, 0.0), "{usage:?}");
    assert!(
        close(usage.cost.total, 0.0018 + 0.003 + 0.00012),
        "{usage:?}"
    );
}

#[tokio::test]
async fn without_usage_in_streaming_no_usage_is_requested_or_reported() {
    let mock = start().await;
    mock.push(Step::text("ok"));
    let mut plain = model(&mock);
    plain.compat.supports_usage_in_streaming = false;
    let (reason, message) = outcome(&run(plain, context("hi"), options()).await);
    assert_eq!(reason, StopReason::Stop);
    assert_eq!(message.usage, Usage::default());
    let requests = mock.requests();
    assert!(
        requests[0].body.get("stream_options").is_none(),
        "{}",
        requests[0].body
    );
}

#[tokio::test]
async fn http_errors_become_error_messages() {
    let mock = start().await;
    for (status, message) in [
        (429, "Rate limit reached"),
        (500, "The server had an error"),
        (400, "Invalid 'messages'"),
    ] {
        mock.push(Step::HttpError {
            status,
            message: message.into(),
        });
        let events = run(model(&mock), context("hi"), options()).await;
        assert_eq!(events.len(), 2, "{events:?}");
        let (reason, message_text) = error_text(&events);
        assert_eq!(reason, StopReason::Error);
        assert_eq!(message_text, format!("{status} {message}"));
        let (_, message) = outcome(&events);
        assert!(message.content.is_empty());
        assert_eq!(message.stop_reason, StopReason::Error);
    }
    // An empty script is an HTTP 500 of the mock itself.
    let events = run(model(&mock), context("hi"), options()).await;
    assert_eq!(
        error_text(&events),
        (StopReason::Error, "500 mock script exhausted".to_string())
    );
}

#[tokio::test]
async fn mid_stream_error_keeps_the_partial_content() {
    let mock = start().await;
    mock.push(Step::MidStreamError {
        text: vec!["partial ".into(), "text".into()],
        message: "Upstream overloaded".into(),
    });
    let events = run(model(&mock), context("hi"), options()).await;
    let (reason, message) = outcome(&events);
    assert_eq!(reason, StopReason::Error);
    assert_eq!(
        message.error_message.as_deref(),
        Some("Upstream overloaded")
    );
    assert_eq!(message.text(), "partial text");
}

#[tokio::test]
async fn premature_end_is_an_error() {
    let mock = start().await;
    mock.push(Step::Truncated(vec!["cut ".into(), "off".into()]));
    let events = run(model(&mock), context("hi"), options()).await;
    let (reason, message) = outcome(&events);
    assert_eq!(reason, StopReason::Error);
    assert_eq!(
        message.error_message.as_deref(),
        Some("Provider stream ended before the final event")
    );
    assert_eq!(message.text(), "cut off");
}

#[tokio::test]
async fn unknown_finish_reason_is_an_error_and_content_filter_a_refusal() {
    let mock = start().await;
    for (reason, expected) in [
        (
            "weird_reason",
            "Provider stopped with finish_reason weird_reason",
        ),
        (
            "content_filter",
            "The model refused to answer (finish_reason content_filter)",
        ),
    ] {
        mock.push(Step::Reply {
            thinking: vec![],
            text: vec!["I can't".into()],
            tool_calls: vec![],
            finish_reason: reason.into(),
            usage: None,
        });
        let events = run(model(&mock), context("hi"), options()).await;
        assert_eq!(
            error_text(&events),
            (StopReason::Error, expected.to_string())
        );
        assert_eq!(
            zi_ai::classify::is_refusal(expected),
            reason == "content_filter"
        );
    }
}

#[tokio::test]
async fn cancelling_a_hanging_stream_aborts_and_closes_the_connection() {
    let mock = start().await;
    mock.push(Step::Hang(vec!["still ".into(), "going".into()]));
    let opts = options();
    let cancel = opts.cancel.clone();
    let model = model(&mock);
    let mut partial = zi_ai::stream::empty_assistant(&model);
    let mut receiver = stream_assistant(Arc::new(model), context("hi"), opts);
    let mut events = Vec::new();
    while !events.contains(&text_delta(0, "going")) {
        match tokio::time::timeout(WAIT, receiver.next_event(&mut partial)).await {
            Ok(Some(event)) => events.push(event),
            other => panic!("expected more events, got {other:?} after {events:?}"),
        }
    }
    assert_eq!(mock.disconnects(), 0);
    cancel.cancel();
    let last = tokio::time::timeout(WAIT, receiver.next_event(&mut partial))
        .await
        .unwrap_or_else(|_| panic!("no abort"));
    let Some(AssistantMessageEvent::Error { reason, error }) = last else {
        panic!("expected an error event, got {last:?}");
    };
    assert_eq!(reason, StopReason::Aborted);
    assert_eq!(error.stop_reason, StopReason::Aborted);
    assert_eq!(error.error_message.as_deref(), Some(ABORTED_MESSAGE));
    assert_eq!(error.text(), "still going");
    assert!(
        tokio::time::timeout(WAIT, receiver.next_event(&mut partial))
            .await
            .ok()
            .flatten()
            .is_none()
    );
    assert_eq!(mock.wait_for_disconnects(1, WAIT).await, 1);
}

#[tokio::test]
async fn cancelled_before_the_request_sends_nothing() {
    let mock = start().await;
    mock.push(Step::text("never"));
    let opts = options();
    opts.cancel.cancel();
    let events = run(model(&mock), context("hi"), opts).await;
    assert_eq!(
        error_text(&events),
        (StopReason::Aborted, ABORTED_MESSAGE.to_string())
    );
    assert!(mock.requests().is_empty());
}

#[tokio::test]
async fn silence_longer_than_the_idle_timeout_fails_the_stream() {
    let mock = start().await;
    mock.push(Step::Hang(vec!["hello".into()]));
    let mut opts = options();
    opts.idle_timeout = Duration::from_millis(300);
    let events = run(model(&mock), context("hi"), opts).await;
    let (reason, message) = outcome(&events);
    assert_eq!(reason, StopReason::Error);
    assert_eq!(
        message.error_message.as_deref(),
        Some("Provider stream timed out after 0.3s without data")
    );
    assert_eq!(message.text(), "hello");
    assert_eq!(mock.wait_for_disconnects(1, WAIT).await, 1);
}

#[tokio::test]
async fn unreachable_server_is_a_network_error() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("{e}"));
    let port = listener
        .local_addr()
        .unwrap_or_else(|e| panic!("{e}"))
        .port();
    drop(listener);
    let mock = start().await;
    let mut unreachable = model(&mock);
    unreachable.base_url = format!("http://127.0.0.1:{port}/v1");
    let (reason, text) = error_text(&run(unreachable, context("hi"), options()).await);
    assert_eq!(reason, StopReason::Error);
    assert!(text.starts_with("Network error: "), "{text}");
}

#[tokio::test]
async fn long_reply_of_tiny_deltas_arrives_whole() {
    let mock = start().await;
    mock.push(Step::Bytes {
        total_bytes: 64 * 1024,
        delta_bytes: 4,
    });
    let events = run(model(&mock), context("hi"), options()).await;
    let deltas = events
        .iter()
        .filter(|event| matches!(event, AssistantMessageEvent::TextDelta { .. }))
        .count();
    assert_eq!(deltas, 16_384);
    let (reason, message) = outcome(&events);
    assert_eq!(reason, StopReason::Stop);
    assert_eq!(message.text().len(), 64 * 1024);
    assert_eq!(mock.disconnects(), 0);
}

#[tokio::test]
async fn request_carries_system_prompt_tools_max_tokens_and_auth() {
    let mock = start().await;
    mock.push(Step::text("ok"));
    let mut plain = model(&mock);
    plain.compat.max_tokens_field = MaxTokensField::MaxTokens;
    plain
        .headers
        .insert("X-Literal".into(), "literal-value".into());
    plain
        .headers
        .insert("X-Command".into(), "!printf ' from-command \\n'".into());
    let mut ctx = context("hi");
    ctx.tools.push(ToolSpec {
        name: "read".into(),
        description: "Read a file".into(),
        parameters: json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}),
    });
    let mut opts = options();
    opts.thinking = ThinkingLevel::High;
    outcome(&run(plain, ctx, opts).await);
    let requests = mock.wait_for_requests(1, WAIT).await;
    let request = &requests[0];
    assert_eq!(request.path, "/v1/chat/completions");
    assert_eq!(
        request.header("authorization"),
        Some(format!("Bearer {KEY}").as_str())
    );
    assert_eq!(request.header("x-literal"), Some("literal-value"));
    assert_eq!(request.header("x-command"), Some("from-command"));
    assert_eq!(request.header("content-type"), Some("application/json"));
    assert_eq!(
        request.body,
        json!({
            "model": "mock-model",
            "messages": [{"role": "system", "content": "You are helpful."}, {"role": "user", "content": "hi"}],
            "stream": true,
            "stream_options": {"include_usage": true},
            "max_tokens": 4096,
            "tools": [{"type": "function", "function": {"name": "read", "description": "Read a file",
                "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}}],
        }),
        "a non-reasoning model gets no reasoning_effort even at high thinking"
    );
}

#[tokio::test]
async fn reasoning_models_get_developer_role_and_effort() {
    let mock = start().await;
    for _ in 0..4 {
        mock.push(Step::text("ok"));
    }
    let mut reasoning = model(&mock);
    reasoning.reasoning = true;
    reasoning.compat.supports_developer_role = true;
    reasoning
        .thinking_level_map
        .insert(ThinkingLevel::Minimal, Some("low".into()));
    let with = |level: ThinkingLevel| {
        let mut opts = options();
        opts.thinking = level;
        opts.api_key = None;
        opts
    };
    outcome(&run(reasoning.clone(), context("a"), with(ThinkingLevel::High)).await);
    outcome(
        &run(
            reasoning.clone(),
            context("b"),
            with(ThinkingLevel::Minimal),
        )
        .await,
    );
    outcome(&run(reasoning.clone(), context("c"), with(ThinkingLevel::Off)).await);
    let mut no_effort = reasoning.clone();
    no_effort.compat.supports_reasoning_effort = false;
    no_effort.compat.supports_developer_role = false;
    outcome(&run(no_effort, context("d"), with(ThinkingLevel::High)).await);

    let requests = mock.wait_for_requests(4, WAIT).await;
    let bodies: Vec<&Value> = requests.iter().map(|request| &request.body).collect();
    assert_eq!(
        bodies[0]["messages"][0],
        json!({"role": "developer", "content": "You are helpful."})
    );
    assert_eq!(bodies[0]["reasoning_effort"], "high");
    assert_eq!(bodies[0]["max_completion_tokens"], 4096);
    assert!(bodies[0].get("max_tokens").is_none());
    assert!(bodies[0].get("tools").is_none());
    assert_eq!(
        bodies[1]["reasoning_effort"], "low",
        "mapped through thinkingLevelMap"
    );
    assert!(
        bodies[2].get("reasoning_effort").is_none(),
        "thinking off sends no effort"
    );
    assert!(
        bodies[3].get("reasoning_effort").is_none(),
        "compat turns effort off"
    );
    assert_eq!(bodies[3]["messages"][0]["role"], "system");
    assert!(
        requests
            .iter()
            .all(|request| request.header("authorization").is_none()),
        "no key, no header"
    );
}

#[tokio::test]
async fn conversation_history_is_converted_to_chat_messages() {
    let mock = start().await;
    mock.push(Step::text("ok"));
    let call = ToolCall {
        id: "call_1".into(),
        name: "bash".into(),
        arguments: json!({"command": "ls"}),
        thought_signature: None,
    };
    let assistant = |content: Vec<ContentBlock>, stop_reason| {
        AgentMessage::Assistant(AssistantMessage {
            content,
            api: "openai-completions".into(),
            provider: "mock".into(),
            model: "mock-model".into(),
            usage: Usage::default(),
            stop_reason,
            error_message: None,
            response_id: None,
            timestamp: 2,
        })
    };
    let messages = vec![
        AgentMessage::CompactionSummary(CompactionSummaryMessage {
            summary: "Earlier work.".into(),
            tokens_before: 10,
            estimated_tokens_after: 2,
            timestamp: 0,
        }),
        AgentMessage::User(UserMessage {
            content: MessageContent::Parts(vec![
                ContentBlock::text("list files"),
                ContentBlock::Image {
                    data: "QUJD".into(),
                    mime_type: "image/png".into(),
                },
            ]),
            timestamp: 1,
        }),
        assistant(vec![], StopReason::Aborted),
        assistant(
            vec![
                ContentBlock::Thinking {
                    thinking: "secret".into(),
                    thinking_signature: None,
                    redacted: None,
                },
                ContentBlock::text("Running ls."),
                ContentBlock::ToolCall(call),
            ],
            StopReason::ToolUse,
        ),
        AgentMessage::ToolResult(ToolResultMessage {
            tool_call_id: "call_1".into(),
            tool_name: "bash".into(),
            content: vec![ContentBlock::text("a.txt\nb.txt")],
            details: None,
            is_error: false,
            timestamp: 3,
        }),
        AgentMessage::Custom(CustomMessage {
            custom_type: "note".into(),
            content: MessageContent::Text("extension note".into()),
            display: false,
            details: None,
            timestamp: 4,
        }),
        user("thanks"),
    ];
    let ctx = LlmContext {
        system_prompt: String::new(),
        messages,
        tools: Vec::new(),
    };
    outcome(&run(model(&mock), ctx, options()).await);
    let requests = mock.wait_for_requests(1, WAIT).await;
    assert_eq!(
        requests[0].body["messages"],
        json!([
            {"role": "user", "content": "The conversation history before this point was compacted into the following checkpoint. Continue from the checkpoint and exact recent messages that follow:\n\n<summary>\nEarlier work.\n</summary>"},
            {"role": "user", "content": "list files"},
            {"role": "assistant", "content": "Running ls.", "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "bash", "arguments": "{\"command\":\"ls\"}"}}]},
            {"role": "tool", "tool_call_id": "call_1", "content": "a.txt\nb.txt"},
            {"role": "user", "content": "extension note"},
            {"role": "user", "content": "thanks"},
        ])
    );
}

#[tokio::test]
async fn failing_header_command_fails_the_stream() {
    let mock = start().await;
    mock.push(Step::text("never"));
    let mut broken = model(&mock);
    broken.headers.insert("X-Token".into(), "!exit 7".into());
    let (reason, text) = error_text(&run(broken, context("hi"), options()).await);
    assert_eq!(reason, StopReason::Error);
    assert!(
        text.starts_with("Could not resolve header X-Token"),
        "{text}"
    );
    assert!(mock.requests().is_empty());
}
