//! The checks, in run order.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use zi_mock_provider::mock_llm::Step;

use crate::conn::Violation;
use crate::decode_cases::{DECODE_CASES, DecodeCase};
use crate::{Body, BoxFut, Check, CheckError, CheckResult, Ctx, Level, Outcome, Status};

macro_rules! ensure {
    ($cond:expr, $($fmt:tt)+) => {
        if !$cond {
            return Err(CheckError::Fail(format!($($fmt)+)));
        }
    };
}

fn f(
    id: &str,
    level: Level,
    section: &'static str,
    description: &str,
    body: for<'a> fn(&'a mut Ctx) -> BoxFut<'a>,
) -> Check {
    Check {
        id: id.to_string(),
        level,
        section,
        description: description.to_string(),
        body: Body::Fn(body),
    }
}

/// One check per row of the decode-case table.
fn decode(case: &'static DecodeCase) -> Check {
    Check {
        id: format!("decode.{}", case.name),
        level: Level::Must,
        section: "§3",
        description: format!(
            "{} → protocol_error {} {:?}",
            case.line, case.code, case.message
        ),
        body: Body::Decode(case),
    }
}

pub fn all() -> Vec<Check> {
    use Level::{Must, Should};
    let mut checks = vec![
        f(
            "framing.ready-first",
            Must,
            "§2.1",
            "the first frame is ready, sequence 1, with a state snapshot",
            ready_first,
        ),
        f(
            "framing.crlf-accepted",
            Must,
            "§1",
            "a CRLF-terminated record is accepted",
            crlf_accepted,
        ),
        f(
            "framing.unterminated-final-line",
            Must,
            "§1",
            "bytes after the last LF are a record at EOF",
            unterminated_final_line,
        ),
        f(
            "framing.split-utf8",
            Should,
            "§1",
            "UTF-8 split across writes is reassembled",
            split_utf8,
        ),
        f(
            "framing.empty-line",
            Must,
            "§1",
            "an empty line is a recoverable invalid_json",
            empty_line,
        ),
        f(
            "framing.invalid-utf8",
            Must,
            "§1",
            "invalid UTF-8 is one invalid_framing frame, then exit 1",
            invalid_utf8,
        ),
        f(
            "framing.oversized-record",
            Must,
            "§1",
            "a record over 16 MiB is invalid_framing, then exit 1",
            oversized_record,
        ),
    ];
    checks.extend(DECODE_CASES.iter().map(decode));
    checks.extend([
        f(
            "methods.get-state",
            Must,
            "§4.1",
            "session.get_state returns the snapshot ready carried",
            get_state,
        ),
        f(
            "methods.decode-defaults",
            Must,
            "§3.2",
            "null start/limit/scope mean their defaults; 1.0 is an integer",
            decode_defaults,
        ),
        f(
            "ids.duplicate-in-flight",
            Must,
            "§7.2",
            "a duplicate in-flight id is rejected without touching the original",
            duplicate_in_flight,
        ),
        f(
            "ids.reuse-after-response",
            Must,
            "§7.2",
            "ids are reusable after success and after failure",
            id_reuse,
        ),
        f(
            "capacity.32-plus-interrupt",
            Must,
            "§7.3",
            "33rd operation gets capacity; the reserved interrupt still runs",
            capacity,
        ),
        f(
            "events.mode-none",
            Must,
            "§4.7",
            "set_events none suppresses only session_event frames",
            events_none,
        ),
        f(
            "events.direct-prompt-order",
            Must,
            "§9.3",
            "a direct prompt emits the reference event order",
            event_order,
        ),
        f(
            "completion.watch",
            Must,
            "§8",
            "a completion watch returns revision, message count and text",
            completion_watch,
        ),
        f(
            "completion.inactive-watch",
            Must,
            "§8",
            "awaiting an unknown watch fails with operation_failed",
            inactive_watch,
        ),
        f(
            "paging.messages",
            Must,
            "§4.2",
            "message pages follow the paging arithmetic",
            paging_messages,
        ),
        f(
            "paging.outcomes",
            Must,
            "§4.3",
            "outcome pages follow the paging arithmetic",
            paging_outcomes,
        ),
        f(
            "prompt.direct-while-running",
            Must,
            "§4.4",
            "a direct prompt while running fails with operation_failed",
            prompt_while_running,
        ),
        f(
            "prompt.follow-up-while-idle",
            Should,
            "§4.4",
            "follow_up while idle stays queued and does not start a run",
            follow_up_idle,
        ),
        f(
            "interrupt.run",
            Must,
            "§4.5",
            "interrupt aborts a run and answers after it settles",
            interrupt_run,
        ),
        f(
            "models.list",
            Must,
            "§4.10",
            "model.list returns public descriptors with configured, no baseUrl",
            model_list,
        ),
        f(
            "models.select",
            Must,
            "§4.11",
            "model.select selects a listed model, not_found otherwise",
            model_select,
        ),
        f(
            "thinking.list-select",
            Must,
            "§4.12",
            "thinking.list and thinking.select",
            thinking,
        ),
        f(
            "commands.list-invoke",
            Must,
            "§4.8",
            "command.list is an array; unknown names are not_found",
            commands,
        ),
        f(
            "shutdown.eof",
            Must,
            "§7.5",
            "EOF exits 0 promptly with nothing but frames on stdout",
            shutdown_eof,
        ),
        f(
            "shutdown.eof-during-run",
            Must,
            "§7.5",
            "EOF during a run interrupts it and exits 0",
            shutdown_eof_running,
        ),
        f(
            "shutdown.sigterm",
            Must,
            "§7.5",
            "SIGTERM exits 143",
            shutdown_sigterm,
        ),
        f(
            "shutdown.sigint",
            Should,
            "§7.5",
            "SIGINT exits 130",
            shutdown_sigint,
        ),
        f(
            "cli.positional-prompt",
            Must,
            "§1",
            "positional prompts are rejected with exit 1",
            positional_prompt,
        ),
    ]);
    checks
}

fn page_req(id: &str) -> String {
    id.to_string()
}

fn ready_first(ctx: &mut Ctx) -> BoxFut<'_> {
    Box::pin(async move {
        let mut conn = ctx.spawn_with(&[])?;
        let ready = conn.ready().await?;
        ensure!(
            ready["state"]["sessionId"].is_string(),
            "ready.state.sessionId is not a string"
        );
        ensure!(
            ready["state"]["activity"]["type"] == "idle",
            "activity is not idle: {}",
            ready["state"]["activity"]
        );
        ensure!(ready["state"]["messageCount"] == 0, "messageCount is not 0");
        ensure!(
            ready["state"]["model"]["type"] == "selected",
            "the --model is not selected"
        );
        ensure!(
            !ready.to_string().contains("baseUrl"),
            "ready leaks provider configuration (baseUrl)"
        );
        conn.finish().await;
        Ok(())
    })
}

fn crlf_accepted(ctx: &mut Ctx) -> BoxFut<'_> {
    Box::pin(async move {
        let mut conn = ctx.conn().await?;
        conn.send_raw(b"{\"version\":1,\"id\":\"crlf\",\"method\":\"session.get_state\"}\r\n")
            .await?;
        let frame = conn.response("crlf").await?;
        ensure!(frame["ok"] == true, "not ok: {frame}");
        conn.finish().await;
        Ok(())
    })
}

fn unterminated_final_line(ctx: &mut Ctx) -> BoxFut<'_> {
    Box::pin(async move {
        let mut conn = ctx.conn().await?;
        conn.send_raw(b"{\"version\":1,\"id\":\"last\",\"method\":\"session.get_state\"}")
            .await?;
        conn.close_stdin();
        let frame = conn.response("last").await?;
        ensure!(frame["ok"] == true, "not ok: {frame}");
        let status = conn.wait_exit(Duration::from_secs(6)).await;
        ensure!(
            status.is_some_and(|s| s.success()),
            "exit {status:?}, expected 0"
        );
        Ok(())
    })
}

fn split_utf8(ctx: &mut Ctx) -> BoxFut<'_> {
    Box::pin(async move {
        let mut conn = ctx.conn().await?;
        let record = "{\"version\":1,\"id\":\"q\",\"method\":\"session.prompt\",\"params\":{\"delivery\":\"follow_up\",\"text\":\"caf\u{e9} \u{1f600}\"}}\n";
        let bytes = record.as_bytes();
        let cut = record.find('\u{1f600}').unwrap_or(0) + 2;
        conn.send_raw(&bytes[..cut]).await?;
        tokio::time::sleep(Duration::from_millis(50)).await;
        conn.send_raw(&bytes[cut..]).await?;
        let frame = conn.response("q").await?;
        ensure!(frame["ok"] == true, "not ok: {frame}");
        let state = conn.call_ok("s", "session.get_state", None).await?;
        let text = &state["queuedInputs"]["followUp"][0]["text"];
        ensure!(text == "caf\u{e9} \u{1f600}", "queued text is {text}");
        conn.finish().await;
        Ok(())
    })
}

fn empty_line(ctx: &mut Ctx) -> BoxFut<'_> {
    Box::pin(async move {
        let mut conn = ctx.conn().await?;
        conn.send_raw(b"\n").await?;
        let frame = conn.protocol_error().await?;
        ensure!(frame["code"] == "invalid_json", "code {}", frame["code"]);
        ensure!(frame.get("id").is_none(), "has an id");
        conn.call_ok("after", "session.get_state", None).await?;
        conn.finish().await;
        Ok(())
    })
}

async fn fatal_framing(ctx: &mut Ctx, bytes: &[u8], message: &str) -> Outcome {
    let mut conn = ctx.conn().await?;
    // The server may stop reading mid-write; a failed write is fine.
    let _ = conn.send_raw(bytes).await;
    let frame = conn.protocol_error().await?;
    ensure!(frame["code"] == "invalid_framing", "code {}", frame["code"]);
    ensure!(frame["message"] == message, "message {}", frame["message"]);
    ensure!(frame.get("id").is_none(), "has an id");
    let status = conn.wait_exit(Duration::from_secs(7)).await;
    ensure!(
        status.and_then(|s| s.code()) == Some(1),
        "exit {status:?}, expected 1"
    );
    let stderr = conn.stderr_text();
    ensure!(
        stderr.contains(message),
        "stderr does not report {message:?}: {stderr:?}"
    );
    let later = conn.drain(Duration::from_millis(100)).await;
    ensure!(
        later.iter().all(|f| f["type"] != "protocol_error"),
        "more than one protocol_error"
    );
    Ok(())
}

fn invalid_utf8(ctx: &mut Ctx) -> BoxFut<'_> {
    Box::pin(fatal_framing(
        ctx,
        b"\xff\n",
        "RPC input must be valid UTF-8",
    ))
}

fn oversized_record(ctx: &mut Ctx) -> BoxFut<'_> {
    Box::pin(async move {
        let mut bytes = vec![b'a'; 16 * 1024 * 1024 + 1];
        bytes.push(b'\n');
        fatal_framing(
            ctx,
            &bytes,
            "RPC input records cannot exceed 16777216 bytes",
        )
        .await
    })
}

fn get_state(ctx: &mut Ctx) -> BoxFut<'_> {
    Box::pin(async move {
        let mut conn = ctx.spawn_with(&[])?;
        let ready = conn.ready().await?;
        let frame = conn.call("s1", "session.get_state", None).await?;
        ensure!(frame["method"] == "session.get_state", "method not echoed");
        ensure!(frame["ok"] == true, "not ok");
        ensure!(frame.get("error").is_none(), "success carries error");
        ensure!(
            frame["result"] == ready["state"],
            "get_state differs from ready.state"
        );
        conn.finish().await;
        Ok(())
    })
}

fn decode_defaults(ctx: &mut Ctx) -> BoxFut<'_> {
    Box::pin(async move {
        let mut conn = ctx.conn().await?;
        let page = conn
            .call_ok(
                "m",
                "session.get_messages",
                Some(json!({"start": null, "limit": null})),
            )
            .await?;
        ensure!(
            page["start"] == 0 && page["total"] == 0,
            "null defaults: {page}"
        );
        conn.send_raw(b"{\"version\":1,\"id\":\"f\",\"method\":\"session.get_messages\",\"params\":{\"start\":0,\"limit\":1.0}}\n")
            .await?;
        let frame = conn.response("f").await?;
        ensure!(frame["ok"] == true, "limit 1.0 rejected: {frame}");
        let sel = conn
            .call_ok(
                "t",
                "thinking.select",
                Some(json!({"level": "high", "scope": null})),
            )
            .await?;
        ensure!(sel["scope"] == "global", "null scope is not global: {sel}");
        conn.finish().await;
        Ok(())
    })
}

fn duplicate_in_flight(ctx: &mut Ctx) -> BoxFut<'_> {
    Box::pin(async move {
        ctx.mock.push(Step::Hang(vec!["wait".into()]));
        let mut conn = ctx.conn().await?;
        conn.call_ok(
            "p",
            "session.prompt",
            Some(json!({"delivery":"direct","text":"go"})),
        )
        .await?;
        conn.request("w", "session.await_idle", None).await?;
        conn.request("w", "session.await_idle", None).await?;
        let dup = conn.protocol_error().await?;
        ensure!(dup["code"] == "invalid_request", "code {}", dup["code"]);
        ensure!(
            dup["message"] == "RPC request id is already in flight",
            "message {}",
            dup["message"]
        );
        ensure!(dup["id"] == "w", "id {}", dup["id"]);
        // Also for the reserved interruption slot.
        conn.request("w", "session.interrupt", None).await?;
        let dup = conn.protocol_error().await?;
        ensure!(dup["id"] == "w", "interrupt duplicate not rejected: {dup}");
        conn.call_ok("i", "session.interrupt", None).await?;
        let first = conn.response("w").await?;
        ensure!(first["ok"] == true, "the original failed: {first}");
        let rest = conn.drain(Duration::from_millis(200)).await;
        ensure!(
            !rest
                .iter()
                .any(|f| f["type"] == "response" && f["id"] == "w"),
            "a second response for the duplicate id"
        );
        conn.finish().await;
        Ok(())
    })
}

fn id_reuse(ctx: &mut Ctx) -> BoxFut<'_> {
    Box::pin(async move {
        let mut conn = ctx.conn().await?;
        conn.call_ok("r", "session.get_state", None).await?;
        conn.call_ok("r", "model.list", None).await?;
        for _ in 0..2 {
            let frame = conn
                .call(
                    "f",
                    "model.select",
                    Some(json!({"provider":"mock","id":"nope"})),
                )
                .await?;
            ensure!(frame["ok"] == false, "selected a missing model");
        }
        conn.call_ok("f", "thinking.list", None).await?;
        conn.finish().await;
        Ok(())
    })
}

fn capacity(ctx: &mut Ctx) -> BoxFut<'_> {
    Box::pin(async move {
        ctx.mock.push(Step::Hang(vec!["wait".into()]));
        let mut conn = ctx.conn().await?;
        conn.call_ok(
            "p",
            "session.prompt",
            Some(json!({"delivery":"direct","text":"go"})),
        )
        .await?;
        for i in 0..33 {
            conn.request(&format!("wait-{i}"), "session.await_idle", None)
                .await?;
        }
        let frame = conn.response("wait-32").await?;
        ensure!(frame["ok"] == false, "the 33rd operation was admitted");
        ensure!(
            frame["method"] == "session.await_idle",
            "method {}",
            frame["method"]
        );
        ensure!(
            frame["error"]["code"] == "capacity",
            "code {}",
            frame["error"]["code"]
        );
        ensure!(
            frame["error"]["message"] == "RPC accepts at most 32 in-flight operations",
            "message {}",
            frame["error"]["message"]
        );
        // The rejected id is free; the reserved interruption slot admits it.
        conn.call_ok("wait-32", "session.interrupt", None).await?;
        for i in 0..32 {
            let frame = conn.response(&format!("wait-{i}")).await?;
            ensure!(frame["ok"] == true, "wait-{i} failed: {frame}");
        }
        conn.finish().await;
        Ok(())
    })
}

fn events_none(ctx: &mut Ctx) -> BoxFut<'_> {
    Box::pin(async move {
        ctx.mock.push(Step::text("quiet"));
        ctx.mock.push(Step::text("loud"));
        let mut conn = ctx.conn().await?;
        let result = conn
            .call_ok("e", "connection.set_events", Some(json!({"mode":"none"})))
            .await?;
        ensure!(result == json!({"mode":"none"}), "result {result}");
        conn.call_ok(
            "p",
            "session.prompt",
            Some(json!({"delivery":"direct","text":"a"})),
        )
        .await?;
        conn.call_ok("w", "session.await_idle", None).await?;
        let seen = conn.drain(Duration::from_millis(200)).await;
        ensure!(
            !conn
                .frames
                .iter()
                .chain(&seen)
                .any(|f| f["type"] == "session_event"),
            "session_event frames in mode none"
        );
        let result = conn
            .call_ok("e2", "connection.set_events", Some(json!({"mode":"all"})))
            .await?;
        ensure!(result == json!({"mode":"all"}), "result {result}");
        conn.call_ok(
            "p2",
            "session.prompt",
            Some(json!({"delivery":"direct","text":"b"})),
        )
        .await?;
        conn.event("agent_settled").await?;
        conn.finish().await;
        Ok(())
    })
}

fn event_order(ctx: &mut Ctx) -> BoxFut<'_> {
    Box::pin(async move {
        ctx.mock.push(Step::Text(vec!["Hel".into(), "lo".into()]));
        let mut conn = ctx.conn().await?;
        conn.call_ok(
            "p",
            "session.prompt",
            Some(json!({"delivery":"direct","text":"hi"})),
        )
        .await?;
        conn.call_ok("w", "session.await_idle", None).await?;
        conn.drain(Duration::from_millis(100)).await;
        let events: Vec<Value> = conn
            .frames
            .iter()
            .filter(|f| f["type"] == "session_event")
            .map(|f| f["event"].clone())
            .collect();
        let kinds: Vec<String> = events
            .iter()
            .map(|e| {
                let kind = e["type"].as_str().unwrap_or_default();
                match kind {
                    "message_start" | "message_end" => {
                        format!(
                            "{kind}:{}",
                            e["message"]["role"].as_str().unwrap_or_default()
                        )
                    }
                    "entry_appended" => {
                        format!("{kind}:{}", e["entry"]["type"].as_str().unwrap_or_default())
                    }
                    _ => kind.to_string(),
                }
            })
            .filter(|k| k != "message_update" && k != "queue_update")
            .collect();
        let expected = [
            "agent_start",
            "turn_start",
            "message_start:user",
            "entry_appended:message",
            "message_end:user",
            "message_start:assistant",
            "entry_appended:message",
            "message_end:assistant",
            "turn_end",
            "agent_end",
            "agent_settled",
        ];
        // turn_start may interleave with the user message events (§16.5).
        let mut a: Vec<&str> = kinds
            .iter()
            .map(String::as_str)
            .filter(|k| *k != "turn_start")
            .collect();
        let b: Vec<&str> = expected
            .iter()
            .copied()
            .filter(|k| *k != "turn_start")
            .collect();
        a.dedup();
        ensure!(a == b, "event order {kinds:?}");
        let updates = events
            .iter()
            .filter(|e| e["type"] == "message_update")
            .count();
        ensure!(
            updates >= 2,
            "expected message_update events, got {updates}"
        );
        conn.finish().await;
        Ok(())
    })
}

fn completion_watch(ctx: &mut Ctx) -> BoxFut<'_> {
    Box::pin(async move {
        ctx.mock.push(Step::text("watched text"));
        let mut conn = ctx.conn().await?;
        let admitted = conn
            .call_ok(
                "p",
                "session.prompt",
                Some(json!({"delivery":"direct","text":"go","completionId":"cycle-1"})),
            )
            .await?;
        ensure!(
            admitted == json!({"delivery":"direct","completionRevision":1}),
            "prompt result {admitted}"
        );
        let result = conn
            .call_ok(
                "w",
                "session.await_idle",
                Some(json!({"completionId":"cycle-1"})),
            )
            .await?;
        ensure!(
            result["completionRevision"] == 1,
            "revision {}",
            result["completionRevision"]
        );
        ensure!(
            result["messageCount"] == 2,
            "messageCount {}",
            result["messageCount"]
        );
        let c = &result["completion"];
        ensure!(c["text"] == "watched text", "text {}", c["text"]);
        ensure!(c["stopReason"] == "stop", "stopReason {}", c["stopReason"]);
        ensure!(
            c["originalBytes"] == 12 && c["omittedBytes"] == 0,
            "byte counts {c}"
        );
        let plain = conn
            .call_ok(
                "q",
                "session.prompt",
                Some(json!({"delivery":"follow_up","text":"later"})),
            )
            .await?;
        ensure!(
            plain == json!({"delivery":"follow_up"}),
            "follow_up result {plain}"
        );
        conn.finish().await;
        Ok(())
    })
}

fn inactive_watch(ctx: &mut Ctx) -> BoxFut<'_> {
    Box::pin(async move {
        let mut conn = ctx.conn().await?;
        let frame = conn
            .call(
                "w",
                "session.await_idle",
                Some(json!({"completionId":"nope"})),
            )
            .await?;
        ensure!(frame["ok"] == false, "succeeded: {frame}");
        ensure!(
            frame["error"]["code"] == "operation_failed",
            "code {}",
            frame["error"]["code"]
        );
        ensure!(
            frame["error"]["message"] == "Completion watch is not active: nope",
            "message {}",
            frame["error"]["message"]
        );
        let plain = conn.call_ok("w2", "session.await_idle", None).await?;
        ensure!(
            plain == json!({}),
            "await_idle without params returned {plain}"
        );
        conn.finish().await;
        Ok(())
    })
}

fn paging_messages(ctx: &mut Ctx) -> BoxFut<'_> {
    Box::pin(async move {
        ctx.mock.push(Step::text("one"));
        ctx.mock.push(Step::text("two"));
        let mut conn = ctx.conn().await?;
        for (i, text) in ["a", "b"].iter().enumerate() {
            conn.call_ok(
                &format!("p{i}"),
                "session.prompt",
                Some(json!({"delivery":"direct","text":text})),
            )
            .await?;
            conn.call_ok(&format!("w{i}"), "session.await_idle", None)
                .await?;
        }
        let all = conn.call_ok("m", "session.get_messages", None).await?;
        ensure!(
            all["start"] == 0 && all["total"] == 4 && all["nextStart"].is_null(),
            "page {all}"
        );
        ensure!(
            all["messages"].as_array().map(Vec::len) == Some(4),
            "4 messages expected"
        );
        let roles: Vec<&str> = all["messages"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|m| m["role"].as_str())
            .collect();
        ensure!(
            roles == ["user", "assistant", "user", "assistant"],
            "roles {roles:?}"
        );
        let first = conn
            .call_ok(
                "m1",
                "session.get_messages",
                Some(json!({"start":0,"limit":1})),
            )
            .await?;
        ensure!(
            first["nextStart"] == 1 && first["total"] == 4,
            "page {first}"
        );
        ensure!(
            first["messages"][0] == all["messages"][0],
            "page item differs"
        );
        let tail = conn
            .call_ok(
                "m2",
                "session.get_messages",
                Some(json!({"start":3,"limit":5})),
            )
            .await?;
        ensure!(
            tail["nextStart"].is_null() && tail["messages"].as_array().map(Vec::len) == Some(1),
            "page {tail}"
        );
        let past = conn
            .call_ok("m3", "session.get_messages", Some(json!({"start":10})))
            .await?;
        ensure!(
            past == json!({"start":10,"total":4,"nextStart":null,"messages":[]}),
            "page {past}"
        );
        let state = conn.call_ok("s", "session.get_state", None).await?;
        ensure!(
            state["messageCount"] == 4,
            "messageCount {}",
            state["messageCount"]
        );
        let _ = page_req("");
        conn.finish().await;
        Ok(())
    })
}

fn paging_outcomes(ctx: &mut Ctx) -> BoxFut<'_> {
    Box::pin(async move {
        let mut conn = ctx.conn().await?;
        let page = conn.call_ok("o", "session.get_outcomes", None).await?;
        ensure!(
            page == json!({"start":0,"total":0,"nextStart":null,"outcomes":[]}),
            "page {page}"
        );
        let page = conn
            .call_ok(
                "o2",
                "session.get_outcomes",
                Some(json!({"start":2,"limit":3})),
            )
            .await?;
        ensure!(
            page == json!({"start":2,"total":0,"nextStart":null,"outcomes":[]}),
            "page {page}"
        );
        conn.finish().await;
        Ok(())
    })
}

fn prompt_while_running(ctx: &mut Ctx) -> BoxFut<'_> {
    Box::pin(async move {
        ctx.mock.push(Step::Hang(vec!["busy".into()]));
        let mut conn = ctx.conn().await?;
        conn.call_ok(
            "p1",
            "session.prompt",
            Some(json!({"delivery":"direct","text":"one"})),
        )
        .await?;
        conn.event("message_update").await?;
        let frame = conn
            .call(
                "p2",
                "session.prompt",
                Some(json!({"delivery":"direct","text":"two"})),
            )
            .await?;
        ensure!(frame["ok"] == false, "admitted: {frame}");
        ensure!(
            frame["error"]["code"] == "operation_failed",
            "code {}",
            frame["error"]["code"]
        );
        ensure!(
            frame["error"]["message"] == "streamingBehavior is required while the agent is running",
            "message {}",
            frame["error"]["message"]
        );
        conn.call_ok("i", "session.interrupt", None).await?;
        conn.finish().await;
        Ok(())
    })
}

fn follow_up_idle(ctx: &mut Ctx) -> BoxFut<'_> {
    Box::pin(async move {
        let mut conn = ctx.conn().await?;
        conn.call_ok(
            "q",
            "session.prompt",
            Some(json!({"delivery":"follow_up","text":"later"})),
        )
        .await?;
        let state = conn.call_ok("s", "session.get_state", None).await?;
        ensure!(
            state["activity"]["type"] == "idle",
            "activity {}",
            state["activity"]
        );
        ensure!(
            state["queuedInputs"]["followUp"][0]["text"] == "later",
            "queue {}",
            state["queuedInputs"]
        );
        ensure!(
            state["queuedInputs"]["followUp"][0]["delivery"] == "followUp",
            "delivery {}",
            state["queuedInputs"]
        );
        ensure!(ctx.mock.requests().is_empty(), "the provider was called");
        conn.finish().await;
        Ok(())
    })
}

fn interrupt_run(ctx: &mut Ctx) -> BoxFut<'_> {
    Box::pin(async move {
        ctx.mock.push(Step::Hang(vec!["par".into(), "tial".into()]));
        let mut conn = ctx.conn().await?;
        conn.call_ok(
            "p",
            "session.prompt",
            Some(json!({"delivery":"direct","text":"go"})),
        )
        .await?;
        conn.event("message_update").await?;
        let result = conn.call_ok("i", "session.interrupt", None).await?;
        ensure!(result == json!({}), "result {result}");
        let state = conn.call_ok("s", "session.get_state", None).await?;
        ensure!(
            state["activity"]["type"] == "idle",
            "activity after interrupt {}",
            state["activity"]
        );
        let page = conn.call_ok("m", "session.get_messages", None).await?;
        let last = page["messages"]
            .as_array()
            .and_then(|m| m.last())
            .cloned()
            .unwrap_or_default();
        ensure!(
            last["role"] == "assistant" && last["stopReason"] == "aborted",
            "last message {last}"
        );
        // An idle interrupt resolves at once.
        conn.call_ok("i2", "session.interrupt", None).await?;
        conn.finish().await;
        Ok(())
    })
}

fn model_list(ctx: &mut Ctx) -> BoxFut<'_> {
    Box::pin(async move {
        let mut conn = ctx.conn().await?;
        let frame = conn.call("ml", "model.list", None).await?;
        ensure!(
            !frame.to_string().contains("baseUrl"),
            "model.list leaks baseUrl"
        );
        let models = frame["result"]["models"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let m1 = models
            .iter()
            .find(|m| m["provider"] == "mock" && m["id"] == "m1");
        let Some(m1) = m1 else {
            return Err(format!("mock/m1 missing from {models:?}").into());
        };
        let mut keys: Vec<&String> = m1
            .as_object()
            .map(|o| o.keys().collect())
            .unwrap_or_default();
        keys.sort();
        ensure!(
            keys == [
                "configured",
                "contextWindow",
                "id",
                "input",
                "maxTokens",
                "name",
                "provider",
                "reasoning"
            ],
            "keys {keys:?}"
        );
        ensure!(m1["configured"] == true, "mock/m1 is not configured");
        conn.finish().await;
        Ok(())
    })
}

fn model_select(ctx: &mut Ctx) -> BoxFut<'_> {
    Box::pin(async move {
        let mut conn = ctx.conn().await?;
        let result = conn
            .call_ok(
                "ms",
                "model.select",
                Some(json!({"provider":"mock","id":"m1"})),
            )
            .await?;
        ensure!(
            result["model"]["id"] == "m1" && result["model"].get("configured").is_none(),
            "result {result}"
        );
        let frame = conn
            .call(
                "mx",
                "model.select",
                Some(json!({"provider":"mock","id":"nope"})),
            )
            .await?;
        ensure!(
            frame["error"]["code"] == "not_found",
            "code {}",
            frame["error"]["code"]
        );
        ensure!(
            frame["error"]["message"] == "Model not found: mock/nope",
            "message {}",
            frame["error"]["message"]
        );
        conn.finish().await;
        Ok(())
    })
}

fn thinking(ctx: &mut Ctx) -> BoxFut<'_> {
    Box::pin(async move {
        let mut conn = ctx.conn().await?;
        let levels = conn.call_ok("tl", "thinking.list", None).await?;
        let list = levels["levels"].as_array().cloned().unwrap_or_default();
        ensure!(
            list.contains(&json!("off")) && list.contains(&json!("high")),
            "levels {levels}"
        );
        let sel = conn
            .call_ok("ts", "thinking.select", Some(json!({"level":"high"})))
            .await?;
        ensure!(
            sel == json!({"scope":"global","requested":"high","effective":"high"}),
            "result {sel}"
        );
        let state = conn.call_ok("s", "session.get_state", None).await?;
        ensure!(
            state["thinkingLevel"] == "high",
            "thinkingLevel {}",
            state["thinkingLevel"]
        );
        conn.finish().await;
        Ok(())
    })
}

fn commands(ctx: &mut Ctx) -> BoxFut<'_> {
    Box::pin(async move {
        let mut conn = ctx.conn().await?;
        let list = conn.call_ok("cl", "command.list", None).await?;
        ensure!(list["commands"].is_array(), "result {list}");
        let frame = conn
            .call(
                "ci",
                "command.invoke",
                Some(json!({"name":"missing","arguments":""})),
            )
            .await?;
        ensure!(
            frame["error"]["code"] == "not_found",
            "code {}",
            frame["error"]["code"]
        );
        ensure!(
            frame["error"]["message"] == "Command not found: missing",
            "message {}",
            frame["error"]["message"]
        );
        conn.finish().await;
        Ok(())
    })
}

fn shutdown_eof(ctx: &mut Ctx) -> BoxFut<'_> {
    Box::pin(async move {
        let mut conn = ctx.conn().await?;
        conn.close_stdin();
        let status = conn.wait_exit(Duration::from_secs(5)).await;
        ensure!(
            status.is_some_and(|s| s.success()),
            "exit {status:?}, expected 0 within 5 s"
        );
        let stderr = conn.stderr_text();
        ensure!(stderr.is_empty(), "stderr is not empty: {stderr:?}");
        Ok(())
    })
}

fn shutdown_eof_running(ctx: &mut Ctx) -> BoxFut<'_> {
    Box::pin(async move {
        ctx.mock.push(Step::Hang(vec!["busy".into()]));
        let mut conn = ctx.conn().await?;
        conn.call_ok(
            "p",
            "session.prompt",
            Some(json!({"delivery":"direct","text":"go"})),
        )
        .await?;
        conn.event("message_update").await?;
        conn.close_stdin();
        let status = conn.wait_exit(Duration::from_secs(7)).await;
        ensure!(
            status.is_some_and(|s| s.success()),
            "exit {status:?}, expected 0"
        );
        Ok(())
    })
}

async fn signal_case(ctx: &mut Ctx, signal: i32, code: i32) -> Outcome {
    let mut conn = ctx.conn().await?;
    conn.signal(signal);
    let status = conn.wait_exit(Duration::from_secs(7)).await;
    ensure!(
        status.and_then(|s| s.code()) == Some(code),
        "exit {status:?}, expected {code}"
    );
    Ok(())
}

fn shutdown_sigterm(ctx: &mut Ctx) -> BoxFut<'_> {
    Box::pin(signal_case(ctx, libc::SIGTERM, 143))
}

fn shutdown_sigint(ctx: &mut Ctx) -> BoxFut<'_> {
    Box::pin(signal_case(ctx, libc::SIGINT, 130))
}

fn positional_prompt(ctx: &mut Ctx) -> BoxFut<'_> {
    Box::pin(async move {
        let mut conn = ctx.spawn_with(&["hello"])?;
        let status = conn.wait_exit(Duration::from_secs(7)).await;
        ensure!(
            status.and_then(|s| s.code()) == Some(1),
            "exit {status:?}, expected 1"
        );
        let stderr = conn.stderr_text();
        ensure!(
            stderr == "RPC mode accepts input only through its JSONL protocol\n",
            "stderr {stderr:?}"
        );
        let frames = conn.drain(Duration::from_millis(100)).await;
        ensure!(frames.is_empty(), "frames on stdout: {frames:?}");
        Ok(())
    })
}

/// The checks over every frame of the run.
pub fn whole_run(
    frames: &Arc<Mutex<Vec<Value>>>,
    violations: &[Arc<Mutex<Vec<Violation>>>],
) -> Vec<CheckResult> {
    let mut found: Vec<String> = Vec::new();
    for v in violations {
        if let Ok(v) = v.lock() {
            found.extend(v.iter().map(|v| v.0.clone()));
        }
    }
    let frames = frames.lock().map(|f| f.clone()).unwrap_or_default();
    let framing = if found.is_empty() {
        Status::Pass
    } else {
        Status::Fail(format!(
            "{} violations: {:?}",
            found.len(),
            &found[..found.len().min(5)]
        ))
    };
    let schema = match jsonschema::validator_for(&zi_protocol::schema::server_frame_schema()) {
        Err(e) => Status::Fail(format!("the schema does not compile: {e}")),
        Ok(validator) => {
            let bad: Vec<String> = frames
                .iter()
                .filter(|f| !validator.is_valid(f))
                .take(5)
                .map(|f| {
                    let why: Vec<String> = validator
                        .iter_errors(f)
                        .take(2)
                        .map(|e| format!("{e} at {}", e.instance_path))
                        .collect();
                    let text = f.to_string();
                    format!("{}: {}", &text[..text.len().min(300)], why.join("; "))
                })
                .collect();
            if bad.is_empty() {
                Status::Pass
            } else {
                Status::Fail(bad.join("\n"))
            }
        }
    };
    let result =
        |id: &str, section: &str, description: String, status: Status, transcript: Vec<String>| {
            CheckResult {
                id: id.to_string(),
                level: Level::Must,
                section: section.to_string(),
                description,
                status,
                duration_ms: 0,
                transcript,
            }
        };
    let framing_transcript = found.clone();
    let schema_transcript = Vec::new();
    vec![
        result(
            "frames.framing-and-sequences",
            "§1 §2",
            format!(
                "all {} frames: compact JSON + LF, version 1, contiguous sequences, known types",
                frames.len()
            ),
            framing,
            framing_transcript,
        ),
        result(
            "frames.schema",
            "§2",
            format!("all {} frames match docs/rpc-schema.json", frames.len()),
            schema,
            schema_transcript,
        ),
    ]
}
