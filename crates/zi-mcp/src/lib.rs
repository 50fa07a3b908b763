//! MCP servers as zi tools (docs/mcp.md): `mcpServers` settings, clients on the official Rust
//! SDK (`rmcp`) over stdio and Streamable HTTP, connected in the background, and two ways for
//! the model to reach their tools — the lazy catalog (four fixed tools) and direct tools
//! (`mcp__<server>__<tool>`).

mod arguments;
mod bounds;
mod catalog;
mod catalog_tools;
pub mod config;
mod connection;
mod depth;
mod direct;
mod errors;
mod http;
mod manager;
mod redirect;
mod results;
mod secrets;
mod stdio;

use std::path::PathBuf;
use std::sync::Arc;

use catalog_tools::catalog_tools;
pub use config::{McpConfig, ServerConfig};
pub use direct::DirectTools;
pub use errors::RequiredServerFailed;
pub use manager::{CallContext, EnvLookup, McpManager, WarningSink};
use zi_agent::Tool;

/// What zi-cli installs when servers are configured.
pub struct Mcp {
    /// The servers: zi-cli starts them once it serves and hands them to the runtime, which
    /// stops them at exit.
    pub manager: Arc<McpManager>,
    /// The four catalog tools (part of the fixed tool set and the system prompt).
    pub catalog_tools: Vec<Arc<dyn Tool>>,
    /// The direct tools, as a tool source (also shuts the servers down on dispose).
    pub direct_tools: Arc<DirectTools>,
}

impl Mcp {
    /// `None` when no enabled server is configured: then zi has no MCP tools at all.
    pub fn new(servers: Vec<ServerConfig>, cwd: PathBuf, env: EnvLookup) -> Option<Mcp> {
        if servers.is_empty() {
            return None;
        }
        let manager = McpManager::new(servers, cwd, env);
        Some(Mcp {
            catalog_tools: catalog_tools(&manager),
            direct_tools: DirectTools::new(manager.clone()),
            manager,
        })
    }
}
