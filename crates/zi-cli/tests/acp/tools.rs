//! Tool calls, permissions, modes and config options (docs/acp.md#tool-calls,
//! docs/acp.md#permissions, docs/acp.md#modes, docs/acp.md#config-options).

use serde_json::{Value, json};
use zi_test_support::acp::AcpHarness;
use zi_test_support::mock_llm::Step;

use super::{cancel, full_access, prompt, prompt_for_permission, scene};

/// The next `session/request_permission` zi sends.
async fn permission_request(acp: &mut AcpHarness) -> Value {
    acp.wait_for("a permission request", |m| {
        m["method"] == "session/request_permission"
    })
    .await
}

/// Answers a permission request with `option` (or `cancelled` for `None`).
async fn choose(acp: &mut AcpHarness, request: &Value, option: Option<&str>) {
    let outcome = match option {
        Some(id) => json!({"outcome": "selected", "optionId": id}),
        None => json!({"outcome": "cancelled"}),
    };
    acp.answer(&request["id"], json!({"outcome": outcome}))
        .await;
}

/// Each tool call's final state: the start merged with its updates.
fn calls(updates: &[Value]) -> serde_json::Map<String, Value> {
    let mut calls = serde_json::Map::new();
    for update in updates {
        if update["sessionUpdate"] != "tool_call" && update["sessionUpdate"] != "tool_call_update" {
            continue;
        }
        let id = update["toolCallId"].as_str().unwrap().to_string();
        let call = calls.entry(id).or_insert_with(|| json!({}));
        for (key, value) in update.as_object().unwrap() {
            call[key] = value.clone();
        }
    }
    calls
}

#[tokio::test]
async fn an_edit_asks_with_its_diff_and_runs_once_allowed() {
    let mut s = scene(json!({})).await;
    std::fs::write(s.cwd.path.join("notes.txt"), "alpha\nbeta\n").unwrap();
    s.mock.push(Step::tool_call(
        "call_1",
        "edit",
        json!({"path": "notes.txt", "edits": [{"oldText": "beta", "newText": "gamma"}]}),
    ));
    s.mock.push(Step::text("edited"));
    let asked = prompt(&mut s.acp, &s.session, "edit the notes").await;
    let request = permission_request(&mut s.acp).await;
    let params = &request["params"];
    assert_eq!(params["sessionId"], s.session.as_str());
    let ids: Vec<&str> = params["options"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["optionId"].as_str().unwrap())
        .collect();
    assert_eq!(
        ids,
        [
            "allow_once",
            "allow_always",
            "reject_once",
            "reject_and_stop"
        ]
    );
    let call = &params["toolCall"];
    assert_eq!(call["toolCallId"], "call_1");
    assert_eq!(call["kind"], "edit");
    assert_eq!(call["title"], "Edit notes.txt");
    assert_eq!(call["status"], "pending");
    assert_eq!(
        call["content"],
        json!([{"type": "diff", "path": s.cwd.path.join("notes.txt"), "oldText": "beta", "newText": "gamma"}])
    );
    // The call was announced before zi asked about it.
    let updates = s.acp.updates(&s.session);
    assert!(
        updates
            .iter()
            .any(|u| u["sessionUpdate"] == "tool_call" && u["toolCallId"] == "call_1")
    );
    choose(&mut s.acp, &request, Some("allow_once")).await;
    let answer = s.acp.response(asked).await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    assert_eq!(
        std::fs::read_to_string(s.cwd.path.join("notes.txt")).unwrap(),
        "alpha\ngamma\n"
    );
    let updates = s.acp.updates(&s.session);
    // `pending` (the default) is the announced call's status, so it is not written.
    let statuses: Vec<Option<&str>> = updates
        .iter()
        .filter(|u| u["toolCallId"] == "call_1")
        .map(|u| u["status"].as_str())
        .collect();
    assert_eq!(statuses, [None, Some("in_progress"), Some("completed")]);
    let call = &calls(&updates)["call_1"];
    assert_eq!(
        call["locations"],
        json!([{"path": s.cwd.path.join("notes.txt"), "line": 1}])
    );
    assert_eq!(
        call["content"],
        json!([{"type": "diff", "path": s.cwd.path.join("notes.txt"), "oldText": "alpha\nbeta\n", "newText": "alpha\ngamma\n"}])
    );
}

#[tokio::test]
async fn allow_always_sticks_for_the_session_and_reject_denies_one_call() {
    let mut s = scene(json!({})).await;
    for (id, content) in [("w1", "one"), ("w2", "two")] {
        s.mock.push(Step::tool_call(
            id,
            "write",
            json!({"path": "out.txt", "content": content}),
        ));
        s.mock.push(Step::text("written"));
    }
    let first = prompt(&mut s.acp, &s.session, "write one").await;
    let request = permission_request(&mut s.acp).await;
    choose(&mut s.acp, &request, Some("allow_always")).await;
    s.acp.response(first).await;
    let second = prompt(&mut s.acp, &s.session, "write two").await;
    let answer = s.acp.response(second).await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    assert_eq!(
        s.acp
            .received()
            .iter()
            .filter(|m| m["method"] == "session/request_permission")
            .count(),
        1,
        "the session grant covers the second write"
    );
    assert_eq!(
        std::fs::read_to_string(s.cwd.path.join("out.txt")).unwrap(),
        "two"
    );
    // A command still asks; `reject_once` denies it and the turn goes on.
    let (third, request) =
        prompt_for_permission(&mut s, "b1", "touch made-by-bash", Some("fine"), "run it").await;
    assert_eq!(request["params"]["toolCall"]["kind"], "execute");
    // `` `touch made-by-bash` ``, or the broker's summary when the sandbox is unavailable here
    // (an escalation: `Run: touch made-by-bash`).
    assert!(
        request["params"]["toolCall"]["title"]
            .as_str()
            .unwrap()
            .contains("touch made-by-bash"),
        "{request}"
    );
    choose(&mut s.acp, &request, Some("reject_once")).await;
    let answer = s.acp.response(third).await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    assert!(!s.cwd.path.join("made-by-bash").exists());
    assert_eq!(calls(&s.acp.updates(&s.session))["b1"]["status"], "failed");
}

#[tokio::test]
async fn reject_and_stop_ends_the_turn_and_a_cancelled_outcome_is_not_a_denial() {
    let mut s = scene(json!({})).await;
    let (asked, request) = prompt_for_permission(&mut s, "b1", "touch one", None, "run").await;
    choose(&mut s.acp, &request, Some("reject_and_stop")).await;
    let answer = s.acp.response(asked).await;
    assert_eq!(answer["result"]["stopReason"], "cancelled", "{answer}");
    let (asked, request) =
        prompt_for_permission(&mut s, "b2", "touch two", Some("ok"), "run again").await;
    choose(&mut s.acp, &request, None).await;
    let answer = s.acp.response(asked).await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let b2 = &calls(&s.acp.updates(&s.session))["b2"];
    assert_eq!(b2["status"], "failed");
    assert_eq!(
        b2["content"][0]["content"]["text"],
        "The tool call was not run: its approval request was cancelled."
    );
    assert!(!s.cwd.path.join("two").exists());
}

#[tokio::test]
async fn cancel_withdraws_a_pending_permission_request() {
    let mut s = scene(json!({})).await;
    let (asked, request) = prompt_for_permission(&mut s, "b1", "touch never", None, "run").await;
    cancel(&mut s.acp, &s.session).await;
    let withdrawn = s
        .acp
        .wait_for("$/cancel_request", |m| m["method"] == "$/cancel_request")
        .await;
    assert_eq!(withdrawn["params"]["requestId"], request["id"]);
    let answer = s.acp.response(asked).await;
    assert_eq!(answer["result"]["stopReason"], "cancelled", "{answer}");
    // A late answer is ignored.
    choose(&mut s.acp, &request, Some("allow_once")).await;
    s.acp.drain_for(std::time::Duration::from_millis(300)).await;
    assert!(!s.cwd.path.join("never").exists());
}

#[tokio::test]
async fn modes_switch_the_policy_and_are_pushed_with_the_config_options() {
    let mut s = scene(json!({})).await;
    full_access(&mut s.acp, &s.session).await;
    let mode = s
        .acp
        .wait_for("current_mode_update", |m| {
            m["params"]["update"]["sessionUpdate"] == "current_mode_update"
        })
        .await;
    assert_eq!(mode["params"]["update"]["currentModeId"], "full-access");
    let options = s
        .acp
        .wait_for("config_option_update", |m| {
            m["params"]["update"]["sessionUpdate"] == "config_option_update"
        })
        .await;
    assert_eq!(
        options["params"]["update"]["configOptions"][0]["currentValue"],
        "full-access"
    );
    // full-access: no questions.
    s.mock.push(Step::tool_call(
        "b1",
        "bash",
        json!({"command": "touch made"}),
    ));
    s.mock.push(Step::text("done"));
    let asked = prompt(&mut s.acp, &s.session, "run").await;
    let answer = s.acp.response(asked).await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    assert!(s.cwd.path.join("made").exists());
    assert!(
        !s.acp
            .received()
            .iter()
            .any(|m| m["method"] == "session/request_permission")
    );
    let unknown = s
        .acp
        .request(
            "session/set_mode",
            json!({"sessionId": s.session, "modeId": "reckless"}),
        )
        .await;
    assert_eq!(unknown["error"]["code"], -32602, "{unknown}");
}

#[tokio::test]
async fn config_options_select_models_and_thinking_and_zi_pushes_its_own_clamps() {
    let mut s = scene(json!({})).await;
    let new = s.acp.new_session(&s.cwd.path).await;
    let options = new["configOptions"].as_array().unwrap();
    let ids: Vec<&str> = options.iter().map(|o| o["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["mode", "model", "thinking"]);
    assert_eq!(options[0]["category"], "mode");
    assert_eq!(options[1]["category"], "model");
    assert_eq!(options[1]["currentValue"], "mock/m1");
    let values: Vec<&str> = options[1]["options"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["value"].as_str().unwrap())
        .collect();
    assert_eq!(
        &values[..2],
        ["mock/m1", "mock/m2"],
        "configured models first"
    );
    assert_eq!(options[2]["category"], "thought_level");
    assert_eq!(new["modes"]["currentModeId"], "ask");
    let session = super::id(&new);
    let set = s
        .acp
        .request(
            "session/set_config_option",
            json!({"sessionId": session, "configId": "thinking", "value": "high"}),
        )
        .await;
    let all = set["result"]["configOptions"].as_array().unwrap();
    assert_eq!(all.len(), 3, "every option is answered");
    assert_eq!(all[2]["currentValue"], "high");
    // mock/m2 does not reason: zi clamps thinking to off and pushes the change itself.
    let set = s
        .acp
        .request(
            "session/set_config_option",
            json!({"sessionId": session, "configId": "model", "value": "mock/m2"}),
        )
        .await;
    let all = set["result"]["configOptions"].as_array().unwrap();
    assert_eq!(all[1]["currentValue"], "mock/m2", "{set}");
    assert_eq!(all[2]["currentValue"], "off");
    let pushed = s
        .acp
        .wait_for("zi's config_option_update", |m| {
            m["params"]["sessionId"] == session
                && m["params"]["update"]["sessionUpdate"] == "config_option_update"
                && m["params"]["update"]["configOptions"][1]["currentValue"] == "mock/m2"
        })
        .await;
    assert_eq!(
        pushed["params"]["update"]["configOptions"][2]["currentValue"], "off",
        "the clamp is pushed"
    );
    let unknown = s
        .acp
        .request(
            "session/set_config_option",
            json!({"sessionId": session, "configId": "model", "value": "mock/nope"}),
        )
        .await;
    assert_eq!(unknown["error"]["code"], -32602, "{unknown}");
    assert_eq!(unknown["error"]["message"], "Model not found: mock/nope");
    let legacy = s
        .acp
        .request(
            "session/set_model",
            json!({"sessionId": session, "modelId": "mock/m1"}),
        )
        .await;
    assert_eq!(legacy["result"], json!({}), "{legacy}");
}

#[tokio::test]
async fn the_operator_floor_limits_the_modes() {
    let mock = zi_test_support::mock_llm::start_mock().await;
    let agent = super::agent(&mock);
    let cwd = zi_test_support::dirs::temp_cwd();
    let mut acp = zi_test_support::zi_command::ZiCommand::acp(super::ZI, &agent, &cwd.path)
        .model("mock/m1")
        .args(["--approvals", "on-failure"])
        .timeout(super::WAIT)
        .spawn_acp();
    acp.initialize(json!({})).await;
    let new = acp.new_session(&cwd.path).await;
    let modes: Vec<&str> = new["modes"]["availableModes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert_eq!(modes, ["read-only", "ask", "auto"]);
    assert_eq!(
        new["modes"]["currentModeId"], "auto",
        "the operator's own policy"
    );
    let looser = acp
        .request(
            "session/set_mode",
            json!({"sessionId": super::id(&new), "modeId": "full-access"}),
        )
        .await;
    assert_eq!(looser["error"]["code"], -32602, "{looser}");
}

#[tokio::test]
async fn plans_and_command_output_stream_as_updates() {
    let mut s = scene(json!({"_meta": {"terminal_output": true}})).await;
    full_access(&mut s.acp, &s.session).await;
    s.mock.push(Step::tool_call(
        "p1",
        "update_plan",
        json!({"steps": [{"text": "Look", "status": "completed"}, {"text": "Fix", "status": "in_progress"}]}),
    ));
    s.mock.push(Step::tool_call(
        "b1",
        "bash",
        json!({"command": "for i in 1 2 3; do echo line $i; sleep 0.4; done"}),
    ));
    s.mock.push(Step::text("done"));
    let asked = prompt(&mut s.acp, &s.session, "plan and run").await;
    s.acp.response(asked).await;
    let updates = s.acp.updates(&s.session);
    let plan = updates
        .iter()
        .find(|u| u["sessionUpdate"] == "plan")
        .expect("a plan");
    assert_eq!(
        plan["entries"],
        json!([
            {"content": "Look", "priority": "medium", "status": "completed"},
            {"content": "Fix", "priority": "medium", "status": "in_progress"}
        ])
    );
    let start = updates
        .iter()
        .find(|u| u["sessionUpdate"] == "tool_call" && u["toolCallId"] == "b1")
        .unwrap();
    assert_eq!(
        start["content"],
        json!([{"type": "terminal", "terminalId": "b1"}])
    );
    assert_eq!(start["_meta"]["terminal_info"]["terminal_id"], "b1");
    let output: String = updates
        .iter()
        .filter_map(|u| u["_meta"]["terminal_output"]["data"].as_str())
        .collect();
    // Each byte once, in order (the tail zi reports leaves out the output's last line end).
    assert_eq!(output.trim_end(), "line 1\nline 2\nline 3");
    let end = updates
        .iter()
        .rev()
        .find(|u| u["toolCallId"] == "b1")
        .unwrap();
    assert_eq!(end["status"], "completed");
    assert_eq!(end["_meta"]["terminal_exit"]["exit_code"], 0);
    assert!(end.get("content").is_none(), "the terminal stays");
}

#[tokio::test]
async fn without_terminal_output_a_command_shows_a_bounded_tail() {
    let mut s = scene(json!({})).await;
    full_access(&mut s.acp, &s.session).await;
    s.mock.push(Step::tool_call(
        "b1",
        "bash",
        json!({"command": "for i in $(seq 1 300); do echo line $i; done; sleep 0.8; echo end"}),
    ));
    s.mock.push(Step::text("done"));
    let asked = prompt(&mut s.acp, &s.session, "run").await;
    s.acp.response(asked).await;
    let updates = s.acp.updates(&s.session);
    let texts: Vec<&str> = updates
        .iter()
        .filter(|u| {
            u["toolCallId"] == "b1"
                && u["sessionUpdate"] == "tool_call_update"
                && u.get("status").is_none_or(|status| status == "in_progress")
        })
        .filter_map(|u| u["content"][0]["content"]["text"].as_str())
        .collect();
    assert!(!texts.is_empty(), "the output showed while it ran");
    for text in &texts {
        assert!(text.starts_with("```"), "fenced: {text}");
        assert!(text.len() <= 8 * 1024 + 8, "{} bytes", text.len());
        assert!(text.lines().count() <= 64 + 2, "{text}");
        assert!(
            !text.lines().any(|l| l == "line 1"),
            "a tail, not the whole"
        );
    }
    assert!(texts.iter().any(|t| t.lines().any(|l| l == "line 300")));
    let end = updates
        .iter()
        .rev()
        .find(|u| u["toolCallId"] == "b1")
        .unwrap();
    assert_eq!(end["status"], "completed");
    assert!(
        end["content"][0]["content"]["text"]
            .as_str()
            .unwrap()
            .contains("end"),
        "{end}"
    );
}
