//! Credential resolution. Keys live only in memory and in the request headers zi sends; they are
//! never logged, journaled or sent over RPC.

use std::process::Command;

use crate::model::Model;

/// A key given with `--api-key`, bound to the provider of the selected model.
#[derive(Clone, Default)]
pub struct Credentials {
    cli_key: Option<(String, String)>,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials")
            .field("cli_key_provider", &self.cli_key.as_ref().map(|(p, _)| p))
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
    pub fn new(cli_key: Option<(String, String)>) -> Self {
        Credentials { cli_key }
    }

    /// Whether a request to this model would carry credentials.
    pub fn is_configured(&self, model: &Model) -> bool {
        self.cli_key_for(&model.provider).is_some() || model.api_key.is_some()
    }

    fn cli_key_for(&self, provider: &str) -> Option<&str> {
        self.cli_key
            .as_ref()
            .filter(|(p, _)| p == provider)
            .map(|(_, key)| key.as_str())
    }

    /// The key to send for a model. Runs `!command` sources, so call it off the async threads.
    pub fn api_key(&self, model: &Model) -> Result<String, CredentialError> {
        if let Some(key) = self.cli_key_for(&model.provider) {
            return Ok(key.to_string());
        }
        match &model.api_key {
            Some(source) => {
                resolve_config_value(source).map_err(|reason| CredentialError::CommandFailed {
                    provider: model.provider.clone(),
                    reason,
                })
            }
            None => Err(CredentialError::NotAuthenticated(model.reference())),
        }
    }
}

/// Resolves a models.json value: `!command` runs through `sh -c` and yields its trimmed stdout;
/// otherwise the value names an environment variable if one is set, else it is a literal.
pub fn resolve_config_value(source: &str) -> Result<String, String> {
    if let Some(command) = source.strip_prefix('!') {
        let output = Command::new("sh")
            .arg("-c")
            .arg(command)
            .stdin(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .output()
            .map_err(|error| error.to_string())?;
        if !output.status.success() {
            return Err(format!("exited with {}", output.status));
        }
        let text =
            String::from_utf8(output.stdout).map_err(|_| "printed invalid UTF-8".to_string())?;
        return Ok(text.trim().to_string());
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

    #[test]
    fn cli_key_applies_only_to_its_provider() {
        let creds = Credentials::new(Some(("p".into(), "k1".into())));
        let model = test_model();
        assert!(creds.is_configured(&model));
        assert_eq!(creds.api_key(&model).ok().as_deref(), Some("k1"));
        let mut other = test_model();
        other.provider = "q".into();
        assert!(!creds.is_configured(&other));
        assert!(matches!(
            creds.api_key(&other),
            Err(CredentialError::NotAuthenticated(_))
        ));
    }

    #[test]
    fn config_values_resolve_commands_env_and_literals() {
        assert_eq!(
            resolve_config_value("!printf ' abc \\n'").ok().as_deref(),
            Some("abc")
        );
        assert!(resolve_config_value("!exit 3").is_err());
        assert_eq!(
            resolve_config_value("ZI_SURELY_UNSET_VAR").ok().as_deref(),
            Some("ZI_SURELY_UNSET_VAR")
        );
        assert_eq!(
            resolve_config_value("PATH").ok(),
            std::env::var("PATH").ok()
        );
    }

    #[test]
    fn debug_never_prints_the_key() {
        let creds = Credentials::new(Some(("p".into(), "sk-very-secret".into())));
        assert!(!format!("{creds:?}").contains("sk-very-secret"));
    }
}
