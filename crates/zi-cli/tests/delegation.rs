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
use zi_test_support::mock_llm::{MockLlm, MockToolCall, RecordedRequest, Step, start_mock};
use zi_test_support::process::{descendants, process_exists, wait_until_gone};
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
    Step::Reply {
        thinking: Vec::new(),
        text: Vec::new(),
        tool_calls: list
            .iter()
            .map(|(id, name, args)| MockToolCall {
                id: id.to_string(),
                name: name.to_string(),
                args_chunks: vec![args.to_string()],
            })
            .collect(),
        finish_reason: "tool_calls".to_string(),
        usage: None,
    }
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
