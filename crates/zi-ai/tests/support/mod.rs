//! Helpers shared by the per-API client tests.

// A test fails by panicking with its reason.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use tokio_util::sync::CancellationToken;
use zi_ai::model::{Compat, ModelCost};
use zi_ai::stream::ABORTED_MESSAGE;
use zi_ai::{
    Api, AssistantMessageEvent, LlmContext, Model, StreamOptions, ToolSpec, stream_assistant,
};
use zi_protocol::ThinkingLevel;
use zi_protocol::message::{
    AgentMessage, AssistantMessage, ContentBlock, MessageContent, StopReason, ToolCall,
    ToolResultMessage, Usage, UserMessage,
};
use zi_protocol::state::InputKind;
use zi_test_support::mock_llm::{MockLlm, Step};

pub const WAIT: Duration = Duration::from_secs(20);
pub const KEY: &str = "sk-vendor-test";

pub async fn start() -> MockLlm {
    MockLlm::start().await.unwrap_or_else(|e| panic!("{e}"))
}

pub fn model(mock: &MockLlm, api: Api) -> Model {
    Model {
        provider: "mock".into(),
        id: "mock-model".into(),
        name: "Mock".into(),
        api,
        base_url: mock.base_url(),
        reasoning: false,
        thinking_level_map: BTreeMap::new(),
        input: vec![InputKind::Text],
        cost: ModelCost::default(),
        context_window: 200_000,
        max_tokens: 64_000,
        headers: BTreeMap::new(),
        compat: Compat::default(),
        api_key: None,
    }
}

pub fn options() -> StreamOptions {
    StreamOptions {
        api_key: Some(KEY.into()),
        thinking: ThinkingLevel::Off,
        cancel: CancellationToken::new(),
        idle_timeout: Duration::from_secs(30),
        session_id: "session-1".into(),
        base_url: None,
        account_id: None,
        fast_mode: false,
    }
}

pub fn user(text: &str) -> AgentMessage {
    AgentMessage::User(UserMessage {
        content: MessageContent::Text(text.into()),
        timestamp: 1,
    })
}

pub fn context(text: &str) -> LlmContext {
    LlmContext {
        system_prompt: "You are helpful.".into(),
        messages: vec![user(text)],
        tools: Vec::new(),
    }
}

pub fn context_with_tools(text: &str) -> LlmContext {
    let mut context = context(text);
    context.tools.push(ToolSpec {
        name: "read".into(),
        description: "Read a file".into(),
        parameters: json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}),
    });
    context
}

fn call(id: &str, path: &str) -> ContentBlock {
    ContentBlock::ToolCall(ToolCall {
        id: id.into(),
        name: "read".into(),
        arguments: json!({"path": path}),
        thought_signature: Some("tsig".into()),
    })
}

/// user → (failed assistant) → assistant with signed + redacted thinking and two calls → one
/// result (the second call has none) → user.
pub fn history_context(model: &Model) -> LlmContext {
    let mut failed = zi_ai::stream::empty_assistant(model);
    failed.stop_reason = StopReason::Error;
    failed.error_message = Some("529 Overloaded".into());
    let assistant = AssistantMessage {
        content: vec![
            ContentBlock::Thinking {
                thinking: "plan".into(),
                thinking_signature: Some("sig-1".into()),
                redacted: None,
            },
            ContentBlock::Thinking {
                thinking: String::new(),
                thinking_signature: Some("opaque".into()),
                redacted: Some(true),
            },
            call("call_1|x", "a"),
            call("call_2", "b"),
        ],
        stop_reason: StopReason::ToolUse,
        usage: Usage::default(),
        ..zi_ai::stream::empty_assistant(model)
    };
    LlmContext {
        system_prompt: String::new(),
        messages: vec![
            user("read a and b"),
            AgentMessage::Assistant(failed),
            AgentMessage::Assistant(assistant),
            AgentMessage::ToolResult(ToolResultMessage {
                tool_call_id: "call_1|x".into(),
                tool_name: "read".into(),
                content: vec![ContentBlock::text("A")],
                details: None,
                is_error: false,
                timestamp: 2,
            }),
            user("thanks"),
        ],
        tools: Vec::new(),
    }
}

pub async fn run(
    model: Model,
    context: LlmContext,
    options: StreamOptions,
) -> Vec<AssistantMessageEvent> {
    let mut partial = zi_ai::stream::empty_assistant(&model);
    let mut stream = stream_assistant(Arc::new(model), context, options);
    let mut events = Vec::new();
    loop {
        match tokio::time::timeout(WAIT, stream.next_event(&mut partial)).await {
            Ok(Some(event)) => events.push(event),
            Ok(None) => return events,
            Err(_) => panic!("stream did not end; events so far: {events:?}"),
        }
    }
}

/// The final message and stop reason of a finished stream, checking there is exactly one.
pub fn outcome(events: &[AssistantMessageEvent]) -> (StopReason, AssistantMessage) {
    let finals: Vec<_> = events
        .iter()
        .filter_map(|event| match event {
            AssistantMessageEvent::Done { reason, message } => Some((*reason, message.clone())),
            AssistantMessageEvent::Error { reason, error } => Some((*reason, error.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(finals.len(), 1, "{events:?}");
    assert!(
        matches!(
            events.last(),
            Some(AssistantMessageEvent::Done { .. } | AssistantMessageEvent::Error { .. })
        ),
        "the final event must come last: {events:?}"
    );
    assert_eq!(events.first(), Some(&AssistantMessageEvent::Start));
    finals
        .into_iter()
        .next()
        .unwrap_or_else(|| panic!("no final event"))
}

pub fn content_events(events: &[AssistantMessageEvent]) -> &[AssistantMessageEvent] {
    &events[1..events.len() - 1]
}

pub fn error_text(events: &[AssistantMessageEvent]) -> (StopReason, String) {
    let (reason, message) = outcome(events);
    (reason, message.error_message.unwrap_or_default())
}

/// A hanging stream cancelled after its first text: `aborted`, content kept, connection closed.
pub async fn abort_mid_stream_case(mock: &MockLlm, api: Api) {
    mock.push(Step::Hang(vec!["still ".into(), "going".into()]));
    let opts = options();
    let cancel = opts.cancel.clone();
    let model = model(mock, api);
    let mut partial = zi_ai::stream::empty_assistant(&model);
    let mut stream = stream_assistant(Arc::new(model), context("hi"), opts);
    let mut events = Vec::new();
    let going = AssistantMessageEvent::TextDelta {
        content_index: 0,
        delta: "going".into(),
    };
    while !events.contains(&going) {
        match tokio::time::timeout(WAIT, stream.next_event(&mut partial)).await {
            Ok(Some(event)) => events.push(event),
            other => panic!("expected more events, got {other:?} after {events:?}"),
        }
    }
    cancel.cancel();
    let last = tokio::time::timeout(WAIT, stream.next_event(&mut partial))
        .await
        .unwrap_or_else(|_| panic!("no abort"));
    let Some(AssistantMessageEvent::Error { reason, error }) = last else {
        panic!("expected an error event, got {last:?}");
    };
    assert_eq!(reason, StopReason::Aborted);
    assert_eq!(error.error_message.as_deref(), Some(ABORTED_MESSAGE));
    assert_eq!(error.text(), "still going");
    assert_eq!(mock.wait_for_disconnects(1, WAIT).await, 1);
}
