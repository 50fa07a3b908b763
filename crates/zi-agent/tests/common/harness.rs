//! A session against the mock LLM with its event log and its temporary directory, and what
//! every test does with it; a test module adds its own methods in an `impl Harness` of its own.

use std::path::Path;

use serde_json::Value;
use zi_agent::AgentSession;
use zi_journal::memory::Journal;
use zi_protocol::event::AgentSessionEvent;
use zi_protocol::message::AgentMessage;
use zi_test_support::mock_llm::{MockLlm, Step};

use super::session::{
    Events, Options, count, idle, labels_of, log_events, mock_session, run, start,
};
use super::tools::Gate;

pub(crate) struct Harness {
    pub(crate) mock: MockLlm,
    pub(crate) session: AgentSession,
    /// Every event with the subscriber context's message count.
    pub(crate) events: Events,
    pub(crate) dir: tempfile::TempDir,
}

impl Harness {
    /// Starts the mock LLM and a session named `session_id` in a new temporary directory over
    /// the journal `journal` makes for that directory (see [`mock_session`] for `m1_fields`).
    pub(crate) async fn start_with(
        session_id: &str,
        m1_fields: Value,
        options: Options,
        journal: impl FnOnce(&Path) -> Journal,
    ) -> Harness {
        let mock = MockLlm::start().await.expect("mock LLM starts");
        let dir = tempfile::tempdir().expect("tempdir");
        let journal = journal(dir.path());
        let (session, events) =
            mock_session(session_id, &mock, dir.path(), journal, m1_fields, options);
        Harness {
            mock,
            session,
            events,
            dir,
        }
    }

    /// Admits a direct prompt and releases its run.
    pub(crate) fn start(&self, text: &str) {
        start(&self.session, text);
    }

    /// Starts `go` with the model calling the gate (`g_1`) first and answering with `then`
    /// afterwards; returns once the gate holds the run.
    pub(crate) async fn start_at_the_gate(&self, gate: &Gate, then: Vec<Step>) {
        self.mock
            .push(Step::tool_call("g_1", "gate", serde_json::json!({})));
        for step in then {
            self.mock.push(step);
        }
        self.start("go");
        gate.wait_started().await;
    }

    pub(crate) async fn idle(&self) {
        idle(&self.session).await;
    }

    pub(crate) async fn run(&self, text: &str) {
        run(&self.session, text).await;
    }

    pub(crate) fn events(&self) -> Vec<AgentSessionEvent> {
        log_events(&self.events)
    }

    /// Event labels without `message_update`.
    pub(crate) fn labels(&self) -> Vec<String> {
        labels_of(&self.events())
    }

    pub(crate) fn count(&self, name: &str) -> usize {
        count(&self.events(), name)
    }

    /// Every presentation message.
    pub(crate) fn messages(&self) -> Vec<AgentMessage> {
        self.session
            .messages_page(0, 10_000)
            .expect("messages page")
            .messages
    }

    pub(crate) fn request_bodies(&self) -> Vec<Value> {
        self.mock.requests().into_iter().map(|r| r.body).collect()
    }
}
