//! MCP servers from settings (docs/mcp.md): the merged `mcpServers` definitions, their
//! warnings, and the one place that hands zi's environment to the MCP crate.

use std::path::Path;
use std::sync::Arc;

use anyhow::{Result, bail};
use zi_config::settings::SettingsStore;
use zi_mcp::{McpManager, RequiredServerFailed};

use crate::runtime::warn;

/// The configured servers' tools, or `None` when no server is enabled. A required server whose
/// definition is invalid fails start-up.
/// `client` are servers an ACP client passed (docs/acp.md): they join the project layer by
/// name, above the settings' servers.
pub fn configure(
    settings: &SettingsStore,
    cwd: &Path,
    client: &serde_json::Map<String, serde_json::Value>,
) -> Result<Option<zi_mcp::Mcp>> {
    let (global, mut project) = settings.layer_values("mcpServers");
    if !client.is_empty() {
        let mut merged = match project {
            Some(serde_json::Value::Object(map)) => map,
            Some(other) => {
                warn(&format!(
                    "(project settings) mcpServers must be an object of server definitions: {other}"
                ));
                serde_json::Map::new()
            }
            None => serde_json::Map::new(),
        };
        for (name, definition) in client {
            merged.insert(name.clone(), definition.clone());
        }
        project = Some(serde_json::Value::Object(merged));
    }
    let config = zi_mcp::config::load(global.as_ref(), project.as_ref());
    for warning in &config.warnings {
        warn(warning);
    }
    if let Some(error) = config.errors.first() {
        bail!("{error}");
    }
    let env: zi_mcp::EnvLookup = Arc::new(|name| std::env::var(name).ok());
    let mcp = zi_mcp::Mcp::new(config.servers, cwd.to_path_buf(), env);
    if let Some(mcp) = &mcp {
        // A server that fails to start does so after start-up: warned like the rest.
        mcp.manager.set_warning_sink(Arc::new(warn));
    }
    Ok(mcp)
}

/// Before the mode serves: the `required` servers connect and are waited for (one that fails
/// fails start-up); the others connect in the background. The rpc mode starts those once
/// `ready` is on stdout (rpc_mode.rs); the other modes have no such frame, so theirs start now,
/// next to the first prompt.
pub async fn before_serving(
    mcp: &McpManager,
    rpc: bool,
) -> std::result::Result<(), RequiredServerFailed> {
    mcp.wait_required().await?;
    if !rpc {
        mcp.start();
    }
    Ok(())
}
