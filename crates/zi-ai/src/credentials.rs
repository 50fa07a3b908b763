//! Credential resolution (docs/providers.md#credentials). Keys and
//! tokens live only in memory and in the request headers zi sends; they are never logged,
//! journaled or sent over RPC.
//!
//! Order for a model: `--api-key` (for the selected model's provider only), then
//! `<agent-dir>/auth.json` (`api_key` entries, and the sign-ins of the subscription providers,
//! refreshed under the file's lock by [`crate::auth::refresh`]), then the provider's environment
//! variable (`ANTHROPIC_API_KEY`, …), then the models.json `apiKey` of the provider.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde_json::Value;
use zi_os::sync::lock;

use crate::auth::{self, AuthEndpoints, COPILOT, OAuthEntry};
use crate::model::Model;

use crate::auth::store::auth_path;

/// One stored credential of auth.json.
#[derive(Clone, PartialEq)]
pub enum StoredCredential {
    /// `{"type":"api_key","key":"…"}`; the key may be a literal, an env var name or `!command`.
    ApiKey(Option<String>),
    /// The sign-in of a subscription provider (`openai-codex`, `github-copilot`).
    Subscription(OAuthEntry),
    /// `{"type":"oauth",…}` of another provider: read, but zi cannot refresh it.
    ForeignOAuth,
}

/// Receives the `Warning:` texts of credential problems found while zi runs.
pub type WarnFn = Arc<dyn Fn(&str) + Send + Sync>;

/// Where keys come from. Clones share the refresh-failure record and the warning sink.
#[derive(Clone, Default)]
pub struct Credentials {
    cli_key: Option<(String, String)>,
    stored: BTreeMap<String, StoredCredential>,
    /// Provider id → key from its environment variable, captured once at start-up.
    env: BTreeMap<String, String>,
    /// The agent dir whose auth.json refreshes write (none: sign-ins are used as they are).
    agent_dir: Option<PathBuf>,
    endpoints: Arc<AuthEndpoints>,
    /// Provider → the refresh token whose refresh failed: the provider is not configured while
    /// auth.json still holds that token (a new `zi login` anywhere re-enables it).
    failed: Arc<Mutex<BTreeMap<String, String>>>,
    warn: Option<WarnFn>,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials")
            .field("cli_key_provider", &self.cli_key.as_ref().map(|(p, _)| p))
            .field("stored_providers", &self.stored.keys().collect::<Vec<_>>())
            .field("env_providers", &self.env.keys().collect::<Vec<_>>())
            .finish()
    }
}

/// What one request carries: the key or token, and for a subscription the endpoint its token
/// names and the ChatGPT account.
#[derive(Clone, Default, PartialEq)]
pub struct RequestAuth {
    /// The API key or access token; `None` for a provider that needs none (a local server).
    pub key: Option<String>,
    /// Replaces the model's base URL (Copilot's API, `ZI_CODEX_BASE_URL`).
    pub base_url: Option<String>,
    /// The ChatGPT account of a Codex request.
    pub account_id: Option<String>,
}

impl std::fmt::Debug for RequestAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RequestAuth")
            .field("has_key", &self.key.is_some())
            .field("has_base_url", &self.base_url.is_some())
            .finish_non_exhaustive()
    }
}

/// Why a request has no credentials. Texts name the model and provider, never a key.
#[derive(Debug, thiserror::Error)]
pub enum CredentialError {
    /// No source holds a key for the model's provider (`provider/id`).
    #[error("Model {0} is not authenticated")]
    NotAuthenticated(String),
    /// A subscription provider with no sign-in in auth.json.
    #[error("Model {model} is not authenticated: run zi login {provider}")]
    NotSignedIn {
        /// `provider/id`.
        model: String,
        /// The subscription to sign in to.
        provider: String,
    },
    /// The configured `!command` failed or printed nothing.
    #[error("API key command for {provider} failed: {reason}")]
    CommandFailed {
        /// The provider whose key it is.
        provider: String,
        /// What went wrong, without the command's output.
        #[source]
        reason: zi_os::command::CommandError,
    },
    /// The sign-in expired and refreshing it failed.
    #[error("Could not refresh the {provider} sign-in ({reason}); run zi login {provider}")]
    RefreshFailed {
        /// The subscription.
        provider: String,
        /// Why the refresh failed.
        reason: String,
    },
}

impl Credentials {
    /// Only a `--api-key` (tests and embedders); no auth.json, no environment.
    pub fn new(cli_key: Option<(String, String)>) -> Self {
        Credentials {
            cli_key,
            ..Credentials::default()
        }
    }

    /// Reads `<agent_dir>/auth.json` and the built-in providers' environment variables through
    /// `env`; sign-ins are refreshed against `endpoints`. Returns the credentials and
    /// diagnostics meant for `Warning: …` lines.
    pub fn load(
        agent_dir: &Path,
        cli_key: Option<(String, String)>,
        env: impl Fn(&str) -> Option<String>,
        endpoints: AuthEndpoints,
    ) -> (Credentials, Vec<String>) {
        let (stored, warnings) = read_auth_file(&auth_path(agent_dir));
        let env = crate::builtin::PROVIDERS
            .iter()
            .filter_map(|p| {
                env(p.env_var?)
                    .filter(|value| !value.is_empty())
                    .map(|value| (p.id.to_string(), value))
            })
            .collect();
        (
            Credentials {
                cli_key,
                stored,
                env,
                agent_dir: Some(agent_dir.to_path_buf()),
                endpoints: Arc::new(endpoints),
                ..Credentials::default()
            },
            warnings,
        )
    }

    /// Where problems found while zi runs (a failed refresh) are reported; by default the log.
    pub fn set_warn(&mut self, warn: WarnFn) {
        self.warn = Some(warn);
    }

    fn warn(&self, text: &str) {
        match &self.warn {
            Some(warn) => warn(text),
            None => tracing::warn!("{text}"),
        }
    }

    /// Re-reads `<agent_dir>/auth.json`, so keys saved while zi runs take effect. Returns the
    /// file's problems.
    pub fn reload_stored(&mut self, agent_dir: &Path) -> Vec<String> {
        let (stored, warnings) = read_auth_file(&auth_path(agent_dir));
        self.stored = stored;
        warnings
    }

    /// Binds a `--api-key` to a provider once the model is known.
    pub fn set_cli_key(&mut self, provider: String, key: String) {
        self.cli_key = Some((provider, key));
    }

    fn stored_key(&self, provider: &str) -> Option<&str> {
        match self.stored.get(provider) {
            Some(StoredCredential::ApiKey(Some(key))) if !key.is_empty() => Some(key),
            _ => None,
        }
    }

    /// A subscription provider's sign-in, unless its refresh failed.
    fn signed_in(&self, provider: &str) -> Option<&OAuthEntry> {
        let Some(StoredCredential::Subscription(entry)) = self.stored.get(provider) else {
            return None;
        };
        let failed = lock(&self.failed);
        (!entry.refresh.is_empty() && failed.get(provider) != Some(&entry.refresh)).then_some(entry)
    }

    /// Whether a request to this model would carry credentials.
    pub fn is_configured(&self, model: &Model) -> bool {
        if self.cli_key_for(&model.provider).is_some() {
            return true;
        }
        if auth::subscription(&model.provider).is_some() {
            return self.signed_in(&model.provider).is_some() || model.api_key.is_some();
        }
        self.stored_key(&model.provider).is_some()
            || self.env.contains_key(&model.provider)
            || model.api_key.is_some()
    }

    fn cli_key_for(&self, provider: &str) -> Option<&str> {
        self.cli_key
            .as_ref()
            .filter(|(p, _)| p == provider)
            .map(|(_, key)| key.as_str())
    }

    /// The key to send for a model. Runs `!command` sources (bounded; cancel by dropping the
    /// future).
    pub async fn api_key(&self, model: &Model) -> Result<String, CredentialError> {
        if let Some(key) = self.cli_key_for(&model.provider) {
            return Ok(key.to_string());
        }
        let failed = |reason| CredentialError::CommandFailed {
            provider: model.provider.clone(),
            reason,
        };
        if let Some(source) = self.stored_key(&model.provider) {
            return resolve_config_value(source).await.map_err(failed);
        }
        if let Some(key) = self.env.get(&model.provider) {
            return Ok(key.clone());
        }
        match &model.api_key {
            Some(source) => resolve_config_value(source).await.map_err(failed),
            None => Err(CredentialError::NotAuthenticated(model.reference())),
        }
    }

    /// What a request to this model carries. A model without credentials (a local server) gets
    /// none, except a subscription's, which cannot work without its sign-in. A sign-in that
    /// expires within 5 minutes is refreshed first; cancel by dropping the future (a refresh
    /// already sent still finishes and is saved).
    pub async fn resolve(&self, model: &Model) -> Result<RequestAuth, CredentialError> {
        if auth::subscription(&model.provider).is_some() {
            return self.resolve_subscription(model).await;
        }
        if !self.is_configured(model) {
            return Ok(RequestAuth::default());
        }
        Ok(RequestAuth {
            key: Some(self.api_key(model).await?),
            ..RequestAuth::default()
        })
    }

    async fn resolve_subscription(&self, model: &Model) -> Result<RequestAuth, CredentialError> {
        let provider = model.provider.as_str();
        let entry = if let Some(key) = self.cli_key_for(provider) {
            token_entry(key.to_string())
        } else if let Some(entry) = self.signed_in(provider) {
            self.fresh(provider, entry).await?
        } else if let Some(source) = &model.api_key {
            let key = resolve_config_value(source).await.map_err(|reason| {
                CredentialError::CommandFailed {
                    provider: provider.to_string(),
                    reason,
                }
            })?;
            token_entry(key)
        } else {
            return Err(CredentialError::NotSignedIn {
                model: model.reference(),
                provider: provider.to_string(),
            });
        };
        Ok(match provider {
            COPILOT => RequestAuth {
                base_url: Some(auth::copilot::api_base(
                    &self.endpoints,
                    &entry.access,
                    entry.enterprise.as_deref(),
                )),
                key: Some(entry.access),
                account_id: None,
            },
            _ => RequestAuth {
                base_url: self.endpoints.codex_base.clone(),
                account_id: entry
                    .account_id
                    .clone()
                    .or_else(|| auth::codex::account_id(&entry.access)),
                key: Some(entry.access),
            },
        })
    }

    /// The sign-in, refreshed when it expires soon. A failure marks the provider not configured
    /// (reported once) until auth.json holds another refresh token.
    async fn fresh(
        &self,
        provider: &str,
        entry: &OAuthEntry,
    ) -> Result<OAuthEntry, CredentialError> {
        let Some(agent_dir) = &self.agent_dir else {
            return Ok(entry.clone());
        };
        match auth::refresh::fresh_entry(agent_dir, provider, entry, &self.endpoints).await {
            Ok(refreshed) => {
                if let Some(warning) = &refreshed.unsaved {
                    self.warn(warning);
                }
                Ok(refreshed.entry)
            }
            Err(error) => {
                let reason = error.to_string();
                let first = lock(&self.failed)
                    .insert(provider.to_string(), entry.refresh.clone())
                    .as_ref()
                    != Some(&entry.refresh);
                if first {
                    self.warn(&format!(
                        "(auth) Could not refresh the {provider} sign-in: {reason}; its models are not configured until you run zi login {provider}"
                    ));
                }
                Err(CredentialError::RefreshFailed {
                    provider: provider.to_string(),
                    reason,
                })
            }
        }
    }
}

/// A token given directly (`--api-key`, models.json) in place of a sign-in.
fn token_entry(access: String) -> OAuthEntry {
    OAuthEntry {
        access,
        ..OAuthEntry::default()
    }
}

/// Reads auth.json. A missing file is empty; an invalid one is a warning and empty; OAuth
/// entries of providers zi cannot refresh are kept (as not configured) with a warning each.
fn read_auth_file(path: &Path) -> (BTreeMap<String, StoredCredential>, Vec<String>) {
    let mut warnings = Vec::new();
    let mut stored = BTreeMap::new();
    let text = match zi_os::config_file::read_bounded_text(path, auth::store::MAX_AUTH_FILE_BYTES) {
        Ok(None) => return (stored, warnings),
        Ok(Some(text)) => text,
        Err(error) => {
            warnings.push(format!("(auth) {error}; ignoring it"));
            return (stored, warnings);
        }
    };
    #[cfg(unix)]
    if let Ok(meta) = std::fs::metadata(path) {
        use std::os::unix::fs::PermissionsExt as _;
        if meta.permissions().mode() & 0o077 != 0 {
            warnings.push(format!(
                "(auth) {} is readable by other users; run chmod 600 on it",
                path.display()
            ));
        }
    }
    let map = match serde_json::from_str::<Value>(&text) {
        Ok(Value::Object(map)) => map,
        // The error text of serde_json never contains the input, so no key can leak here.
        Ok(_) => {
            warnings.push(format!(
                "(auth) {} must contain a JSON object",
                path.display()
            ));
            return (stored, warnings);
        }
        Err(error) => {
            warnings.push(format!(
                "(auth) {} is not valid JSON: {error}",
                path.display()
            ));
            return (stored, warnings);
        }
    };
    for (provider, entry) in map {
        let Value::Object(object) = entry else {
            warnings.push(format!(
                "(auth) entry {provider} in {} is not an object; ignoring it",
                path.display()
            ));
            continue;
        };
        match object.get("type").and_then(Value::as_str) {
            Some("api_key") => {
                let key = match object.get("key") {
                    Some(Value::String(key)) => Some(key.clone()),
                    Some(_) => {
                        warnings.push(format!(
                            "(auth) entry {provider} in {}: \"key\" must be a string; ignoring it",
                            path.display()
                        ));
                        None
                    }
                    None => {
                        warnings.push(format!(
                            "(auth) entry {provider} in {} has no \"key\"; ignoring it",
                            path.display()
                        ));
                        None
                    }
                };
                stored.insert(provider, StoredCredential::ApiKey(key));
            }
            Some("oauth") if auth::subscription(&provider).is_some() => {
                let problems = OAuthEntry::shape_problems(&object);
                if !problems.is_empty() {
                    warnings.push(format!(
                        "(auth) entry {provider} in {}: {}; run zi login {provider}",
                        path.display(),
                        problems.join(", ")
                    ));
                }
                let entry = OAuthEntry::from_json(&object);
                stored.insert(provider, StoredCredential::Subscription(entry));
            }
            Some("oauth") => {
                let hint = crate::builtin::env_var(&provider)
                    .map(|var| format!("set {var} or "))
                    .unwrap_or_default();
                warnings.push(format!(
                    "(auth) {provider} has OAuth credentials in {}, which zi cannot refresh; the provider is not configured ({hint}add an \"api_key\" entry)",
                    path.display()
                ));
                stored.insert(provider, StoredCredential::ForeignOAuth);
            }
            _ => warnings.push(format!(
                "(auth) entry {provider} in {} has no known \"type\"; ignoring it",
                path.display()
            )),
        }
    }
    (stored, warnings)
}

/// Resolves a configured value: `!command` runs through `sh -c` ([`zi_os::command`]) and
/// yields its trimmed stdout; otherwise the value names an environment variable if one is set,
/// else it is a literal. Cancel by dropping the future (the command's process group dies).
pub async fn resolve_config_value(source: &str) -> Result<String, zi_os::command::CommandError> {
    if let Some(command) = source.strip_prefix('!') {
        return zi_os::command::run(command).await;
    }
    match std::env::var(source) {
        Ok(value) if !value.is_empty() => {
            // A variable that holds a key or header value: tools no longer inherit it
            // (docs/providers.md#what-tools-can-read).
            zi_os::process::secrets::withhold([source]);
            Ok(value)
        }
        _ => Ok(source.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::test_model;

    #[tokio::test]
    async fn cli_key_applies_only_to_its_provider() {
        let creds = Credentials::new(Some(("p".into(), "k1".into())));
        let model = test_model();
        assert!(creds.is_configured(&model));
        assert_eq!(creds.api_key(&model).await.ok().as_deref(), Some("k1"));
        let mut other = test_model();
        other.provider = "q".into();
        assert!(!creds.is_configured(&other));
        assert!(matches!(
            creds.api_key(&other).await,
            Err(CredentialError::NotAuthenticated(_))
        ));
    }

    #[tokio::test]
    async fn config_values_resolve_commands_env_and_literals() {
        assert_eq!(
            resolve_config_value("!printf ' abc \\n'")
                .await
                .ok()
                .as_deref(),
            Some("abc")
        );
        assert!(resolve_config_value("!exit 3").await.is_err());
        assert_eq!(
            resolve_config_value("ZI_SURELY_UNSET_VAR")
                .await
                .ok()
                .as_deref(),
            Some("ZI_SURELY_UNSET_VAR")
        );
        assert_eq!(
            resolve_config_value("PATH").await.ok(),
            std::env::var("PATH").ok()
        );
    }

    /// A failed key command's error is the source, its text part of the message (the
    /// message used to carry the text alone).
    #[tokio::test]
    async fn a_failed_key_command_is_the_errors_source() {
        let creds = Credentials::new(None);
        let mut model = test_model();
        model.api_key = Some("!exit 3".into());
        let error = creds.api_key(&model).await.unwrap_err();
        assert_eq!(
            error.to_string(),
            format!(
                "API key command for {} failed: exited with exit status: 3",
                model.provider
            )
        );
        let source = std::error::Error::source(&error)
            .and_then(|source| source.downcast_ref::<zi_os::command::CommandError>());
        assert!(
            matches!(source, Some(zi_os::command::CommandError::Failed(status)) if status.code() == Some(3)),
            "{error:?}"
        );
    }

    fn temp_agent(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("zi-auth-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let _ = std::fs::create_dir_all(&dir);
        dir
    }

    fn builtin(provider: &str) -> Model {
        crate::builtin::models()
            .into_iter()
            .find(|m| m.provider == provider)
            .unwrap_or_else(|| panic!("{provider}"))
    }

    #[tokio::test]
    async fn precedence_is_flag_then_auth_file_then_env_then_models_json() {
        let agent = temp_agent("precedence");
        assert!(crate::auth::store::store_api_key(&agent, "anthropic", "sk-stored").is_ok());
        let env = |name: &str| match name {
            "ANTHROPIC_API_KEY" => Some("sk-env-a".to_string()),
            "OPENAI_API_KEY" => Some("sk-env-o".to_string()),
            _ => None,
        };
        let (creds, warnings) = Credentials::load(&agent, None, env, AuthEndpoints::default());
        assert!(warnings.is_empty(), "{warnings:?}");
        let anthropic = builtin("anthropic");
        let openai = builtin("openai");
        let mut google = builtin("google");
        assert_eq!(
            creds.api_key(&anthropic).await.ok().as_deref(),
            Some("sk-stored")
        );
        assert_eq!(
            creds.api_key(&openai).await.ok().as_deref(),
            Some("sk-env-o")
        );
        assert!(!creds.is_configured(&google));
        google.api_key = Some("literal-from-models-json".into());
        assert!(creds.is_configured(&google));
        assert_eq!(
            creds.api_key(&google).await.ok().as_deref(),
            Some("literal-from-models-json")
        );
        let (creds, _) = Credentials::load(
            &agent,
            Some(("anthropic".into(), "sk-flag".into())),
            env,
            AuthEndpoints::default(),
        );
        assert_eq!(
            creds.api_key(&anthropic).await.ok().as_deref(),
            Some("sk-flag")
        );
        assert_eq!(
            creds.api_key(&openai).await.ok().as_deref(),
            Some("sk-env-o")
        );
        let _ = std::fs::remove_dir_all(&agent);
    }

    #[cfg(unix)]
    #[test]
    fn auth_file_is_private_and_merged() {
        use std::os::unix::fs::PermissionsExt as _;
        let agent = temp_agent("private");
        std::fs::write(
            agent.join("auth.json"),
            r#"{"google":{"type":"oauth","refresh":"r","access":"a","expires":1}}"#,
        )
        .unwrap_or_default();
        assert!(crate::auth::store::store_api_key(&agent, "openai", "sk-1").is_ok());
        let mode = |p: &Path| {
            std::fs::metadata(p)
                .map(|m| m.permissions().mode() & 0o777)
                .unwrap_or(0)
        };
        assert_eq!(mode(&agent.join("auth.json")), 0o600);
        assert_eq!(mode(&agent), 0o700);
        let (creds, warnings) = Credentials::load(&agent, None, |_| None, AuthEndpoints::default());
        assert!(creds.is_configured(&builtin("openai")));
        assert!(
            !creds.is_configured(&builtin("google")),
            "OAuth is not refreshed"
        );
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(warnings[0].contains("OAuth") && warnings[0].contains("GEMINI_API_KEY"));
        assert!(!warnings[0].contains("\"r\"") && !warnings[0].contains("sk-1"));
        let _ = std::fs::remove_dir_all(&agent);
    }

    #[test]
    fn invalid_auth_file_is_a_warning_and_never_overwritten() {
        let agent = temp_agent("invalid");
        std::fs::write(agent.join("auth.json"), "{ sk-secret-in-broken-file").unwrap_or_default();
        let (creds, warnings) = Credentials::load(&agent, None, |_| None, AuthEndpoints::default());
        assert!(!creds.is_configured(&builtin("openai")));
        assert!(
            warnings.iter().any(|w| w.contains("not valid JSON")),
            "{warnings:?}"
        );
        assert!(
            !warnings.iter().any(|w| w.contains("sk-secret")),
            "{warnings:?}"
        );
        assert!(crate::auth::store::store_api_key(&agent, "openai", "k").is_err());
        assert_eq!(
            std::fs::read_to_string(agent.join("auth.json")).unwrap_or_default(),
            "{ sk-secret-in-broken-file"
        );
        let _ = std::fs::remove_dir_all(&agent);
    }

    #[test]
    fn debug_never_prints_the_key() {
        let creds = Credentials::new(Some(("p".into(), "sk-very-secret".into())));
        assert!(!format!("{creds:?}").contains("sk-very-secret"));
    }
}
