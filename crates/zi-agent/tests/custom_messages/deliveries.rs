//! Custom-message deliveries: admission per state, triggered turns, steering and follow-up, the
//! queue bound and abort (docs/extensions.md#state-and-messages).

use super::*;

// 3. Deliveries (docs/extensions.md#state-and-messages)
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deliveries_are_admitted_only_in_their_states() {
    let (h, gate) = gated_harness().await;

    // Idle: steer and follow-up need an active run.
    for delivery in [CustomDelivery::Steer, CustomDelivery::FollowUp] {
        let error = refused(
            &h.session,
            custom_message("example.note", "x", true),
            delivery,
        );
        assert_eq!(error, CUSTOM_QUEUE_WHILE_IDLE, "{delivery:?}");
    }
    // Invalid messages are refused in any state.
    let error = refused(
        &h.session,
        custom_message("Bad Type", "x", true),
        CustomDelivery::Append,
    );
    assert!(!error.is_empty());
    let oversized = custom_message("example.big", &"z".repeat(1024 * 1024 + 1), true);
    refused(&h.session, oversized, CustomDelivery::Append);
    assert!(h.events().is_empty(), "nothing committed: {:?}", h.labels());

    // Running: append and trigger_turn are idle-only.
    h.start_at_the_gate(&gate, vec![Step::text("done")]).await;
    for delivery in [CustomDelivery::Append, CustomDelivery::TriggerTurn] {
        let error = refused(
            &h.session,
            custom_message("example.note", "x", true),
            delivery,
        );
        assert_eq!(error, CUSTOM_MESSAGE_WHILE_RUNNING, "{delivery:?}");
    }
    let oversized = custom_message("example.big", &"z".repeat(1024 * 1024 + 1), true);
    refused(&h.session, oversized, CustomDelivery::Steer);
    gate.open();
    idle(&h.session).await;
    assert!(
        !appended(&h.events())
            .iter()
            .any(|e| e.data.type_name() == "custom_message"),
        "a refused custom message was committed"
    );
    assert_eq!(wire_user_texts(&h.request_bodies()[1]), ["go"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trigger_turn_while_idle_runs_without_a_user_prompt() {
    let h = harness().await;
    h.mock.push(Step::text("reacting"));
    let starter = h
        .session
        .send_custom_message(
            custom_message("example.trigger", "please react", false),
            CustomDelivery::TriggerTurn,
        )
        .expect("trigger_turn admitted");
    assert!(starter.is_some(), "trigger_turn starts a run");
    assert!(
        h.session.is_streaming(),
        "admission makes the session active"
    );
    drop(starter);
    idle(&h.session).await;

    let bodies = h.mock.wait_for_requests(1, WAIT).await;
    assert_eq!(bodies.len(), 1, "one provider call");
    let messages = wire_messages(&bodies[0].body);
    let last = messages.last().cloned().unwrap_or_default();
    assert_eq!(last["role"], "user");
    assert_eq!(wire_text(&last), "please react");
    assert_eq!(wire_user_texts(&bodies[0].body), ["please react"]);

    let events = h.events();
    let labels = labels_of(&events);
    // Persisted first, then the run; no user message anywhere.
    assert_eq!(
        &labels[..2],
        ["entry_appended:custom_message", "message_end:custom"],
        "{labels:?}"
    );
    assert!(
        !labels.iter().any(|l| l.ends_with(":user")),
        "no user prompt: {labels:?}"
    );
    assert_eq!(count(&events, "agent_start"), 1);
    assert_eq!(count(&events, "agent_settled"), 1);
    assert_eq!(labels.last().map(String::as_str), Some("agent_settled"));
    // The hidden trigger is in context but not in the transcript.
    let messages = h.messages();
    assert_eq!(messages.len(), 1);
    assert_eq!(role(&messages[0]), "assistant");
    assert_eq!(
        h.session.last_assistant().map(|a| a.text()).as_deref(),
        Some("reacting")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trigger_turn_without_a_model_is_refused_and_commits_nothing() {
    let h = harness_with(Options {
        with_model: false,
        ..Options::default()
    })
    .await;
    let error = refused(
        &h.session,
        custom_message("example.trigger", "react", true),
        CustomDelivery::TriggerTurn,
    );
    assert_eq!(error, NO_MODEL);
    assert!(h.events().is_empty(), "{:?}", h.labels());
    assert!(!h.path().exists());
    assert!(!h.session.is_streaming());
    // Append needs no model.
    send(
        &h.session,
        custom_message("example.note", "kept", true),
        CustomDelivery::Append,
    );
    assert_eq!(h.session.state().message_count, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn steered_and_follow_up_custom_messages_are_delivered_during_the_run() {
    let (h, gate) = gated_harness().await;
    let then = vec![Step::text("after steer"), Step::text("after follow-up")];
    h.start_at_the_gate(&gate, then).await;

    send(
        &h.session,
        custom_message("example.steer", "steered note", true),
        CustomDelivery::Steer,
    );
    send(
        &h.session,
        custom_message("example.follow", "follow note", false),
        CustomDelivery::FollowUp,
    );
    // Not listed as queued user input, and not committed yet.
    let queued = h.session.state().queued_inputs;
    assert!(queued.steering.is_empty() && queued.follow_up.is_empty());
    assert!(
        !appended(&h.events())
            .iter()
            .any(|e| e.data.type_name() == "custom_message"),
        "queued custom messages are persisted on delivery"
    );
    gate.open();
    idle(&h.session).await;

    assert_steer_then_follow_up_on_the_wire(&h.request_bodies(), "steered note", "follow note");

    // Each delivery: message_start → entry_appended → message_end, inside its turn.
    let events = h.events();
    let labels = labels_of(&events);
    let delivered: Vec<usize> = labels
        .iter()
        .enumerate()
        .filter(|(_, l)| *l == "message_start:custom")
        .map(|(i, _)| i)
        .collect();
    assert_eq!(delivered.len(), 2, "{labels:?}");
    for &at in &delivered {
        assert_eq!(
            labels[at..at + 3],
            [
                "message_start:custom",
                "entry_appended:custom_message",
                "message_end:custom"
            ],
            "{labels:?}"
        );
        assert_eq!(labels[at - 1], "turn_start", "{labels:?}");
    }
    assert_eq!(count(&events, "agent_start"), 1);
    assert_eq!(count(&events, "agent_settled"), 1);

    // Presentation: the displayed steer is there, the hidden follow-up is not.
    let roles: Vec<&str> = h.messages().iter().map(role).collect();
    assert_eq!(
        roles,
        [
            "user",
            "assistant",
            "toolResult",
            "custom",
            "assistant",
            "assistant"
        ]
    );
    let (_, on_disk) = read_journal(&h.path());
    let custom_types: Vec<String> = on_disk
        .iter()
        .filter_map(|e| match &e.data {
            EntryData::CustomMessage { custom_type, .. } => Some(custom_type.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(custom_types, ["example.steer", "example.follow"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queued_custom_messages_count_against_the_bound_and_abort_discards_only_them() {
    let (h, gate) = gated_harness().await;
    h.start_at_the_gate(&gate, Vec::new()).await;

    let queued = h
        .session
        .prompt(Delivery::FollowUp, "user later".into())
        .expect("user follow-up queued");
    assert!(queued.starter.is_none());
    for n in 0..31 {
        let delivery = if n % 2 == 0 {
            CustomDelivery::Steer
        } else {
            CustomDelivery::FollowUp
        };
        send(
            &h.session,
            custom_message("example.queued", &format!("queued custom {n}"), true),
            delivery,
        );
    }
    // 32 pending inputs: one more of any kind is refused.
    let error = refused(
        &h.session,
        custom_message("example.queued", "one too many", true),
        CustomDelivery::Steer,
    );
    assert_eq!(error, QUEUE_CAPACITY);
    let error = h
        .session
        .prompt(Delivery::Steer, "user too many".into())
        .err()
        .map(|e| e.to_string());
    assert_eq!(error.as_deref(), Some(QUEUE_CAPACITY));
    // Only the user input is listed.
    let listed = h.session.state().queued_inputs;
    assert!(listed.steering.is_empty());
    assert_eq!(listed.follow_up.len(), 1);
    assert_eq!(listed.follow_up[0].text, "user later");

    abort(&h.session).await;
    assert!(!h.session.is_streaming());
    let listed = h.session.state().queued_inputs;
    assert_eq!(
        listed.follow_up.len(),
        1,
        "queued user input survives abort"
    );
    assert_eq!(listed.follow_up[0].text, "user later");
    // The custom messages are gone: the bound has room again for 31 inputs.
    for n in 0..31 {
        h.session
            .prompt(Delivery::Steer, format!("room {n}"))
            .unwrap_or_else(|e| panic!("queue slot {n} after abort: {e}"));
    }
    assert!(
        h.session
            .prompt(Delivery::Steer, "full again".into())
            .is_err()
    );
    let events = h.events();
    assert!(
        !appended(&events)
            .iter()
            .any(|e| e.data.type_name() == "custom_message"),
        "discarded custom messages were committed"
    );
    assert!(
        !h.request_bodies()
            .iter()
            .any(|b| b.to_string().contains("queued custom")),
        "discarded custom messages reached the provider"
    );
    assert_eq!(count(&events, "agent_settled"), 1);
}

// ---------------------------------------------------------------------------------------------
