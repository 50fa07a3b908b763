//! The client's error type.

use std::time::Duration;

use crate::{ProtocolErrorCode, ResponseErrorCode};
use serde::de::DeserializeOwned;
use serde_json::Value;

/// Everything that can go wrong. Connection-level variants carry the server's stderr tail.
#[derive(Debug, Clone, thiserror::Error)]
pub enum Error {
    /// The server process could not be started.
    #[error("could not spawn the RPC server: {0}")]
    Spawn(String),
    /// No `ready` frame arrived in time.
    #[error("the RPC server did not send ready within {timeout:?}; stderr: {stderr}")]
    ReadyTimeout {
        /// The deadline that passed.
        timeout: Duration,
        /// The tail of the server's stderr.
        stderr: String,
    },
    /// A frame's `sequence` was not the next one.
    #[error("RPC server sequence gap: expected {expected}, received {received}")]
    SequenceGap {
        /// The sequence number due.
        expected: u64,
        /// The one the frame carried.
        received: u64,
    },
    /// A frame whose `type` is none of Zi RPC v1's.
    #[error("the RPC server emitted an unknown frame type: {0}")]
    UnknownFrameType(String),
    /// A line that is not a valid frame (bad JSON, framing, or shape).
    #[error("the RPC server emitted an invalid frame: {0}")]
    InvalidFrame(String),
    /// The server answered a request with a `protocol_error` frame.
    #[error("the RPC server rejected a request ({code}): {message}")]
    Protocol {
        /// The frame's error code.
        code: ProtocolErrorCode,
        /// The frame's message.
        message: String,
        /// The request id the frame names, when it names one.
        id: Option<String>,
    },
    /// The server answered a request with `ok: false`.
    #[error("{method} failed ({code:?}): {message}")]
    Response {
        /// The method the response answers.
        method: String,
        /// The response's error code.
        code: ResponseErrorCode,
        /// The response's error message.
        message: String,
    },
    /// The connection ended before the answer came.
    #[error("the RPC connection closed: {reason}; stderr: {stderr}")]
    Closed {
        /// Why the client considers it closed.
        reason: String,
        /// The tail of the server's stderr.
        stderr: String,
    },
    /// The server process exited.
    #[error("the RPC server exited with {status}; stderr: {stderr}")]
    Exit {
        /// Its exit status, as printed.
        status: String,
        /// The tail of the server's stderr.
        stderr: String,
    },
    /// A result or event did not decode into its typed form.
    #[error("could not decode the {what}: {message}")]
    Decode {
        /// What was being decoded.
        what: String,
        /// The decoder's message.
        message: String,
    },
    /// The client could not do what was asked (an empty command, stdin closed, params that do
    /// not encode, a second close, …).
    #[error("{0}")]
    Usage(String),
}

impl Error {
    /// The response error code, for `ok: false` responses.
    pub fn response_code(&self) -> Option<ResponseErrorCode> {
        match self {
            Error::Response { code, .. } => Some(*code),
            _ => None,
        }
    }
}

/// A result whose error is the client's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

pub(crate) fn decode<T: DeserializeOwned>(what: &str, value: Value) -> Result<T> {
    serde_json::from_value(value).map_err(|e| Error::Decode {
        what: what.to_string(),
        message: e.to_string(),
    })
}
