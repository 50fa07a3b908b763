//! Extensions in the session: broken ones reported, Lua tools, hidden custom messages, lifecycle hooks.

use super::*;

#[tokio::test]
async fn a_broken_extension_is_reported_and_the_others_load() {
    let (_mock, agent, cwd) = scene().await;
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
    let stderr = p.exit_by_eof().await.stderr;
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
    let (mock, agent, cwd) = scene().await;
    let tool = example("structured.lua");
    let mut p = spawn(&agent, &cwd.path, &["--no-session", "--extension", &tool]).await;
    mock.push(Step::tool_call(
        "t1",
        "word_stats",
        json!({"text": "one two\nthree"}),
    ));
    mock.push(Step::text("done"));
    p.prompt("p", "measure").await;
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
    p.exit_by_eof().await;
}

#[tokio::test]
async fn hidden_custom_messages_are_announced_but_not_paged() {
    let (mock, agent, cwd) = scene().await;
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
    p.prompt("p", "go").await;
    p.event("agent_settled").await;
    let body = mock.requests().pop().map(|r| r.body).unwrap_or_default();
    let context = body["messages"].to_string();
    assert!(context.contains("the user noted visible"), "{context}");
    p.exit_by_eof().await;
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
    let (mock, agent, cwd) = scene().await;
    let script = write(&cwd.path.join("ext/hooks.lua"), HOOKS);
    let mut p = spawn(&agent, &cwd.path, &["--no-session", "--extension", &script]).await;
    mock.push(Step::text("hi"));
    p.prompt("p", "go").await;
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
    p.exit_by_eof().await;
    let shutdown = std::fs::read_to_string(cwd.path.join("shutdown.txt")).unwrap_or_default();
    assert_eq!(shutdown, "quit");
}
