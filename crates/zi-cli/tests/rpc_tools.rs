//! Black-box tests of the built-in tools over Zi RPC v1: background task outcomes and
//! `session.get_outcomes` (docs/rpc.md#operation-outcomes), work plans (docs/tools.md#update_plan),
//! bash interruption with grandchildren and output streaming (docs/tools.md#bash), and the system
//! prompt with context files, skills and prompt templates (docs/configuration.md#system-prompt).

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use zi_test_support::dirs::{AgentDir, TempCwd, temp_cwd};
use zi_test_support::harness::Harness;
use zi_test_support::mock_llm::start_mock;
use zi_test_support::mock_llm::{MockLlm, Step};
use zi_test_support::process::pgrep;
use zi_test_support::zi_command::ZiCommand;

const ZI: &str = env!("CARGO_BIN_EXE_zi");
const WAIT: Duration = Duration::from_secs(30);
const KEY: &str = "test-key-abc";

/// The mock LLM, an agent directory serving its `m1`, and a cwd.
async fn scene() -> (MockLlm, AgentDir, TempCwd) {
    let mock = start_mock().await;
    let agent = AgentDir::with_m1(&mock, KEY);
    (mock, agent, temp_cwd())
}

/// zi in rpc mode on `mock/m1`.
async fn spawn(agent: &AgentDir, cwd: &TempCwd) -> Harness {
    ZiCommand::rpc_m1(ZI, agent, &cwd.path)
        .timeout(WAIT)
        .spawn_rpc()
        .await
}

#[tokio::test]
async fn background_outcomes_match_live_events_and_page() {
    let (mock, agent, cwd) = scene().await;
    mock.push(Step::tool_calls(&[
        (
            "b1",
            "bash",
            json!({"command": "echo one", "background": true}),
        ),
        (
            "b2",
            "bash",
            json!({"command": "sleep 0.2; exit 3", "background": true}),
        ),
    ]));
    mock.push(Step::text("started"));
    let mut p = spawn(&agent, &cwd).await;
    p.prompt_and_settle("p1", "run two tasks").await;
    let deadline = Instant::now() + WAIT;
    while p
        .events()
        .iter()
        .filter(|e| e["type"] == "operation_outcome")
        .count()
        < 2
    {
        assert!(Instant::now() < deadline, "two outcomes arrive");
        let _ = p.next_frame_within(Duration::from_millis(200)).await;
    }
    let all = p.events();
    let live: Vec<Value> = all
        .iter()
        .filter(|e| e["type"] == "operation_outcome")
        .map(|e| e["outcome"].clone())
        .collect();
    assert_eq!(live.len(), 2);
    let appended: Vec<&Value> = all
        .iter()
        .filter(|e| e["type"] == "entry_appended" && e["entry"]["type"] == "operation_outcome")
        .collect();
    assert_eq!(appended.len(), 2);
    // entry_appended immediately precedes each operation_outcome with the same object.
    for (index, event) in all.iter().enumerate() {
        if event["type"] == "operation_outcome" {
            assert_eq!(all[index - 1]["type"], "entry_appended");
            assert_eq!(all[index - 1]["entry"], event["outcome"]);
        }
    }
    let by_task = |id: &str| {
        live.iter()
            .find(|o| o["evidence"]["taskId"] == id)
            .cloned()
            .unwrap_or_else(|| panic!("outcome of {id}"))
    };
    let first = by_task("task-1");
    let keys: Vec<&str> = first
        .as_object()
        .map(|o| o.keys().map(String::as_str).collect())
        .unwrap_or_default();
    assert_eq!(
        keys,
        [
            "type",
            "operationId",
            "capability",
            "operation",
            "result",
            "durationMs",
            "evidence",
            "id",
            "parentId",
            "timestamp"
        ]
    );
    assert_eq!(first["operationId"], "shell/background_task/task-1");
    assert_eq!(first["capability"], "shell");
    assert_eq!(first["operation"], "background_task");
    assert_eq!(first["result"], "succeeded");
    assert_eq!(
        first["evidence"],
        json!({"taskId": "task-1", "origin": "requested", "outputBytes": 4, "exitCode": 0})
    );
    let second = by_task("task-2");
    assert_eq!(second["result"], "failed");
    assert_eq!(
        second["evidence"],
        json!({"taskId": "task-2", "origin": "requested", "outputBytes": 0, "errorCode": "exit_nonzero", "exitCode": 3})
    );
    assert!(
        all.iter()
            .any(|e| e["type"] == "shell_task_changed" && e["taskId"] == "task-1")
    );

    outcomes_page_as_they_were_live(&mut p, &live).await;
}

/// `session.get_outcomes` pages the outcomes, deep-equal to the live events in journal order; they
/// are not messages.
async fn outcomes_page_as_they_were_live(p: &mut Harness, live: &[Value]) {
    let page = p
        .request_ok(
            "o1",
            "session.get_outcomes",
            Some(json!({"start": 0, "limit": 1})),
        )
        .await;
    assert_eq!(page["start"], 0);
    assert_eq!(page["total"], 2);
    assert_eq!(page["nextStart"], 1);
    let rest = p
        .request_ok("o2", "session.get_outcomes", Some(json!({"start": 1})))
        .await;
    assert_eq!(rest["start"], 1);
    assert_eq!(rest["total"], 2);
    assert_eq!(rest["nextStart"], Value::Null);
    let mut paged: Vec<Value> = page["outcomes"].as_array().cloned().unwrap_or_default();
    paged.extend(rest["outcomes"].as_array().cloned().unwrap_or_default());
    assert_eq!(
        paged, live,
        "page items deep-equal the live events, in journal order"
    );
    // Outcomes are not messages.
    let messages = p
        .request_ok("m1", "session.get_messages", Some(json!({})))
        .await;
    assert!(
        messages["messages"]
            .as_array()
            .is_some_and(|m| m.iter().all(|m| m["role"] != "operation_outcome"))
    );
}

#[tokio::test]
async fn work_plan_events_and_state() {
    let (mock, agent, cwd) = scene().await;
    mock.push(Step::tool_call(
        "u1",
        "update_plan",
        json!({"steps": [{"text": "Verify RPC", "status": "in_progress"}]}),
    ));
    mock.push(Step::text("planned"));
    let mut p = spawn(&agent, &cwd).await;
    let ready_plan = p.frames()[0]["state"]["workPlan"].clone();
    assert_eq!(ready_plan, json!({"revision": 0, "steps": []}));
    p.prompt_and_settle("p1", "plan it").await;
    let all = p.events();
    let filtered: Vec<&Value> = all
        .iter()
        .filter(|e| {
            e["type"] == "work_plan_changed"
                || (e["type"] == "entry_appended" && e["entry"]["type"] == "work_plan")
        })
        .collect();
    let types: Vec<&Value> = filtered.iter().map(|e| &e["type"]).collect();
    assert_eq!(
        types,
        [&json!("entry_appended"), &json!("work_plan_changed")]
    );
    let plan = json!({"revision": 1, "steps": [{"text": "Verify RPC", "status": "in_progress"}]});
    assert_eq!(filtered[1]["plan"], plan);
    assert_eq!(filtered[0]["entry"]["revision"], 1);
    let state = p.request_ok("s1", "session.get_state", None).await;
    assert_eq!(state["workPlan"], plan);
    let result = all
        .iter()
        .find(|e| e["type"] == "tool_execution_end")
        .cloned()
        .unwrap_or_default();
    assert_eq!(
        result["result"]["content"][0]["text"],
        "Plan updated to revision 1."
    );
    assert_eq!(result["isError"], false);
}

#[tokio::test]
async fn interrupt_kills_a_running_command_and_its_grandchildren() {
    let (mock, agent, cwd) = scene().await;
    let marker = format!("sleep 35{}", std::process::id() % 1000);
    mock.push(Step::tool_call(
        "k1",
        "bash",
        json!({"command": format!("( {marker}; echo never ) & {marker}; wait")}),
    ));
    let mut p = spawn(&agent, &cwd).await;
    p.prompt("p1", "run it").await;
    p.event("tool_execution_start").await;
    let deadline = Instant::now() + WAIT;
    while pgrep("-f", &marker).len() < 2 {
        assert!(Instant::now() < deadline, "the sleeps start");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let interrupted = p.request_ok("i1", "session.interrupt", None).await;
    assert_eq!(interrupted, json!({}));
    let end = p
        .events()
        .into_iter()
        .find(|e| e["type"] == "tool_execution_end")
        .unwrap_or_default();
    assert_eq!(end["isError"], true);
    assert_eq!(end["result"]["details"]["status"], "aborted");
    // Nothing is left running once the interrupt has settled.
    assert_eq!(pgrep("-f", &marker), Vec::<u32>::new());
}

#[tokio::test]
async fn system_prompt_has_context_files_skills_and_templates() {
    let mock = start_mock().await;
    let cwd = temp_cwd();
    let agent = AgentDir::with_m1(&mock, KEY).trust(&[&cwd.path]);
    agent.write("AGENTS.md", "Global rule.\n");
    agent.write("APPEND_SYSTEM.md", "Appended rule.");
    agent.write(
        "prompts/review.md",
        "---\ndescription: Review a file\n---\nReview $1 for ${2:-bugs}.",
    );
    std::fs::write(cwd.path.join("AGENTS.md"), "Project rule.\n").unwrap_or_else(|e| panic!("{e}"));
    let skill_dir = cwd.path.join(".zi/skills/deploy");
    std::fs::create_dir_all(&skill_dir).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(
        skill_dir.join("SKILL.md"),
        "---\ndescription: Deploy the app\n---\nRun make deploy.\n",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    // Global skills: one via a settings path, and a "deploy" that the project's one shadows.
    agent.write("settings.json", r#"{"skills": ["extra-skills"]}"#);
    agent.write(
        "extra-skills/lint/SKILL.md",
        "---\nname: lint\ndescription: Lint it\n---\nRun the linter.\n",
    );
    agent.write(
        "skills/deploy/SKILL.md",
        "---\ndescription: Global deploy\n---\nShadowed.\n",
    );
    agent.write(
        "skills/secret/SKILL.md",
        "---\ndescription: Hidden\ndisable-model-invocation: true\n---\nNot listed.\n",
    );
    agent.write(
        "skills/Bad_Name/SKILL.md",
        "---\ndescription: invalid\n---\n",
    );
    mock.push(Step::text("ok"));
    mock.push(Step::text("ok again"));
    let mut p = spawn(&agent, &cwd).await;
    p.prompt_and_settle("p1", "/skill:deploy to prod").await;
    let requests = mock.wait_for_requests(1, WAIT).await;
    let body = &requests[0].body;
    let system = body["messages"][0]["content"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let (head, tail) = system
        .split_once("\n\nCurrent date: ")
        .unwrap_or_else(|| panic!("date footer in {system}"));
    assert!(tail.ends_with(&format!(
        "\nCurrent working directory: {}",
        cwd.path.display()
    )));
    let skill_path = skill_dir.join("SKILL.md");
    let expected_tail = format!(
        "\n\nAppended rule.\n\n<project_context>\n<project_instructions path=\"{}\">\nGlobal rule.\n</project_instructions>\n<project_instructions path=\"{}\">\nProject rule.\n</project_instructions>\n</project_context>\n\nThe following skills provide specialized instructions for specific tasks.\nUse the read tool to load a skill's file when the task matches its description.\nWhen a skill file references a relative path, resolve it against the skill's directory.\n\n<available_skills>\n  <skill>\n    <name>deploy</name>\n    <description>Deploy the app</description>\n    <location>{}</location>\n  </skill>\n  <skill>\n    <name>lint</name>\n    <description>Lint it</description>\n    <location>{}</location>\n  </skill>\n</available_skills>",
        agent.path().join("AGENTS.md").display(),
        cwd.path.join("AGENTS.md").display(),
        skill_path.display(),
        agent
            .path()
            .canonicalize()
            .unwrap_or_default()
            .join("extra-skills/lint/SKILL.md")
            .display()
    );
    assert!(
        head.starts_with("You are an expert coding assistant operating inside Zi."),
        "{head}"
    );
    assert!(head.ends_with(&expected_tail), "{head}");
    assert_the_tools_listed_and_offered(head, body);
    // The skill was expanded into the user message.
    let user = body["messages"][1].to_string();
    assert!(
        user.contains("<skill name=\\\"deploy\\\"")
            && user.contains("Run make deploy.")
            && user.contains("to prod"),
        "{user}"
    );

    // Templates expand for queued input, and the queue shows the expanded text.
    let queued = p
        .request(
            "q1",
            "session.prompt",
            Some(json!({"delivery": "follow_up", "text": "/review main.rs"})),
        )
        .await;
    assert_eq!(queued["ok"], true, "{queued}");
    let state = p.request_ok("s1", "session.get_state", None).await;
    assert_eq!(
        state["queuedInputs"]["followUp"][0]["text"],
        "Review main.rs for bugs."
    );
}

/// Every built-in tool is listed in the system prompt and offered, in order.
fn assert_the_tools_listed_and_offered(head: &str, body: &Value) {
    for tool in [
        "read",
        "bash",
        "edit",
        "write",
        "task_output",
        "kill_task",
        "update_plan",
    ] {
        assert!(head.contains(&format!("\n- {tool}: ")), "{tool} listed");
    }
    let tools: Vec<&str> = body["tools"]
        .as_array()
        .map(|t| {
            t.iter()
                .filter_map(|t| t["function"]["name"].as_str())
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(
        tools,
        [
            "read",
            "bash",
            "edit",
            "write",
            "task_output",
            "kill_task",
            "update_plan"
        ]
    );
}

#[tokio::test]
async fn untrusted_projects_contribute_context_files_but_no_zi_files() {
    let (mock, agent, cwd) = scene().await;
    std::fs::write(cwd.path.join("AGENTS.md"), "Project rule.\n").unwrap_or_else(|e| panic!("{e}"));
    std::fs::create_dir_all(cwd.path.join(".zi")).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(cwd.path.join(".zi/SYSTEM.md"), "Project system.")
        .unwrap_or_else(|e| panic!("{e}"));
    agent.write("SYSTEM.md", "Global system.");
    mock.push(Step::text("ok"));
    let mut p = spawn(&agent, &cwd).await;
    p.prompt_and_settle("p1", "hi").await;
    let requests = mock.wait_for_requests(1, WAIT).await;
    let system = requests[0].body["messages"][0]["content"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    // `.zi/` configuration needs trust; context files do not (docs/configuration.md#trustjson).
    assert!(system.starts_with("Global system.\n\n"), "{system}");
    assert!(!system.contains("Project system."), "{system}");
    assert!(
        system.contains(&format!(
            "<project_instructions path=\"{}/AGENTS.md\">\nProject rule.\n</project_instructions>",
            cwd.path.display()
        )),
        "{system}"
    );
}

#[tokio::test]
async fn stdin_eof_kills_background_tasks() {
    let (mock, agent, cwd) = scene().await;
    let marker = format!("sleep 36{}", std::process::id() % 1000);
    mock.push(Step::tool_call(
        "b1",
        "bash",
        json!({"command": format!("( {marker} ) & {marker}"), "background": true}),
    ));
    mock.push(Step::text("started"));
    let sessions = temp_cwd();
    let mut p = ZiCommand::rpc(ZI, &agent, &cwd.path)
        .model("mock/m1")
        .arg("--session-dir")
        .arg(&sessions.path)
        .timeout(WAIT)
        .spawn_rpc()
        .await;
    p.prompt_and_settle("p1", "start it").await;
    let deadline = Instant::now() + WAIT;
    while pgrep("-f", &marker).len() < 2 {
        assert!(Instant::now() < deadline, "the task starts");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    p.close_stdin().await;
    let exited = p.wait_exit(WAIT).await;
    assert_eq!(exited.code, Some(0), "{}", p.stderr_text());
    assert_eq!(pgrep("-f", &marker), Vec::<u32>::new());
    // The task's outcome is in the journal (events stop at EOF,
    // docs/rpc.md#shutdown-eof-signals-and-exit-codes).
    let journal = std::fs::read_dir(&sessions.path)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .unwrap_or_else(|| panic!("a journal file"));
    let text = std::fs::read_to_string(&journal).unwrap_or_default();
    let outcome: Value = text
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|e| e["type"] == "operation_outcome")
        .unwrap_or_else(|| panic!("an outcome entry in {text}"));
    assert_eq!(outcome["result"], "cancelled");
    assert_eq!(
        outcome["evidence"],
        json!({"taskId": "task-1", "origin": "requested", "outputBytes": 0, "cancellationCode": "disposed"})
    );
    assert!(
        !p.events().iter().any(|e| e["type"] == "operation_outcome"),
        "no session events after EOF"
    );
}

/// Output a command prints and then goes quiet after is reported while the command still runs
/// (docs/tools.md#bash): the update carrying "first" comes before the command, after its sleep,
/// creates the marker file, and before the call's end.
#[tokio::test]
async fn bash_reports_output_that_is_followed_by_silence_while_the_command_runs() {
    let (mock, agent, cwd) = scene().await;
    let marker = cwd.path.join("slept");
    mock.push(Step::tool_call(
        "s1",
        "bash",
        json!({"command": "printf 'first\\n'; sleep 3; : > slept; printf 'second\\n'"}),
    ));
    mock.push(Step::text("done"));
    let mut p = spawn(&agent, &cwd).await;
    p.prompt("p1", "run it").await;
    let update = p
        .wait_for("a tool_execution_update with \"first\"", |f| {
            f["type"] == "session_event"
                && f["event"]["type"] == "tool_execution_update"
                && f["event"]["partialResult"]["content"][0]["text"]
                    .as_str()
                    .is_some_and(|text| text.contains("first"))
        })
        .await;
    assert!(
        !marker.exists(),
        "the output was reported only after the command's sleep: {update}"
    );
    let text = update["event"]["partialResult"]["content"][0]["text"].clone();
    assert!(!text.to_string().contains("second"), "{update}");
    p.event("agent_settled").await;
    let sequence_of = |ty: &str| {
        p.frames()
            .iter()
            .find(|f| f["type"] == "session_event" && f["event"]["type"] == ty)
            .and_then(|f| f["sequence"].as_u64())
            .unwrap_or_else(|| panic!("a {ty} event"))
    };
    assert!(update["sequence"].as_u64() < Some(sequence_of("tool_execution_end")));
    assert!(marker.exists(), "the command ran to its end");
}
