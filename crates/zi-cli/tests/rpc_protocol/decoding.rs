//! Request decoding (docs/rpc.md#decoding-a-request): every case of the conformance kit's decode table
//! with its exact code, message and id, accepted bounds and null defaults.

use super::*;

const NOT_OBJECT: &str = "RPC requests must be JSON objects";
const BAD_ID: &str = "RPC request id must be a non-empty string of at most 256 bytes";
const METHOD_NOT_STRING: &str = "RPC request method must be a string";
const UNKNOWN_FIELDS: &str = "RPC request contains unknown fields";
const MISSING_FIELDS: &str = "RPC request is missing required fields";

// ---------------------------------------------------------------------------------------------
// 3. Decoding (docs/rpc.md#decoding-a-request)
// ---------------------------------------------------------------------------------------------

/// (record, code, message, id): the conformance kit's decode cases, then the records it does not
/// send (more shapes of each check, zi's decisions, bounds built at run time).
fn decode_cases() -> Vec<(String, &'static str, String, Option<String>)> {
    let ir = "invalid_request";
    let uv = "unsupported_version";
    let um = "unknown_method";
    let s = |v: &str| v.to_string();
    let id257 = "a".repeat(257);
    let id257_multibyte = format!("{}a", "\u{e9}".repeat(128));
    let long_cid = "c".repeat(257);
    let mut cases: Vec<(String, &'static str, String, Option<String>)> = DECODE_CASES
        .iter()
        .map(|case| {
            let id = case.id.map(str::to_string);
            (s(case.line), case.code, s(case.message), id)
        })
        .collect();
    cases.extend([
        // Not JSON.
        (s("{"), "invalid_json", s(INVALID_JSON), None),
        (
            s(r#"{"version":1,"id":"trunc","method":"session.get_state""#),
            "invalid_json",
            s(INVALID_JSON),
            None,
        ),
        // Not an object.
        (s("[]"), ir, s(NOT_OBJECT), None),
        (
            s(r#"[{"version":1,"id":"a","method":"session.get_state"}]"#),
            ir,
            s(NOT_OBJECT),
            None,
        ),
        (s("null"), ir, s(NOT_OBJECT), None),
        (s(r#""text""#), ir, s(NOT_OBJECT), None),
        (s("42"), ir, s(NOT_OBJECT), None),
        (s("true"), ir, s(NOT_OBJECT), None),
        // Version (checked before the id).
        (
            s(r#"{"version":null,"id":"vn","method":"session.get_state"}"#),
            uv,
            s("Unsupported RPC protocol version: null (expected 1)"),
            Some(s("vn")),
        ),
        (
            s(r#"{"version":true,"id":"vt","method":"session.get_state"}"#),
            uv,
            s("Unsupported RPC protocol version: true (expected 1)"),
            Some(s("vt")),
        ),
        (
            s(r#"{"version":1.5,"id":"vf","method":"session.get_state"}"#),
            uv,
            s("Unsupported RPC protocol version: 1.5 (expected 1)"),
            Some(s("vf")),
        ),
        (
            s(r#"{"method":"session.get_state"}"#),
            uv,
            s("Unsupported RPC protocol version: undefined (expected 1)"),
            None,
        ),
        (
            s(r#"{"version":2,"id":"","method":"session.get_state"}"#),
            uv,
            s("Unsupported RPC protocol version: 2 (expected 1)"),
            None,
        ),
        (
            format!(r#"{{"version":3,"id":"{id257}","method":"session.get_state"}}"#),
            uv,
            s("Unsupported RPC protocol version: 3 (expected 1)"),
            None,
        ),
        // Numbers beyond the double range are JavaScript's ±Infinity (JSON.parse).
        (
            s(r#"{"version":1e400,"id":"vinf","method":"session.get_state"}"#),
            uv,
            s("Unsupported RPC protocol version: Infinity (expected 1)"),
            Some(s("vinf")),
        ),
        (
            s(r#"{"version":[-1e400,2],"id":"vninf","method":"session.get_state"}"#),
            uv,
            s("Unsupported RPC protocol version: -Infinity,2 (expected 1)"),
            Some(s("vninf")),
        ),
        (
            s(
                r#"{"version":1,"id":"inf-start","method":"session.get_messages","params":{"start":1e400}}"#,
            ),
            ir,
            s("Message start must be a non-negative integer"),
            Some(s("inf-start")),
        ),
        (
            s(
                r#"{"version":1,"id":"inf-limit","method":"session.get_outcomes","params":{"limit":1e400}}"#,
            ),
            ir,
            s("Outcome limit must be an integer from 1 through 100"),
            Some(s("inf-limit")),
        ),
        (
            s(r#"{"version":1,"id":1e400,"method":"session.get_state"}"#),
            ir,
            s(BAD_ID),
            None,
        ),
        (
            s(
                r#"{"version":1,"id":"inf-text","method":"session.prompt","params":{"delivery":"direct","text":1e400}}"#,
            ),
            ir,
            s("Prompt text must be a string of at most 8388608 bytes"),
            Some(s("inf-text")),
        ),
        (
            s(r#"{"version":1e400,"#),
            "invalid_json",
            s(INVALID_JSON),
            None,
        ),
        // Ids.
        (
            s(r#"{"version":1,"method":"session.get_state"}"#),
            ir,
            s(BAD_ID),
            None,
        ),
        (
            s(r#"{"version":1,"id":7,"method":"session.get_state"}"#),
            ir,
            s(BAD_ID),
            None,
        ),
        (
            s(r#"{"version":1,"id":null,"method":"session.get_state"}"#),
            ir,
            s(BAD_ID),
            None,
        ),
        (
            format!(r#"{{"version":1,"id":"{id257_multibyte}","method":"session.get_state"}}"#),
            ir,
            s(BAD_ID),
            None,
        ),
        // Method.
        (
            s(r#"{"version":1,"id":"m0"}"#),
            ir,
            s(METHOD_NOT_STRING),
            Some(s("m0")),
        ),
        (
            s(r#"{"version":1,"id":"mn","method":null}"#),
            ir,
            s(METHOD_NOT_STRING),
            Some(s("mn")),
        ),
        (
            s(r#"{"version":1,"id":"u2","method":"Session.Get_State"}"#),
            um,
            s("Unknown RPC method: Session.Get_State"),
            Some(s("u2")),
        ),
        // Top-level keys.
        (
            s(r#"{"version":1,"id":"gn","method":"session.get_state","params":null}"#),
            ir,
            s(UNKNOWN_FIELDS),
            Some(s("gn")),
        ),
        (
            s(r#"{"version":1,"id":"ip","method":"session.interrupt","params":{}}"#),
            ir,
            s(UNKNOWN_FIELDS),
            Some(s("ip")),
        ),
        (
            s(r#"{"version":1,"id":"cl","method":"command.list","params":{}}"#),
            ir,
            s(UNKNOWN_FIELDS),
            Some(s("cl")),
        ),
        (
            s(r#"{"version":1,"id":"mlp","method":"model.list","params":{}}"#),
            ir,
            s(UNKNOWN_FIELDS),
            Some(s("mlp")),
        ),
        (
            s(r#"{"version":1,"id":"tlp","method":"thinking.list","params":{}}"#),
            ir,
            s(UNKNOWN_FIELDS),
            Some(s("tlp")),
        ),
        // Params presence and shape.
        (
            s(r#"{"version":1,"id":"pn","method":"session.prompt","params":null}"#),
            ir,
            s("session.prompt params must be an object"),
            Some(s("pn")),
        ),
        (
            s(r#"{"version":1,"id":"gm","method":"session.get_messages","params":"x"}"#),
            ir,
            s("session.get_messages params must be an object"),
            Some(s("gm")),
        ),
        (
            s(r#"{"version":1,"id":"an","method":"session.await_idle","params":null}"#),
            ir,
            s("session.await_idle params must be an object"),
            Some(s("an")),
        ),
        (
            s(r#"{"version":1,"id":"se0","method":"connection.set_events"}"#),
            ir,
            s(MISSING_FIELDS),
            Some(s("se0")),
        ),
        (
            s(r#"{"version":1,"id":"ci0","method":"command.invoke"}"#),
            ir,
            s(MISSING_FIELDS),
            Some(s("ci0")),
        ),
        (
            s(r#"{"version":1,"id":"ms0","method":"model.select"}"#),
            ir,
            s(MISSING_FIELDS),
            Some(s("ms0")),
        ),
        (
            s(r#"{"version":1,"id":"ts0","method":"thinking.select"}"#),
            ir,
            s(MISSING_FIELDS),
            Some(s("ts0")),
        ),
    ]);

    // Per-method params: (method, params, message).
    let per_method: Vec<(&str, Value, String)> = vec![
        (
            "session.get_messages",
            json!({"start": "1"}),
            s("Message start must be a non-negative integer"),
        ),
        (
            "session.get_messages",
            json!({"start": 1.5}),
            s("Message start must be a non-negative integer"),
        ),
        (
            "session.get_messages",
            json!({"limit": 0}),
            s("Message limit must be an integer from 1 through 100"),
        ),
        (
            "session.get_messages",
            json!({"start": -1, "limit": 101}),
            s("Message start must be a non-negative integer"),
        ),
        (
            "session.get_messages",
            json!({"start": 0, "extra": 1}),
            s(UNKNOWN_FIELDS),
        ),
        (
            "session.get_outcomes",
            json!({"start": -1}),
            s("Outcome start must be a non-negative integer"),
        ),
        (
            "session.get_outcomes",
            json!({"limit": "5"}),
            s("Outcome limit must be an integer from 1 through 100"),
        ),
        (
            "session.prompt",
            json!({"delivery": "followUp", "text": "x"}),
            s("Prompt delivery must be direct, steer, follow_up, or continue"),
        ),
        (
            "session.prompt",
            json!({"delivery": null, "text": "x"}),
            s("Prompt delivery must be direct, steer, follow_up, or continue"),
        ),
        (
            "session.prompt",
            json!({"delivery": "direct", "text": 5}),
            s("Prompt text must be a string of at most 8388608 bytes"),
        ),
        (
            "session.prompt",
            // Prompt keys are a subset (docs/rpc.md#params-of-each-method): a missing key fails its
            // own check.
            json!({"delivery": "direct"}),
            s("Prompt text must be a string of at most 8388608 bytes"),
        ),
        (
            "session.prompt",
            json!({"text": "x"}),
            s("Prompt delivery must be direct, steer, follow_up, or continue"),
        ),
        (
            "session.prompt",
            json!({}),
            s("Prompt delivery must be direct, steer, follow_up, or continue"),
        ),
        (
            "session.prompt",
            json!({"delivery": "later", "bogus": 1}),
            s(UNKNOWN_FIELDS),
        ),
        (
            "session.prompt",
            json!({"delivery": "direct", "text": "x", "completionId": ""}),
            s("Completion id must be a non-empty string of at most 256 bytes"),
        ),
        (
            "session.prompt",
            json!({"delivery": "direct", "text": "x", "completionId": long_cid}),
            s("Completion id must be a non-empty string of at most 256 bytes"),
        ),
        (
            "session.await_idle",
            json!({"completionId": 1}),
            s("Completion id must be a non-empty string of at most 256 bytes"),
        ),
        (
            "session.await_idle",
            json!({"completionId": "a", "x": 1}),
            s(UNKNOWN_FIELDS),
        ),
        (
            "connection.set_events",
            json!({"mode": null}),
            s("Event mode must be all, none, or activity"),
        ),
        ("connection.set_events", json!({}), s(MISSING_FIELDS)),
        (
            "command.invoke",
            json!({"name": "trailing-", "arguments": ""}),
            s("Command name must use lowercase kebab-case"),
        ),
        (
            "command.invoke",
            json!({"name": "", "arguments": ""}),
            s("Command name must be a non-empty string of at most 64 bytes"),
        ),
        (
            "command.invoke",
            json!({"name": "a".repeat(65), "arguments": ""}),
            s("Command name must be a non-empty string of at most 64 bytes"),
        ),
        (
            "command.invoke",
            json!({"name": "x", "arguments": 5}),
            s("Command arguments must be a string of at most 262144 bytes"),
        ),
        (
            "command.invoke",
            json!({"name": "x", "arguments": "a".repeat(262_145)}),
            s("Command arguments must be a string of at most 262144 bytes"),
        ),
        (
            "command.invoke",
            json!({"name": "x", "arguments": "", "more": 1}),
            s(UNKNOWN_FIELDS),
        ),
        (
            "model.select",
            json!({"provider": "p".repeat(257), "id": "x"}),
            s("Model provider must be a non-empty string of at most 256 bytes"),
        ),
        (
            "model.select",
            json!({"provider": "p", "id": ""}),
            s("Model id must be a non-empty string of at most 256 bytes"),
        ),
        (
            "model.select",
            json!({"provider": "p", "id": 3}),
            s("Model id must be a non-empty string of at most 256 bytes"),
        ),
        ("model.select", json!({"provider": "p"}), s(MISSING_FIELDS)),
        (
            "model.select",
            json!({"provider": "p", "id": "x", "x": 1}),
            s(UNKNOWN_FIELDS),
        ),
        (
            "thinking.select",
            json!({}),
            s("Unsupported thinking level"),
        ),
        (
            "thinking.select",
            json!({"level": "high", "x": 1}),
            s(UNKNOWN_FIELDS),
        ),
    ];
    for (n, (method, params, message)) in per_method.into_iter().enumerate() {
        let id = format!("pm-{n}");
        let record = json!({"version": 1, "id": id, "method": method, "params": params});
        cases.push((record.to_string(), ir, message, Some(id)));
    }
    cases
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn decoding_rejects_malformed_requests_with_exact_codes_messages_and_ids() {
    let mock = mock().await;
    let env = Env::with_model(&mock);
    let mut p = env.spawn().await;

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
    p.close_stdin().await;
    assert_eq!(p.wait_exit(WAIT).await.code, Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn decoding_accepts_bounds_and_null_defaults() {
    let mock = mock().await;
    let env = Env::with_model(&mock);
    let mut p = env.spawn().await;

    // Request ids of exactly 256 bytes (ASCII and multibyte).
    for id in ["a".repeat(256), "\u{e9}".repeat(128)] {
        let frame = p.request(&id, "session.get_state", None).await;
        assert_success(&frame, &id, "session.get_state");
    }

    // JSON edge cases (docs/rpc.md decision 7): 1.0 is the integer 1, the last duplicate key wins.
    p.send_raw(b"{\"version\":1.0,\"id\":\"float\",\"method\":\"session.get_state\"}\n")
        .await;
    assert_success(&next_reply(&mut p).await, "float", "session.get_state");
    p.send_raw(
        b"{\"version\":1,\"id\":\"first\",\"id\":\"last\",\"method\":\"session.get_state\"}\n",
    )
    .await;
    assert_success(&next_reply(&mut p).await, "last", "session.get_state");
    p.send_raw(b"{\"version\":1,\"id\":\"f2\",\"method\":\"session.get_messages\",\"params\":{\"start\":2.0,\"limit\":1.0}}\n")
        .await;
    let page = assert_success(&next_reply(&mut p).await, "f2", "session.get_messages");
    assert_eq!(page["start"], 2);
    p.send_raw(b"{\"version\":1,\"id\":\"sur\\ud800\",\"method\":\"session.get_state\"}\n")
        .await;
    assert_protocol_error(
        &next_reply(&mut p).await,
        "invalid_json",
        INVALID_JSON,
        None,
        "lone surrogate",
    );

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

    // Bounds that are exactly at the limit decode; the operation then decides.
    let frame = p
        .request(
            "ci",
            "command.invoke",
            Some(json!({"name": "a".repeat(64), "arguments": "a".repeat(262_144)})),
        )
        .await;
    assert_failure(
        &frame,
        "ci",
        "command.invoke",
        "not_found",
        &format!("Command not found: {}", "a".repeat(64)),
    );
    let provider = "p".repeat(256);
    let frame = p
        .request(
            "ms",
            "model.select",
            Some(json!({"provider": provider, "id": "x"})),
        )
        .await;
    assert_failure(
        &frame,
        "ms",
        "model.select",
        "not_found",
        &format!("Model not found: {provider}/x"),
    );
    let cid = "c".repeat(256);
    let frame = p
        .request(
            "aw",
            "session.await_idle",
            Some(json!({"completionId": cid})),
        )
        .await;
    assert_failure(
        &frame,
        "aw",
        "session.await_idle",
        "operation_failed",
        &format!("Completion watch is not active: {cid}"),
    );

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

    p.close_stdin().await;
    assert_eq!(p.wait_exit(WAIT).await.code, Some(0));
    assert!(mock.requests().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn decoding_rejects_prompt_text_over_8_mib() {
    let env = Env::without_model();
    let mut p = env.spawn().await;
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
    p.close_stdin().await;
    assert_eq!(p.wait_exit(WAIT).await.code, Some(0));
}
