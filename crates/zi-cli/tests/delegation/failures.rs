//! Interrupt, close, timeouts and crashes of children, and what their processes leave behind.

use super::*;

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
    p.prompt("p1", "go").await;
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
    p.exit_by_eof().await;
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
