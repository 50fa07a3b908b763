//! Progress updates of a running tool, coalesced: at most one per [`INTERVAL`], and the latest
//! never lost (docs/extensions.md#progress-ctxprogresstext--table-and-deadlines-timeout_ms,
//! docs/code-mode.md#evidence).
//!
//! The reporting side never waits for the session: it replaces the latest update in a watch
//! channel. The async side forwards an update at once when none went out for an interval, holds
//! the next ones back for one interval (they coalesce meanwhile) and then forwards the newest —
//! also when nothing follows it for a long time — and once the tool finished, the newest not
//! yet sent, so the last thing a client sees before `tool_execution_end` is the last report.

use std::time::Duration;

use serde_json::Value;
use tokio::sync::watch;

use super::ProgressSink;

/// At most 20 updates per second.
pub const INTERVAL: Duration = Duration::from_millis(50);

/// The latest update and its number (0: nothing reported yet).
type Latest = (u64, Option<Value>);

/// The reporting side (a Lua thread, a Code Mode cell's trace): replaces the pending update.
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

/// A reporting side and the async side that forwards its updates to `sink`.
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

impl ProgressSender {
    /// Replaces the pending update with `partial`.
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
