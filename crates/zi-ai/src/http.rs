//! The shared HTTP client, built on first use so that start-up never pays for TLS setup.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

static CLIENT: OnceLock<Result<reqwest::Client, ClientError>> = OnceLock::new();

/// The shared client could not be built (the TLS backend failed to start). Shared: the first
/// attempt's result is kept for the whole process.
#[derive(Debug, Clone, thiserror::Error)]
#[error("Could not build HTTP client: {0}")]
pub struct ClientError(Arc<reqwest::Error>);

/// A base URL no request can be sent to. Its text avoids every phrase the retry classifier
/// treats as transient, and never contains the URL (endpoints are configuration, not output).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "Invalid baseUrl for provider {provider}: expected an http:// or https:// URL (check models.json)"
)]
pub struct InvalidBaseUrl {
    /// The provider whose `baseUrl` it is.
    pub provider: String,
}

const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);

/// The process-wide client. Requests are never retried here: retry is session policy.
pub fn client() -> Result<&'static reqwest::Client, ClientError> {
    CLIENT
        .get_or_init(|| {
            // No redirects: a provider answering a POST with a redirect is an error worth
            // seeing, and following it could carry a key header to another origin.
            reqwest::Client::builder()
                .connect_timeout(CONNECT_TIMEOUT)
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .map_err(|error| ClientError(Arc::new(error)))
        })
        .as_ref()
        .map_err(Clone::clone)
}

/// Checks a configured base URL before any request: only `http://` and `https://` URLs with a
/// host can reach a provider. Anything else (`file://`, no scheme) is a configuration error that
/// retrying cannot fix, so its text avoids every phrase the retry classifier treats as transient
/// (and never contains the URL: endpoints are configuration, not output).
pub fn check_base_url(base_url: &str, provider: &str) -> Result<(), InvalidBaseUrl> {
    let valid = reqwest::Url::parse(base_url)
        .is_ok_and(|url| matches!(url.scheme(), "http" | "https") && url.has_host());
    if valid {
        Ok(())
    } else {
        Err(InvalidBaseUrl {
            provider: provider.to_string(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_http_urls_with_a_host_are_endpoints() {
        assert!(check_base_url("https://api.example.com/v1", "p").is_ok());
        assert!(check_base_url("http://127.0.0.1:8080", "p").is_ok());
        for bad in [
            "file:///etc/passwd",
            "api.example.com/v1",
            "",
            "ftp://h/x",
            "http://",
        ] {
            let error = check_base_url(bad, "p")
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default();
            assert!(error.starts_with("Invalid baseUrl for provider p"), "{bad}");
            assert!(!crate::classify::is_retryable(&error), "{bad}");
        }
    }
}
