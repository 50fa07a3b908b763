//! A server's tool listing: `tools/list` followed page by page within the bounds, and the
//! snapshot the tools read (replaced whole, so a refresh is atomic).

use std::sync::Arc;

use rmcp::model::PaginatedRequestParams;
use serde_json::Value;

use crate::bounds::{
    MAX_DESCRIPTION_BYTES, MAX_LIST_PAGES, MAX_SCHEMA_BYTES, MAX_TOOLS_PER_SERVER,
};
use crate::connection::Connection;

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

/// Lists every tool of a server, or says which bound the listing broke.
pub(crate) async fn list_tools(connection: &Connection) -> Result<Vec<CatalogTool>, String> {
    let mut tools = Vec::new();
    let mut cursor = None;
    for _ in 0..MAX_LIST_PAGES {
        let page = connection
            .service
            .list_tools(Some(PaginatedRequestParams { meta: None, cursor }))
            .await
            .map_err(|e| format!("tools/list failed: {e}"))?;
        for tool in page.tools {
            if tools.len() == MAX_TOOLS_PER_SERVER {
                return Err(format!(
                    "the server lists more than {MAX_TOOLS_PER_SERVER} tools"
                ));
            }
            let schema = Value::Object((*tool.input_schema).clone());
            let schema_bytes = serde_json::to_vec(&schema).map_or(usize::MAX, |b| b.len());
            if schema_bytes > MAX_SCHEMA_BYTES {
                return Err(format!(
                    "the input schema of tool {} is {schema_bytes} bytes, over the {} KiB bound",
                    tool.name,
                    MAX_SCHEMA_BYTES / 1024
                ));
            }
            let output_schema = tool
                .output_schema
                .map(|o| Value::Object((*o).clone()))
                .filter(|o| serde_json::to_vec(o).is_ok_and(|b| b.len() <= MAX_SCHEMA_BYTES))
                .map(Arc::new);
            tools.push(CatalogTool {
                name: tool.name.to_string(),
                description: bounded(tool.description.as_deref().unwrap_or_default()),
                schema: Arc::new(schema),
                schema_bytes,
                output_schema,
            });
        }
        match page.next_cursor {
            Some(next) => cursor = Some(next),
            None => return Ok(tools),
        }
    }
    Err(format!(
        "tools/list returned more than {MAX_LIST_PAGES} pages"
    ))
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
