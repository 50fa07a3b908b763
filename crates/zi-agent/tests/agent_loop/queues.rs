//! Steering and follow-up: when queued input reaches the model, and the one-at-a-time and all
//! modes (docs/rpc.md#sessionprompt).

use super::*;

// ---------------------------------------------------------------------------------------------
// 8. Steering and follow-up
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn steering_queued_before_the_run_precedes_the_first_provider_call() {
    let h = harness(Vec::new()).await;
    h.queue(Delivery::Steer, "steer first");
    assert!(
        !h.session.is_streaming(),
        "queueing while idle does not wake the session"
    );
    assert_eq!(h.count("agent_start"), 0);
    let state = h.session.state();
    assert_eq!(state.queued_inputs.steering.len(), 1);
    assert_eq!(state.queued_inputs.steering[0].text, "steer first");
    assert_eq!(
        state.queued_inputs.steering[0].delivery,
        QueuedDelivery::Steer
    );

    h.mock.push(Step::text("ok"));
    h.run("main").await;
    let bodies = h.request_bodies();
    assert_eq!(bodies.len(), 1, "one provider call");
    assert_eq!(wire_user_texts(&bodies[0]), ["main", "steer first"]);
    assert!(h.session.state().queued_inputs.steering.is_empty());

    let events = h.events();
    let removal = events
        .iter()
        .rposition(
            |e| matches!(e, AgentSessionEvent::QueueUpdate { steering, .. } if steering.is_empty()),
        )
        .expect("queue_update removing the steer");
    let delivered = events
        .iter()
        .position(|e| is_user_start(e, "steer first"))
        .expect("steer delivered");
    assert!(removal < delivered);
    let assistant_start = events
        .iter()
        .position(|e| {
            matches!(
                e,
                AgentSessionEvent::MessageStart {
                    message: AgentMessage::Assistant(_)
                }
            )
        })
        .expect("assistant");
    assert!(delivered < assistant_start);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn steering_during_a_run_arrives_at_the_next_turn_and_follow_up_when_it_would_stop() {
    let (gate, gate_ctl) = gate_tool();
    let h = harness(vec![gate]).await;
    let then = vec![Step::text("after steer"), Step::text("after follow-up")];
    h.start_at_the_gate(&gate_ctl, then).await;

    // A direct prompt is refused while running.
    let refused = h.session.prompt(Delivery::Direct, "nope".into());
    assert_eq!(
        refused.err().map(|e| e.to_string()).as_deref(),
        Some("streamingBehavior is required while the agent is running")
    );
    h.queue(Delivery::Steer, "change course");
    h.queue(Delivery::FollowUp, "and then this");
    let queued = h.session.state().queued_inputs;
    assert_eq!(queued.steering.len(), 1);
    assert_eq!(queued.follow_up.len(), 1);
    assert_eq!(queued.follow_up[0].delivery, QueuedDelivery::FollowUp);
    gate_ctl.open();
    h.idle().await;

    assert_steer_then_follow_up_on_the_wire(&h.request_bodies(), "change course", "and then this");
    assert!(h.session.state().queued_inputs.steering.is_empty());
    assert!(h.session.state().queued_inputs.follow_up.is_empty());
    assert_steer_then_follow_up_events(&h.events());
    // One run for all of it.
    assert_eq!(h.count("agent_start"), 1);
    assert_eq!(h.count("agent_end"), 1);
    assert_eq!(h.count("agent_settled"), 1);
    assert_eq!(h.last_assistant().text(), "after follow-up");
}

/// Around the steer: turn_end → queue_update → turn_start → message_start(user); the follow-up
/// after the steered turn ended, with its queue_update first.
fn assert_steer_then_follow_up_events(events: &[AgentSessionEvent]) {
    let steer_at = events
        .iter()
        .position(|e| is_user_start(e, "change course"))
        .expect("steer delivered");
    let first_turn_end = events
        .iter()
        .position(|e| matches!(e, AgentSessionEvent::TurnEnd { .. }))
        .expect("turn_end");
    let labels: Vec<String> = events[first_turn_end..=steer_at]
        .iter()
        .map(label)
        .collect();
    assert_eq!(
        labels,
        [
            "turn_end",
            "queue_update",
            "turn_start",
            "message_start:user"
        ]
    );
    match &events[first_turn_end + 1] {
        AgentSessionEvent::QueueUpdate {
            steering,
            follow_up,
        } => {
            assert!(steering.is_empty());
            assert_eq!(follow_up.len(), 1, "the follow-up stays queued");
        }
        other => panic!("expected queue_update, got {other:?}"),
    }
    // The follow-up arrives after the steered turn ended, with its queue_update first.
    let follow_at = events
        .iter()
        .position(|e| is_user_start(e, "and then this"))
        .expect("follow-up delivered");
    let steered_reply_end = position_from(events, steer_at, |e| {
        matches!(e, AgentSessionEvent::TurnEnd { message, .. } if message.as_assistant().map(AssistantMessage::text).as_deref() == Some("after steer"))
    })
    .expect("turn_end of the steered reply");
    assert!(steered_reply_end < follow_at);
    let removal = events[..follow_at]
        .iter()
        .rposition(|e| matches!(e, AgentSessionEvent::QueueUpdate { follow_up, .. } if follow_up.is_empty()))
        .expect("queue_update removing the follow-up");
    assert!(steered_reply_end < removal);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn steering_modes_take_one_or_all_queued_steers() {
    for (mode, expected_requests) in [(None, 2), (Some("all"), 1)] {
        let h = harness_with(Options {
            global_settings: mode.map(|m| json!({"steeringMode": m})),
            ..Options::default()
        })
        .await;
        h.queue(Delivery::Steer, "s1");
        h.queue(Delivery::Steer, "s2");
        h.mock.push(Step::text("r1"));
        h.mock.push(Step::text("r2"));
        h.run("main").await;
        let bodies = h.request_bodies();
        assert_eq!(bodies.len(), expected_requests, "steering mode {mode:?}");
        if mode.is_none() {
            assert_eq!(h.session.state().steering_mode, QueueMode::OneAtATime);
            assert_eq!(wire_user_texts(&bodies[0]), ["main", "s1"]);
            assert_eq!(wire_user_texts(&bodies[1]), ["main", "s1", "s2"]);
        } else {
            assert_eq!(h.session.state().steering_mode, QueueMode::All);
            assert_eq!(wire_user_texts(&bodies[0]), ["main", "s1", "s2"]);
        }
        assert!(h.session.state().queued_inputs.steering.is_empty());
        assert_eq!(h.count("agent_settled"), 1);
    }
}

async fn follow_up_mode_run(mode: Option<&str>) -> Harness {
    let h = harness_with(Options {
        global_settings: mode.map(|m| json!({"followUpMode": m})),
        ..Options::default()
    })
    .await;
    h.queue(Delivery::FollowUp, "f1");
    h.queue(Delivery::FollowUp, "f2");
    assert!(!h.session.is_streaming());
    h.mock.push(Step::text("r1"));
    h.mock.push(Step::text("r2"));
    h.mock.push(Step::text("r3"));
    h.run("main").await;
    h
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn follow_up_mode_one_at_a_time_takes_one_per_turn() {
    let h = follow_up_mode_run(None).await;
    assert_eq!(h.session.state().follow_up_mode, QueueMode::OneAtATime);
    let bodies = h.request_bodies();
    assert_eq!(bodies.len(), 3);
    assert_eq!(wire_user_texts(&bodies[0]), ["main"]);
    assert_eq!(wire_user_texts(&bodies[1]), ["main", "f1"]);
    assert_eq!(wire_user_texts(&bodies[2]), ["main", "f1", "f2"]);
    assert_eq!(h.count("agent_settled"), 1);
    assert_eq!(h.count("turn_start"), 3);
    assert!(h.session.state().queued_inputs.follow_up.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn follow_up_mode_all_takes_the_whole_queue() {
    let h = follow_up_mode_run(Some("all")).await;
    assert_eq!(h.session.state().follow_up_mode, QueueMode::All);
    let bodies = h.request_bodies();
    assert_eq!(bodies.len(), 2, "both follow-ups in one turn");
    assert_eq!(wire_user_texts(&bodies[0]), ["main"]);
    assert_eq!(wire_user_texts(&bodies[1]), ["main", "f1", "f2"]);
    assert_eq!(h.mock.pending_steps(), 1);
    assert_eq!(h.count("agent_settled"), 1);
    assert_eq!(h.count("turn_start"), 2);
    // One queue_update removes both, before either is delivered.
    let events = h.events();
    let f1 = events
        .iter()
        .position(|e| is_user_start(e, "f1"))
        .expect("f1");
    let f2 = events
        .iter()
        .position(|e| is_user_start(e, "f2"))
        .expect("f2");
    assert!(f1 < f2);
    match &events[f1 - 1] {
        AgentSessionEvent::TurnStart => {}
        other => panic!("expected turn_start before f1, got {other:?}"),
    }
    match &events[f1 - 2] {
        AgentSessionEvent::QueueUpdate { follow_up, .. } => assert!(follow_up.is_empty()),
        other => panic!("expected queue_update, got {other:?}"),
    }
}
