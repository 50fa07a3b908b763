//! The Codex flavour (`openai-codex-responses`): ChatGPT's backend speaks the Responses API at
//! `<base>/codex/responses` with a ChatGPT sign-in's token, the account header and zi's
//! `originator`, and answers usage limits of the plan with its own error body, which zi words
//! with the reset time instead of retrying blindly (docs/providers.md#subscriptions).

use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use serde_json::Value;

use crate::auth::utc_minute;
use crate::providers::common::{Halt, failure};
use crate::stream::StreamOptions;

/// `<base>/codex/responses`, unless the base already names the Codex path.
pub(super) fn url(base_url: &str) -> String {
    let base = base_url.trim_end_matches('/');
    if base.ends_with("/codex/responses") {
        base.to_string()
    } else if base.ends_with("/codex") {
        format!("{base}/responses")
    } else {
        format!("{base}/codex/responses")
    }
}

/// `zi/<version> (<os>; <arch>)`.
fn user_agent() -> String {
    format!(
        "zi/{} ({}; {})",
        env!("CARGO_PKG_VERSION"),
        std::env::consts::OS,
        std::env::consts::ARCH
    )
}

/// The headers of a Codex request besides the bearer token.
pub(super) fn headers(options: &StreamOptions) -> Result<HeaderMap, Halt> {
    let account = options
        .account_id
        .as_deref()
        .filter(|id| !id.is_empty())
        .ok_or_else(|| failure("Failed to extract the ChatGPT account id from the token"))?;
    let mut map = HeaderMap::new();
    let mut put = |name: &'static str, value: &str| -> Result<(), Halt> {
        let value = HeaderValue::from_str(value)
            .map_err(|_| failure(format!("Invalid value for header {name}")))?;
        map.insert(HeaderName::from_static(name), value);
        Ok(())
    };
    put("chatgpt-account-id", account)?;
    put("originator", crate::auth::codex::ORIGINATOR)?;
    put("openai-beta", "responses=experimental")?;
    put("accept", "text/event-stream")?;
    put("user-agent", &user_agent())?;
    if !options.session_id.is_empty() {
        put("session_id", &options.session_id)?;
    }
    Ok(map)
}

/// The error text of an HTTP error answer: the plan's usage limits in words, else the usual.
pub(super) fn describe_error(status: u16, body: &[u8]) -> Option<String> {
    let json: Value = serde_json::from_slice(body).ok()?;
    let error = json.get("error").filter(|e| e.is_object()).unwrap_or(&json);
    usage_limit_text(Some(status), error, zi_os::clock::now_millis())
}

/// The text of a usage-limit error (an HTTP body's `error` object, a mid-stream `error` event,
/// a failed response's `error`), or `None` for any other error. `usage_limit_reached` (and a
/// 429 or `rate_limit_exceeded` that says when it resets) names the plan and the reset time;
/// `usage_not_included` says the plan has no Codex. A 429 without a reset time is left to the
/// usual retry.
pub(super) fn usage_limit_text(status: Option<u16>, error: &Value, now_ms: i64) -> Option<String> {
    let field = |key: &str| error.get(key).and_then(Value::as_str).unwrap_or("");
    let code = [field("code"), field("type")]
        .into_iter()
        .find(|c| c.starts_with("usage_") || *c == "rate_limit_exceeded")
        .unwrap_or("");
    let prefix = status.map(|s| format!("{s} ")).unwrap_or_default();
    if code == "usage_not_included" {
        return Some(format!(
            "{prefix}Your ChatGPT plan does not include Codex (usage_not_included)"
        ));
    }
    let number = |key: &str| error.get(key).and_then(Value::as_f64).filter(|n| *n > 0.0);
    let reset_ms = number("resets_at")
        .map(|at| (at * 1000.0) as i64)
        .or_else(|| number("resets_in_seconds").map(|s| now_ms + (s * 1000.0) as i64));
    let limited = code == "usage_limit_reached"
        || ((status == Some(429) || code == "rate_limit_exceeded") && reset_ms.is_some());
    if !limited {
        return None;
    }
    let plan = match field("plan_type") {
        "" => String::new(),
        plan => format!(" ({plan} plan)"),
    };
    let when = match reset_ms {
        Some(at) => format!(
            "; it resets at {} (in {})",
            utc_minute(at),
            minutes_text(at - now_ms)
        ),
        None => "; try again later".to_string(),
    };
    Some(format!(
        "{prefix}You have hit your ChatGPT usage limit{plan}{when}"
    ))
}

/// `1 h 32 min`, `5 min` (rounded up; at least 1 min).
fn minutes_text(ms: i64) -> String {
    let minutes = (ms.max(0) + 59_999) / 60_000;
    let minutes = minutes.max(1);
    match (minutes / 60, minutes % 60) {
        (0, m) => format!("{m} min"),
        (h, 0) => format!("{h} h"),
        (h, m) => format!("{h} h {m} min"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn codex_urls_add_the_path_once() {
        assert_eq!(
            url("https://chatgpt.com/backend-api"),
            "https://chatgpt.com/backend-api/codex/responses"
        );
        assert_eq!(
            url("http://127.0.0.1:9/v1/codex/"),
            "http://127.0.0.1:9/v1/codex/responses"
        );
        assert_eq!(url("http://h/codex/responses"), "http://h/codex/responses");
    }

    #[test]
    fn usage_limits_name_the_plan_and_the_reset_time() {
        let now = 1_779_285_600_000; // 2026-05-20 14:00 UTC
        let error = json!({"type": "usage_limit_reached", "message": "x", "plan_type": "plus",
            "resets_at": (now + 92 * 60_000) / 1000});
        assert_eq!(
            usage_limit_text(Some(429), &error, now).as_deref(),
            Some(
                "429 You have hit your ChatGPT usage limit (plus plan); it resets at 2026-05-20 15:32 UTC (in 1 h 32 min)"
            )
        );
        let relative = json!({"code": "rate_limit_exceeded", "resets_in_seconds": 300});
        assert_eq!(
            usage_limit_text(None, &relative, now).as_deref(),
            Some(
                "You have hit your ChatGPT usage limit; it resets at 2026-05-20 14:05 UTC (in 5 min)"
            )
        );
        let unknown = json!({"code": "usage_limit_reached"});
        assert_eq!(
            usage_limit_text(Some(429), &unknown, now).as_deref(),
            Some("429 You have hit your ChatGPT usage limit; try again later")
        );
        assert_eq!(
            usage_limit_text(Some(403), &json!({"code": "usage_not_included"}), now).as_deref(),
            Some("403 Your ChatGPT plan does not include Codex (usage_not_included)")
        );
        assert_eq!(
            usage_limit_text(Some(429), &json!({"code": "rate_limit_exceeded"}), now),
            None
        );
        for text in [
            usage_limit_text(Some(429), &error, now).unwrap_or_default(),
            usage_limit_text(Some(403), &json!({"code": "usage_not_included"}), now)
                .unwrap_or_default(),
        ] {
            assert!(!crate::classify::is_retryable(&text), "{text}");
        }
    }
}
