//! A child whose `session.await_idle` fails while its connection lives
//! (docs/delegation.md#children): the failure is fatal. The child is killed and its cycle ends
//! `exited` with the child's message, instead of staying `working` for ever. The child is a small
//! fake that speaks Zi RPC v1 as zi does (the frames are zi's own), because a real zi child never
//! fails the watch its parent armed.

use std::os::unix::fs::PermissionsExt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;
use zi_agent::{AgentSession, SessionConfig, ToolSet};
use zi_config::settings::SettingsStore;
use zi_config::subagent_profiles::{ProfileSource, SubagentProfile, SubagentProfileRegistry};
use zi_delegation::{Supervisor, SupervisorConfig};
use zi_journal::memory::Journal;
use zi_protocol::ThinkingLevel;

/// zi's ready state, as `zi --mode rpc --no-session --model mock/m1` sends it.
const STATE: &str = r#"{"sessionId": "fd77ca5e-c859-4b1a-b24c-9e872d196066", "activity": {"type": "idle"}, "model": {"type": "selected", "model": {"provider": "mock", "id": "m1", "name": "m1", "reasoning": false, "input": ["text"], "contextWindow": 100000000, "maxTokens": 16384}}, "thinkingLevel": "off", "supportedThinkingLevels": ["off"], "steeringMode": "one-at-a-time", "followUpMode": "one-at-a-time", "queuedInputs": {"steering": [], "followUp": []}, "workPlan": {"revision": 0, "steps": []}, "messageCount": 0, "compaction": {"type": "idle"}, "retry": {"type": "idle"}, "contextUsage": {"type": "estimated", "tokens": 0, "contextWindow": 100000000, "percent": 0.0}}"#;

/// Answers the parent's hand-shake and prompt as zi does, then fails the watch.
const FAKE_CHILD: &str = r#"
import json, sys
state = json.loads(sys.argv[1])
sequence = 0
def send(frame):
    global sequence
    sequence += 1
    sys.stdout.write(json.dumps(dict(version=1, sequence=sequence, **frame)) + "\n")
    sys.stdout.flush()
send({"type": "ready", "state": state})
for line in sys.stdin:
    request = json.loads(line)
    method, rid = request["method"], request["id"]
    params = request.get("params") or {}
    reply = {"type": "response", "id": rid, "method": method}
    if method == "connection.set_events":
        send(dict(reply, ok=True, result={"mode": "none"}))
    elif method == "session.get_state":
        send(dict(reply, ok=True, result=state))
    elif method == "session.prompt":
        send(dict(reply, ok=True, result={"delivery": "direct", "completionRevision": 1}))
    elif method == "session.await_idle":
        message = "Completion watch is not active: " + params.get("completionId", "")
        send(dict(reply, ok=False, error={"code": "operation_failed", "message": message}))
    else:
        send(dict(reply, ok=False, error={"code": "method_not_found", "message": "Unknown method: " + method}))
"#;

fn session(dir: &std::path::Path) -> AgentSession {
    let (settings, _) = SettingsStore::load(dir, dir, false);
    AgentSession::new(SessionConfig {
        session_id: "watch-failure-test".into(),
        cwd: dir.to_path_buf(),
        agent_dir: dir.to_path_buf(),
        journal: Journal::new(None),
        catalog: Default::default(),
        credentials: Default::default(),
        model: None,
        thinking: ThinkingLevel::Off,
        settings,
        tools: ToolSet::default(),
        system_prompt: "".into(),
        idle_timeout: Duration::from_secs(30),
        expander: Default::default(),
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_that_fails_on_a_live_connection_is_fatal() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("fake_child.py");
    std::fs::write(&script, FAKE_CHILD).unwrap();
    // The supervisor runs its program with zi's flags; this one ignores them.
    let program = dir.path().join("fake-zi");
    std::fs::write(
        &program,
        format!(
            "#!/bin/sh\nexec python3 {} '{}'\n",
            script.display(),
            STATE.replace('\'', "'\\''")
        ),
    )
    .unwrap();
    std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).unwrap();

    let profile = SubagentProfile {
        name: "worker".into(),
        description: "works".into(),
        instructions: "Work.".into(),
        model: Some("mock/m1".into()),
        thinking: None,
        source: ProfileSource::Global(dir.path().join("worker.md")),
    };
    let catalog = SubagentProfileRegistry::new(vec![profile], Arc::new(|_| {}));
    let supervisor = Supervisor::new(SupervisorConfig {
        catalog: Arc::new(catalog),
        program,
        cwd: dir.path().to_path_buf(),
        agent_dir: dir.path().to_path_buf(),
        environment: std::env::vars_os().collect(),
        api_key: None,
        wait_timeout_ms: 30_000,
        work_timeout_ms: 60_000,
        resolve_model: Arc::new(|reference: &str| Some(reference.to_string())),
        extra_args: Vec::new(),
    });
    let parent = session(dir.path());
    supervisor.attach(parent.host());

    let cancel = CancellationToken::new();
    supervisor
        .spawn("worker", "w1", "do the work", &cancel)
        .await
        .unwrap_or_else(|error| panic!("spawn: {error}"));
    let deadline = Instant::now() + Duration::from_secs(30);
    let details = loop {
        let details = supervisor.snapshot("w1").map(|s| s.details());
        if let Some(details) = &details
            && details["lifecycle"] == "exited"
        {
            break details.clone();
        }
        assert!(
            Instant::now() < deadline,
            "the child never exited: {details:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let text = details.to_string();
    assert!(
        text.contains("Completion watch is not active: 1"),
        "the exit carries the child's message: {text}"
    );
}
