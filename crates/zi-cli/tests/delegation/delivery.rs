//! Spawn, wait and delivery of results; the tools and the capacity of live children.

use super::*;

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
