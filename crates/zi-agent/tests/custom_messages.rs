//! Custom entries and custom messages (docs/extensions.md#state-and-messages,
//! docs/architecture.md#the-run, docs/rpc.md#event-order, docs/rpc.md#sessionget_messages): a real
//! `AgentSession` with a persistent journal in a temporary directory talks to the mock LLM over
//! loopback HTTP.

// A test fails by panicking with its reason.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine as _;
use futures::FutureExt;
use futures::future::BoxFuture;
use serde_json::{Value, json};
use tokio::sync::Notify;
use zi_agent::custom::{CustomDelivery, CustomMessageInput};
use zi_agent::{
    AgentSession, EventContext, SessionConfig, Tool, ToolCallContext, ToolOutput, TypedTool,
};
use zi_agent::{ExecutionMode, ToolSet};
use zi_ai::catalog::Catalog;
use zi_ai::credentials::Credentials;
use zi_config::settings::SettingsStore;
use zi_journal::file::{JournalFile, SessionHeader, open_existing};
use zi_journal::memory::Journal;
use zi_os::clock::timestamp_millis;
use zi_os::sync::lock;
use zi_protocol::ThinkingLevel;
use zi_protocol::event::{AgentSessionEvent, EntryData, SessionEntry};
use zi_protocol::message::{AgentMessage, ContentBlock, MessageContent};
use zi_protocol::request::Delivery;
use zi_test_support::mock_llm::{MockLlm, Step};

/// Upper bound for anything the tests wait for; only reached when something is broken.
const WAIT: Duration = Duration::from_secs(30);
/// How long the gate tool waits for its release before giving up on its own.
const TOOL_WAIT: Duration = Duration::from_secs(15);

const CUSTOM_MESSAGE_WHILE_RUNNING: &str =
    "Cannot append or trigger a custom message while the agent is running";
const CUSTOM_QUEUE_WHILE_IDLE: &str =
    "Custom messages can be steered or queued for follow-up only during an active run";
const QUEUE_CAPACITY: &str = "Queue capacity exceeded (maximum 32 messages or 8 MiB).";
const NO_MODEL: &str = "No model selected. Use /login, then /model.";

// ---------------------------------------------------------------------------------------------
// The gate tool: holds a run open until released (or cancelled)
// ---------------------------------------------------------------------------------------------

struct GateTool {
    parameters: Value,
    started: Arc<Notify>,
    release: Arc<Notify>,
    calls: Arc<AtomicUsize>,
}

impl TypedTool for GateTool {
    type Args = Value;

    fn name(&self) -> &str {
        "gate"
    }

    fn description(&self) -> &str {
        "blocks until the test releases it"
    }

    fn parameters(&self) -> &Value {
        &self.parameters
    }

    fn execution_mode(&self) -> ExecutionMode {
        ExecutionMode::Parallel
    }

    fn execute(&self, _arguments: Value, call: ToolCallContext) -> BoxFuture<'static, ToolOutput> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let started = self.started.clone();
        let release = self.release.clone();
        async move {
            started.notify_one();
            tokio::select! {
                () = release.notified() => ToolOutput::text("gate opened"),
                () = call.cancel.cancelled() => ToolOutput::error("gate cancelled"),
                () = tokio::time::sleep(TOOL_WAIT) => ToolOutput::error("gate was never released"),
            }
        }
        .boxed()
    }
}

struct Gate {
    started: Arc<Notify>,
    release: Arc<Notify>,
}

fn gate_tool() -> (Arc<dyn Tool>, Gate) {
    let started = Arc::new(Notify::new());
    let release = Arc::new(Notify::new());
    let tool = GateTool {
        parameters: json!({"type": "object", "properties": {}}),
        started: started.clone(),
        release: release.clone(),
        calls: Arc::new(AtomicUsize::new(0)),
    };
    (Arc::new(tool), Gate { started, release })
}

impl Gate {
    async fn wait_started(&self) {
        tokio::time::timeout(WAIT, self.started.notified())
            .await
            .expect("the gate tool started");
    }

    fn open(&self) {
        self.release.notify_one();
    }
}

// ---------------------------------------------------------------------------------------------
// Harness
// ---------------------------------------------------------------------------------------------

type Events = Arc<Mutex<Vec<(AgentSessionEvent, u64)>>>;

struct Harness {
    mock: MockLlm,
    session: AgentSession,
    events: Events,
    /// The journal file (it may not exist yet: new journals start pending).
    path: PathBuf,
    dir: tempfile::TempDir,
}

struct Options {
    tools: Vec<Arc<dyn Tool>>,
    with_model: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            tools: Vec::new(),
            with_model: true,
        }
    }
}

fn catalog_for(mock: &MockLlm) -> Catalog {
    let mut catalog = Catalog::default();
    // m1 takes images: the restart test persists a custom message carrying one.
    catalog.add_models_json(
        &mock.models_json("key", &[json!({"id": "m1", "input": ["text", "image"]})]),
        "test",
    );
    assert!(catalog.warnings.is_empty(), "{:?}", catalog.warnings);
    catalog
}

/// Builds a session over `journal` in `dir`, subscribed to an event log.
fn build_session(
    mock: &MockLlm,
    dir: &Path,
    journal: Journal,
    options: Options,
) -> (AgentSession, Events) {
    let catalog = catalog_for(mock);
    let model = options
        .with_model
        .then(|| Arc::new(catalog.find("mock", "m1").cloned().expect("model m1")));
    let (settings, warnings) = SettingsStore::load(dir, dir, false);
    assert!(warnings.is_empty(), "{warnings:?}");
    let session = AgentSession::new(SessionConfig {
        session_id: "custom-messages-test".into(),
        cwd: dir.to_path_buf(),
        agent_dir: dir.to_path_buf(),
        journal,
        catalog,
        credentials: Credentials::default(),
        model,
        thinking: ThinkingLevel::Off,
        settings,
        tools: ToolSet::new(options.tools).expect("tool set"),
        system_prompt: "You are a test assistant.".into(),
        idle_timeout: Duration::from_secs(30),
        expander: Default::default(),
    });
    let events: Events = Arc::new(Mutex::new(Vec::new()));
    let sink = events.clone();
    session.subscribe(Arc::new(
        move |event: &AgentSessionEvent, context: &EventContext| {
            lock(&sink).push((event.clone(), context.message_count));
        },
    ));
    (session, events)
}

async fn harness_with(options: Options) -> Harness {
    let mock = MockLlm::start().await.expect("mock LLM starts");
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir
        .path()
        .join("sessions")
        .join("custom-messages-test.jsonl");
    let header = SessionHeader::new(
        "custom-messages-test",
        dir.path(),
        "2026-01-01T00:00:00.000Z".into(),
    );
    let journal = Journal::new(Some(JournalFile::pending(path.clone(), header)));
    let (session, events) = build_session(&mock, dir.path(), journal, options);
    Harness {
        mock,
        session,
        events,
        path,
        dir,
    }
}

async fn harness() -> Harness {
    harness_with(Options::default()).await
}

/// Reopens a journal file the way a resumed session does.
fn reopen(mock: &MockLlm, dir: &Path, path: &Path, options: Options) -> (AgentSession, Events) {
    let opened = open_existing(path).unwrap_or_else(|e| panic!("reopen {}: {e}", path.display()));
    assert_eq!(
        opened.repaired, None,
        "a cleanly written journal needs no repair"
    );
    let journal = Journal::restored(opened.cold, opened.entries, Some(opened.file));
    build_session(mock, dir, journal, options)
}

fn role(message: &AgentMessage) -> String {
    serde_json::to_value(message).expect("message JSON")["role"]
        .as_str()
        .unwrap_or("?")
        .to_string()
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

impl Harness {
    fn events(&self) -> Vec<AgentSessionEvent> {
        log_events(&self.events)
    }

    fn labels(&self) -> Vec<String> {
        labels_of(&self.events())
    }

    fn start(&self, text: &str) {
        start(&self.session, text);
    }

    async fn run(&self, text: &str) {
        run(&self.session, text).await;
    }

    fn messages(&self) -> Vec<AgentMessage> {
        self.session
            .messages_page(0, 10_000)
            .expect("messages page")
            .messages
    }

    fn request_bodies(&self) -> Vec<Value> {
        self.mock.requests().into_iter().map(|r| r.body).collect()
    }
}

fn log_events(events: &Events) -> Vec<AgentSessionEvent> {
    lock(events).iter().map(|(e, _)| e.clone()).collect()
}

fn labels_of(events: &[AgentSessionEvent]) -> Vec<String> {
    events
        .iter()
        .filter(|e| !matches!(e, AgentSessionEvent::MessageUpdate { .. }))
        .map(label)
        .collect()
}

fn count(events: &[AgentSessionEvent], name: &str) -> usize {
    events.iter().filter(|e| e.type_name() == name).count()
}

fn start(session: &AgentSession, text: &str) {
    let admission = session
        .prompt(Delivery::Direct, text.to_string())
        .expect("prompt admitted");
    assert!(admission.starter.is_some(), "a direct prompt starts a run");
}

async fn idle(session: &AgentSession) {
    tokio::time::timeout(WAIT, session.wait_idle())
        .await
        .expect("run settles");
}

async fn run(session: &AgentSession, text: &str) {
    start(session, text);
    idle(session).await;
}

fn appended(events: &[AgentSessionEvent]) -> Vec<SessionEntry> {
    events
        .iter()
        .filter_map(|e| match e {
            AgentSessionEvent::EntryAppended { entry } => Some(entry.clone()),
            _ => None,
        })
        .collect()
}

fn custom_message(custom_type: &str, text: &str, display: bool) -> CustomMessageInput {
    CustomMessageInput {
        custom_type: custom_type.into(),
        content: MessageContent::Text(text.into()),
        display,
        details: None,
    }
}

/// Admits a custom message that must not start a run.
fn send(session: &AgentSession, message: CustomMessageInput, delivery: CustomDelivery) {
    let starter = session
        .send_custom_message(message, delivery)
        .unwrap_or_else(|e| panic!("custom message ({delivery:?}) refused: {e}"));
    assert!(starter.is_none(), "{delivery:?} must not start a run");
}

fn refused(
    session: &AgentSession,
    message: CustomMessageInput,
    delivery: CustomDelivery,
) -> String {
    match session.send_custom_message(message, delivery) {
        Ok(_) => panic!("custom message with {delivery:?} was admitted"),
        Err(error) => error.to_string(),
    }
}

/// The wire messages of a chat-completions request body.
fn wire_messages(body: &Value) -> Vec<Value> {
    body["messages"].as_array().cloned().unwrap_or_default()
}

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

fn wire_user_texts(body: &Value) -> Vec<String> {
    wire_messages(body)
        .iter()
        .filter(|m| m["role"] == "user")
        .map(wire_text)
        .collect()
}

/// Replaces format-2 image references (`{"type":"image","mimeType":…,"blob":{"sha256":…}}`)
/// with the base64 `data` of their blob files, as the journal reader does.
fn inline_blobs(value: &mut Value, blobs: &Path) {
    match value {
        Value::Object(map) => {
            let sha = map
                .get("blob")
                .and_then(|blob| blob["sha256"].as_str())
                .map(str::to_string);
            if let (Some("image"), Some(sha)) = (map.get("type").and_then(Value::as_str), sha) {
                let bytes = std::fs::read(blobs.join(&sha)).expect("the blob file exists");
                map.remove("blob");
                map.insert(
                    "data".into(),
                    base64::engine::general_purpose::STANDARD
                        .encode(bytes)
                        .into(),
                );
                return;
            }
            map.values_mut()
                .for_each(|child| inline_blobs(child, blobs));
        }
        Value::Array(items) => items
            .iter_mut()
            .for_each(|child| inline_blobs(child, blobs)),
        _ => {}
    }
}

/// Header and entries of a journal file; the file must end with a newline and every entry
/// must follow its predecessor.
fn read_journal(path: &Path) -> (Value, Vec<SessionEntry>) {
    let text =
        std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    assert!(text.ends_with('\n'), "journal ends with a newline");
    let mut lines = text.lines();
    let header: Value = serde_json::from_str(lines.next().unwrap_or_default()).expect("header");
    let mut entries: Vec<SessionEntry> = Vec::new();
    for line in lines {
        let mut value: Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("entry {line}: {e}"));
        inline_blobs(&mut value, &path.with_extension("blobs"));
        let entry: SessionEntry =
            serde_json::from_value(value).unwrap_or_else(|e| panic!("entry {line}: {e}"));
        assert_eq!(
            entry.parent_id.as_deref(),
            entries.last().map(|e| e.id.as_str()),
            "linear chain at {line}"
        );
        entries.push(entry);
    }
    (header, entries)
}

fn file_len(path: &Path) -> u64 {
    std::fs::metadata(path).map(|m| m.len()).unwrap_or(0)
}

// ---------------------------------------------------------------------------------------------
// 1. Custom entries (docs/extensions.md#state-and-messages)
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn custom_entries_are_announced_but_never_presented_or_sent() {
    let h = harness().await;
    assert!(!h.path.exists(), "a new journal starts pending");

    let first = h
        .session
        .append_custom_entry(
            "example.counter",
            Some(json!({"n": 1, "marker": "state-one"})),
        )
        .expect("custom entry");
    // The first custom entry materializes the pending journal.
    assert!(
        h.path.is_file(),
        "the journal exists after the first custom entry"
    );
    let second = h
        .session
        .append_custom_entry(
            "example.counter",
            Some(json!({"n": 2, "marker": "state-two"})),
        )
        .expect("custom entry");
    let other = h
        .session
        .append_custom_entry("example.other", None)
        .expect("custom entry without data");

    // entry_appended only: no message events.
    assert_eq!(
        h.labels(),
        [
            "entry_appended:custom",
            "entry_appended:custom",
            "entry_appended:custom"
        ]
    );
    assert_eq!(
        appended(&h.events()),
        [first.clone(), second.clone(), other.clone()]
    );
    let wire = serde_json::to_value(&first).expect("entry JSON");
    assert_eq!(wire["type"], "custom");
    assert_eq!(wire["customType"], "example.counter");
    assert_eq!(wire["data"], json!({"n": 1, "marker": "state-one"}));
    assert_eq!(wire["parentId"], Value::Null);
    let wire = serde_json::to_value(&other).expect("entry JSON");
    assert!(
        wire.get("data").is_none(),
        "no data key without data: {wire}"
    );
    assert_eq!(wire["parentId"], json!(second.id));

    // Durable before announced: the file holds exactly these entries after the header.
    let (header, on_disk) = read_journal(&h.path);
    assert_eq!(header["type"], "session");
    assert_eq!(header["id"], "custom-messages-test");
    assert_eq!(on_disk, [first.clone(), second.clone(), other.clone()]);

    // getSessionEntries(type): that type only, oldest first.
    assert_eq!(h.session.custom_entries("example.counter"), [first, second]);
    assert_eq!(h.session.custom_entries("example.other"), [other]);
    assert!(h.session.custom_entries("example.none").is_empty());

    // Never in the transcript.
    assert_eq!(h.session.state().message_count, 0);
    let page = h.session.messages_page(0, 100).expect("page");
    assert_eq!(page.total, 0);
    assert!(page.messages.is_empty());

    // Never in provider context.
    h.mock.push(Step::text("reply"));
    h.run("hello").await;
    let bodies = h.request_bodies();
    assert_eq!(bodies.len(), 1);
    let body = bodies[0].to_string();
    for marker in ["state-one", "state-two", "example.counter", "example.other"] {
        assert!(
            !body.contains(marker),
            "{marker} reached the provider: {body}"
        );
    }
    assert_eq!(wire_user_texts(&bodies[0]), ["hello"]);
    assert_eq!(h.session.state().message_count, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_custom_entries_are_refused_and_nothing_is_appended() {
    let h = harness().await;
    let long = "a".repeat(129);
    for bad in [
        "",
        "Example",
        "9abc",
        "-x",
        "with space",
        "ünï",
        "a\u{0}b",
        long.as_str(),
    ] {
        let result = h.session.append_custom_entry(bad, Some(json!(1)));
        assert!(result.is_err(), "custom type {bad:?} was accepted");
    }
    let mut deep = json!(1);
    for _ in 0..40 {
        deep = json!([deep]);
    }
    let wide = Value::Array((0..5000).map(Value::from).collect());
    let big = json!("x".repeat(300 * 1024));
    for (what, data) in [
        ("too deep", deep),
        ("too many values", wide),
        ("too big", big),
    ] {
        let result = h.session.append_custom_entry("example.data", Some(data));
        assert!(result.is_err(), "{what} data was accepted");
    }
    assert!(h.events().is_empty(), "nothing announced: {:?}", h.labels());
    assert!(h.session.custom_entries("example.data").is_empty());
    assert!(!h.path.exists(), "nothing written");

    // The limits themselves are accepted: a 128-byte type name and a [a-z][a-z0-9._:/-]* name.
    let longest = "a".repeat(128);
    h.session
        .append_custom_entry(&longest, None)
        .expect("a 128-byte type name");
    h.session
        .append_custom_entry("a0._:/-z", Some(json!({"ok": true})))
        .expect("every allowed character");
    assert_eq!(h.labels().len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn custom_state_history_is_bounded_in_entries_per_type() {
    let h = harness().await;
    // ≤ 2,048 entries per type.
    for n in 0..2048 {
        h.session
            .append_custom_entry("example.many", Some(json!(n)))
            .unwrap_or_else(|e| panic!("entry {n}: {e}"));
    }
    let size = file_len(&h.path);
    assert!(
        h.session
            .append_custom_entry("example.many", Some(json!(2048)))
            .is_err()
    );
    assert_eq!(file_len(&h.path), size, "nothing half-written");
    assert_eq!(h.session.custom_entries("example.many").len(), 2048);
    // Other types have their own history.
    h.session
        .append_custom_entry("example.few", Some(json!(0)))
        .expect("another type");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn custom_state_history_is_bounded_in_bytes_per_type() {
    let h = harness().await;
    // ≤ 2 MiB per type: eight 250 KiB values fit, a ninth does not.
    let chunk = json!("y".repeat(250 * 1024));
    for n in 0..8 {
        h.session
            .append_custom_entry("example.bytes", Some(chunk.clone()))
            .unwrap_or_else(|e| panic!("chunk {n}: {e}"));
    }
    let size = file_len(&h.path);
    assert!(
        h.session
            .append_custom_entry("example.bytes", Some(chunk.clone()))
            .is_err()
    );
    assert_eq!(file_len(&h.path), size, "nothing half-written");
    assert_eq!(h.session.custom_entries("example.bytes").len(), 8);

    // The reserved program-state type may hold up to 8 MiB.
    for n in 0..9 {
        h.session
            .append_custom_entry("zi.programmatic-state.v1", Some(chunk.clone()))
            .unwrap_or_else(|e| panic!("program state {n}: {e}"));
    }
}

// ---------------------------------------------------------------------------------------------
// 2. Appended custom messages (`append` of docs/extensions.md#state-and-messages,
//    docs/rpc.md#event-order)
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn appended_custom_messages_enter_context_but_only_displayed_ones_are_presented() {
    let h = harness().await;
    send(
        &h.session,
        custom_message("example.visible", "visible note", true),
        CustomDelivery::Append,
    );
    assert!(
        h.path.is_file(),
        "the first custom message materializes the journal"
    );
    let mut hidden = custom_message("example.hidden", "hidden note", false);
    hidden.details = Some(json!({"source": "test"}));
    send(&h.session, hidden, CustomDelivery::Append);

    let events = h.events();
    assert_eq!(
        labels_of(&events),
        [
            "entry_appended:custom_message",
            "message_end:custom",
            "entry_appended:custom_message",
            "message_end:custom"
        ]
    );
    let entries = appended(&events);
    let visible_entry = serde_json::to_value(&entries[0]).expect("JSON");
    assert_eq!(visible_entry["type"], "custom_message");
    assert_eq!(visible_entry["customType"], "example.visible");
    assert_eq!(visible_entry["content"], "visible note");
    assert_eq!(visible_entry["display"], true);
    let hidden_entry = serde_json::to_value(&entries[1]).expect("JSON");
    assert_eq!(hidden_entry["display"], false);
    assert_eq!(hidden_entry["details"], json!({"source": "test"}));

    // message_end carries the journal projection: timestamp = the entry's, as epoch ms.
    let visible_ts = timestamp_millis(&entries[0].timestamp);
    let expected_visible = json!({
        "role": "custom",
        "customType": "example.visible",
        "content": "visible note",
        "display": true,
        "timestamp": visible_ts,
    });
    let ends: Vec<Value> = events
        .iter()
        .filter_map(|e| match e {
            AgentSessionEvent::MessageEnd { message } => {
                Some(serde_json::to_value(message).expect("JSON"))
            }
            _ => None,
        })
        .collect();
    assert_eq!(ends[0], expected_visible);
    assert_eq!(
        ends[1],
        json!({
            "role": "custom",
            "customType": "example.hidden",
            "content": "hidden note",
            "display": false,
            "details": {"source": "test"},
            "timestamp": timestamp_millis(&entries[1].timestamp),
        })
    );

    // Presentation: only the displayed one.
    let page = h.session.messages_page(0, 100).expect("page");
    assert_eq!(page.total, 1);
    assert_eq!(
        serde_json::to_value(&page.messages).expect("JSON"),
        json!([expected_visible])
    );
    assert_eq!(h.session.state().message_count, 1);
    let counts: Vec<u64> = lock(&h.events).iter().map(|(_, c)| *c).collect();
    assert_eq!(
        counts,
        [1, 1, 1, 1],
        "the subscriber context counts presented messages"
    );

    // Durable before announced.
    let (_, on_disk) = read_journal(&h.path);
    assert_eq!(on_disk, entries);

    // Context: both, as user messages, before the next prompt.
    h.mock.push(Step::text("noted"));
    h.run("next").await;
    let bodies = h.request_bodies();
    assert_eq!(bodies.len(), 1);
    assert_eq!(
        wire_user_texts(&bodies[0]),
        ["visible note", "hidden note", "next"]
    );
    assert_eq!(h.session.state().message_count, 3);
}

/// docs/rpc.md#event-order, after the test "RPC exposes committed custom entries while message
/// pages retain presentation policy".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn custom_entries_and_messages_are_all_announced_while_pages_keep_presentation_policy() {
    let h = harness().await;
    h.session
        .append_custom_entry("example.state", Some(json!({"count": 1})))
        .expect("custom entry");
    send(
        &h.session,
        custom_message("example.visible", "visible", true),
        CustomDelivery::Append,
    );
    send(
        &h.session,
        custom_message("example.hidden", "hidden", false),
        CustomDelivery::Append,
    );
    let types: Vec<&'static str> = appended(&h.events())
        .iter()
        .map(|e| e.data.type_name())
        .collect();
    assert_eq!(types, ["custom", "custom_message", "custom_message"]);
    let page = serde_json::to_value(h.session.messages_page(0, 100).expect("page")).expect("JSON");
    assert_eq!(page["total"], 1);
    let messages = page["messages"].as_array().cloned().unwrap_or_default();
    assert_eq!(messages.len(), 1, "{page}");
    assert_eq!(messages[0]["role"], "custom");
    assert_eq!(messages[0]["customType"], "example.visible");
    assert_eq!(messages[0]["content"], "visible");
    assert_eq!(messages[0]["display"], true);
}

// ---------------------------------------------------------------------------------------------
// 3. Deliveries (docs/extensions.md#state-and-messages)
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deliveries_are_admitted_only_in_their_states() {
    let (gate, gate_ctl) = gate_tool();
    let h = harness_with(Options {
        tools: vec![gate],
        ..Options::default()
    })
    .await;

    // Idle: steer and follow-up need an active run.
    for delivery in [CustomDelivery::Steer, CustomDelivery::FollowUp] {
        let error = refused(
            &h.session,
            custom_message("example.note", "x", true),
            delivery,
        );
        assert_eq!(error, CUSTOM_QUEUE_WHILE_IDLE, "{delivery:?}");
    }
    // Invalid messages are refused in any state.
    let error = refused(
        &h.session,
        custom_message("Bad Type", "x", true),
        CustomDelivery::Append,
    );
    assert!(!error.is_empty());
    let oversized = custom_message("example.big", &"z".repeat(1024 * 1024 + 1), true);
    refused(&h.session, oversized, CustomDelivery::Append);
    assert!(h.events().is_empty(), "nothing committed: {:?}", h.labels());

    // Running: append and trigger_turn are idle-only.
    h.mock.push(Step::tool_call("g_1", "gate", json!({})));
    h.mock.push(Step::text("done"));
    h.start("go");
    gate_ctl.wait_started().await;
    for delivery in [CustomDelivery::Append, CustomDelivery::TriggerTurn] {
        let error = refused(
            &h.session,
            custom_message("example.note", "x", true),
            delivery,
        );
        assert_eq!(error, CUSTOM_MESSAGE_WHILE_RUNNING, "{delivery:?}");
    }
    let oversized = custom_message("example.big", &"z".repeat(1024 * 1024 + 1), true);
    refused(&h.session, oversized, CustomDelivery::Steer);
    gate_ctl.open();
    idle(&h.session).await;
    assert!(
        !appended(&h.events())
            .iter()
            .any(|e| e.data.type_name() == "custom_message"),
        "a refused custom message was committed"
    );
    assert_eq!(wire_user_texts(&h.request_bodies()[1]), ["go"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trigger_turn_while_idle_runs_without_a_user_prompt() {
    let h = harness().await;
    h.mock.push(Step::text("reacting"));
    let starter = h
        .session
        .send_custom_message(
            custom_message("example.trigger", "please react", false),
            CustomDelivery::TriggerTurn,
        )
        .expect("trigger_turn admitted");
    assert!(starter.is_some(), "trigger_turn starts a run");
    assert!(
        h.session.is_streaming(),
        "admission makes the session active"
    );
    drop(starter);
    idle(&h.session).await;

    let bodies = h.mock.wait_for_requests(1, WAIT).await;
    assert_eq!(bodies.len(), 1, "one provider call");
    let messages = wire_messages(&bodies[0].body);
    let last = messages.last().cloned().unwrap_or_default();
    assert_eq!(last["role"], "user");
    assert_eq!(wire_text(&last), "please react");
    assert_eq!(wire_user_texts(&bodies[0].body), ["please react"]);

    let events = h.events();
    let labels = labels_of(&events);
    // Persisted first, then the run; no user message anywhere.
    assert_eq!(
        &labels[..2],
        ["entry_appended:custom_message", "message_end:custom"],
        "{labels:?}"
    );
    assert!(
        !labels.iter().any(|l| l.ends_with(":user")),
        "no user prompt: {labels:?}"
    );
    assert_eq!(count(&events, "agent_start"), 1);
    assert_eq!(count(&events, "agent_settled"), 1);
    assert_eq!(labels.last().map(String::as_str), Some("agent_settled"));
    // The hidden trigger is in context but not in the transcript.
    let messages = h.messages();
    assert_eq!(messages.len(), 1);
    assert_eq!(role(&messages[0]), "assistant");
    assert_eq!(
        h.session.last_assistant().map(|a| a.text()).as_deref(),
        Some("reacting")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trigger_turn_without_a_model_is_refused_and_commits_nothing() {
    let h = harness_with(Options {
        with_model: false,
        ..Options::default()
    })
    .await;
    let error = refused(
        &h.session,
        custom_message("example.trigger", "react", true),
        CustomDelivery::TriggerTurn,
    );
    assert_eq!(error, NO_MODEL);
    assert!(h.events().is_empty(), "{:?}", h.labels());
    assert!(!h.path.exists());
    assert!(!h.session.is_streaming());
    // Append needs no model.
    send(
        &h.session,
        custom_message("example.note", "kept", true),
        CustomDelivery::Append,
    );
    assert_eq!(h.session.state().message_count, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn steered_and_follow_up_custom_messages_are_delivered_during_the_run() {
    let (gate, gate_ctl) = gate_tool();
    let h = harness_with(Options {
        tools: vec![gate],
        ..Options::default()
    })
    .await;
    h.mock.push(Step::tool_call("g_1", "gate", json!({})));
    h.mock.push(Step::text("after steer"));
    h.mock.push(Step::text("after follow-up"));
    h.start("go");
    gate_ctl.wait_started().await;

    send(
        &h.session,
        custom_message("example.steer", "steered note", true),
        CustomDelivery::Steer,
    );
    send(
        &h.session,
        custom_message("example.follow", "follow note", false),
        CustomDelivery::FollowUp,
    );
    // Not listed as queued user input, and not committed yet.
    let queued = h.session.state().queued_inputs;
    assert!(queued.steering.is_empty() && queued.follow_up.is_empty());
    assert!(
        !appended(&h.events())
            .iter()
            .any(|e| e.data.type_name() == "custom_message"),
        "queued custom messages are persisted on delivery"
    );
    gate_ctl.open();
    idle(&h.session).await;

    let bodies = h.request_bodies();
    assert_eq!(bodies.len(), 3);
    assert_eq!(wire_user_texts(&bodies[0]), ["go"]);
    let second = wire_messages(&bodies[1]);
    assert_eq!(wire_user_texts(&bodies[1]), ["go", "steered note"]);
    assert_eq!(
        second[second.len() - 2]["role"],
        "tool",
        "the steer follows the tool result"
    );
    assert_eq!(
        wire_user_texts(&bodies[2]),
        ["go", "steered note", "follow note"],
        "the follow-up when the run would stop"
    );

    // Each delivery: message_start → entry_appended → message_end, inside its turn.
    let events = h.events();
    let labels = labels_of(&events);
    let delivered: Vec<usize> = labels
        .iter()
        .enumerate()
        .filter(|(_, l)| *l == "message_start:custom")
        .map(|(i, _)| i)
        .collect();
    assert_eq!(delivered.len(), 2, "{labels:?}");
    for &at in &delivered {
        assert_eq!(
            labels[at..at + 3],
            [
                "message_start:custom",
                "entry_appended:custom_message",
                "message_end:custom"
            ],
            "{labels:?}"
        );
        assert_eq!(labels[at - 1], "turn_start", "{labels:?}");
    }
    assert_eq!(count(&events, "agent_start"), 1);
    assert_eq!(count(&events, "agent_settled"), 1);

    // Presentation: the displayed steer is there, the hidden follow-up is not.
    let roles: Vec<String> = h.messages().iter().map(role).collect();
    assert_eq!(
        roles,
        [
            "user",
            "assistant",
            "toolResult",
            "custom",
            "assistant",
            "assistant"
        ]
    );
    let (_, on_disk) = read_journal(&h.path);
    let custom_types: Vec<String> = on_disk
        .iter()
        .filter_map(|e| match &e.data {
            EntryData::CustomMessage { custom_type, .. } => Some(custom_type.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(custom_types, ["example.steer", "example.follow"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queued_custom_messages_count_against_the_bound_and_abort_discards_only_them() {
    let (gate, gate_ctl) = gate_tool();
    let h = harness_with(Options {
        tools: vec![gate],
        ..Options::default()
    })
    .await;
    h.mock.push(Step::tool_call("g_1", "gate", json!({})));
    h.start("go");
    gate_ctl.wait_started().await;

    let queued = h
        .session
        .prompt(Delivery::FollowUp, "user later".into())
        .expect("user follow-up queued");
    assert!(queued.starter.is_none());
    for n in 0..31 {
        let delivery = if n % 2 == 0 {
            CustomDelivery::Steer
        } else {
            CustomDelivery::FollowUp
        };
        send(
            &h.session,
            custom_message("example.queued", &format!("queued custom {n}"), true),
            delivery,
        );
    }
    // 32 pending inputs: one more of any kind is refused.
    let error = refused(
        &h.session,
        custom_message("example.queued", "one too many", true),
        CustomDelivery::Steer,
    );
    assert_eq!(error, QUEUE_CAPACITY);
    let error = h
        .session
        .prompt(Delivery::Steer, "user too many".into())
        .err()
        .map(|e| e.to_string());
    assert_eq!(error.as_deref(), Some(QUEUE_CAPACITY));
    // Only the user input is listed.
    let listed = h.session.state().queued_inputs;
    assert!(listed.steering.is_empty());
    assert_eq!(listed.follow_up.len(), 1);
    assert_eq!(listed.follow_up[0].text, "user later");

    tokio::time::timeout(WAIT, h.session.abort())
        .await
        .expect("abort settles")
        .expect("abort");
    assert!(!h.session.is_streaming());
    let listed = h.session.state().queued_inputs;
    assert_eq!(
        listed.follow_up.len(),
        1,
        "queued user input survives abort"
    );
    assert_eq!(listed.follow_up[0].text, "user later");
    // The custom messages are gone: the bound has room again for 31 inputs.
    for n in 0..31 {
        h.session
            .prompt(Delivery::Steer, format!("room {n}"))
            .unwrap_or_else(|e| panic!("queue slot {n} after abort: {e}"));
    }
    assert!(
        h.session
            .prompt(Delivery::Steer, "full again".into())
            .is_err()
    );
    let events = h.events();
    assert!(
        !appended(&events)
            .iter()
            .any(|e| e.data.type_name() == "custom_message"),
        "discarded custom messages were committed"
    );
    assert!(
        !h.request_bodies()
            .iter()
            .any(|b| b.to_string().contains("queued custom")),
        "discarded custom messages reached the provider"
    );
    assert_eq!(count(&events, "agent_settled"), 1);
}

// ---------------------------------------------------------------------------------------------
// 4. Restart (docs/configuration.md#session-journals)
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn custom_entries_and_messages_survive_a_restart() {
    let h = harness().await;
    h.session
        .append_custom_entry("example.state", Some(json!({"step": 1})))
        .expect("custom entry");
    let image = ContentBlock::Image {
        data: "aGVsbG8=".into(),
        mime_type: "image/png".into(),
    };
    send(
        &h.session,
        CustomMessageInput {
            custom_type: "example.visible".into(),
            content: MessageContent::Parts(vec![ContentBlock::text("visible with image"), image]),
            display: true,
            details: Some(json!({"kind": "note"})),
        },
        CustomDelivery::Append,
    );
    send(
        &h.session,
        custom_message("example.hidden", "hidden context", false),
        CustomDelivery::Append,
    );
    h.mock.push(Step::text("first reply"));
    h.run("first prompt").await;
    h.session
        .append_custom_entry("example.state", Some(json!({"step": 2})))
        .expect("custom entry");

    let pages_before = h.messages();
    let state_before = h.session.state();
    let entries_before = h.session.custom_entries("example.state");
    assert_eq!(pages_before.len(), 3, "visible custom, user, assistant");

    // Snapshot the journal as a restart would find it, then probe the live session's context.
    let snapshot = h.dir.path().join("restart.jsonl");
    std::fs::copy(&h.path, &snapshot).expect("copy the journal");
    // Format 2: the image bytes live in the blob directory beside the journal.
    let blobs = h.path.with_extension("blobs");
    let snapshot_blobs = snapshot.with_extension("blobs");
    std::fs::create_dir(&snapshot_blobs).expect("blob directory");
    for blob in std::fs::read_dir(&blobs).expect("the image was written as a blob") {
        let blob = blob.expect("blob entry").path();
        std::fs::copy(&blob, snapshot_blobs.join(blob.file_name().expect("name")))
            .expect("copy a blob");
    }
    h.mock.push(Step::text("probe reply"));
    h.run("probe").await;
    let live_body = h.request_bodies().pop().expect("probe request");
    h.session.dispose().await;

    // Restart: reopen the file and rebuild the session from it.
    let (resumed, resumed_events) = reopen(&h.mock, h.dir.path(), &snapshot, Options::default());
    assert_eq!(
        resumed.messages_page(0, 100).expect("page").messages,
        pages_before
    );
    let state_after = resumed.state();
    assert_eq!(state_after.message_count, state_before.message_count);
    assert_eq!(state_after.context_usage, state_before.context_usage);
    assert_eq!(resumed.custom_entries("example.state"), entries_before);
    assert!(
        log_events(&resumed_events).is_empty(),
        "restoring announces nothing"
    );

    resumed
        .prompt(Delivery::Direct, "probe".into())
        .expect("prompt");
    idle(&resumed).await;
    let resumed_body = h
        .request_bodies()
        .pop()
        .expect("probe request after restart");
    assert_eq!(
        wire_messages(&resumed_body),
        wire_messages(&live_body),
        "the provider context is the same after a restart"
    );
    assert_eq!(
        wire_user_texts(&resumed_body),
        [
            "visible with image",
            "hidden context",
            "first prompt",
            "probe"
        ]
    );

    // Appends after the restart continue the chain, and a second restart sees them.
    resumed
        .append_custom_entry("example.state", Some(json!({"step": 3})))
        .expect("custom entry after restart");
    let pages = resumed.messages_page(0, 100).expect("page").messages;
    let (_, on_disk) = read_journal(&snapshot);
    assert_eq!(on_disk.last().map(|e| e.data.type_name()), Some("custom"));
    let (again, _) = reopen(&h.mock, h.dir.path(), &snapshot, Options::default());
    assert_eq!(again.messages_page(0, 100).expect("page").messages, pages);
    assert_eq!(again.custom_entries("example.state").len(), 3);
}

// ---------------------------------------------------------------------------------------------
// 5. Legacy `message` rows with role `custom`
//    (docs/configuration.md#custom-entries-and-messages-internal-api)
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn legacy_custom_message_rows_are_read_but_never_written() {
    let mock = MockLlm::start().await.expect("mock LLM starts");
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("legacy.jsonl");
    let row = |id: &str, parent: Value, text: &str, display: bool| {
        json!({
            "type": "message",
            "message": {"role": "custom", "customType": "example.legacy", "content": text,
                        "display": display, "timestamp": 7},
            "id": id, "parentId": parent, "timestamp": "2026-01-01T00:00:01.000Z",
        })
    };
    let text = format!(
        "{}\n{}\n{}\n",
        json!({"type": "session", "version": 1, "id": "legacy", "timestamp": "2026-01-01T00:00:00.000Z",
               "cwd": dir.path().display().to_string()}),
        row("e1", Value::Null, "legacy shown", true),
        row("e2", json!("e1"), "legacy hidden", false),
    );
    std::fs::write(&path, text).expect("write the journal");

    let (session, _events) = reopen(&mock, dir.path(), &path, Options::default());
    let page = serde_json::to_value(session.messages_page(0, 10).expect("page")).expect("JSON");
    assert_eq!(page["total"], 1, "{page}");
    assert_eq!(page["messages"][0]["content"], "legacy shown", "{page}");
    mock.push(Step::text("ok"));
    run(&session, "now").await;
    let body = mock.requests().pop().map(|r| r.body).unwrap_or_default();
    assert_eq!(
        wire_user_texts(&body),
        ["legacy shown", "legacy hidden", "now"],
        "both legacy rows enter the context"
    );

    // New writes of that form are rejected: custom messages are written as `custom_message`.
    let mut journal = Journal::new(None);
    let result = journal.append(EntryData::Message {
        message: AgentMessage::Custom(zi_protocol::message::CustomMessage {
            custom_type: "example.legacy".into(),
            content: MessageContent::Text("new legacy row".into()),
            display: true,
            details: None,
            timestamp: 1,
        }),
    });
    assert!(
        result.is_err(),
        "a new `message` row with role `custom` was accepted"
    );
    assert!(journal.entries().is_empty());
}
