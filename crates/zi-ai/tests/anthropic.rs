//! The anthropic-messages client against the mock server's Anthropic event stream, over real
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
async fn text_thinking_tools_and_usage() {
    let mock = start().await;
    mock.push(Step::Reply {
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
    });
    let mut model = model(&mock, Api::AnthropicMessages);
    model.cost.input = 3.0;
    model.cost.output = 15.0;
    model.cost.cache_read = 0.3;
    let events = run(model, context("hi"), options()).await;
    let (reason, message) = outcome(&events);
    assert_eq!(reason, StopReason::ToolUse);
    assert_eq!(
        content_events(&events)[..4],
        [
            E::ThinkingStart { content_index: 0 },
            E::ThinkingDelta {
                content_index: 0,
                delta: "Let me ".into()
            },
            E::ThinkingDelta {
                content_index: 0,
                delta: "think.".into()
            },
            E::ThinkingEnd {
                content_index: 0,
                content: "Let me think.".into()
            },
        ]
    );
    assert_eq!(
        message.content[0],
        ContentBlock::Thinking {
            thinking: "Let me think.".into(),
            thinking_signature: Some("mock-signature".into()),
            redacted: None,
        }
    );
    assert_eq!(message.text(), "Reading both.");
    let calls: Vec<_> = message
        .tool_calls()
        .map(|c| (c.id.clone(), c.arguments.clone()))
        .collect();
    assert_eq!(
        calls,
        [
            ("toolu_01".to_string(), json!({"path": "a"})),
            ("toolu_02".to_string(), json!({"path": "b"}))
        ]
    );
    assert_eq!(message.response_id.as_deref(), Some("msg_mock_1"));
    assert_eq!(
        (
            message.usage.input,
            message.usage.cache_read,
            message.usage.output,
            message.usage.total_tokens
        ),
        (600, 400, 50, 1_050)
    );
    let expected = 600.0 * 3.0 / 1e6 + 50.0 * 15.0 / 1e6 + 400.0 * 0.3 / 1e6;
    assert!((message.usage.cost.total - expected).abs() < 1e-12);
    assert_eq!(message.api, "anthropic-messages");
}

#[tokio::test]
async fn request_carries_headers_system_tools_and_budget_thinking() {
    let mock = start().await;
    mock.push(Step::text("ok"));
    let mut model = model(&mock, Api::AnthropicMessages);
    model.reasoning = true;
    model.max_tokens = 64_000;
    model
        .headers
        .insert("x-extra".into(), "literal-value".into());
    let mut opts = options();
    opts.thinking = ThinkingLevel::Medium;
    let events = run(model, context_with_tools("hi"), opts).await;
    assert_eq!(outcome(&events).0, StopReason::Stop);
    let request = &mock.requests()[0];
    assert_eq!(request.path, "/v1/messages");
    assert_eq!(request.header("x-api-key"), Some(KEY));
    assert_eq!(request.header("authorization"), None);
    assert_eq!(request.header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(request.header("x-extra"), Some("literal-value"));
    assert!(request.header("anthropic-beta").is_some());
    let body = &request.body;
    assert_eq!(body["stream"], true);
    assert_eq!(body["model"], "mock-model");
    assert_eq!(
        body["thinking"],
        json!({"type": "enabled", "budget_tokens": 8192})
    );
    assert_eq!(body["max_tokens"], 32_000 + 8_192);
    assert_eq!(body["system"][0]["text"], "You are helpful.");
    assert_eq!(body["system"][0]["cache_control"]["type"], "ephemeral");
    assert_eq!(body["tools"][0]["name"], "read");
    assert_eq!(body["tools"][0]["input_schema"]["type"], "object");
    assert_eq!(
        body["messages"],
        json!([{"role": "user", "content": [{"type": "text", "text": "hi", "cache_control": {"type": "ephemeral"}}]}])
    );
}

#[tokio::test]
async fn thinking_levels_map_to_budgets_or_adaptive_effort() {
    let mock = start().await;
    let mut model = model(&mock, Api::AnthropicMessages);
    model.reasoning = true;
    model.max_tokens = 4_096;
    for level in [ThinkingLevel::Off, ThinkingLevel::High] {
        mock.push(Step::text("ok"));
        let mut opts = options();
        opts.thinking = level;
        run(model.clone(), context("hi"), opts).await;
    }
    let mut adaptive = model.clone();
    adaptive.compat.adaptive_thinking = true;
    adaptive
        .thinking_level_map
        .insert(ThinkingLevel::Max, Some("max".into()));
    mock.push(Step::text("ok"));
    let mut opts = options();
    opts.thinking = ThinkingLevel::Max;
    run(adaptive, context("hi"), opts).await;
    let bodies: Vec<_> = mock.requests().into_iter().map(|r| r.body).collect();
    assert!(bodies[0].get("thinking").is_none());
    assert_eq!(bodies[0]["max_tokens"], 4_096);
    // The model's 4,096-token limit leaves a 3,072-token budget beside 1,024 answer tokens.
    assert_eq!(
        bodies[1]["thinking"],
        json!({"type": "enabled", "budget_tokens": 3072})
    );
    assert_eq!(bodies[1]["max_tokens"], 4_096);
    assert_eq!(bodies[2]["thinking"], json!({"type": "adaptive"}));
    assert_eq!(bodies[2]["output_config"], json!({"effort": "max"}));
}

#[tokio::test]
async fn history_pairs_tool_results_and_replays_signed_thinking() {
    let mock = start().await;
    mock.push(Step::text("done"));
    let model = model(&mock, Api::AnthropicMessages);
    let context = history_context(&model);
    run(model, context, options()).await;
    let messages = mock.requests()[0].body["messages"].clone();
    assert_eq!(
        messages,
        json!([
            {"role": "user", "content": [{"type": "text", "text": "read a and b"}]},
            {"role": "assistant", "content": [
                {"type": "thinking", "thinking": "plan", "signature": "sig-1"},
                {"type": "redacted_thinking", "data": "opaque"},
                {"type": "tool_use", "id": "call_1_x", "name": "read", "input": {"path": "a"}},
                {"type": "tool_use", "id": "call_2", "name": "read", "input": {"path": "b"}}
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "call_1_x", "content": [{"type": "text", "text": "A"}]},
                {"type": "tool_result", "tool_use_id": "call_2", "content": [{"type": "text", "text": "No result provided"}], "is_error": true}
            ]},
            {"role": "user", "content": [{"type": "text", "text": "thanks", "cache_control": {"type": "ephemeral"}}]}
        ])
    );
}

#[tokio::test]
async fn redacted_thinking_keeps_its_data() {
    let mock = start().await;
    let body = [
        r#"{"type":"message_start","message":{"id":"msg_r","type":"message","role":"assistant","content":[],"model":"m","stop_reason":null,"usage":{"input_tokens":5,"output_tokens":1}}}"#,
        r#"{"type":"content_block_start","index":0,"content_block":{"type":"redacted_thinking","data":"EncryptedBlob"}}"#,
        r#"{"type":"content_block_stop","index":0}"#,
        r#"{"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}"#,
        r#"{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"hi"}}"#,
        r#"{"type":"content_block_stop","index":1}"#,
        r#"{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":7}}"#,
        r#"{"type":"message_stop"}"#,
    ]
    .iter()
    .map(|d| {
        let ty = serde_json::from_str::<serde_json::Value>(d).unwrap_or_default()["type"]
            .as_str()
            .unwrap_or("")
            .to_string();
        format!("event: {ty}\ndata: {d}\n\n")
    })
    .collect::<String>();
    mock.push(Step::Sse { body, hang: false });
    let events = run(
        model(&mock, Api::AnthropicMessages),
        context("hi"),
        options(),
    )
    .await;
    let (reason, message) = outcome(&events);
    assert_eq!(reason, StopReason::Stop);
    assert_eq!(
        message.content[0],
        ContentBlock::Thinking {
            thinking: String::new(),
            thinking_signature: Some("EncryptedBlob".into()),
            redacted: Some(true)
        }
    );
    assert_eq!(message.usage.output, 7);
}

#[tokio::test]
async fn failures_are_classified() {
    let mock = start().await;
    let cases = [
        (529, "Overloaded", true),
        (
            429,
            "Number of request tokens has exceeded your per-minute rate limit",
            true,
        ),
        (500, "Internal server error", true),
        (
            400,
            "prompt is too long: 250000 tokens > 200000 maximum",
            false,
        ),
        (401, "invalid x-api-key", false),
    ];
    for (status, text, _) in &cases {
        mock.push(Step::HttpError {
            status: *status,
            message: (*text).into(),
        });
    }
    for (status, text, retryable) in cases {
        let events = run(
            model(&mock, Api::AnthropicMessages),
            context("hi"),
            options(),
        )
        .await;
        let (reason, message) = error_text(&events);
        assert_eq!(reason, StopReason::Error);
        assert_eq!(message, format!("{status} {text}"));
        assert_eq!(is_retryable(&message), retryable, "{message}");
    }
    assert!(zi_ai::classify::is_context_overflow(
        "400 prompt is too long: 250000 tokens > 200000 maximum"
    ));
}

#[tokio::test]
async fn mid_stream_error_and_premature_end() {
    let mock = start().await;
    mock.push(Step::MidStreamError {
        text: vec!["partial".into()],
        message: "Overloaded".into(),
    });
    mock.push(Step::Truncated(vec!["cut".into()]));
    let events = run(
        model(&mock, Api::AnthropicMessages),
        context("hi"),
        options(),
    )
    .await;
    let (reason, message) = outcome(&events);
    assert_eq!(reason, StopReason::Error);
    assert_eq!(
        message.error_message.as_deref(),
        Some("overloaded_error: Overloaded")
    );
    assert_eq!(message.text(), "partial");
    assert!(is_retryable("overloaded_error: Overloaded"));
    let events = run(
        model(&mock, Api::AnthropicMessages),
        context("hi"),
        options(),
    )
    .await;
    let (reason, text) = error_text(&events);
    assert_eq!(reason, StopReason::Error);
    assert_eq!(text, "Provider stream ended before the final event");
    assert!(is_retryable(&text));
}

#[tokio::test]
async fn abort_mid_stream() {
    let mock = start().await;
    abort_mid_stream_case(&mock, Api::AnthropicMessages).await;
}

#[tokio::test]
async fn a_key_echoed_in_an_error_is_hidden() {
    let mock = start().await;
    mock.push(Step::HttpError {
        status: 401,
        message: format!("invalid x-api-key {KEY}"),
    });
    let events = run(
        model(&mock, Api::AnthropicMessages),
        context("hi"),
        options(),
    )
    .await;
    assert_eq!(error_text(&events).1, "401 invalid x-api-key <api key>");
}
