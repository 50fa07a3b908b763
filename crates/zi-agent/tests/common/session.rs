//! The one way these tests build an `AgentSession` (everything in a temporary directory, no
//! credentials, thinking off), record its events and drive a prompt to the end of its run.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use zi_agent::{AgentSession, EventContext, SessionConfig, Tool, ToolSet};
use zi_ai::catalog::Catalog;
use zi_ai::credentials::Credentials;
use zi_config::settings::SettingsStore;
use zi_journal::memory::Journal;
use zi_os::sync::lock;
use zi_protocol::ThinkingLevel;
use zi_protocol::event::AgentSessionEvent;
use zi_protocol::request::Delivery;
use zi_test_support::mock_llm::MockLlm;

use super::{WAIT, label};

/// A session in `dir` with an in-memory journal, settings read from `dir` (they must load
/// without warnings), no catalog, no model and no tools; callers replace what they need with
/// struct update syntax.
pub(crate) fn session_config(session_id: &str, dir: &Path) -> SessionConfig {
    let (settings, warnings) = SettingsStore::load(dir, dir, false);
    assert!(warnings.is_empty(), "{warnings:?}");
    SessionConfig {
        session_id: session_id.into(),
        cwd: dir.to_path_buf(),
        agent_dir: dir.to_path_buf(),
        journal: Journal::new(None),
        catalog: Default::default(),
        credentials: Credentials::default(),
        model: None,
        thinking: ThinkingLevel::Off,
        settings,
        tools: ToolSet::default(),
        system_prompt: "You are a test assistant.".into(),
        expander: Default::default(),
        idle_timeout: Duration::from_secs(30),
    }
}

/// What a mock-backed test session may differ in.
pub(crate) struct Options {
    pub(crate) tools: Vec<Arc<dyn Tool>>,
    /// Written to `settings.json` in the session's directory before the settings load.
    pub(crate) global_settings: Option<Value>,
    /// Whether the mock's model `m1` is selected.
    pub(crate) with_model: bool,
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

/// Every event with the subscriber context's message count.
pub(crate) type Events = Arc<Mutex<Vec<(AgentSessionEvent, u64)>>>;

/// A session against the mock LLM whose catalog holds one model, `m1` (described by
/// `m1_fields`, which must carry `"id": "m1"`), subscribed to an event log.
pub(crate) fn mock_session(
    session_id: &str,
    mock: &MockLlm,
    dir: &Path,
    journal: Journal,
    m1_fields: Value,
    options: Options,
) -> (AgentSession, Events) {
    if let Some(settings) = &options.global_settings {
        std::fs::write(dir.join("settings.json"), settings.to_string()).expect("settings");
    }
    let mut catalog = Catalog::default();
    catalog.add_models_json(&mock.models_json("key", &[m1_fields]), "test");
    assert!(catalog.warnings.is_empty(), "{:?}", catalog.warnings);
    let model = options
        .with_model
        .then(|| Arc::new(catalog.find("mock", "m1").cloned().expect("model m1")));
    let session = AgentSession::new(SessionConfig {
        journal,
        catalog: Arc::new(catalog),
        model,
        tools: ToolSet::new(options.tools).expect("tool set"),
        ..session_config(session_id, dir)
    });
    let events = record_events(&session);
    (session, events)
}

/// Subscribes an event log to `session`.
pub(crate) fn record_events(session: &AgentSession) -> Events {
    let events: Events = Arc::new(Mutex::new(Vec::new()));
    let sink = events.clone();
    session.subscribe(Arc::new(
        move |event: &AgentSessionEvent, context: &EventContext| {
            lock(&sink).push((event.clone(), context.message_count));
        },
    ));
    events
}

/// The events of a log, in order.
pub(crate) fn log_events(events: &Events) -> Vec<AgentSessionEvent> {
    lock(events).iter().map(|(e, _)| e.clone()).collect()
}

/// Event labels without `message_update`.
pub(crate) fn labels_of(events: &[AgentSessionEvent]) -> Vec<String> {
    events
        .iter()
        .filter(|e| !matches!(e, AgentSessionEvent::MessageUpdate { .. }))
        .map(label)
        .collect()
}

/// How many events have the type `name`.
pub(crate) fn count(events: &[AgentSessionEvent], name: &str) -> usize {
    events.iter().filter(|e| e.type_name() == name).count()
}

/// Admits a direct prompt and releases its run.
pub(crate) fn start(session: &AgentSession, text: &str) {
    let admission = session
        .prompt(Delivery::Direct, text.to_string())
        .expect("prompt admitted");
    assert!(
        admission.starter.is_some(),
        "a direct prompt while idle starts a run"
    );
}

/// Waits (at most [`WAIT`]) until the session's run settled.
pub(crate) async fn idle(session: &AgentSession) {
    tokio::time::timeout(WAIT, session.wait_idle())
        .await
        .expect("run settles");
}

/// Aborts the session's run and waits (at most [`WAIT`]) for the abort to return.
pub(crate) async fn abort(session: &AgentSession) {
    tokio::time::timeout(WAIT, session.abort())
        .await
        .expect("abort returns")
        .expect("abort succeeds");
}

/// A direct prompt and its whole run.
pub(crate) async fn run(session: &AgentSession, text: &str) {
    start(session, text);
    idle(session).await;
}
