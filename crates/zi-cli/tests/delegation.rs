//! Black-box tests of delegation (docs/delegation.md): the real binary as
//! parent and as its subagent children, one mock LLM server scripting both sides (steps
//! scripted per model: the parent runs `mock/parent`, children `mock/child`).
//!
//! Each test is written in scenario steps: [`Scenario`] scripts what the parent
//! ([`Scenario::parent_says`]) and the children ([`Scenario::child_says`]) answer, starts the
//! parent, runs prompts ([`run`]) and reads the evidence back ([`tool_json`], [`outcomes`],
//! [`entries`], [`subagent_events`]).

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use zi_test_support::dirs::{AgentDir, TempCwd, all_files, temp_cwd};
use zi_test_support::harness::Harness;
use zi_test_support::mock_llm::{MockLlm, RecordedRequest, Step, start_mock};
use zi_test_support::process::{descendants, wait_until_gone};
use zi_test_support::zi_command::ZiCommand;

const ZI: &str = env!("CARGO_BIN_EXE_zi");
const WAIT: Duration = Duration::from_secs(60);
const KEY: &str = "test-key-abc";

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

// ---- the world: agent directory, mock, parent -------------------------------------------

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

/// One test's world: the mock LLM scripting the parent (`mock/parent`) and its children
/// (`mock/child`), the agent directory with the `worker` profile, and the cwd.
struct Scenario {
    mock: MockLlm,
    agent: AgentDir,
    cwd: TempCwd,
}

impl Scenario {
    async fn new() -> Scenario {
        Scenario::with(|agent| agent).await
    }

    /// With the agent directory adjusted (settings, more files).
    async fn with(adjust: impl FnOnce(AgentDir) -> AgentDir) -> Scenario {
        let mock = start_mock().await;
        let agent = adjust(agent_with(&mock));
        Scenario {
            mock,
            agent,
            cwd: temp_cwd(),
        }
    }

    /// The parent's next provider reply.
    fn parent_says(&self, step: Step) {
        self.mock.push_for("parent", step);
    }

    /// The next provider reply any child gets.
    fn child_says(&self, step: Step) {
        self.mock.push_for("child", step);
    }

    /// The next child reply, held until the parent made its `n`-th provider request. A child
    /// result that is ready before the parent's next request is delivered there as hidden
    /// context (docs/delegation.md#delivery), so a `wait_subagents` the parent calls afterwards
    /// would find nothing to claim: a completion meant for the wait is held until the request
    /// that calls the wait.
    fn child_says_after_parent_request(&self, n: usize, step: Step) {
        self.mock.push_for("child", Step::after("parent", n, step));
    }

    fn command(&self) -> ZiCommand {
        command(&self.agent, &self.cwd.path)
    }

    /// A parent without a journal.
    async fn parent(&self) -> Harness {
        self.command().no_session().spawn_rpc().await
    }

    /// Waits until the children together made `n` provider requests.
    async fn child_requests(&self, n: usize) -> Vec<RecordedRequest> {
        let deadline = Instant::now() + WAIT;
        loop {
            let requests = requests_of(&self.mock, "child");
            if requests.len() >= n {
                return requests;
            }
            assert!(
                Instant::now() < deadline,
                "{n} child requests, got {}",
                requests.len()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Releases every child waiting in [`wait_for_file`].
    fn release(&self, file: &str) {
        std::fs::write(self.cwd.path.join(file), "go").unwrap();
    }
}

// ---- scripted steps ----------------------------------------------------------------------

fn call(id: &str, name: &str, args: Value) -> Step {
    Step::tool_call(id, name, args)
}

fn calls(list: &[(&str, &str, Value)]) -> Step {
    Step::tool_calls(list)
}

fn spawn_args(name: &str, prompt: &str) -> Value {
    json!({"profile": "worker", "name": name, "prompt": prompt})
}

fn spawn_step(name: &str, prompt: &str) -> Step {
    call(
        &format!("spawn-{name}"),
        "spawn_subagent",
        spawn_args(name, prompt),
    )
}

/// `count` spawns (`w1`, `w2`, …) in one parallel step.
fn spawns(count: usize, prompt: &str) -> Step {
    let list: Vec<(String, String, Value)> = (1..=count)
        .map(|i| {
            let name = format!("w{i}");
            (format!("s{i}"), name.clone(), spawn_args(&name, prompt))
        })
        .collect();
    let list: Vec<(&str, &str, Value)> = list
        .iter()
        .map(|(id, _, args)| (id.as_str(), "spawn_subagent", args.clone()))
        .collect();
    calls(&list)
}

/// A wait whose timeout ends well before the harness's [`WAIT`]: a completion that never
/// comes shows as `timed_out` in the result, not as a harness timeout.
fn wait_step(names: &[&str]) -> Step {
    call(
        "wait",
        "wait_subagents",
        json!({"names": names, "timeout_ms": 40000}),
    )
}

/// A child's bash call that returns once the test creates `file` in the cwd: the child stays
/// in its cycle exactly as long as the test wants.
fn wait_for_file(file: &str) -> Step {
    call(
        "until",
        "bash",
        json!({"command": format!("while [ ! -e {file} ]; do sleep 0.05; done; echo released")}),
    )
}

// ---- driving the parent ------------------------------------------------------------------

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

// ---- reading the evidence ----------------------------------------------------------------

fn requests_of(mock: &MockLlm, model: &str) -> Vec<RecordedRequest> {
    mock.requests()
        .into_iter()
        .filter(|r| r.body["model"] == model)
        .collect()
}

fn occurrences(request: &RecordedRequest, needle: &str) -> usize {
    request.body.to_string().matches(needle).count()
}

fn tool_names(request: &RecordedRequest) -> Vec<String> {
    request.body["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["function"]["name"].as_str().map(str::to_string))
        .collect()
}

/// Every `tool_execution_end` of `tool` the parent emitted, in order.
fn tool_results(p: &Harness, tool: &str) -> Vec<Value> {
    p.events()
        .into_iter()
        .filter(|e| e["type"] == "tool_execution_end" && e["toolName"] == tool)
        .collect()
}

/// The last `tool_execution_end` of `tool`.
fn tool_result(p: &Harness, tool: &str) -> Value {
    tool_results(p, tool)
        .pop()
        .unwrap_or_else(|| panic!("a {tool} result"))
}

/// The text of a result's first block.
fn result_text(end: &Value) -> String {
    end["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or("")
        .to_string()
}

/// The JSON text of the last result of `tool`.
fn tool_json(p: &Harness, tool: &str) -> Value {
    let text = result_text(&tool_result(p, tool));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{tool} result {text:?}: {e}"))
}

/// The `event`s of the `subagent` entries of `name` the parent appended while connected.
fn subagent_events(p: &Harness, name: &str) -> Vec<String> {
    p.events()
        .iter()
        .filter(|e| e["type"] == "entry_appended" && e["entry"]["type"] == "subagent")
        .filter(|e| e["entry"]["name"] == name)
        .map(|e| e["entry"]["event"].as_str().unwrap_or("").to_string())
        .collect()
}

/// The first appended `subagent` entry with `event`.
fn appended(p: &Harness, event: &str) -> Value {
    p.events()
        .into_iter()
        .find(|e| e["type"] == "entry_appended" && e["entry"]["event"] == event)
        .map(|e| e["entry"].clone())
        .unwrap_or_else(|| panic!("a {event} entry"))
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

async fn outcomes(p: &mut Harness) -> Vec<Value> {
    let page = p.request_ok("outcomes", "session.get_outcomes", None).await;
    page["outcomes"].as_array().cloned().unwrap_or_default()
}

fn outcome<'a>(outcomes: &'a [Value], operation_id: &str) -> &'a Value {
    outcomes
        .iter()
        .find(|o| o["operationId"] == operation_id)
        .unwrap_or_else(|| panic!("{operation_id} in {outcomes:?}"))
}

/// The control outcomes of one operation (`spawn`, `close`, …), in order.
fn outcomes_of<'a>(outcomes: &'a [Value], operation: &str) -> Vec<&'a Value> {
    outcomes
        .iter()
        .filter(|o| o["operation"] == operation)
        .collect()
}

/// Every journal entry of the parent's session, as JSON.
async fn entries(p: &Harness) -> Vec<Value> {
    p.client()
        .all_entries()
        .await
        .unwrap()
        .iter()
        .map(|e| serde_json::to_value(e).unwrap())
        .collect()
}

fn subagent_entries<'a>(entries: &'a [Value], event: &str) -> Vec<&'a Value> {
    entries
        .iter()
        .filter(|e| e["type"] == "subagent" && e["event"] == event)
        .collect()
}

// ---- processes ---------------------------------------------------------------------------

/// A process's `/proc/<pid>/<file>` (cmdline, environ) as text, NULs as spaces; empty when
/// the process is gone.
fn proc_text(pid: u32, file: &str) -> String {
    let bytes = std::fs::read(format!("/proc/{pid}/{file}")).unwrap_or_default();
    String::from_utf8_lossy(&bytes).replace('\0', " ")
}

/// The pids of the zi child processes under the parent (not the shell tools under them).
fn child_pids(parent: u32) -> Vec<u32> {
    descendants(parent)
        .into_iter()
        .filter(|pid| proc_text(*pid, "cmdline").contains("--no-session"))
        .collect()
}

/// The parent's process tree once a descendant runs `command` (a child's shell tool).
async fn tree_running(p: &Harness, command: &str) -> Vec<u32> {
    let deadline = Instant::now() + WAIT;
    loop {
        let tree = descendants(p.pid());
        if tree
            .iter()
            .any(|pid| proc_text(*pid, "cmdline").starts_with(command))
        {
            return tree;
        }
        assert!(Instant::now() < deadline, "{command} starts under a child");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

// ---- spawn, wait, delivery ---------------------------------------------------------------

#[tokio::test]
async fn spawn_wait_result_reaches_the_next_parent_request_exactly_once() {
    let s = Scenario::new().await;
    s.parent_says(spawn_step("w1", "count the files"));
    s.child_says_after_parent_request(2, Step::text("CHILD-RESULT-1"));
    s.parent_says(wait_step(&["w1"]));
    s.parent_says(Step::text("done"));
    s.parent_says(Step::text("bye"));
    let mut p = s.parent().await;
    run(&mut p, "p1", "delegate it").await;

    let spawn = tool_result(&p, "spawn_subagent");
    assert_eq!(spawn["isError"], json!(false), "{spawn}");
    assert_eq!(result_text(&spawn), r#"{"name":"w1","profile":"worker"}"#);
    let wait = tool_result(&p, "wait_subagents");
    assert_eq!(wait["isError"], json!(false), "{wait}");
    let text = tool_json(&p, "wait_subagents");
    assert_eq!(text["subagents"][0]["name"], "w1");
    assert_eq!(text["subagents"][0]["completion"]["text"], "CHILD-RESULT-1");
    assert_eq!(text["subagents"][0]["completion"]["status"], "completed");
    assert_eq!(text["timed_out"], json!(false));
    let details = &wait["result"]["details"];
    assert_eq!(details["operation"], "wait");
    assert_eq!(details["agents"][0]["completionDelivery"], "claimed");

    // The child got the profile's instructions before the task, over RPC only.
    let child = requests_of(&s.mock, "child");
    assert_eq!(child.len(), 1);
    assert!(
        child[0]
            .body
            .to_string()
            .contains("You are a careful worker.\\n\\nTask:\\ncount the files")
    );
    let parent = requests_of(&s.mock, "parent");
    assert_eq!(parent.len(), 3);
    assert_eq!(occurrences(&parent[2], "CHILD-RESULT-1"), 1);
    assert_eq!(occurrences(&parent[2], "subagent_completion"), 0);

    // A later prompt carries it once (history) and injects nothing again.
    run(&mut p, "p2", "anything else?").await;
    let parent = requests_of(&s.mock, "parent");
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
    let outcomes = outcomes(&mut p).await;
    let cycle = outcome(&outcomes, "subagent/w1/work_cycle/1");
    assert_eq!(cycle["capability"], "subagent");
    assert_eq!(cycle["operation"], "work_cycle");
    assert_eq!(cycle["result"], "succeeded");
    assert_eq!(cycle["evidence"]["name"], "w1");
    assert_eq!(cycle["evidence"]["workCycle"], 1);
    assert_eq!(cycle["evidence"]["profile"], "worker");
    assert_eq!(cycle["evidence"]["preview"], "CHILD-RESULT-1");
    let spawns = outcomes_of(&outcomes, "spawn");
    assert_eq!(spawns.len(), 1, "{outcomes:?}");
    assert_eq!(spawns[0]["result"], "succeeded");
    assert_eq!(spawns[0]["evidence"]["name"], "w1");
    assert_eq!(spawns[0]["evidence"]["source"], "host");
    assert!(
        spawns[0]["operationId"]
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
    let s = Scenario::new().await;
    s.parent_says(spawn_step("w1", "go"));
    s.child_says(Step::text("HIDDEN-RESULT"));
    s.parent_says(Step::text("spawned it"));
    s.parent_says(Step::text("noted"));
    s.parent_says(Step::text("still noted"));
    let mut p = s.parent().await;
    run(&mut p, "p1", "start").await;
    let outcome = wait_outcome(&mut p, "subagent/w1/work_cycle/1").await;
    assert_eq!(outcome["result"], "succeeded");
    // A completion never starts a parent turn.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(requests_of(&s.mock, "parent").len(), 2);

    run(&mut p, "p2", "what happened?").await;
    let parent = requests_of(&s.mock, "parent");
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
    let parent = requests_of(&s.mock, "parent");
    assert_eq!(occurrences(&parent[3], "<subagent_completion>"), 1);
}

// ---- tools and capacity ------------------------------------------------------------------

#[tokio::test]
async fn the_parent_has_the_eight_tools_and_a_depth_one_child_has_none() {
    let s = Scenario::new().await;
    s.parent_says(spawn_step("w1", "go"));
    s.child_says(Step::text("ok"));
    s.parent_says(Step::text("done"));
    let mut p = s.parent().await;
    run(&mut p, "p1", "start").await;
    wait_outcome(&mut p, "subagent/w1/work_cycle/1").await;
    let parent = tool_names(&requests_of(&s.mock, "parent")[0]);
    for tool in DELEGATION_TOOLS {
        assert!(parent.iter().any(|t| t == tool), "{tool} in {parent:?}");
    }
    let child = tool_names(&requests_of(&s.mock, "child")[0]);
    assert!(!child.is_empty());
    for tool in DELEGATION_TOOLS {
        assert!(
            !child.iter().any(|t| t == tool),
            "{tool} in the child's {child:?}"
        );
    }
    assert!(!child.iter().any(|t| t.contains("peer")), "{child:?}");

    // Without profiles there are no delegation tools at all.
    let empty = AgentDir::new().models(&s.mock, KEY, &[json!({"id": "parent"})]);
    s.parent_says(Step::text("plain"));
    let mut q = command(&empty, &s.cwd.path).no_session().spawn_rpc().await;
    run(&mut q, "p1", "hi").await;
    let plain = tool_names(requests_of(&s.mock, "parent").last().unwrap());
    assert!(
        !plain.iter().any(|t| DELEGATION_TOOLS.contains(&t.as_str())),
        "{plain:?}"
    );
}

#[tokio::test]
async fn four_live_children_and_the_fifth_is_refused() {
    let s = Scenario::new().await;
    s.parent_says(spawns(5, "wait here"));
    for _ in 0..5 {
        s.child_says(Step::Hang(Vec::new()));
    }
    s.parent_says(call("l1", "list_subagents", json!({})));
    s.parent_says(Step::text("done"));
    let mut p = s.parent().await;
    run(&mut p, "p1", "spawn five").await;
    let ends = tool_results(&p, "spawn_subagent");
    assert_eq!(ends.len(), 5);
    let refused: Vec<&Value> = ends.iter().filter(|e| e["isError"] == true).collect();
    assert_eq!(refused.len(), 1, "{ends:?}");
    assert_eq!(
        result_text(refused[0]),
        "Subagent capacity exceeded: at most 4 live children. Close a child you no longer need before spawning another."
    );
    let listed = tool_json(&p, "list_subagents");
    let subagents = listed["subagents"].as_array().unwrap();
    assert_eq!(subagents.len(), 4, "{listed}");
    assert!(
        subagents.iter().all(|s| s["status"] == "running"),
        "{listed}"
    );
    let outcomes = outcomes(&mut p).await;
    let failed: Vec<&Value> = outcomes_of(&outcomes, "spawn")
        .into_iter()
        .filter(|o| o["result"] == "failed")
        .collect();
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0]["evidence"]["errorCode"], "spawn_failed");
}

// ---- interrupt, close, timeouts, crashes -------------------------------------------------

#[tokio::test]
async fn interrupt_and_close_return_terminal_evidence() {
    let s = Scenario::new().await;
    s.parent_says(spawn_step("w1", "think long"));
    s.child_says(Step::Hang(vec!["partial ".to_string()]));
    s.parent_says(call("i1", "interrupt_subagent", json!({"name": "w1"})));
    s.parent_says(call("c1", "close_subagent", json!({"name": "w1"})));
    s.parent_says(call("c2", "close_subagent", json!({"name": "nobody"})));
    s.parent_says(Step::text("done"));
    let mut p = s.parent().await;
    // The child's provider request is in flight before the interrupt.
    prompt(&mut p, "p1", "go").await;
    s.mock.wait_for_requests(2, WAIT).await;
    p.event("agent_settled").await;

    let interrupt = tool_result(&p, "interrupt_subagent");
    assert_eq!(interrupt["isError"], json!(false), "{interrupt}");
    let text = tool_json(&p, "interrupt_subagent");
    assert_eq!(text["result"], "interrupted");
    assert_eq!(text["all_completed"], json!(true));
    assert_eq!(text["subagents"][0]["completion"]["status"], "cancelled");
    assert_eq!(text["subagents"][0]["completion"]["work_cycle"], 1);
    assert_eq!(interrupt["result"]["details"]["result"], "interrupted");

    let closes = tool_results(&p, "close_subagent");
    let first: Value = serde_json::from_str(&result_text(&closes[0])).unwrap();
    assert_eq!(first["previous_status"], "idle");
    // The interrupt's result delivered it; close shows it again, not as a new delivery.
    assert_eq!(first["subagents"][0]["completion"]["status"], "cancelled");
    assert_eq!(closes[1]["isError"], json!(true));
    assert_eq!(result_text(&closes[1]), "Unknown subagent: nobody");

    assert_eq!(
        subagent_events(&p, "w1"),
        [
            "starting",
            "ready",
            "work_cycle_started",
            "work_cycle_delivered",
            "closing",
            "exited"
        ]
    );
    assert_eq!(
        appended(&p, "exited")["outcome"],
        r#"{"type":"closed","code":0}"#
    );
    assert_eq!(appended(&p, "closing")["reason"], "close");
    let outcomes = outcomes(&mut p).await;
    assert_eq!(
        outcome(&outcomes, "subagent/w1/work_cycle/1")["result"],
        "cancelled"
    );
    let interrupts = outcomes_of(&outcomes, "interrupt");
    assert_eq!(interrupts.len(), 1);
    assert_eq!(interrupts[0]["evidence"]["disposition"], "interrupted");
    let closes = outcomes_of(&outcomes, "close");
    assert_eq!(closes.len(), 2);
    assert_eq!(closes[0]["result"], "succeeded");
    assert_eq!(closes[1]["evidence"]["errorCode"], "target_not_live");
    // The name stays reserved after close.
    s.parent_says(spawn_step("w1", "again"));
    s.parent_says(Step::text("ok"));
    run(&mut p, "p2", "respawn").await;
    assert_eq!(
        result_text(&tool_result(&p, "spawn_subagent")),
        "Subagent name already in use: w1"
    );
}

#[tokio::test]
async fn a_work_cycle_over_its_deadline_fails_with_timeout_evidence() {
    let s = Scenario::with(|agent| agent.settings(r#"{"subagentWorkTimeoutMs": 500}"#)).await;
    s.parent_says(spawn_step("w1", "never ends"));
    s.child_says(Step::Hang(vec!["started".to_string()]));
    s.parent_says(wait_step(&["w1"]));
    s.parent_says(call("l1", "list_subagents", json!({})));
    s.parent_says(Step::text("done"));
    let mut p = s.parent().await;
    run(&mut p, "p1", "go").await;
    let wait = tool_json(&p, "wait_subagents");
    let completion = &wait["subagents"][0]["completion"];
    assert_eq!(completion["status"], "failed", "{wait}");
    assert_eq!(completion["reason"], "work_cycle_timeout");
    assert_eq!(completion["error"], "Subagent work cycle exceeded 500ms");
    // The child stays reusable.
    let listed = tool_json(&p, "list_subagents");
    assert_eq!(listed["subagents"][0]["status"], "idle", "{listed}");
    let outcomes = outcomes(&mut p).await;
    let cycle = outcome(&outcomes, "subagent/w1/work_cycle/1");
    assert_eq!(cycle["result"], "failed");
    assert_eq!(cycle["evidence"]["errorCode"], "work_cycle_timeout");
    assert_eq!(
        cycle["evidence"]["errorMessage"],
        "Subagent work cycle exceeded 500ms"
    );
}

#[tokio::test]
async fn a_child_killed_mid_cycle_is_reported_as_failed_never_as_success() {
    let s = Scenario::new().await;
    s.parent_says(spawn_step("w1", "hang"));
    s.child_says(Step::Hang(Vec::new()));
    s.parent_says(Step::text("spawned"));
    let mut p = s.parent().await;
    run(&mut p, "p1", "go").await;
    s.child_requests(1).await;
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

/// Issue 23 C5: a child SIGKILLed while its tool runs leaves nothing running — not the shell,
/// not what the shell started, not a `setsid` escape — even before the parent exits.
#[tokio::test]
async fn a_sigkilled_childs_tool_processes_end_with_it() {
    let s = Scenario::new().await;
    s.parent_says(spawn_step("w1", "busy"));
    let escape = format!("sleep 6{:04}", std::process::id() % 10_000);
    let command = format!("(setsid {escape} > /dev/null 2>&1 < /dev/null &); sleep 300; echo");
    s.child_says(call("b1", "bash", json!({"command": command})));
    s.parent_says(Step::text("spawned"));
    let mut p = s.parent().await;
    run(&mut p, "p1", "go").await;
    let tree = tree_running(&p, "sleep 300").await;
    let deadline = Instant::now() + WAIT;
    let escaped = loop {
        // Anywhere: without a subreaper it is re-parented out of the parent's tree.
        let found = std::process::Command::new("pgrep")
            .args(["-fx", &escape])
            .output()
            .ok()
            .and_then(|o| {
                String::from_utf8_lossy(&o.stdout)
                    .trim()
                    .parse::<u32>()
                    .ok()
            });
        if let Some(pid) = found {
            break pid;
        }
        assert!(Instant::now() < deadline, "{escape} starts");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let children = child_pids(p.pid());
    assert_eq!(children.len(), 1, "one child under {}", p.pid());
    // SAFETY: signalling a test-owned process.
    unsafe { libc::kill(children[0] as i32, libc::SIGKILL) };
    let mut processes = tree;
    processes.push(escaped);
    let left = wait_until_gone(&processes, Duration::from_secs(10)).await;
    assert!(left.is_empty(), "left after the child's SIGKILL: {left:?}");
    p.close_stdin().await;
    assert_eq!(p.wait_exit(WAIT).await.code, Some(0));
}

#[tokio::test]
async fn parent_sigterm_with_three_busy_children_leaves_no_process() {
    let s = Scenario::new().await;
    s.parent_says(spawns(3, "busy"));
    // Two children wait on the provider, one runs a shell command (a grandchild).
    s.child_says(call("b1", "bash", json!({"command": "sleep 300"})));
    s.child_says(Step::Hang(Vec::new()));
    s.child_says(Step::Hang(Vec::new()));
    s.parent_says(Step::text("spawned"));
    let mut p = s.parent().await;
    run(&mut p, "p1", "go").await;
    let tree = tree_running(&p, "sleep").await;
    assert_eq!(child_pids(p.pid()).len(), 3);
    p.signal(libc::SIGTERM);
    let exited = p.wait_exit(WAIT).await;
    assert_eq!(exited.code, Some(143), "{}", exited.stderr);
    let left = wait_until_gone(&tree, Duration::from_secs(10)).await;
    assert!(left.is_empty(), "left behind: {left:?}");
}

// ---- resume, SIGKILL, credentials, messages, restore bound -------------------------------

#[tokio::test]
async fn after_a_parent_sigkill_continue_injects_only_undelivered_results_and_records_lost_children()
 {
    let s = Scenario::new().await;
    // Run 1: w1's result is delivered by a wait; w2 is still in its cycle when the run ends.
    s.parent_says(spawn_step("w1", "first"));
    s.child_says_after_parent_request(2, Step::text("RESULT-ONE"));
    s.parent_says(wait_step(&["w1"]));
    s.parent_says(spawn_step("w2", "second"));
    s.child_says(wait_for_file("go"));
    s.parent_says(Step::text("two started"));
    // Run 2: w3 hangs on its provider request until the end.
    s.parent_says(spawn_step("w3", "third"));
    s.child_says(Step::Hang(Vec::new()));
    s.parent_says(Step::text("three started"));
    // w2's answer once the test releases it, while the parent is idle.
    s.child_says(Step::text("RESULT-TWO"));
    let mut p = s.command().spawn_rpc().await;
    run(&mut p, "p1", "delegate").await;
    s.child_requests(2).await;
    run(&mut p, "p2", "one more").await;
    s.child_requests(3).await;
    s.release("go");
    let two = wait_outcome(&mut p, "subagent/w2/work_cycle/1").await;
    assert_eq!(two["evidence"]["preview"], "RESULT-TWO");
    assert!(!subagent_events(&p, "w2").contains(&"work_cycle_delivered".to_string()));
    let children = child_pids(p.pid());
    assert_eq!(children.len(), 3, "three children under {}", p.pid());

    p.signal(libc::SIGKILL);
    let killed = p.wait_exit(WAIT).await;
    assert_eq!(killed.signal, Some(libc::SIGKILL));
    // The children see EOF on stdin and exit on their own.
    let left = wait_until_gone(&children, Duration::from_secs(30)).await;
    assert!(
        left.is_empty(),
        "children left after the parent's SIGKILL: {left:?}"
    );

    s.parent_says(Step::text("resumed"));
    s.parent_says(call(
        "send",
        "send_subagent_message",
        json!({"name": "w3", "text": "hi"}),
    ));
    s.parent_says(Step::text("still resumed"));
    let mut q = s.command().arg("-c").spawn_rpc().await;
    let journal = entries(&q).await;
    let mut lost: Vec<&str> = subagent_entries(&journal, "lost")
        .iter()
        .map(|e| {
            assert_eq!(e["reason"], "session_restored");
            e["name"].as_str().unwrap()
        })
        .collect();
    lost.sort_unstable();
    assert_eq!(lost, ["w1", "w2", "w3"]);
    assert!(child_pids(q.pid()).is_empty(), "no child is restarted");

    run(&mut q, "p3", "what happened?").await;
    let parent = requests_of(&s.mock, "parent");
    let resumed = parent.last().unwrap();
    // w2's undelivered result is injected once; w1's delivered one only stays in history.
    assert_eq!(occurrences(resumed, "<subagent_completion>"), 1);
    assert_eq!(occurrences(resumed, "RESULT-TWO"), 1);
    assert_eq!(occurrences(resumed, "RESULT-ONE"), 1);
    assert_eq!(subagent_events(&q, "w2"), ["work_cycle_delivered"]);

    // The restored names are known but not live, and nothing is injected twice.
    run(&mut q, "p4", "tell w3").await;
    assert_eq!(
        result_text(&tool_result(&q, "send_subagent_message")),
        "Unknown live subagent: w3"
    );
    let parent = requests_of(&s.mock, "parent");
    assert_eq!(
        occurrences(parent.last().unwrap(), "<subagent_completion>"),
        1
    );
    q.close_stdin().await;
    assert_eq!(q.wait_exit(WAIT).await.code, Some(0));
}

/// Issue 23 C9: a child recorded `lost` by one `-c` is not recorded again by the next ones, also
/// after the resumed run delivered its restored completion (an acknowledgement after `lost`).
#[tokio::test]
async fn a_second_continue_records_no_second_lost() {
    let s = Scenario::new().await;
    s.parent_says(spawn_step("w1", "first"));
    s.child_says(wait_for_file("go"));
    s.parent_says(Step::text("started"));
    s.child_says(Step::text("RESULT-ONE"));
    let mut p = s.command().spawn_rpc().await;
    run(&mut p, "p1", "delegate").await;
    s.child_requests(1).await;
    s.release("go");
    // The completion lands while the parent is idle: undelivered when the parent dies.
    wait_outcome(&mut p, "subagent/w1/work_cycle/1").await;
    let children = child_pids(p.pid());
    p.signal(libc::SIGKILL);
    assert_eq!(p.wait_exit(WAIT).await.signal, Some(libc::SIGKILL));
    let left = wait_until_gone(&children, Duration::from_secs(30)).await;
    assert!(left.is_empty(), "children left: {left:?}");

    // Run 2 records w1 lost, then its prompt delivers the restored completion.
    s.parent_says(Step::text("resumed"));
    let mut q = s.command().arg("-c").spawn_rpc().await;
    run(&mut q, "p2", "what happened?").await;
    assert_eq!(subagent_events(&q, "w1"), ["work_cycle_delivered"]);
    q.close_stdin().await;
    assert_eq!(q.wait_exit(WAIT).await.code, Some(0));

    // Runs 3 and 4 find w1 ended and record nothing.
    for _ in 0..2 {
        let mut r = s.command().arg("-c").spawn_rpc().await;
        let journal = entries(&r).await;
        let lost = subagent_entries(&journal, "lost");
        assert_eq!(lost.len(), 1, "{lost:?}");
        assert_eq!(subagent_entries(&journal, "work_cycle_delivered").len(), 1);
        r.close_stdin().await;
        assert_eq!(r.wait_exit(WAIT).await.code, Some(0));
    }
}

#[tokio::test]
async fn a_sigkilled_parents_busy_children_and_their_commands_exit_at_stdin_eof() {
    let s = Scenario::new().await;
    s.parent_says(calls(&[
        ("s1", "spawn_subagent", spawn_args("w1", "a")),
        ("s2", "spawn_subagent", spawn_args("w2", "b")),
    ]));
    s.child_says(call("b1", "bash", json!({"command": "sleep 300"})));
    s.child_says(Step::Hang(Vec::new()));
    s.parent_says(Step::text("spawned"));
    let mut p = s.parent().await;
    run(&mut p, "p1", "go").await;
    s.child_requests(2).await;
    let tree = tree_running(&p, "sleep").await;
    assert_eq!(child_pids(p.pid()).len(), 2);
    p.signal(libc::SIGKILL);
    p.wait_exit(WAIT).await;
    let left = wait_until_gone(&tree, Duration::from_secs(30)).await;
    assert!(left.is_empty(), "left behind: {left:?}");
}

#[tokio::test]
async fn the_api_key_reaches_a_child_on_the_parents_model_and_nothing_zi_writes() {
    const SECRET: &str = "sk-handoff-7f3a9c2e41d8";
    let s = Scenario::new().await;
    // A profile without a model: its child uses the parent's, so the key is handed over.
    s.agent.write(
        "subagents/same.md",
        "---\ndescription: Works on the parent's model\n---\nHelp.\n",
    );
    let on_parent = |step| s.mock.push_offering("spawn_subagent", step);
    on_parent(call(
        "s1",
        "spawn_subagent",
        json!({"profile": "same", "name": "w1", "prompt": "print your environment"}),
    ));
    on_parent(Step::text("spawned"));
    // The child's steps (same model, no delegation tools): its shell's environment, then text.
    s.parent_says(call("env", "bash", json!({"command": "env"})));
    s.parent_says(Step::text("CHILD-DONE"));
    let mut p = s.command().arg("--api-key").arg(SECRET).spawn_rpc().await;
    run(&mut p, "p1", "spawn").await;
    let done = wait_outcome(&mut p, "subagent/w1/work_cycle/1").await;
    assert_eq!(done["evidence"]["preview"], "CHILD-DONE");
    let child: Vec<RecordedRequest> = requests_of(&s.mock, "parent")
        .into_iter()
        .filter(|r| !tool_names(r).iter().any(|t| t == "spawn_subagent"))
        .collect();
    assert_eq!(child.len(), 2);
    // The child authenticated with the handed-over key ...
    for request in &child {
        assert_eq!(
            request.header("authorization"),
            Some(format!("Bearer {SECRET}").as_str())
        );
    }
    // ... which its shell tools never saw.
    let shell_env = child[1].body.to_string();
    assert!(shell_env.contains("ZI_SUBAGENT_DEPTH=1"), "{shell_env}");
    assert!(!shell_env.contains(SECRET), "the child's shell saw the key");
    assert!(!shell_env.contains("ZI_INTERNAL_SUBAGENT_API_KEY"));
    // Nor does the running child's argv or its process environment hold it.
    let pids = child_pids(p.pid());
    assert_eq!(pids.len(), 1);
    let environ = proc_text(pids[0], "environ");
    assert!(environ.contains("ZI_SUBAGENT_DEPTH=1"), "{environ}");
    assert!(
        !environ.contains(SECRET),
        "the key in /proc/<child>/environ"
    );
    assert!(!proc_text(pids[0], "cmdline").contains(SECRET));

    p.close_stdin().await;
    let exited = p.wait_exit(WAIT).await;
    assert_eq!(exited.code, Some(0), "{}", exited.stderr);
    let frames: String = p.frames().iter().map(Value::to_string).collect();
    assert!(frames.contains("CHILD-DONE"));
    assert!(!frames.contains(SECRET), "the key in a frame");
    assert!(!exited.stderr.contains(SECRET), "the key on stderr");
    let written: Vec<std::path::PathBuf> = all_files(s.agent.path())
        .into_iter()
        .chain(all_files(&s.cwd.path))
        .collect();
    assert!(
        written
            .iter()
            .any(|f| f.extension().is_some_and(|e| e == "jsonl")),
        "the parent's journal in {written:?}"
    );
    for file in written {
        let bytes = std::fs::read(&file).unwrap();
        assert!(
            !String::from_utf8_lossy(&bytes).contains(SECRET),
            "the key in {}",
            file.display()
        );
    }
}

#[tokio::test]
async fn send_subagent_message_joins_the_running_cycle_and_waits_in_an_idle_child() {
    let s = Scenario::new().await;
    s.parent_says(spawn_step("w1", "work"));
    s.child_says(wait_for_file("go"));
    s.parent_says(Step::text("spawned"));
    s.parent_says(call(
        "m1",
        "send_subagent_message",
        json!({"name": "w1", "text": "CONTEXT-WHILE-RUNNING"}),
    ));
    s.parent_says(Step::text("sent"));
    // Cycle 1 after the release: a first answer, then the follow-up's turn.
    s.child_says(Step::text("first answer"));
    s.child_says(Step::text("CYCLE-ONE"));
    let mut p = s.parent().await;
    run(&mut p, "p1", "spawn").await;
    s.child_requests(1).await;
    run(&mut p, "p2", "tell it").await;
    assert_eq!(
        result_text(&tool_result(&p, "send_subagent_message")),
        "Sent context to w1."
    );
    s.release("go");
    let one = wait_outcome(&mut p, "subagent/w1/work_cycle/1").await;
    assert_eq!(one["evidence"]["preview"], "CYCLE-ONE");
    let child = s.child_requests(3).await;
    assert_eq!(occurrences(&child[1], "CONTEXT-WHILE-RUNNING"), 0);
    assert_eq!(occurrences(&child[2], "CONTEXT-WHILE-RUNNING"), 1);

    // Idle: the message waits in the child and starts nothing; the next cycle consumes it.
    s.parent_says(calls(&[
        (
            "m2",
            "send_subagent_message",
            json!({"name": "w1", "text": "CONTEXT-WHILE-IDLE"}),
        ),
        (
            "m3",
            "send_subagent_message",
            json!({"name": "nobody", "text": "x"}),
        ),
    ]));
    s.parent_says(call(
        "a1",
        "assign_subagent_task",
        json!({"name": "w1", "text": "the second task"}),
    ));
    s.parent_says(wait_step(&["w1"]));
    s.parent_says(Step::text("done"));
    s.child_says(Step::text("second answer"));
    // Requests 5 and 6 send and assign; the 7th calls the wait.
    s.child_says_after_parent_request(7, Step::text("CYCLE-TWO"));
    let before = requests_of(&s.mock, "child").len();
    run(&mut p, "p3", "more").await;
    let sends: Vec<String> = tool_results(&p, "send_subagent_message")
        .iter()
        .map(result_text)
        .collect();
    assert!(
        sends.contains(&"Sent context to w1.".to_string()),
        "{sends:?}"
    );
    assert!(
        sends.contains(&"Unknown live subagent: nobody".to_string()),
        "{sends:?}"
    );
    assert_eq!(
        tool_json(&p, "wait_subagents")["subagents"][0]["completion"]["text"],
        "CYCLE-TWO"
    );
    let child = requests_of(&s.mock, "child");
    assert_eq!(child.len(), before + 2);
    let second: usize = child[before..]
        .iter()
        .map(|r| occurrences(r, "CONTEXT-WHILE-IDLE"))
        .sum();
    assert!(second >= 1, "the idle message reaches cycle 2");

    let outcomes = outcomes(&mut p).await;
    let deliveries: Vec<&Value> = outcomes
        .iter()
        .filter(|o| o["operation"] == "message_delivery")
        .collect();
    assert_eq!(deliveries.len(), 3, "{deliveries:?}");
    let running = deliveries[0];
    assert_eq!(running["result"], "succeeded");
    assert_eq!(running["evidence"]["channel"], "host_to_subagent");
    assert_eq!(running["evidence"]["target"], "w1");
    assert_eq!(running["evidence"]["targetWorkCycle"], 1);
    assert_eq!(
        running["evidence"]["messageBytes"],
        "CONTEXT-WHILE-RUNNING".len()
    );
    let unknown = deliveries
        .iter()
        .find(|o| o["evidence"]["target"] == "nobody")
        .unwrap();
    assert_eq!(unknown["result"], "failed");
    assert_eq!(unknown["evidence"]["errorCode"], "target_not_live");
    let idle = deliveries
        .iter()
        .find(|o| o["evidence"]["target"] == "w1" && o["evidence"]["messageBytes"] == 18)
        .unwrap();
    assert!(idle["evidence"].get("targetWorkCycle").is_none(), "{idle}");
    // Evidence never carries the text.
    assert!(
        !serde_json::to_string(&deliveries)
            .unwrap()
            .contains("CONTEXT-")
    );
    outcome(&outcomes, "subagent/w1/work_cycle/2");
}

/// A journal with `count` undelivered work-cycle outcomes of `w1` (previews `OLD-01`, …).
fn journal_with_undelivered(path: &Path, cwd: &Path, count: usize) {
    let id = |n: usize| format!("00000000-0000-4000-8000-{n:012}");
    let mut lines = vec![json!({
        "type": "session", "version": 2, "id": id(0),
        "timestamp": "2026-01-01T00:00:00.000Z", "cwd": cwd.display().to_string(),
    })];
    let mut data = vec![json!({"type": "subagent", "event": "starting", "name": "w1"})];
    for n in 1..=count {
        let preview = format!("OLD-{n:02}");
        data.push(json!({
            "type": "operation_outcome",
            "operationId": format!("subagent/w1/work_cycle/{n}"),
            "capability": "subagent", "operation": "work_cycle", "result": "succeeded",
            "durationMs": 5,
            "evidence": {"name": "w1", "workCycle": n, "profile": "worker", "preview": preview,
                         "originalBytes": 6, "omittedBytes": 0, "truncated": false},
        }));
    }
    data.push(json!({"type": "subagent", "event": "exited", "name": "w1",
                     "outcome": r#"{"type":"closed","code":0}"#}));
    let mut parent = Value::Null;
    for (n, mut entry) in data.into_iter().enumerate() {
        entry["id"] = json!(id(n + 1));
        entry["parentId"] = parent;
        entry["timestamp"] = json!("2026-01-01T00:00:01.000Z");
        parent = json!(id(n + 1));
        lines.push(entry);
    }
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(path, text).unwrap();
}

#[tokio::test]
async fn more_than_32_undelivered_completions_restore_the_newest_32_with_one_warning() {
    let s = Scenario::new().await;
    let journal = s.cwd.path.join("old.jsonl");
    journal_with_undelivered(&journal, &s.cwd.path, 33);
    s.parent_says(Step::text("caught up"));
    let mut p = s.command().arg("-r").arg(&journal).spawn_rpc().await;
    run(&mut p, "p1", "what finished?").await;
    let request = requests_of(&s.mock, "parent").pop().unwrap();
    assert_eq!(occurrences(&request, "<subagent_completion>"), 32);
    assert_eq!(occurrences(&request, "OLD-01"), 0);
    for n in 2..=33 {
        assert_eq!(
            occurrences(&request, &format!("OLD-{n:02}")),
            1,
            "OLD-{n:02}"
        );
    }
    p.close_stdin().await;
    let exited = p.wait_exit(WAIT).await;
    assert_eq!(exited.code, Some(0), "{}", exited.stderr);
    let warnings: Vec<&str> = exited
        .stderr
        .lines()
        .filter(|l| l.contains("undelivered subagent completions"))
        .collect();
    assert_eq!(warnings.len(), 1, "{}", exited.stderr);
    assert!(warnings[0].starts_with("Warning: "), "{}", warnings[0]);
}

// ---- children: approvals, profile discovery ---------------------------------------------

#[tokio::test]
async fn a_child_is_bounded_by_the_parents_approval_policy_rules_and_sandbox() {
    let s = Scenario::new().await;
    s.parent_says(spawn_step("w1", "try things"));
    s.child_says(calls(&[
        ("t1", "bash", json!({"command": "touch made-by-child"})),
        ("t2", "bash", json!({"command": "mkdir made-dir"})),
    ]));
    s.child_says_after_parent_request(2, Step::text("tried"));
    s.parent_says(wait_step(&["w1"]));
    s.parent_says(Step::text("done"));
    let mut p = s
        .command()
        .no_session()
        .env("ZI_APPROVALS", "untrusted")
        .args(["--deny", "bash(touch:*)", "--sandbox", "workspace-write"])
        // Under `untrusted` the parent's own delegation calls need approval too.
        .args(["--allow", "spawn_subagent", "--allow", "wait_subagents"])
        .spawn_rpc()
        .await;
    prompt(&mut p, "p1", "delegate").await;
    s.child_requests(1).await;
    let pids = child_pids(p.pid());
    assert_eq!(pids.len(), 1);
    let argv = proc_text(pids[0], "cmdline");
    for flag in [
        "--approvals untrusted",
        "--deny bash(touch:*)",
        "--sandbox workspace-write",
    ] {
        assert!(argv.contains(flag), "{flag} in {argv}");
    }
    p.event("agent_settled").await;
    let child = s.child_requests(2).await;
    let results = child[1].body.to_string();
    // Unattended: the child has no client to ask, so nothing that needs approval runs.
    assert!(
        results.contains("This tool call is denied by the approval rule bash(touch:*)"),
        "{results}"
    );
    assert!(
        results.contains("but no client can approve it in this zi run. It was not run."),
        "{results}"
    );
    assert!(!s.cwd.path.join("made-by-child").exists());
    assert!(!s.cwd.path.join("made-dir").exists());
    assert_eq!(
        tool_json(&p, "wait_subagents")["subagents"][0]["completion"]["text"],
        "tried"
    );
}

#[tokio::test]
async fn a_child_discovers_no_profiles_and_prints_no_profile_warnings() {
    let mock = start_mock().await;
    let agent = agent_with(&mock);
    agent.write("subagents/Bad-Name.md", "---\ndescription: x\n---\nBody.\n");
    let cwd = temp_cwd();
    // The parent reports the bad file ...
    let mut parent = command(&agent, &cwd.path).no_session().spawn_rpc().await;
    parent.close_stdin().await;
    let exited = parent.wait_exit(WAIT).await;
    assert!(
        exited
            .stderr
            .contains("Bad-Name.md: filename must be a bounded lowercase"),
        "{}",
        exited.stderr
    );
    // ... a child, started as the supervisor starts one, says nothing about profiles.
    let mut child = ZiCommand::rpc(ZI, &agent, &cwd.path)
        .no_session()
        .model("mock/child")
        .env("ZI_SUBAGENT_DEPTH", "1")
        .spawn_rpc()
        .await;
    child.close_stdin().await;
    let exited = child.wait_exit(WAIT).await;
    assert_eq!(exited.code, Some(0), "{}", exited.stderr);
    assert!(
        !exited.stderr.contains("subagent profiles"),
        "{}",
        exited.stderr
    );
}
