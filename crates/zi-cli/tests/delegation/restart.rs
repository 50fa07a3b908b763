//! A parent SIGKILLed and continued: undelivered results, lost children, the restore bound.

use super::*;

fn subagent_entries<'a>(entries: &'a [Value], event: &str) -> Vec<&'a Value> {
    entries
        .iter()
        .filter(|e| e["type"] == "subagent" && e["event"] == event)
        .collect()
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
    q.exit_by_eof().await;
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
    q.exit_by_eof().await;

    // Runs 3 and 4 find w1 ended and record nothing.
    for _ in 0..2 {
        let mut r = s.command().arg("-c").spawn_rpc().await;
        let journal = entries(&r).await;
        let lost = subagent_entries(&journal, "lost");
        assert_eq!(lost.len(), 1, "{lost:?}");
        assert_eq!(subagent_entries(&journal, "work_cycle_delivered").len(), 1);
        r.exit_by_eof().await;
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
    let exited = p.exit_by_eof().await;
    let warnings: Vec<&str> = exited
        .stderr
        .lines()
        .filter(|l| l.contains("undelivered subagent completions"))
        .collect();
    assert_eq!(warnings.len(), 1, "{}", exited.stderr);
    assert!(warnings[0].starts_with("Warning: "), "{}", warnings[0]);
}
