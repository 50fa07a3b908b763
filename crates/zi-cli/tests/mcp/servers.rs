//! MCP servers' lives: start-up failures, secrets, their end with zi (EOF, SIGTERM, SIGKILL),
//! bounds, and no spawn before `ready`.

use super::*;

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
    let status = p.tool_end("st")["result"]["details"].clone();
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
    assert_eq!(result_texts(&p.tool_end("w1")), "authorized");
    assert_eq!(result_texts(&p.tool_end("w2")), "echo: over http");
    // The server received the value; zi scrubbed it from the result.
    assert_eq!(result_texts(&p.tool_end("v1")), "<secret>");
    let exited = p.exit_by_eof().await;
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

/// A zi with the stdio server `local`, which started a process of its own (`spawn_child`): the
/// running zi, its directories and the grandchild's pid.
async fn with_a_grandchild(mock: &MockLlm) -> (Harness, Dirs, u32) {
    let (mut p, dirs) = stdio_zi(mock, "local", json!({})).await;
    run_calls(
        &mut p,
        mock,
        "p1",
        &[(
            "k1",
            "mcp_call",
            json!({"server": "local", "tool": "spawn_child", "arguments": {}}),
        )],
    )
    .await;
    let grandchild: u32 = result_texts(&p.tool_end("k1")).parse().expect("pid");
    (p, dirs, grandchild)
}

#[tokio::test]
async fn stdio_servers_and_their_descendants_end_with_zi_on_eof_and_sigterm() {
    for how in ["eof", "sigterm"] {
        let mock = start_mock().await;
        let (mut p, _dirs, grandchild) = with_a_grandchild(&mock).await;
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
    let (mut p, _dirs, grandchild) = with_a_grandchild(&mock).await;
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
    assert!(result_texts(&p.tool_end("s1")).contains("Servers not searched: many (failed)"));
    let status = p.tool_end("st")["result"]["details"].clone();
    let many = status["servers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "many")
        .unwrap()
        .clone();
    assert_eq!(many["state"], "failed", "{status}");
    assert_eq!(many["error"], "the server lists more than 256 tools");
    let arguments = p.tool_end("a1");
    assert_eq!(arguments["isError"], json!(true));
    assert!(
        result_texts(&arguments).starts_with("The arguments for MCP tool echo are ")
            && result_texts(&arguments).ends_with(" bytes, over the 256 KiB bound"),
        "{}",
        result_texts(&arguments)
    );
    // Text and its structured copy count together.
    let result = result_texts(&p.tool_end("r1"));
    assert!(
        result.starts_with("The result of MCP tool big on server local is ")
            && result.ends_with(" bytes, over the 256 KiB bound"),
        "{result}"
    );
    let fits = p.tool_end("r2");
    assert_eq!(fits["isError"], json!(false));
    assert_eq!(result_texts(&fits).len(), 100 * 1024);
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
