//! The state shared with the reader tasks, and the reading and checking of frames.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use serde_json::Value;
use tokio::io::{AsyncBufReadExt as _, AsyncReadExt as _, BufReader};
use tokio::sync::{mpsc, oneshot, watch};
use zi_os::sync::lock;

use crate::error::{Error, Result, decode};
use crate::events::SessionEvent;
use crate::{MAX_FRAME_BYTES, ProtocolErrorCode, ResponseErrorCode};

/// The frame types of Zi RPC v1, plus the approval frames a server sends only to a connection
/// that called `connection.set_approvals` (docs/approvals.md).
pub(crate) const FRAME_TYPES: [&str; 6] = [
    "ready",
    "response",
    "protocol_error",
    "session_event",
    "approval_request",
    "approval_resolved",
];

pub(crate) type Reply = oneshot::Sender<Result<Value>>;

pub(crate) struct PendingRequest {
    pub(crate) method: String,
    pub(crate) reply: Reply,
    /// The in-flight slot, released when the response arrives (not when a caller gives up
    /// waiting), so the server never sees more than the client's limit.
    pub(crate) _slot: tokio::sync::OwnedSemaphorePermit,
}

pub(crate) struct Shared {
    pub(crate) pending: Mutex<HashMap<String, PendingRequest>>,
    pub(crate) subscribers: Mutex<Vec<mpsc::UnboundedSender<SessionEvent>>>,
    pub(crate) frame_taps: Mutex<Vec<mpsc::UnboundedSender<TappedFrame>>>,
    pub(crate) fatal: Mutex<Option<Error>>,
    pub(crate) stderr: Mutex<VecDeque<u8>>,
    pub(crate) stderr_tail_bytes: usize,
    pub(crate) raw_requests: bool,
    pub(crate) ready: Mutex<Option<Value>>,
    /// Becomes true with the first fatal error (EOF on stdout included).
    pub(crate) failed: watch::Sender<bool>,
}

/// One frame as a tap sees it: the exact line the server wrote and its parsed value.
#[derive(Debug, Clone, PartialEq)]
pub struct TappedFrame {
    /// The line as received, without its terminating LF (a CR before it is kept).
    pub line: Vec<u8>,
    /// The line parsed as JSON.
    pub frame: Value,
}

impl Shared {
    pub(crate) fn fatal(&self) -> Option<Error> {
        lock(&self.fatal).clone()
    }

    pub(crate) fn stderr_tail(&self) -> String {
        let buf = lock(&self.stderr);
        let bytes: Vec<u8> = buf.iter().copied().collect();
        String::from_utf8_lossy(&bytes).into_owned()
    }

    pub(crate) fn closed(&self, reason: &str) -> Error {
        Error::Closed {
            reason: reason.to_string(),
            stderr: self.stderr_tail(),
        }
    }

    /// Records the first fatal error and fails every pending request with it.
    pub(crate) fn fail(&self, error: Error) {
        {
            let mut fatal = lock(&self.fatal);
            if fatal.is_none() {
                *fatal = Some(error);
            }
        }
        let error = self.fatal().unwrap_or_else(|| self.closed("failed"));
        let pending: Vec<PendingRequest> = lock(&self.pending).drain().map(|(_, p)| p).collect();
        for p in pending {
            let _ = p.reply.send(Err(error.clone()));
        }
        lock(&self.subscribers).clear();
        lock(&self.frame_taps).clear();
        self.failed.send_replace(true);
    }
}

pub(crate) async fn collect_stderr(mut stderr: tokio::process::ChildStderr, shared: Arc<Shared>) {
    let mut chunk = vec![0u8; 8192];
    loop {
        match stderr.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                let mut buf = lock(&shared.stderr);
                buf.extend(&chunk[..n]);
                let excess = buf.len().saturating_sub(shared.stderr_tail_bytes);
                buf.drain(..excess);
            }
        }
    }
}

pub(crate) async fn read_frames(
    stdout: tokio::process::ChildStdout,
    shared: Arc<Shared>,
    ready: watch::Sender<bool>,
) {
    let mut reader = BufReader::with_capacity(64 * 1024, stdout);
    let mut expected = 1u64;
    let mut line = Vec::new();
    loop {
        line.clear();
        let read = (&mut reader)
            .take(MAX_FRAME_BYTES as u64 + 1)
            .read_until(b'\n', &mut line)
            .await;
        match read {
            Ok(0) => {
                shared.fail(shared.closed("stdout closed"));
                return;
            }
            Err(e) => {
                shared.fail(shared.closed(&format!("stdout read failed: {e}")));
                return;
            }
            Ok(_) => {}
        }
        if line.last() != Some(&b'\n') {
            let what = if line.len() > MAX_FRAME_BYTES {
                "a frame exceeds 16 MiB"
            } else {
                "stdout ended inside a frame"
            };
            shared.fail(Error::InvalidFrame(what.into()));
            return;
        }
        line.pop();
        let content = line.strip_suffix(b"\r").unwrap_or(&line);
        match handle_frame(content, &line, &mut expected, &shared) {
            Ok(is_ready) => {
                if is_ready {
                    let _ = ready.send(true);
                }
            }
            Err(error) => {
                shared.fail(error);
                return;
            }
        }
    }
}

pub(crate) fn preview(line: &[u8]) -> String {
    let text = String::from_utf8_lossy(&line[..line.len().min(300)]).into_owned();
    if line.len() > 300 { text + "…" } else { text }
}

/// Processes one frame (`line` without its LF and CR; `raw` as received, without the LF);
/// `Ok(true)` for `ready`.
pub(crate) fn handle_frame(
    line: &[u8],
    raw: &[u8],
    expected: &mut u64,
    shared: &Shared,
) -> Result<bool> {
    let frame: Value = serde_json::from_slice(line)
        .map_err(|e| Error::InvalidFrame(format!("{e}: {}", preview(line))))?;
    if !frame.is_object() || frame["version"] != 1 {
        return Err(Error::InvalidFrame(format!(
            "not a version 1 object: {}",
            preview(line)
        )));
    }
    let sequence = frame["sequence"]
        .as_u64()
        .ok_or_else(|| Error::InvalidFrame(format!("no integer sequence: {}", preview(line))))?;
    if sequence != *expected {
        return Err(Error::SequenceGap {
            expected: *expected,
            received: sequence,
        });
    }
    *expected += 1;
    let ty = frame["type"].as_str().unwrap_or_default().to_string();
    if !FRAME_TYPES.contains(&ty.as_str()) {
        return Err(Error::UnknownFrameType(preview(line)));
    }
    if (sequence == 1) != (ty == "ready") {
        return Err(Error::InvalidFrame(format!(
            "ready must be exactly the first frame: {}",
            preview(line)
        )));
    }
    {
        let mut taps = lock(&shared.frame_taps);
        if !taps.is_empty() {
            let tapped = TappedFrame {
                line: raw.to_vec(),
                frame: frame.clone(),
            };
            taps.retain(|tap| tap.send(tapped.clone()).is_ok());
        }
    }
    match ty.as_str() {
        "ready" => {
            if !frame["state"].is_object() {
                return Err(Error::InvalidFrame("ready without a state object".into()));
            }
            *lock(&shared.ready) = Some(frame["state"].clone());
            Ok(true)
        }
        "session_event" => {
            if !frame["event"].is_object() {
                return Err(Error::InvalidFrame(format!(
                    "session_event without an event object: {}",
                    preview(line)
                )));
            }
            let event = SessionEvent {
                sequence,
                event: frame["event"].clone(),
            };
            let mut subscribers = lock(&shared.subscribers);
            subscribers.retain(|s| s.send(event.clone()).is_ok());
            Ok(false)
        }
        // Seen by frame taps (the test harness); the typed client does not answer them itself.
        "approval_request" | "approval_resolved" => Ok(false),
        "response" => deliver_response(&frame, line, shared),
        _ => deliver_protocol_error(&frame, shared),
    }
}

/// Hands a response to the request waiting for it.
fn deliver_response(frame: &Value, line: &[u8], shared: &Shared) -> Result<bool> {
    let (Some(id), Some(method), Some(ok)) = (
        frame["id"].as_str(),
        frame["method"].as_str(),
        frame["ok"].as_bool(),
    ) else {
        return Err(Error::InvalidFrame(format!(
            "response without id, method or ok: {}",
            preview(line)
        )));
    };
    let Some(pending) = lock(&shared.pending).remove(id) else {
        if shared.raw_requests {
            return Ok(false);
        }
        return Err(Error::InvalidFrame(format!(
            "response to an unknown request id: {}",
            preview(line)
        )));
    };
    if pending.method != method {
        return Err(Error::InvalidFrame(format!(
            "response echoes {method} for a {} request",
            pending.method
        )));
    }
    let outcome = if ok {
        Ok(frame["result"].clone())
    } else {
        let code: ResponseErrorCode =
            decode("response error code", frame["error"]["code"].clone())?;
        let message = frame["error"]["message"]
            .as_str()
            .ok_or_else(|| Error::InvalidFrame("error without a message".into()))?;
        Err(Error::Response {
            method: method.to_string(),
            code,
            message: message.to_string(),
        })
    };
    let _ = pending.reply.send(outcome);
    Ok(false)
}

/// Hands a recoverable protocol error to the request it names; any other one fails the
/// connection (unless the test drives raw requests).
fn deliver_protocol_error(frame: &Value, shared: &Shared) -> Result<bool> {
    let code: ProtocolErrorCode = decode("protocol error code", frame["code"].clone())?;
    let error = Error::Protocol {
        code,
        message: frame["message"].as_str().unwrap_or_default().to_string(),
        id: frame["id"].as_str().map(str::to_string),
    };
    let target = frame["id"]
        .as_str()
        .filter(|_| code.is_recoverable())
        .and_then(|id| lock(&shared.pending).remove(id));
    match target {
        Some(pending) => {
            let _ = pending.reply.send(Err(error));
            Ok(false)
        }
        None if shared.raw_requests => Ok(false),
        None => Err(error),
    }
}

#[cfg(test)]
#[path = "connection_tests.rs"]
mod tests;
