//! `ctx.progress(text | table)` of an extension tool: `tool_execution_update` events, bounded
//! in size and coalesced to at most 20 per second.
//!
//! The Lua thread never waits for the session: it replaces the latest update in a watch
//! channel. The async side forwards what it finds at most once per [`INTERVAL`] while the tool
//! runs, and the newest unsent update once it finished, so the last thing a client sees before
//! `tool_execution_end` is the script's last report.

use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::watch;
use zi_agent::tool::ProgressSink;
use zi_protocol::message::ContentBlock;

use crate::error::RegistrationError;

/// At most 20 updates per second.
pub const INTERVAL: Duration = Duration::from_millis(50);
/// Largest update, as JSON text.
pub const MAX_PROGRESS_BYTES: usize = 16 * 1024;

/// The latest update and its number (0: nothing reported yet).
type Latest = (u64, Option<Value>);

/// The Lua side: replaces the pending update.
#[derive(Clone)]
pub struct ProgressSender {
    latest: watch::Sender<Latest>,
}

/// The async side of one tool call.
pub struct ProgressForwarder {
    latest: watch::Receiver<Latest>,
    sink: ProgressSink,
    sent: u64,
}

pub fn channel(sink: ProgressSink) -> (ProgressSender, ProgressForwarder) {
    let (tx, rx) = watch::channel((0, None));
    (
        ProgressSender { latest: tx },
        ProgressForwarder {
            latest: rx,
            sink,
            sent: 0,
        },
    )
}

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

impl ProgressSender {
    pub fn report(&self, partial: Value) {
        self.latest.send_modify(|(number, value)| {
            *number += 1;
            *value = Some(partial);
        });
    }
}

impl ProgressForwarder {
    fn forward_latest(&mut self) {
        let (number, value) = self.latest.borrow_and_update().clone();
        if number > self.sent
            && let Some(value) = value
        {
            self.sent = number;
            (self.sink)(value);
        }
    }

    /// Drives `tool` to its end while forwarding updates (coalesced), then forwards the last
    /// one not yet sent.
    pub async fn run<T>(mut self, tool: impl std::future::Future<Output = T>) -> T {
        tokio::pin!(tool);
        let mut open = true;
        let result = loop {
            tokio::select! {
                biased;
                result = &mut tool => break result,
                changed = self.latest.changed(), if open => {
                    if changed.is_err() {
                        open = false;
                        continue;
                    }
                    self.forward_latest();
                    // Hold further updates back for one interval (they coalesce meanwhile).
                    tokio::select! {
                        result = &mut tool => break result,
                        () = tokio::time::sleep(INTERVAL) => {}
                    }
                }
            }
        };
        self.forward_latest();
        result
    }
}
