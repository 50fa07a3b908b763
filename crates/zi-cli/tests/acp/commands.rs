//! Slash commands and extensions (docs/acp.md#slash-commands, docs/acp.md#lua-extensions):
//! `available_commands_update` after the creating response lists templates, skills, extension
//! commands and `compact`; `/name args` runs them.

use serde_json::json;
use zi_test_support::mock_llm::{Step, start_mock};

use super::{agent, id, prompt, start};

const HELLO: &str = r#"
zi.register_command{ name = "hello", description = "says hello", argument_hint = "[name]",
  execute = function(args, ctx)
    return "hello " .. args .. " from " .. ctx.mode
  end }
zi.register_command{ name = "note", description = "leaves a note",
  execute = function(args)
    zi.send_message{ custom_type = "test.note", content = "a note: " .. args, display = true }
  end }
"#;

#[tokio::test]
async fn commands_are_listed_after_the_response_and_run_without_a_model_request() {
    let mock = start_mock().await;
    let agent = agent(&mock).extension("hello.lua", HELLO);
    agent.write(
        "prompts/review.md",
        "---\ndescription: Review a file\nargument-hint: FILE\n---\nReview $1 carefully.",
    );
    agent.write(
        "skills/tidy/SKILL.md",
        "---\nname: tidy\ndescription: Tidy the code\n---\nTidy everything.",
    );
    let cwd = zi_test_support::dirs::temp_cwd();
    let mut acp = start(&agent, &cwd.path, json!({})).await;
    let created = acp
        .call("session/new", json!({"cwd": cwd.path, "mcpServers": []}))
        .await;
    let response = acp.response(created).await;
    let session = id(&response["result"]);
    let commands = acp
        .wait_for("available_commands_update", |m| {
            m["params"]["update"]["sessionUpdate"] == "available_commands_update"
        })
        .await;
    let position = |id: &serde_json::Value| {
        acp.received()
            .iter()
            .position(|m| m["id"] == *id || m == id)
            .unwrap()
    };
    assert!(position(&json!(created)) < position(&commands));
    let listed = commands["params"]["update"]["availableCommands"]
        .as_array()
        .unwrap()
        .clone();
    let names: Vec<&str> = listed.iter().map(|c| c["name"].as_str().unwrap()).collect();
    // `reload` is the built-in command of every session with extensions.
    assert_eq!(
        names,
        ["review", "skill:tidy", "hello", "note", "reload", "compact"],
        "{listed:?}"
    );
    assert_eq!(listed[0]["description"], "Review a file");
    assert_eq!(listed[0]["input"]["hint"], "FILE");
    assert_eq!(listed[2]["input"]["hint"], "[name]");

    let asked = prompt(&mut acp, &session, "/hello zi").await;
    let answer = acp.response(asked).await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    assert_eq!(acp.agent_text(&session), "hello zi from acp");
    assert!(mock.requests().is_empty(), "no model request");

    // An extension's message shown to the user reaches the client as an agent message.
    let asked = prompt(&mut acp, &session, "/note kept").await;
    acp.response(asked).await;
    assert!(
        acp.agent_text(&session).ends_with("a note: kept"),
        "{}",
        acp.agent_text(&session)
    );

    let asked = prompt(&mut acp, &session, "/compact").await;
    let answer = acp.response(asked).await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    assert!(
        acp.agent_text(&session)
            .ends_with("Nothing was compacted: Nothing to compact"),
        "{}",
        acp.agent_text(&session)
    );

    mock.push(Step::text("reviewed"));
    let asked = prompt(&mut acp, &session, "/review main.rs").await;
    acp.response(asked).await;
    let request = mock.requests().last().unwrap().body.to_string();
    assert!(
        request.contains("Review main.rs carefully."),
        "the template expanded: {request}"
    );
}
