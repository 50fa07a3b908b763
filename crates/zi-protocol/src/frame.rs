//! Server frames (docs/rpc.md#frames): `ready`, `response`, `protocol_error`, `session_event`.
//!
//! Every frame starts with `version` and `sequence`. The body is serialized once, and the
//! envelope prefix is spliced in front of it, so no intermediate `Value` is built.

use serde::{Deserialize, Serialize};

use crate::approval::{ApprovalRequest, ApprovalResolution};
use crate::errors::{ProtocolError, ProtocolErrorCode};
use crate::event::AgentSessionEvent;
use crate::state::SessionState;

/// The `version` of every frame and request.
pub const PROTOCOL_VERSION: u64 = 1;

/// Error codes a `response` frame may carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum ResponseErrorCode {
    /// The in-flight capacity is exhausted.
    Capacity,
    /// The named command or model does not exist.
    NotFound,
    /// The operation was admitted to the method but failed.
    OperationFailed,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
/// The `error` of a failed `response` frame.
pub struct ResponseError {
    /// The error code.
    pub code: ResponseErrorCode,
    /// The exact message.
    pub message: String,
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum FrameBody<'a> {
    Ready {
        state: &'a SessionState,
    },
    ProtocolError {
        code: ProtocolErrorCode,
        message: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        id: Option<&'a str>,
    },
    SessionEvent {
        event: &'a AgentSessionEvent,
    },
    ApprovalRequest {
        approval: &'a ApprovalRequest,
    },
    ApprovalResolved {
        #[serde(flatten)]
        resolution: &'a ApprovalResolution,
    },
}

/// The body of a `response` frame, generic over the typed result so it is serialized once,
/// straight from the method's result type. Field order is the wire order.
#[derive(Serialize)]
struct ResponseBody<'a, R: Serialize + ?Sized> {
    #[serde(rename = "type")]
    frame_type: &'static str,
    id: &'a str,
    method: &'a str,
    ok: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    result: Option<&'a R>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<&'a ResponseError>,
}

/// A frame body ready to receive its sequence number: compact JSON of the body object, after
/// [`PREFIX_ROOM`] bytes of room for the envelope, so the final line is made in place.
#[derive(Debug, Clone)]
pub struct EncodedBody(Vec<u8>);

/// `{"version":1,"sequence":` + at most 20 digits + `,`: the envelope written before the body.
const PREFIX_ROOM: usize = ENVELOPE_START.len() + 20 + 1;
const ENVELOPE_START: &[u8] = b"{\"version\":1,\"sequence\":";
/// Most bodies (responses, the state snapshot, deltas) fit without the buffer growing while
/// it is written.
const LINE_CAPACITY: usize = 1024;

/// One output line: `{"version":1,"sequence":N,` + body fields + `}\n`.
#[derive(Debug, Clone)]
pub struct FrameLine {
    buffer: Vec<u8>,
    start: usize,
}

impl FrameLine {
    /// A line of another protocol sharing the ordered writer (ACP's JSON-RPC 2.0): the bytes
    /// as given, without the RPC envelope or a sequence number, then LF.
    pub fn plain(mut bytes: Vec<u8>) -> FrameLine {
        bytes.push(b'\n');
        FrameLine {
            buffer: bytes,
            start: 0,
        }
    }

    /// The line's bytes, LF included.
    pub fn as_bytes(&self) -> &[u8] {
        &self.buffer[self.start..]
    }

    /// The line's length, LF included.
    pub fn len(&self) -> usize {
        self.buffer.len() - self.start
    }

    /// Never true: a line holds at least its envelope and LF.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl EncodedBody {
    fn body(&self) -> &[u8] {
        &self.0[PREFIX_ROOM..]
    }

    /// Length of the final line (envelope + body + LF) for a given sequence.
    pub fn line_len(&self, sequence: u64) -> usize {
        envelope_prefix_len(sequence) + self.body().len() - 1 + 1
    }

    /// The final line for `sequence`, written into the body's own buffer: the envelope goes
    /// into the room before the body, ending with the `,` that replaces the body's `{`.
    pub fn into_line(self, sequence: u64) -> FrameLine {
        let mut buffer = self.0;
        let mut digits = [0u8; 20];
        let sequence_digits = decimal(sequence, &mut digits);
        let prefix_len = ENVELOPE_START.len() + sequence_digits.len() + 1;
        let start = PREFIX_ROOM + 1 - prefix_len;
        let (envelope, digits_at) = buffer[start..=PREFIX_ROOM].split_at_mut(ENVELOPE_START.len());
        envelope.copy_from_slice(ENVELOPE_START);
        digits_at[..sequence_digits.len()].copy_from_slice(sequence_digits);
        digits_at[sequence_digits.len()] = b',';
        buffer.push(b'\n');
        FrameLine { buffer, start }
    }
}

/// `value` in decimal, without allocating.
fn decimal(mut value: u64, digits: &mut [u8; 20]) -> &[u8] {
    let mut at = digits.len();
    loop {
        at -= 1;
        digits[at] = b'0' + (value % 10) as u8;
        value /= 10;
        if value == 0 {
            return &digits[at..];
        }
    }
}

fn envelope_prefix_len(sequence: u64) -> usize {
    let digits = sequence.checked_ilog10().map_or(1, |d| d as usize + 1);
    ENVELOPE_START.len() + digits + 1
}

fn encode<B: Serialize + ?Sized>(body: &B) -> Result<EncodedBody, serde_json::Error> {
    let mut buffer = Vec::with_capacity(LINE_CAPACITY);
    buffer.resize(PREFIX_ROOM, 0);
    serde_json::to_writer(&mut buffer, body)?;
    Ok(EncodedBody(buffer))
}

/// A `ready` body carrying the state snapshot.
pub fn encode_ready(state: &SessionState) -> Result<EncodedBody, serde_json::Error> {
    encode(&FrameBody::Ready { state })
}

/// A success `response` body with the method's typed result.
pub fn encode_success<R: Serialize + ?Sized>(
    id: &str,
    method: &str,
    result: &R,
) -> Result<EncodedBody, serde_json::Error> {
    encode(&ResponseBody {
        frame_type: "response",
        id,
        method,
        ok: true,
        result: Some(result),
        error: None,
    })
}

/// A failure `response` body.
pub fn encode_failure(
    id: &str,
    method: &str,
    error: &ResponseError,
) -> Result<EncodedBody, serde_json::Error> {
    encode(&ResponseBody::<()> {
        frame_type: "response",
        id,
        method,
        ok: false,
        result: None,
        error: Some(error),
    })
}

/// A `protocol_error` body.
pub fn encode_protocol_error(error: &ProtocolError) -> Result<EncodedBody, serde_json::Error> {
    encode(&FrameBody::ProtocolError {
        code: error.code,
        message: &error.message,
        id: error.id.as_deref(),
    })
}

/// A `session_event` body.
pub fn encode_event(event: &AgentSessionEvent) -> Result<EncodedBody, serde_json::Error> {
    encode(&FrameBody::SessionEvent { event })
}

/// An `approval_request` body (opted-in connections only; docs/approvals.md#the-request).
pub fn encode_approval_request(
    approval: &ApprovalRequest,
) -> Result<EncodedBody, serde_json::Error> {
    encode(&FrameBody::ApprovalRequest { approval })
}

/// An `approval_resolved` body (opted-in connections only;
/// docs/approvals.md#timeouts-interruption-and-eof).
pub fn encode_approval_resolved(
    resolution: &ApprovalResolution,
) -> Result<EncodedBody, serde_json::Error> {
    encode(&FrameBody::ApprovalResolved { resolution })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(body: &EncodedBody, sequence: u64) -> String {
        let line = body.clone().into_line(sequence);
        assert_eq!(line.len(), body.line_len(sequence));
        String::from_utf8(line.as_bytes().to_vec()).unwrap_or_default()
    }

    #[test]
    fn every_sequence_width_makes_the_same_line() {
        let body = encode_success("a", "m", &1).unwrap_or_else(|e| panic!("{e}"));
        for sequence in [0, 1, 9, 10, 99, 100, 12_345, u64::MAX] {
            assert_eq!(
                line(&body, sequence),
                format!(
                    "{{\"version\":1,\"sequence\":{sequence},\"type\":\"response\",\"id\":\"a\",\"method\":\"m\",\"ok\":true,\"result\":1}}\n"
                )
            );
        }
    }

    #[test]
    fn envelope_comes_first() {
        let body = encode_success("a", "session.get_state", &serde_json::json!({}))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            line(&body, 7),
            "{\"version\":1,\"sequence\":7,\"type\":\"response\",\"id\":\"a\",\"method\":\"session.get_state\",\"ok\":true,\"result\":{}}\n"
        );
        assert_eq!(line(&body, 10).len(), body.line_len(10));
    }

    #[test]
    fn protocol_error_omits_missing_id() {
        let error = ProtocolError {
            code: ProtocolErrorCode::InvalidJson,
            message: "m".into(),
            id: None,
        };
        let body = encode_protocol_error(&error).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            line(&body, 1),
            "{\"version\":1,\"sequence\":1,\"type\":\"protocol_error\",\"code\":\"invalid_json\",\"message\":\"m\"}\n"
        );
    }
}
