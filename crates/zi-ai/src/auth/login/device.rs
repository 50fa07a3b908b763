//! GitHub Copilot sign-in: GitHub's device flow (RFC 8628) gets a GitHub token — the person
//! enters a short code at GitHub while zi polls at the server's interval, slowing down when
//! told to, until the code expires — then the token is exchanged for a Copilot token, and the
//! plan's models that must be enabled once are enabled.

use std::time::Duration;

use serde_json::Value;
use tokio::time::Instant;

use super::{LoginError, LoginEvent, LoginOptions, LoginUi};
use crate::auth::copilot::{self, CLIENT_ID, USER_AGENT, enterprise_domain, identity_headers};
use crate::auth::endpoints::AuthEndpoints;
use crate::auth::entry::OAuthEntry;
use crate::auth::http::{AuthRequest, client, headers, number_field, send_json, text_field};

/// The poll interval when the server names none (RFC 8628 §3.2), and the least zi uses.
const DEFAULT_INTERVAL: Duration = Duration::from_secs(5);
const MIN_INTERVAL: Duration = Duration::from_secs(1);
/// What `slow_down` adds when it names no interval (RFC 8628 §3.5).
const SLOW_DOWN_STEP: Duration = Duration::from_secs(5);
/// The device code's lifetime when the server names none.
const DEFAULT_EXPIRY: Duration = Duration::from_secs(15 * 60);
/// How long enabling the plan's models may take in all.
const ENABLE_TIMEOUT: Duration = Duration::from_secs(10);

/// A device code as GitHub hands it out.
struct DeviceCode {
    device_code: String,
    user_code: String,
    verification_uri: String,
    expires_in: Duration,
    interval: Duration,
}

pub(super) async fn sign_in(
    options: &LoginOptions,
    ui: &dyn LoginUi,
) -> Result<OAuthEntry, LoginError> {
    let enterprise = match &options.enterprise {
        Some(input) => Some(enterprise_domain(input).ok_or(LoginError::InvalidEnterprise)?),
        None => None,
    };
    let github = options.endpoints.github_url(enterprise.as_deref());
    let code = device_code(&github).await?;
    ui.show(LoginEvent::DeviceCode {
        verification_uri: code.verification_uri.clone(),
        user_code: code.user_code.clone(),
        expires_in: code.expires_in.as_secs(),
    });
    ui.open_browser(&code.verification_uri);
    let github_token = poll(&github, &code).await?;
    ui.show(LoginEvent::Progress(
        "Exchanging the GitHub token for a Copilot token…".into(),
    ));
    let mut entry =
        copilot::exchange(&options.endpoints, &github_token, enterprise.as_deref()).await?;
    entry.enterprise = enterprise;
    Ok(entry)
}

fn form_headers() -> reqwest::header::HeaderMap {
    headers(&[("user-agent", USER_AGENT)])
}

async fn device_code(github: &str) -> Result<DeviceCode, LoginError> {
    let request = client()
        .map_err(|e| LoginError::DeviceFailed(e.to_string()))?
        .post(format!("{github}/login/device/code"))
        .headers(form_headers())
        .form(&[("client_id", CLIENT_ID), ("scope", "read:user")]);
    let answer = send_json(AuthRequest {
        request,
        secrets: &[],
    })
    .await
    .map_err(|e| LoginError::DeviceFailed(e.to_string()))?;
    let field = |key: &'static str| {
        text_field(&answer, key)
            .ok_or_else(|| LoginError::DeviceFailed(format!("the answer has no {key}")))
    };
    let verification_uri = field("verification_uri")?;
    if !reqwest::Url::parse(&verification_uri).is_ok_and(|u| matches!(u.scheme(), "http" | "https"))
    {
        return Err(LoginError::DeviceFailed(
            "the verification address is not a web address".into(),
        ));
    }
    let seconds = |key| number_field(&answer, key).filter(|n| *n > 0.0);
    Ok(DeviceCode {
        device_code: field("device_code")?,
        user_code: field("user_code")?,
        verification_uri,
        expires_in: seconds("expires_in").map_or(DEFAULT_EXPIRY, Duration::from_secs_f64),
        interval: seconds("interval")
            .map_or(DEFAULT_INTERVAL, Duration::from_secs_f64)
            .max(MIN_INTERVAL),
    })
}

/// What one poll answered.
#[derive(Debug)]
enum PollAnswer {
    Token(String),
    Pending,
    SlowDown(Option<Duration>),
    Failed(LoginError),
}

/// The interval after a `slow_down` that named `asked` (or none).
fn slowed(current: Duration, asked: Option<Duration>) -> Duration {
    match asked {
        Some(asked) => current.max(asked),
        None => current + SLOW_DOWN_STEP,
    }
}

/// Polls until the person approves, refuses, or the code expires. The first poll waits one
/// interval, as the server asks.
async fn poll(github: &str, code: &DeviceCode) -> Result<String, LoginError> {
    let deadline = Instant::now() + code.expires_in;
    let mut interval = code.interval;
    loop {
        let wake = Instant::now() + interval;
        if wake > deadline {
            tokio::time::sleep_until(deadline).await;
            return Err(LoginError::DeviceTimedOut);
        }
        tokio::time::sleep_until(wake).await;
        match poll_once(github, &code.device_code).await {
            PollAnswer::Token(token) => return Ok(token),
            PollAnswer::Pending => {}
            PollAnswer::SlowDown(asked) => interval = slowed(interval, asked),
            PollAnswer::Failed(error) => return Err(error),
        }
    }
}

async fn poll_once(github: &str, device_code: &str) -> PollAnswer {
    let request = match client() {
        Ok(client) => client
            .post(format!("{github}/login/oauth/access_token"))
            .headers(form_headers())
            .form(&[
                ("client_id", CLIENT_ID),
                ("device_code", device_code),
                ("grant_type", "urn:ietf:params:oauth:grant-type:device_code"),
            ]),
        Err(error) => return PollAnswer::Failed(LoginError::DeviceFailed(error.to_string())),
    };
    match send_json(AuthRequest {
        request,
        secrets: &[device_code],
    })
    .await
    {
        Ok(answer) => read_poll(&answer),
        Err(error) => PollAnswer::Failed(LoginError::DeviceFailed(error.to_string())),
    }
}

/// GitHub answers every poll with HTTP 200: a token, or an `error`.
fn read_poll(answer: &Value) -> PollAnswer {
    if let Some(token) = text_field(answer, "access_token") {
        return PollAnswer::Token(token);
    }
    match answer.get("error").and_then(Value::as_str).unwrap_or("") {
        "authorization_pending" => PollAnswer::Pending,
        "slow_down" => PollAnswer::SlowDown(
            number_field(answer, "interval")
                .filter(|n| *n > 0.0)
                .map(Duration::from_secs_f64),
        ),
        "expired_token" => PollAnswer::Failed(LoginError::DeviceExpired),
        "access_denied" => PollAnswer::Failed(LoginError::Denied("access_denied".into())),
        other => {
            let description = text_field(answer, "error_description")
                .map(|d| format!(": {d}"))
                .unwrap_or_default();
            PollAnswer::Failed(LoginError::DeviceFailed(format!("{other}{description}")))
        }
    }
}

/// Enables, once after sign-in, every catalog model the plan may require enabling
/// (`POST <base>/models/<id>/policy`). Failures change nothing: a model that stays disabled
/// reports it on its first request.
pub(super) async fn enable_models(endpoints: &AuthEndpoints, entry: &OAuthEntry) {
    let Ok(client) = client() else {
        return;
    };
    let base = copilot::api_base(endpoints, &entry.access, entry.enterprise.as_deref());
    let bearer = format!("Bearer {}", entry.access);
    let mut pairs = vec![
        ("authorization", bearer.as_str()),
        ("content-type", "application/json"),
        ("openai-intent", "chat-policy"),
        ("x-interaction-type", "chat-policy"),
    ];
    pairs.extend(identity_headers());
    let map = headers(&pairs);
    let calls = crate::builtin::model_ids(crate::auth::COPILOT)
        .into_iter()
        .map(|id| {
            client
                .post(format!("{base}/models/{id}/policy"))
                .headers(map.clone())
                .body(r#"{"state":"enabled"}"#)
                .send()
        });
    match tokio::time::timeout(ENABLE_TIMEOUT, futures::future::join_all(calls)).await {
        Ok(results) => {
            let failed = results
                .iter()
                .filter(|r| !r.as_ref().is_ok_and(|r| r.status().is_success()))
                .count();
            if failed > 0 {
                tracing::debug!("{failed} Copilot models could not be enabled");
            }
        }
        Err(_) => tracing::debug!("enabling the Copilot models timed out"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn poll_answers_and_slow_downs() {
        assert!(
            matches!(read_poll(&json!({"access_token": "gho_x"})), PollAnswer::Token(t) if t == "gho_x")
        );
        assert!(matches!(
            read_poll(&json!({"error": "authorization_pending"})),
            PollAnswer::Pending
        ));
        assert!(matches!(
            read_poll(&json!({"error": "slow_down", "interval": 9})),
            PollAnswer::SlowDown(Some(d)) if d == Duration::from_secs(9)
        ));
        assert!(matches!(
            read_poll(&json!({"error": "slow_down"})),
            PollAnswer::SlowDown(None)
        ));
        assert!(matches!(
            read_poll(&json!({"error": "expired_token"})),
            PollAnswer::Failed(LoginError::DeviceExpired)
        ));
        let Some(PollAnswer::Failed(error)) = Some(read_poll(
            &json!({"error": "bad", "error_description": "why"}),
        )) else {
            panic!("a failure");
        };
        assert_eq!(error.to_string(), "Device flow failed: bad: why");
        let five = Duration::from_secs(5);
        assert_eq!(slowed(five, None), Duration::from_secs(10));
        assert_eq!(slowed(five, Some(Duration::from_secs(3))), five);
        assert_eq!(
            slowed(five, Some(Duration::from_secs(8))),
            Duration::from_secs(8)
        );
    }
}
