//! Models, thinking levels and commands (docs/rpc.md#methods-by-example).

use serde_json::json;

use super::steps::expect_error;
use crate::{BoxFut, CheckError, Ctx};

pub(super) fn model_list(ctx: &mut Ctx) -> BoxFut<'_> {
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

pub(super) fn model_select(ctx: &mut Ctx) -> BoxFut<'_> {
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
        expect_error(&frame, "not_found", "Model not found: mock/nope")?;
        conn.finish().await;
        Ok(())
    })
}

pub(super) fn thinking(ctx: &mut Ctx) -> BoxFut<'_> {
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

pub(super) fn commands(ctx: &mut Ctx) -> BoxFut<'_> {
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
        expect_error(&frame, "not_found", "Command not found: missing")?;
        conn.finish().await;
        Ok(())
    })
}
