//! Error classification of failed assistant messages (docs/providers.md#errors): whether the
//! session may retry the request, and whether the failure is a context-window overflow (which
//! retrying cannot fix).
//!
//! Classification reads the `errorMessage` that the provider adapters produce, so it also works
//! for messages restored from a journal. Adapters start HTTP failures with the status code
//! (`"429 Rate limit reached"`), which is the most reliable signal and is checked first.

/// Phrases that mark quota, billing or long-window limits: never retryable, even on a 429.
const NOT_RETRYABLE: &[&str] = &[
    "insufficient_quota",
    "exceeded your current quota",
    "quota exceeded",
    "quota_exceeded",
    "billing",
    "credit balance",
    "insufficient credits",
    "payment required",
    "daily limit",
    "monthly limit",
    "weekly limit",
    "usage limit",
    // ChatGPT plans without Codex; a subscription whose sign-in must be renewed.
    "usage_not_included",
    "zi login",
    // A `!command` key or header value that failed or timed out is a configuration error
    // (docs/providers.md#credentials): running it again waits another 10 s for the same end.
    "api key command for",
    "could not resolve header",
];

/// Phrases of transient failures.
const RETRYABLE: &[&str] = &[
    "overloaded",
    "rate limit",
    "rate_limit",
    "ratelimit",
    "too many requests",
    "resource_exhausted",
    "service unavailable",
    "service_unavailable",
    "server error",
    "server_error",
    "internal error",
    "internal_error",
    "bad gateway",
    "gateway timeout",
    "network error",
    "connection error",
    "connection refused",
    "connection reset",
    "connection closed",
    "connection lost",
    "fetch failed",
    "socket hang up",
    "other side closed",
    "timed out",
    "timeout",
    "terminated",
    "stream ended before",
    "ended before the final event",
    "ended unexpectedly",
    "upstream connect",
];

/// Phrases by which the APIs report a prompt that does not fit the context window.
const OVERFLOW: &[&str] = &[
    // Anthropic
    "prompt is too long",
    // OpenAI (chat completions and responses)
    "context_length_exceeded",
    "maximum context length",
    "exceeds the context window",
    "reduce the length of the messages",
    // Google
    "input token count",
    "exceeds the maximum number of tokens",
    // OpenAI-compatible servers
    "input is too long",
    "maximum prompt length",
    "exceeds the available context size",
    "greater than the context length",
    "context window exceeds limit",
    "exceeded model token limit",
    "too many tokens",
    "token limit exceeded",
    "context length exceeded",
    "request too large for model",
];

/// How every adapter words a reply the model refused to give (a safety stop): the
/// `errorMessage` starts with this, then names the provider's reason in parentheses.
pub(crate) const REFUSAL_PREFIX: &str = "The model refused to answer";

/// The `errorMessage` of a refusal, naming the provider's reason (`stop_reason refusal`,
/// `finish_reason content_filter`, `finishReason SAFETY`, …).
pub(crate) fn refusal_message(reason: &str) -> String {
    format!("{REFUSAL_PREFIX} ({reason})")
}

/// Whether a failure is the model refusing to answer (never retryable: the same request is
/// refused again). ACP reports it as the stop reason `refusal` rather than an error.
pub fn is_refusal(message: &str) -> bool {
    message.starts_with(REFUSAL_PREFIX)
}

/// The HTTP status an adapter put at the start of an error text, if any.
pub(crate) fn leading_status(message: &str) -> Option<u16> {
    let digits: String = message.chars().take_while(char::is_ascii_digit).collect();
    let rest = &message[digits.len()..];
    if digits.len() != 3 || !(rest.is_empty() || rest.starts_with(' ')) {
        return None;
    }
    digits
        .parse()
        .ok()
        .filter(|status| (100..600).contains(status))
}

/// Whether a failed request may succeed if sent again unchanged.
pub fn is_retryable(message: &str) -> bool {
    if is_refusal(message) {
        return false;
    }
    let lower = message.to_ascii_lowercase();
    if NOT_RETRYABLE.iter().any(|phrase| lower.contains(phrase)) || is_context_overflow(message) {
        return false;
    }
    match leading_status(message) {
        Some(408 | 409 | 425 | 429) => true,
        Some(status) if status >= 500 => true,
        // Other client errors (auth, permissions, invalid request) fail the same way again,
        // unless the body says the server is overloaded.
        Some(_) => lower.contains("overloaded"),
        None => RETRYABLE.iter().any(|phrase| lower.contains(phrase)),
    }
}

/// Whether a failure says the prompt exceeded the model's context window.
pub fn is_context_overflow(message: &str) -> bool {
    let lower = message.to_ascii_lowercase();
    if OVERFLOW.iter().any(|phrase| lower.contains(phrase)) {
        return true;
    }
    // Some servers answer an oversized body with a bare 413.
    leading_status(message) == Some(413)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transient_failures_are_retryable() {
        for message in [
            "429 Rate limit reached for gpt-4o",
            "529 Overloaded",
            "500 Internal Server Error",
            "503",
            "Network error: error sending request: connection refused",
            "Provider stream timed out after 300s without data",
            "Provider stream ended before the final event",
            "overloaded_error: Overloaded",
            "400 The server is overloaded",
        ] {
            assert!(is_retryable(message), "{message}");
        }
    }

    #[test]
    fn permanent_failures_are_not_retryable() {
        for message in [
            "429 You exceeded your current quota, please check your plan and billing details.",
            "429 insufficient_quota",
            "401 Incorrect API key provided",
            "403 Forbidden",
            "400 Invalid request: tools.0.name is required",
            "404 model not found",
            "400 prompt is too long: 210000 tokens > 200000 maximum",
            "Model p/m is not authenticated",
            "Could not refresh the openai-codex sign-in (Network error: connection refused); run zi login openai-codex",
            "stream broke",
            "API key command for mock failed: timed out after 10s",
            "API key command for mock failed: exited with signal: 9 (SIGKILL)",
            "Could not resolve header X-Token for provider mock: timed out after 10s",
        ] {
            assert!(!is_retryable(message), "{message}");
        }
    }

    #[test]
    fn overflow_is_recognised_per_api() {
        for message in [
            "400 prompt is too long: 210000 tokens > 200000 maximum",
            "400 This model's maximum context length is 128000 tokens. However, your messages resulted in 130000 tokens.",
            "400 Your input exceeds the context window of this model.",
            "400 The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).",
            "400 the request exceeds the available context size, try increasing it",
            "413 Payload Too Large",
        ] {
            assert!(is_context_overflow(message), "{message}");
        }
        assert!(!is_context_overflow("429 Rate limit reached"));
    }

    #[test]
    fn status_prefix_needs_three_digits_and_a_space() {
        assert_eq!(leading_status("429 x"), Some(429));
        assert_eq!(leading_status("429"), Some(429));
        assert_eq!(leading_status("4290 x"), None);
        assert_eq!(leading_status("42x"), None);
        assert_eq!(leading_status("timeout"), None);
    }

    #[test]
    fn refusals_are_classified_and_never_retried() {
        for reason in [
            "stop_reason refusal",
            "finish_reason content_filter",
            "finishReason SAFETY",
        ] {
            let message = refusal_message(reason);
            assert!(is_refusal(&message), "{message}");
            assert!(!is_retryable(&message), "{message}");
        }
        assert_eq!(
            refusal_message("stop_reason refusal"),
            "The model refused to answer (stop_reason refusal)"
        );
        assert!(!is_refusal("429 Rate limit reached"));
        assert!(!is_refusal("Provider stopped with finish_reason weird"));
    }
}
