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
