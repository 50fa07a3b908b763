//! The MCP servers a client passes with `session/new`, `session/load` and `session/resume`, as
//! zi `mcpServers` definitions (docs/mcp.md): they join the session's servers by name (the
//! client's win, like a project layer) and get the same validation, bounds and secret handling;
//! a bad one is a warning, never a failed session. The SSE transport is refused (zi advertises
//! `mcpCapabilities.sse: false`).

use agent_client_protocol_schema::v1::McpServer;
use serde_json::{Map, Value, json};

/// The definitions, by server name, and a warning per server zi cannot use.
pub fn definitions(servers: &[McpServer]) -> (Map<String, Value>, Vec<String>) {
    let mut definitions = Map::new();
    let mut warnings = Vec::new();
    for server in servers {
        match server {
            McpServer::Stdio(stdio) => {
                let mut command = vec![json!(stdio.command.display().to_string())];
                command.extend(stdio.args.iter().map(|arg| json!(arg)));
                let environment: Map<String, Value> = stdio
                    .env
                    .iter()
                    .map(|var| (var.name.clone(), json!(var.value)))
                    .collect();
                definitions.insert(
                    stdio.name.clone(),
                    json!({"command": command, "environment": environment}),
                );
            }
            McpServer::Http(http) => {
                let headers: Map<String, Value> = http
                    .headers
                    .iter()
                    .map(|header| (header.name.clone(), json!(header.value)))
                    .collect();
                definitions.insert(
                    http.name.clone(),
                    json!({"type": "streamable-http", "url": http.url, "headers": headers}),
                );
            }
            McpServer::Sse(sse) => warnings.push(format!(
                "(mcp) server \"{}\" is ignored: the SSE transport is not supported; use Streamable HTTP",
                sse.name
            )),
            _ => warnings.push("(mcp) a server of an unknown transport is ignored".to_string()),
        }
    }
    (definitions, warnings)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_servers_become_zi_definitions() {
        let servers: Vec<McpServer> = serde_json::from_value(json!([
            {"name": "docs", "command": "/usr/bin/python3", "args": ["server.py", "stdio"],
             "env": [{"name": "TOKEN", "value": "s3cret"}]},
            {"type": "http", "name": "web", "url": "https://example.com/mcp",
             "headers": [{"name": "Authorization", "value": "Bearer x"}]},
            {"type": "sse", "name": "old", "url": "https://example.com/sse", "headers": []}
        ]))
        .unwrap();
        let (definitions, warnings) = definitions(&servers);
        assert_eq!(
            Value::Object(definitions),
            json!({
                "docs": {"command": ["/usr/bin/python3", "server.py", "stdio"],
                         "environment": {"TOKEN": "s3cret"}},
                "web": {"type": "streamable-http", "url": "https://example.com/mcp",
                        "headers": {"Authorization": "Bearer x"}}
            })
        );
        assert_eq!(warnings.len(), 1);
        assert!(warnings[0].contains("\"old\""));
    }
}
