//! `ctx.progress(text | table)` of an extension tool: `tool_execution_update` events, bounded
//! in size and coalesced to at most 20 per second.
//!
//! The Lua thread never waits for the session: it replaces the latest update, which
//! [`zi_agent::tool::progress`] forwards at most once per interval (50 ms) while the tool runs and
//! once more when it finished, so the last thing a client sees before `tool_execution_end` is
//! the script's last report.

use serde_json::{Value, json};
use zi_protocol::message::ContentBlock;

use crate::error::RegistrationError;

pub use zi_agent::tool::progress::{ProgressSender, channel};

/// Largest update, as JSON text.
pub const MAX_PROGRESS_BYTES: usize = 16 * 1024;

/// The update a report becomes: a text result, or a table's JSON text plus `details`, the same
/// shape as the tool's final result. Refused beyond the bounds of session JSON or 16 KiB.
pub fn partial_result(report: Value) -> Result<Value, RegistrationError> {
    let partial = match report {
        Value::String(text) => json!({"content": [ContentBlock::text(text)]}),
        value => {
            zi_agent::custom::validate_session_json(&value, "Progress")?;
            let text = serde_json::to_string(&value)?;
            json!({"content": [ContentBlock::text(text)], "details": value})
        }
    };
    let bytes = serde_json::to_vec(&partial).map_or(usize::MAX, |v| v.len());
    if bytes > MAX_PROGRESS_BYTES {
        return Err(RegistrationError::ProgressTooLarge);
    }
    Ok(partial)
}
