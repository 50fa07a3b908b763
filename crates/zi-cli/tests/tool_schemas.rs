//! What the model sees of zi's own tools: every built-in tool, the `code` tool (whose
//! description carries the declarations generated from the other tools' schemas), the four MCP
//! catalog tools and the eight delegation tools, byte for byte as the provider request carries
//! them (`tools` of an openai-completions request: name, description, parameter schema).
//!
//! The record is `tests/fixtures/tool-schemas.jsonl`, one tool per line. A deliberate change of
//! a schema or description refreshes it with
//! `ZI_UPDATE_TOOL_SCHEMAS=1 cargo test -p zi-cli --test all tool_schemas`; a refactoring must keep
//! it green without.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::json;
use zi_test_support::dirs::{AgentDir, temp_cwd};
use zi_test_support::mock_llm::{Step, start_mock};
use zi_test_support::zi_command::ZiCommand;

const ZI: &str = env!("CARGO_BIN_EXE_zi");
const WAIT: Duration = Duration::from_secs(60);

fn record_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tool-schemas.jsonl")
}

#[tokio::test]
async fn offered_tools_are_unchanged_byte_for_byte() {
    let mock = start_mock().await;
    let agent = AgentDir::new()
        .models(&mock, "schema-key", &[json!({"id": "m1"})])
        .settings(
            &json!({
                "codeMode": true,
                // Never started in this test: the catalog tools exist whatever the server does.
                "mcpServers": {"docs": {"command": ["/nonexistent/zi-schema-test-server"]}},
            })
            .to_string(),
        );
    agent.write(
        "subagents/worker.md",
        "---\ndescription: Does one delegated job\n---\nYou are a careful worker.\n",
    );
    agent.write(
        "subagents/reviewer.md",
        "---\ndescription: Reviews a change and reports problems\n---\nReview carefully.\n",
    );
    let cwd = temp_cwd();
    mock.push(Step::text("done"));
    let mut p = ZiCommand::rpc(ZI, &agent, &cwd.path)
        .no_session()
        .model("mock/m1")
        .timeout(WAIT)
        .spawn_rpc()
        .await;
    let response = p
        .request(
            "p1",
            "session.prompt",
            Some(json!({"delivery": "direct", "text": "go"})),
        )
        .await;
    assert_eq!(response["ok"], json!(true), "{response}");
    p.event("agent_settled").await;
    let requests = mock.requests();
    let tools = requests[0].body["tools"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    // The mock keeps the body as parsed (key order preserved); compact serialization gives
    // back the bytes zi sent.
    let printed: String = tools
        .iter()
        .map(|tool| format!("{}\n", serde_json::to_string(tool).unwrap()))
        .collect();
    let names: Vec<&str> = tools
        .iter()
        .filter_map(|t| t["function"]["name"].as_str())
        .collect();
    assert_eq!(
        names,
        [
            "read",
            "bash",
            "edit",
            "write",
            "task_output",
            "kill_task",
            "update_plan",
            "mcp_search",
            "mcp_describe",
            "mcp_call",
            "mcp_status",
            "code",
            "list_subagent_profiles",
            "spawn_subagent",
            "send_subagent_message",
            "assign_subagent_task",
            "wait_subagents",
            "list_subagents",
            "interrupt_subagent",
            "close_subagent",
        ]
    );
    let path = record_path();
    if std::env::var_os("ZI_UPDATE_TOOL_SCHEMAS").is_some() {
        std::fs::write(&path, &printed).unwrap_or_else(|e| panic!("write {path:?}: {e}"));
    }
    let stored = std::fs::read_to_string(&path).unwrap_or_default();
    for (line, (stored, printed)) in stored.lines().zip(printed.lines()).enumerate() {
        assert_eq!(
            stored,
            printed,
            "tool {} ({}) changed",
            line + 1,
            names[line]
        );
    }
    assert_eq!(
        stored, printed,
        "tests/fixtures/tool-schemas.jsonl is out of date"
    );
}
