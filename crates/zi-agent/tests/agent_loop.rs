//! Integration tests of the agent loop (docs/architecture.md#the-run, docs/rpc.md#event-catalogue):
//! a real `AgentSession` talks to the mock LLM over loopback HTTP and runs tools defined here.

// A test fails by panicking with its reason.
#![allow(clippy::unwrap_used, clippy::expect_used)]

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

fn role(message: &AgentMessage) -> &'static str {
    match message {
        AgentMessage::User(_) => "user",
        AgentMessage::Assistant(_) => "assistant",
        AgentMessage::ToolResult(_) => "toolResult",
        AgentMessage::Custom(_) => "custom",
        AgentMessage::CompactionSummary(_) => "compactionSummary",
    }
}

fn label(event: &AgentSessionEvent) -> String {
    match event {
        AgentSessionEvent::MessageStart { message } => format!("message_start:{}", role(message)),
        AgentSessionEvent::MessageEnd { message } => format!("message_end:{}", role(message)),
        AgentSessionEvent::EntryAppended { entry } => {
            format!("entry_appended:{}", entry.data.type_name())
        }
        other => other.type_name().to_string(),
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

/// The wire messages of a chat-completions request body.
fn wire_messages(body: &Value) -> Vec<Value> {
    body["messages"].as_array().cloned().unwrap_or_default()
}

/// The text of a wire message's content (a string or text parts).
fn wire_text(message: &Value) -> String {
    match &message["content"] {
        Value::String(text) => text.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// The texts of the user messages of a request, in order.
fn wire_user_texts(body: &Value) -> Vec<String> {
    wire_messages(body)
        .iter()
        .filter(|m| m["role"] == "user")
        .map(wire_text)
        .collect()
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

// ---------------------------------------------------------------------------------------------
// 1. Tool call round trip
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tool_call_round_trip() {
    let (echo, echo_calls) = echo_tool();
    let h = harness(vec![echo]).await;
    h.mock
        .push(Step::tool_call("call_1", "echo", json!({"text": "hi"})));
    h.mock.push(Step::text("all done"));
    h.run("please echo").await;

    assert_eq!(echo_calls.load(Ordering::SeqCst), 1);

    // The committed conversation.
    let messages = h.messages();
    assert_eq!(
        messages.iter().map(role).collect::<Vec<_>>(),
        ["user", "assistant", "toolResult", "assistant"]
    );
    let first = messages[1].as_assistant().expect("assistant");
    assert_eq!(first.stop_reason, StopReason::ToolUse);
    let calls: Vec<_> = first.tool_calls().collect();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].id, "call_1");
    assert_eq!(calls[0].name, "echo");
    assert_eq!(calls[0].arguments, json!({"text": "hi"}));

    let result = serde_json::to_value(&messages[2]).expect("json");
    assert_eq!(result["role"], "toolResult");
    assert_eq!(result["toolCallId"], "call_1");
    assert_eq!(result["toolName"], "echo");
    assert_eq!(
        result["content"],
        json!([{"type": "text", "text": "echo: hi"}])
    );
    assert_eq!(result["isError"], false);
    assert!(result["timestamp"].is_i64());

    let last = messages[3].as_assistant().expect("assistant");
    assert_eq!(last.stop_reason, StopReason::Stop);
    assert_eq!(last.text(), "all done");

    // The second provider request replays the call and its result.
    let bodies = h.request_bodies();
    assert_eq!(bodies.len(), 2, "exactly two provider calls");
    let wire = wire_messages(&bodies[1]);
    let assistant = wire
        .iter()
        .find(|m| m["role"] == "assistant")
        .expect("assistant wire message");
    assert_eq!(assistant["tool_calls"][0]["id"], "call_1");
    assert_eq!(assistant["tool_calls"][0]["type"], "function");
    assert_eq!(assistant["tool_calls"][0]["function"]["name"], "echo");
    let arguments: Value = serde_json::from_str(
        assistant["tool_calls"][0]["function"]["arguments"]
            .as_str()
            .expect("arguments string"),
    )
    .expect("arguments JSON");
    assert_eq!(arguments, json!({"text": "hi"}));
    let tool = wire
        .iter()
        .find(|m| m["role"] == "tool")
        .expect("tool wire message");
    assert_eq!(tool["tool_call_id"], "call_1");
    assert_eq!(wire_text(tool), "echo: hi");
    let assistant_at = wire.iter().position(|m| m["role"] == "assistant");
    let tool_at = wire.iter().position(|m| m["role"] == "tool");
    assert_eq!(
        tool_at,
        assistant_at.map(|i| i + 1),
        "tool message follows its assistant"
    );
    // Tools are advertised.
    assert_eq!(bodies[0]["tools"][0]["function"]["name"], "echo");

    // Event order.
    assert_eq!(
        h.labels(),
        [
            "agent_start",
            "turn_start",
            "message_start:user",
            "entry_appended:message",
            "message_end:user",
            "message_start:assistant",
            "entry_appended:message",
            "message_end:assistant",
            "tool_execution_start",
            "tool_execution_end",
            "message_start:toolResult",
            "entry_appended:message",
            "message_end:toolResult",
            "turn_end",
            "turn_start",
            "message_start:assistant",
            "entry_appended:message",
            "message_end:assistant",
            "turn_end",
            "agent_end",
            "agent_settled",
        ]
    );
    let events = h.events();
    let start = events
        .iter()
        .find_map(|e| match e {
            AgentSessionEvent::ToolExecutionStart {
                tool_call_id,
                tool_name,
                args,
            } => Some((tool_call_id.clone(), tool_name.clone(), args.clone())),
            _ => None,
        })
        .expect("tool_execution_start");
    assert_eq!(
        start,
        (
            "call_1".to_string(),
            "echo".to_string(),
            json!({"text": "hi"})
        )
    );
    let end = events
        .iter()
        .find_map(|e| match e {
            AgentSessionEvent::ToolExecutionEnd {
                tool_call_id,
                tool_name,
                result,
                is_error,
            } => Some((
                tool_call_id.clone(),
                tool_name.clone(),
                result.clone(),
                *is_error,
            )),
            _ => None,
        })
        .expect("tool_execution_end");
    assert_eq!(end.0, "call_1");
    assert_eq!(end.1, "echo");
    assert_eq!(end.2.content, vec![ContentBlock::text("echo: hi")]);
    assert!(!end.3);
    let turn_ends: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            AgentSessionEvent::TurnEnd {
                message,
                tool_results,
            } => Some((message.clone(), tool_results.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(turn_ends.len(), 2);
    assert_eq!(
        turn_ends[0].0, messages[1],
        "turn_end carries the assistant message"
    );
    assert_eq!(
        turn_ends[0].1,
        vec![messages[2].clone()],
        "turn_end carries the tool results"
    );
    assert_eq!(turn_ends[1].0, messages[3]);
    assert!(turn_ends[1].1.is_empty());
    assert_eq!(h.session.state().activity, Activity::Idle);
}

// ---------------------------------------------------------------------------------------------
// 2. Validation
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_tools_and_invalid_arguments_become_error_results() {
    let (echo, echo_calls) = echo_tool();
    let h = harness(vec![echo]).await;
    h.mock.push(reply(
        &[],
        vec![
            call("c_unknown", "nope", json!({})),
            call("c_missing", "echo", json!({})),
            call("c_type", "echo", json!({"text": 5})),
            call("c_ok", "echo", json!({"text": "fine"})),
        ],
        "tool_calls",
    ));
    h.mock.push(Step::text("ok"));
    h.run("try tools").await;

    assert_eq!(
        echo_calls.load(Ordering::SeqCst),
        1,
        "only the valid call executes"
    );
    let results = h.tool_results();
    assert_eq!(
        results
            .iter()
            .map(|r| r.tool_call_id.as_str())
            .collect::<Vec<_>>(),
        ["c_unknown", "c_missing", "c_type", "c_ok"]
    );
    assert_eq!(result_text(&results[0]), "Tool nope not found");
    assert!(results[0].is_error);
    assert_eq!(results[0].tool_name, "nope");
    for invalid in &results[1..3] {
        assert!(invalid.is_error, "{invalid:?}");
        assert!(
            result_text(invalid).starts_with("Validation failed for tool \"echo\""),
            "{}",
            result_text(invalid)
        );
    }
    assert!(!results[3].is_error);
    assert_eq!(result_text(&results[3]), "echo: fine");

    let events = h.events();
    let ends: Vec<(String, bool)> = events
        .iter()
        .filter_map(|e| match e {
            AgentSessionEvent::ToolExecutionEnd {
                tool_call_id,
                is_error,
                ..
            } => Some((tool_call_id.clone(), *is_error)),
            _ => None,
        })
        .collect();
    assert_eq!(ends.len(), 4);
    for (id, is_error) in &ends {
        assert_eq!(*is_error, id != "c_ok", "{id}");
    }
    assert_eq!(h.count("tool_execution_start"), 4);
    assert_eq!(h.last_assistant().text(), "ok");
}

// ---------------------------------------------------------------------------------------------
// 3. Parallel vs sequential execution
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parallel_calls_end_in_completion_order_but_commit_in_call_order() {
    let overlap = Arc::new(Overlap::default());
    let slow_entered = Arc::new(Notify::new());
    let fast_done = Arc::new(Notify::new());
    let (tool, calls) = {
        let overlap = overlap.clone();
        let slow_entered = slow_entered.clone();
        let fast_done = fast_done.clone();
        test_tool(
            "pause",
            json!({"type": "object", "properties": {"slow": {"type": "boolean"}}, "required": ["slow"]}),
            ExecutionMode::Parallel,
            move |call| {
                let overlap = overlap.clone();
                let slow_entered = slow_entered.clone();
                let fast_done = fast_done.clone();
                let slow = call.raw_arguments["slow"].as_bool().unwrap_or(false);
                async move {
                    if slow {
                        // Runs until the fast call has finished (only possible when both run
                        // at once), then a little longer.
                        overlap.enter();
                        slow_entered.notify_one();
                        let _ = tokio::time::timeout(TOOL_WAIT, fast_done.notified()).await;
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        overlap.leave();
                        ToolOutput::text("slow done")
                    } else {
                        let _ = tokio::time::timeout(TOOL_WAIT, slow_entered.notified()).await;
                        overlap.enter();
                        overlap.leave();
                        fast_done.notify_one();
                        ToolOutput::text("fast done")
                    }
                }
                .boxed()
            },
        )
    };
    let h = harness(vec![tool]).await;
    h.mock.push(reply(
        &[],
        vec![
            call("p_slow", "pause", json!({"slow": true})),
            call("p_fast", "pause", json!({"slow": false})),
        ],
        "tool_calls",
    ));
    h.mock.push(Step::text("done"));
    h.run("go").await;

    assert_eq!(calls.load(Ordering::SeqCst), 2);
    assert_eq!(overlap.max(), 2, "parallel calls overlap");
    let events = h.events();
    assert_eq!(
        tool_end_ids(&events),
        ["p_fast", "p_slow"],
        "ends follow completion"
    );
    assert_eq!(
        tool_result_end_ids(&events),
        ["p_slow", "p_fast"],
        "results follow call order"
    );
    let results = h.tool_results();
    assert_eq!(result_text(&results[0]), "slow done");
    assert_eq!(result_text(&results[1]), "fast done");
    // Each call starts before any call ends.
    let last_start = events
        .iter()
        .rposition(|e| matches!(e, AgentSessionEvent::ToolExecutionStart { .. }));
    let first_end = events
        .iter()
        .position(|e| matches!(e, AgentSessionEvent::ToolExecutionEnd { .. }));
    assert!(last_start < first_end);
    // Result messages are committed after every call ended.
    let last_end = events
        .iter()
        .rposition(|e| matches!(e, AgentSessionEvent::ToolExecutionEnd { .. }));
    let first_result = events.iter().position(|e| {
        matches!(
            e,
            AgentSessionEvent::MessageStart {
                message: AgentMessage::ToolResult(_)
            }
        )
    });
    assert!(last_end < first_result);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_sequential_tool_makes_the_whole_batch_sequential() {
    let overlap = Arc::new(Overlap::default());
    let (count, count_calls) = counting_tool("count", ExecutionMode::Parallel, overlap.clone());
    let (seq, seq_calls) = counting_tool("seq", ExecutionMode::Sequential, overlap.clone());
    // Control: a parallel tool with its own counter, called in a batch without a sequential one.
    let control = Arc::new(Overlap::default());
    let (free, free_calls) = counting_tool("free", ExecutionMode::Parallel, control.clone());
    let h = harness(vec![count, seq, free]).await;
    h.mock.push(reply(
        &[],
        vec![
            call("s_a", "count", json!({})),
            call("s_b", "seq", json!({})),
            call("s_c", "count", json!({})),
        ],
        "tool_calls",
    ));
    h.mock.push(reply(
        &[],
        vec![
            call("p_a", "free", json!({})),
            call("p_b", "free", json!({})),
            call("p_c", "free", json!({})),
        ],
        "tool_calls",
    ));
    h.mock.push(Step::text("done"));
    h.run("go").await;

    assert_eq!(count_calls.load(Ordering::SeqCst), 2);
    assert_eq!(seq_calls.load(Ordering::SeqCst), 1);
    assert_eq!(free_calls.load(Ordering::SeqCst), 3);
    assert_eq!(
        overlap.max(),
        1,
        "calls of a batch with a sequential tool never overlap"
    );
    assert!(
        control.max() > 1,
        "a batch without a sequential tool runs in parallel"
    );
    let events = h.events();
    let ends = tool_end_ids(&events);
    assert_eq!(&ends[..3], ["s_a", "s_b", "s_c"]);
    assert_eq!(&tool_result_end_ids(&events)[..3], ["s_a", "s_b", "s_c"]);
}

// ---------------------------------------------------------------------------------------------
// 4. Output limit
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn length_stop_fails_every_call_without_running_it() {
    let (echo, echo_calls) = echo_tool();
    let h = harness(vec![echo]).await;
    h.mock.push(reply(
        &["Let me"],
        vec![
            call("l_1", "echo", json!({"text": "a"})),
            call("l_2", "echo", json!({"text": "b"})),
        ],
        "length",
    ));
    h.mock.push(Step::text("sorry"));
    h.run("long").await;

    assert_eq!(
        echo_calls.load(Ordering::SeqCst),
        0,
        "no call runs after a length stop"
    );
    let messages = h.messages();
    assert_eq!(
        messages[1].as_assistant().map(|a| a.stop_reason),
        Some(StopReason::Length)
    );
    let results = h.tool_results();
    assert_eq!(results.len(), 2);
    for result in &results {
        assert!(result.is_error);
        assert!(
            result_text(result).contains("output token limit"),
            "{}",
            result_text(result)
        );
    }
    let events = h.events();
    assert_eq!(tool_end_ids(&events), ["l_1", "l_2"]);
    assert!(events.iter().all(|e| match e {
        AgentSessionEvent::ToolExecutionEnd { is_error, .. } => *is_error,
        _ => true,
    }));
}

// ---------------------------------------------------------------------------------------------
// 5. Progress
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_becomes_tool_execution_updates() {
    let (tool, _) = test_tool("work", any_args(), ExecutionMode::Parallel, |call| {
        async move {
            (call.progress)(json!({"step": 1}));
            tokio::task::yield_now().await;
            (call.progress)(json!({"step": 2, "note": "halfway"}));
            ToolOutput::text("worked")
        }
        .boxed()
    });
    let h = harness(vec![tool]).await;
    h.mock.push(Step::tool_call("w_1", "work", json!({"n": 1})));
    h.mock.push(Step::text("done"));
    h.run("work").await;

    let events = h.events();
    let tool_events: Vec<&AgentSessionEvent> = events
        .iter()
        .filter(|e| e.type_name().starts_with("tool_execution"))
        .collect();
    assert_eq!(
        tool_events
            .iter()
            .map(|e| e.type_name())
            .collect::<Vec<_>>(),
        [
            "tool_execution_start",
            "tool_execution_update",
            "tool_execution_update",
            "tool_execution_end"
        ]
    );
    let updates: Vec<(String, String, Value, Value)> = events
        .iter()
        .filter_map(|e| match e {
            AgentSessionEvent::ToolExecutionUpdate {
                tool_call_id,
                tool_name,
                args,
                partial_result,
            } => Some((
                tool_call_id.clone(),
                tool_name.clone(),
                args.clone(),
                partial_result.clone(),
            )),
            _ => None,
        })
        .collect();
    assert_eq!(
        updates,
        [
            (
                "w_1".into(),
                "work".into(),
                json!({"n": 1}),
                json!({"step": 1})
            ),
            (
                "w_1".into(),
                "work".into(),
                json!({"n": 1}),
                json!({"step": 2, "note": "halfway"})
            ),
        ]
    );
    let json = serde_json::to_value(tool_events[1]).expect("json");
    assert_eq!(json["type"], "tool_execution_update");
    assert_eq!(json["partialResult"], json!({"step": 1}));
    assert_eq!(json["toolCallId"], "w_1");
}

// ---------------------------------------------------------------------------------------------
// 6. Interruption
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn abort_during_a_tool_cancels_it_and_settles_once() {
    let started = Arc::new(Notify::new());
    let observed = Arc::new(AtomicBool::new(false));
    let (tool, _) = {
        let started = started.clone();
        let observed = observed.clone();
        test_tool("block", any_args(), ExecutionMode::Parallel, move |call| {
            let started = started.clone();
            let observed = observed.clone();
            async move {
                started.notify_one();
                tokio::select! {
                    () = call.cancel.cancelled() => {
                        observed.store(true, Ordering::SeqCst);
                        ToolOutput::error("stopped by cancellation")
                    }
                    () = tokio::time::sleep(TOOL_WAIT) => ToolOutput::text("never cancelled"),
                }
            }
            .boxed()
        })
    };
    let h = harness(vec![tool]).await;
    h.mock.push(Step::tool_call("b_1", "block", json!({})));
    h.start("block please");
    tokio::time::timeout(WAIT, started.notified())
        .await
        .expect("tool started");
    assert_eq!(h.session.state().activity, Activity::Running);
    h.queue(Delivery::FollowUp, "kept after abort");

    tokio::time::timeout(WAIT, h.session.abort())
        .await
        .expect("abort returns")
        .expect("abort succeeds");
    assert!(
        observed.load(Ordering::SeqCst),
        "the tool saw its cancellation"
    );
    assert_eq!(h.session.state().activity, Activity::Idle);
    assert!(!h.session.is_streaming());
    assert_eq!(h.count("agent_start"), 1);
    assert_eq!(h.count("agent_end"), 1);
    assert_eq!(h.count("agent_settled"), 1);
    assert_eq!(h.labels().last().map(String::as_str), Some("agent_settled"));
    // Queued user input survives the interruption and does not start a run by itself.
    let queued = h.session.state().queued_inputs;
    assert_eq!(queued.follow_up.len(), 1);
    assert_eq!(queued.follow_up[0].text, "kept after abort");
    assert_eq!(h.mock.requests().len(), 1);
    h.session.wait_idle().await;
    assert!(!h.session.is_streaming());

    // Every tool call of the journal has its result, so the conversation can continue.
    let results = h.tool_results();
    assert_eq!(results.len(), 1);
    assert_eq!(results[0].tool_call_id, "b_1");
    h.mock.push(Step::text("again"));
    h.mock.push(Step::text("followed up"));
    h.run("continue").await;
    assert_eq!(h.last_assistant().text(), "followed up");
    assert_eq!(h.count("agent_settled"), 2);
    let bodies = h.request_bodies();
    assert_eq!(bodies.len(), 3);
    assert_eq!(
        wire_user_texts(&bodies[2]),
        ["block please", "continue", "kept after abort"]
    );
    let last = &bodies[1];
    assert!(
        wire_messages(last)
            .iter()
            .any(|m| m["role"] == "tool" && m["tool_call_id"] == "b_1")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn abort_waits_for_the_tool_and_input_is_refused_while_aborting() {
    let started = Arc::new(Notify::new());
    let finished = Arc::new(AtomicBool::new(false));
    let (tool, _) = {
        let started = started.clone();
        let finished = finished.clone();
        test_tool("linger", any_args(), ExecutionMode::Parallel, move |call| {
            let started = started.clone();
            let finished = finished.clone();
            async move {
                started.notify_one();
                let _ = tokio::time::timeout(TOOL_WAIT, call.cancel.cancelled()).await;
                // Cleaning up takes a moment after the cancellation.
                tokio::time::sleep(Duration::from_millis(300)).await;
                finished.store(true, Ordering::SeqCst);
                ToolOutput::error("cleaned up")
            }
            .boxed()
        })
    };
    let h = harness(vec![tool]).await;
    h.mock.push(Step::tool_call("l_1", "linger", json!({})));
    h.start("linger");
    tokio::time::timeout(WAIT, started.notified())
        .await
        .expect("tool started");
    let session = h.session.clone();
    let abort = tokio::spawn(async move { session.abort().await });
    let deadline = tokio::time::Instant::now() + WAIT;
    while h.session.state().activity != Activity::Aborting {
        assert!(
            !abort.is_finished(),
            "abort returned before the tool finished"
        );
        assert!(tokio::time::Instant::now() < deadline, "never saw aborting");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(
        h.session
            .prompt(Delivery::Direct, "now".into())
            .err()
            .map(|e| e.to_string())
            .as_deref(),
        Some("Cannot prompt while the agent is aborting")
    );
    assert_eq!(
        h.session
            .prompt(Delivery::Steer, "now".into())
            .err()
            .map(|e| e.to_string())
            .as_deref(),
        Some("Cannot queue input while the agent is aborting")
    );
    tokio::time::timeout(WAIT, abort)
        .await
        .expect("abort returns")
        .expect("abort task")
        .expect("abort succeeds");
    assert!(
        finished.load(Ordering::SeqCst),
        "abort returns after the tool settled"
    );
    assert_eq!(h.session.state().activity, Activity::Idle);
    assert_eq!(h.count("agent_settled"), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn abort_before_the_first_provider_call_never_reaches_the_provider() {
    let h = harness(Vec::new()).await;
    h.mock.push(Step::text("should not be requested"));
    let admission = h
        .session
        .prompt(Delivery::Direct, "too late".into())
        .expect("prompt admitted");
    assert!(admission.starter.is_some());
    let session = h.session.clone();
    let abort = tokio::spawn(async move { session.abort().await });
    let deadline = tokio::time::Instant::now() + WAIT;
    while h.session.state().activity != Activity::Aborting {
        assert!(tokio::time::Instant::now() < deadline, "never saw aborting");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    drop(admission);
    tokio::time::timeout(WAIT, abort)
        .await
        .expect("abort returns")
        .expect("abort task")
        .expect("abort succeeds");
    assert!(
        h.mock.requests().is_empty(),
        "no provider request after the abort"
    );
    assert_eq!(h.mock.pending_steps(), 1);
    assert_eq!(h.session.state().activity, Activity::Idle);
    assert_eq!(h.count("agent_start"), 1);
    assert_eq!(h.count("agent_end"), 1);
    assert_eq!(h.count("agent_settled"), 1);
    assert_eq!(h.labels().last().map(String::as_str), Some("agent_settled"));
    if let Some(assistant) = h.session.last_assistant() {
        assert_eq!(assistant.stop_reason, StopReason::Aborted);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn abort_during_streaming_commits_an_aborted_assistant() {
    let h = harness(Vec::new()).await;
    h.mock.push(Step::Hang(vec!["partial".into()]));
    h.start("hang");
    h.wait_for_event("the first text delta", |e| {
        matches!(
            e,
            AgentSessionEvent::MessageUpdate {
                assistant_message_event: AssistantMessageEvent::TextDelta { .. }
            }
        )
    })
    .await;
    assert!(h.session.state().streaming_message.is_some());

    tokio::time::timeout(WAIT, h.session.abort())
        .await
        .expect("abort returns")
        .expect("abort succeeds");
    assert_eq!(h.session.state().activity, Activity::Idle);
    assert!(h.session.state().streaming_message.is_none());
    let assistant = h.last_assistant();
    assert_eq!(assistant.stop_reason, StopReason::Aborted);
    assert_eq!(
        assistant.error_message.as_deref(),
        Some("Request was aborted")
    );
    assert_eq!(
        h.mock.wait_for_disconnects(1, WAIT).await,
        1,
        "the HTTP request is dropped"
    );

    let labels = h.labels();
    assert_eq!(
        &labels[labels.len() - 5..],
        [
            "entry_appended:message",
            "message_end:assistant",
            "turn_end",
            "agent_end",
            "agent_settled"
        ]
    );
    assert_eq!(h.count("agent_settled"), 1);
    let events = h.events();
    let turn_end = events
        .iter()
        .rev()
        .find_map(|e| match e {
            AgentSessionEvent::TurnEnd {
                message,
                tool_results,
            } => Some((message.clone(), tool_results.clone())),
            _ => None,
        })
        .expect("turn_end");
    assert_eq!(
        turn_end.0.as_assistant().map(|a| a.stop_reason),
        Some(StopReason::Aborted)
    );
    assert!(turn_end.1.is_empty());
    let page = h.messages();
    assert_eq!(page.len(), 2);
    assert_eq!(page[1].as_assistant(), Some(&assistant));
}

// ---------------------------------------------------------------------------------------------
// 7. Panicking tool
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn panicking_tool_becomes_an_error_result_and_the_session_recovers() {
    let (boom, boom_calls) = test_tool("boom", any_args(), ExecutionMode::Parallel, |_call| {
        async move { panic!("tool exploded on purpose") }.boxed()
    });
    let h = harness(vec![boom]).await;
    h.mock.push(Step::tool_call("x_1", "boom", json!({})));
    h.mock.push(Step::text("recovered"));
    h.run("explode").await;

    assert_eq!(boom_calls.load(Ordering::SeqCst), 1);
    let results = h.tool_results();
    assert_eq!(results.len(), 1);
    assert!(results[0].is_error);
    assert_eq!(results[0].tool_call_id, "x_1");
    assert!(!result_text(&results[0]).is_empty());
    assert!(h.events().iter().any(|e| matches!(
        e,
        AgentSessionEvent::ToolExecutionEnd { tool_call_id, is_error: true, .. } if tool_call_id == "x_1"
    )));
    assert_eq!(h.last_assistant().text(), "recovered");
    assert_eq!(h.session.state().activity, Activity::Idle);

    h.mock.push(Step::text("fine"));
    h.run("again").await;
    let last = h.last_assistant();
    assert_eq!(last.text(), "fine");
    assert_eq!(last.stop_reason, StopReason::Stop);
    assert_eq!(h.count("agent_settled"), 2);
}

// ---------------------------------------------------------------------------------------------
// 8. Steering and follow-up
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn steering_queued_before_the_run_precedes_the_first_provider_call() {
    let h = harness(Vec::new()).await;
    h.queue(Delivery::Steer, "steer first");
    assert!(
        !h.session.is_streaming(),
        "queueing while idle does not wake the session"
    );
    assert_eq!(h.count("agent_start"), 0);
    let state = h.session.state();
    assert_eq!(state.queued_inputs.steering.len(), 1);
    assert_eq!(state.queued_inputs.steering[0].text, "steer first");
    assert_eq!(
        state.queued_inputs.steering[0].delivery,
        QueuedDelivery::Steer
    );

    h.mock.push(Step::text("ok"));
    h.run("main").await;
    let bodies = h.request_bodies();
    assert_eq!(bodies.len(), 1, "one provider call");
    assert_eq!(wire_user_texts(&bodies[0]), ["main", "steer first"]);
    assert!(h.session.state().queued_inputs.steering.is_empty());

    let events = h.events();
    let removal = events
        .iter()
        .rposition(
            |e| matches!(e, AgentSessionEvent::QueueUpdate { steering, .. } if steering.is_empty()),
        )
        .expect("queue_update removing the steer");
    let delivered = events
        .iter()
        .position(|e| is_user_start(e, "steer first"))
        .expect("steer delivered");
    assert!(removal < delivered);
    let assistant_start = events
        .iter()
        .position(|e| {
            matches!(
                e,
                AgentSessionEvent::MessageStart {
                    message: AgentMessage::Assistant(_)
                }
            )
        })
        .expect("assistant");
    assert!(delivered < assistant_start);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn steering_during_a_run_arrives_at_the_next_turn_and_follow_up_when_it_would_stop() {
    let started = Arc::new(Notify::new());
    let release = Arc::new(Notify::new());
    let (gate, _) = gate_tool(started.clone(), release.clone());
    let h = harness(vec![gate]).await;
    h.mock.push(Step::tool_call("g_1", "gate", json!({})));
    h.mock.push(Step::text("after steer"));
    h.mock.push(Step::text("after follow-up"));
    h.start("go");
    tokio::time::timeout(WAIT, started.notified())
        .await
        .expect("gate started");

    // A direct prompt is refused while running.
    let refused = h.session.prompt(Delivery::Direct, "nope".into());
    assert_eq!(
        refused.err().map(|e| e.to_string()).as_deref(),
        Some("streamingBehavior is required while the agent is running")
    );
    h.queue(Delivery::Steer, "change course");
    h.queue(Delivery::FollowUp, "and then this");
    let queued = h.session.state().queued_inputs;
    assert_eq!(queued.steering.len(), 1);
    assert_eq!(queued.follow_up.len(), 1);
    assert_eq!(queued.follow_up[0].delivery, QueuedDelivery::FollowUp);
    release.notify_one();
    h.idle().await;

    let bodies = h.request_bodies();
    assert_eq!(bodies.len(), 3);
    assert_eq!(wire_user_texts(&bodies[0]), ["go"]);
    let second = wire_messages(&bodies[1]);
    assert_eq!(
        wire_user_texts(&bodies[1]),
        ["go", "change course"],
        "steer at the turn boundary"
    );
    assert_eq!(
        second.last().map(wire_text).as_deref(),
        Some("change course")
    );
    assert_eq!(
        second[second.len() - 2]["role"],
        "tool",
        "the steer follows the tool result"
    );
    assert_eq!(
        wire_user_texts(&bodies[2]),
        ["go", "change course", "and then this"],
        "follow-up when the run would stop"
    );
    assert!(h.session.state().queued_inputs.steering.is_empty());
    assert!(h.session.state().queued_inputs.follow_up.is_empty());

    // Event order around the steer: turn_end → queue_update → turn_start → message_start(user).
    let events = h.events();
    let steer_at = events
        .iter()
        .position(|e| is_user_start(e, "change course"))
        .expect("steer delivered");
    let first_turn_end = events
        .iter()
        .position(|e| matches!(e, AgentSessionEvent::TurnEnd { .. }))
        .expect("turn_end");
    let labels: Vec<String> = events[first_turn_end..=steer_at]
        .iter()
        .map(label)
        .collect();
    assert_eq!(
        labels,
        [
            "turn_end",
            "queue_update",
            "turn_start",
            "message_start:user"
        ]
    );
    match &events[first_turn_end + 1] {
        AgentSessionEvent::QueueUpdate {
            steering,
            follow_up,
        } => {
            assert!(steering.is_empty());
            assert_eq!(follow_up.len(), 1, "the follow-up stays queued");
        }
        other => panic!("expected queue_update, got {other:?}"),
    }
    // The follow-up arrives after the steered turn ended, with its queue_update first.
    let follow_at = events
        .iter()
        .position(|e| is_user_start(e, "and then this"))
        .expect("follow-up delivered");
    let steered_reply_end = position_from(&events, steer_at, |e| {
        matches!(e, AgentSessionEvent::TurnEnd { message, .. } if message.as_assistant().map(AssistantMessage::text).as_deref() == Some("after steer"))
    })
    .expect("turn_end of the steered reply");
    assert!(steered_reply_end < follow_at);
    let removal = events[..follow_at]
        .iter()
        .rposition(|e| matches!(e, AgentSessionEvent::QueueUpdate { follow_up, .. } if follow_up.is_empty()))
        .expect("queue_update removing the follow-up");
    assert!(steered_reply_end < removal);
    // One run for all of it.
    assert_eq!(h.count("agent_start"), 1);
    assert_eq!(h.count("agent_end"), 1);
    assert_eq!(h.count("agent_settled"), 1);
    assert_eq!(h.last_assistant().text(), "after follow-up");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn steering_modes_take_one_or_all_queued_steers() {
    for (mode, expected_requests) in [(None, 2), (Some("all"), 1)] {
        let h = harness_with(Options {
            global_settings: mode.map(|m| json!({"steeringMode": m})),
            ..Options::default()
        })
        .await;
        h.queue(Delivery::Steer, "s1");
        h.queue(Delivery::Steer, "s2");
        h.mock.push(Step::text("r1"));
        h.mock.push(Step::text("r2"));
        h.run("main").await;
        let bodies = h.request_bodies();
        assert_eq!(bodies.len(), expected_requests, "steering mode {mode:?}");
        if mode.is_none() {
            assert_eq!(h.session.state().steering_mode, QueueMode::OneAtATime);
            assert_eq!(wire_user_texts(&bodies[0]), ["main", "s1"]);
            assert_eq!(wire_user_texts(&bodies[1]), ["main", "s1", "s2"]);
        } else {
            assert_eq!(h.session.state().steering_mode, QueueMode::All);
            assert_eq!(wire_user_texts(&bodies[0]), ["main", "s1", "s2"]);
        }
        assert!(h.session.state().queued_inputs.steering.is_empty());
        assert_eq!(h.count("agent_settled"), 1);
    }
}

async fn follow_up_mode_run(mode: Option<&str>) -> Harness {
    let h = harness_with(Options {
        global_settings: mode.map(|m| json!({"followUpMode": m})),
        ..Options::default()
    })
    .await;
    h.queue(Delivery::FollowUp, "f1");
    h.queue(Delivery::FollowUp, "f2");
    assert!(!h.session.is_streaming());
    h.mock.push(Step::text("r1"));
    h.mock.push(Step::text("r2"));
    h.mock.push(Step::text("r3"));
    h.run("main").await;
    h
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn follow_up_mode_one_at_a_time_takes_one_per_turn() {
    let h = follow_up_mode_run(None).await;
    assert_eq!(h.session.state().follow_up_mode, QueueMode::OneAtATime);
    let bodies = h.request_bodies();
    assert_eq!(bodies.len(), 3);
    assert_eq!(wire_user_texts(&bodies[0]), ["main"]);
    assert_eq!(wire_user_texts(&bodies[1]), ["main", "f1"]);
    assert_eq!(wire_user_texts(&bodies[2]), ["main", "f1", "f2"]);
    assert_eq!(h.count("agent_settled"), 1);
    assert_eq!(h.count("turn_start"), 3);
    assert!(h.session.state().queued_inputs.follow_up.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn follow_up_mode_all_takes_the_whole_queue() {
    let h = follow_up_mode_run(Some("all")).await;
    assert_eq!(h.session.state().follow_up_mode, QueueMode::All);
    let bodies = h.request_bodies();
    assert_eq!(bodies.len(), 2, "both follow-ups in one turn");
    assert_eq!(wire_user_texts(&bodies[0]), ["main"]);
    assert_eq!(wire_user_texts(&bodies[1]), ["main", "f1", "f2"]);
    assert_eq!(h.mock.pending_steps(), 1);
    assert_eq!(h.count("agent_settled"), 1);
    assert_eq!(h.count("turn_start"), 2);
    // One queue_update removes both, before either is delivered.
    let events = h.events();
    let f1 = events
        .iter()
        .position(|e| is_user_start(e, "f1"))
        .expect("f1");
    let f2 = events
        .iter()
        .position(|e| is_user_start(e, "f2"))
        .expect("f2");
    assert!(f1 < f2);
    match &events[f1 - 1] {
        AgentSessionEvent::TurnStart => {}
        other => panic!("expected turn_start before f1, got {other:?}"),
    }
    match &events[f1 - 2] {
        AgentSessionEvent::QueueUpdate { follow_up, .. } => assert!(follow_up.is_empty()),
        other => panic!("expected queue_update, got {other:?}"),
    }
}

// ---------------------------------------------------------------------------------------------
// 9. Run lifecycle, agent_end and message pages
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lifecycle_events_and_message_pages() {
    let (echo, _) = echo_tool();
    let h = harness(vec![echo]).await;
    assert_eq!(h.session.state().message_count, 0);
    h.mock
        .push(Step::tool_call("e_1", "echo", json!({"text": "one"})));
    h.mock.push(Step::text("done one"));
    h.run("first").await;
    assert_eq!(h.count("agent_start"), 1);
    assert_eq!(h.count("agent_end"), 1);
    assert_eq!(h.count("agent_settled"), 1);
    let first_run_messages = h.messages();
    assert_eq!(first_run_messages.len(), 4);
    let agent_end = |events: &[AgentSessionEvent]| {
        events
            .iter()
            .find_map(|e| match e {
                AgentSessionEvent::AgentEnd {
                    messages,
                    will_retry,
                } => Some((messages.clone(), *will_retry)),
                _ => None,
            })
            .expect("agent_end")
    };
    let (messages, will_retry) = agent_end(&h.events());
    assert_eq!(
        messages, first_run_messages,
        "agent_end lists the run's messages"
    );
    assert!(!will_retry);
    // The subscriber context sees the committed count.
    let counts = h.event_counts();
    assert_eq!(counts.last(), Some(&4));
    assert_eq!(h.session.state().message_count, 4);

    h.clear_events();
    h.mock.push(Step::text("done two"));
    h.run("second").await;
    let labels = h.labels();
    assert_eq!(labels.first().map(String::as_str), Some("agent_start"));
    assert_eq!(labels.last().map(String::as_str), Some("agent_settled"));
    assert_eq!(h.count("agent_start"), 1);
    assert_eq!(h.count("agent_end"), 1);
    assert_eq!(h.count("agent_settled"), 1);
    let all = h.messages();
    assert_eq!(all.len(), 6);
    let (messages, _) = agent_end(&h.events());
    assert_eq!(messages, all[4..].to_vec(), "only this run's messages");
    assert_eq!(h.session.state().message_count, 6);
    assert_eq!(h.session.message_count(), 6);

    // Paging.
    let page = h.session.messages_page(0, 4).expect("page");
    assert_eq!((page.start, page.total, page.next_start), (0, 6, Some(4)));
    assert_eq!(page.messages, all[..4].to_vec());
    let page = h.session.messages_page(4, 4).expect("page");
    assert_eq!((page.start, page.total, page.next_start), (4, 6, None));
    assert_eq!(page.messages, all[4..].to_vec());
    let page = h.session.messages_page(2, 3).expect("page");
    assert_eq!((page.start, page.total, page.next_start), (2, 6, Some(5)));
    assert_eq!(page.messages, all[2..5].to_vec());
    let page = h.session.messages_page(6, 10).expect("page");
    assert_eq!((page.start, page.total, page.next_start), (6, 6, None));
    assert!(page.messages.is_empty());
    let page = h.session.messages_page(99, 1).expect("page");
    assert_eq!((page.start, page.total, page.next_start), (99, 6, None));
    assert!(page.messages.is_empty());
    let page = h.session.messages_page(1, 0).expect("page");
    assert_eq!((page.start, page.total, page.next_start), (1, 6, Some(1)));
    assert!(page.messages.is_empty());
    let json = serde_json::to_value(h.session.messages_page(5, 5).expect("page")).expect("json");
    assert_eq!(json["nextStart"], Value::Null);
    assert_eq!(json["total"], 6);
}

// ---------------------------------------------------------------------------------------------
// 10. Context usage
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn context_usage_is_estimated_then_measured() {
    let h = harness(Vec::new()).await;
    assert_eq!(
        h.session.state().context_usage,
        ContextUsage::Estimated {
            tokens: 0,
            context_window: 128_000,
            percent: 0.0
        }
    );
    h.mock.push(Step::Reply {
        thinking: Vec::new(),
        text: vec!["hello".into()],
        tool_calls: Vec::new(),
        finish_reason: "stop".into(),
        usage: Some(MockUsage {
            prompt_tokens: 100,
            completion_tokens: 20,
            cached_tokens: 0,
        }),
    });
    h.run("hi").await;
    let measured = ContextUsage::Measured {
        tokens: 120,
        context_window: 128_000,
        percent: 120.0 / 128_000.0 * 100.0,
    };
    assert_eq!(h.session.state().context_usage, measured);
    let usage = h.last_assistant().usage;
    assert_eq!(
        (usage.input, usage.output, usage.total_tokens),
        (100, 20, 120)
    );
    // Queued input is not part of the context.
    h.queue(Delivery::FollowUp, "later");
    assert_eq!(h.session.state().context_usage, measured);

    let no_model = harness_with(Options {
        with_model: false,
        ..Options::default()
    })
    .await;
    assert_eq!(
        no_model.session.state().context_usage,
        ContextUsage::Unavailable {
            reason: UnavailableReason::NoModel
        }
    );
}

// ---------------------------------------------------------------------------------------------
// Session host: operation outcomes and work plans (docs/rpc.md#sessionget_outcomes,
// docs/rpc.md#event-order, docs/rpc.md#operation-outcomes)
// ---------------------------------------------------------------------------------------------

fn outcome(id: &str) -> zi_protocol::event::OperationOutcome {
    zi_protocol::event::OperationOutcome {
        operation_id: id.to_string(),
        capability: "shell".into(),
        operation: "background_task".into(),
        result: zi_protocol::event::OutcomeResult::Succeeded,
        duration_ms: 1,
        evidence: json!({"taskId": id}),
    }
}

#[tokio::test]
async fn host_outcomes_are_unique_ordered_and_paged() {
    let results = Arc::new(Mutex::new(Vec::new()));
    let sink = results.clone();
    let (tool, _) = test_tool("record", any_args(), ExecutionMode::Parallel, move |call| {
        let sink = sink.clone();
        async move {
            let mut results = lock(&sink);
            results.push(call.host.append_outcome(outcome("op/1")).map(|_| ()));
            results.push(call.host.append_outcome(outcome("op/1")).map(|_| ()));
            results.push(call.host.append_outcome(outcome("op/2")).map(|_| ()));
            let mut bad = outcome("op/3");
            bad.capability = "Bad".into();
            results.push(call.host.append_outcome(bad).map(|_| ()));
            results.push(
                call.host
                    .replace_work_plan(None, Vec::new())
                    .map(|plan| assert_eq!(plan.revision, 1)),
            );
            // details.outcome == "error" marks the result as an error.
            ToolOutput {
                content: vec![ContentBlock::text("failed")],
                details: Some(json!({"outcome": "error", "code": "x"})),
                is_error: false,
            }
        }
        .boxed()
    });
    let h = harness(vec![tool]).await;
    h.mock.push(Step::tool_call("c1", "record", json!({})));
    h.mock.push(Step::text("done"));
    h.run("go").await;
    let results = lock(&results).clone();
    assert_eq!(results[0], Ok(()));
    assert_eq!(
        results[1].as_ref().map_err(ToString::to_string),
        Err("Operation outcome already exists: op/1".to_string())
    );
    assert_eq!(results[2], Ok(()));
    assert!(results[3].is_err());
    assert_eq!(results[4], Ok(()));

    let events = h.events();
    let names: Vec<&str> = events
        .iter()
        .filter(|e| match e {
            AgentSessionEvent::EntryAppended { entry } => entry.data.type_name() != "message",
            AgentSessionEvent::OperationOutcome { .. }
            | AgentSessionEvent::WorkPlanChanged { .. } => true,
            _ => false,
        })
        .map(AgentSessionEvent::type_name)
        .collect();
    assert_eq!(
        names,
        [
            "entry_appended",
            "operation_outcome",
            "entry_appended",
            "operation_outcome",
            "entry_appended",
            "work_plan_changed"
        ]
    );
    let end = events
        .iter()
        .find_map(|e| match e {
            AgentSessionEvent::ToolExecutionEnd { is_error, .. } => Some(*is_error),
            _ => None,
        })
        .expect("tool end");
    assert!(end);

    let page = h.session.outcomes_page(0, 1);
    assert_eq!((page.start, page.total, page.next_start), (0, 2, Some(1)));
    let rest = h.session.outcomes_page(1, 100);
    assert_eq!((rest.start, rest.total, rest.next_start), (1, 2, None));
    let live: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            AgentSessionEvent::OperationOutcome { outcome } => Some(outcome.clone()),
            _ => None,
        })
        .collect();
    let paged: Vec<_> = page.outcomes.into_iter().chain(rest.outcomes).collect();
    assert_eq!(paged, live);
    assert_eq!(h.session.outcomes_page(5, 10).outcomes.len(), 0);
    assert_eq!(h.session.state().work_plan.revision, 1);
}

// ---------------------------------------------------------------------------------------------
// Approvals: the connection goes away
// ---------------------------------------------------------------------------------------------

/// Opts a connection in with policy `untrusted`; the sink counts the requests it was sent.
fn opt_in_untrusted(session: &AgentSession) -> Arc<AtomicUsize> {
    use zi_agent::session::approvals::{ApprovalFrame, ApprovalSink};
    let requests = Arc::new(AtomicUsize::new(0));
    let counter = requests.clone();
    let sink: ApprovalSink = Arc::new(move |frame: ApprovalFrame<'_>| {
        if matches!(frame, ApprovalFrame::Request(_)) {
            counter.fetch_add(1, Ordering::SeqCst);
        }
    });
    let params = zi_protocol::params::SetApprovalsParams {
        enabled: true,
        policy: Some(zi_protocol::approval::ApprovalPolicy::Untrusted),
        sandbox: None,
        rules: None,
        timeout_ms: None,
    };
    session
        .set_approvals(params, sink)
        .expect("approvals enabled");
    requests
}

/// Waits until the sink was sent `count` requests.
async fn sent(requests: &AtomicUsize, count: usize) {
    let deadline = tokio::time::Instant::now() + WAIT;
    while requests.load(Ordering::SeqCst) < count {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{count} approval requests sent"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// The evidence `source` of every journaled approval outcome.
fn approval_sources(session: &AgentSession) -> Vec<String> {
    session
        .outcomes_page(0, 100)
        .outcomes
        .iter()
        .filter_map(|entry| match &entry.data {
            zi_protocol::event::EntryData::OperationOutcome(o) if o.capability == "approval" => {
                Some(
                    o.evidence["source"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string(),
                )
            }
            _ => None,
        })
        .collect()
}

/// The ordering the EOF race produced, constructed: the connection disconnects while calls
/// wait for approval and nothing else stops the run. The disconnect itself takes the stop path
/// (docs/approvals.md#timeouts-interruption-and-eof): the pending requests end
/// `cancelled`/`disconnect`, the calls queued behind them end aborted without running or being
/// journaled as `unattended`, and the run settles without another provider request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_disconnect_with_queued_approvals_stops_the_run() {
    // 18 parallel calls: 16 pending, 2 queued for a slot.
    let (echo, echoed) = echo_tool();
    let h = harness(vec![echo]).await;
    let requests = opt_in_untrusted(&h.session);
    let calls: Vec<MockToolCall> = (0..18)
        .map(|i| call(&format!("e{i}"), "echo", json!({"text": "x"})))
        .collect();
    h.mock.push(reply(&[], calls, "tool_calls"));
    h.mock.push(Step::text("not reached"));
    h.start("go");
    sent(&requests, 16).await;
    h.session.disconnect_approvals();
    h.idle().await;
    assert_eq!(approval_sources(&h.session), vec!["disconnect"; 16]);
    assert_eq!(echoed.load(Ordering::SeqCst), 0, "no call ran");
    let results = h.tool_results();
    assert_eq!(results.len(), 18);
    let aborted = results
        .iter()
        .filter(|r| result_text(r) == "Tool execution was aborted")
        .count();
    assert_eq!(aborted, 2, "the queued calls end aborted");
    assert_eq!(h.mock.requests().len(), 1, "the run stopped");

    // A sequential batch: one pending, the later calls not reached yet.
    let (tool, ran) = test_tool("step", any_args(), ExecutionMode::Sequential, |_| {
        async { ToolOutput::text("ran") }.boxed()
    });
    let h = harness(vec![tool]).await;
    let requests = opt_in_untrusted(&h.session);
    let calls: Vec<MockToolCall> = (0..3)
        .map(|i| call(&format!("s{i}"), "step", json!({})))
        .collect();
    h.mock.push(reply(&[], calls, "tool_calls"));
    h.mock.push(Step::text("not reached"));
    h.start("go");
    sent(&requests, 1).await;
    h.session.disconnect_approvals();
    h.idle().await;
    assert_eq!(approval_sources(&h.session), vec!["disconnect"]);
    assert_eq!(ran.load(Ordering::SeqCst), 0, "no call ran");
    assert_eq!(requests.load(Ordering::SeqCst), 1, "nothing asked after");
    assert_eq!(h.mock.requests().len(), 1, "the run stopped");
}

/// An assistant message's `message_start` names the journal entry it is committed as, so a
/// client that shows it while it streams (ACP's `messageId`) names it as a replay of the journal
/// does; other events carry no id.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn assistant_message_start_names_its_journal_entry() {
    let (echo, _) = echo_tool();
    let h = harness(vec![echo]).await;
    type Seen = Vec<(String, Option<String>)>;
    let seen: Arc<Mutex<Seen>> = Arc::default();
    let sink = seen.clone();
    h.session.subscribe(Arc::new(
        move |event: &AgentSessionEvent, context: &EventContext| {
            let label = match event {
                AgentSessionEvent::MessageStart { message } => format!("start:{}", role(message)),
                AgentSessionEvent::EntryAppended { entry } => format!("entry:{}", entry.id),
                _ => return,
            };
            sink.lock()
                .unwrap()
                .push((label, context.message_id.clone()));
        },
    ));
    h.mock
        .push(Step::tool_call("call_1", "echo", json!({"text": "hi"})));
    h.mock.push(Step::text("all done"));
    h.run("please echo").await;
    let seen = seen.lock().unwrap().clone();
    let announced: Vec<String> = seen
        .iter()
        .filter(|(label, _)| label == "start:assistant")
        .map(|(_, id)| {
            id.clone()
                .expect("an assistant message_start carries its id")
        })
        .collect();
    assert_eq!(announced.len(), 2, "{seen:?}");
    for id in &announced {
        let entry = format!("entry:{id}");
        assert!(
            seen.iter().any(|(label, _)| *label == entry),
            "the entry {id} was journaled: {seen:?}"
        );
    }
    assert!(
        seen.iter()
            .filter(|(label, _)| label != "start:assistant")
            .all(|(_, id)| id.is_none()),
        "{seen:?}"
    );
    let journal_ids: Vec<String> = h
        .session
        .entries_page(0, 100)
        .expect("entries")
        .entries
        .iter()
        .filter(|e| serde_json::to_value(e).unwrap()["message"]["role"] == "assistant")
        .map(|e| e.id.clone())
        .collect();
    assert_eq!(journal_ids, announced);
}

/// A run that ends with an error leaves its follow-ups queued; `run_queued_follow_up` starts
/// the next run with the first of them (and refuses while busy or with nothing queued).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follow_up_left_by_a_failed_run_starts_the_next_run() {
    let started = Arc::new(Notify::new());
    let release = Arc::new(Notify::new());
    let (gate, _) = gate_tool(started.clone(), release.clone());
    let h = harness(vec![gate]).await;
    h.mock.push(Step::tool_call("g1", "gate", json!({})));
    h.mock.push(Step::HttpError {
        status: 400,
        message: "bad request".into(),
    });
    h.mock.push(Step::text("later done"));
    h.start("first");
    tokio::time::timeout(WAIT, started.notified())
        .await
        .expect("the gate tool starts");
    h.queue(Delivery::FollowUp, "later");
    assert!(
        h.session.run_queued_follow_up().is_none(),
        "refused while a run is active"
    );
    release.notify_one();
    h.idle().await;
    assert_eq!(h.last_assistant().stop_reason, StopReason::Error);
    assert_eq!(h.session.state().queued_inputs.follow_up.len(), 1);
    let starter = h.session.run_queued_follow_up().expect("a run starts");
    drop(starter);
    h.idle().await;
    assert!(h.session.state().queued_inputs.follow_up.is_empty());
    assert_eq!(
        h.messages()
            .iter()
            .filter_map(user_text)
            .collect::<Vec<_>>(),
        ["first", "later"]
    );
    assert_eq!(h.last_assistant().text(), "later done");
    assert!(h.session.run_queued_follow_up().is_none(), "nothing queued");
}
