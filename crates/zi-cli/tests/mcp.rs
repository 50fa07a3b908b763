//! Black-box tests of MCP tools (docs/mcp.md) against real servers built with the official
//! Python SDK (`tests/fixtures/mcp/server.py`, in the virtual environment that
//! `scripts/mcp-test-venv.sh` provisions): discovery through the catalog, direct tools,
//! scripted calls end to end, error results, interruption, `list_changed`, a crash mid-call,
//! required servers, secrets and orphans.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use zi_test_support::dirs::{AgentDir, all_files, temp_cwd};
use zi_test_support::harness::Harness;
use zi_test_support::mcp::{HttpServer, stdio_command};
use zi_test_support::mock_llm::{MockLlm, Step, start_mock};
use zi_test_support::process::{process_exists, wait_until_gone};
use zi_test_support::zi_command::ZiCommand;

const ZI: &str = env!("CARGO_BIN_EXE_zi");
/// Python servers take seconds to import under load; every wait is generous.
const WAIT: Duration = Duration::from_secs(120);
const KEY: &str = "test-key-abc";

fn agent(mock: &MockLlm, servers: Value) -> AgentDir {
    AgentDir::new()
        .models(mock, KEY, &[json!({"id": "m1"})])
        .settings(&json!({ "mcpServers": servers }).to_string())
}

fn command(agent: &AgentDir, cwd: &Path) -> ZiCommand {
    ZiCommand::rpc(ZI, agent, cwd)
        .no_session()
        .model("mock/m1")
        .timeout(WAIT)
}

/// A zi with one stdio server `name` (extra definition fields merged in), and the server's
/// marker directory. The temporary directories live as long as the returned value.
struct Dirs {
    markers: zi_test_support::dirs::TempCwd,
    _cwd: zi_test_support::dirs::TempCwd,
    _agent: AgentDir,
}

async fn stdio_zi(mock: &MockLlm, name: &str, extra: Value) -> (Harness, Dirs) {
    let markers = temp_cwd();
    let mut definition = json!({"command": stdio_command(&markers.path)});
    for (key, value) in extra.as_object().into_iter().flatten() {
        definition[key] = value.clone();
    }
    let agent = agent(mock, json!({ name: definition }));
    let cwd = temp_cwd();
    let p = command(&agent, &cwd.path).spawn_rpc().await;
    let dirs = Dirs {
        markers,
        _cwd: cwd,
        _agent: agent,
    };
    (p, dirs)
}

/// One prompt whose run makes the scripted tool calls, one per turn, then answers "done".
async fn run_calls(p: &mut Harness, mock: &MockLlm, id: &str, calls: &[(&str, &str, Value)]) {
    for (call_id, name, args) in calls {
        mock.push(Step::tool_call(call_id, name, args.clone()));
    }
    mock.push(Step::text("done"));
    let response = p
        .request(
            id,
            "session.prompt",
            Some(json!({"delivery": "direct", "text": "use the tools"})),
        )
        .await;
    assert_eq!(response["ok"], json!(true), "{response}");
    p.wait_for("agent_settled", |f| {
        f["type"] == "session_event" && f["event"]["type"] == "agent_settled"
    })
    .await;
}

/// The `tool_execution_end` event of one call.
fn end_of(p: &Harness, call_id: &str) -> Value {
    p.events()
        .into_iter()
        .find(|e| e["type"] == "tool_execution_end" && e["toolCallId"] == call_id)
        .unwrap_or_else(|| panic!("tool_execution_end of {call_id}"))
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

/// The tool names the model was offered in the latest provider request.
fn offered_tools(mock: &MockLlm) -> Vec<String> {
    let requests = mock.requests();
    offered_in(&requests.last().expect("a provider request").body)
}

/// The tool names a recorded (chat-completions) provider request offers.
fn offered_in(body: &Value) -> Vec<String> {
    body["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["function"]["name"].as_str().map(str::to_string))
        .collect()
}

/// Asks `mcp_status` until every server is ready (connection happens in the background).
async fn wait_ready(p: &mut Harness, mock: &MockLlm) -> Value {
    let deadline = Instant::now() + WAIT;
    for attempt in 0.. {
        let call = format!("status-{attempt}");
        run_calls(
            p,
            mock,
            &format!("status-p{attempt}"),
            &[(&call, "mcp_status", json!({}))],
        )
        .await;
        let status = end_of(p, &call)["result"]["details"].clone();
        let servers = status["servers"].as_array().expect("servers").clone();
        if servers.iter().all(|s| s["state"] == "ready") {
            return status;
        }
        assert!(
            servers.iter().all(|s| s["state"] != "failed"),
            "a server failed: {status}"
        );
        assert!(Instant::now() < deadline, "servers ready in time: {status}");
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    unreachable!()
}

#[tokio::test]
async fn catalog_mode_discovers_describes_and_calls_stdio_tools_end_to_end() {
    let mock = start_mock().await;
    let (mut p, _dirs) = stdio_zi(&mock, "local", json!({})).await;
    run_calls(
        &mut p,
        &mock,
        "p1",
        &[
            ("s1", "mcp_search", json!({"query": "echo"})),
            (
                "d1",
                "mcp_describe",
                json!({"server": "local", "tool": "add"}),
            ),
            (
                "c1",
                "mcp_call",
                json!({"server": "local", "tool": "echo", "arguments": {"text": "hi"}}),
            ),
            (
                "c2",
                "mcp_call",
                json!({"server": "local", "tool": "add", "arguments": {"a": 2, "b": 3}}),
            ),
            (
                "c3",
                "mcp_call",
                json!({"server": "local", "tool": "fail", "arguments": {"message": "boom"}}),
            ),
            (
                "c4",
                "mcp_call",
                json!({"server": "local", "tool": "nope", "arguments": {}}),
            ),
            (
                "c5",
                "mcp_call",
                json!({"server": "elsewhere", "tool": "echo"}),
            ),
        ],
    )
    .await;
    // The model sees the four catalog tools, never the server's own tools.
    let offered = offered_tools(&mock);
    for tool in ["mcp_search", "mcp_describe", "mcp_call", "mcp_status"] {
        assert!(
            offered.contains(&tool.to_string()),
            "{tool} offered: {offered:?}"
        );
    }
    assert!(
        !offered.iter().any(|t| t.starts_with("mcp__")),
        "{offered:?}"
    );

    let search = end_of(&p, "s1");
    assert_eq!(search["isError"], json!(false));
    assert!(
        text_of(&search).contains("local/echo: Echo the text back."),
        "{search}"
    );
    let describe = text_of(&end_of(&p, "d1"));
    let described: Value = serde_json::from_str(&describe).expect("describe is JSON");
    assert_eq!(
        described["inputSchema"]["required"],
        json!(["a", "b"]),
        "{describe}"
    );
    let echo = end_of(&p, "c1");
    assert_eq!(echo["isError"], json!(false));
    assert_eq!(text_of(&echo), "echo: hi");
    let add = end_of(&p, "c2");
    assert_eq!(text_of(&add), "5");
    assert_eq!(
        add["result"]["details"]["structuredContent"],
        json!({"result": 5})
    );
    let fail = end_of(&p, "c3");
    assert_eq!(fail["isError"], json!(true));
    assert!(text_of(&fail).contains("boom"), "{fail}");
    let missing = end_of(&p, "c4");
    assert_eq!(missing["isError"], json!(true));
    assert_eq!(
        text_of(&missing),
        "MCP server local has no tool nope (mcp_search lists the tools)"
    );
    let unknown = end_of(&p, "c5");
    assert_eq!(
        text_of(&unknown),
        "Unknown MCP server: elsewhere. Configured servers: local"
    );
    // The model got the results: the last request carries the error text of c3.
    let last = mock.requests().last().unwrap().body.to_string();
    assert!(last.contains("boom"), "results reach the model");
}

#[tokio::test]
async fn direct_mode_exposes_prefixed_tools_and_follows_list_changed() {
    let mock = start_mock().await;
    let (mut p, _dirs) = stdio_zi(&mock, "dsrv", json!({"tools": "direct"})).await;
    wait_ready(&mut p, &mock).await;
    run_calls(
        &mut p,
        &mock,
        "p1",
        &[
            ("e1", "mcp__dsrv__echo", json!({"text": "direct"})),
            ("e2", "mcp__dsrv__add", json!({"a": "not a number"})),
            ("l1", "mcp__dsrv__add_late_tool", json!({})),
        ],
    )
    .await;
    let offered = offered_tools(&mock);
    assert!(
        offered.contains(&"mcp__dsrv__echo".to_string()),
        "{offered:?}"
    );
    assert!(
        offered.contains(&"mcp__dsrv__slow".to_string()),
        "{offered:?}"
    );
    assert_eq!(text_of(&end_of(&p, "e1")), "echo: direct");
    // The server's input schema is the tool's schema: zi validates before calling.
    let invalid = end_of(&p, "e2");
    assert_eq!(invalid["isError"], json!(true));
    assert!(
        text_of(&invalid).starts_with("Validation failed for tool \"mcp__dsrv__add\""),
        "{invalid}"
    );
    assert_eq!(text_of(&end_of(&p, "l1")), "added");
    // notifications/tools/list_changed refreshes the set in the background.
    let deadline = Instant::now() + WAIT;
    for attempt in 0.. {
        let call = format!("late-{attempt}");
        run_calls(
            &mut p,
            &mock,
            &format!("late-p{attempt}"),
            &[(&call, "mcp__dsrv__late", json!({}))],
        )
        .await;
        let end = end_of(&p, &call);
        if end["isError"] == json!(false) {
            assert_eq!(text_of(&end), "late tool ran");
            break;
        }
        assert_eq!(text_of(&end), "Tool mcp__dsrv__late not found");
        assert!(Instant::now() < deadline, "the late tool appears");
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    assert!(offered_tools(&mock).contains(&"mcp__dsrv__late".to_string()));
}

#[tokio::test]
async fn interrupting_a_slow_call_sends_cancelled_after_progress_updates() {
    let mock = start_mock().await;
    let (mut p, dirs) = stdio_zi(&mock, "local", json!({})).await;
    mock.push(Step::tool_call(
        "slow1",
        "mcp_call",
        json!({"server": "local", "tool": "slow", "arguments": {"seconds": 600}}),
    ));
    mock.push(Step::text("never"));
    let response = p
        .request(
            "p1",
            "session.prompt",
            Some(json!({"delivery": "direct", "text": "wait"})),
        )
        .await;
    assert_eq!(response["ok"], json!(true), "{response}");
    // Progress notifications become tool_execution_update events.
    let update = p.event("tool_execution_update").await;
    assert_eq!(update["toolCallId"], "slow1");
    assert_eq!(update["partialResult"]["total"], json!(10.0));
    assert!(
        update["partialResult"]["message"]
            .as_str()
            .unwrap()
            .starts_with("step ")
    );
    let response = p.request("i1", "session.interrupt", None).await;
    assert_eq!(response["ok"], json!(true), "{response}");
    p.event("agent_settled").await;
    let end = end_of(&p, "slow1");
    assert_eq!(end["isError"], json!(true));
    assert_eq!(text_of(&end), "Tool execution was aborted");
    // The server saw notifications/cancelled: its handler was cancelled.
    let marker = dirs.markers.path.join("cancelled");
    let deadline = Instant::now() + WAIT;
    while !marker.exists() {
        assert!(
            Instant::now() < deadline,
            "the server records the cancellation"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn a_server_that_crashes_mid_call_gives_an_error_and_the_next_call_reconnects() {
    let mock = start_mock().await;
    let (mut p, _dirs) = stdio_zi(&mock, "local", json!({})).await;
    run_calls(
        &mut p,
        &mock,
        "p1",
        &[
            (
                "x1",
                "mcp_call",
                json!({"server": "local", "tool": "crash", "arguments": {}}),
            ),
            (
                "x2",
                "mcp_call",
                json!({"server": "local", "tool": "echo", "arguments": {"text": "again"}}),
            ),
        ],
    )
    .await;
    let crashed = end_of(&p, "x1");
    assert_eq!(crashed["isError"], json!(true));
    assert!(
        text_of(&crashed)
            .starts_with("MCP server local lost the connection during the call to crash"),
        "{crashed}"
    );
    assert!(
        text_of(&crashed).ends_with("the call was not retried"),
        "{crashed}"
    );
    let again = end_of(&p, "x2");
    assert_eq!(again["isError"], json!(false), "{again}");
    assert_eq!(text_of(&again), "echo: again");
}

#[tokio::test]
async fn a_required_server_that_cannot_start_fails_startup_and_others_only_warn() {
    let mock = start_mock().await;
    let cwd = temp_cwd();
    let missing = cwd.path.join("no-such-server");
    let required = agent(
        &mock,
        json!({"must": {"command": [missing.display().to_string()], "required": true}}),
    );
    let finished = command(&required, &cwd.path)
        .run_to_end(b"", WAIT)
        .await
        .expect("zi runs");
    assert_eq!(finished.code, Some(1));
    let stderr = String::from_utf8_lossy(&finished.stderr);
    assert!(
        stderr.contains("MCP server \"must\" is required but failed to start: cannot start"),
        "{stderr}"
    );
    assert!(
        finished.stdout.is_empty(),
        "no ready frame: {:?}",
        finished.stdout_text()
    );

    // Not required: ready comes at once, a Warning: line and mcp_status tell the failure.
    let optional = agent(
        &mock,
        json!({"maybe": {"command": [missing.display().to_string()]},
               "bad": {"url": "https://user:pw@example.com/mcp"}}),
    );
    let mut p = command(&optional, &cwd.path).spawn_rpc().await;
    let deadline = Instant::now() + WAIT;
    while !p
        .stderr_text()
        .contains("Warning: MCP server \"maybe\" failed to start: cannot start")
    {
        assert!(Instant::now() < deadline, "warning: {}", p.stderr_text());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        p.stderr_text().contains(
            "Warning: (mcp) server \"bad\" is ignored: url must not contain credentials; use headers or headerEnvironment"
        ),
        "{}",
        p.stderr_text()
    );
    run_calls(&mut p, &mock, "p1", &[("st", "mcp_status", json!({}))]).await;
    let status = end_of(&p, "st")["result"]["details"].clone();
    assert_eq!(status["servers"][0]["name"], "maybe");
    assert_eq!(status["servers"][0]["state"], "failed");
    assert!(
        status["servers"][0]["error"]
            .as_str()
            .unwrap()
            .starts_with("cannot start")
    );
    assert_eq!(status["servers"].as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn secrets_from_the_environment_reach_servers_and_no_byte_zi_writes() {
    const HEADER_SECRET: &str = "Bearer hdr-s3cret-7f3a9c";
    const ENV_SECRET: &str = "env-s3cret-91b2d4";
    let mock = start_mock().await;
    let markers = temp_cwd();
    let http = HttpServer::start(&markers.path, HEADER_SECRET).await;
    let agent = agent(
        &mock,
        json!({
            "web": {"type": "streamable-http", "url": http.url,
                    "headerEnvironment": {"Authorization": "MCP_TEST_AUTH"}},
            "local": {"command": stdio_command(&markers.path), "environmentFrom": ["MCP_TEST_TOKEN"]},
        }),
    );
    let cwd = temp_cwd();
    // With a session journal, so the journal is scanned too.
    let mut p = ZiCommand::rpc(ZI, &agent, &cwd.path)
        .model("mock/m1")
        .timeout(WAIT)
        .env("MCP_TEST_AUTH", HEADER_SECRET)
        .env("MCP_TEST_TOKEN", ENV_SECRET)
        .spawn_rpc()
        .await;
    run_calls(
        &mut p,
        &mock,
        "p1",
        &[
            ("w1", "mcp_call", json!({"server": "web", "tool": "whoami", "arguments": {}})),
            ("w2", "mcp_call", json!({"server": "web", "tool": "echo", "arguments": {"text": "over http"}})),
            ("v1", "mcp_call", json!({"server": "local", "tool": "environment", "arguments": {"name": "MCP_TEST_TOKEN"}})),
            ("st", "mcp_status", json!({})),
        ],
    )
    .await;
    assert_eq!(text_of(&end_of(&p, "w1")), "authorized");
    assert_eq!(text_of(&end_of(&p, "w2")), "echo: over http");
    // The server received the value; zi scrubbed it from the result.
    assert_eq!(text_of(&end_of(&p, "v1")), "<secret>");
    p.close_stdin().await;
    let exited = p.wait_exit(WAIT).await;
    assert_eq!(exited.code, Some(0), "{}", exited.stderr);
    let mut written: Vec<String> = p.frames().iter().map(Value::to_string).collect();
    written.push(exited.stderr.clone());
    for file in all_files(agent.path()) {
        written.push(String::from_utf8_lossy(&std::fs::read(&file).unwrap()).into_owned());
    }
    // Provider requests carry what the model saw (results).
    for request in mock.requests() {
        written.push(request.body.to_string());
    }
    for secret in [HEADER_SECRET, "hdr-s3cret-7f3a9c", ENV_SECRET] {
        assert!(
            !written.iter().any(|w| w.contains(secret)),
            "{secret} appears in zi's output"
        );
    }
    assert!(
        agent.path().join("sessions").exists(),
        "a journal was written and scanned"
    );
}

#[tokio::test]
async fn stdio_servers_and_their_descendants_end_with_zi_on_eof_and_sigterm() {
    for how in ["eof", "sigterm"] {
        let mock = start_mock().await;
        let (mut p, _dirs) = stdio_zi(&mock, "local", json!({})).await;
        run_calls(
            &mut p,
            &mock,
            "p1",
            &[(
                "k1",
                "mcp_call",
                json!({"server": "local", "tool": "spawn_child", "arguments": {}}),
            )],
        )
        .await;
        let grandchild: u32 = text_of(&end_of(&p, "k1")).parse().expect("pid");
        assert!(process_exists(grandchild));
        match how {
            "eof" => p.close_stdin().await,
            _ => p.signal(libc::SIGTERM),
        }
        p.wait_exit(WAIT).await;
        let left = wait_until_gone(&[grandchild], WAIT).await;
        assert!(
            left.is_empty(),
            "{how}: the server's child {grandchild} outlived zi"
        );
    }
}

/// Issue 23 C5: after a SIGKILL of zi, a stdio server busy in a call and the process it started
/// end too (the parent-death signal and the sentinel, docs/cli.md#processes-zi-starts).
#[tokio::test]
async fn a_busy_stdio_server_and_its_descendants_end_after_zi_is_sigkilled() {
    let mock = start_mock().await;
    let (mut p, _dirs) = stdio_zi(&mock, "local", json!({})).await;
    run_calls(
        &mut p,
        &mock,
        "p1",
        &[(
            "k1",
            "mcp_call",
            json!({"server": "local", "tool": "spawn_child", "arguments": {}}),
        )],
    )
    .await;
    let grandchild: u32 = text_of(&end_of(&p, "k1")).parse().expect("pid");
    mock.push(Step::tool_call(
        "slow1",
        "mcp_call",
        json!({"server": "local", "tool": "slow", "arguments": {"seconds": 600}}),
    ));
    let response = p
        .request(
            "p2",
            "session.prompt",
            Some(json!({"delivery": "direct", "text": "wait"})),
        )
        .await;
    assert_eq!(response["ok"], json!(true), "{response}");
    p.event("tool_execution_update").await;
    let processes = zi_test_support::process::descendants(p.pid());
    assert!(processes.contains(&grandchild), "{processes:?}");
    p.signal(libc::SIGKILL);
    assert_eq!(p.wait_exit(WAIT).await.signal, Some(libc::SIGKILL));
    let left = wait_until_gone(&processes, Duration::from_secs(10)).await;
    assert!(left.is_empty(), "left after zi's SIGKILL: {left:?}");
}

#[tokio::test]
async fn bounds_are_clear_errors() {
    let mock = start_mock().await;
    let markers = temp_cwd();
    let agent = agent(
        &mock,
        json!({
            "local": {"command": stdio_command(&markers.path)},
            "many": {"command": stdio_command(&markers.path),
                     "environment": {"MCP_TEST_MANY_TOOLS": "300"}},
        }),
    );
    let cwd = temp_cwd();
    let mut p = command(&agent, &cwd.path).spawn_rpc().await;
    let long_text = "y".repeat(300 * 1024);
    run_calls(
        &mut p,
        &mock,
        "p1",
        &[
            ("s1", "mcp_search", json!({"query": "many"})),
            ("st", "mcp_status", json!({})),
            (
                "a1",
                "mcp_call",
                json!({"server": "local", "tool": "echo", "arguments": {"text": long_text}}),
            ),
            (
                "r1",
                "mcp_call",
                json!({"server": "local", "tool": "big", "arguments": {"kib": 300}}),
            ),
            (
                "r2",
                "mcp_call",
                json!({"server": "local", "tool": "big", "arguments": {"kib": 100}}),
            ),
        ],
    )
    .await;
    // mcp_search waited for both first attempts; "many" broke the 256-tool bound.
    assert!(text_of(&end_of(&p, "s1")).contains("Servers not searched: many (failed)"));
    let status = end_of(&p, "st")["result"]["details"].clone();
    let many = status["servers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "many")
        .unwrap()
        .clone();
    assert_eq!(many["state"], "failed", "{status}");
    assert_eq!(many["error"], "the server lists more than 256 tools");
    let arguments = end_of(&p, "a1");
    assert_eq!(arguments["isError"], json!(true));
    assert!(
        text_of(&arguments).starts_with("The arguments for MCP tool echo are ")
            && text_of(&arguments).ends_with(" bytes, over the 256 KiB bound"),
        "{}",
        text_of(&arguments)
    );
    // Text and its structured copy count together.
    let result = text_of(&end_of(&p, "r1"));
    assert!(
        result.starts_with("The result of MCP tool big on server local is ")
            && result.ends_with(" bytes, over the 256 KiB bound"),
        "{result}"
    );
    let fits = end_of(&p, "r2");
    assert_eq!(fits["isError"], json!(false));
    assert_eq!(text_of(&fits).len(), 100 * 1024);
}

/// Fills `pipe` until a write would block, so the next writer waits until its reader reads.
/// Returns how many bytes it wrote.
fn fill_pipe(pipe: &mut std::io::PipeWriter) -> usize {
    use std::io::Write;
    use std::os::fd::AsRawFd;
    let fd = pipe.as_raw_fd();
    // SAFETY: fcntl on a descriptor this function's caller owns; no memory is passed.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    assert!(flags >= 0);
    // SAFETY: as above.
    assert!(unsafe { libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) } >= 0);
    let mut filled = 0;
    loop {
        match pipe.write(&[b'x'; 4096]) {
            Ok(n) => filled += n,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
            Err(e) => panic!("fill the pipe: {e}"),
        }
    }
    // The flag belongs to the open pipe, which zi shares: it must write blocking.
    // SAFETY: as above.
    assert!(unsafe { libc::fcntl(fd, libc::F_SETFL, flags) } >= 0);
    filled
}

/// Whether a thread of `pid` sleeps in a write to a full pipe (its kernel wait channel).
fn blocked_in_pipe_write(pid: u32) -> bool {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return false;
    };
    tasks.flatten().any(|task| {
        std::fs::read_to_string(task.path().join("wchan")).is_ok_and(|w| w.contains("pipe_write"))
    })
}

/// `ready` does not wait for server processes to be spawned: none is started before `ready` is
/// on stdout. The test holds `ready` back by giving zi a full stdout pipe: while zi's writer is
/// blocked on it, no server's command has run; once the test reads, all four start.
#[tokio::test]
async fn no_server_process_is_spawned_before_ready_is_written() {
    use std::io::{BufRead, Read};
    let cwd = temp_cwd();
    let markers = temp_cwd();
    let marker = |i: usize| markers.path.join(format!("started-{i}"));
    let servers: serde_json::Map<String, Value> = (0..4)
        .map(|i| {
            let script = "echo started > \"$0\"; exec sleep 600";
            let command = json!(["/bin/sh", "-c", script, marker(i).display().to_string()]);
            (format!("s{i}"), json!({ "command": command }))
        })
        .collect();
    let agent = AgentDir::new().settings(&json!({ "mcpServers": servers }).to_string());
    let (reader, mut writer) = std::io::pipe().expect("pipe");
    let filler = fill_pipe(&mut writer);
    let mut zi = tokio::process::Command::new(ZI)
        .args(["--mode", "rpc", "--no-session", "--agent-dir"])
        .arg(agent.path())
        .current_dir(&cwd.path)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", &cwd.path)
        .stdin(std::process::Stdio::piped())
        .stdout(writer)
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn zi");
    let pid = zi.id().expect("pid");
    let deadline = Instant::now() + WAIT;
    while !blocked_in_pipe_write(pid) {
        assert!(Instant::now() < deadline, "zi writes ready");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Servers spawned next to start-up would have run their command by now.
    tokio::time::sleep(Duration::from_secs(2)).await;
    for i in 0..4 {
        assert!(
            !marker(i).exists(),
            "server s{i} was started before ready was written"
        );
    }
    let ready = tokio::task::spawn_blocking(move || {
        let mut reader = std::io::BufReader::new(reader);
        let mut skipped = vec![0; filler];
        reader.read_exact(&mut skipped).expect("the filler");
        let mut line = String::new();
        reader.read_line(&mut line).expect("ready");
        line
    })
    .await
    .expect("read ready");
    let ready: Value = serde_json::from_str(&ready).expect("a frame");
    assert_eq!(ready["type"], "ready", "{ready}");
    for i in 0..4 {
        while !marker(i).exists() {
            assert!(Instant::now() < deadline, "server s{i} starts after ready");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    drop(zi.stdin.take());
    let status = tokio::time::timeout(WAIT, zi.wait())
        .await
        .expect("zi exits on EOF")
        .expect("wait");
    assert!(status.success(), "{status}");
}

/// The system prompt of a recorded (chat-completions) provider request.
fn system_prompt_of(body: &Value) -> String {
    body["messages"][0]["content"]
        .as_str()
        .expect("a system message")
        .to_string()
}

/// The names in a system prompt's `Available tools:` list.
fn listed_tools(prompt: &str) -> Vec<String> {
    let list = prompt
        .split_once("Available tools:\n")
        .map_or("", |(_, rest)| rest.split("\n\n").next().unwrap_or(""));
    list.lines()
        .filter_map(|line| line.strip_prefix("- ")?.split_once(':'))
        .map(|(name, _)| name.to_string())
        .collect()
}

/// Direct tools appear after start-up (their server connects in the background), and the
/// model sees them in the system prompt's tool list as well as in `tools`: every request lists
/// exactly the tools it offers, and the prompt stays byte-identical while they stay the same.
#[tokio::test]
async fn direct_tools_are_listed_in_the_system_prompt_once_their_server_is_ready() {
    let mock = start_mock().await;
    let (mut p, _dirs) = stdio_zi(&mock, "dsrv", json!({"tools": "direct"})).await;
    wait_ready(&mut p, &mock).await;
    run_calls(
        &mut p,
        &mock,
        "p1",
        &[("e1", "mcp__dsrv__echo", json!({"text": "seen"}))],
    )
    .await;
    assert_eq!(text_of(&end_of(&p, "e1")), "echo: seen");
    let requests = mock.requests();
    for request in &requests {
        let prompt = system_prompt_of(&request.body);
        assert_eq!(listed_tools(&prompt), offered_in(&request.body), "{prompt}");
    }
    // The two requests of the last prompt (the call, then the answer) offer the direct tools.
    let [.., call, answer] = requests.as_slice() else {
        panic!("two requests");
    };
    let prompt = system_prompt_of(&call.body);
    assert!(
        prompt.contains("\n- mcp__dsrv__echo: Echo the text back."),
        "{prompt}"
    );
    assert!(listed_tools(&prompt).contains(&"mcp_status".to_string()));
    assert_eq!(
        system_prompt_of(&answer.body),
        prompt,
        "unchanged tools, unchanged prompt"
    );

    // A list_changed that adds a tool adds it to the prompt's list.
    run_calls(
        &mut p,
        &mock,
        "p2",
        &[("l1", "mcp__dsrv__add_late_tool", json!({}))],
    )
    .await;
    let deadline = Instant::now() + WAIT;
    for attempt in 0.. {
        run_calls(&mut p, &mock, &format!("late-p{attempt}"), &[]).await;
        let requests = mock.requests();
        let prompt = system_prompt_of(&requests.last().expect("a request").body);
        if listed_tools(&prompt).contains(&"mcp__dsrv__late".to_string()) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the late tool is listed: {prompt}"
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}
