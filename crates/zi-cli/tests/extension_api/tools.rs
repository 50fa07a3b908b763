//! Extension tools: activation, active-tool sets (with MCP tools), output schemas, progress and
//! timeouts.

use super::*;

fn system_prompt(body: &Value) -> String {
    body["messages"][0]["content"].to_string()
}

#[tokio::test]
async fn a_dormant_tool_is_activated_mid_run_by_a_search_tool() {
    let (mock, agent, cwd) = scene().await;
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
    p.prompt("p", "what are the rules?").await;
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
    p.exit_by_eof().await;
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
    let (mock, agent, cwd) = scene().await;
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
    p.prompt("p", "go").await;
    p.event("agent_settled").await;
    let body = mock.requests().pop().unwrap().body;
    assert_eq!(offered(&body), ["read", "repository_rule"]);
    p.exit_by_eof().await;
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
    let (mock, agent, cwd) = scene().await;
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
    p.prompt("p", "count").await;
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
    let stderr = p.exit_by_eof().await.stderr;
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
    let (mock, agent, cwd) = scene().await;
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
    p.prompt("p", "work").await;
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
    p.exit_by_eof().await;
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
    p.prompt("p", "echo").await;
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
    p.exit_by_eof().await;
}
