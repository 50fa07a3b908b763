//! Where the sign-in flows and the subscription providers send their requests. Each endpoint can
//! be pointed elsewhere by an environment variable (docs/providers.md#subscriptions), so GitHub
//! Enterprise, proxies and zi's own tests (local mock servers) work; zi-cli reads the variables
//! once and passes the result down.

/// Default of `ZI_OPENAI_AUTH_URL`.
pub const OPENAI_AUTH_URL: &str = "https://auth.openai.com";
/// Default of `ZI_LOGIN_CALLBACK_PORT` (the port OpenAI's registered redirect names).
pub const CALLBACK_PORT: u16 = 1455;
/// Default GitHub (device flow) and GitHub API (Copilot token exchange) origins.
pub const GITHUB_URL: &str = "https://github.com";
pub const GITHUB_API_URL: &str = "https://api.github.com";

/// Why a variable was refused. The text names the variable, never its value (it may hold a
/// proxy's credentials).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EndpointError {
    /// The variable is set but empty.
    #[error("{0} must not be empty")]
    Empty(&'static str),
    /// A URL that could send tokens in the clear.
    #[error("{0} must be an https:// URL (http:// only for 127.0.0.1)")]
    NotHttps(&'static str),
    /// A URL with parts an origin must not have.
    #[error("{0} must be a URL without user name, password, query or fragment")]
    Extra(&'static str),
    /// The callback port is not a port number.
    #[error("{0} must be a port number (0 picks a free port)")]
    Port(&'static str),
}

/// The endpoints of one zi process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthEndpoints {
    /// OpenAI's sign-in origin: `<it>/oauth/authorize`, `<it>/oauth/token`.
    pub openai_auth: String,
    /// Replaces the base URL of `openai-codex` models (`<it>/codex/responses`).
    pub codex_base: Option<String>,
    /// The local port of the sign-in callback (0: any free port).
    pub callback_port: u16,
    /// GitHub's origin for the device flow; else `https://<enterprise domain>` or github.com.
    pub github: Option<String>,
    /// GitHub's API origin for the Copilot token exchange; else `https://api.<domain>`.
    pub github_api: Option<String>,
    /// Replaces the API base the Copilot token names.
    pub copilot_base: Option<String>,
}

impl Default for AuthEndpoints {
    fn default() -> Self {
        AuthEndpoints {
            openai_auth: OPENAI_AUTH_URL.to_string(),
            codex_base: None,
            callback_port: CALLBACK_PORT,
            github: None,
            github_api: None,
            copilot_base: None,
        }
    }
}

impl AuthEndpoints {
    /// The endpoints from the variables `env` yields (unset: the defaults).
    pub fn from_env(env: impl Fn(&str) -> Option<String>) -> Result<AuthEndpoints, EndpointError> {
        let url = |name: &'static str| env(name).map(|value| endpoint(name, &value)).transpose();
        let callback_port = match env("ZI_LOGIN_CALLBACK_PORT") {
            None => CALLBACK_PORT,
            Some(text) if text.is_empty() => {
                return Err(EndpointError::Empty("ZI_LOGIN_CALLBACK_PORT"));
            }
            Some(text) => text
                .parse()
                .map_err(|_| EndpointError::Port("ZI_LOGIN_CALLBACK_PORT"))?,
        };
        Ok(AuthEndpoints {
            openai_auth: url("ZI_OPENAI_AUTH_URL")?.unwrap_or_else(|| OPENAI_AUTH_URL.to_string()),
            codex_base: url("ZI_CODEX_BASE_URL")?,
            callback_port,
            github: url("ZI_GITHUB_URL")?,
            github_api: url("ZI_GITHUB_API_URL")?,
            copilot_base: url("ZI_COPILOT_BASE_URL")?,
        })
    }

    /// GitHub's origin for a sign-in to github.com or to an enterprise domain.
    pub fn github_url(&self, enterprise: Option<&str>) -> String {
        match (&self.github, enterprise) {
            (Some(url), _) => url.clone(),
            (None, Some(domain)) => format!("https://{domain}"),
            (None, None) => GITHUB_URL.to_string(),
        }
    }

    /// GitHub's API origin for github.com or an enterprise domain.
    pub fn github_api_url(&self, enterprise: Option<&str>) -> String {
        match (&self.github_api, enterprise) {
            (Some(url), _) => url.clone(),
            (None, Some(domain)) => format!("https://api.{domain}"),
            (None, None) => GITHUB_API_URL.to_string(),
        }
    }
}

/// Checks one endpoint variable: an `https` URL with a host, or `http` to exactly `127.0.0.1`
/// (a local proxy or mock server); no user name, password, query or fragment. Returns it
/// without a trailing `/`.
pub fn endpoint(name: &'static str, value: &str) -> Result<String, EndpointError> {
    if value.is_empty() {
        return Err(EndpointError::Empty(name));
    }
    let url = reqwest::Url::parse(value).map_err(|_| EndpointError::NotHttps(name))?;
    let secure = match url.scheme() {
        "https" => url.host_str().is_some_and(|host| !host.is_empty()),
        "http" => url.host_str() == Some("127.0.0.1"),
        _ => false,
    };
    if !secure {
        return Err(EndpointError::NotHttps(name));
    }
    if !url.username().is_empty()
        || url.password().is_some()
        || url.query().is_some()
        || url.fragment().is_some()
    {
        return Err(EndpointError::Extra(name));
    }
    Ok(value.trim_end_matches('/').to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_must_be_https_or_local_http() {
        let ok = |v: &str| endpoint("ZI_GITHUB_URL", v);
        assert_eq!(
            ok("https://ghe.example.com/"),
            Ok("https://ghe.example.com".into())
        );
        assert_eq!(
            ok("http://127.0.0.1:8080/x/"),
            Ok("http://127.0.0.1:8080/x".into())
        );
        for bad in [
            "http://example.com",
            "http://localhost:1",
            "ftp://127.0.0.1",
            "file:///etc",
            "github.com",
        ] {
            let error = ok(bad).err().map(|e| e.to_string()).unwrap_or_default();
            assert_eq!(
                error, "ZI_GITHUB_URL must be an https:// URL (http:// only for 127.0.0.1)",
                "{bad}"
            );
        }
        for bad in [
            "https://u:secret-pass@h.example",
            "https://h.example/?q=1",
            "https://h.example/#f",
        ] {
            let error = ok(bad).err().map(|e| e.to_string()).unwrap_or_default();
            assert!(
                error.starts_with("ZI_GITHUB_URL must be a URL without"),
                "{bad}"
            );
            assert!(!error.contains("secret"));
        }
        assert_eq!(ok(""), Err(EndpointError::Empty("ZI_GITHUB_URL")));
    }

    #[test]
    fn variables_override_the_defaults() {
        let env = |name: &str| match name {
            "ZI_OPENAI_AUTH_URL" => Some("http://127.0.0.1:9/".to_string()),
            "ZI_LOGIN_CALLBACK_PORT" => Some("0".to_string()),
            "ZI_GITHUB_API_URL" => Some("https://api.ghe.example".to_string()),
            _ => None,
        };
        let endpoints = AuthEndpoints::from_env(env).unwrap_or_default();
        assert_eq!(endpoints.openai_auth, "http://127.0.0.1:9");
        assert_eq!(endpoints.callback_port, 0);
        assert_eq!(
            endpoints.github_url(Some("ghe.example")),
            "https://ghe.example"
        );
        assert_eq!(endpoints.github_api_url(None), "https://api.ghe.example");
        let defaults = AuthEndpoints::default();
        assert_eq!(defaults.github_url(None), "https://github.com");
        assert_eq!(
            defaults.github_api_url(Some("co.ghe.com")),
            "https://api.co.ghe.com"
        );
        assert_eq!(
            AuthEndpoints::from_env(|n| (n == "ZI_LOGIN_CALLBACK_PORT").then(|| "x".into())),
            Err(EndpointError::Port("ZI_LOGIN_CALLBACK_PORT"))
        );
    }
}
