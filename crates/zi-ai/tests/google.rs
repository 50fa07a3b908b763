//! The google-generative-ai client against the mock server's `streamGenerateContent?alt=sse`
//! stream, over real loopback HTTP.

use crate::support::*;
use serde_json::json;
use zi_ai::Api;
use zi_ai::AssistantMessageEvent as E;
use zi_ai::classify::is_retryable;
use zi_protocol::ThinkingLevel;
use zi_protocol::message::{ContentBlock, StopReason};
use zi_test_support::mock_llm::{MockToolCall, MockUsage, Step};

#[tokio::test]
async fn thoughts_text_function_calls_and_usage() {
    let mock = start().await;
    mock.push(Step::Reply {
        thinking: vec!["Hmm ".into(), "ok.".into()],
        text: vec!["Reading ".into(), "files.".into()],
        tool_calls: vec![
            MockToolCall {
                id: "unused".into(),
                name: "read".into(),
                args_chunks: vec!["{\"path\":\"a\"}".into()],
            },
            MockToolCall {
                id: "unused".into(),
                name: "read".into(),
                args_chunks: vec!["{\"path\":\"b\"}".into()],
            },
        ],
        finish_reason: "tool_calls".into(),
        usage: Some(MockUsage {
            prompt_tokens: 300,
            completion_tokens: 30,
            cached_tokens: 100,
        }),
    });
    let mut model = model(&mock, Api::GoogleGenerativeAi);
    model.cost.input = 2.0;
    model.cost.output = 12.0;
    let events = run(model, context("hi"), options()).await;
    let (reason, message) = outcome(&events);
    assert_eq!(reason, StopReason::ToolUse);
    assert_eq!(
        content_events(&events)[..2],
        [
            E::ThinkingStart { content_index: 0 },
            E::ThinkingDelta {
                content_index: 0,
                delta: "Hmm ".into()
            },
        ]
    );
    assert_eq!(
        message.content[0],
        ContentBlock::Thinking {
            thinking: "Hmm ok.".into(),
            thinking_signature: Some("mock-signature".into()),
            redacted: None
        }
    );
    assert_eq!(message.text(), "Reading files.");
    let calls: Vec<_> = message
        .tool_calls()
        .map(|c| (c.id.clone(), c.name.clone(), c.arguments.clone()))
        .collect();
    assert_eq!(
        calls,
        [
            (
                "read_1".to_string(),
                "read".to_string(),
                json!({"path": "a"})
            ),
            (
                "read_2".to_string(),
                "read".to_string(),
                json!({"path": "b"})
            )
        ]
    );
    // Output counts thoughts (2) as well as candidates (30).
    assert_eq!(
        (
            message.usage.input,
            message.usage.cache_read,
            message.usage.output,
            message.usage.total_tokens
        ),
        (200, 100, 32, 332)
    );
    assert_eq!(message.response_id.as_deref(), Some("google-mock-1"));
}

#[tokio::test]
async fn request_carries_contents_tools_and_thinking_config() {
    let mock = start().await;
    mock.push(Step::text("ok"));
    mock.push(Step::text("ok"));
    mock.push(Step::text("ok"));
    let mut model = model(&mock, Api::GoogleGenerativeAi);
    model.id = "gemini-2.5-flash".into();
    model.reasoning = true;
    model.max_tokens = 65_536;
    let mut opts = options();
    opts.thinking = ThinkingLevel::Medium;
    run(model.clone(), context_with_tools("hi"), opts).await;
    run(model.clone(), context("hi"), options()).await;
    let mut gemini3 = model.clone();
    gemini3.id = "gemini-3-pro-preview".into();
    gemini3
        .thinking_level_map
        .insert(ThinkingLevel::Medium, Some("high".into()));
    let mut opts = options();
    opts.thinking = ThinkingLevel::Medium;
    run(gemini3, context("hi"), opts).await;
    let requests = mock.requests();
    assert_eq!(
        requests[0].path,
        "/v1/models/gemini-2.5-flash:streamGenerateContent"
    );
    assert_eq!(requests[0].header("x-goog-api-key"), Some(KEY));
    let body = &requests[0].body;
    assert_eq!(
        body["systemInstruction"],
        json!({"parts": [{"text": "You are helpful."}]})
    );
    assert_eq!(
        body["contents"],
        json!([{"role": "user", "parts": [{"text": "hi"}]}])
    );
    assert_eq!(body["tools"][0]["functionDeclarations"][0]["name"], "read");
    assert_eq!(
        body["generationConfig"],
        json!({"maxOutputTokens": 65536, "thinkingConfig": {"includeThoughts": true, "thinkingBudget": 8192}})
    );
    assert_eq!(
        requests[1].body["generationConfig"]["thinkingConfig"],
        json!({"thinkingBudget": 0})
    );
    assert_eq!(
        requests[2].body["generationConfig"]["thinkingConfig"],
        json!({"includeThoughts": true, "thinkingLevel": "HIGH"})
    );
}

#[tokio::test]
async fn history_groups_function_responses_and_replays_signatures() {
    let mock = start().await;
    mock.push(Step::text("done"));
    let model = model(&mock, Api::GoogleGenerativeAi);
    let context = history_context(&model);
    run(model, context, options()).await;
    assert_eq!(
        mock.requests()[0].body["contents"],
        json!([
            {"role": "user", "parts": [{"text": "read a and b"}]},
            {"role": "model", "parts": [
                {"text": "plan", "thought": true, "thoughtSignature": "sig-1"},
                {"functionCall": {"name": "read", "args": {"path": "a"}}, "thoughtSignature": "tsig"},
                {"functionCall": {"name": "read", "args": {"path": "b"}}, "thoughtSignature": "tsig"}
            ]},
            {"role": "user", "parts": [
                {"functionResponse": {"name": "read", "response": {"output": "A"}}},
                {"functionResponse": {"name": "read", "response": {"error": "No result provided"}}}
            ]},
            {"role": "user", "parts": [{"text": "thanks"}]}
        ])
    );
}

#[tokio::test]
async fn failures_and_premature_end() {
    let mock = start().await;
    mock.push(Step::HttpError {
        status: 429,
        message: "Resource has been exhausted (e.g. check quota).".into(),
    });
    mock.push(Step::HttpError {
        status: 400,
        message: "API key not valid. Please pass a valid API key.".into(),
    });
    mock.push(Step::MidStreamError {
        text: vec!["par".into()],
        message: "The model is overloaded. Please try again later.".into(),
    });
    mock.push(Step::Truncated(vec!["cut".into()]));
    let model = model(&mock, Api::GoogleGenerativeAi);
    let mut results = Vec::new();
    for _ in 0..4 {
        results.push(error_text(
            &run(model.clone(), context("hi"), options()).await,
        ));
    }
    assert_eq!(
        results[0].1,
        "429 Resource has been exhausted (e.g. check quota)."
    );
    assert!(!is_retryable(&results[1].1));
    assert_eq!(
        results[2].1,
        "503 The model is overloaded. Please try again later."
    );
    assert!(is_retryable(&results[2].1));
    assert_eq!(results[3].1, "Provider stream ended before the final event");
    assert!(is_retryable(&results[3].1));
}

#[tokio::test]
async fn abort_mid_stream() {
    let mock = start().await;
    abort_mid_stream_case(&mock, Api::GoogleGenerativeAi).await;
}
