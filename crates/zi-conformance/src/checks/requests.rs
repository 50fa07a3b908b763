//! Requests and admission (docs/rpc.md#decoding-a-request, docs/rpc.md#request-ids-and-capacity):
//! state, decoding defaults, ids, capacity, event modes.

use std::time::Duration;

use serde_json::json;
use zi_mock_provider::mock_llm::Step;

use super::steps::{expect_error, start_run};
use crate::{BoxFut, CheckError, Ctx};

pub(super) fn get_state(ctx: &mut Ctx) -> BoxFut<'_> {
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

pub(super) fn decode_defaults(ctx: &mut Ctx) -> BoxFut<'_> {
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

pub(super) fn duplicate_in_flight(ctx: &mut Ctx) -> BoxFut<'_> {
    Box::pin(async move {
        let mut conn = start_run(ctx, Step::Hang(vec!["wait".into()])).await?;
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

pub(super) fn id_reuse(ctx: &mut Ctx) -> BoxFut<'_> {
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

pub(super) fn capacity(ctx: &mut Ctx) -> BoxFut<'_> {
    Box::pin(async move {
        let mut conn = start_run(ctx, Step::Hang(vec!["wait".into()])).await?;
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
        expect_error(
            &frame,
            "capacity",
            "RPC accepts at most 32 in-flight operations",
        )?;
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

pub(super) fn events_none(ctx: &mut Ctx) -> BoxFut<'_> {
    Box::pin(async move {
        ctx.mock.push(Step::text("quiet"));
        ctx.mock.push(Step::text("loud"));
        let mut conn = ctx.conn().await?;
        let result = conn
            .call_ok("e", "connection.set_events", Some(json!({"mode":"none"})))
            .await?;
        ensure!(result == json!({"mode":"none"}), "result {result}");
        conn.prompt("p", "direct", "a").await?;
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
        conn.prompt("p2", "direct", "b").await?;
        conn.event("agent_settled").await?;
        conn.finish().await;
        Ok(())
    })
}
