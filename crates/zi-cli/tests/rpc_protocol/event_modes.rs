//! Event modes (docs/rpc.md#connectionset_events): `none`, changes in input order, and oversized events in
//! `activity` and `all`.

use super::*;

/// Switches the connection's event mode and checks the answer names it.
async fn set_events(p: &mut Harness, id: &str, mode: &str) {
    let params = Some(json!({"mode": mode}));
    let result = request_succeeds(p, id, "connection.set_events", params).await;
    assert_eq!(result, json!({"mode": mode}));
}

// ---------------------------------------------------------------------------------------------
// 6. Event modes (docs/rpc.md#connectionset_events)
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn event_modes_none_suppresses_only_session_events() {
    let (mock, _env, mut p) = Env::started_with_model().await;

    set_events(&mut p, "e1", "none").await;

    mock.push(Step::text("hello"));
    let result = p
        .request_ok(
            "p1",
            "session.prompt",
            Some(json!({"delivery": "direct", "text": "hi", "completionId": "c1"})),
        )
        .await;
    assert_eq!(
        result,
        json!({"delivery": "direct", "completionRevision": 1})
    );
    // The completion watch still observes the run while events are suppressed.
    let idle = p
        .request_ok(
            "w1",
            "session.await_idle",
            Some(json!({"completionId": "c1"})),
        )
        .await;
    // The v1 keys, plus the cycle's usage (issue 14.3): the one assistant message's.
    let mut idle = idle;
    let usage = idle.as_object_mut().and_then(|o| o.remove("usage"));
    assert_eq!(
        idle,
        json!({
            "completionRevision": 1,
            "messageCount": 2,
            "completion": {"text": "hello", "stopReason": "stop", "originalBytes": 5, "omittedBytes": 0}
        })
    );
    let page = p.request_ok("m1", "session.get_messages", None).await;
    assert_eq!(usage.as_ref(), Some(&page["messages"][1]["usage"]));
    let state = p.request_ok("s1", "session.get_state", None).await;
    assert_eq!(state["messageCount"], 2);
    // Protocol errors are never suppressed.
    p.send_raw(b"\n").await;
    let frame = p.protocol_error(None).await;
    assert_eq!(frame["code"], "invalid_json");

    set_events(&mut p, "e2", "all").await;
    assert_eq!(
        p.event_types(),
        Vec::<String>::new(),
        "no session_event while the mode was none"
    );

    mock.push(Step::text("again"));
    p.request_ok("p2", "session.prompt", prompt_params("more"))
        .await;
    p.request_ok("w2", "session.await_idle", None).await;
    p.event("agent_settled").await;
    let types = p.event_types();
    assert_eq!(
        types.first().map(String::as_str),
        Some("agent_start"),
        "{types:?}"
    );
    assert!(types.iter().any(|t| t == "message_end"), "{types:?}");

    activity_mode_lets_events_flow(&mut p, &mock).await;

    p.exit_by_eof().await;
    let seq = sequences(&p);
    assert_eq!(seq, (1..=seq.len() as u64).collect::<Vec<_>>());
}

/// `activity` is accepted and events flow (never leaving sequence gaps; the harness checks).
async fn activity_mode_lets_events_flow(p: &mut Harness, mock: &MockLlm) {
    set_events(p, "e3", "activity").await;
    let before = p.event_types().len();
    mock.push(Step::text("third"));
    p.request_ok("p3", "session.prompt", prompt_params("third"))
        .await;
    p.request_ok("w3", "session.await_idle", None).await;
    p.event("agent_settled").await;
    assert!(p.event_types().len() > before);
    let state = p.request_ok("s2", "session.get_state", None).await;
    assert_eq!(state["messageCount"], 6);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn event_mode_changes_apply_in_input_order() {
    let (mock, _env, mut p) = Env::started_with_model().await;
    mock.push(Step::text("quiet"));
    // Mode none, then a prompt, in one write: not a single event of the run may be sent.
    let mut bytes = line("e", "connection.set_events", Some(json!({"mode": "none"})));
    bytes.extend(line("p", "session.prompt", prompt_params("x")));
    bytes.extend(line("w", "session.await_idle", None));
    p.send_raw(&bytes).await;
    p.response("w").await;
    request_succeeds(
        &mut p,
        "e2",
        "connection.set_events",
        Some(json!({"mode": "all"})),
    )
    .await;
    assert_eq!(p.event_types(), Vec::<String>::new());
    let order: Vec<&str> = p.frames().iter().filter_map(|f| f["id"].as_str()).collect();
    assert_eq!(order, ["e", "p", "w", "e2"]);
    p.exit_by_eof().await;
}

/// 17 MiB of reply text in one delta: every event carrying it is larger than an output record.
const HUGE_REPLY: usize = 17 * 1024 * 1024;
const HUGE_REPLY_DEADLINE: Duration = Duration::from_secs(180);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn event_mode_activity_drops_oversized_events_without_sequence_gaps() {
    let (mock, _env, mut p) = Env::started_with_model().await;
    // 17 MiB through a debug build on a loaded machine: a deadline for hangs, not speed.
    p.set_timeout(HUGE_REPLY_DEADLINE);
    p.request_ok(
        "e",
        "connection.set_events",
        Some(json!({"mode": "activity"})),
    )
    .await;
    mock.push(Step::Bytes {
        total_bytes: HUGE_REPLY,
        delta_bytes: HUGE_REPLY,
    });
    p.request_ok(
        "p",
        "session.prompt",
        Some(json!({"delivery": "direct", "text": "big", "completionId": "huge"})),
    )
    .await;
    let idle = p
        .request_ok(
            "w",
            "session.await_idle",
            Some(json!({"completionId": "huge"})),
        )
        .await;
    assert_eq!(idle["completionRevision"], 1);
    assert_eq!(idle["messageCount"], 2);
    let completion = &idle["completion"];
    assert_eq!(completion["stopReason"], "stop");
    assert_eq!(completion["originalBytes"], HUGE_REPLY);
    assert_eq!(completion["omittedBytes"], HUGE_REPLY - 51_200);
    assert_eq!(completion["text"].as_str().map(str::len), Some(51_200));
    p.event("agent_settled").await;

    // The connection survived; the oversized events were dropped, the small ones delivered.
    let types = p.event_types();
    assert!(types.iter().any(|t| t == "agent_start"), "{types:?}");
    assert!(
        !p.frames().iter().any(|f| f["type"] == "session_event"
            && f["event"]["type"] == "message_end"
            && f["event"]["message"]["role"] == "assistant"),
        "an assistant message_end over 16 MiB was sent"
    );

    // A message over the page byte bound fails the page that reaches it.
    request_fails(
        &mut p,
        "m",
        "session.get_messages",
        None,
        "operation_failed",
        "Session message 1 exceeds the RPC page byte bound",
    )
    .await;
    let page = p
        .request_ok("m0", "session.get_messages", Some(json!({"limit": 1})))
        .await;
    assert_eq!(page["total"], 2);
    assert_eq!(page["nextStart"], 1);
    assert_eq!(page["messages"][0]["role"], "user");

    p.exit_by_eof().await;
    let seq = sequences(&p);
    assert_eq!(seq, (1..=seq.len() as u64).collect::<Vec<_>>());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn event_mode_all_fails_the_connection_on_an_oversized_event() {
    let (mock, _env, mut p) = Env::started_with_model().await;
    // 17 MiB through a debug build on a loaded machine: a deadline for hangs, not speed.
    p.set_timeout(HUGE_REPLY_DEADLINE);
    mock.push(Step::Bytes {
        total_bytes: HUGE_REPLY,
        delta_bytes: HUGE_REPLY,
    });
    p.request_ok("p", "session.prompt", prompt_params("big"))
        .await;
    let exited = p.wait_exit(HUGE_REPLY_DEADLINE).await;
    assert_eq!(exited.code, Some(1));
    assert!(
        exited
            .stderr
            .lines()
            .any(|l| l == "RPC output records cannot exceed 16777216 bytes"),
        "{}",
        exited.stderr
    );
    let seq = sequences(&p);
    assert_eq!(seq, (1..=seq.len() as u64).collect::<Vec<_>>());
}
