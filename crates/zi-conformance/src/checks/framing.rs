//! Framing (docs/rpc.md#framing, docs/rpc.md#frames): `ready` first, line endings, UTF-8, empty
//! and oversized records.

use std::time::Duration;

use crate::{BoxFut, CheckError, Ctx, Outcome};

pub(super) fn ready_first(ctx: &mut Ctx) -> BoxFut<'_> {
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

pub(super) fn crlf_accepted(ctx: &mut Ctx) -> BoxFut<'_> {
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

pub(super) fn unterminated_final_line(ctx: &mut Ctx) -> BoxFut<'_> {
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

pub(super) fn split_utf8(ctx: &mut Ctx) -> BoxFut<'_> {
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

pub(super) fn empty_line(ctx: &mut Ctx) -> BoxFut<'_> {
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

pub(super) async fn fatal_framing(ctx: &mut Ctx, bytes: &[u8], message: &str) -> Outcome {
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

pub(super) fn invalid_utf8(ctx: &mut Ctx) -> BoxFut<'_> {
    Box::pin(fatal_framing(
        ctx,
        b"\xff\n",
        "RPC input must be valid UTF-8",
    ))
}

pub(super) fn oversized_record(ctx: &mut Ctx) -> BoxFut<'_> {
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
