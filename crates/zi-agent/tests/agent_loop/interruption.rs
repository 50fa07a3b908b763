//! Interruption during a tool, before the first provider call and while streaming, and a tool
//! that panics (docs/architecture.md#the-run).

use tokio::task::JoinHandle;
use zi_agent::errors::SessionError;

use super::*;

/// Starts an abort in the background and returns once the session reports `aborting` while the
/// abort has not returned yet.
async fn abort_in_background(h: &Harness) -> JoinHandle<Result<(), SessionError>> {
    let session = h.session.clone();
    let abort = tokio::spawn(async move { session.abort().await });
    let deadline = tokio::time::Instant::now() + WAIT;
    while h.session.state().activity != Activity::Aborting {
        assert!(
            !abort.is_finished(),
            "abort returned before the run settled"
        );
        assert!(tokio::time::Instant::now() < deadline, "never saw aborting");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    abort
}

/// Waits (at most [`WAIT`]) for a background abort to return, and it must succeed.
async fn join_abort(abort: JoinHandle<Result<(), SessionError>>) {
    tokio::time::timeout(WAIT, abort)
        .await
        .expect("abort returns")
        .expect("abort task")
        .expect("abort succeeds");
}

// ---------------------------------------------------------------------------------------------
// 6. Interruption
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn abort_during_a_tool_cancels_it_and_settles_once() {
    let (tool, started, observed) = cancellable_tool("block", Duration::ZERO);
    let h = harness(vec![tool]).await;
    h.mock.push(Step::tool_call("b_1", "block", json!({})));
    h.start("block please");
    started.wait().await;
    assert_eq!(h.session.state().activity, Activity::Running);
    h.queue(Delivery::FollowUp, "kept after abort");

    abort(&h.session).await;
    assert!(
        observed.load(Ordering::SeqCst),
        "the tool saw its cancellation"
    );
    assert_eq!(h.session.state().activity, Activity::Idle);
    assert!(!h.session.is_streaming());
    assert_eq!(h.count("agent_start"), 1);
    assert_eq!(h.count("agent_end"), 1);
    assert_eq!(h.count("agent_settled"), 1);
    assert_eq!(h.labels().last().map(String::as_str), Some("agent_settled"));
    // Queued user input survives the interruption and does not start a run by itself.
    let queued = h.session.state().queued_inputs;
    assert_eq!(queued.follow_up.len(), 1);
    assert_eq!(queued.follow_up[0].text, "kept after abort");
    assert_eq!(h.mock.requests().len(), 1);
    h.session.wait_idle().await;
    assert!(!h.session.is_streaming());

    // Every tool call of the journal has its result, so the conversation can continue.
    let results = h.tool_results();
    assert_eq!(results.len(), 1);
    assert_eq!(results[0].tool_call_id, "b_1");
    h.mock.push(Step::text("again"));
    h.mock.push(Step::text("followed up"));
    h.run("continue").await;
    assert_eq!(h.last_assistant().text(), "followed up");
    assert_eq!(h.count("agent_settled"), 2);
    let bodies = h.request_bodies();
    assert_eq!(bodies.len(), 3);
    assert_eq!(
        wire_user_texts(&bodies[2]),
        ["block please", "continue", "kept after abort"]
    );
    let last = &bodies[1];
    assert!(
        wire_messages(last)
            .iter()
            .any(|m| m["role"] == "tool" && m["tool_call_id"] == "b_1")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn abort_waits_for_the_tool_and_input_is_refused_while_aborting() {
    // Cleaning up takes a moment after the cancellation.
    let (tool, started, finished) = cancellable_tool("linger", Duration::from_millis(300));
    let h = harness(vec![tool]).await;
    h.mock.push(Step::tool_call("l_1", "linger", json!({})));
    h.start("linger");
    started.wait().await;
    let abort = abort_in_background(&h).await;
    assert_eq!(
        h.session
            .prompt(Delivery::Direct, "now".into())
            .err()
            .map(|e| e.to_string())
            .as_deref(),
        Some("Cannot prompt while the agent is aborting")
    );
    assert_eq!(
        h.session
            .prompt(Delivery::Steer, "now".into())
            .err()
            .map(|e| e.to_string())
            .as_deref(),
        Some("Cannot queue input while the agent is aborting")
    );
    join_abort(abort).await;
    assert!(
        finished.load(Ordering::SeqCst),
        "abort returns after the tool settled"
    );
    assert_eq!(h.session.state().activity, Activity::Idle);
    assert_eq!(h.count("agent_settled"), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn abort_before_the_first_provider_call_never_reaches_the_provider() {
    let h = harness(Vec::new()).await;
    h.mock.push(Step::text("should not be requested"));
    let admission = h
        .session
        .prompt(Delivery::Direct, "too late".into())
        .expect("prompt admitted");
    assert!(admission.starter.is_some());
    let abort = abort_in_background(&h).await;
    drop(admission);
    join_abort(abort).await;
    assert!(
        h.mock.requests().is_empty(),
        "no provider request after the abort"
    );
    assert_eq!(h.mock.pending_steps(), 1);
    assert_eq!(h.session.state().activity, Activity::Idle);
    assert_eq!(h.count("agent_start"), 1);
    assert_eq!(h.count("agent_end"), 1);
    assert_eq!(h.count("agent_settled"), 1);
    assert_eq!(h.labels().last().map(String::as_str), Some("agent_settled"));
    if let Some(assistant) = h.session.last_assistant() {
        assert_eq!(assistant.stop_reason, StopReason::Aborted);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn abort_during_streaming_commits_an_aborted_assistant() {
    let h = harness(Vec::new()).await;
    h.mock.push(Step::Hang(vec!["partial".into()]));
    h.start("hang");
    h.wait_for_event("the first text delta", |e| {
        matches!(
            e,
            AgentSessionEvent::MessageUpdate {
                assistant_message_event: AssistantMessageEvent::TextDelta { .. }
            }
        )
    })
    .await;
    assert!(h.session.state().streaming_message.is_some());

    abort(&h.session).await;
    assert_eq!(h.session.state().activity, Activity::Idle);
    assert!(h.session.state().streaming_message.is_none());
    let assistant = h.last_assistant();
    assert_eq!(assistant.stop_reason, StopReason::Aborted);
    assert_eq!(
        assistant.error_message.as_deref(),
        Some("Request was aborted")
    );
    assert_eq!(
        h.mock.wait_for_disconnects(1, WAIT).await,
        1,
        "the HTTP request is dropped"
    );

    let labels = h.labels();
    assert_eq!(
        &labels[labels.len() - 5..],
        [
            "entry_appended:message",
            "message_end:assistant",
            "turn_end",
            "agent_end",
            "agent_settled"
        ]
    );
    assert_eq!(h.count("agent_settled"), 1);
    let events = h.events();
    let turn_end = events
        .iter()
        .rev()
        .find_map(|e| match e {
            AgentSessionEvent::TurnEnd {
                message,
                tool_results,
            } => Some((message.clone(), tool_results.clone())),
            _ => None,
        })
        .expect("turn_end");
    assert_eq!(
        turn_end.0.as_assistant().map(|a| a.stop_reason),
        Some(StopReason::Aborted)
    );
    assert!(turn_end.1.is_empty());
    let page = h.messages();
    assert_eq!(page.len(), 2);
    assert_eq!(page[1].as_assistant(), Some(&assistant));
}

// ---------------------------------------------------------------------------------------------
// 7. Panicking tool
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn panicking_tool_becomes_an_error_result_and_the_session_recovers() {
    let (boom, boom_calls) = test_tool("boom", any_args(), ExecutionMode::Parallel, |_call| {
        async move { panic!("tool exploded on purpose") }.boxed()
    });
    let h = harness(vec![boom]).await;
    h.mock.push(Step::tool_call("x_1", "boom", json!({})));
    h.mock.push(Step::text("recovered"));
    h.run("explode").await;

    assert_eq!(boom_calls.load(Ordering::SeqCst), 1);
    let results = h.tool_results();
    assert_eq!(results.len(), 1);
    assert!(results[0].is_error);
    assert_eq!(results[0].tool_call_id, "x_1");
    assert!(!result_text(&results[0]).is_empty());
    assert!(h.events().iter().any(|e| matches!(
        e,
        AgentSessionEvent::ToolExecutionEnd { tool_call_id, is_error: true, .. } if tool_call_id == "x_1"
    )));
    assert_eq!(h.last_assistant().text(), "recovered");
    assert_eq!(h.session.state().activity, Activity::Idle);

    h.mock.push(Step::text("fine"));
    h.run("again").await;
    let last = h.last_assistant();
    assert_eq!(last.text(), "fine");
    assert_eq!(last.stop_reason, StopReason::Stop);
    assert_eq!(h.count("agent_settled"), 2);
}
