//! The HTTP calls of the sign-in flows and refreshes: one bounded request each, JSON answers,
//! and failures whose text carries no secret (a server may echo a code or a token back).

use std::time::Duration;

use reqwest::header::{ACCEPT, HeaderMap, HeaderName, HeaderValue};
use serde_json::Value;

use zi_os::redact::Redactor;

/// Longest wait for one sign-in or refresh request, answer included.
pub(crate) const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// Why a sign-in or refresh request failed. `Display` is safe to show: secrets the caller named
/// are replaced by `<secret>` and URLs are left out.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HttpFailure {
    /// The server answered with an error status (`400 invalid_grant: …`).
    #[error("{status} {message}")]
    Status {
        /// The HTTP status.
        status: u16,
        /// The server's error and description, secrets replaced.
        message: String,
    },
    /// The request did not reach the server or its answer did not arrive whole.
    #[error("Network error: {0}")]
    Network(String),
    /// The server did not answer in time.
    #[error("no answer within {}s", REQUEST_TIMEOUT.as_secs())]
    TimedOut,
    /// The answer's body is not the JSON the flow expects.
    #[error("the answer is not JSON")]
    NotJson,
}

impl HttpFailure {
    /// The HTTP status, when the server answered.
    pub fn status(&self) -> Option<u16> {
        match self {
            HttpFailure::Status { status, .. } => Some(*status),
            _ => None,
        }
    }
}

/// Why a token request (code exchange, refresh, Copilot token exchange) failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    /// The request failed.
    #[error(transparent)]
    Http(#[from] HttpFailure),
    /// The answer lacks a field the entry needs (named).
    #[error("the token answer has no {0}")]
    Incomplete(&'static str),
    /// The ChatGPT token carries no account id, which Codex requests must send.
    #[error("Failed to extract the ChatGPT account id from the token")]
    NoAccountId,
    /// The system could not supply the random bytes of a verifier or state.
    #[error("no secure random numbers: {0}")]
    Random(String),
}

/// A request to send: method and URL are the caller's, the rest is common.
pub(crate) struct AuthRequest<'a> {
    pub request: reqwest::RequestBuilder,
    /// Values to hide from error texts.
    pub secrets: &'a [&'a str],
}

/// Headers from `(name, value)` pairs (names and values are zi's constants or tokens checked
/// by the caller; an invalid one is left out).
pub(crate) fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
    let mut map = HeaderMap::new();
    map.insert(ACCEPT, HeaderValue::from_static("application/json"));
    for (name, value) in pairs {
        if let (Ok(name), Ok(value)) = (
            HeaderName::from_bytes(name.as_bytes()),
            HeaderValue::from_str(value),
        ) {
            map.insert(name, value);
        }
    }
    map
}

/// The process-wide client (no redirects: a token must not follow one to another origin).
pub(crate) fn client() -> Result<&'static reqwest::Client, HttpFailure> {
    crate::http::client().map_err(|error| HttpFailure::Network(error.to_string()))
}

/// Sends the request and reads a JSON answer. An error status becomes [`HttpFailure::Status`]
/// with the OAuth `error` / `error_description` (or the body's message).
pub(crate) async fn send_json(call: AuthRequest<'_>) -> Result<Value, HttpFailure> {
    let mut redactor = Redactor::default();
    for secret in call.secrets {
        redactor.hide(*secret);
    }
    let exchange = async {
        let response = call
            .request
            .send()
            .await
            .map_err(|e| HttpFailure::Network(e.without_url().to_string()))?;
        let status = response.status();
        let body = response
            .bytes()
            .await
            .map_err(|e| HttpFailure::Network(e.without_url().to_string()))?;
        if !status.is_success() {
            let message = oauth_error(&body)
                .or_else(|| crate::providers::common::http_error_message(&body))
                .unwrap_or_else(|| status.canonical_reason().unwrap_or("").to_string());
            return Err(HttpFailure::Status {
                status: status.as_u16(),
                message,
            });
        }
        serde_json::from_slice(&body).map_err(|_| HttpFailure::NotJson)
    };
    let result = match tokio::time::timeout(REQUEST_TIMEOUT, exchange).await {
        Ok(result) => result,
        Err(_) => Err(HttpFailure::TimedOut),
    };
    result.map_err(|failure| match failure {
        HttpFailure::Status { status, message } => HttpFailure::Status {
            status,
            message: redactor.scrub(message),
        },
        HttpFailure::Network(text) => HttpFailure::Network(redactor.scrub(text)),
        other => other,
    })
}

/// `error: error_description` of an OAuth error body (RFC 6749 §5.2).
fn oauth_error(body: &[u8]) -> Option<String> {
    let json: Value = serde_json::from_slice(body).ok()?;
    let error = json.get("error")?.as_str()?;
    Some(
        match json.get("error_description").and_then(Value::as_str) {
            Some(description) if !description.is_empty() => format!("{error}: {description}"),
            _ => error.to_string(),
        },
    )
}

/// A string field of an answer, non-empty.
pub(crate) fn text_field(answer: &Value, key: &str) -> Option<String> {
    answer
        .get(key)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
}

/// A number field of an answer (an integer or a float).
pub(crate) fn number_field(answer: &Value, key: &str) -> Option<f64> {
    answer.get(key).and_then(Value::as_f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn oauth_errors_read_error_and_description() {
        assert_eq!(
            oauth_error(br#"{"error":"invalid_grant","error_description":"expired"}"#).as_deref(),
            Some("invalid_grant: expired")
        );
        assert_eq!(
            oauth_error(br#"{"error":"slow_down"}"#).as_deref(),
            Some("slow_down")
        );
        assert_eq!(oauth_error(br#"{"error":{"message":"x"}}"#), None);
    }
}
