//! Subscription sign-in (docs/providers.md#subscriptions): a ChatGPT plan through OpenAI's
//! authorization-code flow with PKCE (`openai-codex`) and GitHub Copilot through GitHub's device
//! flow and the Copilot token exchange (`github-copilot`); the tokens kept in `auth.json` and
//! refreshed under its lock, shared by every zi process of the agent directory.
//!
//! zi-ai never reads the environment and never opens a browser: the front end (zi-cli, the
//! terminal view) passes [`AuthEndpoints`] and a [`login::LoginUi`].

pub(crate) mod codex;
pub(crate) mod copilot;
mod endpoints;
mod entry;
mod http;
pub mod login;
pub(crate) mod refresh;
pub mod store;

pub use endpoints::{AuthEndpoints, EndpointError};
pub use entry::OAuthEntry;
pub use http::{HttpFailure, TokenError};

/// The provider id of ChatGPT (Codex) sign-in.
pub const CODEX: &str = "openai-codex";
/// The provider id of GitHub Copilot sign-in.
pub const COPILOT: &str = "github-copilot";

/// How a person signs in to a subscription.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoginKind {
    /// A browser opens the provider's page; its redirect (or the pasted address) ends the login.
    Browser,
    /// The person types a short code at the provider's page while zi polls.
    DeviceCode,
}

/// A provider zi signs in to with a subscription instead of an API key.
#[derive(Debug)]
pub struct Subscription {
    /// The provider id (`openai-codex`, `github-copilot`).
    pub id: &'static str,
    /// What the person knows it as.
    pub name: &'static str,
    /// How the sign-in runs.
    pub kind: LoginKind,
}

/// Every subscription zi can sign in to, in the order `zi login` offers them.
pub const SUBSCRIPTIONS: &[Subscription] = &[
    Subscription {
        id: CODEX,
        name: "ChatGPT Plus/Pro (Codex)",
        kind: LoginKind::Browser,
    },
    Subscription {
        id: COPILOT,
        name: "GitHub Copilot",
        kind: LoginKind::DeviceCode,
    },
];

/// The subscription a provider id names, if any.
pub fn subscription(provider: &str) -> Option<&'static Subscription> {
    SUBSCRIPTIONS.iter().find(|s| s.id == provider)
}

/// Why Claude plans are not offered (docs/providers.md#subscriptions).
pub const ANTHROPIC_REFUSAL: &str = "Claude Pro/Max sign-in is not offered: Anthropic's terms forbid third-party tools from using plan credentials. Use ANTHROPIC_API_KEY (or an auth.json api_key entry).";

/// Milliseconds since the Unix epoch.
pub(crate) fn now_millis() -> i64 {
    zi_os::clock::now_millis()
}

/// `2026-05-20 14:03 UTC`.
pub(crate) fn utc_minute(ms: i64) -> String {
    jiff::Timestamp::from_millisecond(ms)
        .map(|t| t.strftime("%Y-%m-%d %H:%M UTC").to_string())
        .unwrap_or_else(|_| "an unknown time".to_string())
}
