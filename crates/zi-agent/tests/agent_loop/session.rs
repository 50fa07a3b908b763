//! The run's lifecycle, message pages, context usage, operation outcomes, and approvals when the
//! connection goes away (docs/rpc.md#event-order, docs/rpc.md#sessionget_outcomes).

use super::*;

// ---------------------------------------------------------------------------------------------
// 9. Run lifecycle, agent_end and message pages
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lifecycle_events_and_message_pages() {
    let (echo, _) = echo_tool();
    let h = harness(vec![echo]).await;
    assert_eq!(h.session.state().message_count, 0);
    h.mock
        .push(Step::tool_call("e_1", "echo", json!({"text": "one"})));
    h.mock.push(Step::text("done one"));
    h.run("first").await;
    assert_eq!(h.count("agent_start"), 1);
    assert_eq!(h.count("agent_end"), 1);
    assert_eq!(h.count("agent_settled"), 1);
    let first_run_messages = h.messages();
    assert_eq!(first_run_messages.len(), 4);
    let agent_end = |events: &[AgentSessionEvent]| {
        events
            .iter()
            .find_map(|e| match e {
                AgentSessionEvent::AgentEnd {
                    messages,
                    will_retry,
                } => Some((messages.clone(), *will_retry)),
                _ => None,
            })
            .expect("agent_end")
    };
    let (messages, will_retry) = agent_end(&h.events());
    assert_eq!(
        messages, first_run_messages,
        "agent_end lists the run's messages"
    );
    assert!(!will_retry);
    // The subscriber context sees the committed count.
    let counts = h.event_counts();
    assert_eq!(counts.last(), Some(&4));
    assert_eq!(h.session.state().message_count, 4);

    h.clear_events();
    h.mock.push(Step::text("done two"));
    h.run("second").await;
    let labels = h.labels();
    assert_eq!(labels.first().map(String::as_str), Some("agent_start"));
    assert_eq!(labels.last().map(String::as_str), Some("agent_settled"));
    assert_eq!(h.count("agent_start"), 1);
    assert_eq!(h.count("agent_end"), 1);
    assert_eq!(h.count("agent_settled"), 1);
    let all = h.messages();
    assert_eq!(all.len(), 6);
    let (messages, _) = agent_end(&h.events());
    assert_eq!(messages, all[4..].to_vec(), "only this run's messages");
    assert_eq!(h.session.state().message_count, 6);
    assert_eq!(h.session.message_count(), 6);

    // Paging.
    let page = h.session.messages_page(0, 4).expect("page");
    assert_eq!((page.start, page.total, page.next_start), (0, 6, Some(4)));
    assert_eq!(page.messages, all[..4].to_vec());
    let page = h.session.messages_page(4, 4).expect("page");
    assert_eq!((page.start, page.total, page.next_start), (4, 6, None));
    assert_eq!(page.messages, all[4..].to_vec());
    let page = h.session.messages_page(2, 3).expect("page");
    assert_eq!((page.start, page.total, page.next_start), (2, 6, Some(5)));
    assert_eq!(page.messages, all[2..5].to_vec());
    let page = h.session.messages_page(6, 10).expect("page");
    assert_eq!((page.start, page.total, page.next_start), (6, 6, None));
    assert!(page.messages.is_empty());
    let page = h.session.messages_page(99, 1).expect("page");
    assert_eq!((page.start, page.total, page.next_start), (99, 6, None));
    assert!(page.messages.is_empty());
    let page = h.session.messages_page(1, 0).expect("page");
    assert_eq!((page.start, page.total, page.next_start), (1, 6, Some(1)));
    assert!(page.messages.is_empty());
    let json = serde_json::to_value(h.session.messages_page(5, 5).expect("page")).expect("json");
    assert_eq!(json["nextStart"], Value::Null);
    assert_eq!(json["total"], 6);
}

// ---------------------------------------------------------------------------------------------
// 10. Context usage
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn context_usage_is_estimated_then_measured() {
    let h = harness(Vec::new()).await;
    assert_eq!(
        h.session.state().context_usage,
        ContextUsage::Estimated {
            tokens: 0,
            context_window: 128_000,
            percent: 0.0
        }
    );
    h.mock.push(Step::Reply {
        thinking: Vec::new(),
        text: vec!["hello".into()],
        tool_calls: Vec::new(),
        finish_reason: "stop".into(),
        usage: Some(MockUsage {
            prompt_tokens: 100,
            completion_tokens: 20,
            cached_tokens: 0,
        }),
    });
    h.run("hi").await;
    let measured = ContextUsage::Measured {
        tokens: 120,
        context_window: 128_000,
        percent: 120.0 / 128_000.0 * 100.0,
    };
    assert_eq!(h.session.state().context_usage, measured);
    let usage = h.last_assistant().usage;
    assert_eq!(
        (usage.input, usage.output, usage.total_tokens),
        (100, 20, 120)
    );
    // Queued input is not part of the context.
    h.queue(Delivery::FollowUp, "later");
    assert_eq!(h.session.state().context_usage, measured);

    let no_model = harness_with(Options {
        with_model: false,
        ..Options::default()
    })
    .await;
    assert_eq!(
        no_model.session.state().context_usage,
        ContextUsage::Unavailable {
            reason: UnavailableReason::NoModel
        }
    );
}

// ---------------------------------------------------------------------------------------------
// Session host: operation outcomes and work plans (docs/rpc.md#sessionget_outcomes,
// docs/rpc.md#event-order, docs/rpc.md#operation-outcomes)
// ---------------------------------------------------------------------------------------------

fn outcome(id: &str) -> zi_protocol::event::OperationOutcome {
    zi_protocol::event::OperationOutcome {
        operation_id: id.to_string(),
        capability: "shell".into(),
        operation: "background_task".into(),
        result: zi_protocol::event::OutcomeResult::Succeeded,
        duration_ms: 1,
        evidence: json!({"taskId": id}),
    }
}

#[tokio::test]
async fn host_outcomes_are_unique_ordered_and_paged() {
    let results = Arc::new(Mutex::new(Vec::new()));
    let sink = results.clone();
    let (tool, _) = test_tool("record", any_args(), ExecutionMode::Parallel, move |call| {
        let sink = sink.clone();
        async move {
            let mut results = lock(&sink);
            results.push(call.host.append_outcome(outcome("op/1")).map(|_| ()));
            results.push(call.host.append_outcome(outcome("op/1")).map(|_| ()));
            results.push(call.host.append_outcome(outcome("op/2")).map(|_| ()));
            let mut bad = outcome("op/3");
            bad.capability = "Bad".into();
            results.push(call.host.append_outcome(bad).map(|_| ()));
            results.push(
                call.host
                    .replace_work_plan(None, Vec::new())
                    .map(|plan| assert_eq!(plan.revision, 1)),
            );
            // details.outcome == "error" marks the result as an error.
            ToolOutput {
                content: vec![ContentBlock::text("failed")],
                details: Some(json!({"outcome": "error", "code": "x"})),
                is_error: false,
            }
        }
        .boxed()
    });
    let h = harness(vec![tool]).await;
    h.mock.push(Step::tool_call("c1", "record", json!({})));
    h.mock.push(Step::text("done"));
    h.run("go").await;
    let results = lock(&results).clone();
    assert_eq!(results[0], Ok(()));
    assert_eq!(
        results[1].as_ref().map_err(ToString::to_string),
        Err("Operation outcome already exists: op/1".to_string())
    );
    assert_eq!(results[2], Ok(()));
    assert!(results[3].is_err());
    assert_eq!(results[4], Ok(()));

    let events = h.events();
    let names: Vec<&str> = events
        .iter()
        .filter(|e| match e {
            AgentSessionEvent::EntryAppended { entry } => entry.data.type_name() != "message",
            AgentSessionEvent::OperationOutcome { .. }
            | AgentSessionEvent::WorkPlanChanged { .. } => true,
            _ => false,
        })
        .map(AgentSessionEvent::type_name)
        .collect();
    assert_eq!(
        names,
        [
            "entry_appended",
            "operation_outcome",
            "entry_appended",
            "operation_outcome",
            "entry_appended",
            "work_plan_changed"
        ]
    );
    let end = events
        .iter()
        .find_map(|e| match e {
            AgentSessionEvent::ToolExecutionEnd { is_error, .. } => Some(*is_error),
            _ => None,
        })
        .expect("tool end");
    assert!(end);

    let page = h.session.outcomes_page(0, 1);
    assert_eq!((page.start, page.total, page.next_start), (0, 2, Some(1)));
    let rest = h.session.outcomes_page(1, 100);
    assert_eq!((rest.start, rest.total, rest.next_start), (1, 2, None));
    let live: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            AgentSessionEvent::OperationOutcome { outcome } => Some(outcome.clone()),
            _ => None,
        })
        .collect();
    let paged: Vec<_> = page.outcomes.into_iter().chain(rest.outcomes).collect();
    assert_eq!(paged, live);
    assert_eq!(h.session.outcomes_page(5, 10).outcomes.len(), 0);
    assert_eq!(h.session.state().work_plan.revision, 1);
}

// ---------------------------------------------------------------------------------------------
// Approvals: the connection goes away
// ---------------------------------------------------------------------------------------------

/// Opts a connection in with policy `untrusted`; the sink counts the requests it was sent.
fn opt_in_untrusted(session: &AgentSession) -> Arc<AtomicUsize> {
    use zi_agent::session::approvals::{ApprovalFrame, ApprovalSink};
    let requests = Arc::new(AtomicUsize::new(0));
    let counter = requests.clone();
    let sink: ApprovalSink = Arc::new(move |frame: ApprovalFrame<'_>| {
        if matches!(frame, ApprovalFrame::Request(_)) {
            counter.fetch_add(1, Ordering::SeqCst);
        }
    });
    let params = zi_protocol::params::SetApprovalsParams {
        enabled: true,
        policy: Some(zi_protocol::approval::ApprovalPolicy::Untrusted),
        sandbox: None,
        rules: None,
        timeout_ms: None,
    };
    session
        .set_approvals(params, sink)
        .expect("approvals enabled");
    requests
}

/// Waits until the sink was sent `count` requests.
async fn sent(requests: &AtomicUsize, count: usize) {
    let deadline = tokio::time::Instant::now() + WAIT;
    while requests.load(Ordering::SeqCst) < count {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{count} approval requests sent"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// The evidence `source` of every journaled approval outcome.
fn approval_sources(session: &AgentSession) -> Vec<String> {
    session
        .outcomes_page(0, 100)
        .outcomes
        .iter()
        .filter_map(|entry| match &entry.data {
            zi_protocol::event::EntryData::OperationOutcome(o) if o.capability == "approval" => {
                Some(
                    o.evidence["source"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string(),
                )
            }
            _ => None,
        })
        .collect()
}

/// The ordering the EOF race produced, constructed: the connection disconnects while calls
/// wait for approval and nothing else stops the run. The disconnect itself takes the stop path
/// (docs/approvals.md#timeouts-interruption-and-eof): the pending requests end
/// `cancelled`/`disconnect`, the calls queued behind them end aborted without running or being
/// journaled as `unattended`, and the run settles without another provider request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_disconnect_with_queued_approvals_stops_the_run() {
    // 18 parallel calls: 16 pending, 2 queued for a slot.
    let (echo, echoed) = echo_tool();
    let h = harness(vec![echo]).await;
    let requests = opt_in_untrusted(&h.session);
    let calls: Vec<MockToolCall> = (0..18)
        .map(|i| call(&format!("e{i}"), "echo", json!({"text": "x"})))
        .collect();
    h.mock.push(reply(&[], calls, "tool_calls"));
    h.mock.push(Step::text("not reached"));
    h.start("go");
    sent(&requests, 16).await;
    h.session.disconnect_approvals();
    h.idle().await;
    assert_eq!(approval_sources(&h.session), vec!["disconnect"; 16]);
    assert_eq!(echoed.load(Ordering::SeqCst), 0, "no call ran");
    let results = h.tool_results();
    assert_eq!(results.len(), 18);
    let aborted = results
        .iter()
        .filter(|r| result_text(r) == "Tool execution was aborted")
        .count();
    assert_eq!(aborted, 2, "the queued calls end aborted");
    assert_eq!(h.mock.requests().len(), 1, "the run stopped");

    // A sequential batch: one pending, the later calls not reached yet.
    let (tool, ran) = test_tool("step", any_args(), ExecutionMode::Sequential, |_| {
        async { ToolOutput::text("ran") }.boxed()
    });
    let h = harness(vec![tool]).await;
    let requests = opt_in_untrusted(&h.session);
    let calls: Vec<MockToolCall> = (0..3)
        .map(|i| call(&format!("s{i}"), "step", json!({})))
        .collect();
    h.mock.push(reply(&[], calls, "tool_calls"));
    h.mock.push(Step::text("not reached"));
    h.start("go");
    sent(&requests, 1).await;
    h.session.disconnect_approvals();
    h.idle().await;
    assert_eq!(approval_sources(&h.session), vec!["disconnect"]);
    assert_eq!(ran.load(Ordering::SeqCst), 0, "no call ran");
    assert_eq!(requests.load(Ordering::SeqCst), 1, "nothing asked after");
    assert_eq!(h.mock.requests().len(), 1, "the run stopped");
}

/// An assistant message's `message_start` names the journal entry it is committed as, so a
/// client that shows it while it streams (ACP's `messageId`) names it as a replay of the journal
/// does; other events carry no id.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn assistant_message_start_names_its_journal_entry() {
    let (echo, _) = echo_tool();
    let h = harness(vec![echo]).await;
    type Seen = Vec<(String, Option<String>)>;
    let seen: Arc<Mutex<Seen>> = Arc::default();
    let sink = seen.clone();
    h.session.subscribe(Arc::new(
        move |event: &AgentSessionEvent, context: &EventContext| {
            let label = match event {
                AgentSessionEvent::MessageStart { message } => format!("start:{}", role(message)),
                AgentSessionEvent::EntryAppended { entry } => format!("entry:{}", entry.id),
                _ => return,
            };
            sink.lock()
                .unwrap()
                .push((label, context.message_id.clone()));
        },
    ));
    h.mock
        .push(Step::tool_call("call_1", "echo", json!({"text": "hi"})));
    h.mock.push(Step::text("all done"));
    h.run("please echo").await;
    let seen = seen.lock().unwrap().clone();
    let announced: Vec<String> = seen
        .iter()
        .filter(|(label, _)| label == "start:assistant")
        .map(|(_, id)| {
            id.clone()
                .expect("an assistant message_start carries its id")
        })
        .collect();
    assert_eq!(announced.len(), 2, "{seen:?}");
    for id in &announced {
        let entry = format!("entry:{id}");
        assert!(
            seen.iter().any(|(label, _)| *label == entry),
            "the entry {id} was journaled: {seen:?}"
        );
    }
    assert!(
        seen.iter()
            .filter(|(label, _)| label != "start:assistant")
            .all(|(_, id)| id.is_none()),
        "{seen:?}"
    );
    let journal_ids: Vec<String> = h
        .session
        .entries_page(0, 100)
        .expect("entries")
        .entries
        .iter()
        .filter(|e| serde_json::to_value(e).unwrap()["message"]["role"] == "assistant")
        .map(|e| e.id.clone())
        .collect();
    assert_eq!(journal_ids, announced);
}

/// A run that ends with an error leaves its follow-ups queued; `run_queued_follow_up` starts
/// the next run with the first of them (and refuses while busy or with nothing queued).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follow_up_left_by_a_failed_run_starts_the_next_run() {
    let (gate, gate_ctl) = gate_tool();
    let h = harness(vec![gate]).await;
    let failure = Step::HttpError {
        status: 400,
        message: "bad request".into(),
    };
    h.start_at_the_gate(&gate_ctl, vec![failure, Step::text("later done")])
        .await;
    h.queue(Delivery::FollowUp, "later");
    assert!(
        h.session.run_queued_follow_up().is_none(),
        "refused while a run is active"
    );
    gate_ctl.open();
    h.idle().await;
    assert_eq!(h.last_assistant().stop_reason, StopReason::Error);
    assert_eq!(h.session.state().queued_inputs.follow_up.len(), 1);
    let starter = h.session.run_queued_follow_up().expect("a run starts");
    drop(starter);
    h.idle().await;
    assert!(h.session.state().queued_inputs.follow_up.is_empty());
    assert_eq!(
        h.messages()
            .iter()
            .filter_map(user_text)
            .collect::<Vec<_>>(),
        ["go", "later"]
    );
    assert_eq!(h.last_assistant().text(), "later done");
    assert!(h.session.run_queued_follow_up().is_none(), "nothing queued");
}
