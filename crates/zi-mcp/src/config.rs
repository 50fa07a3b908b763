//! `mcpServers` in settings (docs/mcp.md): the global and the trusted project layer merged by
//! server name (a higher scope replaces the whole definition), then each definition validated.
//! A definition that breaks a rule becomes a `Warning:` line and is ignored; a broken definition
//! that says `"required": true` fails start-up instead.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde_json::{Map, Value};

use crate::bounds::{MAX_SERVERS, MAX_STDIO_SERVERS};

/// Longest server name; with the tool name it must fit a provider's 64-byte tool name.
pub(crate) const MAX_SERVER_NAME_BYTES: usize = 32;
/// How long a server may take to connect and list its tools, unless its definition says.
pub(crate) const DEFAULT_STARTUP_TIMEOUT: Duration = Duration::from_secs(30);
/// How long one tool call may take, unless the definition says.
pub(crate) const DEFAULT_TOOL_TIMEOUT: Duration = Duration::from_secs(60);
const STARTUP_TIMEOUT_MAX_MS: u64 = 2 * 60 * 1000;
const TOOL_TIMEOUT_MAX_MS: u64 = 60 * 60 * 1000;

/// How the model reaches a server's tools.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Exposure {
    /// Through `mcp_search`, `mcp_describe` and `mcp_call` (the default).
    Catalog,
    /// Each tool is a tool of its own, `mcp__<server>__<tool>`.
    Direct,
}

impl Exposure {
    pub fn as_str(self) -> &'static str {
        match self {
            Exposure::Catalog => "catalog",
            Exposure::Direct => "direct",
        }
    }
}

/// How zi reaches a server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Transport {
    Stdio {
        command: Vec<String>,
        cwd: Option<PathBuf>,
        /// Literal values.
        environment: BTreeMap<String, String>,
        /// Names whose values come from zi's own environment (secrets).
        environment_from: Vec<String>,
    },
    StreamableHttp {
        url: String,
        /// Literal header values.
        headers: BTreeMap<String, String>,
        /// Header name → the environment variable holding its value (secrets).
        header_environment: BTreeMap<String, String>,
    },
}

impl Transport {
    pub fn kind(&self) -> &'static str {
        match self {
            Transport::Stdio { .. } => "stdio",
            Transport::StreamableHttp { .. } => "streamable-http",
        }
    }
}

/// One valid, enabled server definition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerConfig {
    pub(crate) name: String,
    pub(crate) transport: Transport,
    /// Start-up waits for the server and fails when it cannot connect.
    pub(crate) required: bool,
    pub(crate) startup_timeout: Duration,
    pub(crate) tool_timeout: Duration,
    pub(crate) exposure: Exposure,
}

/// Why a server definition is invalid; the Display is the reason in its `Warning:` or
/// start-up error line (docs/mcp.md).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DefinitionError {
    /// More servers than [`MAX_SERVERS`] are configured.
    #[error("more than {MAX_SERVERS} servers are configured")]
    TooManyServers,
    /// More stdio servers than [`MAX_STDIO_SERVERS`] are configured.
    #[error("more than {MAX_STDIO_SERVERS} stdio servers are configured")]
    TooManyStdioServers,
    /// The name is not a plain word of at most [`MAX_SERVER_NAME_BYTES`] bytes.
    #[error(
        "server names are 1 to {MAX_SERVER_NAME_BYTES} letters, digits, '_' or '-' (no \"__\")"
    )]
    Name,
    /// The definition is not a JSON object.
    #[error("the definition must be an object")]
    NotAnObject,
    /// A key the definition format does not know.
    #[error("unknown key {0}")]
    UnknownKey(String),
    /// `enabled` is not a boolean; carries the value as JSON.
    #[error("enabled must be true or false, not {0}")]
    Enabled(Value),
    /// `required` is not a boolean.
    #[error("required must be true or false")]
    Required,
    /// `type` is neither transport.
    #[error("type must be \"stdio\" or \"streamable-http\"")]
    Type,
    /// `tools` is neither exposure.
    #[error("tools must be \"catalog\" or \"direct\"")]
    Tools,
    /// A timeout key is not an integer in `1..=max`.
    #[error("{key} must be an integer from 1 to {max}")]
    Millis {
        /// The key.
        key: String,
        /// The largest value allowed.
        max: u64,
    },
    /// A key of the other transport.
    #[error("{key} does not apply to a {transport} server")]
    OtherTransport {
        /// The key.
        key: String,
        /// `stdio` or `streamable-http`.
        transport: &'static str,
    },
    /// `command` is missing, empty, not all strings, or its program is empty.
    #[error("command must be a non-empty array of strings (program first)")]
    Command,
    /// `cwd` is not a non-empty string.
    #[error("cwd must be a non-empty string")]
    Cwd,
    /// `environmentFrom` is not an array of variable names.
    #[error("environmentFrom must be an array of environment variable names")]
    EnvironmentFrom,
    /// A key of `environment` is not a variable name.
    #[error("environment has an invalid variable name {0:?}")]
    EnvironmentName(String),
    /// `url` is not a string.
    #[error("url must be a string")]
    UrlNotString,
    /// `url` is neither `http:` nor `https:`.
    #[error("url must start with http:// or https://")]
    UrlScheme,
    /// `url` has userinfo.
    #[error("url must not contain credentials; use headers or headerEnvironment")]
    UrlCredentials,
    /// `url` does not parse or has no host.
    #[error("url is not a valid URL")]
    UrlInvalid,
    /// A key of `headers` or `headerEnvironment` is not a header name.
    #[error("{0:?} is not a valid HTTP header name")]
    HeaderName(String),
    /// A value of `headers` is not a header value (the value itself stays out: it may be a
    /// secret).
    #[error("the value of header {0} is not a valid header value")]
    HeaderValue(String),
    /// A value of `headerEnvironment` is not a variable name.
    #[error("headerEnvironment has an invalid variable name {0:?}")]
    HeaderEnvironmentName(String),
    /// `environment`, `headers` or `headerEnvironment` is not an object of strings.
    #[error("{0} must map names to strings")]
    StringMap(String),
}

/// The servers of one invocation.
#[derive(Debug, Default)]
pub struct McpConfig {
    /// The valid, enabled definitions, in the order the settings name them.
    pub servers: Vec<ServerConfig>,
    /// One line per ignored definition (printed as `Warning: …`).
    pub warnings: Vec<String>,
    /// Definitions that are required but invalid: start-up fails with these.
    pub errors: Vec<String>,
}

/// Merges the layers' `mcpServers` values and validates each definition.
pub fn load(global: Option<&Value>, project: Option<&Value>) -> McpConfig {
    let mut config = McpConfig::default();
    let mut merged: Vec<(String, Value)> = Vec::new();
    for (scope, layer) in [("global", global), ("project", project)] {
        let Some(layer) = layer else { continue };
        let Some(map) = layer.as_object() else {
            config.warnings.push(format!(
                "({scope} settings) mcpServers must be an object of server definitions"
            ));
            continue;
        };
        for (name, definition) in map {
            match merged.iter_mut().find(|(n, _)| n == name) {
                Some(slot) => slot.1 = definition.clone(),
                None => merged.push((name.clone(), definition.clone())),
            }
        }
    }
    let mut stdio = 0;
    for (name, definition) in merged {
        if definition.get("enabled") == Some(&Value::Bool(false)) {
            continue;
        }
        let required = definition.get("required") == Some(&Value::Bool(true));
        let parsed = parse_server(&name, &definition).and_then(|server| {
            if config.servers.len() >= MAX_SERVERS {
                return Err(DefinitionError::TooManyServers);
            }
            if matches!(server.transport, Transport::Stdio { .. }) {
                if stdio >= MAX_STDIO_SERVERS {
                    return Err(DefinitionError::TooManyStdioServers);
                }
                stdio += 1;
            }
            Ok(server)
        });
        match parsed {
            Ok(server) => config.servers.push(server),
            Err(problem) if required => config.errors.push(format!(
                "MCP server \"{name}\" is required but invalid: {problem}"
            )),
            Err(problem) => config
                .warnings
                .push(format!("(mcp) server \"{name}\" is ignored: {problem}")),
        }
    }
    config
}

const KEYS: &[&str] = &[
    "type",
    "command",
    "cwd",
    "environment",
    "environmentFrom",
    "url",
    "headers",
    "headerEnvironment",
    "enabled",
    "required",
    "startupTimeoutMs",
    "toolTimeoutMs",
    "tools",
];

fn parse_server(name: &str, definition: &Value) -> Result<ServerConfig, DefinitionError> {
    check_name(name)?;
    let Some(map) = definition.as_object() else {
        return Err(DefinitionError::NotAnObject);
    };
    if let Some(key) = map.keys().find(|k| !KEYS.contains(&k.as_str())) {
        return Err(DefinitionError::UnknownKey(key.clone()));
    }
    if let Some(enabled) = map.get("enabled").filter(|v| !v.is_boolean()) {
        return Err(DefinitionError::Enabled(enabled.clone()));
    }
    let required = match map.get("required") {
        None => false,
        Some(Value::Bool(b)) => *b,
        Some(_) => return Err(DefinitionError::Required),
    };
    let transport = match (map.get("type").map(Value::as_str), map.contains_key("url")) {
        (Some(Some("stdio")), _) | (None, false) => parse_stdio(map)?,
        (Some(Some("streamable-http")), _) | (None, true) => parse_http(map)?,
        _ => return Err(DefinitionError::Type),
    };
    let exposure = match map.get("tools") {
        None => Exposure::Catalog,
        Some(Value::String(s)) if s == "catalog" => Exposure::Catalog,
        Some(Value::String(s)) if s == "direct" => Exposure::Direct,
        Some(_) => return Err(DefinitionError::Tools),
    };
    Ok(ServerConfig {
        name: name.to_string(),
        transport,
        required,
        startup_timeout: millis(
            map,
            "startupTimeoutMs",
            DEFAULT_STARTUP_TIMEOUT,
            STARTUP_TIMEOUT_MAX_MS,
        )?,
        tool_timeout: millis(
            map,
            "toolTimeoutMs",
            DEFAULT_TOOL_TIMEOUT,
            TOOL_TIMEOUT_MAX_MS,
        )?,
        exposure,
    })
}

/// Server names become part of tool names (`mcp__<server>__<tool>`), so they are plain words.
fn check_name(name: &str) -> Result<(), DefinitionError> {
    let plain = name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if name.is_empty() || name.len() > MAX_SERVER_NAME_BYTES || !plain || name.contains("__") {
        return Err(DefinitionError::Name);
    }
    Ok(())
}

fn millis(
    map: &Map<String, Value>,
    key: &str,
    default: Duration,
    max: u64,
) -> Result<Duration, DefinitionError> {
    match map.get(key) {
        None => Ok(default),
        Some(value) => match value.as_u64() {
            Some(ms) if (1..=max).contains(&ms) => Ok(Duration::from_millis(ms)),
            _ => Err(DefinitionError::Millis {
                key: key.to_string(),
                max,
            }),
        },
    }
}

fn forbid(
    map: &Map<String, Value>,
    keys: &[&str],
    transport: &'static str,
) -> Result<(), DefinitionError> {
    match keys.iter().find(|k| map.contains_key(**k)) {
        Some(key) => Err(DefinitionError::OtherTransport {
            key: key.to_string(),
            transport,
        }),
        None => Ok(()),
    }
}

fn parse_stdio(map: &Map<String, Value>) -> Result<Transport, DefinitionError> {
    forbid(map, &["url", "headers", "headerEnvironment"], "stdio")?;
    let command = match map.get("command").and_then(Value::as_array) {
        Some(items) if !items.is_empty() => items
            .iter()
            .map(|item| item.as_str().map(str::to_string))
            .collect::<Option<Vec<String>>>()
            .filter(|c| !c[0].is_empty()),
        _ => None,
    }
    .ok_or(DefinitionError::Command)?;
    let cwd = match map.get("cwd") {
        None => None,
        Some(Value::String(dir)) if !dir.is_empty() => Some(PathBuf::from(dir)),
        Some(_) => return Err(DefinitionError::Cwd),
    };
    let environment = string_map(map, "environment")?;
    let environment_from = match map.get("environmentFrom") {
        None => Vec::new(),
        Some(Value::Array(items)) => items
            .iter()
            .map(|item| item.as_str().filter(|s| env_name(s)).map(str::to_string))
            .collect::<Option<Vec<String>>>()
            .ok_or(DefinitionError::EnvironmentFrom)?,
        Some(_) => return Err(DefinitionError::EnvironmentFrom),
    };
    if let Some(name) = environment.keys().find(|k| !env_name(k)) {
        return Err(DefinitionError::EnvironmentName(name.clone()));
    }
    Ok(Transport::Stdio {
        command,
        cwd,
        environment,
        environment_from,
    })
}

fn parse_http(map: &Map<String, Value>) -> Result<Transport, DefinitionError> {
    forbid(
        map,
        &["command", "cwd", "environment", "environmentFrom"],
        "streamable-http",
    )?;
    let url = map
        .get("url")
        .and_then(Value::as_str)
        .ok_or(DefinitionError::UrlNotString)?;
    check_url(url)?;
    let headers = string_map(map, "headers")?;
    let header_environment = string_map(map, "headerEnvironment")?;
    for name in headers.keys().chain(header_environment.keys()) {
        if reqwest::header::HeaderName::from_bytes(name.as_bytes()).is_err() {
            return Err(DefinitionError::HeaderName(name.clone()));
        }
    }
    for (header, value) in &headers {
        if reqwest::header::HeaderValue::from_str(value).is_err() {
            return Err(DefinitionError::HeaderValue(header.clone()));
        }
    }
    if let Some(var) = header_environment.values().find(|v| !env_name(v)) {
        return Err(DefinitionError::HeaderEnvironmentName(var.clone()));
    }
    Ok(Transport::StreamableHttp {
        url: url.to_string(),
        headers,
        header_environment,
    })
}

/// `http:` or `https:` with a host and no userinfo (credentials belong in headers, where they
/// are kept out of logs).
fn check_url(url: &str) -> Result<(), DefinitionError> {
    let rest = url
        .strip_prefix("http://")
        .or_else(|| url.strip_prefix("https://"))
        .ok_or(DefinitionError::UrlScheme)?;
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    if authority.contains('@') {
        return Err(DefinitionError::UrlCredentials);
    }
    if authority.is_empty() || reqwest::Url::parse(url).is_err() {
        return Err(DefinitionError::UrlInvalid);
    }
    Ok(())
}

fn env_name(name: &str) -> bool {
    !name.is_empty()
        && !name.contains(['=', '\0'])
        && !name.starts_with(|c: char| c.is_ascii_digit())
}

/// Names to values (`environment`, `headers`, `headerEnvironment`).
type StringMap = BTreeMap<String, String>;

fn string_map(map: &Map<String, Value>, key: &str) -> Result<StringMap, DefinitionError> {
    match map.get(key) {
        None => Ok(BTreeMap::new()),
        Some(Value::Object(entries)) => entries
            .iter()
            .map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_string())))
            .collect::<Option<StringMap>>()
            .ok_or_else(|| DefinitionError::StringMap(key.to_string())),
        Some(_) => Err(DefinitionError::StringMap(key.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn project_replaces_the_whole_global_definition_and_enabled_false_disables() {
        let global = json!({
            "a": {"command": ["a"], "toolTimeoutMs": 5},
            "b": {"url": "https://b.example/mcp"},
        });
        let project = json!({"a": {"command": ["other"]}, "b": {"enabled": false}});
        let config = load(Some(&global), Some(&project));
        assert!(config.warnings.is_empty(), "{:?}", config.warnings);
        assert_eq!(config.servers.len(), 1);
        assert_eq!(config.servers[0].tool_timeout, DEFAULT_TOOL_TIMEOUT);
        assert!(matches!(&config.servers[0].transport,
            Transport::Stdio { command, .. } if command == &["other".to_string()]));
    }

    #[test]
    fn invalid_definitions_are_named_in_warnings_or_errors() {
        let global = json!({
            "creds": {"url": "https://user:pw@h.example/"},
            "ftp": {"url": "ftp://h.example/"},
            "slow": {"command": ["x"], "startupTimeoutMs": 0},
            "must": {"command": [], "required": true},
            "bad name": {"command": ["x"]},
        });
        let config = load(Some(&global), None);
        assert!(config.servers.is_empty());
        assert_eq!(config.warnings.len(), 4, "{:?}", config.warnings);
        assert!(config.warnings[0].contains("must not contain credentials"));
        assert!(config.warnings[1].contains("http:// or https://"));
        assert!(
            config.warnings[2].contains("startupTimeoutMs must be an integer from 1 to 120000")
        );
        assert_eq!(
            config.errors,
            [
                "MCP server \"must\" is required but invalid: command must be a non-empty array of strings (program first)"
            ]
        );
    }

    #[test]
    fn at_most_four_stdio_servers() {
        let servers: Map<String, Value> = (0..5)
            .map(|i| (format!("s{i}"), json!({"command": ["x"]})))
            .collect();
        let config = load(Some(&Value::Object(servers)), None);
        assert_eq!(config.servers.len(), 4);
        assert!(config.warnings[0].contains("more than 4 stdio servers"));
    }
}
