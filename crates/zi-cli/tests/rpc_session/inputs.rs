//! Interruption (docs/rpc.md#sessioninterrupt), the input queues (docs/architecture.md#the-run) and
//! provider failures as assistant messages.

use super::*;

// ---------------------------------------------------------------------------------------------
// 4. Interrupt
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interrupt_aborts_the_stream_and_answers_after_settlement() {
    let mock = start_mock().await;
    mock.push(Step::Hang(vec!["Work".into(), "ing".into()]));
    let agent = agent_with(&mock, &reasoning_m1());
    let cwd = temp_cwd();
    let mut p = spawn_m1(&agent, &cwd.path).await;

    let response = prompt_ok(&mut p, "p1", "direct", "long task", None).await;
    let first = update_after(&mut p, "text_delta", seq(&response)).await;
    update_after(&mut p, "text_delta", seq(&first)).await;

    let interrupted = p.request("i1", "session.interrupt", None).await;
    assert_eq!(interrupted["ok"], true, "{interrupted}");
    assert_eq!(interrupted["result"], json!({}));
    let settled = p
        .frames()
        .iter()
        .find(|f| f["type"] == "session_event" && f["event"]["type"] == "agent_settled")
        .cloned()
        .unwrap_or_else(|| panic!("the interrupt answered before the run settled"));
    assert!(
        seq(&settled) < seq(&interrupted),
        "agent_settled {settled} must precede the interrupt response {interrupted}"
    );

    let events = events_between(&p, seq(&response), seq(&settled));
    let assistant = last_message_end(&events, "assistant");
    assert_eq!(assistant["stopReason"], "aborted", "{assistant}");
    assert!(
        assistant["errorMessage"]
            .as_str()
            .is_some_and(|m| !m.is_empty()),
        "{assistant}"
    );
    assert_eq!(
        events
            .iter()
            .filter(|e| e["type"] == "agent_settled")
            .count(),
        1
    );

    let page = p.request_ok("m1", "session.get_messages", None).await;
    assert_eq!(page["total"], 2, "{page}");
    assert_eq!(page["nextStart"], Value::Null);
    assert_eq!(page["messages"][1]["role"], "assistant");
    assert_eq!(page["messages"][1]["stopReason"], "aborted");

    assert_eq!(
        mock.wait_for_disconnects(1, WAIT).await,
        1,
        "the provider request was dropped"
    );
    let state = p.request_ok("s1", "session.get_state", None).await;
    assert_eq!(state["activity"], json!({"type": "idle"}));

    // An interrupt while idle answers at once.
    assert_eq!(
        p.request_ok("i2", "session.interrupt", None).await,
        json!({})
    );
}

// ---------------------------------------------------------------------------------------------
// 5. Queues
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn follow_up_while_idle_waits_for_the_next_prompt() {
    let mock = start_mock().await;
    let agent = agent_with(&mock, &reasoning_m1());
    let cwd = temp_cwd();
    let mut p = spawn_m1(&agent, &cwd.path).await;

    let queued = prompt_ok(&mut p, "f1", "follow_up", "later", None).await;
    assert_eq!(queued["result"], json!({"delivery": "follow_up"}));
    let update = p.event_after("queue_update", 0).await;
    assert_eq!(update["event"]["steering"], json!([]));
    assert_eq!(update["event"]["followUp"][0]["text"], "later", "{update}");
    assert_eq!(update["event"]["followUp"][0]["delivery"], "followUp");

    let state = p.request_ok("s1", "session.get_state", None).await;
    assert_eq!(
        state["activity"],
        json!({"type": "idle"}),
        "a queued input does not wake the session"
    );
    let follow_up = &state["queuedInputs"]["followUp"];
    assert_eq!(follow_up.as_array().map(Vec::len), Some(1), "{state}");
    assert_eq!(follow_up[0]["text"], "later");
    assert_eq!(follow_up[0]["delivery"], "followUp");
    assert_eq!(follow_up[0]["images"], json!([]));
    assert_eq!(follow_up[0]["bytes"], 5);
    assert!(follow_up[0]["id"].is_number());
    assert_eq!(state["queuedInputs"]["steering"], json!([]));
    assert_eq!(mock.requests().len(), 0, "no provider call while idle");
    assert!(
        !p.event_types().iter().any(|t| t == "agent_start"),
        "no run started: {:?}",
        p.event_types()
    );

    // The next direct prompt consumes it when the run would otherwise stop.
    mock.push(Step::text("first answer"));
    mock.push(Step::text("second answer"));
    let events = run_direct(&mut p, "d1", "now").await;
    let labels = labels(&events);
    let removed = events
        .iter()
        .position(|e| e["type"] == "queue_update" && e["followUp"] == json!([]))
        .unwrap_or_else(|| panic!("no queue_update removing the follow-up: {labels:?}"));
    let delivered = events
        .iter()
        .position(|e| {
            e["type"] == "message_start"
                && e["message"]["role"] == "user"
                && text_of(&e["message"]["content"]) == "later"
        })
        .unwrap_or_else(|| panic!("the follow-up was not delivered: {labels:?}"));
    let first_answer_end = events
        .iter()
        .position(|e| {
            e["type"] == "message_end"
                && e["message"]["role"] == "assistant"
                && text_of(&e["message"]["content"]) == "first answer"
        })
        .unwrap_or_else(|| panic!("no first answer: {labels:?}"));
    assert!(
        removed < delivered,
        "queue_update precedes the input's message_start: {labels:?}"
    );
    assert!(
        first_answer_end < delivered,
        "follow-up comes after the run would stop: {labels:?}"
    );
    assert_eq!(
        labels.iter().filter(|l| *l == "agent_start").count(),
        1,
        "{labels:?}"
    );
    assert_eq!(
        text_of(&last_message_end(&events, "assistant")["content"]),
        "second answer"
    );

    let requests = mock.wait_for_requests(2, WAIT).await;
    assert_eq!(requests.len(), 2);
    assert_eq!(user_texts(&requests[0].body), ["now"]);
    assert_eq!(user_texts(&requests[1].body), ["now", "later"]);
    let state = p.request_ok("s2", "session.get_state", None).await;
    assert_eq!(
        state["queuedInputs"],
        json!({"steering": [], "followUp": []})
    );
    assert_eq!(state["messageCount"], 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn steer_during_a_run_is_delivered_at_the_next_turn() {
    let mock = start_mock().await;
    let agent = agent_with(&mock, &reasoning_m1());
    let cwd = temp_cwd();
    let mut p = spawn_m1(&agent, &cwd.path).await;

    // The first turn's tool waits for a file the test creates only after the steer was
    // queued, so the steer always arrives while the first turn is busy (a long streamed reply
    // raced: a fast zi could settle before the harness got to send the steer).
    let go = cwd.path.join("go");
    let command = format!(
        "while [ ! -e '{}' ]; do sleep 0.02; done; echo released",
        go.display()
    );
    mock.push(Step::tool_call(
        "call-1",
        "bash",
        json!({"command": command}),
    ));
    mock.push(Step::text("steered answer"));
    let response = prompt_ok(&mut p, "d1", "direct", "long", None).await;
    p.event_after("tool_execution_start", seq(&response)).await;
    let steer = prompt_ok(&mut p, "s1", "steer", "steer now", None).await;
    assert_eq!(steer["result"], json!({"delivery": "steer"}));
    std::fs::write(&go, b"").unwrap_or_else(|e| panic!("create {}: {e}", go.display()));
    let settled = p.event_after("agent_settled", seq(&response)).await;
    let events = events_between(&p, seq(&response), seq(&settled));
    let labels: Vec<String> = labels(&events)
        .into_iter()
        .filter(|l| l != "message_update:text_delta")
        .collect();

    let queued = events
        .iter()
        .position(|e| e["type"] == "queue_update" && e["steering"][0]["text"] == "steer now")
        .unwrap_or_else(|| panic!("no queue_update listing the steer: {labels:?}"));
    assert_eq!(events[queued]["steering"][0]["delivery"], "steer");
    let first_end = events
        .iter()
        .position(|e| e["type"] == "tool_execution_end")
        .unwrap_or_else(|| panic!("no tool_execution_end: {labels:?}"));
    let delivered = events
        .iter()
        .position(|e| {
            e["type"] == "message_start"
                && e["message"]["role"] == "user"
                && text_of(&e["message"]["content"]) == "steer now"
        })
        .unwrap_or_else(|| panic!("the steer was not delivered in this run: {labels:?}"));
    let removed = events
        .iter()
        .position(|e| e["type"] == "queue_update" && e["steering"] == json!([]))
        .unwrap_or_else(|| panic!("no queue_update removing the steer: {labels:?}"));
    let second_start = events
        .iter()
        .rposition(|e| e["type"] == "message_start" && e["message"]["role"] == "assistant")
        .unwrap_or_default();
    assert!(
        queued < first_end,
        "the steer was queued during the first turn: {labels:?}"
    );
    assert!(first_end < removed && removed < delivered, "{labels:?}");
    assert!(delivered < second_start, "{labels:?}");
    assert_eq!(
        labels.iter().filter(|l| *l == "turn_start").count(),
        2,
        "{labels:?}"
    );
    assert_eq!(
        labels.iter().filter(|l| *l == "agent_start").count(),
        1,
        "{labels:?}"
    );
    assert_eq!(
        text_of(&last_message_end(&events, "assistant")["content"]),
        "steered answer"
    );

    let requests = mock.wait_for_requests(2, WAIT).await;
    assert_eq!(requests.len(), 2);
    assert_eq!(user_texts(&requests[0].body), ["long"]);
    assert_eq!(user_texts(&requests[1].body), ["long", "steer now"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queue_capacity_is_32_inputs() {
    let mock = start_mock().await;
    let agent = agent_with(&mock, &reasoning_m1());
    let cwd = temp_cwd();
    let mut p = spawn_m1(&agent, &cwd.path).await;

    for i in 0..32 {
        let delivery = if i % 2 == 0 { "steer" } else { "follow_up" };
        prompt_ok(
            &mut p,
            &format!("q{i}"),
            delivery,
            &format!("input {i}"),
            None,
        )
        .await;
    }
    let rejected = p
        .request(
            "q32",
            "session.prompt",
            Some(prompt_params("follow_up", "one too many", None)),
        )
        .await;
    assert_failure(
        &rejected,
        "operation_failed",
        "Queue capacity exceeded (maximum 32 messages or 8 MiB).",
    );
    let rejected = p
        .request(
            "q33",
            "session.prompt",
            Some(prompt_params("steer", "one too many", None)),
        )
        .await;
    assert_failure(
        &rejected,
        "operation_failed",
        "Queue capacity exceeded (maximum 32 messages or 8 MiB).",
    );
    let state = p.request_ok("s1", "session.get_state", None).await;
    assert_eq!(
        state["queuedInputs"]["steering"].as_array().map(Vec::len),
        Some(16)
    );
    assert_eq!(
        state["queuedInputs"]["followUp"].as_array().map(Vec::len),
        Some(16)
    );
    assert_eq!(state["queuedInputs"]["steering"][0]["text"], "input 0");
    assert_eq!(state["queuedInputs"]["followUp"][15]["text"], "input 31");
}

// ---------------------------------------------------------------------------------------------
// 6. Provider errors are assistant messages
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn provider_errors_become_error_messages_and_zi_keeps_serving() {
    let mock = start_mock().await;
    let agent = agent_with(&mock, &reasoning_m1());
    // Retry policy is not under test here: no automatic retry of the 429.
    agent.write("settings.json", r#"{"retryEnabled": false}"#);
    let cwd = temp_cwd();
    let mut p = spawn_m1(&agent, &cwd.path).await;

    mock.push(Step::HttpError {
        status: 429,
        message: "Rate limit reached for m1".into(),
    });
    let events = run_direct(&mut p, "e1", "first").await;
    let assistant = last_message_end(&events, "assistant");
    assert_eq!(assistant["stopReason"], "error", "{assistant}");
    let message = assistant["errorMessage"].as_str().unwrap_or_default();
    assert!(message.contains("429"), "{assistant}");
    assert!(message.contains("Rate limit reached for m1"), "{assistant}");
    let agent_end = events
        .iter()
        .find(|e| e["type"] == "agent_end")
        .cloned()
        .unwrap_or_default();
    assert_eq!(agent_end["willRetry"], false);
    assert!(labels(&events).contains(&"turn_end".to_string()));

    mock.push(Step::MidStreamError {
        text: vec!["half an ".into()],
        message: "backend overloaded mid-stream".into(),
    });
    let events = run_direct(&mut p, "e2", "second").await;
    let assistant = last_message_end(&events, "assistant");
    assert_eq!(assistant["stopReason"], "error", "{assistant}");
    assert!(
        assistant["errorMessage"]
            .as_str()
            .is_some_and(|m| m.contains("backend overloaded mid-stream")),
        "{assistant}"
    );

    mock.push(Step::Truncated(vec!["cut ".into(), "off".into()]));
    let events = run_direct(&mut p, "e3", "third").await;
    let assistant = last_message_end(&events, "assistant");
    assert_eq!(assistant["stopReason"], "error", "{assistant}");
    assert!(
        assistant["errorMessage"]
            .as_str()
            .is_some_and(|m| !m.is_empty()),
        "{assistant}"
    );

    mock.push(Step::text("all good"));
    let events = run_direct(&mut p, "e4", "fourth").await;
    let assistant = last_message_end(&events, "assistant");
    assert_eq!(assistant["stopReason"], "stop");
    assert_eq!(text_of(&assistant["content"]), "all good");

    let page = p.request_ok("m1", "session.get_messages", None).await;
    assert_eq!(page["total"], 8, "{}", preview(&page));
    let stops: Vec<&Value> = page["messages"]
        .as_array()
        .map(|m| {
            m.iter()
                .filter(|m| m["role"] == "assistant")
                .map(|m| &m["stopReason"])
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(
        stops,
        [
            &json!("error"),
            &json!("error"),
            &json!("error"),
            &json!("stop")
        ]
    );
    assert_eq!(mock.requests().len(), 4, "no automatic retry");
    let state = p.request_ok("s1", "session.get_state", None).await;
    assert_eq!(state["activity"], json!({"type": "idle"}));
}
