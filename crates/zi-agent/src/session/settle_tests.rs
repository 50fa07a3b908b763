//! Waiting for a settle (`session.await_idle`, `session.interrupt`): a wait ends when the busy
//! activity the caller saw has settled, never at the late settle of the one before it.

use std::time::Duration;

use tokio_util::sync::CancellationToken;
use zi_ai::catalog::Catalog;
use zi_ai::credentials::Credentials;
use zi_config::settings::SettingsStore;
use zi_journal::memory::Journal;
use zi_protocol::ThinkingLevel;

use super::state::RunActivity;
use super::{AgentSession, SessionConfig};
use crate::ToolSet;

fn idle_session(dir: &std::path::Path) -> AgentSession {
    let (settings, warnings) = SettingsStore::load(dir, dir, false);
    assert!(warnings.is_empty(), "{warnings:?}");
    AgentSession::new(SessionConfig {
        session_id: "settle".into(),
        cwd: dir.to_path_buf(),
        agent_dir: dir.to_path_buf(),
        journal: Journal::new(None),
        catalog: std::sync::Arc::new(Catalog::default()),
        credentials: Credentials::default(),
        model: None,
        thinking: ThinkingLevel::Off,
        settings,
        tools: ToolSet::default(),
        system_prompt: String::new().into(),
        expander: Default::default(),
        idle_timeout: Duration::from_secs(30),
    })
}

fn compacting(operation_id: u64) -> RunActivity {
    RunActivity::Compacting {
        operation_id,
        cancel: CancellationToken::new(),
        aborting: false,
    }
}

/// What a finisher does last: publish the settle (Run::finish publishes it after the lock).
fn publish_settle(session: &AgentSession) {
    session
        .inner
        .settled
        .send_modify(|generation| *generation += 1);
}

#[tokio::test]
async fn a_late_settle_of_the_previous_activity_does_not_end_a_wait_for_the_next() {
    let dir = tempfile::tempdir().expect("tempdir");
    let session = idle_session(dir.path());
    // The first activity went idle; its settle is not published yet (the finisher was
    // descheduled between going idle and publishing), and the next activity begins.
    session.lock().begin_busy(compacting(1));
    session.lock().activity = RunActivity::Idle;
    session.lock().begin_busy(compacting(2));

    let waiter = tokio::spawn({
        let session = session.clone();
        async move { session.wait_idle().await }
    });
    tokio::time::sleep(Duration::from_millis(50)).await;
    publish_settle(&session); // the first activity's late settle
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(
        !waiter.is_finished(),
        "wait_idle ended while the second activity was still busy"
    );

    session.lock().activity = RunActivity::Idle;
    publish_settle(&session);
    tokio::time::timeout(Duration::from_secs(10), waiter)
        .await
        .expect("wait_idle ends at the second activity's settle")
        .expect("waiter task");
}
