//! The client's error type.

use std::time::Duration;

use crate::{ProtocolErrorCode, ResponseErrorCode};
use serde::de::DeserializeOwned;
use serde_json::Value;

/// Everything that can go wrong. Connection-level variants carry the server's stderr tail.
#[derive(Debug, Clone, thiserror::Error)]
pub enum Error {
    #[error("could not spawn the RPC server: {0}")]
    Spawn(String),
    #[error("the RPC server did not send ready within {timeout:?}; stderr: {stderr}")]
    ReadyTimeout { timeout: Duration, stderr: String },
    #[error("RPC server sequence gap: expected {expected}, received {received}")]
    SequenceGap { expected: u64, received: u64 },
    #[error("the RPC server emitted an unknown frame type: {0}")]
    UnknownFrameType(String),
    #[error("the RPC server emitted an invalid frame: {0}")]
    InvalidFrame(String),
    #[error("the RPC server rejected a request ({code}): {message}")]
    Protocol {
        code: ProtocolErrorCode,
        message: String,
        id: Option<String>,
    },
    #[error("{method} failed ({code:?}): {message}")]
    Response {
        method: String,
        code: ResponseErrorCode,
        message: String,
    },
    #[error("the RPC connection closed: {reason}; stderr: {stderr}")]
    Closed { reason: String, stderr: String },
    #[error("the RPC server exited with {status}; stderr: {stderr}")]
    Exit { status: String, stderr: String },
    #[error("could not decode the {what}: {message}")]
    Decode { what: String, message: String },
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

pub type Result<T, E = Error> = std::result::Result<T, E>;

pub(crate) fn decode<T: DeserializeOwned>(what: &str, value: Value) -> Result<T> {
    serde_json::from_value(value).map_err(|e| Error::Decode {
        what: what.to_string(),
        message: e.to_string(),
    })
}
