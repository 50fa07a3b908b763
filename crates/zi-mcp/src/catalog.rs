//! A server's tool listing: `tools/list` followed page by page within the bounds, and the
//! snapshot the tools read (replaced whole, so a refresh is atomic).

use std::sync::Arc;

use rmcp::model::{
    ClientRequest, CustomResult, ListToolsRequest, PaginatedRequestParams, ServerResult, Tool,
};
use serde_json::Value;

use crate::bounds::{
    MAX_DESCRIPTION_BYTES, MAX_LIST_PAGES, MAX_SCHEMA_BYTES, MAX_SCHEMA_DEPTH, MAX_TOOLS_PER_SERVER,
};
use crate::connection::Connection;
use crate::depth::value_depth;
use rmcp::ServiceError;

/// One tool of one server, as listed.
#[derive(Debug, Clone)]
pub struct CatalogTool {
    pub name: String,
    pub description: String,
    /// The input schema (a JSON object).
    pub schema: Arc<Value>,
    pub schema_bytes: usize,
    /// The output schema, when the server declares one within the schema bound (Code Mode
    /// cells then receive the result's `structuredContent`).
    pub output_schema: Option<Arc<Value>>,
}

/// A tool a server listed that zi does not offer, and why (docs/mcp.md#bounds).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefusedTool {
    pub name: String,
    pub reason: String,
}

/// A server's listing: the tools offered and the ones refused, each on its own — a hostile
/// schema costs its tool only, never the server.
#[derive(Debug, Default)]
pub(crate) struct Listing {
    pub(crate) tools: Vec<CatalogTool>,
    pub(crate) refused: Vec<RefusedTool>,
}

/// Why a server's tools could not be listed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ListError {
    #[error("the server lists more than {MAX_TOOLS_PER_SERVER} tools")]
    TooManyTools,
    #[error("tools/list returned more than {MAX_LIST_PAGES} pages")]
    TooManyPages,
    #[error("tools/list failed: {}", crate::errors::service(.0))]
    Request(ServiceError),
    #[error("tools/list answered without a list of tools")]
    NoList,
    #[error("tools/list answered with a result of another kind")]
    OtherKind,
}

/// Lists every tool of a server, or says which bound the listing broke.
pub(crate) async fn list_tools(connection: &Connection) -> Result<Listing, ListError> {
    let mut listing = Listing::default();
    let mut cursor = None;
    for _ in 0..MAX_LIST_PAGES {
        let (tools, next) = list_page(connection, cursor).await?;
        for tool in tools {
            if listing.tools.len() + listing.refused.len() == MAX_TOOLS_PER_SERVER {
                return Err(ListError::TooManyTools);
            }
            match tool.and_then(catalog_tool) {
                Ok(tool) => listing.tools.push(tool),
                Err(refused) => listing.refused.push(refused),
            }
        }
        match next {
            Some(next) => cursor = Some(next),
            None => return Ok(listing),
        }
    }
    Err(ListError::TooManyPages)
}

/// One page of `tools/list`: each tool as the SDK reads it, or why it cannot be read, and the
/// next cursor. A page with one unreadable tool fails the SDK's typed reading as a whole, so
/// such a page is read again tool by tool from its JSON.
async fn list_page(
    connection: &Connection,
    cursor: Option<String>,
) -> Result<(Vec<Result<Tool, RefusedTool>>, Option<String>), ListError> {
    let request = ClientRequest::ListToolsRequest(ListToolsRequest {
        method: Default::default(),
        params: Some(PaginatedRequestParams { meta: None, cursor }),
        extensions: Default::default(),
    });
    let result = connection
        .service
        .send_request(request)
        .await
        .map_err(ListError::Request)?;
    match result {
        ServerResult::ListToolsResult(page) => {
            Ok((page.tools.into_iter().map(Ok).collect(), page.next_cursor))
        }
        ServerResult::CustomResult(CustomResult(page)) => {
            let Some(items) = page.get("tools").and_then(Value::as_array) else {
                return Err(ListError::NoList);
            };
            let tools = items.iter().enumerate().map(read_tool).collect();
            let next = page
                .get("nextCursor")
                .and_then(Value::as_str)
                .map(str::to_string);
            Ok((tools, next))
        }
        _ => Err(ListError::OtherKind),
    }
}

/// One listed tool read on its own; `index` names a tool without a readable name.
fn read_tool((index, item): (usize, &Value)) -> Result<Tool, RefusedTool> {
    serde_json::from_value::<Tool>(item.clone()).map_err(|error| {
        let name = item.get("name").and_then(Value::as_str);
        let schema = item.get("inputSchema");
        let reason = match schema {
            None => "it has no inputSchema".to_string(),
            Some(schema) if !schema.is_object() => {
                format!("its inputSchema is {}, not an object", kind(schema))
            }
            Some(_) => format!("it cannot be read ({error})"),
        };
        RefusedTool {
            name: name.map_or_else(|| format!("#{}", index + 1), str::to_string),
            reason,
        }
    })
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// A readable tool within the per-tool bounds (schema size and depth), as the catalog keeps it.
fn catalog_tool(tool: Tool) -> Result<CatalogTool, RefusedTool> {
    let refuse = |reason: String| RefusedTool {
        name: tool.name.to_string(),
        reason,
    };
    let schema = Value::Object((*tool.input_schema).clone());
    let schema_bytes = serde_json::to_vec(&schema).map_or(usize::MAX, |b| b.len());
    if schema_bytes > MAX_SCHEMA_BYTES {
        return Err(refuse(format!(
            "its input schema is {schema_bytes} bytes, over the {} KiB bound",
            MAX_SCHEMA_BYTES / 1024
        )));
    }
    if value_depth(&schema) > MAX_SCHEMA_DEPTH {
        return Err(refuse(format!(
            "its input schema nests deeper than {MAX_SCHEMA_DEPTH} levels"
        )));
    }
    let output_schema = tool
        .output_schema
        .as_ref()
        .map(|o| Value::Object((**o).clone()))
        .filter(|o| {
            value_depth(o) <= MAX_SCHEMA_DEPTH
                && serde_json::to_vec(o).is_ok_and(|b| b.len() <= MAX_SCHEMA_BYTES)
        })
        .map(Arc::new);
    Ok(CatalogTool {
        name: tool.name.to_string(),
        description: bounded(tool.description.as_deref().unwrap_or_default()),
        schema: Arc::new(schema),
        schema_bytes,
        output_schema,
    })
}

fn bounded(text: &str) -> String {
    if text.len() <= MAX_DESCRIPTION_BYTES {
        return text.to_string();
    }
    let mut end = MAX_DESCRIPTION_BYTES;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

/// The tools matching `query` (any word of it, case-insensitively, in the server name, tool
/// name or description; names count double), best first.
pub(crate) fn search<'a>(
    tools: &'a [(String, Arc<Vec<CatalogTool>>)],
    query: &str,
) -> Vec<(&'a str, &'a CatalogTool)> {
    let words: Vec<String> = query.split_whitespace().map(str::to_lowercase).collect();
    let mut scored: Vec<(usize, usize, &str, &CatalogTool)> = Vec::new();
    for (server, listing) in tools {
        for tool in listing.iter() {
            let name = format!("{server} {}", tool.name).to_lowercase();
            let description = tool.description.to_lowercase();
            let mut score = 0;
            for word in &words {
                if name.contains(word.as_str()) {
                    score += 2;
                } else if description.contains(word.as_str()) {
                    score += 1;
                }
            }
            if words.is_empty() || score > 0 {
                scored.push((score, scored.len(), server, tool));
            }
        }
    }
    scored.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    scored.into_iter().map(|(_, _, s, t)| (s, t)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The SDK reads a page with an unreadable tool as a custom result (its results are an
    /// untagged union), which [`list_page`] reads tool by tool.
    #[test]
    fn a_page_with_an_unreadable_tool_reaches_zi_as_json() {
        let page = serde_json::json!({"tools": [
            {"name": "fine", "inputSchema": {"type": "object"}},
            {"name": "null_schema", "inputSchema": null},
            {"inputSchema": {"type": "object"}},
        ], "nextCursor": "c2"});
        let result: ServerResult =
            serde_json::from_value(page.clone()).unwrap_or_else(|e| panic!("{e}"));
        assert!(
            matches!(&result, ServerResult::CustomResult(CustomResult(value)) if *value == page),
            "{result:?}"
        );
        let items = page["tools"].as_array().cloned().unwrap_or_default();
        let read: Vec<Result<String, RefusedTool>> = items
            .iter()
            .enumerate()
            .map(|item| read_tool(item).map(|tool| tool.name.to_string()))
            .collect();
        assert_eq!(read[0], Ok("fine".to_string()));
        assert_eq!(
            read[1],
            Err(RefusedTool {
                name: "null_schema".into(),
                reason: "its inputSchema is null, not an object".into()
            })
        );
        assert_eq!(read[2].as_ref().map_err(|r| r.name.as_str()), Err("#3"));
    }

    #[test]
    fn deep_or_large_schemas_refuse_their_tool() {
        let tool = |schema: Value| -> Tool {
            serde_json::from_value(serde_json::json!({"name": "t", "inputSchema": schema}))
                .unwrap_or_else(|e| panic!("{e}"))
        };
        let mut deep = serde_json::json!({"type": "string"});
        for _ in 0..MAX_SCHEMA_DEPTH {
            deep = serde_json::json!({"type": "object", "properties": {"x": deep}});
        }
        let refused = catalog_tool(tool(deep)).map(|t| t.name);
        assert_eq!(
            refused,
            Err(RefusedTool {
                name: "t".into(),
                reason: format!("its input schema nests deeper than {MAX_SCHEMA_DEPTH} levels")
            })
        );
        let big =
            serde_json::json!({"type": "object", "description": "x".repeat(MAX_SCHEMA_BYTES)});
        assert!(
            catalog_tool(tool(big))
                .err()
                .is_some_and(|r| r.reason.contains("over the 32 KiB bound"))
        );
        let fine = catalog_tool(tool(serde_json::json!({"type": "object"})));
        assert!(fine.is_ok());
    }
}
