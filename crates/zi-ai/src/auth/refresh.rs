//! Refreshing a subscription's access token, safely shared by every zi process of an agent
//! directory (docs/providers.md#subscriptions).
//!
//! A token that expires within [`REFRESH_SKEW_MS`] is refreshed before the request. The refresh
//! takes the auth.json lock and reads the file again *after* taking it: when another process
//! refreshed meanwhile, its token is used and the token endpoint is not called. So two processes
//! started together with an expired token refresh once. The new entry is written into the file
//! as re-read, so other entries and external edits survive, and a file that is not a JSON object
//! is never written over (nor is the token endpoint called for it).
//!
//! The HTTP call and the write run in a spawned task that owns the lock: a caller that gives up
//! (an interrupt) cannot lose a rotated refresh token, which OpenAI invalidates as soon as it
//! answers.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::endpoints::AuthEndpoints;
use super::entry::OAuthEntry;
use super::http::TokenError;
use super::store::{AuthLock, AuthStoreError};
use super::{CODEX, COPILOT};

/// A token expiring within this margin is refreshed before a request.
pub const REFRESH_SKEW_MS: i64 = 5 * 60 * 1000;

/// Why a sign-in could not be refreshed. `Display` carries no token.
#[derive(Debug, thiserror::Error)]
pub enum RefreshError {
    #[error(transparent)]
    Store(#[from] AuthStoreError),
    #[error("the sign-in was removed from auth.json")]
    SignedOut,
    #[error(transparent)]
    Token(#[from] TokenError),
    #[error("{0} has no sign-in zi can refresh")]
    NotSubscription(String),
    #[error("the refresh task ended unexpectedly")]
    Task,
}

/// A token good for the next request.
#[derive(Debug)]
pub struct Refreshed {
    pub entry: OAuthEntry,
    /// The token was refreshed but the new one could not be saved (a `Warning:` line).
    pub unsaved: Option<String>,
}

/// The entry to use for a request: `snapshot` while it is good for more than
/// [`REFRESH_SKEW_MS`], else a refreshed one (see the module docs).
pub async fn fresh_entry(
    agent_dir: &Path,
    provider: &str,
    snapshot: &OAuthEntry,
    endpoints: &AuthEndpoints,
) -> Result<Refreshed, RefreshError> {
    if snapshot.fresh_for(REFRESH_SKEW_MS, super::now_millis()) {
        return Ok(Refreshed {
            entry: snapshot.clone(),
            unsaved: None,
        });
    }
    let task = tokio::spawn(refresh_under_lock(
        agent_dir.to_path_buf(),
        provider.to_string(),
        endpoints.clone(),
    ));
    task.await.map_err(|_| RefreshError::Task)?
}

async fn refresh_under_lock(
    agent_dir: PathBuf,
    provider: String,
    endpoints: AuthEndpoints,
) -> Result<Refreshed, RefreshError> {
    let lock = AuthLock::acquire(&agent_dir).await?;
    let mut map = lock.read()?;
    let current = match map.get(&provider) {
        Some(Value::Object(object))
            if object.get("type").and_then(Value::as_str) == Some("oauth") =>
        {
            OAuthEntry::from_json(object)
        }
        _ => return Err(RefreshError::SignedOut),
    };
    if current.refresh.is_empty() {
        return Err(RefreshError::SignedOut);
    }
    if current.fresh_for(REFRESH_SKEW_MS, super::now_millis()) {
        // Another process (or a login) refreshed while this one waited for the lock.
        return Ok(Refreshed {
            entry: current,
            unsaved: None,
        });
    }
    let new = match provider.as_str() {
        CODEX => super::codex::refresh(&endpoints, &current).await?,
        COPILOT => super::copilot::refresh(&endpoints, &current).await?,
        other => return Err(RefreshError::NotSubscription(other.to_string())),
    };
    map.insert(provider.clone(), new.to_json());
    let unsaved = lock.write(&map).err().map(|error| {
        format!("(auth) the refreshed {provider} sign-in could not be saved: {error}")
    });
    drop(lock);
    Ok(Refreshed {
        entry: new,
        unsaved,
    })
}
