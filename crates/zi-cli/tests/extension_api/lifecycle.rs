//! Generations and shutdown: reload, `command.list` without extensions, bounded `session_shutdown`.

use super::*;

const GENERATION_ONE: &str = r#"
zi.on("session_start", function(event) zi.append_entry("example.lifecycle", { gen = 1, start = event.reason }) end)
zi.on("session_shutdown", function(event) zi.append_entry("example.lifecycle", { gen = 1, shutdown = event.reason }) end)
zi.register_command{ name = "hello", description = "greets", execute = function()
  zi.append_entry("example.state", { n = 1 })
  return "v1"
end }
zi.register_command{ name = "lifecycle", description = "lists lifecycle entries", execute = function()
  local seen = {}
  for _, e in ipairs(zi.get_entries("example.lifecycle")) do
    seen[#seen + 1] = e.data.gen .. ":" .. (e.data.start and ("start=" .. e.data.start) or ("shutdown=" .. e.data.shutdown))
  end
  return table.concat(seen, ",")
end }
zi.register_tool{ name = "greet", description = "greets", parameters = { type = "object", properties = {} },
  execute = function() return "v1" end }
"#;

const GENERATION_TWO: &str = r#"
zi.on("session_start", function(event) zi.append_entry("example.lifecycle", { gen = 2, start = event.reason }) end)
zi.register_command{ name = "hello", description = "greets again", execute = function() return "v2" end }
zi.register_command{ name = "count", description = "counts saved state", execute = function()
  return tostring(#zi.get_entries("example.state"))
end }
zi.register_command{ name = "lifecycle", description = "lists lifecycle entries", execute = function()
  local seen = {}
  for _, e in ipairs(zi.get_entries("example.lifecycle")) do
    seen[#seen + 1] = e.data.gen .. ":" .. (e.data.start and ("start=" .. e.data.start) or ("shutdown=" .. e.data.shutdown))
  end
  return table.concat(seen, ",")
end }
zi.register_tool{ name = "greet_again", description = "greets", parameters = { type = "object", properties = {} },
  execute = function() return "v2" end }
"#;

/// Lifecycle handlers are observational: polls (generously) until the journal holds `expected`.
async fn wait_for_lifecycle(p: &mut Harness, expected: &str) {
    let mut last = Value::Null;
    for i in 0..300 {
        last = invoke(p, &format!("w{i}"), "lifecycle", "").await;
        if last["result"]["message"] == expected {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("lifecycle entries: {last}");
}

#[tokio::test]
async fn reload_replaces_the_generation_and_a_broken_one_keeps_the_previous() {
    let (mock, agent, cwd) = scene().await;
    let path = script(&cwd.path, "gen.lua", GENERATION_ONE);
    let mut p = spawn(&agent, &cwd.path, &["--no-session", "--extension", &path]).await;
    let list = p.request_ok("l1", "command.list", None).await;
    assert_eq!(
        list,
        json!({"commands": [
            {"name": "hello", "description": "greets", "extensionId": "gen"},
            {"name": "lifecycle", "description": "lists lifecycle entries", "extensionId": "gen"},
            {"name": "reload", "description": "Reload every extension without restarting the session", "extensionId": "zi"},
        ]})
    );
    assert_eq!(
        invoke(&mut p, "h1", "hello", "").await["result"]["message"],
        "v1"
    );
    wait_for_lifecycle(&mut p, "1:start=startup").await;

    // A broken new generation is reported; the previous one keeps serving.
    std::fs::write(&path, "zi.register_command{ name = \n").unwrap();
    let refused = invoke(&mut p, "r1", "reload", "").await;
    assert_eq!(refused["error"]["code"], "operation_failed", "{refused}");
    let message = refused["error"]["message"].as_str().unwrap();
    assert!(
        message.starts_with(&format!(
            "Reload failed; the previous extensions stay loaded:\nExtension {path} failed to load: {path}:2:"
        )),
        "{message}"
    );
    assert_eq!(p.request_ok("l2", "command.list", None).await, list);
    assert_eq!(
        invoke(&mut p, "h2", "hello", "").await["result"]["message"],
        "v1"
    );

    std::fs::write(&path, GENERATION_TWO).unwrap();
    let reloaded = invoke(&mut p, "r2", "reload", "").await;
    assert_eq!(
        reloaded["result"],
        json!({"message": "Reloaded 1 extension"}),
        "{reloaded}"
    );
    let names: Vec<Value> = p.request_ok("l3", "command.list", None).await["commands"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].clone())
        .collect();
    assert_eq!(names, ["hello", "count", "lifecycle", "reload"]);
    assert_eq!(
        invoke(&mut p, "h3", "hello", "").await["result"]["message"],
        "v2"
    );
    // Custom entries written by the previous generation are there for the new one.
    assert_eq!(
        invoke(&mut p, "c", "count", "").await["result"]["message"],
        "2"
    );
    wait_for_lifecycle(&mut p, "1:start=startup,1:shutdown=reload,2:start=reload").await;
    // The tool set follows the generation.
    mock.push(Step::tool_call("t1", "greet", json!({})));
    mock.push(Step::tool_call("t2", "greet_again", json!({})));
    mock.push(Step::text("done"));
    p.prompt("p", "greet").await;
    p.event("agent_settled").await;
    let ends = events_of(&p, "tool_execution_end");
    assert_eq!(
        ends[0]["result"]["content"][0]["text"],
        "Tool greet not found"
    );
    assert_eq!(ends[1]["result"]["content"][0]["text"], "v2");
    let offered_now = offered(&mock.requests()[0].body);
    assert!(
        offered_now.contains(&"greet_again".to_string()),
        "{offered_now:?}"
    );
    assert!(
        !offered_now.contains(&"greet".to_string()),
        "{offered_now:?}"
    );
    p.exit_by_eof().await;
}

#[tokio::test]
async fn without_extensions_command_list_has_no_reload() {
    let (_mock, agent, cwd) = scene().await;
    let mut p = spawn(&agent, &cwd.path, &["--no-session"]).await;
    assert_eq!(
        p.request_ok("l", "command.list", None).await,
        json!({"commands": []})
    );
    let missing = invoke(&mut p, "r", "reload", "").await;
    assert_eq!(
        missing["error"],
        json!({"code": "not_found", "message": "Command not found: reload"})
    );
    p.exit_by_eof().await;
}

/// A `session_shutdown` handler that records its reason, then never returns.
const STUCK_SHUTDOWN: &str = r#"
zi.on("session_shutdown", function(event, ctx)
  local file = assert(io.open(ctx.cwd .. "/shutdown.txt", "w"))
  file:write(event.reason)
  file:close()
  while true do end
end)
"#;

fn shutdown_reason(cwd: &Path) -> String {
    std::fs::read_to_string(cwd.join("shutdown.txt")).unwrap_or_default()
}

#[tokio::test]
async fn session_shutdown_runs_bounded_on_every_exit_path() {
    let mock = start_mock().await;
    let agent = agent_with(&mock);
    // EOF in rpc mode.
    let cwd = temp_cwd();
    let stuck = script(&cwd.path, "stuck.lua", STUCK_SHUTDOWN);
    let mut p = spawn(&agent, &cwd.path, &["--no-session", "--extension", &stuck]).await;
    p.exit_by_eof().await;
    assert_eq!(shutdown_reason(&cwd.path), "quit");

    // A signal in rpc mode: the handler still runs, the process still exits with the signal's code.
    let cwd = temp_cwd();
    let stuck = script(&cwd.path, "stuck.lua", STUCK_SHUTDOWN);
    let mut p = spawn(&agent, &cwd.path, &["--no-session", "--extension", &stuck]).await;
    p.request_ok("s", "session.get_state", None).await;
    p.signal(libc::SIGTERM);
    let exited = p.wait_exit(WAIT).await;
    assert_eq!(exited.code, Some(128 + libc::SIGTERM), "{}", exited.stderr);
    assert_eq!(shutdown_reason(&cwd.path), "quit");

    // The end of a one-shot text run.
    let cwd = temp_cwd();
    let stuck = script(&cwd.path, "stuck.lua", STUCK_SHUTDOWN);
    mock.push(Step::text("the answer"));
    let finished = ZiCommand::new(env!("CARGO_BIN_EXE_zi"))
        .args(["-p", "--model", "mock/m1", "--no-session"])
        .agent_dir(&agent)
        .arg("--cwd")
        .arg(&cwd.path)
        .args(["--extension", &stuck, "question"])
        .current_dir(&cwd.path)
        .run_to_end(b"", WAIT)
        .await
        .unwrap();
    assert_eq!(finished.code, Some(0), "{}", finished.stderr_text());
    assert_eq!(finished.stdout_text().trim(), "the answer");
    assert_eq!(shutdown_reason(&cwd.path), "quit");
}
