//! Black-box tests of the Lua extension API beyond commands (issue 16,
//! docs/extensions.md#api): active tools and dormant tools, structured output, progress and
//! deadlines, message deliveries, lifecycle and reload. The real binary runs against the mock
//! provider, whose recorded requests show what the model was offered.

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};
use zi_test_support::dirs::{AgentDir, temp_cwd};
use zi_test_support::harness::Harness;
use zi_test_support::mock_llm::{Step, start_mock};
use zi_test_support::zi_command::ZiCommand;

use crate::ext_support::{self, WAIT, agent_with, example, exit_by_eof, invoke, spawn, write};

fn script(dir: &Path, name: &str, text: &str) -> String {
    write(&dir.join("ext").join(name), text)
}

async fn prompt(p: &mut Harness, id: &str, text: &str) {
    p.request_ok(
        id,
        "session.prompt",
        Some(json!({"delivery": "direct", "text": text})),
    )
    .await;
}

/// The tool names a provider request offered.
fn offered(body: &Value) -> Vec<String> {
    body["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .filter_map(|t| t["function"]["name"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

fn system_prompt(body: &Value) -> String {
    body["messages"][0]["content"].to_string()
}

/// Every event of `kind` seen so far.
fn events_of(p: &Harness, kind: &str) -> Vec<Value> {
    p.events()
        .into_iter()
        .filter(|e| e["type"] == kind)
        .collect()
}

#[tokio::test]
async fn a_dormant_tool_is_activated_mid_run_by_a_search_tool() {
    let mock = start_mock().await;
    let agent = agent_with(&mock);
    let cwd = temp_cwd();
    let deferred = example("deferred-tools.lua");
    let mut p = spawn(
        &agent,
        &cwd.path,
        &["--no-session", "--extension", &deferred],
    )
    .await;
    // The model first calls the dormant tool (refused: it does not exist for the model), then
    // searches, then calls the tool it found.
    mock.push(Step::tool_call(
        "t0",
        "repository_rule",
        json!({"number": 1}),
    ));
    mock.push(Step::tool_call(
        "t1",
        "tool_search",
        json!({"query": "a rule"}),
    ));
    mock.push(Step::tool_call(
        "t2",
        "repository_rule",
        json!({"number": 2}),
    ));
    mock.push(Step::text("done"));
    prompt(&mut p, "p", "what are the rules?").await;
    p.event("agent_settled").await;
    let ends = events_of(&p, "tool_execution_end");
    assert_eq!(ends.len(), 3, "{ends:?}");
    assert_eq!(ends[0]["isError"], true, "{}", ends[0]);
    assert_eq!(
        ends[0]["result"]["content"][0]["text"],
        "Tool repository_rule not found"
    );
    assert_eq!(ends[1]["isError"], false, "{}", ends[1]);
    assert_eq!(ends[2]["isError"], false, "{}", ends[2]);
    assert_eq!(
        ends[2]["result"]["content"][0]["text"],
        "Every fix gets a regression test."
    );
    let requests = mock.requests();
    assert_eq!(requests.len(), 4);
    let before = offered(&requests[0].body);
    assert!(before.contains(&"tool_search".to_string()), "{before:?}");
    assert!(before.contains(&"read".to_string()), "{before:?}");
    assert!(
        !before.contains(&"repository_rule".to_string()),
        "{before:?}"
    );
    assert!(!system_prompt(&requests[0].body).contains("repository_rule"));
    assert_eq!(offered(&requests[1].body), before);
    // From the request after the search on, the tool is offered, next to everything else.
    let after = offered(&requests[2].body);
    let mut expected = before.clone();
    expected.push("repository_rule".to_string());
    assert_eq!(after, expected);
    assert_eq!(offered(&requests[3].body), expected);
    exit_by_eof(p).await;
}

const ACTIVATE: &str = r#"
zi.register_command{ name = "activate", description = "sets the active tools", execute = function(args)
  local names = {}
  for name in args:gmatch("%S+") do names[#names + 1] = name end
  zi.set_active_tools(names)
  return table.concat(zi.get_active_tools(), ",")
end }
zi.register_command{ name = "active", description = "lists the active tools", execute = function()
  return table.concat(zi.get_active_tools(), ",")
end }
"#;

#[tokio::test]
async fn set_active_tools_names_unknown_tools_and_covers_built_in_ones() {
    let mock = start_mock().await;
    let agent = agent_with(&mock);
    let cwd = temp_cwd();
    let activate = script(&cwd.path, "activate.lua", ACTIVATE);
    let deferred = example("deferred-tools.lua");
    let mut p = spawn(
        &agent,
        &cwd.path,
        &[
            "--no-session",
            "--extension",
            &activate,
            "--extension",
            &deferred,
        ],
    )
    .await;
    let all = invoke(&mut p, "a0", "active", "").await;
    assert_eq!(
        all["result"]["message"],
        "read,bash,edit,write,task_output,kill_task,update_plan,tool_search"
    );
    let refused = invoke(&mut p, "a1", "activate", "read nope bash nada").await;
    assert_eq!(refused["error"]["code"], "operation_failed", "{refused}");
    assert_eq!(
        refused["error"]["message"],
        format!("{activate}:5: Unknown tools: nope, nada")
    );
    // A refused change changes nothing.
    let unchanged = invoke(&mut p, "a2", "active", "").await;
    assert_eq!(unchanged["result"], all["result"]);
    let set = invoke(&mut p, "a3", "activate", "repository_rule read").await;
    assert_eq!(set["result"]["message"], "read,repository_rule", "{set}");
    mock.push(Step::text("ok"));
    prompt(&mut p, "p", "go").await;
    p.event("agent_settled").await;
    let body = mock.requests().pop().unwrap().body;
    assert_eq!(offered(&body), ["read", "repository_rule"]);
    exit_by_eof(p).await;
}

const SHAPED: &str = r#"
zi.register_tool{
  name = "shaped",
  description = "returns a count, well or badly shaped",
  parameters = { type = "object", properties = { mode = { type = "string" } }, required = { "mode" } },
  output_schema = {
    type = "object",
    properties = { count = { type = "integer", minimum = 0 } },
    required = { "count" },
  },
  execute = function(params)
    if params.mode == "good" then return { count = 3 } end
    if params.mode == "text" then return "three" end
    return { count = "three" }
  end,
}
"#;

#[tokio::test]
async fn output_schema_validates_tool_results() {
    let mock = start_mock().await;
    let agent = agent_with(&mock);
    let cwd = temp_cwd();
    let shaped = script(&cwd.path, "shaped.lua", SHAPED);
    let broken = script(
        &cwd.path,
        "broken.lua",
        "zi.register_tool{ name = \"b\", description = \"\", parameters = {},\n  output_schema = { type = 7 }, execute = function() end }\n",
    );
    let p = spawn(
        &agent,
        &cwd.path,
        &[
            "--no-session",
            "--extension",
            &shaped,
            "--extension",
            &broken,
        ],
    )
    .await;
    let mut p = p;
    for (n, mode) in ["good", "bad", "text"].iter().enumerate() {
        mock.push(Step::tool_call(
            &format!("t{n}"),
            "shaped",
            json!({"mode": mode}),
        ));
    }
    mock.push(Step::text("done"));
    prompt(&mut p, "p", "count").await;
    p.event("agent_settled").await;
    let ends = events_of(&p, "tool_execution_end");
    assert_eq!(ends.len(), 3, "{ends:?}");
    assert_eq!(ends[0]["isError"], false, "{}", ends[0]);
    assert_eq!(ends[0]["result"]["details"], json!({"count": 3}));
    assert_eq!(ends[0]["result"]["content"][0]["text"], "{\"count\":3}");
    assert_eq!(ends[1]["isError"], true, "{}", ends[1]);
    assert_eq!(
        ends[1]["result"]["content"][0]["text"],
        "Tool shaped returned a result that does not match its output_schema:\n  - /count: \"three\" is not of type \"integer\""
    );
    assert_eq!(ends[2]["isError"], true, "{}", ends[2]);
    assert_eq!(
        ends[2]["result"]["content"][0]["text"],
        "Tool shaped returned a result that does not match its output_schema:\n  - \"three\" is not of type \"object\""
    );
    // The model got the valid value as JSON text and the violation as an error result.
    let last = mock.requests().pop().unwrap().body;
    let tool_texts: Vec<String> = last["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].to_string())
        .collect();
    assert!(
        tool_texts[0].contains("{\\\"count\\\":3}"),
        "{tool_texts:?}"
    );
    assert!(tool_texts[1].contains("does not match"), "{tool_texts:?}");
    let stderr = exit_by_eof(p).await;
    assert!(
        stderr.contains(&format!(
            "Extension {broken} failed to load: {broken}:1: Tool b: invalid output_schema"
        )),
        "{stderr}"
    );
}

const PROGRESS: &str = r#"
zi.register_tool{
  name = "busy",
  description = "reports progress in a tight loop",
  parameters = { type = "object", properties = {} },
  execute = function(params, ctx)
    for i = 1, 20000 do ctx.progress("step " .. i) end
    ctx.progress({ done = 20000 })
    return "finished"
  end,
}
zi.register_tool{
  name = "stuck",
  description = "reports, then never ends",
  parameters = { type = "object", properties = {} },
  timeout_ms = 300,
  execute = function(params, ctx)
    ctx.progress("started")
    while true do end
  end,
}
zi.register_tool{
  name = "huge",
  description = "reports too much",
  parameters = { type = "object", properties = {} },
  execute = function(params, ctx)
    ctx.progress(string.rep("x", 20000))
  end,
}
zi.register_tool{
  name = "flood",
  description = "reports forever",
  parameters = { type = "object", properties = {} },
  timeout_ms = 300,
  execute = function(params, ctx)
    local i = 0
    while true do i = i + 1; pcall(ctx.progress, { i = i }) end
  end,
}
zi.register_command{ name = "report", description = "progress outside a tool", execute = function(args, ctx)
  ctx.progress("nope")
end }
"#;

#[tokio::test]
async fn progress_is_coalesced_bounded_and_timeouts_end_stuck_tools() {
    let mock = start_mock().await;
    let agent = agent_with(&mock);
    let cwd = temp_cwd();
    let busy = script(&cwd.path, "busy.lua", PROGRESS);
    let mut p = spawn(&agent, &cwd.path, &["--no-session", "--extension", &busy]).await;
    for (id, tool) in [
        ("t1", "busy"),
        ("t2", "stuck"),
        ("t3", "huge"),
        ("t4", "busy"),
        ("t5", "flood"),
    ] {
        mock.push(Step::tool_call(id, tool, json!({})));
    }
    mock.push(Step::text("done"));
    let started = std::time::Instant::now();
    prompt(&mut p, "p", "work").await;
    p.event("agent_settled").await;
    let elapsed = started.elapsed();
    let updates = events_of(&p, "tool_execution_update");
    let of = |id: &str| -> Vec<Value> {
        updates
            .iter()
            .filter(|u| u["toolCallId"] == id)
            .map(|u| u["partialResult"].clone())
            .collect()
    };
    let busy_updates = of("t1");
    // 20,001 reports become at most one update per 50 ms of the whole run (plus the last one),
    // whatever the machine's speed; the last update is the last report.
    let allowed = (elapsed.as_millis() / 50) as usize + 2;
    assert!(
        !busy_updates.is_empty() && busy_updates.len() <= allowed,
        "{} updates in {elapsed:?}",
        busy_updates.len()
    );
    assert!(busy_updates.len() < 20001);
    assert_eq!(
        busy_updates.last().unwrap(),
        &json!({"content": [{"type": "text", "text": "{\"done\":20000}"}], "details": {"done": 20000}})
    );
    assert_eq!(
        of("t2"),
        [json!({"content": [{"type": "text", "text": "started"}]})]
    );
    assert!(of("t3").is_empty());
    let ends = events_of(&p, "tool_execution_end");
    let end = |id: &str| {
        ends.iter()
            .find(|e| e["toolCallId"] == id)
            .cloned()
            .unwrap_or_else(|| panic!("{id}: {ends:?}"))
    };
    assert_eq!(end("t1")["result"]["content"][0]["text"], "finished");
    assert_eq!(end("t2")["isError"], true);
    assert_eq!(
        end("t2")["result"]["content"][0]["text"],
        "Extension tool exceeded its time limit"
    );
    assert_eq!(end("t3")["isError"], true);
    assert_eq!(
        end("t3")["result"]["content"][0]["text"],
        format!("{busy}:27: Progress update exceeds 16 KiB")
    );
    // The extension keeps working after its stuck tool was stopped.
    assert_eq!(end("t4")["isError"], false, "{}", end("t4"));
    // Reporting in an endless loop (even under pcall) still ends at the deadline.
    assert_eq!(
        end("t5")["result"]["content"][0]["text"],
        "Extension tool exceeded its time limit"
    );
    assert!(!of("t5").is_empty());
    // Each update precedes its tool's end.
    let events = p.events();
    let position = |pred: &dyn Fn(&Value) -> bool| events.iter().position(pred).unwrap();
    let last_update = events
        .iter()
        .rposition(|e| e["type"] == "tool_execution_update" && e["toolCallId"] == "t1")
        .unwrap();
    assert!(
        last_update < position(&|e| e["type"] == "tool_execution_end" && e["toolCallId"] == "t1")
    );
    let refused = invoke(&mut p, "r", "report", "").await;
    assert_eq!(refused["error"]["code"], "operation_failed");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains(":41: attempt to call a nil value (field 'progress')"),
        "{refused}"
    );
    exit_by_eof(p).await;
}

const NEXT_TURN: &str = r#"
zi.register_command{ name = "remember", description = "holds a note for the next prompt", execute = function(args)
  zi.send_message{ custom_type = "example.note", content = "note: " .. args, delivery = "next_turn" }
  return "held"
end }
zi.register_tool{ name = "later", description = "holds a note from inside a run",
  parameters = { type = "object", properties = {} },
  execute = function()
    zi.send_message{ custom_type = "example.note", content = "from the tool", display = false, delivery = "next_turn" }
    return "ok"
  end }
zi.register_command{ name = "bogus", description = "unknown delivery", execute = function()
  zi.send_message{ custom_type = "example.note", content = "x", delivery = "later" }
end }
"#;

/// The text of every message in a provider request after the system prompt, in order.
fn context_texts(body: &Value) -> Vec<String> {
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .skip(1)
        .map(|m| m["content"].to_string())
        .collect()
}

#[tokio::test]
async fn next_turn_messages_precede_the_next_prompt() {
    let mock = start_mock().await;
    let agent = agent_with(&mock);
    let cwd = temp_cwd();
    let notes = script(&cwd.path, "notes.lua", NEXT_TURN);
    let mut p = spawn(&agent, &cwd.path, &["--no-session", "--extension", &notes]).await;
    let held = invoke(&mut p, "r", "remember", "use tabs").await;
    assert_eq!(held["result"], json!({"message": "held"}));
    let bogus = invoke(&mut p, "b", "bogus", "").await;
    assert_eq!(
        bogus["error"]["message"],
        format!(
            "{notes}:13: Unknown delivery \"later\"; use append, trigger_turn, steer, follow_up or next_turn"
        )
    );
    // Held in memory: nothing is journaled or announced yet.
    assert!(events_of(&p, "entry_appended").is_empty());
    mock.push(Step::tool_call("t1", "later", json!({})));
    mock.push(Step::text("first answer"));
    prompt(&mut p, "p1", "first prompt").await;
    p.event("agent_settled").await;
    let requests = mock.requests();
    let first = context_texts(&requests[0].body);
    assert!(first[0].contains("note: use tabs"), "{first:?}");
    assert!(first[1].contains("first prompt"), "{first:?}");
    assert_eq!(first.len(), 2, "{first:?}");
    // The note sent during the run waits for the next prompt.
    let second_request = requests[1].body.to_string();
    assert!(
        !second_request.contains("from the tool"),
        "{second_request}"
    );
    let entries: Vec<Value> = events_of(&p, "entry_appended")
        .into_iter()
        .map(|e| e["entry"].clone())
        .filter(|e| e["type"] == "custom_message" || e["type"] == "message")
        .collect();
    assert_eq!(entries[0]["type"], "custom_message");
    assert_eq!(entries[0]["content"], "note: use tabs", "{}", entries[0]);
    assert_eq!(entries[1]["message"]["role"], "user", "{}", entries[1]);
    mock.push(Step::text("second answer"));
    prompt(&mut p, "p2", "second prompt").await;
    p.event("agent_settled").await;
    let last = context_texts(&mock.requests().pop().unwrap().body);
    let n = last.len();
    assert!(last[n - 2].contains("from the tool"), "{last:?}");
    assert!(last[n - 1].contains("second prompt"), "{last:?}");
    // Exactly once: the first note was not injected again.
    assert_eq!(
        last.iter().filter(|t| t.contains("note: use tabs")).count(),
        1
    );
    exit_by_eof(p).await;
}

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
    let mock = start_mock().await;
    let agent = agent_with(&mock);
    let cwd = temp_cwd();
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
    prompt(&mut p, "p", "greet").await;
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
    exit_by_eof(p).await;
}

#[tokio::test]
async fn without_extensions_command_list_has_no_reload() {
    let mock = start_mock().await;
    let agent = agent_with(&mock);
    let cwd = temp_cwd();
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
    exit_by_eof(p).await;
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
    let p = spawn(&agent, &cwd.path, &["--no-session", "--extension", &stuck]).await;
    exit_by_eof(p).await;
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

#[tokio::test]
async fn active_tools_cover_mcp_tools() {
    let mock = start_mock().await;
    let markers = temp_cwd();
    let servers = json!({"dsrv": {
        "command": zi_test_support::mcp::stdio_command(&markers.path),
        "tools": "direct",
    }});
    let agent = agent_with(&mock).settings(&json!({ "mcpServers": servers }).to_string());
    let cwd = temp_cwd();
    let activate = script(&cwd.path, "activate.lua", ACTIVATE);
    let mut p = spawn(
        &agent,
        &cwd.path,
        &["--no-session", "--extension", &activate],
    )
    .await;
    // The server connects in the background (a Python process: generous deadline).
    let mut active = String::new();
    for i in 0..600 {
        active = invoke(&mut p, &format!("a{i}"), "active", "").await["result"]["message"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        if active.contains("mcp__dsrv__echo") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(active.contains("mcp__dsrv__echo"), "{active}");
    let set = invoke(&mut p, "s", "activate", "read mcp__dsrv__add").await;
    assert_eq!(set["result"]["message"], "read,mcp__dsrv__add", "{set}");
    mock.push(Step::tool_call(
        "e1",
        "mcp__dsrv__echo",
        json!({"text": "x"}),
    ));
    mock.push(Step::text("done"));
    prompt(&mut p, "p", "echo").await;
    p.event("agent_settled").await;
    assert_eq!(
        offered(&mock.requests()[0].body),
        ["read", "mcp__dsrv__add"]
    );
    let end = events_of(&p, "tool_execution_end").pop().unwrap();
    assert_eq!(
        end["result"]["content"][0]["text"],
        "Tool mcp__dsrv__echo not found"
    );
    exit_by_eof(p).await;
}

const IMAGES: &str = r#"
local PNG = "iVBORw0KGgpmYWtl"
zi.register_command{ name = "shot", description = "holds a screenshot for the next prompt", execute = function()
  zi.send_message{ custom_type = "example.shot", delivery = "next_turn",
    content = { "the screenshot:", { type = "image", data = PNG, mime_type = "image/png" } } }
  return "held"
end }
zi.register_command{ name = "bad", description = "sends the image DATA MIME", execute = function(args)
  local data, mime = args:match("^(%S*) (%S*)$")
  zi.send_message{ custom_type = "example.shot", delivery = "next_turn",
    content = { "x", { type = "image", data = data, mime_type = mime } } }
end }
"#;

/// An image an extension sends reaches the provider request as the model's native image part,
/// is journaled with the message, is checked as RPC images are, and needs an image model.
#[tokio::test]
async fn an_image_message_from_an_extension_reaches_the_provider() {
    let mock = start_mock().await;
    let agent = AgentDir::new().models(
        &mock,
        ext_support::KEY,
        &[
            json!({"id": "m1"}),
            json!({"id": "vision", "input": ["text", "image"]}),
        ],
    );
    let cwd = temp_cwd();
    let images = script(&cwd.path, "images.lua", IMAGES);
    let mut p = ZiCommand::rpc(env!("CARGO_BIN_EXE_zi"), &agent, &cwd.path)
        .model("mock/vision")
        .args(["--no-session", "--extension", &images])
        .timeout(WAIT)
        .spawn_rpc()
        .await;
    let held = invoke(&mut p, "s", "shot", "").await;
    assert_eq!(held["result"], json!({"message": "held"}), "{held}");
    mock.push(Step::text("I see it"));
    prompt(&mut p, "p1", "what is on it?").await;
    p.event("agent_settled").await;
    let body = &mock.requests()[0].body;
    assert_eq!(
        body["messages"][1]["content"],
        json!([{"type": "text", "text": "the screenshot:"},
               {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgpmYWtl"}}]),
        "{body}"
    );
    let entry = events_of(&p, "entry_appended")
        .into_iter()
        .map(|e| e["entry"].clone())
        .find(|e| e["type"] == "custom_message")
        .unwrap();
    assert_eq!(
        entry["content"][1],
        json!({"type": "image", "data": "iVBORw0KGgpmYWtl", "mimeType": "image/png"}),
        "{entry}"
    );

    // The problems of RPC images, with the part's (1-based) place.
    for (id, args, problem) in [
        (
            "b1",
            "iVBORw0KGgpmYWtl image/svg+xml",
            "mimeType must be image/png, image/jpeg, image/gif, or image/webp",
        ),
        (
            "b2",
            "not-base64! image/png",
            "data must be non-empty standard base64",
        ),
        ("b3", " image/png", "data must be non-empty standard base64"),
    ] {
        let refused = invoke(&mut p, id, "bad", args).await;
        let message = refused["error"]["message"].as_str().unwrap_or_default();
        assert!(
            message.starts_with(&format!("{images}:"))
                && message.ends_with(&format!(": Message content[2] {problem}")),
            "{refused}"
        );
    }
    // A text-only model refuses image messages, and nothing is held.
    p.request_ok(
        "ms",
        "model.select",
        Some(json!({"provider": "mock", "id": "m1"})),
    )
    .await;
    let refused = invoke(&mut p, "s2", "shot", "").await;
    let message = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.ends_with(": Model mock/m1 does not accept images"),
        "{refused}"
    );
    mock.push(Step::text("plain"));
    prompt(&mut p, "p2", "again").await;
    p.event("agent_settled").await;
    let last = mock.requests().pop().unwrap().body.to_string();
    assert!(!last.contains("image_url"), "{last}");
    exit_by_eof(p).await;
}

const CONVERSIONS: &str = r#"local schema = { type = "object", properties = {} }
zi.register_tool{ name = "cycle", description = "reports a table that contains itself", parameters = schema,
  execute = function(p, ctx)
    local t = {}; t.self = t
    ctx.progress(t)
  end }
zi.register_tool{ name = "stash", description = "journals a function", parameters = schema,
  execute = function()
    zi.append_entry("example.stash", { call = print })
  end }
zi.register_command{ name = "stash", description = "journals with a bad type", execute = function()
  zi.append_entry(nil, {})
end }
"#;

/// Issue 23 L6: an error raised while zi converts a value the extension handed it (a table that
/// contains itself, a function where data is expected, an argument of the wrong type) names
/// the extension's file and line, like Lua's own errors.
#[tokio::test]
async fn conversion_errors_name_the_extension_file_and_line() {
    let mock = start_mock().await;
    let agent = agent_with(&mock);
    let cwd = temp_cwd();
    let file = script(&cwd.path, "conv.lua", CONVERSIONS);
    let mut p = spawn(&agent, &cwd.path, &["--no-session", "--extension", &file]).await;
    mock.push(Step::tool_call("t1", "cycle", json!({})));
    mock.push(Step::tool_call("t2", "stash", json!({})));
    mock.push(Step::text("done"));
    prompt(&mut p, "p", "convert").await;
    p.event("agent_settled").await;
    let ends = events_of(&p, "tool_execution_end");
    let text = |id: &str| {
        let end = ends.iter().find(|e| e["toolCallId"] == id).unwrap();
        assert_eq!(end["isError"], true, "{end}");
        end["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .to_string()
    };
    assert_eq!(
        text("t1"),
        format!("{file}:5: the value cannot be converted to JSON: recursive table detected")
    );
    assert_eq!(
        text("t2"),
        format!(
            "{file}:9: the value cannot be converted to JSON: unsupported value type `function`"
        )
    );
    let refused = invoke(&mut p, "c", "stash", "").await;
    assert_eq!(
        refused["error"]["message"],
        format!(
            "{file}:12: bad argument to zi.append_entry: error converting Lua nil to String (expected string or number)"
        ),
        "{refused}"
    );
    exit_by_eof(p).await;
}
