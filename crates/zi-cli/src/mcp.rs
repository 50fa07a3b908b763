//! MCP servers from settings (docs/mcp.md): the merged `mcpServers` definitions, their
//! warnings, and the one place that hands zi's environment to the MCP crate.

use std::path::Path;
use std::sync::Arc;

use anyhow::{Result, bail};
use zi_agent::settings::SettingsStore;

use crate::runtime::warn;

/// The configured servers' tools, or `None` when no server is enabled. A required server whose
/// definition is invalid fails start-up.
pub fn configure(settings: &SettingsStore, cwd: &Path) -> Result<Option<zi_mcp::Mcp>> {
    let (global, project) = settings.layer_values("mcpServers");
    let config = zi_mcp::config::load(global.as_ref(), project.as_ref());
    for warning in &config.warnings {
        warn(warning);
    }
    if let Some(error) = config.errors.first() {
        bail!("{error}");
    }
    let env: zi_mcp::EnvLookup = Arc::new(|name| std::env::var(name).ok());
    Ok(zi_mcp::Mcp::new(config.servers, cwd.to_path_buf(), env))
}
