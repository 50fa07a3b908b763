//! Black-box tests of Lua extensions over Zi RPC v1 (docs/extensions.md,
//! docs/rpc.md#commandlist, docs/rpc.md#commandinvoke): the real binary with `--extension`, the
//! examples in `examples/extensions/`, fault containment (coroutines, stdout, `ctx.exec`
//! processes), extension tools called by the scripted model, and custom messages.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use zi_test_support::dirs::temp_cwd;
use zi_test_support::harness::Harness;
use zi_test_support::mock_llm::Step;
use zi_test_support::mock_llm::start_mock;
use zi_test_support::process::{process_exists, wait_until_gone};
use zi_test_support::zi_command::ZiCommand;

use crate::ext_support::{WAIT, agent_with, example, exit_by_eof, invoke, spawn, write};

#[tokio::test]
async fn counter_lists_invokes_and_survives_continue() {
    let mock = start_mock().await;
    let agent = agent_with(&mock);
    let cwd = temp_cwd();
    let counter = example("counter");
    let mut p = spawn(
        &agent,
        &cwd.path,
        &["--new-session", "--extension", &counter],
    )
    .await;
    let list = p.request_ok("l", "command.list", None).await;
    assert_eq!(
        list,
        json!({"commands": [{
            "name": "counter",
            "description": "Manage counter",
            "argumentHint": "[show|increment|reset]",
            "extensionId": "counter"
        }, {
            "name": "reload",
            "description": "Reload every extension without restarting the session",
            "extensionId": "zi"
        }]})
    );
    for (id, expected) in [("i1", "Counter: 1"), ("i2", "Counter: 2")] {
        let response = invoke(&mut p, id, "counter", "increment").await;
        assert_eq!(
            response["result"],
            json!({"message": expected}),
            "{response}"
        );
    }
    let missing = invoke(&mut p, "m", "missing", "").await;
    assert_eq!(
        missing["error"],
        json!({"code": "not_found", "message": "Command not found: missing"})
    );
    let failed = invoke(&mut p, "bad", "counter", "explode").await;
    assert_eq!(
        failed["error"],
        json!({"code": "operation_failed", "message": "Unknown counter action: explode"})
    );
    // Command feedback is never journaled and never becomes a message.
    let state = p.request_ok("s", "session.get_state", None).await;
    assert_eq!(state["messageCount"], 0);
    let customs: Vec<Value> = p
        .events()
        .into_iter()
        .filter(|e| e["type"] == "entry_appended")
        .map(|e| e["entry"]["data"].clone())
        .collect();
    assert_eq!(customs, [json!({"count": 1}), json!({"count": 2})]);
    exit_by_eof(p).await;

    let mut c = spawn(&agent, &cwd.path, &["-c", "--extension", &counter]).await;
    let shown = invoke(&mut c, "show", "counter", "show").await;
    assert_eq!(shown["result"], json!({"message": "Counter: 2"}), "{shown}");
    let response = invoke(&mut c, "i3", "counter", "increment").await;
    assert_eq!(response["result"], json!({"message": "Counter: 3"}));
    exit_by_eof(c).await;
}

#[tokio::test]
async fn commands_are_idle_only_and_refuse_while_a_run_is_active() {
    let mock = start_mock().await;
    let agent = agent_with(&mock);
    let cwd = temp_cwd();
    let counter = example("counter");
    let mut p = spawn(
        &agent,
        &cwd.path,
        &["--no-session", "--extension", &counter],
    )
    .await;
    mock.push(Step::Hang(vec!["partial".into()]));
    p.request_ok(
        "p",
        "session.prompt",
        Some(json!({"delivery": "direct", "text": "hi"})),
    )
    .await;
    p.event("message_update").await;
    let refused = invoke(&mut p, "c", "counter", "increment").await;
    assert_eq!(
        refused["error"],
        json!({
            "code": "operation_failed",
            "message": "Cannot run an extension command while the agent is running"
        })
    );
    p.request_ok("x", "session.interrupt", None).await;
    // Queued input blocks commands too.
    p.request_ok(
        "q",
        "session.prompt",
        Some(json!({"delivery": "follow_up", "text": "later"})),
    )
    .await;
    let queued = invoke(&mut p, "c2", "counter", "increment").await;
    assert_eq!(
        queued["error"]["message"],
        "Cannot run an extension command while queued input is pending"
    );
    exit_by_eof(p).await;
}

const RUNAWAY: &str = r#"
zi.register_command{ name = "spin", description = "loops forever", execute = function(args, ctx)
  while true do pcall(function() while true do end end) end
end }
zi.register_command{ name = "grow", description = "allocates without bound", execute = function()
  local t = {}
  for i = 1, 1e12 do t[i] = string.rep("x", 64) .. i end
end }
zi.register_command{ name = "deep", description = "recurses without end", execute = function()
  local function f(n) return f(n + 1) + 1 end
  return f(1)
end }
zi.register_command{ name = "wait", description = "runs a subprocess", execute = function(args, ctx)
  local r = ctx.exec{ "sleep", "60" }
  return "exited " .. tostring(r.code)
end }
zi.register_command{ name = "ping", description = "answers", execute = function(args, ctx)
  return "pong " .. ctx.mode .. " " .. tostring(ctx.cancelled())
end }
"#;

async fn wait_for_activity(p: &mut Harness, name: &str) {
    for n in 0..200 {
        let state = p
            .request_ok(&format!("st{n}"), "session.get_state", None)
            .await;
        if state["activity"]["type"] == "extension_command" {
            assert_eq!(
                state["activity"],
                json!({"type": "extension_command", "name": name, "phase": "executing"})
            );
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("the command never became active");
}

#[tokio::test]
async fn runaway_commands_are_contained_and_interruptible() {
    let mock = start_mock().await;
    let agent = agent_with(&mock);
    let cwd = temp_cwd();
    let script = write(&cwd.path.join("ext/runaway.lua"), RUNAWAY);
    let mut p = spawn(&agent, &cwd.path, &["--no-session", "--extension", &script]).await;

    for (id, name) in [("spin", "spin"), ("wait", "wait")] {
        p.send(
            id,
            "command.invoke",
            Some(json!({"name": name, "arguments": ""})),
        )
        .await;
        wait_for_activity(&mut p, name).await;
        let prompt = p
            .request(
                &format!("{id}-p"),
                "session.prompt",
                Some(json!({"delivery": "direct", "text": "hi"})),
            )
            .await;
        assert_eq!(
            prompt["error"]["message"],
            "Cannot prompt while an extension command is active"
        );
        let queue = p
            .request(
                &format!("{id}-q"),
                "session.prompt",
                Some(json!({"delivery": "steer", "text": "hi"})),
            )
            .await;
        assert_eq!(
            queue["error"]["message"],
            "Cannot queue input while an extension command is active"
        );
        let started = Instant::now();
        p.send(&format!("{id}-x"), "session.interrupt", None).await;
        let response = p.response(id).await;
        assert_eq!(
            response["error"],
            json!({"code": "operation_failed", "message": "Extension call was cancelled"})
        );
        p.response(&format!("{id}-x")).await;
        // Well inside the 30 s command deadline: the cancellation grace is 1 s.
        assert!(started.elapsed() < Duration::from_secs(10));
        let state = p
            .request_ok(&format!("{id}-s"), "session.get_state", None)
            .await;
        assert_eq!(state["activity"], json!({"type": "idle"}));
    }

    let grown = invoke(&mut p, "grow", "grow", "").await;
    assert_eq!(
        grown["error"]["message"],
        "Extension exceeded its memory limit"
    );
    let deep = invoke(&mut p, "deep", "deep", "").await;
    let message = deep["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("stack overflow"), "{deep}");
    // The extension still works afterwards.
    let pong = invoke(&mut p, "ping", "ping", "").await;
    assert_eq!(pong["result"], json!({"message": "pong rpc false"}));
    exit_by_eof(p).await;
}

#[tokio::test]
async fn a_broken_extension_is_reported_and_the_others_load() {
    let mock = start_mock().await;
    let agent = agent_with(&mock);
    let cwd = temp_cwd();
    let broken = write(
        &cwd.path.join("ext/broken.lua"),
        "zi.register_command{ name = \"half\", execute = function() end }\nlocal x = = 1\n",
    );
    let reserved = write(
        &cwd.path.join("ext/reserved.lua"),
        "zi.register_command{ name = \"compact\", execute = function() end }\n",
    );
    let duplicate = write(
        &cwd.path.join("ext/dup/init.lua"),
        "zi.register_command{ name = \"counter\", execute = function() end }\n",
    );
    // Discovered in the agent dir's extensions folder.
    agent.write(
        "extensions/hello.lua",
        "zi.register_command{ name = \"hello\", description = \"greets\", execute = function(args) return \"hello \" .. args end }\n",
    );
    let counter = example("counter");
    let mut p = spawn(
        &agent,
        &cwd.path,
        &[
            "--no-session",
            "--extension",
            &broken,
            "--extension",
            &counter,
            "--extension",
            &reserved,
            "--extension",
            &duplicate,
        ],
    )
    .await;
    let list = p.request_ok("l", "command.list", None).await;
    let names: Vec<&str> = list["commands"]
        .as_array()
        .map(|c| c.iter().filter_map(|c| c["name"].as_str()).collect())
        .unwrap_or_default();
    assert_eq!(names, ["counter", "hello", "reload"]);
    let hello = invoke(&mut p, "h", "hello", "world").await;
    assert_eq!(hello["result"], json!({"message": "hello world"}));
    let stderr = exit_by_eof(p).await;
    assert!(
        stderr.contains(&format!(
            "Warning: Extension {broken} failed to load: {broken}:2:"
        )),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!(
            "Warning: Extension {reserved} failed to load: {reserved}:1: Command name \"compact\" is reserved"
        )),
        "{stderr}"
    );
    assert!(
        stderr.contains("command counter is already registered by another extension"),
        "{stderr}"
    );
}

#[tokio::test]
async fn the_model_calls_a_lua_tool_and_gets_json() {
    let mock = start_mock().await;
    let agent = agent_with(&mock);
    let cwd = temp_cwd();
    let tool = example("structured.lua");
    let mut p = spawn(&agent, &cwd.path, &["--no-session", "--extension", &tool]).await;
    mock.push(Step::tool_call(
        "t1",
        "word_stats",
        json!({"text": "one two\nthree"}),
    ));
    mock.push(Step::text("done"));
    p.request_ok(
        "p",
        "session.prompt",
        Some(json!({"delivery": "direct", "text": "measure"})),
    )
    .await;
    let end = p.event("tool_execution_end").await;
    let expected = json!({"characters": 13, "lines": 2, "words": 3});
    assert_eq!(end["isError"], false, "{end}");
    assert_eq!(end["result"]["details"], expected, "{end}");
    p.event("agent_settled").await;
    let requests = mock.requests();
    let first = &requests[0].body;
    let advertised = first["tools"]
        .as_array()
        .map(|tools| tools.iter().any(|t| t["function"]["name"] == "word_stats"))
        .unwrap_or(false);
    assert!(advertised, "{first}");
    let last = &requests[requests.len() - 1].body;
    let tool_message = last["messages"]
        .as_array()
        .and_then(|m| m.iter().find(|m| m["role"] == "tool").cloned())
        .unwrap_or_default();
    let text = tool_message["content"].to_string();
    assert!(text.contains("words"), "{tool_message}");
    let parsed: Value = serde_json::from_str(
        tool_message["content"]
            .as_str()
            .or_else(|| tool_message["content"][0]["text"].as_str())
            .unwrap_or("null"),
    )
    .unwrap_or(Value::Null);
    assert_eq!(parsed, expected);
    exit_by_eof(p).await;
}

#[tokio::test]
async fn hidden_custom_messages_are_announced_but_not_paged() {
    let mock = start_mock().await;
    let agent = agent_with(&mock);
    let cwd = temp_cwd();
    let messages = example("messages.lua");
    let counter = example("counter");
    let mut p = spawn(
        &agent,
        &cwd.path,
        &[
            "--no-session",
            "--extension",
            &counter,
            "--extension",
            &messages,
        ],
    )
    .await;
    invoke(&mut p, "c", "counter", "increment").await;
    let noted = invoke(&mut p, "n", "note", "visible").await;
    assert_eq!(noted["result"], json!({"message": "Noted"}));
    // Committed when the command settles, after its response was decided.
    let state = p.request_ok("s", "session.get_state", None).await;
    assert_eq!(state["activity"], json!({"type": "idle"}));
    let appended: Vec<Value> = p
        .events()
        .into_iter()
        .filter(|e| e["type"] == "entry_appended")
        .map(|e| e["entry"]["type"].clone())
        .collect();
    assert_eq!(appended, ["custom", "custom_message", "custom_message"]);
    let ends: Vec<Value> = p
        .events()
        .into_iter()
        .filter(|e| e["type"] == "message_end")
        .map(|e| e["message"]["customType"].clone())
        .collect();
    assert_eq!(ends, ["example.visible", "example.hidden"]);
    let page = p
        .request_ok(
            "m",
            "session.get_messages",
            Some(json!({"start": 0, "limit": 10})),
        )
        .await;
    let pages: Vec<Value> = page["messages"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .map(|m| json!({"role": m["role"], "customType": m["customType"], "content": m["content"]}))
        .collect();
    assert_eq!(
        pages,
        [json!({"role": "custom", "customType": "example.visible", "content": "visible"})]
    );
    // Both enter provider context.
    mock.push(Step::text("ok"));
    p.request_ok(
        "p",
        "session.prompt",
        Some(json!({"delivery": "direct", "text": "go"})),
    )
    .await;
    p.event("agent_settled").await;
    let body = mock.requests().pop().map(|r| r.body).unwrap_or_default();
    let context = body["messages"].to_string();
    assert!(context.contains("the user noted visible"), "{context}");
    exit_by_eof(p).await;
}

const HOOKS: &str = r#"
local seen = {}
local marker = ...
zi.on("session_start", function(event, ctx)
  seen[#seen + 1] = "session_start:" .. event.reason .. ":" .. ctx.session.type
end)
zi.on("agent_start", function(event) seen[#seen + 1] = event.type end)
zi.on("agent_settled", function(event) seen[#seen + 1] = event.type end)
zi.on("session_shutdown", function(event, ctx)
  local file = assert(io.open(ctx.cwd .. "/shutdown.txt", "w"))
  file:write(event.reason)
  file:close()
end)
zi.register_command{ name = "hooks", description = "lists lifecycle events", execute = function()
  return table.concat(seen, ",")
end }
"#;

#[tokio::test]
async fn lifecycle_hooks_observe_the_session() {
    let mock = start_mock().await;
    let agent = agent_with(&mock);
    let cwd = temp_cwd();
    let script = write(&cwd.path.join("ext/hooks.lua"), HOOKS);
    let mut p = spawn(&agent, &cwd.path, &["--no-session", "--extension", &script]).await;
    mock.push(Step::text("hi"));
    p.request_ok(
        "p",
        "session.prompt",
        Some(json!({"delivery": "direct", "text": "go"})),
    )
    .await;
    p.event("agent_settled").await;
    // Handlers are observational; poll until the settled one ran.
    let mut last = Value::Null;
    for n in 0..100 {
        last = invoke(&mut p, &format!("h{n}"), "hooks", "").await;
        if last["result"]["message"]
            .as_str()
            .is_some_and(|m| m.ends_with("agent_settled"))
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        last["result"]["message"],
        "session_start:startup:memory,agent_start,agent_settled"
    );
    exit_by_eof(p).await;
    let shutdown = std::fs::read_to_string(cwd.path.join("shutdown.txt")).unwrap_or_default();
    assert_eq!(shutdown, "quit");
}

fn command_names(list: &Value) -> Vec<String> {
    list["commands"]
        .as_array()
        .map(|c| {
            c.iter()
                .filter_map(|c| c["name"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

fn command(name: &str) -> String {
    format!(
        "zi.register_command{{ name = \"{name}\", description = \"{name}\", execute = function(args, ctx) return ctx.extension_id end }}\n"
    )
}

#[tokio::test]
async fn discovery_honours_trust_and_settings() {
    let mock = start_mock().await;
    let agent = agent_with(&mock);
    let cwd = temp_cwd();
    write(
        &cwd.path.join(".zi/extensions/project.lua"),
        &command("from-project"),
    );
    write(
        &cwd.path.join(".zi/settings.json"),
        r#"{"extensions": ["local/extra.lua"]}"#,
    );
    write(
        &cwd.path.join("local/extra.lua"),
        &command("from-project-settings"),
    );
    agent.write("extensions/global/init.lua", &command("from-agent-dir"));
    agent.write("more/listed.lua", &command("from-settings"));
    agent.write("settings.json", r#"{"extensions": ["more/listed.lua"]}"#);

    // Untrusted: the project's folder and settings are ignored.
    let mut p = spawn(&agent, &cwd.path, &["--no-session"]).await;
    let list = p.request_ok("l", "command.list", None).await;
    assert_eq!(
        command_names(&list),
        ["from-agent-dir", "from-settings", "reload"]
    );
    let id = invoke(&mut p, "i", "from-agent-dir", "").await;
    assert_eq!(id["result"], json!({"message": "global"}));
    exit_by_eof(p).await;

    agent.write(
        "trust.json",
        &json!({"trusted": [cwd.path.display().to_string()]}).to_string(),
    );
    let mut p = spawn(&agent, &cwd.path, &["--no-session"]).await;
    let list = p.request_ok("l", "command.list", None).await;
    assert_eq!(
        command_names(&list),
        [
            "from-project",
            "from-agent-dir",
            "from-settings",
            "from-project-settings",
            "reload"
        ]
    );
    exit_by_eof(p).await;
}

// ---------------------------------------------------------------------------------------------
// Containment (issue 10.7, docs/extensions.md "Fault containment" and "ctx"): loops in coroutines
// are stopped by deadlines and interrupts, nothing a script or its children print reaches the
// protocol stream, and `ctx.exec` leaves no process behind.
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
    let mock = start_mock().await;
    let agent = agent_with(&mock);
    let cwd = temp_cwd();
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
    p.request_ok(
        "p",
        "session.prompt",
        Some(json!({"delivery": "direct", "text": "spin"})),
    )
    .await;
    let end = p.event("tool_execution_end").await;
    assert_eq!(end["isError"], true, "{end}");
    assert_eq!(
        end["result"]["content"][0]["text"], "Extension tool exceeded its time limit",
        "{end}"
    );
    p.event("agent_settled").await;
    let pong = invoke(&mut p, "ping-tool", "ping", "").await;
    assert_eq!(pong["result"], json!({"message": "pong"}), "{pong}");
    exit_by_eof(p).await;
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
    let mock = start_mock().await;
    let agent = agent_with(&mock);
    let cwd = temp_cwd();
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
    let stderr = exit_by_eof(p).await;
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
    let mock = start_mock().await;
    let agent = agent_with(&mock);
    let cwd = temp_cwd();
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
    let mock = start_mock().await;
    let agent = agent_with(&mock);
    let cwd = temp_cwd();
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
    exit_by_eof(p).await;
}
