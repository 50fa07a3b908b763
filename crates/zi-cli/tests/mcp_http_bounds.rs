//! Black-box test of the HTTP bounds of Streamable HTTP MCP servers (issue 17 point 4,
//! docs/mcp.md "Bounds"): a hostile server (`tests/fixtures/mcp/hostile_http.py`, standard
//! library only) answers calls with a huge header, an endless SSE line, an endless SSE event
//! and an endless JSON body. Each call ends with a clear error naming the bound, and the next
//! call reconnects and succeeds: zi keeps serving.

// A test fails by panicking with its reason.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt as _, BufReader};
use zi_test_support::dirs::{AgentDir, temp_cwd};
use zi_test_support::mock_llm::{Step, start_mock};
use zi_test_support::zi_command::ZiCommand;

const WAIT: Duration = Duration::from_secs(120);

/// Starts the hostile server; returns it (killed on drop) and its URL.
async fn hostile_server() -> (tokio::process::Child, String) {
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/mcp/hostile_http.py"
    );
    let mut child = tokio::process::Command::new("python3")
        .arg(script)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .expect("start the hostile HTTP server (python3)");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let line = tokio::time::timeout(WAIT, lines.next_line())
        .await
        .expect("the hostile server listens in time")
        .unwrap()
        .unwrap_or_default();
    let port = line
        .strip_prefix("port ")
        .expect("port line")
        .trim()
        .to_string();
    (child, format!("http://127.0.0.1:{port}/mcp"))
}

fn text_of(end: &Value) -> String {
    end["result"]["content"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["text"].as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_bounds_are_clear_errors_and_zi_keeps_serving() {
    let (_server, url) = hostile_server().await;
    let mock = start_mock().await;
    let agent = AgentDir::new()
        .models(&mock, "k", &[json!({"id": "m1"})])
        .settings(
            &json!({"mcpServers": {"hostile": {"type": "streamable-http", "url": url}}})
                .to_string(),
        );
    let cwd = temp_cwd();
    let mut p = ZiCommand::rpc(env!("CARGO_BIN_EXE_zi"), &agent, &cwd.path)
        .no_session()
        .model("mock/m1")
        .timeout(WAIT)
        .spawn_rpc()
        .await;
    let calls = [
        ("c0", "ok"),
        ("c1", "huge_header"),
        ("c2", "ok"),
        ("c3", "endless_line"),
        ("c4", "ok"),
        ("c5", "endless_event"),
        ("c6", "ok"),
        ("c7", "huge_body"),
        ("c8", "ok"),
    ];
    for (id, tool) in calls {
        mock.push(Step::tool_call(
            id,
            "mcp_call",
            json!({"server": "hostile", "tool": tool, "arguments": {}}),
        ));
    }
    mock.push(Step::text("done"));
    p.request_ok(
        "p",
        "session.prompt",
        Some(json!({"delivery": "direct", "text": "misbehave"})),
    )
    .await;
    p.event("agent_settled").await;
    let ends: Vec<Value> = p
        .events()
        .into_iter()
        .filter(|e| e["type"] == "tool_execution_end")
        .collect();
    let end = |id: &str| {
        ends.iter()
            .find(|e| e["toolCallId"] == id)
            .unwrap_or_else(|| panic!("no end of {id}: {ends:?}"))
            .clone()
    };
    for (id, tool) in calls {
        let result = end(id);
        let text = text_of(&result);
        let problem = match tool {
            "ok" => {
                assert_eq!(result["isError"], json!(false), "{id}: {result}");
                assert_eq!(text, "fine", "{id}");
                continue;
            }
            "huge_header" => "the server sent HTTP response headers over 64 KiB",
            "huge_body" => "the server sent an HTTP body over 4 MiB",
            _ => "the server sent an SSE event over 4 MiB",
        };
        assert_eq!(result["isError"], json!(true), "{id}: {result}");
        assert_eq!(
            text,
            format!(
                "MCP server hostile lost the connection during the call to {tool} ({problem}); the call was not retried"
            ),
            "{id}"
        );
    }
    // Still serving after all of it.
    let state = p.request_ok("s", "session.get_state", None).await;
    assert_eq!(state["activity"]["type"], "idle", "{state}");
    p.close_stdin().await;
    let exited = p.wait_exit(WAIT).await;
    assert_eq!(exited.code, Some(0), "stderr: {}", exited.stderr);
}

/// Issue 23 C2: a server that answers 307 with another origin does not receive the configured
/// headers (`headers` and `headerEnvironment`); a redirect within the origin is followed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redirect_to_another_origin_is_refused_and_the_headers_stay_home() {
    let (_server, url) = hostile_server().await;
    let mock = start_mock().await;
    let agent = AgentDir::new()
        .models(&mock, "k", &[json!({"id": "m1"})])
        .settings(
            &json!({"mcpServers": {"hostile": {
                "type": "streamable-http",
                "url": url,
                "headers": {"X-Api-Key": "literal-secret-1234"},
                "headerEnvironment": {"X-Team-Token": "ZI_TEST_MCP_TEAM_TOKEN"},
            }}})
            .to_string(),
        );
    let cwd = temp_cwd();
    let mut p = ZiCommand::rpc(env!("CARGO_BIN_EXE_zi"), &agent, &cwd.path)
        .no_session()
        .model("mock/m1")
        .env("ZI_TEST_MCP_TEAM_TOKEN", "env-secret-5678")
        .timeout(WAIT)
        .spawn_rpc()
        .await;
    for (id, tool) in [("away", "redirect_away"), ("home", "redirect_home")] {
        mock.push(Step::tool_call(
            id,
            "mcp_call",
            json!({"server": "hostile", "tool": tool, "arguments": {}}),
        ));
    }
    mock.push(Step::text("done"));
    p.request_ok(
        "p",
        "session.prompt",
        Some(json!({"delivery": "direct", "text": "follow"})),
    )
    .await;
    p.event("agent_settled").await;
    let ends: Vec<Value> = p
        .events()
        .into_iter()
        .filter(|e| e["type"] == "tool_execution_end")
        .collect();
    let end = |id: &str| ends.iter().find(|e| e["toolCallId"] == id).unwrap().clone();

    let away = end("away");
    let text = text_of(&away);
    assert!(
        !text.contains("literal-secret-1234") && !text.contains("env-secret-5678"),
        "the other origin received the configured headers: {text}"
    );
    assert!(!text.contains("elsewhere received"), "{text}");
    assert_eq!(away["isError"], json!(true), "{away}");
    assert!(
        text.contains("the server redirected to another origin (http://127.0.0.1:")
            && text.contains("zi follows redirects only within the configured server's origin"),
        "the error says why: {text}"
    );

    let home = end("home");
    assert_eq!(home["isError"], json!(false), "{home}");
    assert_eq!(text_of(&home), "fine");
    p.close_stdin().await;
    assert_eq!(p.wait_exit(WAIT).await.code, Some(0));
}
