//! Integration tests of the agent loop (docs/architecture.md#the-run, docs/rpc.md#event-catalogue):
//! a real `AgentSession` talks to the mock LLM over loopback HTTP and runs tools defined here.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::FutureExt;
use serde_json::{Value, json};
use tokio::sync::Notify;
use zi_agent::{AgentSession, EventContext, ExecutionMode, Tool, ToolOutput};
use zi_journal::memory::Journal;
use zi_os::sync::lock;
use zi_protocol::event::{AgentSessionEvent, AssistantMessageEvent};
use zi_protocol::message::{
    AgentMessage, AssistantMessage, ContentBlock, StopReason, ToolResultMessage, concat_text,
};
use zi_protocol::request::Delivery;
use zi_protocol::state::{Activity, ContextUsage, QueueMode, QueuedDelivery, UnavailableReason};
use zi_test_support::mock_llm::{MockToolCall, MockUsage, Step};

use crate::common::harness::Harness;
use crate::common::session::{Options, abort};
use crate::common::tools::{any_args, cancellable_tool, gate_tool, test_tool};
use crate::common::{
    TOOL_WAIT, WAIT, assert_steer_then_follow_up_on_the_wire, label, role, wire_messages,
    wire_text, wire_user_texts,
};

mod interruption;
mod queues;
mod session;
mod tools;

// ---------------------------------------------------------------------------------------------
// Tools
// ---------------------------------------------------------------------------------------------

/// `echo {text}` → `echo: <text>`.
fn echo_tool() -> (Arc<dyn Tool>, Arc<AtomicUsize>) {
    test_tool(
        "echo",
        json!({
            "type": "object",
            "properties": {"text": {"type": "string"}},
            "required": ["text"]
        }),
        ExecutionMode::Parallel,
        |call| {
            let text = call.raw_arguments["text"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            async move { ToolOutput::text(format!("echo: {text}")) }.boxed()
        },
    )
}

/// Concurrency bookkeeping shared by the tools of one test.
#[derive(Default)]
struct Overlap {
    current: AtomicUsize,
    max: AtomicUsize,
}

impl Overlap {
    fn enter(&self) {
        let now = self.current.fetch_add(1, Ordering::SeqCst) + 1;
        self.max.fetch_max(now, Ordering::SeqCst);
    }

    fn leave(&self) {
        self.current.fetch_sub(1, Ordering::SeqCst);
    }

    fn max(&self) -> usize {
        self.max.load(Ordering::SeqCst)
    }
}

/// A tool that enters the overlap counter, yields for a while, and leaves.
fn counting_tool(
    name: &'static str,
    mode: ExecutionMode,
    overlap: Arc<Overlap>,
) -> (Arc<dyn Tool>, Arc<AtomicUsize>) {
    test_tool(name, any_args(), mode, move |call| {
        let overlap = overlap.clone();
        async move {
            overlap.enter();
            tokio::time::sleep(Duration::from_millis(60)).await;
            overlap.leave();
            ToolOutput::text(format!("{} done", call.call_id))
        }
        .boxed()
    })
}

// ---------------------------------------------------------------------------------------------
// Harness
// ---------------------------------------------------------------------------------------------

async fn harness(tools: Vec<Arc<dyn Tool>>) -> Harness {
    harness_with(Options {
        tools,
        ..Options::default()
    })
    .await
}

async fn harness_with(options: Options) -> Harness {
    Harness::start_with("agent-loop-test", json!({"id": "m1"}), options, |_| {
        Journal::new(None)
    })
    .await
}

impl Harness {
    /// Queues a steer or follow-up; it must not start a run.
    fn queue(&self, delivery: Delivery, text: &str) {
        let admission = self
            .session
            .prompt(delivery, text.to_string())
            .expect("input queued");
        assert!(
            admission.starter.is_none(),
            "queued input must not start a run"
        );
    }

    fn event_counts(&self) -> Vec<u64> {
        lock(&self.events).iter().map(|(_, c)| *c).collect()
    }

    fn clear_events(&self) {
        lock(&self.events).clear();
    }

    async fn wait_for_event(&self, what: &str, predicate: impl Fn(&AgentSessionEvent) -> bool) {
        let deadline = tokio::time::Instant::now() + WAIT;
        while !self.events().iter().any(&predicate) {
            assert!(
                tokio::time::Instant::now() < deadline,
                "timed out waiting for {what}"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    fn tool_results(&self) -> Vec<ToolResultMessage> {
        self.messages()
            .into_iter()
            .filter_map(|m| match m {
                AgentMessage::ToolResult(r) => Some(r),
                _ => None,
            })
            .collect()
    }

    fn last_assistant(&self) -> AssistantMessage {
        self.session.last_assistant().expect("an assistant message")
    }
}

fn user_text(message: &AgentMessage) -> Option<String> {
    match message {
        AgentMessage::User(user) => Some(user.content.text()),
        _ => None,
    }
}

fn result_text(result: &ToolResultMessage) -> String {
    concat_text(&result.content)
}

fn reply(text: &[&str], tool_calls: Vec<MockToolCall>, finish_reason: &str) -> Step {
    Step::Reply {
        thinking: Vec::new(),
        text: text.iter().map(|s| s.to_string()).collect(),
        tool_calls,
        finish_reason: finish_reason.to_string(),
        usage: None,
    }
}

fn call(id: &str, name: &str, args: Value) -> MockToolCall {
    MockToolCall {
        id: id.to_string(),
        name: name.to_string(),
        args_chunks: vec![args.to_string()],
    }
}

/// Index of the first event at or after `from` matching `predicate`.
fn position_from(
    events: &[AgentSessionEvent],
    from: usize,
    predicate: impl Fn(&AgentSessionEvent) -> bool,
) -> Option<usize> {
    events
        .iter()
        .enumerate()
        .skip(from)
        .find(|(_, e)| predicate(e))
        .map(|(i, _)| i)
}

fn is_user_start(event: &AgentSessionEvent, text: &str) -> bool {
    matches!(event, AgentSessionEvent::MessageStart { message } if user_text(message).as_deref() == Some(text))
}

fn tool_end_ids(events: &[AgentSessionEvent]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| match e {
            AgentSessionEvent::ToolExecutionEnd { tool_call_id, .. } => Some(tool_call_id.clone()),
            _ => None,
        })
        .collect()
}

fn tool_result_end_ids(events: &[AgentSessionEvent]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| match e {
            AgentSessionEvent::MessageEnd {
                message: AgentMessage::ToolResult(r),
            } => Some(r.tool_call_id.clone()),
            _ => None,
        })
        .collect()
}
