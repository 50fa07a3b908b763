//! The one mapping of the session's errors onto JSON-RPC errors (docs/acp.md): a request the
//! session cannot take now or does not fit (busy, disposed, an image the model cannot read, a
//! full queue, an unknown or oversized command, a sandbox looser than the operator's) is
//! `-32602`; no model is `-32000` (authentication required); anything else is zi failing,
//! `-32603`.

use zi_agent::errors::SessionError;
use zi_agent::extension::InvokeError;
use zi_agent::session::approvals::ApprovalsError;

use crate::jsonrpc::{AUTH_REQUIRED, RpcError};

/// The `-32000` text: what to configure, since the session's own text names zi's slash
/// commands, which an ACP client does not have.
const NO_MODEL: &str = "No model is configured: add an API key to <agent-dir>/auth.json or set \
     the provider's environment variable (ANTHROPIC_API_KEY, OPENAI_API_KEY, …), then choose a \
     model (docs/providers.md)";

impl From<SessionError> for RpcError {
    fn from(error: SessionError) -> RpcError {
        match error {
            SessionError::NoModel => RpcError::new(AUTH_REQUIRED, NO_MODEL),
            SessionError::Busy { .. }
            | SessionError::Disposed
            | SessionError::ModelRejectsImages(_)
            | SessionError::QueueCapacity
            | SessionError::CommandArgumentsTooLarge
            | SessionError::UnknownCommand(_) => RpcError::invalid_params(error.to_string()),
            error => RpcError::internal(error.to_string()),
        }
    }
}

impl From<InvokeError> for RpcError {
    fn from(error: InvokeError) -> RpcError {
        match error {
            InvokeError::NotFound(message) => RpcError::invalid_params(message),
            InvokeError::Failed(error) => error.into(),
        }
    }
}

impl From<ApprovalsError> for RpcError {
    fn from(error: ApprovalsError) -> RpcError {
        RpcError::invalid_params(error.to_string())
    }
}

#[cfg(test)]
mod tests {
    use zi_agent::errors::{Activity, Operation};

    use super::*;
    use crate::jsonrpc::{INTERNAL_ERROR, INVALID_PARAMS};

    /// Each kind of session error keeps the code zi-acp answered before the conversion was
    /// one impl: busy and unfit requests `-32602`, no model `-32000`, zi's own failures `-32603`.
    #[test]
    fn session_errors_keep_their_acp_codes() {
        let busy = SessionError::Busy {
            operation: Operation::InvokeCommand,
            activity: Activity::QueuedInput,
        };
        let cases: Vec<(RpcError, i32)> = vec![
            (busy.into(), INVALID_PARAMS),
            (SessionError::Disposed.into(), INVALID_PARAMS),
            (SessionError::QueueCapacity.into(), INVALID_PARAMS),
            (
                SessionError::ModelRejectsImages("a/b".into()).into(),
                INVALID_PARAMS,
            ),
            (
                SessionError::CommandArgumentsTooLarge.into(),
                INVALID_PARAMS,
            ),
            (
                InvokeError::NotFound("Command not found: x".into()).into(),
                INVALID_PARAMS,
            ),
            (
                ApprovalsError::MissingRoot("/nowhere".into()).into(),
                INVALID_PARAMS,
            ),
            (SessionError::NoModel.into(), AUTH_REQUIRED),
            (SessionError::CompactionCancelled.into(), INTERNAL_ERROR),
        ];
        for (error, code) in cases {
            assert_eq!(error.code, code, "{}", error.message);
        }
        let no_model = RpcError::from(SessionError::NoModel).message;
        assert_eq!(
            no_model,
            "No model is configured: add an API key to <agent-dir>/auth.json or set the \
             provider's environment variable (ANTHROPIC_API_KEY, OPENAI_API_KEY, …), then choose \
             a model (docs/providers.md)"
        );
    }
}
