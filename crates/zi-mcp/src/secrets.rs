//! Values resolved from zi's environment (`environmentFrom`, `headerEnvironment`) and literal
//! header values: they reach the server and nothing else. Every text zi derives from a server
//! (errors, results, status, logs) passes the server's [`Redactor`].

use std::collections::BTreeMap;

use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use zi_os::redact::Redactor;

use crate::config::{DefinitionError, ServerConfig, Transport};

/// What a connection needs, resolved once per connection attempt.
pub(crate) struct Resolved {
    /// The stdio server's configured environment (literal and from zi's environment).
    pub(crate) environment: BTreeMap<String, String>,
    /// The HTTP headers, secret ones marked sensitive (reqwest keeps them out of `Debug`).
    pub(crate) headers: HeaderMap,
}

/// The redactor of one server: every value it is given from the environment, and its literal
/// header values (credentials usually live there).
pub(crate) fn redactor(config: &ServerConfig, env: &dyn Fn(&str) -> Option<String>) -> Redactor {
    let mut redactor = Redactor::default();
    // The URL holds no credentials (config rejects userinfo), so it stays readable in errors.
    match &config.transport {
        Transport::Stdio {
            environment_from, ..
        } => {
            for name in environment_from {
                if let Some(value) = env(name) {
                    redactor.hide(value);
                }
            }
        }
        Transport::StreamableHttp {
            headers,
            header_environment,
            ..
        } => {
            for value in headers.values() {
                redactor.hide(value.clone());
            }
            for var in header_environment.values() {
                if let Some(value) = env(var) {
                    redactor.hide(value);
                }
            }
        }
    }
    redactor
}

/// A secret that could not be resolved: the texts name only the variable, never a value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum SecretError {
    #[error("environment variable {0} (environmentFrom) is not set")]
    EnvironmentFromUnset(String),
    #[error("environment variable {variable} (headerEnvironment {header}) is not set")]
    HeaderEnvironmentUnset { variable: String, header: String },
    /// A header (checked when the settings were read) that still does not fit HTTP.
    #[error(transparent)]
    Header(#[from] DefinitionError),
}

/// Resolves the environment and headers; a missing variable is an error naming only the
/// variable.
pub(crate) fn resolve(
    config: &ServerConfig,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Resolved, SecretError> {
    let mut resolved = Resolved {
        environment: BTreeMap::new(),
        headers: HeaderMap::new(),
    };
    match &config.transport {
        Transport::Stdio {
            environment,
            environment_from,
            ..
        } => {
            for name in environment_from {
                let value =
                    env(name).ok_or_else(|| SecretError::EnvironmentFromUnset(name.clone()))?;
                resolved.environment.insert(name.clone(), value);
            }
            resolved.environment.extend(environment.clone());
        }
        Transport::StreamableHttp {
            headers,
            header_environment,
            ..
        } => {
            for (name, value) in headers {
                insert_header(&mut resolved.headers, name, value)?;
            }
            for (name, var) in header_environment {
                let value = env(var).ok_or_else(|| SecretError::HeaderEnvironmentUnset {
                    variable: var.clone(),
                    header: name.clone(),
                })?;
                insert_header(&mut resolved.headers, name, &value)?;
            }
        }
    }
    Ok(resolved)
}

fn insert_header(headers: &mut HeaderMap, name: &str, value: &str) -> Result<(), SecretError> {
    let header = HeaderName::from_bytes(name.as_bytes())
        .map_err(|_| DefinitionError::HeaderName(name.to_string()))?;
    let mut value =
        HeaderValue::from_str(value).map_err(|_| DefinitionError::HeaderValue(name.to_string()))?;
    value.set_sensitive(true);
    headers.insert(header, value);
    Ok(())
}
