//! How the client reads what a server writes (docs/rpc.md#frames): one frame at a time through
//! [`handle_frame`] on in-memory state — the sequence check, `ready` first, responses handed to
//! the request whose id they carry, protocol errors, events to every subscriber, frame taps —
//! and [`Shared::fail`], which ends every pending request with the first fatal error. The
//! pipes and the process around it are tested in `client_tests.rs`.

use serde_json::json;
use tokio::sync::Semaphore;

use super::*;

fn shared(raw_requests: bool) -> Shared {
    Shared {
        pending: Mutex::new(HashMap::new()),
        subscribers: Mutex::new(Vec::new()),
        frame_taps: Mutex::new(Vec::new()),
        fatal: Mutex::new(None),
        stderr: Mutex::new(VecDeque::new()),
        stderr_tail_bytes: 1024,
        raw_requests,
        ready: Mutex::new(None),
        failed: watch::Sender::new(false),
    }
}

/// A request `id` of `method` waiting for its answer.
fn pending(shared: &Shared, id: &str, method: &str) -> oneshot::Receiver<Result<Value>> {
    let (reply, answer) = oneshot::channel();
    let slot = Arc::new(Semaphore::new(1)).try_acquire_owned();
    let Ok(slot) = slot else {
        panic!("a fresh semaphore has a permit");
    };
    lock(&shared.pending).insert(
        id.to_string(),
        PendingRequest {
            method: method.to_string(),
            reply,
            _slot: slot,
        },
    );
    answer
}

/// Hands one frame (`sequence` = `*expected` unless the frame has its own) to the client.
fn feed(shared: &Shared, expected: &mut u64, mut frame: Value) -> Result<bool> {
    if frame.get("sequence").is_none() {
        frame["sequence"] = json!(*expected);
    }
    frame["version"] = json!(1);
    let line = serde_json::to_vec(&frame).unwrap_or_default();
    handle_frame(&line, &line, expected, shared)
}

/// A connection past its `ready` frame: the next sequence is 2.
fn after_ready(raw_requests: bool) -> (Shared, u64) {
    let shared = shared(raw_requests);
    let mut expected = 1;
    let ready = feed(
        &shared,
        &mut expected,
        json!({"type": "ready", "state": {}}),
    );
    assert!(matches!(ready, Ok(true)), "{ready:?}");
    (shared, expected)
}

fn response(id: &str, method: &str, result: Value) -> Value {
    json!({"type": "response", "id": id, "method": method, "ok": true, "result": result})
}

fn invalid_frame(outcome: Result<bool>) -> String {
    match outcome {
        Err(Error::InvalidFrame(what)) => what,
        other => panic!("not an invalid frame: {other:?}"),
    }
}

#[test]
fn ready_is_exactly_the_first_frame_and_carries_a_state() {
    let shared = shared(false);
    let mut expected = 1;
    let event = json!({"type": "session_event", "event": {"type": "agent_start"}});
    let what = invalid_frame(feed(&shared, &mut expected, event));
    assert!(
        what.starts_with("ready must be exactly the first frame"),
        "{what}"
    );

    let (shared, mut expected) = after_ready(false);
    assert_eq!(*lock(&shared.ready), Some(json!({})));
    let what = invalid_frame(feed(
        &shared,
        &mut expected,
        json!({"type": "ready", "state": {}}),
    ));
    assert!(
        what.starts_with("ready must be exactly the first frame"),
        "{what}"
    );

    let mut expected = 1;
    let bare = feed(&shared, &mut expected, json!({"type": "ready"}));
    assert_eq!(invalid_frame(bare), "ready without a state object");
}

#[test]
fn a_sequence_gap_is_fatal_and_names_both_numbers() {
    let (shared, mut expected) = after_ready(false);
    let event = json!({"type": "session_event", "event": {}});
    assert!(matches!(
        feed(&shared, &mut expected, event.clone()),
        Ok(false)
    ));
    assert_eq!(expected, 3);
    let mut skipped = event.clone();
    skipped["sequence"] = json!(5);
    let gap = feed(&shared, &mut expected, skipped);
    assert!(
        matches!(
            gap,
            Err(Error::SequenceGap {
                expected: 3,
                received: 5
            })
        ),
        "{gap:?}"
    );
    let mut unnumbered = event;
    unnumbered["sequence"] = json!("3");
    let what = invalid_frame(feed(&shared, &mut expected, unnumbered));
    assert!(what.starts_with("no integer sequence"), "{what}");
}

#[test]
fn lines_that_are_not_version_1_frames_are_invalid() {
    let shared = shared(false);
    for line in [
        &b"not json"[..],
        b"[1]",
        br#"{"version":2,"sequence":1,"type":"ready"}"#,
    ] {
        let mut expected = 1;
        let what = invalid_frame(handle_frame(line, line, &mut expected, &shared));
        assert!(
            what.contains(&String::from_utf8_lossy(line).to_string()),
            "{what}"
        );
    }
    let mut expected = 1;
    let unknown = feed(&shared, &mut expected, json!({"type": "surprise"}));
    assert!(
        matches!(&unknown, Err(Error::UnknownFrameType(line)) if line.contains("surprise")),
        "{unknown:?}"
    );
}

#[test]
fn a_preview_keeps_300_bytes_of_a_long_line() {
    assert_eq!(preview(b"short"), "short");
    let long = "x".repeat(301);
    assert_eq!(preview(long.as_bytes()), format!("{}…", &long[..300]));
}

#[test]
fn responses_reach_the_request_with_their_id_in_any_order() {
    let (shared, mut expected) = after_ready(false);
    let mut first = pending(&shared, "1", "session.get_state");
    let mut second = pending(&shared, "2", "command.list");

    let answer = feed(
        &shared,
        &mut expected,
        response("2", "command.list", json!([2])),
    );
    assert!(matches!(answer, Ok(false)));
    assert!(matches!(second.try_recv(), Ok(Ok(result)) if result == json!([2])));
    assert!(first.try_recv().is_err(), "the first is still waiting");

    let failed = json!({"type": "response", "id": "1", "method": "session.get_state", "ok": false,
        "error": {"code": "operation_failed", "message": "no"}});
    assert!(matches!(feed(&shared, &mut expected, failed), Ok(false)));
    let outcome = first.try_recv();
    assert!(
        matches!(&outcome, Ok(Err(Error::Response { method, code: ResponseErrorCode::OperationFailed, message }))
            if method == "session.get_state" && message == "no"),
        "{outcome:?}"
    );
    assert!(lock(&shared.pending).is_empty());
}

#[test]
fn a_response_nobody_asked_for_is_fatal_unless_requests_are_raw() {
    let (shared, mut expected) = after_ready(false);
    let stray = response("9", "session.get_state", json!({}));
    let what = invalid_frame(feed(&shared, &mut expected, stray.clone()));
    assert!(
        what.starts_with("response to an unknown request id"),
        "{what}"
    );

    let (raw, mut expected) = after_ready(true);
    assert!(matches!(feed(&raw, &mut expected, stray), Ok(false)));
}

#[test]
fn a_response_must_echo_its_method_and_say_ok() {
    let (shared, mut expected) = after_ready(false);
    let _answer = pending(&shared, "1", "session.get_state");
    let wrong = response("1", "command.list", json!({}));
    let what = invalid_frame(feed(&shared, &mut expected, wrong));
    assert_eq!(
        what,
        "response echoes command.list for a session.get_state request"
    );

    let _answer = pending(&shared, "2", "session.get_state");
    let no_ok = json!({"type": "response", "id": "2", "method": "session.get_state"});
    let what = invalid_frame(feed(&shared, &mut expected, no_ok));
    assert!(
        what.starts_with("response without id, method or ok"),
        "{what}"
    );

    let mut answer = pending(&shared, "3", "session.get_state");
    let bad_code = json!({"type": "response", "id": "3", "method": "session.get_state",
        "ok": false, "error": {"code": "teapot", "message": "no"}});
    let decoded = feed(&shared, &mut expected, bad_code);
    assert!(
        matches!(&decoded, Err(Error::Decode { what, .. }) if what == "response error code"),
        "{decoded:?}"
    );
    assert!(answer.try_recv().is_err(), "the request was not answered");
}

#[test]
fn a_recoverable_protocol_error_fails_only_the_request_it_names() {
    let (shared, mut expected) = after_ready(false);
    let mut named = pending(&shared, "1", "session.prompt");
    let mut other = pending(&shared, "2", "session.get_state");
    let error = json!({"type": "protocol_error", "id": "1", "code": "invalid_request",
        "message": "RPC request contains unknown fields"});
    assert!(matches!(feed(&shared, &mut expected, error), Ok(false)));
    let outcome = named.try_recv();
    assert!(
        matches!(&outcome, Ok(Err(Error::Protocol { code: ProtocolErrorCode::InvalidRequest, id: Some(id), .. })) if id == "1"),
        "{outcome:?}"
    );
    assert!(other.try_recv().is_err(), "the other request still waits");

    let unnamed = json!({"type": "protocol_error", "code": "invalid_json", "message": "m"});
    let fatal = feed(&shared, &mut expected, unnamed.clone());
    assert!(
        matches!(fatal, Err(Error::Protocol { id: None, .. })),
        "{fatal:?}"
    );
    let framing = json!({"type": "protocol_error", "id": "2", "code": "invalid_framing",
        "message": "m"});
    let fatal = feed(&shared, &mut expected, framing);
    assert!(
        matches!(
            fatal,
            Err(Error::Protocol {
                code: ProtocolErrorCode::InvalidFraming,
                ..
            })
        ),
        "{fatal:?}"
    );
    assert!(
        other.try_recv().is_err(),
        "a fatal error is not one request's answer"
    );

    let (raw, mut expected) = after_ready(true);
    assert!(matches!(feed(&raw, &mut expected, unnamed), Ok(false)));
}

#[test]
fn events_reach_every_live_subscriber_in_order() {
    let (shared, mut expected) = after_ready(false);
    let (first, mut first_rx) = mpsc::unbounded_channel();
    let (second, mut second_rx) = mpsc::unbounded_channel();
    let (gone, gone_rx) = mpsc::unbounded_channel();
    drop(gone_rx);
    lock(&shared.subscribers).extend([first, gone, second]);
    for kind in ["agent_start", "agent_end"] {
        let event = json!({"type": "session_event", "event": {"type": kind}});
        assert!(matches!(feed(&shared, &mut expected, event), Ok(false)));
    }
    assert_eq!(
        lock(&shared.subscribers).len(),
        2,
        "the closed one was dropped"
    );
    for rx in [&mut first_rx, &mut second_rx] {
        let got: Vec<(u64, String)> = std::iter::from_fn(|| rx.try_recv().ok())
            .map(|e| (e.sequence, e.kind().to_string()))
            .collect();
        assert_eq!(
            got,
            [(2, "agent_start".to_string()), (3, "agent_end".to_string())]
        );
    }
    let bare = json!({"type": "session_event", "event": "agent_start"});
    let what = invalid_frame(feed(&shared, &mut expected, bare));
    assert!(
        what.starts_with("session_event without an event object"),
        "{what}"
    );
}

#[test]
fn taps_see_each_line_as_received() {
    let shared = shared(false);
    let (tap, mut tapped) = mpsc::unbounded_channel();
    lock(&shared.frame_taps).push(tap);
    let raw = br#"{"version":1,"sequence":1,"type":"ready","state":{}}"#.to_vec();
    let mut with_cr = raw.clone();
    with_cr.push(b'\r');
    let mut expected = 1;
    assert!(matches!(
        handle_frame(&raw, &with_cr, &mut expected, &shared),
        Ok(true)
    ));
    let approval = json!({"type": "approval_request", "id": "a"});
    assert!(matches!(feed(&shared, &mut expected, approval), Ok(false)));
    let first = tapped.try_recv();
    assert!(
        matches!(&first, Ok(TappedFrame { line, frame }) if *line == with_cr && frame["type"] == "ready"),
        "{first:?}"
    );
    assert!(
        matches!(tapped.try_recv(), Ok(TappedFrame { frame, .. }) if frame["type"] == "approval_request")
    );
}

#[test]
fn the_first_fatal_error_fails_every_pending_request() {
    let (shared, _) = after_ready(false);
    let mut answers = [pending(&shared, "1", "a.b"), pending(&shared, "2", "c.d")];
    let (subscriber, mut events) = mpsc::unbounded_channel::<SessionEvent>();
    lock(&shared.subscribers).push(subscriber);
    shared.fail(Error::SequenceGap {
        expected: 4,
        received: 6,
    });
    shared.fail(shared.closed("stdout closed"));
    for answer in &mut answers {
        let outcome = answer.try_recv();
        assert!(
            matches!(
                outcome,
                Ok(Err(Error::SequenceGap {
                    expected: 4,
                    received: 6
                }))
            ),
            "{outcome:?}"
        );
    }
    assert!(
        matches!(shared.fatal(), Some(Error::SequenceGap { .. })),
        "the first one stays"
    );
    assert!(lock(&shared.pending).is_empty());
    assert!(matches!(
        events.try_recv(),
        Err(mpsc::error::TryRecvError::Disconnected)
    ));
    assert!(*shared.failed.borrow());
}
