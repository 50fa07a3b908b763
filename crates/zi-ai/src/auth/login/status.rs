//! `zi login --status`: each subscription, signed in or not, and until when its token is good —
//! never a token.

use std::path::Path;

use serde_json::Value;

use crate::auth::entry::OAuthEntry;
use crate::auth::store::{AuthStoreError, read_auth_map};
use crate::auth::{SUBSCRIPTIONS, utc_minute};

/// One subscription's sign-in as auth.json holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignInStatus {
    /// The subscription's provider id.
    pub provider: &'static str,
    /// Whether auth.json holds a sign-in for it.
    pub signed_in: bool,
    /// When the access token expires (epoch ms).
    pub expires: Option<i64>,
    /// The GitHub Enterprise domain.
    pub enterprise: Option<String>,
}

impl SignInStatus {
    /// `openai-codex    signed in (token valid until 2026-05-20 14:03 UTC, refreshed
    /// automatically)`, or `… not signed in`.
    pub fn line(&self, now_ms: i64) -> String {
        let mut line = format!("{:<16}", self.provider);
        if !self.signed_in {
            line.push_str("not signed in");
            return line;
        }
        line.push_str("signed in");
        if let Some(domain) = &self.enterprise {
            line.push_str(&format!(" to {domain}"));
        }
        match self.expires {
            Some(expires) if expires > now_ms => line.push_str(&format!(
                " (token valid until {}, refreshed automatically)",
                utc_minute(expires)
            )),
            Some(expires) => line.push_str(&format!(
                " (token expired at {}; refreshed at the next request)",
                utc_minute(expires)
            )),
            None => {}
        }
        line
    }
}

/// Every subscription's status, in `zi login`'s order. An auth.json that is not a JSON object
/// is an error (it is shown, never repaired).
pub fn status(agent_dir: &Path) -> Result<Vec<SignInStatus>, AuthStoreError> {
    let map = read_auth_map(agent_dir)?.unwrap_or_default();
    Ok(SUBSCRIPTIONS
        .iter()
        .map(|subscription| {
            let entry = match map.get(subscription.id) {
                Some(Value::Object(object))
                    if object.get("type").and_then(Value::as_str) == Some("oauth") =>
                {
                    Some(OAuthEntry::from_json(object))
                }
                _ => None,
            }
            .filter(|entry| !entry.refresh.is_empty());
            SignInStatus {
                provider: subscription.id,
                signed_in: entry.is_some(),
                expires: entry.as_ref().map(|e| e.expires),
                enterprise: entry.and_then(|e| e.enterprise),
            }
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_say_until_when_and_never_a_token() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("auth.json"),
            r#"{"github-copilot": {"type": "oauth", "access": "tok-secret", "refresh": "gho-secret",
                "expires": 1779285600000, "enterpriseUrl": "co.ghe.com"}}"#,
        )
        .unwrap();
        let lines: Vec<String> = status(dir.path())
            .unwrap()
            .iter()
            .map(|s| s.line(1_779_285_000_000))
            .collect();
        assert_eq!(
            lines,
            [
                "openai-codex    not signed in",
                "github-copilot  signed in to co.ghe.com (token valid until 2026-05-20 14:00 UTC, refreshed automatically)"
            ]
        );
        std::fs::write(dir.path().join("auth.json"), "[1]").unwrap();
        assert!(status(dir.path()).is_err());
    }
}
