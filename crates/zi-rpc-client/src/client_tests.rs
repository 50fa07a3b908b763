//! The client around a real server process (docs/rpc.md#frames,
//! docs/rpc.md#shutdown-eof-signals-and-exit-codes): the wait for `ready`, requests answered out
//! of order, events and a sequence gap read from a real pipe, and how the connection ends — a
//! clean exit, a failing exit with its stderr, a server that ignores EOF, a server that dies with
//! a request in flight. The servers are small Python
//! scripts speaking Zi RPC v1 frames, so each misbehaviour is exact; zi itself is driven through
//! this client by zi-cli's tests (tests/rpc_client.rs).

use std::time::Duration;

use serde_json::json;

use crate::{ClientBuilder, Error};

/// A server whose behaviour after `ready` is the Python code `body`, with `send(frame)` (numbers
/// the frame) and `requests()` (yields each request record) defined.
fn server(body: &str) -> ClientBuilder {
    let script = format!(
        "import json, sys\n\
         sequence = 0\n\
         def send(frame):\n    \
             global sequence\n    \
             sequence += 1\n    \
             frame.setdefault('sequence', sequence)\n    \
             sys.stdout.write(json.dumps(dict(version=1, **frame)) + '\\n')\n    \
             sys.stdout.flush()\n\
         def requests():\n    \
             for line in sys.stdin:\n        \
                 yield json.loads(line)\n\
         def answer(request, result):\n    \
             send(dict(type='response', id=request['id'], method=request['method'], ok=True, result=result))\n\
         send(dict(type='ready', state={{}}))\n\
         {body}\n"
    );
    ClientBuilder::new("python3")
        .args(["-c", &script])
        .ready_timeout(Duration::from_secs(20))
        .close_grace(Duration::from_secs(10))
}

#[tokio::test]
async fn a_server_that_exits_before_ready_is_reported_closed() {
    let builder = ClientBuilder::new("sh").args(["-c", "exit 3"]);
    let outcome = builder.spawn().await;
    assert!(
        matches!(&outcome, Err(Error::Closed { reason, .. }) if reason == "stdout closed"),
        "{:?}",
        outcome.err()
    );
}

#[tokio::test]
async fn a_server_that_never_sends_ready_times_out() {
    let builder = ClientBuilder::new("sh")
        .args(["-c", "echo starting >&2; exec sleep 30"])
        .ready_timeout(Duration::from_millis(300));
    let outcome = builder.spawn().await;
    assert!(
        matches!(&outcome, Err(Error::ReadyTimeout { timeout, .. }) if *timeout == Duration::from_millis(300)),
        "{:?}",
        outcome.err()
    );
    let missing = ClientBuilder::new("/nonexistent/zi-server").spawn().await;
    assert!(
        matches!(missing, Err(Error::Spawn(_))),
        "{:?}",
        missing.err()
    );
    let empty = ClientBuilder::from_command_line("  ");
    assert!(matches!(empty, Err(Error::Usage(_))));
}

#[tokio::test]
async fn concurrent_requests_get_their_own_answers_in_any_order() {
    let client = server(
        "stream = requests()\n\
         first, second = next(stream), next(stream)\n\
         for request in (second, first):\n    \
             answer(request, {'echo': request['params']['n']})\n\
         for request in stream:\n    \
             answer(request, {})",
    )
    .spawn()
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    let ask = |n: u64| client.request("session.get_state", Some(json!({"n": n})));
    let (one, two) = tokio::join!(ask(1), ask(2));
    assert_eq!(one.ok(), Some(json!({"echo": 1})));
    assert_eq!(two.ok(), Some(json!({"echo": 2})));
    assert_eq!(client.pending_requests(), 0);
    let status = client.close().await;
    assert!(status.is_ok_and(|s| s.success()));
    let again = client.close().await;
    assert!(matches!(again, Err(Error::Usage(_))), "{again:?}");
}

#[tokio::test]
async fn events_arrive_in_order_until_a_gap_ends_the_connection() {
    let client = server(
        "request = next(requests())\n\
         send(dict(type='session_event', event=dict(type='agent_start')))\n\
         send(dict(type='session_event', event=dict(type='agent_end')))\n\
         send(dict(type='session_event', sequence=9, event=dict(type='agent_start')))\n\
         sys.stdin.read()",
    )
    .spawn()
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    let mut events = client.subscribe();
    let outcome = client.request("session.prompt", None).await;
    assert!(
        matches!(
            outcome,
            Err(Error::SequenceGap {
                expected: 4,
                received: 9
            })
        ),
        "{outcome:?}"
    );
    let mut seen = Vec::new();
    while let Some(event) = events.next().await {
        seen.push((event.sequence, event.kind().to_string()));
    }
    assert_eq!(
        seen,
        [(2, "agent_start".to_string()), (3, "agent_end".to_string())]
    );
    assert!(matches!(client.ended().await, Error::SequenceGap { .. }));
    let later = client.request("session.get_state", None).await;
    assert!(matches!(later, Err(Error::SequenceGap { .. })), "{later:?}");
    client.kill().await;
}

#[tokio::test]
async fn a_failing_exit_is_reported_with_the_tail_of_stderr() {
    let client = server(
        "sys.stdin.read()\n\
         sys.stderr.write('x' * 100 + 'the end')\n\
         sys.exit(2)",
    )
    .stderr_tail_bytes(16)
    .spawn()
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    let outcome = client.close().await;
    assert!(
        matches!(&outcome, Err(Error::Exit { status, stderr }) if status.contains('2') && stderr == "xxxxxxxxxthe end"),
        "{outcome:?}"
    );
}

#[tokio::test]
async fn a_server_that_ignores_eof_is_killed_after_the_grace() {
    let client = server("import time\ntime.sleep(60)")
        .close_grace(Duration::from_millis(300))
        .spawn()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let status = client.close().await;
    assert!(
        status
            .as_ref()
            .is_ok_and(|s| std::os::unix::process::ExitStatusExt::signal(s) == Some(9)),
        "{status:?}"
    );
    assert!(matches!(client.failure(), Some(Error::Closed { .. })));
}

#[tokio::test]
async fn a_request_in_flight_fails_when_the_server_dies() {
    let client = server(
        "next(requests())\n\
         sys.stderr.write('crashed')\n\
         sys.stderr.flush()\n\
         import os\n\
         os._exit(1)",
    )
    .spawn()
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    let outcome = client.request("session.get_state", None).await;
    assert!(
        matches!(&outcome, Err(Error::Closed { reason, .. }) if reason == "stdout closed"),
        "{outcome:?}"
    );
    assert_eq!(client.pending_requests(), 0);
    let exit = client.wait_exit(Duration::from_secs(10)).await;
    assert_eq!(exit.and_then(|s| s.code()), Some(1));
    assert_eq!(client.stderr_tail(), "crashed");
}
