//! The event order of a direct prompt (docs/rpc.md#event-order), the state snapshot while
//! streaming (docs/rpc.md#the-state-snapshot) and completion watches (docs/rpc.md#completion-watches).

use super::*;

/// The last user message text of a recorded chat-completions request body.
fn last_user_text(body: &Value) -> String {
    body["messages"]
        .as_array()
        .and_then(|m| m.iter().rev().find(|m| m["role"] == "user"))
        .map(|m| text_of(&m["content"]))
        .unwrap_or_default()
}

// ---------------------------------------------------------------------------------------------
// 1. Event order of a direct prompt
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn direct_prompt_emits_the_typical_event_order() {
    let mock = start_mock().await;
    mock.push(Step::Reply {
        thinking: vec![],
        text: vec!["Hel".into(), "lo ".into(), "world".into()],
        tool_calls: vec![],
        finish_reason: "stop".into(),
        usage: Some(MockUsage {
            prompt_tokens: 50,
            completion_tokens: 7,
            cached_tokens: 20,
        }),
    });
    let agent = agent_with(&mock, &reasoning_m1());
    let cwd = temp_cwd();
    let mut p = spawn_m1(&agent, &cwd.path).await;

    let response = prompt_ok(&mut p, "p1", "direct", "Say hello", None).await;
    assert_eq!(response["method"], "session.prompt");
    assert_eq!(
        response["result"],
        json!({"delivery": "direct"}),
        "no completionRevision without a completionId"
    );
    let settled = p.event_after("agent_settled", 0).await;

    // zi writes the prompt's response before the first event of the run it starts.
    let first_event = p
        .frames()
        .iter()
        .find(|f| f["type"] == "session_event")
        .cloned()
        .unwrap_or_default();
    assert!(
        seq(&first_event) > seq(&response),
        "the run's first event {first_event} precedes the prompt response {response}"
    );
    let events = events_between(&p, 0, seq(&settled));

    // Collapse the run of text deltas, then compare the order exactly.
    let mut collapsed: Vec<String> = Vec::new();
    for label in labels(&events) {
        if label == "message_update:text_delta"
            && collapsed.last().map(String::as_str) == Some("message_update:text_delta")
        {
            continue;
        }
        collapsed.push(label);
    }
    let expected = [
        "agent_start",
        "turn_start",
        "message_start:user",
        "entry_appended",
        "message_end:user",
        "message_start:assistant",
        "message_update:start",
        "message_update:text_start",
        "message_update:text_delta",
        "message_update:text_end",
        "message_update:done",
        "entry_appended",
        "message_end:assistant",
        "turn_end",
        "agent_end",
        "agent_settled",
    ];
    assert_eq!(collapsed, expected, "event order; all events: {events:#?}");

    assert_delta_only_updates(&events);

    assert_the_messages_and_entries(&events);

    assert_the_provider_request(&mock, &cwd).await;

    let state = p.request_ok("s1", "session.get_state", None).await;
    assert_eq!(state["activity"], json!({"type": "idle"}));
    assert_eq!(state["messageCount"], 2);
    assert!(state.get("streamingMessage").is_none(), "{state}");

    p.exit_by_eof().await;
}

/// `message_update` is delta-only; the deltas concatenate to the reply.
fn assert_delta_only_updates(events: &[Value]) {
    let mut deltas = String::new();
    for event in events.iter().filter(|e| e["type"] == "message_update") {
        let keys: Vec<&String> = event
            .as_object()
            .map(|o| o.keys().collect())
            .unwrap_or_default();
        assert_eq!(
            keys,
            ["type", "assistantMessageEvent"],
            "message_update carries only its assistant event: {event}"
        );
        let inner = &event["assistantMessageEvent"];
        assert!(
            inner.get("partial").is_none(),
            "no partial snapshot: {event}"
        );
        match inner["type"].as_str().unwrap_or_default() {
            "text_delta" => {
                assert_eq!(inner["contentIndex"], 0, "{event}");
                deltas.push_str(inner["delta"].as_str().unwrap_or_default());
            }
            "text_start" => assert_eq!(inner["contentIndex"], 0, "{event}"),
            "text_end" => {
                assert_eq!(inner["contentIndex"], 0, "{event}");
                assert_eq!(inner["content"], "Hello world", "{event}");
            }
            "done" => {
                assert_eq!(inner["reason"], "stop", "{event}");
                assert_eq!(inner["message"]["role"], "assistant", "{event}");
                assert_eq!(text_of(&inner["message"]["content"]), "Hello world");
            }
            _ => {}
        }
    }
    assert_eq!(deltas, "Hello world", "the deltas concatenate to the reply");
}

/// The user message and its journal entry, the assistant message with the mock's usage, and the
/// turn's and run's ends.
fn assert_the_messages_and_entries(events: &[Value]) {
    let user = last_message_end(events, "user");
    assert_eq!(text_of(&user["content"]), "Say hello");
    assert!(user["timestamp"].is_number(), "{user}");
    let entries: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "entry_appended")
        .map(|e| &e["entry"])
        .collect();
    assert_eq!(entries.len(), 2);
    assert_eq!(entries[0]["type"], "message");
    assert_eq!(
        entries[0]["message"], user,
        "the entry carries the committed message"
    );
    for entry in &entries {
        assert!(entry["id"].is_string(), "{entry}");
        assert!(entry["timestamp"].is_string(), "{entry}");
        assert!(entry.get("parentId").is_some(), "{entry}");
    }
    assert_eq!(entries[1]["parentId"], entries[0]["id"], "linear chain");

    // The assistant message, with the mock's usage.
    let assistant = last_message_end(events, "assistant");
    assert_eq!(entries[1]["message"], assistant);
    assert_eq!(text_of(&assistant["content"]), "Hello world");
    assert_eq!(assistant["stopReason"], "stop");
    assert_eq!(assistant["provider"], "mock");
    assert_eq!(assistant["model"], "m1");
    assert_eq!(assistant["api"], "openai-completions");
    assert!(assistant.get("errorMessage").is_none(), "{assistant}");
    assert_eq!(assistant["usage"]["input"], 30, "{assistant}");
    assert_eq!(assistant["usage"]["output"], 7, "{assistant}");
    assert_eq!(assistant["usage"]["cacheRead"], 20, "{assistant}");
    assert_eq!(assistant["usage"]["cacheWrite"], 0, "{assistant}");
    assert_eq!(assistant["usage"]["totalTokens"], 57, "{assistant}");
    assert!(
        assistant["usage"]["cost"]["total"].is_number(),
        "{assistant}"
    );

    let turn_end = events
        .iter()
        .find(|e| e["type"] == "turn_end")
        .cloned()
        .unwrap_or_default();
    assert_eq!(turn_end["message"], assistant);
    assert_eq!(turn_end["toolResults"], json!([]));
    let agent_end = events
        .iter()
        .find(|e| e["type"] == "agent_end")
        .cloned()
        .unwrap_or_default();
    assert_eq!(agent_end["willRetry"], false, "{agent_end}");
    assert!(agent_end["messages"].is_array(), "{agent_end}");
}

/// What the provider received: one streamed chat-completions request for m1 that ends with the
/// prompt.
async fn assert_the_provider_request(mock: &MockLlm, cwd: &TempCwd) {
    let requests = mock.wait_for_requests(1, WAIT).await;
    assert_eq!(requests.len(), 1);
    let request = &requests[0];
    assert_eq!(request.path, "/v1/chat/completions");
    assert_eq!(
        request.header("authorization"),
        Some(format!("Bearer {KEY}").as_str())
    );
    assert_eq!(request.body["model"], "m1");
    assert_eq!(request.body["stream"], true);
    let system = system_text(&request.body);
    assert!(
        system.starts_with("You are an expert coding assistant operating inside Zi."),
        "{system}"
    );
    assert!(
        system.contains(&format!(
            "Current working directory: {}",
            cwd.path.display()
        )),
        "{system}"
    );
    assert_eq!(last_user_text(&request.body), "Say hello");
}

// ---------------------------------------------------------------------------------------------
// 2. State while streaming
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_state_shows_the_streaming_message_only_while_running() {
    let mock = start_mock().await;
    mock.push(Step::Hang(vec!["par".into(), "tial".into()]));
    let agent = agent_with(&mock, &reasoning_m1());
    let cwd = temp_cwd();
    let mut p = spawn_m1(&agent, &cwd.path).await;

    let response = prompt_ok(&mut p, "p1", "direct", "stream please", None).await;
    // Both deltas have been applied once the second one is announced.
    let first = update_after(&mut p, "text_delta", seq(&response)).await;
    update_after(&mut p, "text_delta", seq(&first)).await;

    let state = p.request_ok("s1", "session.get_state", None).await;
    assert_eq!(state["activity"], json!({"type": "running"}), "{state}");
    let streaming = &state["streamingMessage"];
    assert_eq!(streaming["role"], "assistant", "{state}");
    assert_eq!(text_of(&streaming["content"]), "partial", "{state}");
    assert_eq!(
        state["messageCount"], 1,
        "only the user message is committed: {state}"
    );

    p.request_ok("i1", "session.interrupt", None).await;
    let state = p.request_ok("s2", "session.get_state", None).await;
    assert_eq!(state["activity"], json!({"type": "idle"}), "{state}");
    assert!(
        state.get("streamingMessage").is_none(),
        "streamingMessage must be absent when idle: {state}"
    );
    assert_eq!(state["messageCount"], 2, "{state}");
}

// ---------------------------------------------------------------------------------------------
// 3. Completion watches
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn completion_watches_clip_advance_and_invalidate() {
    let mock = start_mock().await;
    let agent = agent_with(&mock, &reasoning_m1());
    agent.write("settings.json", r#"{"retryEnabled": false}"#);
    let cwd = temp_cwd();
    let mut p = spawn_m1(&agent, &cwd.path).await;

    a_large_answer_is_clipped(&mut p, &mock).await;

    // A continue with the same id joins the cycle: revision 2. Hold the run.
    mock.push(Step::Hang(vec!["second".into()]));
    let response = prompt_ok(&mut p, "p2", "continue", "more", Some("cycle-1")).await;
    assert_eq!(
        response["result"],
        json!({"delivery": "continue", "completionRevision": 2})
    );
    update_after(&mut p, "text_delta", seq(&response)).await;

    // A direct prompt while running is rejected and leaves the watch alone.
    let rejected = p
        .request(
            "p3",
            "session.prompt",
            Some(prompt_params("direct", "again", Some("cycle-1"))),
        )
        .await;
    assert_failure(
        &rejected,
        "operation_failed",
        "streamingBehavior is required while the agent is running",
    );

    // The watch settles when the interrupted run does.
    p.send(
        "w2",
        "session.await_idle",
        Some(json!({"completionId": "cycle-1"})),
    )
    .await;
    assert_eq!(
        p.request_ok("i1", "session.interrupt", None).await,
        json!({})
    );
    let idle = p.response("w2").await;
    assert_eq!(idle["ok"], true, "{idle}");
    let idle = &idle["result"];
    assert_eq!(idle["completionRevision"], 2, "{idle}");
    assert_eq!(idle["messageCount"], 4, "{idle}");
    assert_eq!(idle["completion"]["stopReason"], "aborted", "{idle}");
    assert!(idle["completion"]["error"].is_string(), "{idle}");

    // A no-id direct prompt invalidates the watch.
    mock.push(Step::text("unrelated"));
    let response = prompt_ok(&mut p, "p4", "direct", "unrelated", None).await;
    assert_eq!(response["result"], json!({"delivery": "direct"}));
    p.event_after("agent_settled", seq(&response)).await;
    let stale = p
        .request(
            "w3",
            "session.await_idle",
            Some(json!({"completionId": "cycle-1"})),
        )
        .await;
    assert_failure(
        &stale,
        "operation_failed",
        "Completion watch is not active: cycle-1",
    );
    // A plain idle wait still answers {}.
    assert_eq!(
        p.request_ok("w4", "session.await_idle", None).await,
        json!({})
    );

    a_provider_error_is_the_completions_stop_reason(&mut p, &mock).await;
}

/// A 60 KiB answer: its completion is clipped to 50 KiB.
async fn a_large_answer_is_clipped(p: &mut Harness, mock: &MockLlm) {
    mock.push(Step::Bytes {
        total_bytes: 61_440,
        delta_bytes: 4_096,
    });
    let response = prompt_ok(p, "p1", "direct", "big", Some("cycle-1")).await;
    assert_eq!(
        response["result"],
        json!({"delivery": "direct", "completionRevision": 1})
    );
    let idle = p
        .request_ok(
            "w1",
            "session.await_idle",
            Some(json!({"completionId": "cycle-1"})),
        )
        .await;
    assert_eq!(idle["completionRevision"], 1, "{}", preview(&idle));
    assert_eq!(idle["messageCount"], 2, "{}", preview(&idle));
    let completion = &idle["completion"];
    let text = completion["text"].as_str().unwrap_or_default();
    assert_eq!(text.len(), 51_200);
    assert!(text.bytes().all(|b| b == b'x'));
    assert_eq!(completion["stopReason"], "stop");
    assert_eq!(completion["originalBytes"], 61_440);
    assert_eq!(completion["omittedBytes"], 10_240);
    assert!(completion.get("error").is_none(), "{}", preview(&idle));
}

/// A provider error is reported as the completion's stop reason and error text.
async fn a_provider_error_is_the_completions_stop_reason(p: &mut Harness, mock: &MockLlm) {
    mock.push(Step::HttpError {
        status: 500,
        message: "upstream exploded".into(),
    });
    let response = prompt_ok(p, "p5", "direct", "fail", Some("err-1")).await;
    assert_eq!(
        response["result"],
        json!({"delivery": "direct", "completionRevision": 1})
    );
    let idle = p
        .request_ok(
            "w5",
            "session.await_idle",
            Some(json!({"completionId": "err-1"})),
        )
        .await;
    assert_eq!(idle["completionRevision"], 1, "{idle}");
    assert_eq!(idle["completion"]["stopReason"], "error", "{idle}");
    let error = idle["completion"]["error"].as_str().unwrap_or_default();
    assert!(error.contains("upstream exploded"), "{idle}");
    assert_eq!(idle["completion"]["text"], "", "{idle}");
    assert_eq!(idle["completion"]["omittedBytes"], 0, "{idle}");
}
