//! Messages from extensions: next-turn messages, images, and conversion errors that name the file
//! and line.

use super::*;

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
    let (mock, agent, cwd) = scene().await;
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
    p.prompt("p1", "first prompt").await;
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
    p.prompt("p2", "second prompt").await;
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
    p.exit_by_eof().await;
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
    p.prompt("p1", "what is on it?").await;
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
    p.prompt("p2", "again").await;
    p.event("agent_settled").await;
    let last = mock.requests().pop().unwrap().body.to_string();
    assert!(!last.contains("image_url"), "{last}");
    p.exit_by_eof().await;
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
    let (mock, agent, cwd) = scene().await;
    let file = script(&cwd.path, "conv.lua", CONVERSIONS);
    let mut p = spawn(&agent, &cwd.path, &["--no-session", "--extension", &file]).await;
    mock.push(Step::tool_call("t1", "cycle", json!({})));
    mock.push(Step::tool_call("t2", "stash", json!({})));
    mock.push(Step::text("done"));
    p.prompt("p", "convert").await;
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
    p.exit_by_eof().await;
}
