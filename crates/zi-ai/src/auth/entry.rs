//! One subscription's tokens as `auth.json` keeps them:
//! `{"type":"oauth","access","refresh","expires",…}` (`expires` in epoch milliseconds), plus
//! `accountId` (ChatGPT) or `enterpriseUrl` (GitHub Enterprise) and any field another tool
//! wrote, which zi keeps as written.

use serde_json::{Map, Value};

/// An `oauth` entry of auth.json.
#[derive(Clone, PartialEq, Default)]
pub struct OAuthEntry {
    /// The token requests carry (a ChatGPT access token, a Copilot token).
    pub access: String,
    /// The long-lived token that gets a new access token (a ChatGPT refresh token, the GitHub
    /// token).
    pub refresh: String,
    /// When `access` expires, in epoch milliseconds.
    pub expires: i64,
    /// The ChatGPT account (`accountId`).
    pub account_id: Option<String>,
    /// The GitHub Enterprise domain (`enterpriseUrl`), absent for github.com.
    pub enterprise: Option<String>,
    /// Every other field of the stored object.
    pub extra: Map<String, Value>,
}

/// Tokens never reach a log through `{:?}`.
impl std::fmt::Debug for OAuthEntry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OAuthEntry")
            .field("expires", &self.expires)
            .field("has_account_id", &self.account_id.is_some())
            .field("enterprise", &self.enterprise)
            .finish_non_exhaustive()
    }
}

const KNOWN: [&str; 6] = [
    "type",
    "access",
    "refresh",
    "expires",
    "accountId",
    "enterpriseUrl",
];

impl OAuthEntry {
    /// Reads an entry object; fields of the wrong type read as absent.
    pub fn from_json(object: &Map<String, Value>) -> OAuthEntry {
        let text = |key: &str| object.get(key).and_then(Value::as_str).map(str::to_string);
        OAuthEntry {
            access: text("access").unwrap_or_default(),
            refresh: text("refresh").unwrap_or_default(),
            expires: object
                .get("expires")
                .and_then(|v| v.as_i64().or_else(|| v.as_f64().map(|f| f as i64)))
                .unwrap_or(0),
            account_id: text("accountId").filter(|id| !id.is_empty()),
            enterprise: text("enterpriseUrl").filter(|d| !d.is_empty()),
            extra: object
                .iter()
                .filter(|(key, _)| !KNOWN.contains(&key.as_str()))
                .map(|(key, value)| (key.clone(), value.clone()))
                .collect(),
        }
    }

    /// What is wrong with an entry object's known fields, for the `Warning:` that names it
    /// (never a value): `"refresh" must be a string`, ….
    pub fn shape_problems(object: &Map<String, Value>) -> Vec<&'static str> {
        let mut problems = Vec::new();
        for (key, problem) in [
            ("access", "\"access\" must be a string"),
            ("refresh", "\"refresh\" must be a string"),
        ] {
            if !object.get(key).is_some_and(Value::is_string) {
                problems.push(problem);
            }
        }
        if !object.get("expires").is_some_and(Value::is_number) {
            problems.push("\"expires\" must be a number");
        }
        for (key, problem) in [
            ("accountId", "\"accountId\" must be a string"),
            ("enterpriseUrl", "\"enterpriseUrl\" must be a string"),
        ] {
            if object.get(key).is_some_and(|value| !value.is_string()) {
                problems.push(problem);
            }
        }
        problems
    }

    /// The stored object: the known fields, then the kept ones.
    pub fn to_json(&self) -> Value {
        let mut object = Map::new();
        object.insert("type".into(), Value::from("oauth"));
        object.insert("refresh".into(), Value::from(self.refresh.clone()));
        object.insert("access".into(), Value::from(self.access.clone()));
        object.insert("expires".into(), Value::from(self.expires));
        if let Some(id) = &self.account_id {
            object.insert("accountId".into(), Value::from(id.clone()));
        }
        if let Some(domain) = &self.enterprise {
            object.insert("enterpriseUrl".into(), Value::from(domain.clone()));
        }
        for (key, value) in &self.extra {
            object.insert(key.clone(), value.clone());
        }
        Value::Object(object)
    }

    /// Whether the access token is still good for more than `margin_ms`.
    pub fn fresh_for(&self, margin_ms: i64, now_ms: i64) -> bool {
        self.expires.saturating_sub(now_ms) > margin_ms
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_fields_survive_and_debug_hides_tokens() {
        let json = serde_json::json!({
            "type": "oauth", "access": "acc-secret", "refresh": "ref-secret",
            "expires": 1.7e12, "accountId": "acct", "note": {"by": "pi"}
        });
        let entry = OAuthEntry::from_json(json.as_object().unwrap());
        assert_eq!(entry.expires, 1_700_000_000_000);
        assert_eq!(entry.account_id.as_deref(), Some("acct"));
        let back = entry.to_json();
        assert_eq!(back["note"]["by"], "pi");
        assert_eq!(back["expires"], 1_700_000_000_000_i64);
        let debug = format!("{entry:?}");
        assert!(!debug.contains("secret"), "{debug}");
        assert!(OAuthEntry::shape_problems(json.as_object().unwrap()).is_empty());
    }

    #[test]
    fn shape_problems_name_each_field_and_no_value() {
        let json = serde_json::json!({
            "type": "oauth", "access": 7, "expires": "tomorrow", "accountId": ["secret-id"]
        });
        assert_eq!(
            OAuthEntry::shape_problems(json.as_object().unwrap()),
            [
                "\"access\" must be a string",
                "\"refresh\" must be a string",
                "\"expires\" must be a number",
                "\"accountId\" must be a string",
            ]
        );
    }
}
