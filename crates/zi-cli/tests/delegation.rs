//! Black-box tests of delegation (delegation-reference; docs/delegation.md): the real binary as
//! parent and as its subagent children, one mock LLM server scripting both sides (steps
//! scripted per model: the parent runs `mock/parent`, children `mock/child`).

// A test fails by panicking with its reason.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use zi_test_support::dirs::{AgentDir, temp_cwd};
use zi_test_support::harness::Harness;
use zi_test_support::mock_llm::{MockLlm, RecordedRequest, Step, start_mock};
use zi_test_support::process::{descendants, wait_until_gone};
use zi_test_support::zi_command::ZiCommand;

const ZI: &str = env!("CARGO_BIN_EXE_zi");
const WAIT: Duration = Duration::from_secs(60);
const KEY: &str = "test-key-abc";

fn agent_with(mock: &MockLlm) -> AgentDir {
    let agent = AgentDir::new().models(
        mock,
        KEY,
        &[json!({"id": "parent"}), json!({"id": "child"})],
    );
    agent.write(
        "subagents/worker.md",
        "---\ndescription: Does one delegated job\nmodel: mock/child\n---\nYou are a careful worker.\n",
    );
    agent
}

fn command(agent: &AgentDir, cwd: &Path) -> ZiCommand {
    ZiCommand::rpc(ZI, agent, cwd)
        .model("mock/parent")
        .timeout(WAIT)
}

async fn start(agent: &AgentDir, cwd: &Path) -> Harness {
    command(agent, cwd).no_session().spawn_rpc().await
}

fn call(id: &str, name: &str, args: Value) -> Step {
    Step::tool_call(id, name, args)
}

fn calls(list: &[(&str, &str, Value)]) -> Step {
    Step::tool_calls(list)
}

fn spawn_args(name: &str, prompt: &str) -> Value {
    json!({"profile": "worker", "name": name, "prompt": prompt})
}

fn requests_of(mock: &MockLlm, model: &str) -> Vec<RecordedRequest> {
    mock.requests()
        .into_iter()
        .filter(|r| r.body["model"] == model)
        .collect()
}

fn occurrences(request: &RecordedRequest, needle: &str) -> usize {
    request.body.to_string().matches(needle).count()
}

async fn prompt(p: &mut Harness, id: &str, text: &str) {
    let response = p
        .request(
            id,
            "session.prompt",
            Some(json!({"delivery": "direct", "text": text})),
        )
        .await;
    assert_eq!(response["ok"], json!(true), "{response}");
}

/// Prompts and waits for this run's `agent_settled`.
async fn run(p: &mut Harness, id: &str, text: &str) {
    let after = p.last_sequence();
    prompt(p, id, text).await;
    p.event_after("agent_settled", after).await;
}

/// The tool results (text of the first block) the parent's run committed, by tool name.
fn tool_result(p: &Harness, tool: &str) -> Value {
    p.events()
        .into_iter()
        .rev()
        .find(|e| e["type"] == "tool_execution_end" && e["toolName"] == tool)
        .unwrap_or_else(|| panic!("a {tool} result"))
}

fn result_text(end: &Value) -> String {
    end["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or("")
        .to_string()
}

fn subagent_events(p: &Harness, name: &str) -> Vec<String> {
    p.events()
        .iter()
        .filter(|e| e["type"] == "entry_appended" && e["entry"]["type"] == "subagent")
        .filter(|e| e["entry"]["name"] == name)
        .map(|e| e["entry"]["event"].as_str().unwrap_or("").to_string())
        .collect()
}

async fn wait_outcome(p: &mut Harness, operation_id: &str) -> Value {
    p.wait_for(operation_id, |f| {
        f["type"] == "session_event"
            && f["event"]["type"] == "operation_outcome"
            && f["event"]["outcome"]["operationId"] == operation_id
    })
    .await["event"]["outcome"]
        .clone()
}

#[tokio::test]
async fn spawn_wait_result_reaches_the_next_parent_request_exactly_once() {
    let mock = start_mock().await;
    let agent = agent_with(&mock);
    let cwd = temp_cwd();
    mock.push_for(
        "parent",
        call("s1", "spawn_subagent", spawn_args("w1", "count the files")),
    );
    mock.push_for("child", Step::text("CHILD-RESULT-1"));
    mock.push_for(
        "parent",
        call(
            "w1",
            "wait_subagents",
            json!({"names": ["w1"], "timeout_ms": 60000}),
        ),
    );
    mock.push_for("parent", Step::text("done"));
    mock.push_for("parent", Step::text("bye"));
    let mut p = start(&agent, &cwd.path).await;
    run(&mut p, "p1", "delegate it").await;

    let spawn = tool_result(&p, "spawn_subagent");
    assert_eq!(spawn["isError"], json!(false), "{spawn}");
    assert_eq!(result_text(&spawn), r#"{"name":"w1","profile":"worker"}"#);
    let wait = tool_result(&p, "wait_subagents");
    assert_eq!(wait["isError"], json!(false), "{wait}");
    let text: Value = serde_json::from_str(&result_text(&wait)).unwrap();
    assert_eq!(text["subagents"][0]["name"], "w1");
    assert_eq!(text["subagents"][0]["completion"]["text"], "CHILD-RESULT-1");
    assert_eq!(text["subagents"][0]["completion"]["status"], "completed");
    assert_eq!(text["timed_out"], json!(false));
    let details = &wait["result"]["details"];
    assert_eq!(details["operation"], "wait");
    assert_eq!(details["agents"][0]["completionDelivery"], "claimed");

    // The child got the profile's instructions before the task, over RPC only.
    let child = requests_of(&mock, "child");
    assert_eq!(child.len(), 1);
    assert!(
        child[0]
            .body
            .to_string()
            .contains("You are a careful worker.\\n\\nTask:\\ncount the files")
    );
    let parent = requests_of(&mock, "parent");
    assert_eq!(parent.len(), 3);
    assert_eq!(occurrences(&parent[2], "CHILD-RESULT-1"), 1);
    assert_eq!(occurrences(&parent[2], "subagent_completion"), 0);

    // A later prompt carries it once (history) and injects nothing again.
    run(&mut p, "p2", "anything else?").await;
    let parent = requests_of(&mock, "parent");
    assert_eq!(occurrences(&parent[3], "CHILD-RESULT-1"), 1);
    assert_eq!(occurrences(&parent[3], "subagent_completion"), 0);

    assert_eq!(
        subagent_events(&p, "w1"),
        [
            "starting",
            "ready",
            "work_cycle_started",
            "work_cycle_delivered"
        ]
    );
    assert!(
        p.events()
            .iter()
            .any(|e| e["type"] == "subagent_changed" && e["name"] == "w1")
    );
    let outcomes = p.request_ok("o", "session.get_outcomes", None).await;
    let outcomes = outcomes["outcomes"].as_array().cloned().unwrap_or_default();
    let cycle = outcomes
        .iter()
        .find(|o| o["operationId"] == "subagent/w1/work_cycle/1")
        .unwrap_or_else(|| panic!("the work-cycle outcome in {outcomes:?}"));
    assert_eq!(cycle["capability"], "subagent");
    assert_eq!(cycle["operation"], "work_cycle");
    assert_eq!(cycle["result"], "succeeded");
    assert_eq!(cycle["evidence"]["name"], "w1");
    assert_eq!(cycle["evidence"]["workCycle"], 1);
    assert_eq!(cycle["evidence"]["profile"], "worker");
    assert_eq!(cycle["evidence"]["preview"], "CHILD-RESULT-1");
    let spawn_outcome = outcomes
        .iter()
        .find(|o| o["operation"] == "spawn")
        .unwrap_or_else(|| panic!("the spawn outcome in {outcomes:?}"));
    assert_eq!(spawn_outcome["result"], "succeeded");
    assert_eq!(spawn_outcome["evidence"]["name"], "w1");
    assert_eq!(spawn_outcome["evidence"]["source"], "host");
    assert!(
        spawn_outcome["operationId"]
            .as_str()
            .unwrap()
            .starts_with("subagent/control/")
    );
    p.close_stdin().await;
    let exited = p.wait_exit(WAIT).await;
    assert_eq!(exited.code, Some(0), "{}", p.stderr_text());
}

#[tokio::test]
async fn a_completion_nobody_waits_for_is_hidden_context_before_the_next_request() {
    let mock = start_mock().await;
    let agent = agent_with(&mock);
    let cwd = temp_cwd();
    mock.push_for(
        "parent",
        call("s1", "spawn_subagent", spawn_args("w1", "go")),
    );
    mock.push_for("child", Step::text("HIDDEN-RESULT"));
    mock.push_for("parent", Step::text("spawned it"));
    mock.push_for("parent", Step::text("noted"));
    mock.push_for("parent", Step::text("still noted"));
    let mut p = start(&agent, &cwd.path).await;
    run(&mut p, "p1", "start").await;
    let outcome = wait_outcome(&mut p, "subagent/w1/work_cycle/1").await;
    assert_eq!(outcome["result"], "succeeded");
    // A completion never starts a parent turn.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(requests_of(&mock, "parent").len(), 2);

    run(&mut p, "p2", "what happened?").await;
    let parent = requests_of(&mock, "parent");
    assert_eq!(occurrences(&parent[2], "<subagent_completion>"), 1);
    assert_eq!(occurrences(&parent[2], "HIDDEN-RESULT"), 1);
    let hidden = p
        .events()
        .into_iter()
        .find(|e| {
            e["type"] == "entry_appended"
                && e["entry"]["type"] == "custom_message"
                && e["entry"]["customType"] == "zi.subagent_completion"
        })
        .expect("the hidden message entry");
    assert_eq!(hidden["entry"]["display"], json!(false));
    assert_eq!(hidden["entry"]["details"]["name"], "w1");
    assert_eq!(hidden["entry"]["details"]["workCycle"], 1);
    assert_eq!(
        subagent_events(&p, "w1").last().map(String::as_str),
        Some("work_cycle_delivered")
    );
    // Hidden messages are not in message pages.
    let page = p.request_ok("m", "session.get_messages", None).await;
    assert!(!page.to_string().contains("HIDDEN-RESULT"));

    run(&mut p, "p3", "and now?").await;
    let parent = requests_of(&mock, "parent");
    assert_eq!(occurrences(&parent[3], "<subagent_completion>"), 1);
}

fn tool_names(request: &RecordedRequest) -> Vec<String> {
    request.body["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["function"]["name"].as_str().map(str::to_string))
        .collect()
}

const DELEGATION_TOOLS: [&str; 8] = [
    "list_subagent_profiles",
    "spawn_subagent",
    "send_subagent_message",
    "assign_subagent_task",
    "wait_subagents",
    "list_subagents",
    "interrupt_subagent",
    "close_subagent",
];

#[tokio::test]
async fn the_parent_has_the_eight_tools_and_a_depth_one_child_has_none() {
    let mock = start_mock().await;
    let agent = agent_with(&mock);
    let cwd = temp_cwd();
    mock.push_for(
        "parent",
        call("s1", "spawn_subagent", spawn_args("w1", "go")),
    );
    mock.push_for("child", Step::text("ok"));
    mock.push_for("parent", Step::text("done"));
    let mut p = start(&agent, &cwd.path).await;
    run(&mut p, "p1", "start").await;
    wait_outcome(&mut p, "subagent/w1/work_cycle/1").await;
    let parent = tool_names(&requests_of(&mock, "parent")[0]);
    for tool in DELEGATION_TOOLS {
        assert!(parent.iter().any(|t| t == tool), "{tool} in {parent:?}");
    }
    let child = tool_names(&requests_of(&mock, "child")[0]);
    assert!(!child.is_empty());
    for tool in DELEGATION_TOOLS {
        assert!(
            !child.iter().any(|t| t == tool),
            "{tool} in the child's {child:?}"
        );
    }
    assert!(!child.iter().any(|t| t.contains("peer")), "{child:?}");

    // Without profiles there are no delegation tools at all.
    let empty = AgentDir::new().models(&mock, KEY, &[json!({"id": "parent"})]);
    mock.push_for("parent", Step::text("plain"));
    let mut q = start(&empty, &cwd.path).await;
    run(&mut q, "p1", "hi").await;
    let plain = tool_names(requests_of(&mock, "parent").last().unwrap());
    assert!(
        !plain.iter().any(|t| DELEGATION_TOOLS.contains(&t.as_str())),
        "{plain:?}"
    );
}

#[tokio::test]
async fn four_live_children_and_the_fifth_is_refused() {
    let mock = start_mock().await;
    let agent = agent_with(&mock);
    let cwd = temp_cwd();
    let spawns: Vec<(String, Value)> = (1..=5)
        .map(|i| (format!("s{i}"), spawn_args(&format!("w{i}"), "wait here")))
        .collect();
    let list: Vec<(&str, &str, Value)> = spawns
        .iter()
        .map(|(id, args)| (id.as_str(), "spawn_subagent", args.clone()))
        .collect();
    mock.push_for("parent", calls(&list));
    for _ in 0..5 {
        mock.push_for("child", Step::Hang(Vec::new()));
    }
    mock.push_for("parent", call("l1", "list_subagents", json!({})));
    mock.push_for("parent", Step::text("done"));
    let mut p = start(&agent, &cwd.path).await;
    run(&mut p, "p1", "spawn five").await;
    let ends: Vec<Value> = p
        .events()
        .into_iter()
        .filter(|e| e["type"] == "tool_execution_end" && e["toolName"] == "spawn_subagent")
        .collect();
    assert_eq!(ends.len(), 5);
    let refused: Vec<&Value> = ends.iter().filter(|e| e["isError"] == true).collect();
    assert_eq!(refused.len(), 1, "{ends:?}");
    assert_eq!(
        result_text(refused[0]),
        "Subagent capacity exceeded: at most 4 live children. Close a child you no longer need before spawning another."
    );
    let listed: Value =
        serde_json::from_str(&result_text(&tool_result(&p, "list_subagents"))).unwrap();
    let subagents = listed["subagents"].as_array().unwrap();
    assert_eq!(subagents.len(), 4, "{listed}");
    assert!(
        subagents.iter().all(|s| s["status"] == "running"),
        "{listed}"
    );
    let outcomes = p.request_ok("o", "session.get_outcomes", None).await;
    let failed: Vec<&Value> = outcomes["outcomes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|o| o["operation"] == "spawn" && o["result"] == "failed")
        .collect();
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0]["evidence"]["errorCode"], "spawn_failed");
}

#[tokio::test]
async fn interrupt_and_close_return_terminal_evidence() {
    let mock = start_mock().await;
    let agent = agent_with(&mock);
    let cwd = temp_cwd();
    mock.push_for(
        "parent",
        call("s1", "spawn_subagent", spawn_args("w1", "think long")),
    );
    mock.push_for("child", Step::Hang(vec!["partial ".to_string()]));
    mock.push_for(
        "parent",
        call("i1", "interrupt_subagent", json!({"name": "w1"})),
    );
    mock.push_for(
        "parent",
        call("c1", "close_subagent", json!({"name": "w1"})),
    );
    mock.push_for(
        "parent",
        call("c2", "close_subagent", json!({"name": "nobody"})),
    );
    mock.push_for("parent", Step::text("done"));
    let mut p = start(&agent, &cwd.path).await;
    // The child's provider request is in flight before the interrupt.
    prompt(&mut p, "p1", "go").await;
    mock.wait_for_requests(2, WAIT).await;
    p.event("agent_settled").await;

    let interrupt = tool_result(&p, "interrupt_subagent");
    assert_eq!(interrupt["isError"], json!(false), "{interrupt}");
    let text: Value = serde_json::from_str(&result_text(&interrupt)).unwrap();
    assert_eq!(text["result"], "interrupted");
    assert_eq!(text["all_completed"], json!(true));
    assert_eq!(text["subagents"][0]["completion"]["status"], "cancelled");
    assert_eq!(text["subagents"][0]["completion"]["work_cycle"], 1);
    assert_eq!(interrupt["result"]["details"]["result"], "interrupted");

    let close = tool_result(&p, "close_subagent");
    let closes: Vec<Value> = p
        .events()
        .into_iter()
        .filter(|e| e["type"] == "tool_execution_end" && e["toolName"] == "close_subagent")
        .collect();
    let first: Value = serde_json::from_str(&result_text(&closes[0])).unwrap();
    assert_eq!(first["previous_status"], "idle");
    // The interrupt's result delivered it; close shows it again, not as a new delivery.
    assert_eq!(first["subagents"][0]["completion"]["status"], "cancelled");
    assert_eq!(close["isError"], json!(true));
    assert_eq!(result_text(&close), "Unknown subagent: nobody");

    let events = subagent_events(&p, "w1");
    assert_eq!(
        events,
        [
            "starting",
            "ready",
            "work_cycle_started",
            "work_cycle_delivered",
            "closing",
            "exited"
        ]
    );
    let exited = p
        .events()
        .into_iter()
        .find(|e| e["type"] == "entry_appended" && e["entry"]["event"] == "exited")
        .unwrap();
    assert_eq!(exited["entry"]["outcome"], r#"{"type":"closed","code":0}"#);
    let closing = p
        .events()
        .into_iter()
        .find(|e| e["type"] == "entry_appended" && e["entry"]["event"] == "closing")
        .unwrap();
    assert_eq!(closing["entry"]["reason"], "close");
    let outcomes = p.request_ok("o", "session.get_outcomes", None).await;
    let outcomes = outcomes["outcomes"].as_array().unwrap().clone();
    let cycle = outcomes
        .iter()
        .find(|o| o["operationId"] == "subagent/w1/work_cycle/1")
        .unwrap();
    assert_eq!(cycle["result"], "cancelled");
    let by_operation = |operation: &str| -> Vec<Value> {
        outcomes
            .iter()
            .filter(|o| o["operation"] == operation)
            .cloned()
            .collect()
    };
    let interrupts = by_operation("interrupt");
    assert_eq!(interrupts.len(), 1);
    assert_eq!(interrupts[0]["evidence"]["disposition"], "interrupted");
    let closes = by_operation("close");
    assert_eq!(closes.len(), 2);
    assert_eq!(closes[0]["result"], "succeeded");
    assert_eq!(closes[1]["evidence"]["errorCode"], "target_not_live");
    // The name stays reserved after close.
    mock.push_for(
        "parent",
        call("s2", "spawn_subagent", spawn_args("w1", "again")),
    );
    mock.push_for("parent", Step::text("ok"));
    run(&mut p, "p2", "respawn").await;
    let respawn = tool_result(&p, "spawn_subagent");
    assert_eq!(result_text(&respawn), "Subagent name already in use: w1");
}

#[tokio::test]
async fn a_work_cycle_over_its_deadline_fails_with_timeout_evidence() {
    let mock = start_mock().await;
    let agent = agent_with(&mock).settings(r#"{"subagentWorkTimeoutMs": 500}"#);
    let cwd = temp_cwd();
    mock.push_for(
        "parent",
        call("s1", "spawn_subagent", spawn_args("w1", "never ends")),
    );
    mock.push_for("child", Step::Hang(vec!["started".to_string()]));
    mock.push_for(
        "parent",
        call(
            "w1",
            "wait_subagents",
            json!({"names": ["w1"], "timeout_ms": 60000}),
        ),
    );
    mock.push_for("parent", call("l1", "list_subagents", json!({})));
    mock.push_for("parent", Step::text("done"));
    let mut p = start(&agent, &cwd.path).await;
    run(&mut p, "p1", "go").await;
    let wait: Value =
        serde_json::from_str(&result_text(&tool_result(&p, "wait_subagents"))).unwrap();
    let completion = &wait["subagents"][0]["completion"];
    assert_eq!(completion["status"], "failed", "{wait}");
    assert_eq!(completion["reason"], "work_cycle_timeout");
    assert_eq!(completion["error"], "Subagent work cycle exceeded 500ms");
    // The child stays reusable.
    let listed: Value =
        serde_json::from_str(&result_text(&tool_result(&p, "list_subagents"))).unwrap();
    assert_eq!(listed["subagents"][0]["status"], "idle", "{listed}");
    let outcomes = p.request_ok("o", "session.get_outcomes", None).await;
    let cycle = outcomes["outcomes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["operationId"] == "subagent/w1/work_cycle/1")
        .cloned()
        .unwrap();
    assert_eq!(cycle["result"], "failed");
    assert_eq!(cycle["evidence"]["errorCode"], "work_cycle_timeout");
    assert_eq!(
        cycle["evidence"]["errorMessage"],
        "Subagent work cycle exceeded 500ms"
    );
}

/// The pid of the zi child process under the parent (not the shell tools under it).
fn child_pids(parent: u32) -> Vec<u32> {
    descendants(parent)
        .into_iter()
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .map(|c| String::from_utf8_lossy(&c).contains("--no-session"))
                .unwrap_or(false)
        })
        .collect()
}

#[tokio::test]
async fn a_child_killed_mid_cycle_is_reported_as_failed_never_as_success() {
    let mock = start_mock().await;
    let agent = agent_with(&mock);
    let cwd = temp_cwd();
    mock.push_for(
        "parent",
        call("s1", "spawn_subagent", spawn_args("w1", "hang")),
    );
    mock.push_for("child", Step::Hang(Vec::new()));
    mock.push_for("parent", Step::text("spawned"));
    let mut p = start(&agent, &cwd.path).await;
    run(&mut p, "p1", "go").await;
    mock.wait_for_requests(2, WAIT).await;
    let children = child_pids(p.pid());
    assert_eq!(children.len(), 1, "one child under {}", p.pid());
    // SAFETY: signalling a test-owned process.
    unsafe { libc::kill(children[0] as i32, libc::SIGKILL) };
    let outcome = wait_outcome(&mut p, "subagent/w1/work_cycle/1").await;
    assert_eq!(outcome["result"], "failed");
    assert_eq!(outcome["evidence"]["errorCode"], "child_failed");
    assert_eq!(
        outcome["evidence"]["errorMessage"],
        "Subagent w1 exited unexpectedly with signal SIGKILL"
    );
    let exited = p
        .wait_for("exited", |f| f["event"]["entry"]["event"] == "exited")
        .await;
    let recorded: Value =
        serde_json::from_str(exited["event"]["entry"]["outcome"].as_str().unwrap()).unwrap();
    assert_eq!(recorded["type"], "failed");
}

#[tokio::test]
async fn parent_sigterm_with_three_busy_children_leaves_no_process() {
    let mock = start_mock().await;
    let agent = agent_with(&mock);
    let cwd = temp_cwd();
    mock.push_for(
        "parent",
        calls(&[
            ("s1", "spawn_subagent", spawn_args("w1", "a")),
            ("s2", "spawn_subagent", spawn_args("w2", "b")),
            ("s3", "spawn_subagent", spawn_args("w3", "c")),
        ]),
    );
    // Two children wait on the provider, one runs a shell command (a grandchild).
    mock.push_for("child", call("b1", "bash", json!({"command": "sleep 300"})));
    mock.push_for("child", Step::Hang(Vec::new()));
    mock.push_for("child", Step::Hang(Vec::new()));
    mock.push_for("parent", Step::text("spawned"));
    let mut p = start(&agent, &cwd.path).await;
    run(&mut p, "p1", "go").await;
    let deadline = Instant::now() + WAIT;
    let mut tree = descendants(p.pid());
    while !tree.iter().any(|pid| {
        std::fs::read(format!("/proc/{pid}/cmdline"))
            .map(|c| String::from_utf8_lossy(&c).contains("sleep"))
            .unwrap_or(false)
    }) {
        assert!(Instant::now() < deadline, "the grandchild starts");
        tokio::time::sleep(Duration::from_millis(50)).await;
        tree = descendants(p.pid());
    }
    assert_eq!(child_pids(p.pid()).len(), 3);
    p.signal(libc::SIGTERM);
    let exited = p.wait_exit(WAIT).await;
    assert_eq!(exited.code, Some(143), "{}", exited.stderr);
    let left = wait_until_gone(&tree, Duration::from_secs(10)).await;
    assert!(left.is_empty(), "left behind: {left:?}");
}
