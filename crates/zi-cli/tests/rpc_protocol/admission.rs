//! Ids and capacity (docs/rpc.md#request-ids-and-capacity): duplicate in-flight ids, reuse after a response, and the bound of in-flight
//! requests that keeps one place for an interruption.

use super::*;

const IN_FLIGHT: &str = "RPC request id is already in flight";
const CAPACITY_ORDINARY: &str = "RPC accepts at most 32 in-flight operations";
const CAPACITY_INTERRUPT: &str = "An interruption request is already active";

/// Sends, in one write, a `session.interrupt` and then `second` (same id as the interrupt when
/// `second_id` is `None`) while a run hangs, until `second` is admitted while the interrupt is
/// still in flight. The interrupt can settle before zi reads the next record, in which case
/// `second` is legitimately admitted; that is only accepted when its response comes after the
/// interrupt's, and the attempt is repeated with a fresh run. Returns the interrupt id and the
/// frame that answered `second` in the attempt where it overlapped.
async fn while_interrupt_in_flight(
    p: &mut Harness,
    mock: &MockLlm,
    tag: &str,
    second_method: &str,
    second_id: Option<&str>,
) -> (String, Value) {
    for attempt in 0..10 {
        start_hanging_run(p, mock, &format!("{tag}-run-{attempt}")).await;
        let first = format!("{tag}-{attempt}");
        let second = second_id.map_or_else(|| first.clone(), |id| format!("{id}-{attempt}"));
        let mut both = line(&first, "session.interrupt", None);
        both.extend(line(&second, second_method, None));
        p.send_raw(&both).await;
        let interrupted = p
            .wait_for("the interrupt response", |f| {
                f["type"] == "response"
                    && f["id"] == first.as_str()
                    && f["method"] == "session.interrupt"
            })
            .await;
        assert_eq!(
            assert_success(&interrupted, &first, "session.interrupt"),
            json!({})
        );
        let answer = p
            .wait_for("the answer to the second record", |f| {
                f["id"] == second.as_str()
                    && (f["type"] == "protocol_error" || f["method"] == second_method)
            })
            .await;
        if answer["type"] == "protocol_error" || answer["ok"] == false {
            return (first, answer);
        }
        assert!(
            answer["sequence"].as_u64() > interrupted["sequence"].as_u64(),
            "{second_method} {second:?} was admitted while interrupt {first:?} was in flight: \
             {answer} / {interrupted}"
        );
        p.request_ok(&format!("{tag}-idle-{attempt}"), "session.await_idle", None)
            .await;
    }
    panic!("the second record never arrived while the interrupt was in flight (10 attempts)");
}

// ---------------------------------------------------------------------------------------------
// 4. Request ids (docs/rpc.md#request-ids-and-capacity)
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ids_duplicate_in_flight_is_rejected_with_id_and_original_still_answers_once() {
    let (mock, _env, mut p) = Env::started_with_model().await;
    start_hanging_run(&mut p, &mock, "run").await;

    p.send("w", "session.await_idle", None).await;
    p.send("w", "session.await_idle", None).await;
    let frame = p.protocol_error(Some("w")).await;
    assert_protocol_error(
        &frame,
        "invalid_request",
        IN_FLIGHT,
        Some("w"),
        "duplicate w",
    );

    // The same id in the reserved interruption slot is rejected and not launched.
    p.send("w", "session.interrupt", None).await;
    let frame = p.protocol_error(Some("w")).await;
    assert_protocol_error(
        &frame,
        "invalid_request",
        IN_FLIGHT,
        Some("w"),
        "interrupt w",
    );
    // A different method with the same id, with params, is also a duplicate.
    p.send("w", "session.get_messages", Some(json!({"start": 0})))
        .await;
    let frame = p.protocol_error(Some("w")).await;
    assert_protocol_error(
        &frame,
        "invalid_request",
        IN_FLIGHT,
        Some("w"),
        "get_messages w",
    );

    let state = p.request_ok("s1", "session.get_state", None).await;
    assert_eq!(
        state["activity"],
        json!({"type": "running"}),
        "the run goes on"
    );
    assert_eq!(
        mock.disconnects(),
        0,
        "the duplicate interrupt was not launched"
    );

    // The original is unaffected: an interrupt ends the run and w is answered once.
    assert_eq!(
        request_succeeds(&mut p, "stop", "session.interrupt", None).await,
        json!({})
    );
    let frame = p.response("w").await;
    assert_eq!(assert_success(&frame, "w", "session.await_idle"), json!({}));
    assert_eq!(mock.wait_for_disconnects(1, WAIT).await, 1);

    // Once answered, the id is free again: reuse starts a new operation.
    let frame = p.request("w", "session.get_state", None).await;
    let state = assert_success(&frame, "w", "session.get_state");
    assert_eq!(state["activity"], json!({"type": "idle"}));

    // Across the slots the other way: an interrupt is in flight and an ordinary request reuses
    // its id.
    let (i, frame) = while_interrupt_in_flight(&mut p, &mock, "i", "session.get_state", None).await;
    assert_protocol_error(&frame, "invalid_request", IN_FLIGHT, Some(&i), "ordinary i");
    assert_eq!(
        request_succeeds(&mut p, &i, "session.interrupt", None).await,
        json!({})
    );

    p.exit_by_eof().await;
    let responses_w = count_frames(&p, |f| f["type"] == "response" && f["id"] == "w");
    assert_eq!(responses_w, 2, "the first w once, the reuse once");
    let responses_i = count_frames(&p, |f| f["type"] == "response" && f["id"] == i.as_str());
    assert_eq!(responses_i, 2, "the interrupt once, the reuse once");
    let errors_w = count_frames(&p, |f| f["type"] == "protocol_error" && f["id"] == "w");
    assert_eq!(errors_w, 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ids_are_reusable_after_success_failure_and_rejection() {
    let (_env, mut p) = Env::started_without_model().await;

    // After a success.
    for _ in 0..3 {
        request_succeeds(&mut p, "same", "session.get_state", None).await;
    }
    // After a failure response: a new operation, not a replay.
    request_fails(
        &mut p,
        "f",
        "model.select",
        Some(json!({"provider": "p", "id": "x"})),
        "not_found",
        "Model not found: p/x",
    )
    .await;
    assert_eq!(
        request_succeeds(&mut p, "f", "command.list", None).await,
        json!({"commands": []})
    );
    request_fails(
        &mut p,
        "f",
        "session.prompt",
        Some(json!({"delivery": "direct", "text": "hi"})),
        "operation_failed",
        "No model selected. Use /login, then /model.",
    )
    .await;
    request_succeeds(&mut p, "f", "session.get_state", None).await;

    // A record rejected before admission never occupies its id.
    let frame = p.request("x", "session.nope", None).await;
    assert_protocol_error(
        &frame,
        "unknown_method",
        "Unknown RPC method: session.nope",
        Some("x"),
        "x",
    );
    request_succeeds(&mut p, "x", "session.get_state", None).await;

    p.exit_by_eof().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ids_can_be_reused_as_soon_as_the_response_is_read() {
    let (_env, mut p) = Env::started_without_model().await;
    // docs/rpc.md#request-ids-and-capacity: an id is free once its response has been written, so a
    // client may reuse it as soon as it has read the response, however fast it is.
    for n in 0..1000 {
        let frame = p.request("fast", "session.get_state", None).await;
        assert_eq!(frame["type"], "response", "iteration {n}: {frame}");
    }

    p.exit_by_eof().await;
}

// ---------------------------------------------------------------------------------------------
// 5. Capacity (docs/rpc.md#request-ids-and-capacity)
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn capacity_bounds_waits_and_reserves_one_interruption() {
    let (mock, _env, mut p) = Env::started_with_model().await;
    start_hanging_run(&mut p, &mock, "run").await;

    for n in 0..33 {
        p.send(&format!("wait-{n}"), "session.await_idle", None)
            .await;
    }
    let frame = p.response("wait-32").await;
    assert_failure(
        &frame,
        "wait-32",
        "session.await_idle",
        "capacity",
        CAPACITY_ORDINARY,
    );
    // Nothing else was answered meanwhile: the run hangs.
    assert_eq!(
        count_frames(&p, |f| f["type"] == "response"
            && f["id"].as_str().is_some_and(|id| id.starts_with("wait-"))),
        1
    );

    // The rejected id is free, and the interruption slot is independent of the 32. A second
    // interrupt follows in the same write, normally arriving while the first is in flight.
    let mut both = line("wait-32", "session.interrupt", None);
    both.extend(line("int-2", "session.interrupt", None));
    p.send_raw(&both).await;
    let first = p.response("wait-32").await;
    assert_eq!(
        assert_success(&first, "wait-32", "session.interrupt"),
        json!({})
    );
    let second = p.response("int-2").await;
    let overlapped = second["ok"] == false;
    if overlapped {
        assert_failure(
            &second,
            "int-2",
            "session.interrupt",
            "capacity",
            CAPACITY_INTERRUPT,
        );
    } else {
        // The first interrupt settled before int-2 was read: then int-2 must come after it.
        assert!(
            second["sequence"].as_u64() > first["sequence"].as_u64(),
            "two interrupts ran at once: {first} / {second}"
        );
    }

    for n in 0..32 {
        let id = format!("wait-{n}");
        let frame = p.response(&id).await;
        assert_eq!(assert_success(&frame, &id, "session.await_idle"), json!({}));
    }
    assert!(mock.wait_for_disconnects(1, WAIT).await >= 1);

    if !overlapped {
        let (_, frame) =
            while_interrupt_in_flight(&mut p, &mock, "ia", "session.interrupt", Some("ib")).await;
        let id = frame["id"].as_str().unwrap_or_default().to_string();
        assert_failure(
            &frame,
            &id,
            "session.interrupt",
            "capacity",
            CAPACITY_INTERRUPT,
        );
    }

    // Every slot is free again.
    let state = p.request_ok("s", "session.get_state", None).await;
    assert_eq!(state["activity"], json!({"type": "idle"}));
    request_succeeds(&mut p, "int-3", "session.interrupt", None).await;

    p.exit_by_eof().await;
    assert_eq!(
        count_frames(&p, |f| f["type"] == "response" && f["id"] == "wait-32"),
        2
    );
}
