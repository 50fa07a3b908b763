//! Signing in, for every front end (`zi login`, `/login` in the terminal view, ACP): the flow
//! of one subscription, reported through a [`LoginUi`], ending with the provider's entry written
//! into auth.json under its lock — or with a [`LoginError`] and nothing written. Also the
//! sign-in status and sign-out.
//!
//! Nothing here reads the environment or starts a browser: the front end passes the endpoints
//! and decides how to show an address.

use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::endpoints::AuthEndpoints;
use super::entry::OAuthEntry;
use super::http::TokenError;
use super::store::{self, AuthStoreError};
use super::{CODEX, COPILOT, Subscription, subscription};

mod callback;
mod codex;
mod device;
mod status;

pub use status::{SignInStatus, status};

/// How long a sign-in waits for the person (the browser's redirect, a pasted address, the
/// device code's approval is bounded by the code's own lifetime).
pub(crate) const LOGIN_TIMEOUT: Duration = Duration::from_secs(5 * 60);

/// What a sign-in shows the person while it runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LoginEvent {
    /// Open `url` to sign in. `callback` is the local address the browser returns to (`None`
    /// when zi could not listen: only pasting the final address works then).
    AuthorizeUrl {
        /// The provider's authorization page.
        url: String,
        /// The local callback address.
        callback: Option<String>,
    },
    /// Open `verification_uri` and enter `user_code` within `expires_in` seconds.
    DeviceCode {
        /// The page where the code is entered.
        verification_uri: String,
        /// The code to enter.
        user_code: String,
        /// Seconds until the code expires.
        expires_in: u64,
    },
    /// A step of the flow (`Exchanging the code for tokens…`).
    Progress(String),
    /// Something went wrong that the flow survives (a `Warning:` line).
    Warning(String),
}

/// The front end of a sign-in.
pub trait LoginUi: Send + Sync {
    /// Shows one event.
    fn show(&self, event: LoginEvent);
    /// Opens `url` in a browser when one is available; never fails the sign-in.
    fn open_browser(&self, url: &str);
}

/// What one sign-in needs besides the person.
#[derive(Debug, Clone)]
pub struct LoginOptions {
    /// The agent directory whose auth.json receives the entry.
    pub agent_dir: PathBuf,
    /// Where the flow's requests go (the defaults, or the `ZI_*_URL` overrides tests use).
    pub endpoints: AuthEndpoints,
    /// GitHub Enterprise: the domain (or an address on it); Copilot only.
    pub enterprise: Option<String>,
}

/// A finished sign-in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoginOutcome {
    /// The provider id signed in to.
    pub provider: &'static str,
    /// `provider/id` of the models it configured.
    pub models: Vec<String>,
}

impl LoginOutcome {
    /// `Signed in to GitHub Copilot (github-copilot). Models: github-copilot/…, …`
    pub fn message(&self) -> String {
        let name = subscription(self.provider).map_or(self.provider, |s| s.name);
        format!(
            "Signed in to {name} ({}). Models: {}",
            self.provider,
            self.models.join(", ")
        )
    }
}

/// Why a sign-in ended without signing in. `Display` never carries a code, token or verifier.
#[derive(Debug, thiserror::Error)]
pub enum LoginError {
    /// A Claude plan was asked for: the text says why zi does not offer it.
    #[error("{0}")]
    Anthropic(&'static str),
    /// No subscription has this provider id.
    #[error("Unknown provider {0}: zi signs in to openai-codex (ChatGPT) and github-copilot")]
    UnknownProvider(String),
    /// auth.json could not be read or written.
    #[error("{0}")]
    Store(#[from] AuthStoreError),
    /// The reply's state is not the one this login sent: it may be forged.
    #[error("State mismatch: the sign-in reply did not come from this login")]
    StateMismatch,
    /// The person or the provider refused consent; the provider's error code.
    #[error("Sign-in was denied ({0})")]
    Denied(String),
    /// The reply has neither a code nor an error.
    #[error("The sign-in reply carried no code")]
    NoCode,
    /// No reply came within [`LOGIN_TIMEOUT`].
    #[error("Sign-in timed out after 5 minutes")]
    TimedOut,
    /// The front end cancelled (Esc, Ctrl+C).
    #[error("Sign-in cancelled")]
    Cancelled,
    /// The callback listener could not start and the pasted input ended.
    #[error(
        "No way is left to receive the sign-in reply (no callback listener, and the input ended)"
    )]
    NoReplyPath,
    /// Exchanging the code, or the Copilot token exchange, failed.
    #[error("Could not complete the sign-in: {0}")]
    Token(#[from] TokenError),
    /// The enterprise option is not a domain or an address on one.
    #[error("Invalid GitHub Enterprise URL/domain")]
    InvalidEnterprise,
    /// GitHub says the device code expired before it was approved.
    #[error("The device code expired; run zi login github-copilot again")]
    DeviceExpired,
    /// The code's lifetime passed while zi was still polling.
    #[error("Device flow timed out")]
    DeviceTimedOut,
    /// GitHub answered the poll with an error zi does not wait out.
    #[error("Device flow failed: {0}")]
    DeviceFailed(String),
}

/// The subscription `provider` names, or why zi does not sign in to it.
pub fn login_provider(provider: &str) -> Result<&'static Subscription, LoginError> {
    if provider == "anthropic" || provider.starts_with("claude") {
        return Err(LoginError::Anthropic(super::ANTHROPIC_REFUSAL));
    }
    subscription(provider).ok_or_else(|| LoginError::UnknownProvider(provider.to_string()))
}

/// Signs in to `provider` and stores its entry. `paste` carries lines the person types (the
/// address a browser ended on, or the code, for sessions without a local browser); `cancel`
/// ends the sign-in with [`LoginError::Cancelled`]. Nothing is written unless it succeeds.
pub async fn login(
    provider: &str,
    options: &LoginOptions,
    ui: &dyn LoginUi,
    paste: &mut mpsc::Receiver<String>,
    cancel: &CancellationToken,
) -> Result<LoginOutcome, LoginError> {
    let subscription = login_provider(provider)?;
    // An auth.json zi could not write is refused before the person does anything.
    store::read_auth_map(&options.agent_dir)?;
    let flow = async {
        match subscription.id {
            CODEX => codex::sign_in(options, ui, paste).await,
            COPILOT => device::sign_in(options, ui).await,
            other => Err(LoginError::UnknownProvider(other.to_string())),
        }
    };
    let entry: OAuthEntry = tokio::select! {
        biased;
        () = cancel.cancelled() => return Err(LoginError::Cancelled),
        entry = flow => entry?,
    };
    store::store_oauth(&options.agent_dir, subscription.id, &entry)?;
    if subscription.id == COPILOT {
        ui.show(LoginEvent::Progress("Enabling the plan's models…".into()));
        device::enable_models(&options.endpoints, &entry).await;
    }
    Ok(LoginOutcome {
        provider: subscription.id,
        models: crate::builtin::model_ids(subscription.id)
            .into_iter()
            .map(|id| format!("{}/{id}", subscription.id))
            .collect(),
    })
}

/// Removes a provider's entry (a sign-in, or a stored key); `false` when it had none.
pub fn logout(agent_dir: &Path, provider: &str) -> Result<bool, LoginError> {
    Ok(store::remove_entry(agent_dir, provider)?)
}
