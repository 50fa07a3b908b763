//! Session events as subscribers receive them.

use crate::error::{Result, decode};
use serde_json::Value;
use tokio::sync::mpsc;

/// One `session_event` frame.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionEvent {
    /// The frame's `sequence`.
    pub sequence: u64,
    /// The `event` object; `event["type"]` names it. Decode with [`SessionEvent::typed`].
    pub event: Value,
}

impl SessionEvent {
    /// The event type (`agent_start`, `message_end`, …).
    pub fn kind(&self) -> &str {
        self.event["type"].as_str().unwrap_or_default()
    }

    /// The event decoded into zi's typed event enum.
    pub fn typed(&self) -> Result<zi_protocol::event::AgentSessionEvent> {
        decode("session event", self.event.clone())
    }
}

/// An ordered stream of session events, from subscription on.
pub struct EventStream {
    pub(crate) rx: mpsc::UnboundedReceiver<SessionEvent>,
}

impl EventStream {
    /// The next event; `None` once the connection has ended and every event was delivered.
    pub async fn next(&mut self) -> Option<SessionEvent> {
        self.rx.recv().await
    }

    /// The next event if one is already buffered.
    pub fn try_next(&mut self) -> Result<SessionEvent, mpsc::error::TryRecvError> {
        self.rx.try_recv()
    }

    /// Waits for the first event of type `kind`, skipping others; `None` when the stream ends.
    pub async fn next_of(&mut self, kind: &str) -> Option<SessionEvent> {
        while let Some(event) = self.next().await {
            if event.kind() == kind {
                return Some(event);
            }
        }
        None
    }
}
