//! The one mapping of the session's errors onto RPC response errors (docs/rpc.md#error-codes):
//! the RPC connection answers every failed method with `.into()` of what the session returned.
//! The message is always the error's `Display`; the code is `not_found` for an unknown model,
//! command, approval or fork entry, and `operation_failed` for everything else.

use zi_journal::fork::ForkError;
use zi_protocol::frame::{ResponseError, ResponseErrorCode};

use super::SessionError;
use crate::session::SelectModelError;
use crate::session::approvals::{ApprovalsError, RespondError};
use crate::session::extension::InvokeError;

fn response(code: ResponseErrorCode, error: &impl ToString) -> ResponseError {
    ResponseError {
        code,
        message: error.to_string(),
    }
}

impl From<SessionError> for ResponseError {
    fn from(error: SessionError) -> ResponseError {
        let code = match error {
            SessionError::Fork(ForkError::NotFound(_)) => ResponseErrorCode::NotFound,
            _ => ResponseErrorCode::OperationFailed,
        };
        response(code, &error)
    }
}

impl From<InvokeError> for ResponseError {
    fn from(error: InvokeError) -> ResponseError {
        match error {
            InvokeError::NotFound(_) => response(ResponseErrorCode::NotFound, &error),
            InvokeError::Failed(error) => error.into(),
        }
    }
}

impl From<SelectModelError> for ResponseError {
    fn from(error: SelectModelError) -> ResponseError {
        match error {
            SelectModelError::NotFound(_) => response(ResponseErrorCode::NotFound, &error),
            SelectModelError::Failed(error) => error.into(),
        }
    }
}

impl From<RespondError> for ResponseError {
    fn from(error: RespondError) -> ResponseError {
        let code = match error {
            RespondError::NotFound(_) => ResponseErrorCode::NotFound,
            RespondError::Failed(_) => ResponseErrorCode::OperationFailed,
        };
        response(code, &error)
    }
}

impl From<ApprovalsError> for ResponseError {
    fn from(error: ApprovalsError) -> ResponseError {
        response(ResponseErrorCode::OperationFailed, &error)
    }
}
