//! Tool calls: the round trip, validation, parallel and sequential batches, the output limit
//! and progress (docs/architecture.md#the-run, docs/rpc.md#event-catalogue).

use super::*;

// ---------------------------------------------------------------------------------------------
// 1. Tool call round trip
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tool_call_round_trip() {
    let (echo, echo_calls) = echo_tool();
    let h = harness(vec![echo]).await;
    h.mock
        .push(Step::tool_call("call_1", "echo", json!({"text": "hi"})));
    h.mock.push(Step::text("all done"));
    h.run("please echo").await;

    assert_eq!(echo_calls.load(Ordering::SeqCst), 1);
    let messages = h.messages();
    assert_round_trip_conversation(&messages);
    assert_round_trip_wire(&h.request_bodies());
    assert_round_trip_events(&h, &messages);
    assert_eq!(h.session.state().activity, Activity::Idle);
}

/// The committed conversation: user, the assistant's call, its result, the closing assistant.
fn assert_round_trip_conversation(messages: &[AgentMessage]) {
    assert_eq!(
        messages.iter().map(role).collect::<Vec<_>>(),
        ["user", "assistant", "toolResult", "assistant"]
    );
    let first = messages[1].as_assistant().expect("assistant");
    assert_eq!(first.stop_reason, StopReason::ToolUse);
    let calls: Vec<_> = first.tool_calls().collect();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].id, "call_1");
    assert_eq!(calls[0].name, "echo");
    assert_eq!(calls[0].arguments, json!({"text": "hi"}));

    let result = serde_json::to_value(&messages[2]).expect("json");
    assert_eq!(result["role"], "toolResult");
    assert_eq!(result["toolCallId"], "call_1");
    assert_eq!(result["toolName"], "echo");
    assert_eq!(
        result["content"],
        json!([{"type": "text", "text": "echo: hi"}])
    );
    assert_eq!(result["isError"], false);
    assert!(result["timestamp"].is_i64());

    let last = messages[3].as_assistant().expect("assistant");
    assert_eq!(last.stop_reason, StopReason::Stop);
    assert_eq!(last.text(), "all done");
}

/// The second provider request replays the call and its result; the first advertises the tool.
fn assert_round_trip_wire(bodies: &[Value]) {
    assert_eq!(bodies.len(), 2, "exactly two provider calls");
    let wire = wire_messages(&bodies[1]);
    let assistant = wire
        .iter()
        .find(|m| m["role"] == "assistant")
        .expect("assistant wire message");
    assert_eq!(assistant["tool_calls"][0]["id"], "call_1");
    assert_eq!(assistant["tool_calls"][0]["type"], "function");
    assert_eq!(assistant["tool_calls"][0]["function"]["name"], "echo");
    let arguments: Value = serde_json::from_str(
        assistant["tool_calls"][0]["function"]["arguments"]
            .as_str()
            .expect("arguments string"),
    )
    .expect("arguments JSON");
    assert_eq!(arguments, json!({"text": "hi"}));
    let tool = wire
        .iter()
        .find(|m| m["role"] == "tool")
        .expect("tool wire message");
    assert_eq!(tool["tool_call_id"], "call_1");
    assert_eq!(wire_text(tool), "echo: hi");
    let assistant_at = wire.iter().position(|m| m["role"] == "assistant");
    let tool_at = wire.iter().position(|m| m["role"] == "tool");
    assert_eq!(
        tool_at,
        assistant_at.map(|i| i + 1),
        "tool message follows its assistant"
    );
    // Tools are advertised.
    assert_eq!(bodies[0]["tools"][0]["function"]["name"], "echo");
}

/// The events in order, the tool execution's start and end, and what each `turn_end` carries.
fn assert_round_trip_events(h: &Harness, messages: &[AgentMessage]) {
    assert_eq!(
        h.labels(),
        [
            "agent_start",
            "turn_start",
            "message_start:user",
            "entry_appended:message",
            "message_end:user",
            "message_start:assistant",
            "entry_appended:message",
            "message_end:assistant",
            "tool_execution_start",
            "tool_execution_end",
            "message_start:toolResult",
            "entry_appended:message",
            "message_end:toolResult",
            "turn_end",
            "turn_start",
            "message_start:assistant",
            "entry_appended:message",
            "message_end:assistant",
            "turn_end",
            "agent_end",
            "agent_settled",
        ]
    );
    let events = h.events();
    let start = events
        .iter()
        .find_map(|e| match e {
            AgentSessionEvent::ToolExecutionStart {
                tool_call_id,
                tool_name,
                args,
            } => Some((tool_call_id.clone(), tool_name.clone(), args.clone())),
            _ => None,
        })
        .expect("tool_execution_start");
    assert_eq!(
        start,
        (
            "call_1".to_string(),
            "echo".to_string(),
            json!({"text": "hi"})
        )
    );
    let end = events
        .iter()
        .find_map(|e| match e {
            AgentSessionEvent::ToolExecutionEnd {
                tool_call_id,
                tool_name,
                result,
                is_error,
            } => Some((
                tool_call_id.clone(),
                tool_name.clone(),
                result.clone(),
                *is_error,
            )),
            _ => None,
        })
        .expect("tool_execution_end");
    assert_eq!(end.0, "call_1");
    assert_eq!(end.1, "echo");
    assert_eq!(end.2.content, vec![ContentBlock::text("echo: hi")]);
    assert!(!end.3);
    let turn_ends: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            AgentSessionEvent::TurnEnd {
                message,
                tool_results,
            } => Some((message.clone(), tool_results.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(turn_ends.len(), 2);
    assert_eq!(
        turn_ends[0].0, messages[1],
        "turn_end carries the assistant message"
    );
    assert_eq!(
        turn_ends[0].1,
        vec![messages[2].clone()],
        "turn_end carries the tool results"
    );
    assert_eq!(turn_ends[1].0, messages[3]);
    assert!(turn_ends[1].1.is_empty());
}

// ---------------------------------------------------------------------------------------------
// 2. Validation
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_tools_and_invalid_arguments_become_error_results() {
    let (echo, echo_calls) = echo_tool();
    let h = harness(vec![echo]).await;
    h.mock.push(reply(
        &[],
        vec![
            call("c_unknown", "nope", json!({})),
            call("c_missing", "echo", json!({})),
            call("c_type", "echo", json!({"text": 5})),
            call("c_ok", "echo", json!({"text": "fine"})),
        ],
        "tool_calls",
    ));
    h.mock.push(Step::text("ok"));
    h.run("try tools").await;

    assert_eq!(
        echo_calls.load(Ordering::SeqCst),
        1,
        "only the valid call executes"
    );
    let results = h.tool_results();
    assert_eq!(
        results
            .iter()
            .map(|r| r.tool_call_id.as_str())
            .collect::<Vec<_>>(),
        ["c_unknown", "c_missing", "c_type", "c_ok"]
    );
    assert_eq!(result_text(&results[0]), "Tool nope not found");
    assert!(results[0].is_error);
    assert_eq!(results[0].tool_name, "nope");
    for invalid in &results[1..3] {
        assert!(invalid.is_error, "{invalid:?}");
        assert!(
            result_text(invalid).starts_with("Validation failed for tool \"echo\""),
            "{}",
            result_text(invalid)
        );
    }
    assert!(!results[3].is_error);
    assert_eq!(result_text(&results[3]), "echo: fine");

    let events = h.events();
    let ends: Vec<(String, bool)> = events
        .iter()
        .filter_map(|e| match e {
            AgentSessionEvent::ToolExecutionEnd {
                tool_call_id,
                is_error,
                ..
            } => Some((tool_call_id.clone(), *is_error)),
            _ => None,
        })
        .collect();
    assert_eq!(ends.len(), 4);
    for (id, is_error) in &ends {
        assert_eq!(*is_error, id != "c_ok", "{id}");
    }
    assert_eq!(h.count("tool_execution_start"), 4);
    assert_eq!(h.last_assistant().text(), "ok");
}

// ---------------------------------------------------------------------------------------------
// 3. Parallel vs sequential execution
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parallel_calls_end_in_completion_order_but_commit_in_call_order() {
    let overlap = Arc::new(Overlap::default());
    let slow_entered = Arc::new(Notify::new());
    let fast_done = Arc::new(Notify::new());
    let (tool, calls) = {
        let overlap = overlap.clone();
        let slow_entered = slow_entered.clone();
        let fast_done = fast_done.clone();
        test_tool(
            "pause",
            json!({"type": "object", "properties": {"slow": {"type": "boolean"}}, "required": ["slow"]}),
            ExecutionMode::Parallel,
            move |call| {
                let overlap = overlap.clone();
                let slow_entered = slow_entered.clone();
                let fast_done = fast_done.clone();
                let slow = call.raw_arguments["slow"].as_bool().unwrap_or(false);
                async move {
                    if slow {
                        // Runs until the fast call has finished (only possible when both run
                        // at once), then a little longer.
                        overlap.enter();
                        slow_entered.notify_one();
                        let _ = tokio::time::timeout(TOOL_WAIT, fast_done.notified()).await;
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        overlap.leave();
                        ToolOutput::text("slow done")
                    } else {
                        let _ = tokio::time::timeout(TOOL_WAIT, slow_entered.notified()).await;
                        overlap.enter();
                        overlap.leave();
                        fast_done.notify_one();
                        ToolOutput::text("fast done")
                    }
                }
                .boxed()
            },
        )
    };
    let h = harness(vec![tool]).await;
    h.mock.push(reply(
        &[],
        vec![
            call("p_slow", "pause", json!({"slow": true})),
            call("p_fast", "pause", json!({"slow": false})),
        ],
        "tool_calls",
    ));
    h.mock.push(Step::text("done"));
    h.run("go").await;

    assert_eq!(calls.load(Ordering::SeqCst), 2);
    assert_eq!(overlap.max(), 2, "parallel calls overlap");
    let events = h.events();
    assert_eq!(
        tool_end_ids(&events),
        ["p_fast", "p_slow"],
        "ends follow completion"
    );
    assert_eq!(
        tool_result_end_ids(&events),
        ["p_slow", "p_fast"],
        "results follow call order"
    );
    let results = h.tool_results();
    assert_eq!(result_text(&results[0]), "slow done");
    assert_eq!(result_text(&results[1]), "fast done");
    // Each call starts before any call ends.
    let last_start = events
        .iter()
        .rposition(|e| matches!(e, AgentSessionEvent::ToolExecutionStart { .. }));
    let first_end = events
        .iter()
        .position(|e| matches!(e, AgentSessionEvent::ToolExecutionEnd { .. }));
    assert!(last_start < first_end);
    // Result messages are committed after every call ended.
    let last_end = events
        .iter()
        .rposition(|e| matches!(e, AgentSessionEvent::ToolExecutionEnd { .. }));
    let first_result = events.iter().position(|e| {
        matches!(
            e,
            AgentSessionEvent::MessageStart {
                message: AgentMessage::ToolResult(_)
            }
        )
    });
    assert!(last_end < first_result);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_sequential_tool_makes_the_whole_batch_sequential() {
    let overlap = Arc::new(Overlap::default());
    let (count, count_calls) = counting_tool("count", ExecutionMode::Parallel, overlap.clone());
    let (seq, seq_calls) = counting_tool("seq", ExecutionMode::Sequential, overlap.clone());
    // Control: a parallel tool with its own counter, called in a batch without a sequential one.
    let control = Arc::new(Overlap::default());
    let (free, free_calls) = counting_tool("free", ExecutionMode::Parallel, control.clone());
    let h = harness(vec![count, seq, free]).await;
    h.mock.push(reply(
        &[],
        vec![
            call("s_a", "count", json!({})),
            call("s_b", "seq", json!({})),
            call("s_c", "count", json!({})),
        ],
        "tool_calls",
    ));
    h.mock.push(reply(
        &[],
        vec![
            call("p_a", "free", json!({})),
            call("p_b", "free", json!({})),
            call("p_c", "free", json!({})),
        ],
        "tool_calls",
    ));
    h.mock.push(Step::text("done"));
    h.run("go").await;

    assert_eq!(count_calls.load(Ordering::SeqCst), 2);
    assert_eq!(seq_calls.load(Ordering::SeqCst), 1);
    assert_eq!(free_calls.load(Ordering::SeqCst), 3);
    assert_eq!(
        overlap.max(),
        1,
        "calls of a batch with a sequential tool never overlap"
    );
    assert!(
        control.max() > 1,
        "a batch without a sequential tool runs in parallel"
    );
    let events = h.events();
    let ends = tool_end_ids(&events);
    assert_eq!(&ends[..3], ["s_a", "s_b", "s_c"]);
    assert_eq!(&tool_result_end_ids(&events)[..3], ["s_a", "s_b", "s_c"]);
}

// ---------------------------------------------------------------------------------------------
// 4. Output limit
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn length_stop_fails_every_call_without_running_it() {
    let (echo, echo_calls) = echo_tool();
    let h = harness(vec![echo]).await;
    h.mock.push(reply(
        &["Let me"],
        vec![
            call("l_1", "echo", json!({"text": "a"})),
            call("l_2", "echo", json!({"text": "b"})),
        ],
        "length",
    ));
    h.mock.push(Step::text("sorry"));
    h.run("long").await;

    assert_eq!(
        echo_calls.load(Ordering::SeqCst),
        0,
        "no call runs after a length stop"
    );
    let messages = h.messages();
    assert_eq!(
        messages[1].as_assistant().map(|a| a.stop_reason),
        Some(StopReason::Length)
    );
    let results = h.tool_results();
    assert_eq!(results.len(), 2);
    for result in &results {
        assert!(result.is_error);
        assert!(
            result_text(result).contains("output token limit"),
            "{}",
            result_text(result)
        );
    }
    let events = h.events();
    assert_eq!(tool_end_ids(&events), ["l_1", "l_2"]);
    assert!(events.iter().all(|e| match e {
        AgentSessionEvent::ToolExecutionEnd { is_error, .. } => *is_error,
        _ => true,
    }));
}

// ---------------------------------------------------------------------------------------------
// 5. Progress
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_becomes_tool_execution_updates() {
    let (tool, _) = test_tool("work", any_args(), ExecutionMode::Parallel, |call| {
        async move {
            (call.progress)(json!({"step": 1}));
            tokio::task::yield_now().await;
            (call.progress)(json!({"step": 2, "note": "halfway"}));
            ToolOutput::text("worked")
        }
        .boxed()
    });
    let h = harness(vec![tool]).await;
    h.mock.push(Step::tool_call("w_1", "work", json!({"n": 1})));
    h.mock.push(Step::text("done"));
    h.run("work").await;

    let events = h.events();
    let tool_events: Vec<&AgentSessionEvent> = events
        .iter()
        .filter(|e| e.type_name().starts_with("tool_execution"))
        .collect();
    assert_eq!(
        tool_events
            .iter()
            .map(|e| e.type_name())
            .collect::<Vec<_>>(),
        [
            "tool_execution_start",
            "tool_execution_update",
            "tool_execution_update",
            "tool_execution_end"
        ]
    );
    let updates: Vec<(String, String, Value, Value)> = events
        .iter()
        .filter_map(|e| match e {
            AgentSessionEvent::ToolExecutionUpdate {
                tool_call_id,
                tool_name,
                args,
                partial_result,
            } => Some((
                tool_call_id.clone(),
                tool_name.clone(),
                args.clone(),
                partial_result.clone(),
            )),
            _ => None,
        })
        .collect();
    assert_eq!(
        updates,
        [
            (
                "w_1".into(),
                "work".into(),
                json!({"n": 1}),
                json!({"step": 1})
            ),
            (
                "w_1".into(),
                "work".into(),
                json!({"n": 1}),
                json!({"step": 2, "note": "halfway"})
            ),
        ]
    );
    let json = serde_json::to_value(tool_events[1]).expect("json");
    assert_eq!(json["type"], "tool_execution_update");
    assert_eq!(json["partialResult"], json!({"step": 1}));
    assert_eq!(json["toolCallId"], "w_1");
}
