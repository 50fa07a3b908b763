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

mod children;
mod delivery;
mod failures;
mod restart;

const ZI: &str = env!("CARGO_BIN_EXE_zi");
const WAIT: Duration = Duration::from_secs(60);
const KEY: &str = "test-key-abc";

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

/// Prompts and waits for this run's `agent_settled`.
async fn run(p: &mut Harness, id: &str, text: &str) {
    let after = p.last_sequence();
    p.prompt(id, text).await;
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
