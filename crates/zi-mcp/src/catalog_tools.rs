//! The lazy catalog: four tools with fixed schemas (`mcp_search`, `mcp_describe`, `mcp_call`,
//! `mcp_status`), so any number of server tools costs the model's context nothing until used.

use std::sync::Arc;

use futures::future::BoxFuture;
use serde_json::{Value, json};
use zi_agent::{Tool, ToolCallContext, ToolOutput, TypedTool};

use crate::catalog::search;
use crate::config::Exposure;
use crate::manager::{CallContext, McpManager};

const DEFAULT_SEARCH_LIMIT: usize = 20;
const MAX_SEARCH_LIMIT: usize = 50;
/// Longest description line a search result shows (the full text is in `mcp_describe`).
const SEARCH_DESCRIPTION_CHARS: usize = 160;

#[derive(Clone, Copy)]
enum Operation {
    Search,
    Describe,
    Call,
    Status,
}

struct CatalogTool {
    operation: Operation,
    manager: Arc<McpManager>,
    parameters: Value,
}

/// The four catalog tools over `manager`.
pub fn catalog_tools(manager: &Arc<McpManager>) -> Vec<Arc<dyn Tool>> {
    [
        (
            Operation::Search,
            json!({
                "type": "object",
                "properties": {
                    "query": {"type": "string", "description": "Words to look for in server names, tool names and descriptions; empty lists every tool."},
                    "limit": {"type": "integer", "minimum": 1, "maximum": MAX_SEARCH_LIMIT, "description": "Most results (default 20)."}
                },
                "required": ["query"],
                "additionalProperties": false
            }),
        ),
        (
            Operation::Describe,
            json!({
                "type": "object",
                "properties": {
                    "server": {"type": "string"},
                    "tool": {"type": "string"}
                },
                "required": ["server", "tool"],
                "additionalProperties": false
            }),
        ),
        (
            Operation::Call,
            json!({
                "type": "object",
                "properties": {
                    "server": {"type": "string"},
                    "tool": {"type": "string"},
                    "arguments": {"type": "object", "description": "The tool's arguments, as its input schema (mcp_describe) says."}
                },
                "required": ["server", "tool"],
                "additionalProperties": false
            }),
        ),
        (
            Operation::Status,
            json!({"type": "object", "properties": {}, "additionalProperties": false}),
        ),
    ]
    .into_iter()
    .map(|(operation, parameters)| {
        Arc::new(CatalogTool {
            operation,
            manager: manager.clone(),
            parameters,
        }) as Arc<dyn Tool>
    })
    .collect()
}

impl TypedTool for CatalogTool {
    type Args = Value;

    fn name(&self) -> &str {
        match self.operation {
            Operation::Search => "mcp_search",
            Operation::Describe => "mcp_describe",
            Operation::Call => "mcp_call",
            Operation::Status => "mcp_status",
        }
    }

    fn description(&self) -> &str {
        match self.operation {
            Operation::Search => {
                "Search the tools of the connected MCP servers by keywords. Returns server/tool names with short descriptions; use mcp_describe for a tool's input schema and mcp_call to run it."
            }
            Operation::Describe => "Show an MCP tool's full description and JSON input schema.",
            Operation::Call => {
                "Call a tool of an MCP server with arguments matching its input schema."
            }
            Operation::Status => {
                "Show each configured MCP server's connection state and tool count."
            }
        }
    }

    fn parameters(&self) -> &Value {
        &self.parameters
    }

    fn execute(&self, arguments: Value, call: ToolCallContext) -> BoxFuture<'static, ToolOutput> {
        let manager = self.manager.clone();
        let operation = self.operation;
        Box::pin(async move {
            let arguments = arguments;
            let text = |key: &str| {
                arguments
                    .get(key)
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string()
            };
            match operation {
                Operation::Search => {
                    manager.wait_settled(&call.cancel).await;
                    let limit = arguments
                        .get("limit")
                        .and_then(Value::as_u64)
                        .map_or(DEFAULT_SEARCH_LIMIT, |l| l as usize);
                    search_output(&manager, &text("query"), limit)
                }
                Operation::Describe => {
                    manager.wait_settled(&call.cancel).await;
                    match manager.describe(&text("server"), &text("tool")) {
                        Ok(tool) => {
                            let body = json!({
                                "server": text("server"),
                                "tool": tool.name,
                                "description": tool.description,
                                "inputSchema": *tool.schema,
                            });
                            ToolOutput::text(
                                serde_json::to_string_pretty(&body).unwrap_or_default(),
                            )
                        }
                        Err(error) => ToolOutput::error(error),
                    }
                }
                Operation::Call => {
                    let context = CallContext {
                        cancel: call.cancel,
                        progress: call.progress,
                    };
                    manager
                        .call(
                            &text("server"),
                            &text("tool"),
                            arguments.get("arguments").cloned(),
                            context,
                        )
                        .await
                }
                Operation::Status => {
                    let status = manager.status();
                    let mut output =
                        ToolOutput::text(serde_json::to_string_pretty(&status).unwrap_or_default());
                    output.details = Some(status);
                    output
                }
            }
        })
    }
}

fn search_output(manager: &McpManager, query: &str, limit: usize) -> ToolOutput {
    let listings = manager.listings(Some(Exposure::Catalog));
    let found = search(&listings, query);
    let total = found.len();
    let mut lines = Vec::new();
    let mut results = Vec::new();
    for (server, tool) in found.into_iter().take(limit) {
        let summary: String = tool
            .description
            .lines()
            .next()
            .unwrap_or_default()
            .chars()
            .take(SEARCH_DESCRIPTION_CHARS)
            .collect();
        lines.push(format!("{server}/{}: {summary}", tool.name));
        results.push(json!({"server": server, "tool": tool.name}));
    }
    let mut text = if lines.is_empty() {
        format!("No MCP tool matches {query:?}.")
    } else {
        format!(
            "{} of {total} matching MCP tools (server/tool: description); mcp_describe shows a tool's input schema.\n{}",
            lines.len(),
            lines.join("\n")
        )
    };
    let unavailable: Vec<String> = manager.status()["servers"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|s| s["state"] != "ready" && s["tools"] == "catalog")
        .map(|s| {
            format!(
                "{} ({})",
                s["name"].as_str().unwrap_or_default(),
                s["state"].as_str().unwrap_or_default()
            )
        })
        .collect();
    if !unavailable.is_empty() {
        text.push_str(&format!(
            "\nServers not searched: {} (mcp_status has details).",
            unavailable.join(", ")
        ));
    }
    ToolOutput {
        content: vec![zi_protocol::message::ContentBlock::text(text)],
        details: Some(json!({"results": results, "total": total})),
        is_error: false,
    }
}
