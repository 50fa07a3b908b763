//! Direct exposure: each tool of a `"tools": "direct"` server is a zi tool named
//! `mcp__<server>__<tool>` with the server's input schema. The set follows the catalogs (a
//! `list_changed` refresh adds and removes tools) and is rebuilt only when a catalog changed.

use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use serde_json::Value;
use zi_agent::{RegisteredTool, ToolCallContext, ToolOutput, ToolSource, TypedTool};

use crate::config::Exposure;
use crate::manager::{CallContext, McpManager};

/// Longest tool name providers accept.
pub(crate) const MAX_TOOL_NAME_BYTES: usize = 64;

/// `mcp__<server>__<tool>` with every character outside `[A-Za-z0-9_-]` replaced by `_`; a
/// name over 64 bytes keeps its first 55 bytes and a hash of the whole, so it stays unique.
pub(crate) fn direct_name(server: &str, tool: &str) -> String {
    let sanitized: String = tool
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let name = format!("mcp__{server}__{sanitized}");
    if name.len() <= MAX_TOOL_NAME_BYTES {
        return name;
    }
    // FNV-1a: stable across runs and builds (the name may appear in rules and journals).
    let hash = tool.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    format!("{}_{:08x}", &name[..MAX_TOOL_NAME_BYTES - 9], hash as u32)
}

struct DirectTool {
    name: String,
    server: String,
    tool: String,
    description: String,
    parameters: Value,
    output_schema: Option<Arc<Value>>,
    manager: Arc<McpManager>,
}

impl TypedTool for DirectTool {
    type Args = Value;

    fn name(&self) -> &str {
        &self.name
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn parameters(&self) -> &Value {
        &self.parameters
    }

    fn output_schema(&self) -> Option<&Value> {
        self.output_schema.as_deref()
    }

    /// The result's `structuredContent` (results.rs keeps it in the details).
    fn structured_value(&self, output: &ToolOutput) -> Option<Value> {
        output.details.as_ref()?.get("structuredContent").cloned()
    }

    fn execute(&self, arguments: Value, call: ToolCallContext) -> BoxFuture<'static, ToolOutput> {
        let manager = self.manager.clone();
        let (server, tool) = (self.server.clone(), self.tool.clone());
        Box::pin(async move {
            let context = CallContext {
                cancel: call.cancel,
                progress: call.progress,
            };
            manager.call(&server, &tool, Some(arguments), context).await
        })
    }
}

/// The direct tools of every direct-mode server, and the manager's shutdown on dispose.
pub struct DirectTools {
    manager: Arc<McpManager>,
    /// The catalog generation the cached set was built from.
    cache: Mutex<(u64, Arc<[Arc<RegisteredTool>]>)>,
}

impl DirectTools {
    /// The direct tools of `manager`'s servers, rebuilt whenever a catalog changes.
    pub fn new(manager: Arc<McpManager>) -> Arc<DirectTools> {
        Arc::new(DirectTools {
            manager,
            cache: Mutex::new((u64::MAX, Arc::from(Vec::new()))),
        })
    }

    fn build(&self) -> Arc<[Arc<RegisteredTool>]> {
        let mut tools: Vec<Arc<RegisteredTool>> = Vec::new();
        for (server, listing) in self.manager.listings(Some(Exposure::Direct)) {
            for entry in listing.iter() {
                let name = direct_name(&server, &entry.name);
                if tools.iter().any(|t| t.tool.name() == name) {
                    tracing::warn!(
                        "MCP tool {server}/{} is hidden: its direct name {name} is taken",
                        entry.name
                    );
                    continue;
                }
                let tool = DirectTool {
                    name,
                    server: server.clone(),
                    tool: entry.name.clone(),
                    description: entry.description.clone(),
                    parameters: (*entry.schema).clone(),
                    output_schema: entry.output_schema.clone(),
                    manager: self.manager.clone(),
                };
                // The schema is an object (catalog.rs), so registration cannot fail.
                if let Ok(registered) = RegisteredTool::new(Arc::new(tool)) {
                    tools.push(Arc::new(registered));
                }
            }
        }
        Arc::from(tools)
    }
}

impl ToolSource for DirectTools {
    fn tools(&self) -> Arc<[Arc<RegisteredTool>]> {
        let generation = self.manager.generation();
        let Ok(mut cache) = self.cache.lock() else {
            return Arc::from(Vec::new());
        };
        if cache.0 != generation {
            *cache = (generation, self.build());
        }
        cache.1.clone()
    }

    fn shutdown(&self) -> BoxFuture<'static, ()> {
        let manager = self.manager.clone();
        Box::pin(async move { manager.shutdown().await })
    }
}

#[cfg(test)]
mod tests {
    use super::direct_name;

    #[test]
    fn names_are_sanitised_and_bounded() {
        assert_eq!(direct_name("gh", "search.issues"), "mcp__gh__search_issues");
        let long = "x".repeat(100);
        let a = direct_name("server", &long);
        let b = direct_name("server", &format!("{long}y"));
        assert_eq!(a.len(), 64);
        assert_ne!(a, b);
    }
}
