//! Requests zi sends the client (`session/request_permission`, `fs/*`): ids, the answers they
//! wait for, and `$/cancel_request` when zi no longer needs an answer.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicI64, Ordering};

use serde_json::Value;
use tokio::sync::oneshot;

use crate::lock;

/// Who waits for an answer.
pub enum Waiter {
    /// A permission request: the session and the broker's approval id.
    Permission {
        session_id: String,
        approval_id: String,
    },
    /// A file request: the tool call waiting on it.
    Reply(oneshot::Sender<Result<Value, Value>>),
}

/// The requests in flight.
#[derive(Default)]
pub struct Outgoing {
    next: AtomicI64,
    waiting: Mutex<HashMap<i64, Waiter>>,
}

impl Outgoing {
    /// Registers a request; returns its id.
    pub fn register(&self, waiter: Waiter) -> i64 {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        lock(&self.waiting).insert(id, waiter);
        id
    }

    /// The waiter of an answer (once).
    pub fn answered(&self, id: &Value) -> Option<Waiter> {
        let id = id.as_i64()?;
        lock(&self.waiting).remove(&id)
    }

    /// Forgets a request whose answer no longer matters; true if it was waiting.
    pub fn forget(&self, id: i64) -> bool {
        lock(&self.waiting).remove(&id).is_some()
    }

    /// The id of the permission request for `approval_id`, forgotten.
    pub fn forget_permission(&self, approval_id: &str) -> Option<i64> {
        let mut waiting = lock(&self.waiting);
        let id = waiting.iter().find_map(|(id, waiter)| match waiter {
            Waiter::Permission {
                approval_id: waiting_for,
                ..
            } if waiting_for == approval_id => Some(*id),
            _ => None,
        })?;
        waiting.remove(&id);
        Some(id)
    }

    /// Every request still waiting is dropped (the connection ends): file requests fail.
    pub fn clear(&self) {
        lock(&self.waiting).clear();
    }
}
