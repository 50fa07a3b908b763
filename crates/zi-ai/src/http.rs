//! The shared HTTP client, built on first use so that start-up never pays for TLS setup.

use std::sync::OnceLock;
use std::time::Duration;

static CLIENT: OnceLock<Result<reqwest::Client, String>> = OnceLock::new();

const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);

/// The process-wide client. Requests are never retried here: retry is session policy.
pub fn client() -> Result<&'static reqwest::Client, String> {
    CLIENT
        .get_or_init(|| {
            // No redirects: a provider answering a POST with a redirect is an error worth
            // seeing, and following it could carry a key header to another origin.
            reqwest::Client::builder()
                .connect_timeout(CONNECT_TIMEOUT)
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .map_err(|error| format!("Could not build HTTP client: {error}"))
        })
        .as_ref()
        .map_err(Clone::clone)
}

/// Checks a configured base URL before any request: only `http://` and `https://` URLs with a
/// host can reach a provider. Anything else (`file://`, no scheme) is a configuration error that
/// retrying cannot fix, so its text avoids every phrase the retry classifier treats as transient
/// (and never contains the URL: endpoints are configuration, not output).
pub fn check_base_url(base_url: &str, provider: &str) -> Result<(), String> {
    let valid = reqwest::Url::parse(base_url)
        .is_ok_and(|url| matches!(url.scheme(), "http" | "https") && url.has_host());
    if valid {
        Ok(())
    } else {
        Err(format!(
            "Invalid baseUrl for provider {provider}: expected an http:// or https:// URL (check models.json)"
        ))
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
            let error = check_base_url(bad, "p").err().unwrap_or_default();
            assert!(error.starts_with("Invalid baseUrl for provider p"), "{bad}");
            assert!(!crate::classify::is_retryable(&error), "{bad}");
        }
    }
}
