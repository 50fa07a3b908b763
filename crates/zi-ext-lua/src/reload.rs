//! The built-in extension command `reload` (docs/extensions.md#reload): loads every
//! extension source again and swaps the new generation in whole, without restarting the session.
//!
//! All or nothing: when any extension of the new generation fails to load, the new generation is
//! discarded, the failures are reported, and the previous generation keeps serving with all its
//! commands and tools. On success the previous generation gets `session_shutdown{reason =
//! "reload"}` and stops, its tools leave the session's tool set and the new ones join it (every
//! tool's activity back to its default), and the new generation gets `session_start{reason =
//! "reload"}`. Custom entries live in the journal, so the new generation finds them.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;
use zi_agent::extension::{CommandOutcome, LifecycleEvent};
use zi_protocol::results::CommandDescriptor;

use crate::worker::CANCELLED;
use crate::{HostInner, LoadOptions, load_generation};

/// The command's name (reserved: no extension can register it).
pub const COMMAND: &str = "reload";
/// The `extensionId` `command.list` gives the built-in command.
pub const BUILT_IN_ID: &str = "zi";

pub fn descriptor() -> CommandDescriptor {
    CommandDescriptor {
        name: COMMAND.to_string(),
        description: "Reload every extension without restarting the session".to_string(),
        argument_hint: None,
        extension_id: BUILT_IN_ID.to_string(),
    }
}

pub async fn reload(host: Arc<HostInner>, cancel: CancellationToken) -> CommandOutcome {
    let session = host
        .session
        .get()
        .and_then(|h| h.session())
        .ok_or_else(|| "The session is gone".to_string())?;
    let previous_tools = host.generation().tool_names();
    // Names the new generation may not take: every tool that is not this host's.
    let reserved_tools = session
        .tools()
        .names()
        .into_iter()
        .filter(|name| !previous_tools.contains(name))
        .collect();
    let options = LoadOptions {
        reserved_tools,
        ..host.options.clone()
    };
    let sources = host.sources.clone();
    let (next, warnings) = tokio::task::spawn_blocking(move || load_generation(&sources, &options))
        .await
        .map_err(|e| format!("Reload failed: {e}"))?;
    if !warnings.is_empty() {
        next.discard();
        return Err(format!(
            "Reload failed; the previous extensions stay loaded:\n{}",
            warnings.join("\n")
        ));
    }
    if cancel.is_cancelled() {
        next.discard();
        return Err(CANCELLED.to_string());
    }
    if let Err(error) = session.tools().replace(&previous_tools, next.tools.clone()) {
        next.discard();
        return Err(format!(
            "Reload failed; the previous extensions stay loaded:\n{error}"
        ));
    }
    for worker in &next.workers {
        let _ = worker.shared.session.set(session.host());
    }
    let count = next.workers.len();
    next.publish_profiles(&host.options);
    let previous = std::mem::replace(&mut *host.generation(), next);
    previous.shut_down("reload").await;
    for worker in &host.generation().workers {
        worker.notify(LifecycleEvent::SessionStart {
            reason: "reload".to_string(),
        });
    }
    Ok(Some(format!(
        "Reloaded {count} extension{}",
        if count == 1 { "" } else { "s" }
    )))
}
