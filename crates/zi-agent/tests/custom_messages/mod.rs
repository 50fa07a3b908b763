//! Custom entries and custom messages (docs/extensions.md#state-and-messages,
//! docs/architecture.md#the-run, docs/rpc.md#event-order, docs/rpc.md#sessionget_messages): a real
//! `AgentSession` with a persistent journal in a temporary directory talks to the mock LLM over
//! loopback HTTP.

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

use crate::common::{label, role, wire_messages, wire_text, wire_user_texts};

mod deliveries;
mod entries;
mod restart;

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
