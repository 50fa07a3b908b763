//! Integration tests of the agent loop (docs/architecture.md#the-run, docs/rpc.md#event-catalogue):
//! a real `AgentSession` talks to the mock LLM over loopback HTTP and runs tools defined here.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::FutureExt;
use futures::future::BoxFuture;
use serde_json::{Value, json};
use tokio::sync::Notify;
use zi_agent::{
    AgentSession, EventContext, ExecutionMode, SessionConfig, Tool, ToolCallContext, ToolOutput,
    ToolSet, TypedTool,
};
use zi_ai::catalog::Catalog;
use zi_ai::credentials::Credentials;
use zi_config::settings::SettingsStore;
use zi_journal::memory::Journal;
use zi_os::sync::lock;
use zi_protocol::ThinkingLevel;
use zi_protocol::event::{AgentSessionEvent, AssistantMessageEvent};
use zi_protocol::message::{
    AgentMessage, AssistantMessage, ContentBlock, StopReason, ToolResultMessage, concat_text,
};
use zi_protocol::request::Delivery;
use zi_protocol::state::{Activity, ContextUsage, QueueMode, QueuedDelivery, UnavailableReason};
use zi_test_support::mock_llm::{MockLlm, MockToolCall, MockUsage, Step};

use crate::common::{label, role, wire_messages, wire_text, wire_user_texts};

mod interruption;
mod queues;
mod session;
mod tools;

/// Upper bound for anything the tests wait for; only reached when something is broken.
const WAIT: Duration = Duration::from_secs(30);
/// How long a blocking test tool waits before giving up on its own.
const TOOL_WAIT: Duration = Duration::from_secs(15);

// ---------------------------------------------------------------------------------------------
// Tools
// ---------------------------------------------------------------------------------------------

type ExecFn = dyn Fn(ToolCallContext) -> BoxFuture<'static, ToolOutput> + Send + Sync;

struct TestTool {
    name: &'static str,
    parameters: Value,
    mode: ExecutionMode,
    calls: Arc<AtomicUsize>,
    exec: Box<ExecFn>,
}

impl TypedTool for TestTool {
    type Args = Value;

    fn name(&self) -> &str {
        self.name
    }

    fn description(&self) -> &str {
        "a tool defined by the agent loop tests"
    }

    fn parameters(&self) -> &Value {
        &self.parameters
    }

    fn execution_mode(&self) -> ExecutionMode {
        self.mode
    }

    fn execute(&self, _arguments: Value, call: ToolCallContext) -> BoxFuture<'static, ToolOutput> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        (self.exec)(call)
    }
}

/// A tool plus the number of times it was executed.
fn test_tool(
    name: &'static str,
    parameters: Value,
    mode: ExecutionMode,
    exec: impl Fn(ToolCallContext) -> BoxFuture<'static, ToolOutput> + Send + Sync + 'static,
) -> (Arc<dyn Tool>, Arc<AtomicUsize>) {
    let calls = Arc::new(AtomicUsize::new(0));
    let tool = TestTool {
        name,
        parameters,
        mode,
        calls: calls.clone(),
        exec: Box::new(exec),
    };
    (Arc::new(tool), calls)
}

fn any_args() -> Value {
    json!({"type": "object", "properties": {}})
}

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

/// A tool that announces it started, then blocks until released.
fn gate_tool(started: Arc<Notify>, release: Arc<Notify>) -> (Arc<dyn Tool>, Arc<AtomicUsize>) {
    test_tool("gate", any_args(), ExecutionMode::Parallel, move |_call| {
        let started = started.clone();
        let release = release.clone();
        async move {
            started.notify_one();
            match tokio::time::timeout(TOOL_WAIT, release.notified()).await {
                Ok(()) => ToolOutput::text("gate opened"),
                Err(_) => ToolOutput::error("gate was never released"),
            }
        }
        .boxed()
    })
}

// ---------------------------------------------------------------------------------------------
// Harness
// ---------------------------------------------------------------------------------------------

struct Harness {
    mock: MockLlm,
    session: AgentSession,
    /// Every event with the subscriber context's message count.
    events: Arc<Mutex<Vec<(AgentSessionEvent, u64)>>>,
    _dir: tempfile::TempDir,
}

struct Options {
    tools: Vec<Arc<dyn Tool>>,
    global_settings: Option<Value>,
    with_model: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            tools: Vec::new(),
            global_settings: None,
            with_model: true,
        }
    }
}

async fn harness(tools: Vec<Arc<dyn Tool>>) -> Harness {
    harness_with(Options {
        tools,
        ..Options::default()
    })
    .await
}

async fn harness_with(options: Options) -> Harness {
    let mock = MockLlm::start().await.expect("mock LLM starts");
    let dir = tempfile::tempdir().expect("tempdir");
    if let Some(settings) = &options.global_settings {
        std::fs::write(dir.path().join("settings.json"), settings.to_string()).expect("settings");
    }
    let mut catalog = Catalog::default();
    catalog.add_models_json(&mock.models_json("key", &[json!({"id": "m1"})]), "test");
    assert!(catalog.warnings.is_empty(), "{:?}", catalog.warnings);
    let model = if options.with_model {
        Some(Arc::new(
            catalog.find("mock", "m1").cloned().expect("model m1"),
        ))
    } else {
        None
    };
    let (settings, warnings) = SettingsStore::load(dir.path(), dir.path(), false);
    assert!(warnings.is_empty(), "{warnings:?}");
    let config = SessionConfig {
        session_id: "agent-loop-test".into(),
        cwd: dir.path().to_path_buf(),
        agent_dir: dir.path().to_path_buf(),
        journal: Journal::new(None),
        catalog,
        credentials: Credentials::default(),
        model,
        thinking: ThinkingLevel::Off,
        settings,
        tools: ToolSet::new(options.tools).expect("tool set"),
        system_prompt: "You are a test assistant.".into(),
        expander: Default::default(),
        idle_timeout: Duration::from_secs(30),
    };
    let session = AgentSession::new(config);
    let events = Arc::new(Mutex::new(Vec::new()));
    let sink = events.clone();
    session.subscribe(Arc::new(
        move |event: &AgentSessionEvent, context: &EventContext| {
            lock(&sink).push((event.clone(), context.message_count));
        },
    ));
    Harness {
        mock,
        session,
        events,
        _dir: dir,
    }
}

impl Harness {
    /// Admits a direct prompt and releases its run.
    fn start(&self, text: &str) {
        let admission = self
            .session
            .prompt(Delivery::Direct, text.to_string())
            .expect("prompt admitted");
        assert!(
            admission.starter.is_some(),
            "a direct prompt while idle starts a run"
        );
        drop(admission);
    }

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

    async fn idle(&self) {
        tokio::time::timeout(WAIT, self.session.wait_idle())
            .await
            .expect("run settles");
    }

    async fn run(&self, text: &str) {
        self.start(text);
        self.idle().await;
    }

    fn events(&self) -> Vec<AgentSessionEvent> {
        lock(&self.events).iter().map(|(e, _)| e.clone()).collect()
    }

    fn event_counts(&self) -> Vec<u64> {
        lock(&self.events).iter().map(|(_, c)| *c).collect()
    }

    fn clear_events(&self) {
        lock(&self.events).clear();
    }

    /// Event labels without `message_update`.
    fn labels(&self) -> Vec<String> {
        self.events()
            .iter()
            .filter(|e| !matches!(e, AgentSessionEvent::MessageUpdate { .. }))
            .map(label)
            .collect()
    }

    fn count(&self, name: &str) -> usize {
        self.events()
            .iter()
            .filter(|e| e.type_name() == name)
            .count()
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

    /// Every presentation message.
    fn messages(&self) -> Vec<AgentMessage> {
        self.session
            .messages_page(0, 10_000)
            .expect("messages page")
            .messages
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

    fn request_bodies(&self) -> Vec<Value> {
        self.mock.requests().into_iter().map(|r| r.body).collect()
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
