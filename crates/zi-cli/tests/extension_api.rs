//! Black-box tests of the Lua extension API beyond commands (issue 16, runtime-reference §19.4,
//! §19.6, §19.2): active tools and dormant tools, structured output, progress and deadlines,
//! message deliveries, lifecycle and reload. The real binary runs against the mock provider,
//! whose recorded requests show what the model was offered.

// A test fails by panicking with its reason.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use serde_json::{Value, json};
use zi_test_support::dirs::temp_cwd;
use zi_test_support::harness::Harness;
use zi_test_support::mock_llm::{Step, start_mock};

mod ext_support;
use ext_support::{agent_with, example, exit_by_eof, invoke, spawn, write};

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
