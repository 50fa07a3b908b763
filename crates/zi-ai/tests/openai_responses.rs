//! The openai-responses client against the mock server's Responses event stream, over real
//! loopback HTTP.

use crate::support::*;
use serde_json::json;
use zi_ai::Api;
use zi_ai::AssistantMessageEvent as E;
use zi_ai::classify::is_retryable;
use zi_protocol::ThinkingLevel;
use zi_protocol::message::{ContentBlock, StopReason};
use zi_test_support::mock_llm::{MockToolCall, MockUsage, Step};

#[tokio::test]
async fn reasoning_text_function_calls_and_usage() {
    let mock = start().await;
    mock.push(Step::Reply {
        thinking: vec!["Plan ".into(), "it.".into()],
        text: vec!["Reading.".into()],
        tool_calls: vec![
            MockToolCall {
                id: "call_a".into(),
                name: "read".into(),
                args_chunks: vec!["{\"path\"".into(), ":\"a\"}".into()],
            },
            MockToolCall {
                id: "call_b".into(),
                name: "read".into(),
                args_chunks: vec!["{\"path\":\"b\"}".into()],
            },
        ],
        finish_reason: "tool_calls".into(),
        usage: Some(MockUsage {
            prompt_tokens: 100,
            completion_tokens: 20,
            cached_tokens: 60,
        }),
    });
    let mut model = model(&mock, Api::OpenAiResponses);
    model.cost.input = 1.0;
    model.cost.cache_read = 0.1;
    model.cost.output = 10.0;
    let events = run(model, context("hi"), options()).await;
    let (reason, message) = outcome(&events);
    assert_eq!(reason, StopReason::ToolUse);
    assert_eq!(
        content_events(&events)[..3],
        [
            E::ThinkingStart { content_index: 0 },
            E::ThinkingDelta {
                content_index: 0,
                delta: "Plan ".into()
            },
            E::ThinkingDelta {
                content_index: 0,
                delta: "it.".into()
            },
        ]
    );
    let ContentBlock::Thinking {
        thinking,
        thinking_signature: Some(signature),
        ..
    } = &message.content[0]
    else {
        panic!("{:?}", message.content[0]);
    };
    assert_eq!(thinking, "Plan it.");
    let item: serde_json::Value = serde_json::from_str(signature).unwrap_or_default();
    assert_eq!(item["encrypted_content"], "mock-signature");
    assert_eq!(message.text(), "Reading.");
    let calls: Vec<_> = message
        .tool_calls()
        .map(|c| (c.id.clone(), c.arguments.clone()))
        .collect();
    assert_eq!(
        calls,
        [
            ("call_a|fc_call_a".to_string(), json!({"path": "a"})),
            ("call_b|fc_call_b".to_string(), json!({"path": "b"}))
        ]
    );
    assert_eq!(message.response_id.as_deref(), Some("resp_mock_1"));
    assert_eq!(
        (
            message.usage.input,
            message.usage.cache_read,
            message.usage.output,
            message.usage.total_tokens
        ),
        (40, 60, 20, 120)
    );
    let expected = 40.0 / 1e6 + 60.0 * 0.1 / 1e6 + 20.0 * 10.0 / 1e6;
    assert!((message.usage.cost.total - expected).abs() < 1e-12);
}

#[tokio::test]
async fn request_carries_input_items_tools_and_effort() {
    let mock = start().await;
    mock.push(Step::text("ok"));
    let mut model = model(&mock, Api::OpenAiResponses);
    model.reasoning = true;
    let mut opts = options();
    opts.thinking = ThinkingLevel::High;
    run(model.clone(), context_with_tools("hi"), opts).await;
    let request = &mock.requests()[0];
    assert_eq!(request.path, "/v1/responses");
    assert_eq!(
        request.header("authorization"),
        Some("Bearer sk-vendor-test")
    );
    let body = &request.body;
    assert_eq!(body["stream"], true);
    assert_eq!(body["store"], false);
    assert_eq!(
        body["reasoning"],
        json!({"effort": "high", "summary": "auto"})
    );
    assert_eq!(body["include"], json!(["reasoning.encrypted_content"]));
    assert_eq!(body["prompt_cache_key"], "session-1");
    assert_eq!(
        body["input"],
        json!([{"role": "developer", "content": "You are helpful."},
               {"role": "user", "content": [{"type": "input_text", "text": "hi"}]}])
    );
    assert_eq!(body["tools"][0]["type"], "function");
    assert_eq!(body["tools"][0]["name"], "read");

    // Off: the map's `off` value (gpt-5.1's "none"), else no reasoning parameter.
    mock.push(Step::text("ok"));
    mock.push(Step::text("ok"));
    run(model.clone(), context("hi"), options()).await;
    model
        .thinking_level_map
        .insert(ThinkingLevel::Off, Some("none".into()));
    run(model, context("hi"), options()).await;
    let requests = mock.requests();
    assert!(requests[1].body.get("reasoning").is_none());
    assert_eq!(requests[2].body["reasoning"]["effort"], "none");
}

#[tokio::test]
async fn history_replays_calls_and_outputs_by_call_id() {
    let mock = start().await;
    mock.push(Step::text("done"));
    let model = model(&mock, Api::OpenAiResponses);
    let mut context = history_context(&model);
    // The responses form of an id: call_id|item_id.
    for message in &mut context.messages {
        match message {
            zi_protocol::message::AgentMessage::Assistant(a) => {
                for block in &mut a.content {
                    if let ContentBlock::ToolCall(call) = block
                        && call.id == "call_2"
                    {
                        call.id = "call_2|fc_2".into();
                    }
                }
            }
            zi_protocol::message::AgentMessage::ToolResult(_) => {}
            _ => {}
        }
    }
    run(model, context, options()).await;
    let input = mock.requests()[0].body["input"].clone();
    assert_eq!(
        input,
        json!([
            {"role": "user", "content": [{"type": "input_text", "text": "read a and b"}]},
            {"type": "function_call", "call_id": "call_1|x", "name": "read", "arguments": "{\"path\":\"a\"}"},
            {"type": "function_call", "call_id": "call_2", "id": "fc_2", "name": "read", "arguments": "{\"path\":\"b\"}"},
            {"type": "function_call_output", "call_id": "call_1|x", "output": "A"},
            {"type": "function_call_output", "call_id": "call_2", "output": "No result provided"},
            {"role": "user", "content": [{"type": "input_text", "text": "thanks"}]}
        ])
    );
}

#[tokio::test]
async fn failures_incomplete_and_premature_end() {
    let mock = start().await;
    mock.push(Step::HttpError {
        status: 429,
        message: "You exceeded your current quota, please check your plan and billing details."
            .into(),
    });
    mock.push(Step::HttpError {
        status: 500,
        message: "The server had an error".into(),
    });
    mock.push(Step::MidStreamError {
        text: vec!["par".into()],
        message: "Rate limit reached for requests".into(),
    });
    mock.push(Step::Truncated(vec!["cut".into()]));
    mock.push(Step::Reply {
        thinking: vec![],
        text: vec!["long".into()],
        tool_calls: vec![],
        finish_reason: "length".into(),
        usage: None,
    });
    let model = model(&mock, Api::OpenAiResponses);
    let mut results = Vec::new();
    for _ in 0..4 {
        results.push(error_text(
            &run(model.clone(), context("hi"), options()).await,
        ));
    }
    assert!(!is_retryable(&results[0].1), "quota: {}", results[0].1);
    assert_eq!(results[1].1, "500 The server had an error");
    assert!(is_retryable(&results[1].1));
    assert_eq!(
        results[2].1,
        "server_error: Rate limit reached for requests"
    );
    assert!(is_retryable(&results[2].1));
    assert_eq!(results[3].1, "Provider stream ended before the final event");
    let (reason, message) = outcome(&run(model, context("hi"), options()).await);
    assert_eq!(reason, StopReason::Length);
    assert_eq!(message.text(), "long");
}

#[tokio::test]
async fn abort_mid_stream() {
    let mock = start().await;
    abort_mid_stream_case(&mock, Api::OpenAiResponses).await;
}
