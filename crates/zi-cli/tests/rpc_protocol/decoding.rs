//! Request decoding (docs/rpc.md#decoding-a-request) through the real binary: every rejected row of
//! zi-protocol's decode-case table with its exact code, message and id, answered one by one while
//! zi keeps serving; accepted bounds and null defaults.

use super::*;

const BAD_ID: &str = "RPC request id must be a non-empty string of at most 256 bytes";

// ---------------------------------------------------------------------------------------------
// 3. Decoding (docs/rpc.md#decoding-a-request)
// ---------------------------------------------------------------------------------------------

/// (record, code, message, id): every rejected row of zi-protocol's decode-case table (where
/// decoding cases go), then the few records too large to be rows: ids, names and texts one byte
/// past their bounds.
fn decode_cases() -> Vec<(String, &'static str, String, Option<String>)> {
    let ir = "invalid_request";
    let s = |v: &str| v.to_string();
    let mut cases: Vec<(String, &'static str, String, Option<String>)> = DECODE_CASES
        .iter()
        .filter_map(|case| {
            let expected = case.rejection()?;
            let id = expected.id.map(str::to_string);
            Some((s(case.line), expected.code, s(expected.message), id))
        })
        .collect();
    let id257 = "a".repeat(257);
    cases.push((
        format!(r#"{{"version":3,"id":"{id257}","method":"session.get_state"}}"#),
        "unsupported_version",
        s("Unsupported RPC protocol version: 3 (expected 1)"),
        None,
    ));
    let id257_multibyte = format!("{}a", "\u{e9}".repeat(128));
    cases.push((
        format!(r#"{{"version":1,"id":"{id257_multibyte}","method":"session.get_state"}}"#),
        ir,
        s(BAD_ID),
        None,
    ));
    let oversized: [(&str, Value, &str); 4] = [
        (
            "session.prompt",
            json!({"delivery": "direct", "text": "x", "completionId": "c".repeat(257)}),
            "Completion id must be a non-empty string of at most 256 bytes",
        ),
        (
            "command.invoke",
            json!({"name": "a".repeat(65), "arguments": ""}),
            "Command name must be a non-empty string of at most 64 bytes",
        ),
        (
            "command.invoke",
            json!({"name": "x", "arguments": "a".repeat(262_145)}),
            "Command arguments must be a string of at most 262144 bytes",
        ),
        (
            "model.select",
            json!({"provider": "p".repeat(257), "id": "x"}),
            "Model provider must be a non-empty string of at most 256 bytes",
        ),
    ];
    for (n, (method, params, message)) in oversized.into_iter().enumerate() {
        let id = format!("big-{n}");
        let record = json!({"version": 1, "id": id, "method": method, "params": params});
        cases.push((record.to_string(), ir, s(message), Some(id)));
    }
    cases
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn decoding_rejects_malformed_requests_with_exact_codes_messages_and_ids() {
    let (mock, _env, mut p) = Env::started_with_model().await;

    for (record, code, message, id) in decode_cases() {
        let mut bytes = record.clone().into_bytes();
        bytes.push(b'\n');
        p.send_raw(&bytes).await;
        let frame = next_reply(&mut p).await;
        let what: String = record.chars().take(160).collect();
        assert_protocol_error(&frame, code, &message, id.as_deref(), &what);
    }

    // The connection is still open and nothing was launched.
    let state = p.request_ok("alive", "session.get_state", None).await;
    assert_eq!(state["messageCount"], 0);
    assert_eq!(
        state["queuedInputs"],
        json!({"steering": [], "followUp": []})
    );
    assert_eq!(state["activity"], json!({"type": "idle"}));
    assert!(
        mock.requests().is_empty(),
        "a rejected prompt reached the provider"
    );
    p.exit_by_eof().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn decoding_accepts_bounds_and_null_defaults() {
    let (mock, _env, mut p) = Env::started_with_model().await;

    // Request ids of exactly 256 bytes (ASCII and multibyte).
    for id in ["a".repeat(256), "\u{e9}".repeat(128)] {
        request_succeeds(&mut p, &id, "session.get_state", None).await;
    }

    json_edge_cases_decode(&mut p).await;

    // null for start/limit means the default.
    let page = p
        .request_ok(
            "gm",
            "session.get_messages",
            Some(json!({"start": null, "limit": null})),
        )
        .await;
    assert_eq!(
        page,
        json!({"start": 0, "total": 0, "nextStart": null, "messages": []})
    );
    let page = p
        .request_ok(
            "go",
            "session.get_outcomes",
            Some(json!({"start": null, "limit": null})),
        )
        .await;
    assert_eq!(
        page,
        json!({"start": 0, "total": 0, "nextStart": null, "outcomes": []})
    );
    // params are optional for the pages; limit 100 and start 0 are in range.
    let page = p
        .request_ok("gm2", "session.get_messages", Some(json!({"limit": 100})))
        .await;
    assert_eq!(page["start"], 0);
    let page = p
        .request_ok("gm3", "session.get_messages", Some(json!({})))
        .await;
    assert_eq!(page["start"], 0);

    // null scope means global.
    let selected = p
        .request_ok(
            "ts",
            "thinking.select",
            Some(json!({"level": "off", "scope": null})),
        )
        .await;
    assert_eq!(
        selected,
        json!({"scope": "global", "requested": "off", "effective": "off"})
    );

    bounds_at_the_limit_decode(&mut p).await;

    // Empty prompt text is allowed; steer while idle only queues.
    let queued = p
        .request_ok(
            "st",
            "session.prompt",
            Some(json!({"delivery": "steer", "text": ""})),
        )
        .await;
    assert_eq!(queued, json!({"delivery": "steer"}));
    let state = p.request_ok("s", "session.get_state", None).await;
    assert_eq!(state["activity"], json!({"type": "idle"}));
    assert_eq!(state["queuedInputs"]["steering"][0]["text"], "");
    assert_eq!(state["queuedInputs"]["steering"][0]["delivery"], "steer");

    p.exit_by_eof().await;
    assert!(mock.requests().is_empty());
}

/// JSON edge cases (docs/rpc.md decision 7): 1.0 is the integer 1, the last duplicate key wins, a
/// lone surrogate is invalid JSON.
async fn json_edge_cases_decode(p: &mut Harness) {
    p.send_raw(b"{\"version\":1.0,\"id\":\"float\",\"method\":\"session.get_state\"}\n")
        .await;
    assert_success(&next_reply(p).await, "float", "session.get_state");
    p.send_raw(
        b"{\"version\":1,\"id\":\"first\",\"id\":\"last\",\"method\":\"session.get_state\"}\n",
    )
    .await;
    assert_success(&next_reply(p).await, "last", "session.get_state");
    p.send_raw(b"{\"version\":1,\"id\":\"f2\",\"method\":\"session.get_messages\",\"params\":{\"start\":2.0,\"limit\":1.0}}\n")
        .await;
    let page = assert_success(&next_reply(p).await, "f2", "session.get_messages");
    assert_eq!(page["start"], 2);
    p.send_raw(b"{\"version\":1,\"id\":\"sur\\ud800\",\"method\":\"session.get_state\"}\n")
        .await;
    assert_protocol_error(
        &next_reply(p).await,
        "invalid_json",
        INVALID_JSON,
        None,
        "lone surrogate",
    );
}

/// Bounds that are exactly at the limit decode; the operation then decides.
async fn bounds_at_the_limit_decode(p: &mut Harness) {
    request_fails(
        p,
        "ci",
        "command.invoke",
        Some(json!({"name": "a".repeat(64), "arguments": "a".repeat(262_144)})),
        "not_found",
        &format!("Command not found: {}", "a".repeat(64)),
    )
    .await;
    let provider = "p".repeat(256);
    request_fails(
        p,
        "ms",
        "model.select",
        Some(json!({"provider": provider, "id": "x"})),
        "not_found",
        &format!("Model not found: {provider}/x"),
    )
    .await;
    let cid = "c".repeat(256);
    request_fails(
        p,
        "aw",
        "session.await_idle",
        Some(json!({"completionId": cid})),
        "operation_failed",
        &format!("Completion watch is not active: {cid}"),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn decoding_rejects_prompt_text_over_8_mib() {
    let (_env, mut p) = Env::started_without_model().await;
    let text = "x".repeat(8_388_609);
    let frame = p
        .request(
            "big",
            "session.prompt",
            Some(json!({"delivery": "steer", "text": text})),
        )
        .await;
    assert_protocol_error(
        &frame,
        "invalid_request",
        "Prompt text must be a string of at most 8388608 bytes",
        Some("big"),
        "8 MiB + 1",
    );
    // Exactly 8 MiB decodes (steer does not need a model).
    let text = "x".repeat(8_388_608);
    let ok = p
        .request_ok(
            "max",
            "session.prompt",
            Some(json!({"delivery": "steer", "text": text})),
        )
        .await;
    assert_eq!(ok, json!({"delivery": "steer"}));
    p.exit_by_eof().await;
}
