//! Extension commands: listing and invoking, idle-only, runaway commands, discovery.

use super::*;

/// zi with the `counter` example extension and `session` (a session flag).
async fn with_counter(agent: &AgentDir, cwd: &TempCwd, session: &str) -> Harness {
    spawn(
        agent,
        &cwd.path,
        &[session, "--extension", &example("counter")],
    )
    .await
}

#[tokio::test]
async fn counter_lists_invokes_and_survives_continue() {
    let (_mock, agent, cwd) = scene().await;
    let mut p = with_counter(&agent, &cwd, "--new-session").await;
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
    p.exit_by_eof().await;

    let mut c = with_counter(&agent, &cwd, "-c").await;
    let shown = invoke(&mut c, "show", "counter", "show").await;
    assert_eq!(shown["result"], json!({"message": "Counter: 2"}), "{shown}");
    let response = invoke(&mut c, "i3", "counter", "increment").await;
    assert_eq!(response["result"], json!({"message": "Counter: 3"}));
    c.exit_by_eof().await;
}

#[tokio::test]
async fn commands_are_idle_only_and_refuse_while_a_run_is_active() {
    let (mock, agent, cwd) = scene().await;
    let mut p = with_counter(&agent, &cwd, "--no-session").await;
    mock.push(Step::Hang(vec!["partial".into()]));
    p.prompt("p", "hi").await;
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
    p.exit_by_eof().await;
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

#[tokio::test]
async fn runaway_commands_are_contained_and_interruptible() {
    let (_mock, agent, cwd) = scene().await;
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
    p.exit_by_eof().await;
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
    let (_mock, agent, cwd) = scene().await;
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
    p.exit_by_eof().await;

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
    p.exit_by_eof().await;
}
