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
