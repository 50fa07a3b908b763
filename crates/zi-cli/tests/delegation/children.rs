//! What a child gets: the parent's credentials (and nothing zi writes shows them), messages into its
//! cycle, the parent's approval policy, no profiles.

use super::*;

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

    let exited = p.exit_by_eof().await;
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

    assert_the_message_deliveries(&mut p).await;
}

/// The deliveries' outcomes: into the running cycle, to an unknown target, into an idle child;
/// evidence never carries the text.
async fn assert_the_message_deliveries(p: &mut Harness) {
    let outcomes = outcomes(p).await;
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
    p.prompt("p1", "delegate").await;
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
    let exited = child.exit_by_eof().await;
    assert!(
        !exited.stderr.contains("subagent profiles"),
        "{}",
        exited.stderr
    );
}
