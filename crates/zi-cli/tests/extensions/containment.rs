//! Fault containment: coroutines stop at interrupt and deadline, output never reaches the protocol
//! stream, `ctx.exec` leaves no process.

use super::*;

// ---------------------------------------------------------------------------------------------
// Containment (issue 10.7, docs/extensions.md#fault-containment and docs/extensions.md#ctx): loops
// in coroutines are stopped by deadlines and interrupts, nothing a script or its children print
// reaches the protocol stream, and `ctx.exec` leaves no process behind.
// ---------------------------------------------------------------------------------------------

const COROUTINES: &str = r#"
zi.on("session_start", function()
  coroutine.wrap(function() while true do end end)()
end)
zi.register_command{ name = "wrap", description = "spins in coroutine.wrap", execute = function()
  coroutine.wrap(function() while true do end end)()
end }
zi.register_command{ name = "nested", description = "spins in a resumed coroutine", execute = function()
  local co = coroutine.create(function()
    local inner = coroutine.wrap(function() while true do end end)
    inner()
  end)
  while true do coroutine.resume(co) end
end }
zi.register_tool{ name = "spin", description = "spins in a coroutine", timeout_ms = 300,
  execute = function()
    while true do coroutine.resume(coroutine.create(function() while true do end end)) end
  end }
zi.register_command{ name = "ping", description = "answers", execute = function()
  return "pong"
end }
"#;

/// A loop inside a coroutine is stopped by `session.interrupt` and by the deadlines of lifecycle
/// handlers and tools, and the extension keeps serving afterwards (before the fix such a loop ran
/// outside the instruction hook: the thread spun until zi exited and the extension was disabled).
#[tokio::test]
async fn loops_inside_coroutines_stop_at_interrupt_and_deadline() {
    let (mock, agent, cwd) = scene().await;
    let script = write(&cwd.path.join("ext/coroutines.lua"), COROUTINES);
    let mut p = spawn(&agent, &cwd.path, &["--no-session", "--extension", &script]).await;

    // The session_start handler spins in coroutine.wrap; its 1 s deadline frees the thread.
    let pong = invoke(&mut p, "ping0", "ping", "").await;
    assert_eq!(pong["result"], json!({"message": "pong"}), "{pong}");

    for name in ["wrap", "nested"] {
        p.send(
            name,
            "command.invoke",
            Some(json!({"name": name, "arguments": ""})),
        )
        .await;
        wait_for_activity(&mut p, name).await;
        let started = Instant::now();
        p.send(&format!("{name}-x"), "session.interrupt", None)
            .await;
        let response = p.response(name).await;
        assert_eq!(
            response["error"],
            json!({"code": "operation_failed", "message": "Extension call was cancelled"}),
            "{response}"
        );
        // Far inside the 30 s command deadline.
        assert!(started.elapsed() < Duration::from_secs(20));
        let pong = invoke(&mut p, &format!("ping-{name}"), "ping", "").await;
        assert_eq!(pong["result"], json!({"message": "pong"}), "{pong}");
    }

    mock.push(Step::tool_call("t1", "spin", json!({})));
    mock.push(Step::text("done"));
    p.prompt("p", "spin").await;
    let end = p.event("tool_execution_end").await;
    assert_eq!(end["isError"], true, "{end}");
    assert_eq!(
        end["result"]["content"][0]["text"], "Extension tool exceeded its time limit",
        "{end}"
    );
    p.event("agent_settled").await;
    let pong = invoke(&mut p, "ping-tool", "ping", "").await;
    assert_eq!(pong["result"], json!({"message": "pong"}), "{pong}");
    p.exit_by_eof().await;
}

const PRINTERS: &str = r#"
local function all_outputs(tag)
  os.execute("echo " .. tag .. "-os-execute")
  local w = io.popen("cat", "w"); w:write(tag, "-popen-w\n"); w:close()
  local r = io.popen("echo " .. tag .. "-popen-r"); local got = r:read("a"); r:close()
  for _, path in ipairs{ "/dev/stdout", "/proc/self/fd/1" } do
    local f = io.open(path, "w")
    if f then f:write(tag, "-", path, "\n"); f:close() end
  end
  io.write(tag, "-io-write\n")
  print(tag .. "-print")
  return got
end
zi.on("session_start", function() all_outputs("start") end)
zi.register_command{ name = "print", description = "prints everywhere", execute = function()
  return all_outputs("command")
end }
zi.register_command{ name = "read", description = "reads stdin", execute = function()
  os.execute("cat > /dev/null")
  return tostring(io.read("a"))
end }
"#;

/// Lines a script or its children write to fd 1, `/dev/stdout` or `/proc/self/fd/1` go to stderr,
/// never into the protocol stream; children get no protocol input either.
#[tokio::test]
async fn lua_and_its_children_never_reach_the_protocol_stream_in_rpc_mode() {
    let (_mock, agent, cwd) = scene().await;
    let script = write(&cwd.path.join("ext/printers.lua"), PRINTERS);
    let mut p = spawn(&agent, &cwd.path, &["--no-session", "--extension", &script]).await;
    let printed = invoke(&mut p, "print", "print", "").await;
    assert_eq!(
        printed["result"],
        json!({"message": "command-popen-r\n"}),
        "{printed}"
    );
    // `cat` and `io.read` see end of input instead of swallowing the client's requests.
    let read = invoke(&mut p, "read", "read", "").await;
    assert_eq!(read["result"], json!({"message": ""}), "{read}");
    let state = p.request_ok("state", "session.get_state", None).await;
    assert_eq!(state["activity"], json!({"type": "idle"}));
    // Every line on stdout was a protocol frame (Harness panics on anything else).
    let stderr = p.exit_by_eof().await.stderr;
    for tag in ["start", "command"] {
        for what in [
            "os-execute",
            "popen-w",
            "/dev/stdout",
            "/proc/self/fd/1",
            "io-write",
            "print",
        ] {
            assert!(
                stderr.contains(&format!("{tag}-{what}\n")),
                "{tag}-{what} missing from stderr: {stderr}"
            );
        }
    }
}

/// In `--mode json` stdout carries only the JSON lines, whatever a lifecycle handler prints.
#[tokio::test]
async fn lua_and_its_children_never_reach_stdout_in_json_mode() {
    let (mock, agent, cwd) = scene().await;
    let script = write(&cwd.path.join("ext/printers.lua"), PRINTERS);
    mock.push(Step::text("answer"));
    let finished = ZiCommand::new(env!("CARGO_BIN_EXE_zi"))
        .args([
            "--mode",
            "json",
            "--model",
            "mock/m1",
            "--no-session",
            "--agent-dir",
        ])
        .arg(agent.path())
        .arg("--cwd")
        .arg(&cwd.path)
        .args(["--extension", &script, "hello"])
        .current_dir(&cwd.path)
        .run_to_end(b"", WAIT)
        .await
        .unwrap_or_else(|e| panic!("run zi: {e}"));
    assert_eq!(finished.code, Some(0), "{}", finished.stderr_text());
    let lines = finished.json_lines();
    assert!(!lines.is_empty());
    assert!(
        !finished.stdout_text().contains("start-"),
        "{}",
        finished.stdout_text()
    );
    assert!(
        finished.stderr_text().contains("start-os-execute\n"),
        "{}",
        finished.stderr_text()
    );
}

fn exec_script(pid_file: &Path) -> String {
    format!(
        r#"
zi.register_command{{ name = "background", description = "leaves a sleeper", execute = function(args, ctx)
  local r = ctx.exec{{ "sh", "-c", "sleep 100 & echo $!" }}
  return tostring(r.code) .. " " .. r.stdout
end }}
zi.register_command{{ name = "stuck", description = "runs until interrupted", execute = function(args, ctx)
  ctx.exec{{ "sh", "-c", "sleep 100 & echo $! > {pid}; sleep 100" }}
end }}
zi.register_command{{ name = "ping", description = "answers", execute = function() return "pong" end }}
"#,
        pid = pid_file.display()
    )
}

/// `ctx.exec` returns when its command exits, even though a background grandchild still holds
/// the output pipes, and kills the command's process group then and on interruption.
#[tokio::test]
async fn ctx_exec_returns_when_the_command_exits_and_leaves_no_process() {
    let (_mock, agent, cwd) = scene().await;
    let pid_file = cwd.path.join("stuck.pid");
    let script = write(&cwd.path.join("ext/exec.lua"), &exec_script(&pid_file));
    let mut p = spawn(&agent, &cwd.path, &["--no-session", "--extension", &script]).await;

    let started = Instant::now();
    let background = invoke(&mut p, "bg", "background", "").await;
    // Far inside the 30 s command deadline that bounded it before.
    assert!(started.elapsed() < Duration::from_secs(20), "{background}");
    let message = background["result"]["message"]
        .as_str()
        .unwrap_or_else(|| panic!("{background}"));
    let sleeper: u32 = message
        .strip_prefix("0 ")
        .and_then(|pid| pid.trim().parse().ok())
        .unwrap_or_else(|| panic!("unexpected result {message:?}"));
    let left = wait_until_gone(&[sleeper], WAIT).await;
    assert!(left.is_empty(), "ctx.exec left {left:?} behind");

    p.send(
        "stuck",
        "command.invoke",
        Some(json!({"name": "stuck", "arguments": ""})),
    )
    .await;
    wait_for_activity(&mut p, "stuck").await;
    let mut sleeper = None;
    for _ in 0..500 {
        if let Some(pid) = std::fs::read_to_string(&pid_file)
            .ok()
            .and_then(|t| t.trim().parse::<u32>().ok())
        {
            sleeper = Some(pid);
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let sleeper = sleeper.unwrap_or_else(|| panic!("the command never wrote its pid"));
    assert!(process_exists(sleeper));
    p.send("stuck-x", "session.interrupt", None).await;
    let response = p.response("stuck").await;
    assert_eq!(
        response["error"]["message"], "Extension call was cancelled",
        "{response}"
    );
    let left = wait_until_gone(&[sleeper], WAIT).await;
    assert!(
        left.is_empty(),
        "interrupting ctx.exec left {left:?} behind"
    );
    let pong = invoke(&mut p, "ping", "ping", "").await;
    assert_eq!(pong["result"], json!({"message": "pong"}), "{pong}");
    p.exit_by_eof().await;
}
