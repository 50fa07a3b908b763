//! Shutdown (docs/rpc.md#shutdown-eof-signals-and-exit-codes) and the positional prompt.

use std::time::Duration;

use super::steps::streaming_run;
use crate::{BoxFut, CheckError, Ctx, Outcome};

pub(super) fn shutdown_eof(ctx: &mut Ctx) -> BoxFut<'_> {
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

pub(super) fn shutdown_eof_running(ctx: &mut Ctx) -> BoxFut<'_> {
    Box::pin(async move {
        let mut conn = streaming_run(ctx, &["busy"]).await?;
        conn.close_stdin();
        let status = conn.wait_exit(Duration::from_secs(7)).await;
        ensure!(
            status.is_some_and(|s| s.success()),
            "exit {status:?}, expected 0"
        );
        Ok(())
    })
}

pub(super) async fn signal_case(ctx: &mut Ctx, signal: i32, code: i32) -> Outcome {
    let mut conn = ctx.conn().await?;
    conn.signal(signal);
    let status = conn.wait_exit(Duration::from_secs(7)).await;
    ensure!(
        status.and_then(|s| s.code()) == Some(code),
        "exit {status:?}, expected {code}"
    );
    Ok(())
}

pub(super) fn shutdown_sigterm(ctx: &mut Ctx) -> BoxFut<'_> {
    Box::pin(signal_case(ctx, libc::SIGTERM, 143))
}

pub(super) fn shutdown_sigint(ctx: &mut Ctx) -> BoxFut<'_> {
    Box::pin(signal_case(ctx, libc::SIGINT, 130))
}

pub(super) fn positional_prompt(ctx: &mut Ctx) -> BoxFut<'_> {
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
