//! Runs (docs/rpc.md#event-order, docs/rpc.md#completion-watches): event order, completion
//! watches, paging, queued input, interrupts.

use std::time::Duration;

use serde_json::{Value, json};
use zi_mock_provider::mock_llm::Step;

use super::steps::{expect_error, start_run, streaming_run};
use crate::{BoxFut, CheckError, Ctx};

pub(super) fn event_order(ctx: &mut Ctx) -> BoxFut<'_> {
    Box::pin(async move {
        let mut conn = start_run(ctx, Step::Text(vec!["Hel".into(), "lo".into()])).await?;
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
        // turn_start may interleave with the user message events (decision 5 of
        // docs/rpc.md#zis-decisions).
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

pub(super) fn completion_watch(ctx: &mut Ctx) -> BoxFut<'_> {
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
        let plain = conn.prompt("q", "follow_up", "later").await?;
        ensure!(
            plain == json!({"delivery":"follow_up"}),
            "follow_up result {plain}"
        );
        conn.finish().await;
        Ok(())
    })
}

pub(super) fn inactive_watch(ctx: &mut Ctx) -> BoxFut<'_> {
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
        expect_error(
            &frame,
            "operation_failed",
            "Completion watch is not active: nope",
        )?;
        let plain = conn.call_ok("w2", "session.await_idle", None).await?;
        ensure!(
            plain == json!({}),
            "await_idle without params returned {plain}"
        );
        conn.finish().await;
        Ok(())
    })
}

pub(super) fn paging_messages(ctx: &mut Ctx) -> BoxFut<'_> {
    Box::pin(async move {
        ctx.mock.push(Step::text("one"));
        ctx.mock.push(Step::text("two"));
        let mut conn = ctx.conn().await?;
        for (i, text) in ["a", "b"].iter().enumerate() {
            conn.prompt(&format!("p{i}"), "direct", text).await?;
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
        conn.finish().await;
        Ok(())
    })
}

pub(super) fn paging_outcomes(ctx: &mut Ctx) -> BoxFut<'_> {
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

pub(super) fn prompt_while_running(ctx: &mut Ctx) -> BoxFut<'_> {
    Box::pin(async move {
        let mut conn = streaming_run(ctx, &["busy"]).await?;
        let frame = conn
            .call(
                "p2",
                "session.prompt",
                Some(json!({"delivery":"direct","text":"two"})),
            )
            .await?;
        ensure!(frame["ok"] == false, "admitted: {frame}");
        expect_error(
            &frame,
            "operation_failed",
            "streamingBehavior is required while the agent is running",
        )?;
        conn.call_ok("i", "session.interrupt", None).await?;
        conn.finish().await;
        Ok(())
    })
}

pub(super) fn follow_up_idle(ctx: &mut Ctx) -> BoxFut<'_> {
    Box::pin(async move {
        let mut conn = ctx.conn().await?;
        conn.prompt("q", "follow_up", "later").await?;
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

pub(super) fn interrupt_run(ctx: &mut Ctx) -> BoxFut<'_> {
    Box::pin(async move {
        let mut conn = streaming_run(ctx, &["par", "tial"]).await?;
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
