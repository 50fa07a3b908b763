//! What many checks share: the opening of a run and the check of a failed response.

use zi_mock_provider::mock_llm::Step;

use crate::conn::{Conn, ConnError};
use crate::{Ctx, Outcome};

/// Scripts `step`, connects, and starts a run with the direct prompt `p` (`go`).
pub(super) async fn start_run(ctx: &mut Ctx, step: Step) -> Result<Conn, ConnError> {
    ctx.mock.push(step);
    let mut conn = ctx.conn().await?;
    conn.prompt("p", "direct", "go").await?;
    Ok(conn)
}

/// A run that is streaming: started with a step that sends `chunks` and then hangs, its first
/// `message_update` read.
pub(super) async fn streaming_run(ctx: &mut Ctx, chunks: &[&str]) -> Result<Conn, ConnError> {
    let step = Step::Hang(chunks.iter().map(|chunk| chunk.to_string()).collect());
    let mut conn = start_run(ctx, step).await?;
    conn.event("message_update").await?;
    Ok(conn)
}

/// The response `frame` carries the error `code` with exactly `message`.
pub(super) fn expect_error(frame: &serde_json::Value, code: &str, message: &str) -> Outcome {
    let error = &frame["error"];
    if error["code"] != code {
        return Err(format!("code {}", error["code"]).into());
    }
    if error["message"] != message {
        return Err(format!("message {}", error["message"]).into());
    }
    Ok(())
}
