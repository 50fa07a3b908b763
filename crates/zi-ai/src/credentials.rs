//! Credential resolution (runtime-reference §11.3). Keys live only in memory and in the request
//! headers zi sends; they are never logged, journaled or sent over RPC.
//!
//! Order for a model: `--api-key` (for the selected model's provider only), then
//! `<agent-dir>/auth.json` `api_key` entries, then the provider's environment variable
//! (`ANTHROPIC_API_KEY`, …), then the models.json `apiKey` of the provider.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use crate::model::Model;

/// Largest auth.json zi reads.
const MAX_AUTH_FILE_BYTES: u64 = 1024 * 1024;

/// One stored credential of auth.json.
#[derive(Clone, PartialEq)]
pub enum StoredCredential {
    /// `{"type":"api_key","key":"…"}`; the key may be a literal, an env var name or `!command`.
    ApiKey(Option<String>),
    /// `{"type":"oauth",…}`: read, but zi does not refresh OAuth tokens.
    OAuth,
}

/// Where keys come from.
#[derive(Clone, Default)]
pub struct Credentials {
    cli_key: Option<(String, String)>,
    stored: BTreeMap<String, StoredCredential>,
    /// Provider id → key from its environment variable, captured once at start-up.
    env: BTreeMap<String, String>,
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

#[derive(Debug, thiserror::Error)]
pub enum CredentialError {
    #[error("Model {0} is not authenticated")]
    NotAuthenticated(String),
    #[error("API key command for {provider} failed: {reason}")]
    CommandFailed { provider: String, reason: String },
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
    /// `env`. Returns the credentials and diagnostics meant for `Warning: …` lines.
    pub fn load(
        agent_dir: &Path,
        cli_key: Option<(String, String)>,
        env: impl Fn(&str) -> Option<String>,
    ) -> (Credentials, Vec<String>) {
        let (stored, warnings) = read_auth_file(&auth_path(agent_dir));
        let env = crate::builtin::PROVIDERS
            .iter()
            .filter_map(|p| {
                env(p.env_var)
                    .filter(|value| !value.is_empty())
                    .map(|value| (p.id.to_string(), value))
            })
            .collect();
        (
            Credentials {
                cli_key,
                stored,
                env,
            },
            warnings,
        )
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

    /// Whether a request to this model would carry credentials.
    pub fn is_configured(&self, model: &Model) -> bool {
        self.cli_key_for(&model.provider).is_some()
            || self.stored_key(&model.provider).is_some()
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
}

pub fn auth_path(agent_dir: &Path) -> PathBuf {
    agent_dir.join("auth.json")
}

/// Reads auth.json. A missing file is empty; an invalid one is a warning and empty; OAuth
/// entries are kept (as not configured) with a warning each.
fn read_auth_file(path: &Path) -> (BTreeMap<String, StoredCredential>, Vec<String>) {
    let mut warnings = Vec::new();
    let mut stored = BTreeMap::new();
    let text = match crate::config_file::read_bounded_text(path, MAX_AUTH_FILE_BYTES) {
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
        if !entry.is_object() {
            warnings.push(format!(
                "(auth) entry {provider} in {} is not an object; ignoring it",
                path.display()
            ));
            continue;
        }
        match entry.get("type").and_then(Value::as_str) {
            Some("api_key") => {
                let key = entry.get("key").and_then(Value::as_str).map(str::to_string);
                stored.insert(provider, StoredCredential::ApiKey(key));
            }
            Some("oauth") => {
                let hint = crate::builtin::env_var(&provider)
                    .map(|var| format!("set {var} or "))
                    .unwrap_or_default();
                warnings.push(format!(
                    "(auth) {provider} has OAuth credentials in {}, which zi cannot refresh; the provider is not configured ({hint}add an \"api_key\" entry)",
                    path.display()
                ));
                stored.insert(provider, StoredCredential::OAuth);
            }
            _ => warnings.push(format!(
                "(auth) entry {provider} in {} has no known \"type\"; ignoring it",
                path.display()
            )),
        }
    }
    (stored, warnings)
}

/// Stores an `api_key` credential in auth.json: the directory is made 0700, the file is written
/// 0600 through a temporary file and a rename, under a lock, keeping every other entry.
pub fn store_api_key(agent_dir: &Path, provider: &str, key: &str) -> Result<(), String> {
    std::fs::create_dir_all(agent_dir)
        .map_err(|error| format!("Could not create {}: {error}", agent_dir.display()))?;
    set_mode(agent_dir, 0o700)?;
    let path = auth_path(agent_dir);
    let lock_path = agent_dir.join(".auth.json.lock");
    let lock = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(|error| format!("Could not open {}: {error}", lock_path.display()))?;
    lock.lock()
        .map_err(|error| format!("Could not lock {}: {error}", lock_path.display()))?;
    let result = (|| {
        let mut current = match crate::config_file::read_bounded_text(&path, MAX_AUTH_FILE_BYTES) {
            Ok(Some(text)) => match serde_json::from_str::<Value>(&text) {
                Ok(Value::Object(map)) => map,
                _ => return Err(format!("Cannot update invalid {}", path.display())),
            },
            Ok(None) => Map::new(),
            Err(error) => return Err(format!("Could not update auth.json: {error}")),
        };
        current.insert(
            provider.to_string(),
            serde_json::json!({"type": "api_key", "key": key}),
        );
        let mut text = serde_json::to_string_pretty(&Value::Object(current))
            .map_err(|error| format!("Could not encode auth.json: {error}"))?;
        text.push('\n');
        let temp = agent_dir.join(format!(".auth.json.{}.tmp", std::process::id()));
        let mut file = create_private(&temp)
            .map_err(|error| format!("Could not write {}: {error}", temp.display()))?;
        file.write_all(text.as_bytes())
            .and_then(|()| file.sync_all())
            .map_err(|error| format!("Could not write {}: {error}", temp.display()))?;
        std::fs::rename(&temp, &path).map_err(|error| {
            let _ = std::fs::remove_file(&temp);
            format!("Could not replace {}: {error}", path.display())
        })
    })();
    let _ = lock.unlock();
    result
}

#[cfg(unix)]
fn create_private(path: &Path) -> std::io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt as _;
    OpenOptions::new()
        .create(true)
        .truncate(true)
        .write(true)
        .mode(0o600)
        .open(path)
}

#[cfg(not(unix))]
fn create_private(path: &Path) -> std::io::Result<File> {
    File::create(path)
}

#[cfg(unix)]
fn set_mode(path: &Path, mode: u32) -> Result<(), String> {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .map_err(|error| format!("Could not set permissions of {}: {error}", path.display()))
}

#[cfg(not(unix))]
fn set_mode(_: &Path, _: u32) -> Result<(), String> {
    Ok(())
}

/// Resolves a configured value: `!command` runs through `sh -c` ([`crate::config_command`]) and
/// yields its trimmed stdout; otherwise the value names an environment variable if one is set,
/// else it is a literal. Cancel by dropping the future (the command's process group dies).
pub async fn resolve_config_value(source: &str) -> Result<String, String> {
    if let Some(command) = source.strip_prefix('!') {
        return crate::config_command::run(command)
            .await
            .map_err(|error| error.to_string());
    }
    match std::env::var(source) {
        Ok(value) if !value.is_empty() => Ok(value),
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
        assert_eq!(store_api_key(&agent, "anthropic", "sk-stored"), Ok(()));
        let env = |name: &str| match name {
            "ANTHROPIC_API_KEY" => Some("sk-env-a".to_string()),
            "OPENAI_API_KEY" => Some("sk-env-o".to_string()),
            _ => None,
        };
        let (creds, warnings) = Credentials::load(&agent, None, env);
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
        let (creds, _) =
            Credentials::load(&agent, Some(("anthropic".into(), "sk-flag".into())), env);
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
        assert_eq!(store_api_key(&agent, "openai", "sk-1"), Ok(()));
        let mode = |p: &Path| {
            std::fs::metadata(p)
                .map(|m| m.permissions().mode() & 0o777)
                .unwrap_or(0)
        };
        assert_eq!(mode(&agent.join("auth.json")), 0o600);
        assert_eq!(mode(&agent), 0o700);
        let (creds, warnings) = Credentials::load(&agent, None, |_| None);
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
        let (creds, warnings) = Credentials::load(&agent, None, |_| None);
        assert!(!creds.is_configured(&builtin("openai")));
        assert!(
            warnings.iter().any(|w| w.contains("not valid JSON")),
            "{warnings:?}"
        );
        assert!(
            !warnings.iter().any(|w| w.contains("sk-secret")),
            "{warnings:?}"
        );
        assert!(store_api_key(&agent, "openai", "k").is_err());
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
