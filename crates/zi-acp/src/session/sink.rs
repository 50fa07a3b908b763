//! Where one session's messages go: the connection's ordered writer, held back while the
//! response that creates or loads the session is not out yet (docs/acp.md#sessions: no
//! update of a session precedes that response, and a replay is never interleaved with live
//! updates).

use std::sync::Mutex;

use zi_rpc::output::{FrameKind, Output, Release};

use crate::jsonrpc::Line;
use crate::lock;

pub struct Sink {
    output: Output,
    /// `Some` while held: the lines wait here, in order.
    held: Mutex<Option<Vec<Vec<u8>>>>,
}

impl Sink {
    /// A sink that holds its lines until [`Sink::release`].
    pub fn held(output: Output) -> Sink {
        Sink {
            output,
            held: Mutex::new(Some(Vec::new())),
        }
    }

    /// Queues a line (or holds it). A line that cannot be serialized is logged and skipped:
    /// the session goes on.
    pub fn send(&self, line: Line) {
        let bytes = match line {
            Ok(bytes) => bytes,
            Err(error) => {
                tracing::error!("an ACP message could not be serialized: {error}");
                return;
            }
        };
        let mut held = lock(&self.held);
        match held.as_mut() {
            Some(lines) => lines.push(bytes),
            None => {
                self.output
                    .enqueue_plain(Ok(bytes), FrameKind::Required, None);
            }
        }
    }

    /// Queues a line past the hold (the response that creates the session, a replay), with
    /// an action run once its bytes are handed to the writer.
    pub fn send_now(&self, line: Line, release: Option<Release>) {
        self.output
            .enqueue_plain(line, FrameKind::Required, release);
    }

    /// Holds later lines (a load of an open session replays first).
    pub fn hold(&self) {
        let mut held = lock(&self.held);
        if held.is_none() {
            *held = Some(Vec::new());
        }
    }

    /// Queues what was held, then lets lines through.
    pub fn release(&self) {
        let mut held = lock(&self.held);
        if let Some(lines) = held.take() {
            for bytes in lines {
                self.output
                    .enqueue_plain(Ok(bytes), FrameKind::Required, None);
            }
        }
    }
}
