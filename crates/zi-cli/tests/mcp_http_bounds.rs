//! Black-box test of the HTTP bounds of Streamable HTTP MCP servers (issue 17 point 4,
//! docs/mcp.md#bounds): a hostile server (`tests/fixtures/mcp/hostile_http.py`, standard
//! library only) answers calls with a huge header, an endless SSE line, an endless SSE event
//! and an endless JSON body. Each call ends with a clear error naming the bound, and the next
//! call reconnects and succeeds: zi keeps serving. The same server, and its stdio form, lists
//! tools with hostile schemas and fails with HTTP statuses, for the errors a model can act on
//! (issue 23 C10).

use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt as _, BufReader};
use zi_test_support::dirs::{AgentDir, temp_cwd};
use zi_test_support::mock_llm::{Step, start_mock};
use zi_test_support::zi_command::ZiCommand;

use crate::wire_support::result_texts;

const WAIT: Duration = Duration::from_secs(120);

const HOSTILE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/mcp/hostile_http.py"
);

/// Starts the hostile server; returns it (killed on drop) and its URL.
async fn hostile_server() -> (tokio::process::Child, String) {
    hostile_server_with(&[]).await
}

/// [`hostile_server`] with the script's options (`--hostile-tools`, `--fail-initialize`).
async fn hostile_server_with(options: &[&str]) -> (tokio::process::Child, String) {
    let mut child = tokio::process::Command::new("python3")
        .arg(HOSTILE)
        .args(options)
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_bounds_are_clear_errors_and_zi_keeps_serving() {
    let (_server, url) = hostile_server().await;
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
    let steps: Vec<_> = calls
        .iter()
        .map(|&(id, tool)| (id, "mcp_call", call("hostile", tool)))
        .collect();
    let run = run_calls(
        json!({"hostile": {"type": "streamable-http", "url": url}}),
        &[],
        &steps,
    )
    .await;
    for (id, tool) in calls {
        let problem = match tool {
            "ok" => {
                assert_eq!(run.ok(id), "fine", "{id}");
                continue;
            }
            "huge_header" => "the server sent HTTP response headers over 64 KiB",
            "huge_body" => "the server sent an HTTP body over 4 MiB",
            _ => "the server sent an SSE event over 4 MiB",
        };
        assert_eq!(
            run.failed(id),
            format!(
                "MCP server hostile lost the connection during the call to {tool} ({problem}); the call was not retried"
            ),
            "{id}"
        );
    }
}

/// Issue 23 C2: a server that answers 307 with another origin does not receive the configured
/// headers (`headers` and `headerEnvironment`); a redirect within the origin is followed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redirect_to_another_origin_is_refused_and_the_headers_stay_home() {
    let (_server, url) = hostile_server().await;
    let run = run_calls(
        json!({"hostile": {
            "type": "streamable-http",
            "url": url,
            "headers": {"X-Api-Key": "literal-secret-1234"},
            "headerEnvironment": {"X-Team-Token": "ZI_TEST_MCP_TEAM_TOKEN"},
        }}),
        &[("ZI_TEST_MCP_TEAM_TOKEN", "env-secret-5678")],
        &[
            ("away", "mcp_call", call("hostile", "redirect_away")),
            ("home", "mcp_call", call("hostile", "redirect_home")),
        ],
    )
    .await;
    let text = run.failed("away");
    assert!(
        !text.contains("literal-secret-1234") && !text.contains("env-secret-5678"),
        "the other origin received the configured headers: {text}"
    );
    assert!(!text.contains("elsewhere received"), "{text}");
    assert!(
        text.contains("the server redirected to another origin (http://127.0.0.1:")
            && text.contains("zi follows redirects only within the configured server's origin"),
        "the error says why: {text}"
    );
    assert_eq!(run.ok("home"), "fine");
}

/// One prompt's run against MCP servers: each call's `tool_execution_end`, the tools the last
/// model request offered, and zi's stderr after EOF.
struct Run {
    ends: Vec<Value>,
    offered: Vec<String>,
    stderr: String,
}

impl Run {
    fn end(&self, id: &str) -> &Value {
        self.ends
            .iter()
            .find(|e| e["toolCallId"] == id)
            .unwrap_or_else(|| panic!("no end of {id}: {:?}", self.ends))
    }

    /// The text of call `id`, which succeeded.
    fn ok(&self, id: &str) -> String {
        let result = self.end(id);
        assert_eq!(result["isError"], json!(false), "{id}: {result}");
        result_texts(result)
    }

    /// The text of call `id`, which failed.
    fn failed(&self, id: &str) -> String {
        let result = self.end(id);
        assert_eq!(result["isError"], json!(true), "{id}: {result}");
        result_texts(result)
    }

    /// Server `name`'s entry in the `mcp_status` result of call `id`.
    fn status_of(&self, id: &str, name: &str) -> Value {
        let status: Value = serde_json::from_str(&self.ok(id)).unwrap();
        status["servers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == name)
            .unwrap_or_else(|| panic!("no server {name}: {status}"))
            .clone()
    }

    /// No text zi showed (results, stderr) carries a Rust type name.
    fn assert_no_type_names(&self) {
        let everything = format!("{:?}{}", self.ends, self.stderr);
        assert!(
            !everything.contains("rmcp::") && !everything.contains("Transport ["),
            "a Rust type name reached a text: {everything}"
        );
    }
}

/// Runs one prompt whose model calls `steps` (call id, tool, arguments) in turn, with
/// `servers` as `mcpServers` and `env` in zi's environment; checks zi is idle afterwards, then
/// closes its stdin.
async fn run_calls(servers: Value, env: &[(&str, &str)], steps: &[(&str, &str, Value)]) -> Run {
    let mock = start_mock().await;
    let agent = AgentDir::new()
        .models(&mock, "k", &[json!({"id": "m1"})])
        .settings(&json!({ "mcpServers": servers }).to_string());
    let cwd = temp_cwd();
    let mut command = ZiCommand::rpc(env!("CARGO_BIN_EXE_zi"), &agent, &cwd.path)
        .no_session()
        .model("mock/m1")
        .timeout(WAIT);
    for (name, value) in env {
        command = command.env(name, value);
    }
    let mut p = command.spawn_rpc().await;
    for (id, tool, args) in steps {
        mock.push(Step::tool_call(id, tool, args.clone()));
    }
    mock.push(Step::text("done"));
    p.prompt("p", "use the servers").await;
    p.event("agent_settled").await;
    let ends = p
        .events()
        .into_iter()
        .filter(|e| e["type"] == "tool_execution_end")
        .collect();
    let offered = mock.requests().last().unwrap().body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["function"]["name"].as_str().map(str::to_string))
        .collect();
    // Still serving after all of it.
    let state = p.request_ok("s", "session.get_state", None).await;
    assert_eq!(state["activity"]["type"], "idle", "{state}");
    let exited = p.exit_by_eof().await;
    Run {
        ends,
        offered,
        stderr: exited.stderr,
    }
}

fn call(server: &str, tool: &str) -> Value {
    json!({"server": server, "tool": tool, "arguments": {}})
}

/// Issue 23 C10: a tool with a hostile schema (nested 300 levels, or `null`) is refused on its
/// own, naming it — over HTTP (catalog mode) and stdio (direct mode) — while its server's other
/// tools work.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hostile_schema_fails_its_tool_not_the_server() {
    let (_hostile, url) = hostile_server_with(&["--hostile-tools"]).await;
    // Both required: `ready` waits for them, so the first `mcp_status` sees them ready (servers
    // that are not required connect in the background and may still be `connecting` under load).
    let run = run_calls(
        json!({
            "h": {"type": "streamable-http", "url": url, "required": true},
            "s": {"command": ["python3", HOSTILE, "stdio", "--hostile-tools"], "tools": "direct",
                  "required": true},
        }),
        &[],
        &[
            ("status", "mcp_status", json!({})),
            ("ok", "mcp_call", call("h", "ok")),
            ("deep", "mcp_call", call("h", "deep")),
            ("null", "mcp_call", call("h", "null_schema")),
            ("direct", "mcp__s__ok", json!({})),
        ],
    )
    .await;
    let deep = "its input schema nests deeper than 64 levels";
    let null_schema = "its inputSchema is null, not an object";
    for name in ["h", "s"] {
        let entry = run.status_of("status", name);
        assert_eq!(entry["state"], "ready", "{entry}");
        assert_eq!(entry["toolCount"], 8, "{entry}");
        assert_eq!(
            entry["refusedTools"],
            json!([{"name": "deep", "reason": deep}, {"name": "null_schema", "reason": null_schema}]),
            "{entry}"
        );
    }
    assert_eq!(run.ok("ok"), "fine");
    assert_eq!(run.ok("direct"), "fine");
    assert_eq!(
        run.failed("deep"),
        format!("MCP tool deep on server h is not offered: {deep}")
    );
    assert_eq!(
        run.failed("null"),
        format!("MCP tool null_schema on server h is not offered: {null_schema}")
    );
    // The direct server offers its readable tools only.
    let offered = &run.offered;
    assert!(offered.contains(&"mcp__s__ok".to_string()), "{offered:?}");
    assert!(
        !offered
            .iter()
            .any(|name| name == "mcp__s__deep" || name == "mcp__s__null_schema"),
        "{offered:?}"
    );
    for line in [
        format!("Warning: MCP server \"h\": tool deep is not offered: {deep}"),
        format!("Warning: MCP server \"s\": tool null_schema is not offered: {null_schema}"),
    ] {
        assert!(run.stderr.contains(&line), "{line}\n{}", run.stderr);
    }
    run.assert_no_type_names();
}

/// Issue 23 C10: HTTP failures read `MCP server h: HTTP 500 from http://…` — a failed call and
/// a server whose `initialize` fails — with no Rust type name in any text; the next call works.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_http_failures_read_as_status_and_url() {
    let (_server, url) = hostile_server().await;
    let (_down, down_url) = hostile_server_with(&["--fail-initialize"]).await;
    let run = run_calls(
        json!({
            "h": {"type": "streamable-http", "url": url},
            "down": {"type": "streamable-http", "url": format!("{down_url}?token=t0ps3cret")},
        }),
        &[],
        &[
            ("status", "mcp_status", json!({})),
            ("http500", "mcp_call", call("h", "http_500")),
            ("after", "mcp_call", call("h", "ok")),
            ("down", "mcp_call", call("down", "ok")),
        ],
    )
    .await;
    let http_down = format!("HTTP 500 from {down_url}");
    let down = run.status_of("status", "down");
    assert_eq!(down["state"], "failed", "{down}");
    assert_eq!(down["error"], http_down, "{down}");
    assert_eq!(
        run.failed("http500"),
        format!(
            "MCP server h: HTTP 500 from {url} during the call to http_500; the call was not retried"
        )
    );
    assert_eq!(run.ok("after"), "fine");
    let text = run.failed("down");
    assert!(text.contains(&http_down), "{text}");
    let line = format!("Warning: MCP server \"down\" failed to start: {http_down}");
    assert!(run.stderr.contains(&line), "{line}\n{}", run.stderr);
    assert!(!format!("{:?}{}", run.ends, run.stderr).contains("t0ps3cret"));
    run.assert_no_type_names();
}
