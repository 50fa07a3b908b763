//! zi driven by ACP clients nobody here wrote (docs/acp.md#testing): acpx (npm, pinned) and
//! a scenario script on the official Python SDK (PyPI, pinned). Every message zi sends passes
//! through a tap and is checked against the ACP JSON Schema.

use std::time::Duration;

use serde_json::Value;

use zi_test_support::acp::clients::Session;
use zi_test_support::mock_llm::{Step, start_mock};

use super::{ZI, agent};

const RUN: Duration = Duration::from_secs(90);

fn summary(ran: &zi_test_support::acp::clients::Ran) -> Value {
    let line = ran.stdout.lines().last().unwrap_or_default();
    serde_json::from_str(line).unwrap_or_else(|_| {
        panic!(
            "the client printed no summary (exit {:?})\nstdout:\n{}\nstderr:\n{}",
            ran.code, ran.stdout, ran.stderr
        )
    })
}

#[tokio::test]
async fn acpx_exec_streams_an_answer() {
    let mock = start_mock().await;
    let agent = agent(&mock);
    let scene = Session::new(ZI.as_ref(), &agent, &["--model", "mock/m1"]);
    mock.push(Step::Text(vec!["Hello ".into(), "from zi".into()]));
    let ran = scene
        .acpx(
            &["--approve-all", "--format", "quiet", "exec", "say hello"],
            RUN,
        )
        .await;
    assert_eq!(ran.code, Some(0), "{ran:?}");
    assert!(ran.stdout.contains("Hello from zi"), "{ran:?}");
    scene.check_schema();
}

#[tokio::test]
async fn python_sdk_streams_an_answer() {
    let mock = start_mock().await;
    let agent = agent(&mock);
    let scene = Session::new(ZI.as_ref(), &agent, &["--model", "mock/m1"]);
    mock.push(Step::Text(vec!["Hel".into(), "lo".into()]));
    let ran = scene.python("stream", &[], RUN).await;
    let summary = summary(&ran);
    assert_eq!(ran.code, Some(0), "{summary}");
    assert_eq!(summary["text"], "Hello");
    scene.check_schema();
}

#[tokio::test]
async fn python_sdk_cancels_mid_stream() {
    let mock = start_mock().await;
    let agent = agent(&mock);
    let scene = Session::new(ZI.as_ref(), &agent, &["--model", "mock/m1"]);
    mock.push(Step::Hang(vec!["partial ".into()]));
    mock.push(Step::text("after the cancel"));
    let ran = scene.python("cancel", &[], RUN).await;
    let summary = summary(&ran);
    assert_eq!(ran.code, Some(0), "{summary}");
    assert_eq!(summary["stopReason"], "cancelled");
    assert_eq!(summary["updatesAfterResponse"], 0);
    scene.check_schema();
}

fn full_access_settings(agent: &zi_test_support::dirs::AgentDir) {
    // The operator's policy `never` over the settings: sessions start in `full-access`.
    agent.write("settings.json", r#"{"approvals": {"policy": "never"}}"#);
}

#[tokio::test]
async fn acpx_edits_through_fs_write_text_file_and_without_fs_on_the_disk() {
    let mock = start_mock().await;
    let agent = agent(&mock);
    let scene = Session::new(ZI.as_ref(), &agent, &["--model", "mock/m1"]);
    std::fs::write(scene.cwd.join("notes.txt"), "one\n").unwrap();
    let edit = |new: &str| {
        Step::tool_call(
            "e1",
            "edit",
            serde_json::json!({"path": "notes.txt", "edits": [{"oldText": "one", "newText": new}]}),
        )
    };
    mock.push(edit("two"));
    mock.push(Step::text("edited"));
    let ran = scene
        .acpx(&["--approve-all", "exec", "edit the notes"], RUN)
        .await;
    assert_eq!(ran.code, Some(0), "{ran:?}");
    assert_eq!(
        std::fs::read_to_string(scene.cwd.join("notes.txt")).unwrap(),
        "two\n"
    );
    let messages = scene.messages();
    assert!(
        messages
            .iter()
            .any(|(zi, m)| *zi && m["method"] == "fs/write_text_file"),
        "the edit went through the client"
    );
    assert!(
        messages
            .iter()
            .any(|(zi, m)| *zi && m["method"] == "session/request_permission"),
        "the edit asked first"
    );
    std::fs::write(scene.cwd.join("notes.txt"), "one\n").unwrap();
    std::fs::remove_file(&scene.log).unwrap();
    mock.push(edit("three"));
    mock.push(Step::text("edited"));
    let ran = scene
        .acpx(&["--approve-all", "--no-fs", "exec", "edit the notes"], RUN)
        .await;
    assert_eq!(ran.code, Some(0), "{ran:?}");
    assert_eq!(
        std::fs::read_to_string(scene.cwd.join("notes.txt")).unwrap(),
        "three\n"
    );
    assert!(
        !scene
            .messages()
            .iter()
            .any(|(zi, m)| *zi && m["method"] == "fs/write_text_file")
    );
    scene.check_schema();
}

#[tokio::test]
async fn acpx_deny_all_refuses_a_command_exits_5_and_the_turn_still_ends() {
    let mock = start_mock().await;
    let agent = agent(&mock);
    let scene = Session::new(ZI.as_ref(), &agent, &["--model", "mock/m1"]);
    mock.push(Step::tool_call(
        "b1",
        "bash",
        serde_json::json!({"command": "touch made-by-bash"}),
    ));
    mock.push(Step::text("the command was refused"));
    let ran = scene
        .acpx(&["--deny-all", "exec", "run a command"], RUN)
        .await;
    assert_eq!(ran.code, Some(5), "{ran:?}");
    assert!(!scene.cwd.join("made-by-bash").exists());
    let stop = scene
        .messages()
        .into_iter()
        .find(|(zi, m)| *zi && m["result"]["stopReason"].is_string())
        .map(|(_, m)| m["result"]["stopReason"].clone());
    assert_eq!(stop, Some(Value::from("end_turn")));
    scene.check_schema();
}

#[tokio::test]
async fn acpx_manages_sessions_modes_and_models_and_cancels() {
    let mock = start_mock().await;
    let agent = agent(&mock);
    let scene = Session::new(ZI.as_ref(), &agent, &["--model", "mock/m1"]);
    let ran = scene.acpx(&["--ttl", "30", "sessions", "new"], RUN).await;
    assert_eq!(ran.code, Some(0), "{ran:?}");
    mock.push(Step::text("hello there"));
    let ran = scene
        .acpx(
            &["--approve-all", "--format", "quiet", "prompt", "say hello"],
            RUN,
        )
        .await;
    assert_eq!(ran.code, Some(0), "{ran:?}");
    assert!(ran.stdout.contains("hello there"), "{ran:?}");
    for args in [
        &["set-mode", "auto"][..],
        &["set", "model", "mock/m2"][..],
        &["sessions", "list"][..],
    ] {
        let ran = scene.acpx(args, RUN).await;
        assert_eq!(ran.code, Some(0), "{args:?}: {ran:?}");
    }
    let sent: Vec<String> = scene
        .messages()
        .iter()
        .filter(|(zi, _)| !*zi)
        .filter_map(|(_, m)| m["method"].as_str().map(str::to_string))
        .collect();
    for method in [
        "session/new",
        "session/resume",
        "session/set_mode",
        "session/set_config_option",
        "session/list",
    ] {
        assert!(sent.iter().any(|m| m == method), "{method} in {sent:?}");
    }
    // A prompt that hangs, cancelled from another acpx.
    mock.push(Step::Hang(vec!["partial".into()]));
    let prompting = scene.acpx(&["--approve-all", "prompt", "slow please"], RUN);
    let cancelling = async {
        mock.wait_for_requests(2, RUN).await;
        scene.acpx(&["cancel"], RUN).await
    };
    let (prompted, cancelled) = tokio::join!(prompting, cancelling);
    assert_eq!(cancelled.code, Some(0), "{cancelled:?}");
    assert!(prompted.code.is_some(), "{prompted:?}");
    assert!(
        scene
            .messages()
            .iter()
            .any(|(zi, m)| *zi && m["result"]["stopReason"] == "cancelled"),
        "the prompt was answered cancelled"
    );
    let ran = scene.acpx(&["sessions", "close"], RUN).await;
    assert_eq!(ran.code, Some(0), "{ran:?}");
    assert!(
        scene
            .messages()
            .iter()
            .any(|(zi, m)| !*zi && m["method"] == "session/close")
    );
    scene.check_schema();
}

/// Runs a Python SDK scenario; returns its summary (and fails the test when it failed).
async fn python(scene: &Session, scenario: &str, flags: &[&str]) -> Value {
    let ran = scene.python(scenario, flags, RUN).await;
    let summary = summary(&ran);
    assert_eq!(ran.code, Some(0), "{scenario}: {summary}\n{}", ran.stderr);
    scene.check_schema();
    summary
}

fn edit_steps(mock: &zi_test_support::mock_llm::MockLlm, file: &str) {
    for (id, content) in [("w1", "first\n"), ("w2", "second\n")] {
        mock.push(Step::tool_call(
            id,
            "write",
            serde_json::json!({"path": file, "content": content}),
        ));
        mock.push(Step::text("written"));
    }
}

#[tokio::test]
async fn python_sdk_allow_once_asks_twice_and_allow_always_once() {
    let mock = start_mock().await;
    let agent = agent(&mock);
    let scene = Session::new(ZI.as_ref(), &agent, &["--model", "mock/m1"]);
    edit_steps(&mock, "notes.txt");
    let once = python(&scene, "edit-allow-once", &[]).await;
    assert_eq!(once["permissions"], 2);
    assert_eq!(once["writes"], 2, "both went through fs/write_text_file");
    edit_steps(&mock, "notes.txt");
    let always = python(&scene, "edit-allow-always", &[]).await;
    assert_eq!(always["permissions"], 1, "the session grant sticks");
    edit_steps(&mock, "disk.txt");
    let disk = python(&scene, "edit-allow-once", &["--no-fs"]).await;
    assert_eq!(disk["writes"], 0);
    assert_eq!(
        std::fs::read_to_string(scene.cwd.join("disk.txt")).unwrap(),
        "second\n"
    );
}

#[tokio::test]
async fn python_sdk_loads_with_replay_in_a_fresh_process() {
    let mock = start_mock().await;
    let agent = agent(&mock);
    let scene = Session::new(ZI.as_ref(), &agent, &["--model", "mock/m1"]);
    mock.push(Step::tool_call(
        "w1",
        "write",
        serde_json::json!({"path": "notes.txt", "content": "hello\n"}),
    ));
    mock.push(Step::text("written"));
    let summary = python(&scene, "load", &[]).await;
    assert_eq!(summary["sameCalls"], true, "{summary}");
    assert_eq!(summary["sameText"], true);
    assert_eq!(summary["userChunks"], "edit the notes");
}

#[tokio::test]
async fn python_sdk_lists_resumes_closes_and_deletes() {
    let mock = start_mock().await;
    let agent = agent(&mock);
    let scene = Session::new(ZI.as_ref(), &agent, &["--model", "mock/m1"]);
    mock.push(Step::text("hello"));
    let summary = python(&scene, "manage", &[]).await;
    assert_eq!(summary["title"], serde_json::json!(["say hello"]));
    assert_eq!(summary["promptAfterCloseCode"], -32002);
}

#[tokio::test]
async fn python_sdk_switches_modes_and_models() {
    let mock = start_mock().await;
    let agent = agent(&mock);
    let scene = Session::new(ZI.as_ref(), &agent, &["--model", "mock/m1"]);
    let summary = python(&scene, "modes", &[]).await;
    assert_eq!(
        summary["modes"],
        serde_json::json!(["read-only", "ask", "auto", "full-access"])
    );
    assert_eq!(
        summary["afterModel"]["thinking"], "off",
        "mock/m2 does not reason"
    );
}

#[tokio::test]
async fn python_sdk_runs_an_extension_command() {
    let mock = start_mock().await;
    let agent = agent(&mock).extension(
        "hello.lua",
        r#"zi.register_command{ name = "hello", description = "says hello",
             execute = function(args, ctx) return "hello " .. args end }"#,
    );
    let scene = Session::new(ZI.as_ref(), &agent, &["--model", "mock/m1"]);
    let summary = python(&scene, "slash", &[]).await;
    assert_eq!(summary["text"], "hello zi");
    assert!(mock.requests().is_empty());
}

#[tokio::test]
async fn python_sdk_runs_two_sessions_in_two_directories_at_once() {
    let mock = start_mock().await;
    let agent = agent(&mock);
    let scene = Session::new(ZI.as_ref(), &agent, &["--model", "mock/m1"]);
    let second = scene.root().join("second");
    std::fs::create_dir_all(&second).unwrap();
    // Each model's reply waits until both requests arrived: the turns overlap.
    mock.push_for("m1", Step::after("m2", 1, Step::text("answer one")));
    mock.push_for("m2", Step::after("m1", 1, Step::text("answer two")));
    let second = second.display().to_string();
    let summary = python(&scene, "parallel", &["--cwd2", &second]).await;
    assert_eq!(summary["stop"], serde_json::json!(["end_turn", "end_turn"]));
}

#[tokio::test]
async fn python_sdk_passes_an_mcp_server_that_joins_the_session() {
    let mock = start_mock().await;
    let agent = agent(&mock);
    full_access_settings(&agent);
    let scene = Session::new(ZI.as_ref(), &agent, &["--model", "mock/m1"]);
    let marker = scene.root().join("mcp-markers");
    std::fs::create_dir_all(&marker).unwrap();
    let command = zi_test_support::mcp::stdio_command(&marker);
    let server = serde_json::json!([{
        "name": "docs",
        "command": command[0],
        "args": command[1..],
        "env": [{"name": "GREETING", "value": "hello from the client"}],
    }]);
    mock.push(Step::tool_call(
        "m1",
        "mcp_call",
        serde_json::json!({"server": "docs", "tool": "environment", "arguments": {"name": "GREETING"}}),
    ));
    mock.push(Step::text("done"));
    let server = server.to_string();
    let summary = python(&scene, "mcp", &["--mcp", &server]).await;
    let call = &summary["calls"]["m1"];
    assert_eq!(call["title"], "docs: environment", "{summary}");
    assert_eq!(call["status"], "completed", "{summary}");
    assert_eq!(
        call["content"][0]["content"]["text"], "hello from the client",
        "{summary}"
    );
}
