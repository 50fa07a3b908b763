//! The lazy catalog: four tools with fixed schemas (`mcp_search`, `mcp_describe`, `mcp_call`,
//! `mcp_status`), so any number of server tools costs the model's context nothing until used.

use std::sync::Arc;

use futures::future::BoxFuture;
use schemars::JsonSchema;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value, json};
use zi_agent::tool::{KEY_ORDER, parameters_schema, whole_number};
use zi_agent::{Tool, ToolCallContext, ToolOutput, TypedTool};

use crate::catalog::search;
use crate::config::Exposure;
use crate::manager::{CallContext, McpManager};

const DEFAULT_SEARCH_LIMIT: usize = 20;
const MAX_SEARCH_LIMIT: usize = 50;
/// Longest description line a search result shows (the full text is in `mcp_describe`).
const SEARCH_DESCRIPTION_CHARS: usize = 160;

/// The arguments of `mcp_search`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct SearchArgs {
    /// Words to look for in server names, tool names and descriptions; empty lists every tool.
    query: String,
    /// Most results (default 20).
    #[serde(default, deserialize_with = "whole_number")]
    #[schemars(range(min = 1, max = MAX_SEARCH_LIMIT))]
    limit: Option<u64>,
}

/// The arguments of `mcp_describe`; the model is told nothing more about them than their names.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct DescribeArgs {
    server: String,
    tool: String,
}

/// The arguments of `mcp_call`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct CallArgs {
    // The server and the tool are named without descriptions, like mcp_describe's.
    server: String,
    tool: String,
    /// The tool's arguments, as its input schema (mcp_describe) says.
    arguments: Option<Map<String, Value>>,
}

/// `mcp_status` takes nothing.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct StatusArgs {}

/// One catalog tool: its texts and schema, and what its parsed arguments run.
struct CatalogTool<A> {
    name: &'static str,
    description: &'static str,
    parameters: Value,
    manager: Arc<McpManager>,
    run: Run<A>,
}

/// A catalog tool's operation on the manager.
type Run<A> = fn(Arc<McpManager>, A, ToolCallContext) -> BoxFuture<'static, ToolOutput>;

/// The four catalog tools over `manager`.
pub(crate) fn catalog_tools(manager: &Arc<McpManager>) -> Vec<Arc<dyn Tool>> {
    vec![
        catalog_tool(
            manager,
            "mcp_search",
            "Search the tools of the connected MCP servers by keywords. Returns server/tool names with short descriptions; use mcp_describe for a tool's input schema and mcp_call to run it.",
            |manager, args: SearchArgs, call| {
                Box::pin(async move {
                    manager.wait_settled(&call.cancel).await;
                    let limit = args.limit.map_or(DEFAULT_SEARCH_LIMIT, |l| {
                        usize::try_from(l).unwrap_or(usize::MAX)
                    });
                    search_output(&manager, &args.query, limit)
                })
            },
        ),
        catalog_tool(
            manager,
            "mcp_describe",
            "Show an MCP tool's full description and JSON input schema.",
            |manager, args: DescribeArgs, call| {
                Box::pin(async move {
                    manager.wait_settled(&call.cancel).await;
                    describe_output(&manager, &args.server, &args.tool)
                })
            },
        ),
        catalog_tool(
            manager,
            "mcp_call",
            "Call a tool of an MCP server with arguments matching its input schema.",
            |manager, args: CallArgs, call| {
                Box::pin(async move {
                    let context = CallContext {
                        cancel: call.cancel,
                        progress: call.progress,
                    };
                    let arguments = args.arguments.map(Value::Object);
                    manager
                        .call(&args.server, &args.tool, arguments, context)
                        .await
                })
            },
        ),
        catalog_tool(
            manager,
            "mcp_status",
            "Show each configured MCP server's connection state and tool count.",
            |manager, _: StatusArgs, _| {
                Box::pin(async move {
                    let status = manager.status();
                    let mut output =
                        ToolOutput::text(serde_json::to_string_pretty(&status).unwrap_or_default());
                    output.details = Some(status);
                    output
                })
            },
        ),
    ]
}

fn catalog_tool<A: JsonSchema + DeserializeOwned + Send + Sync + 'static>(
    manager: &Arc<McpManager>,
    name: &'static str,
    description: &'static str,
    run: Run<A>,
) -> Arc<dyn Tool> {
    Arc::new(CatalogTool {
        name,
        description,
        parameters: parameters_schema::<A>(KEY_ORDER),
        manager: manager.clone(),
        run,
    })
}

impl<A: DeserializeOwned + Send + Sync + 'static> TypedTool for CatalogTool<A> {
    type Args = A;

    fn name(&self) -> &str {
        self.name
    }

    fn description(&self) -> &str {
        self.description
    }

    fn parameters(&self) -> &Value {
        &self.parameters
    }

    fn execute(&self, args: A, call: ToolCallContext) -> BoxFuture<'static, ToolOutput> {
        (self.run)(self.manager.clone(), args, call)
    }
}

fn describe_output(manager: &McpManager, server: &str, tool: &str) -> ToolOutput {
    match manager.describe(server, tool) {
        Ok(tool) => {
            let body = json!({
                "server": server,
                "tool": tool.name,
                "description": tool.description,
                "inputSchema": *tool.schema,
            });
            ToolOutput::text(serde_json::to_string_pretty(&body).unwrap_or_default())
        }
        Err(error) => ToolOutput::error(error.to_string()),
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
