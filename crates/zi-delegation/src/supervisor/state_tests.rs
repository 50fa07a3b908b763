//! What the supervisor keeps and reports without a child process (docs/delegation.md#tools,
//! docs/delegation.md#limits): its phases, the retained exited snapshots, the bookkeeping when a
//! child leaves, the snapshots the tools show, and the restore after `--continue`
//! (docs/delegation.md#delivery). The children here are entries in the supervisor's state; the
//! session is a real `AgentSession` on an in-memory journal. Real children: zi-cli's
//! tests/delegation.rs and this crate's tests/watch_failure.rs.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use zi_agent::{AgentSession, SessionConfig, ToolSet};
use zi_config::settings::SettingsStore;
use zi_config::subagent_profiles::SubagentProfileRegistry;
use zi_journal::memory::Journal;
use zi_protocol::ThinkingLevel;
use zi_protocol::event::{EntryData, OutcomeResult, SubagentEntry};

use super::*;
use crate::child::ExitOutcome;
use crate::completion::{Completion, Status};
use crate::evidence::work_cycle_outcome;
use crate::ledger::{Durability, EntryState};
use crate::limits::MAX_RETAINED_EXITED;

fn supervisor() -> Arc<Supervisor> {
    Supervisor::new(SupervisorConfig {
        catalog: Arc::new(SubagentProfileRegistry::new(Vec::new(), Arc::new(|_| {}))),
        program: PathBuf::from("/nonexistent/zi"),
        cwd: PathBuf::from("/"),
        agent_dir: PathBuf::from("/"),
        environment: Vec::new(),
        api_key: None,
        wait_timeout_ms: 30_000,
        work_timeout_ms: 60_000,
        resolve_model: Arc::new(|reference: &str| Some(reference.to_string())),
        extra_args: Vec::new(),
    })
}

fn session(dir: &std::path::Path) -> AgentSession {
    let (settings, _) = SettingsStore::load(dir, dir, false);
    AgentSession::new(SessionConfig {
        session_id: "supervisor-state-test".into(),
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

/// Adds a live child in `lifecycle` at `cycle` (open when `open`), as spawn and the cycle
/// driver leave it.
fn live(supervisor: &Supervisor, name: &str, lifecycle: Lifecycle, cycle: u64, open: bool) {
    let mut state = ChildState::new();
    state.set(lifecycle);
    state.cycle = cycle;
    state.cycle_open = open;
    state.task = (cycle > 0).then(|| format!("task {cycle}"));
    supervisor.lock().live.push(LiveChild {
        handle: Arc::new(ChildHandle {
            name: name.to_string(),
            profile: "worker".to_string(),
            serial: tokio::sync::Mutex::new(()),
            process: OnceLock::new(),
            wake: Notify::new(),
        }),
        state,
    });
}

fn exited(name: &str, cycle: u64) -> ExitedChild {
    ExitedChild {
        name: name.to_string(),
        cycle,
        task: None,
    }
}

fn details(supervisor: &Supervisor, name: &str) -> Value {
    supervisor
        .snapshot(name)
        .map_or(Value::Null, |s| s.details())
}

/// The `exited` entries journaled: each name with its outcome parsed.
fn exits(session: &AgentSession) -> Vec<(String, Value)> {
    subagent_entries(session)
        .into_iter()
        .filter_map(|entry| match entry {
            SubagentEntry::Exited { name, outcome } => {
                Some((name, serde_json::from_str(&outcome).unwrap_or(Value::Null)))
            }
            _ => None,
        })
        .collect()
}

fn subagent_entries(session: &AgentSession) -> Vec<SubagentEntry> {
    let mut found = Vec::new();
    let _ = session.host().visit_entries(|entry| {
        if let EntryData::Subagent(event) = &entry.data {
            found.push(event.clone());
        }
    });
    found
}

fn outcomes(session: &AgentSession) -> Vec<(String, OutcomeResult, Value)> {
    let mut found = Vec::new();
    let _ = session.host().visit_entries(|entry| {
        if let EntryData::OperationOutcome(outcome) = &entry.data {
            found.push((
                outcome.operation_id.clone(),
                outcome.result,
                outcome.evidence.clone(),
            ));
        }
    });
    found
}

#[test]
fn operations_are_refused_once_the_supervisor_stops() {
    let supervisor = supervisor();
    let check = |phase: Phase| {
        let mut state = supervisor.lock();
        state.phase = phase;
        Supervisor::check_open(&state).map_err(|e| e.to_string())
    };
    assert_eq!(check(Phase::Open), Ok(()));
    assert_eq!(
        check(Phase::Stopping),
        Err("Subagent supervisor is stopping".to_string())
    );
    assert_eq!(
        check(Phase::Closed),
        Err("Subagent supervisor is closed".to_string())
    );
}

#[test]
fn exited_children_are_retained_newest_32_once_per_name() {
    let supervisor = supervisor();
    let mut state = supervisor.lock();
    for n in 0..MAX_RETAINED_EXITED + 3 {
        state.retain_exited(exited(&format!("c{n}"), 1));
    }
    assert_eq!(state.exited.len(), MAX_RETAINED_EXITED);
    assert_eq!(state.exited.front().map(|e| e.name.as_str()), Some("c3"));
    assert!(!state.known("c2"), "the oldest were dropped");
    assert!(state.known("c3"));

    state.retain_exited(exited("c3", 7));
    assert_eq!(state.exited.len(), MAX_RETAINED_EXITED);
    let last = state.exited.back().map(|e| (e.name.as_str(), e.cycle));
    assert_eq!(
        last,
        Some(("c3", 7)),
        "a name is retained once, as its latest"
    );
    assert_eq!(state.exited.iter().filter(|e| e.name == "c3").count(), 1);
}

#[test]
fn lifecycles_name_themselves_and_say_whether_they_work() {
    let all = [
        (Lifecycle::Starting, "starting", true),
        (Lifecycle::Idle, "idle", false),
        (Lifecycle::SpawnAdmitting, "spawn_admitting", true),
        (Lifecycle::Running, "running", true),
        (
            Lifecycle::Interrupting(InterruptReason::WorkTimeout),
            "interrupting",
            true,
        ),
        (Lifecycle::Closing, "closing", false),
    ];
    for (lifecycle, name, working) in all {
        assert_eq!(
            (lifecycle.as_str(), lifecycle.is_working()),
            (name, working)
        );
    }
}

#[test]
fn snapshots_list_live_children_in_spawn_order_then_exited_ones() {
    let supervisor = supervisor();
    live(&supervisor, "starting", Lifecycle::Starting, 0, false);
    live(&supervisor, "running", Lifecycle::Running, 2, true);
    live(&supervisor, "idle", Lifecycle::Idle, 1, false);
    {
        let mut state = supervisor.lock();
        state.retain_exited(exited("gone", 0));
        state.retain_exited(exited("left", 3));
    }
    let names: Vec<(String, &str)> = supervisor
        .snapshots()
        .into_iter()
        .map(|s| (s.name, s.lifecycle))
        .collect();
    assert_eq!(
        names,
        [
            ("starting", "starting"),
            ("running", "running"),
            ("idle", "idle"),
            ("gone", "exited"),
            ("left", "exited"),
        ]
        .map(|(n, l)| (n.to_string(), l))
    );

    let starting = details(&supervisor, "starting");
    assert!(starting.get("workCycle").is_none(), "{starting}");
    assert!(starting["elapsedMs"].is_u64(), "{starting}");
    let running = details(&supervisor, "running");
    assert_eq!(
        (&running["workCycle"], &running["task"]),
        (&json!(2), &json!("task 2"))
    );
    let idle = details(&supervisor, "idle");
    assert!(
        idle.get("elapsedMs").is_none(),
        "no completion to time: {idle}"
    );
    assert_eq!(
        details(&supervisor, "gone"),
        json!({"name": "gone", "lifecycle": "exited"})
    );
    assert_eq!(details(&supervisor, "left")["workCycle"], 3);
    assert!(supervisor.snapshot("never").is_none());
}

#[test]
fn a_snapshot_carries_the_shown_completion_and_its_delivery() {
    let supervisor = supervisor();
    live(&supervisor, "idle", Lifecycle::Idle, 1, false);
    {
        let mut state = supervisor.lock();
        assert!(state.ledger.reserve("idle", 1, None).is_ok());
        let completion = Completion::failure("idle", 1, "child_failed", Some("no".into()), 40);
        assert!(state.ledger.publish(completion));
    }
    let shown = details(&supervisor, "idle");
    assert_eq!(shown["completionDelivery"], "pending", "{shown}");
    assert_eq!(
        shown["elapsedMs"], 40,
        "an idle child shows its completion's duration"
    );
    assert_eq!(shown["completion"]["status"], "failed", "{shown}");

    assert!(
        supervisor
            .lock()
            .ledger
            .claim("idle", 1, "call-1")
            .is_some()
    );
    let claimed = details(&supervisor, "idle");
    assert_eq!(claimed["completionDelivery"], "claimed");
    assert!(
        claimed.get("completion").is_none(),
        "a claimed completion is not repeated"
    );
}

#[test]
fn working_and_ready_name_working_children_and_each_ready_name_once() {
    let supervisor = supervisor();
    live(&supervisor, "a", Lifecycle::Running, 1, true);
    live(&supervisor, "b", Lifecycle::Idle, 2, false);
    live(&supervisor, "c", Lifecycle::Closing, 1, false);
    live(
        &supervisor,
        "d",
        Lifecycle::Interrupting(InterruptReason::Requested),
        1,
        true,
    );
    {
        let mut state = supervisor.lock();
        for (name, cycle) in [("b", 1), ("b", 2), ("c", 1)] {
            assert!(state.ledger.reserve(name, cycle, None).is_ok());
            assert!(state.ledger.publish(Completion::failure(
                name,
                cycle,
                "child_exited",
                None,
                0
            )));
            state.ledger.mark_durable(name, cycle);
        }
    }
    let (working, ready) = supervisor.working_and_ready();
    assert_eq!(working, ["a", "d"]);
    assert_eq!(ready, ["b", "c"]);
}

#[tokio::test]
async fn a_child_that_leaves_fails_its_open_cycle_and_is_retained_as_exited() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let parent = session(dir.path());
    let supervisor = supervisor();
    supervisor.attach(parent.host());
    live(&supervisor, "w1", Lifecycle::Running, 2, true);
    assert!(
        supervisor
            .lock()
            .ledger
            .reserve("w1", 2, Some("worker".into()))
            .is_ok()
    );

    let outcome = ExitOutcome::Killed {
        message: "boom".into(),
    };
    supervisor.finish_exit("w1", outcome);

    let state = supervisor.lock();
    assert!(state.child("w1").is_none(), "no longer live");
    let entry = state.ledger.get("w1", 2).cloned();
    drop(state);
    let entry = entry.unwrap_or_else(|| panic!("the reserved cycle has no entry"));
    assert_eq!(entry.state, EntryState::Ready(Durability::Durable));
    let completion = entry.completion.unwrap_or_else(|| panic!("no completion"));
    assert_eq!(
        (
            completion.status,
            completion.reason,
            completion.error.as_deref()
        ),
        (Status::Failed, Some("child_killed"), Some("boom"))
    );
    let shown = details(&supervisor, "w1");
    assert_eq!(
        (&shown["lifecycle"], &shown["workCycle"], &shown["task"]),
        (&json!("exited"), &json!(2), &json!("task 2"))
    );
    assert_eq!(
        exits(&parent),
        [(
            "w1".to_string(),
            json!({"type": "killed", "message": "boom"})
        )]
    );
    assert_eq!(subagent_entries(&parent).len(), 1, "nothing but the exit");
    let recorded = outcomes(&parent);
    assert_eq!(recorded.len(), 1, "{recorded:?}");
    assert_eq!(recorded[0].0, "subagent/w1/work_cycle/2");
    assert_eq!(recorded[0].1, OutcomeResult::Failed);
    assert_eq!(
        (&recorded[0].2["errorCode"], &recorded[0].2["profile"]),
        (&json!("child_killed"), &json!("worker"))
    );
    assert_eq!(supervisor.working_and_ready().1, ["w1"]);
}

#[tokio::test]
async fn a_child_that_leaves_between_cycles_publishes_nothing() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let parent = session(dir.path());
    let supervisor = supervisor();
    supervisor.attach(parent.host());
    live(&supervisor, "w1", Lifecycle::Idle, 1, false);

    supervisor.finish_exit("w1", ExitOutcome::Closed { code: 0 });
    supervisor.finish_exit("w1", ExitOutcome::Closed { code: 1 });

    assert!(supervisor.lock().ledger.entries().is_empty());
    assert!(outcomes(&parent).is_empty());
    assert_eq!(
        exits(&parent),
        [("w1".to_string(), json!({"type": "closed", "code": 0}))],
        "one exit, recorded once"
    );
    assert_eq!(subagent_entries(&parent).len(), 1, "nothing but the exit");
    assert_eq!(details(&supervisor, "w1")["lifecycle"], "exited");
}

#[test]
fn an_exit_names_the_failure_of_the_cycle_it_left_open() {
    let cases = [
        (ExitOutcome::Closed { code: 0 }, ("child_exited", None)),
        (
            ExitOutcome::Failed {
                message: "bad".into(),
                code: Some(2),
            },
            ("child_failed", Some("bad".to_string())),
        ),
        (
            ExitOutcome::Killed {
                message: "gone".into(),
            },
            ("child_killed", Some("gone".to_string())),
        ),
    ];
    for (outcome, failure) in cases {
        assert_eq!(outcome.open_cycle_failure(), failure, "{outcome:?}");
    }
    let long = ExitOutcome::Failed {
        message: "x".repeat(20_000),
        code: None,
    };
    assert_eq!(long.to_json().len(), crate::limits::ERROR_MAX_BYTES);
}

/// Writes what an earlier process journaled about `w1` (left running), `w2` (exited) and `w3`
/// (delivered and acknowledged), and one undelivered completion of `w1`.
fn earlier_process(parent: &AgentSession) {
    let host = parent.host();
    let entries = [
        SubagentEntry::Starting { name: "w1".into() },
        SubagentEntry::WorkCycleStarted {
            name: "w1".into(),
            work_cycle: 1,
            task: Some("first".into()),
        },
        SubagentEntry::Starting { name: "w2".into() },
        SubagentEntry::Exited {
            name: "w2".into(),
            outcome: r#"{"code":0,"type":"closed"}"#.into(),
        },
        SubagentEntry::Starting { name: "w3".into() },
        SubagentEntry::WorkCycleStarted {
            name: "w3".into(),
            work_cycle: 1,
            task: None,
        },
    ];
    for entry in entries {
        assert!(host.append_subagent(entry).is_ok());
    }
    for name in ["w1", "w3"] {
        let mut completion = Completion::failure(name, 1, "child_exited", None, 5);
        completion.status = Status::Completed;
        completion.reason = None;
        completion.text = format!("{name} done");
        assert!(
            host.append_outcome(work_cycle_outcome(&completion, Some("worker")))
                .is_ok()
        );
    }
    let delivered = SubagentEntry::WorkCycleDelivered {
        name: "w3".into(),
        work_cycle: 1,
    };
    assert!(host.append_subagent(delivered).is_ok());
    let closed = SubagentEntry::Exited {
        name: "w3".into(),
        outcome: r#"{"code":0,"type":"closed"}"#.into(),
    };
    assert!(host.append_subagent(closed).is_ok());
}

#[tokio::test]
async fn a_restore_records_left_children_lost_once_and_keeps_undelivered_completions() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let parent = session(dir.path());
    earlier_process(&parent);
    let journaled = subagent_entries(&parent).len();

    let supervisor = supervisor();
    supervisor.attach(parent.host());
    assert!(supervisor.restore().is_empty(), "no warnings");

    let added = subagent_entries(&parent).split_off(journaled);
    assert_eq!(
        added,
        [SubagentEntry::Lost {
            name: "w1".into(),
            reason: "session_restored".into(),
        }]
    );
    let state = supervisor.lock();
    let mut names: Vec<&String> = state.names.iter().collect();
    names.sort();
    assert_eq!(names, ["w1", "w2", "w3"], "started names stay reserved");
    let entries: Vec<(&str, u64, &EntryState)> = state
        .ledger
        .entries()
        .iter()
        .map(|e| (e.name.as_str(), e.work_cycle, &e.state))
        .collect();
    assert_eq!(
        entries,
        [("w1", 1, &EntryState::Ready(Durability::Durable))],
        "w3's completion was acknowledged"
    );
    drop(state);
    let w1 = details(&supervisor, "w1");
    assert_eq!(
        (&w1["lifecycle"], &w1["workCycle"], &w1["task"]),
        (&json!("exited"), &json!(1), &json!("first"))
    );
    assert_eq!(w1["completion"]["text"], "w1 done", "{w1}");
    assert_eq!(w1["completion"]["status"], "completed", "{w1}");

    let again = supervisor_restored(&parent);
    assert_eq!(
        subagent_entries(&parent).len(),
        journaled + 1,
        "a second restore records no second lost"
    );
    assert_eq!(again.working_and_ready().1, ["w1"]);
}

fn supervisor_restored(parent: &AgentSession) -> Arc<Supervisor> {
    let supervisor = supervisor();
    supervisor.attach(parent.host());
    assert!(supervisor.restore().is_empty());
    supervisor
}
