//! Many sessions in one process (docs/acp.md#sessions): load with replay, resume, list,
//! close and delete.

use std::time::Duration;

use serde_json::{Value, json};
use zi_test_support::mock_llm::{Step, start_mock};

use super::{WAIT, ZI, agent, cancel, full_access, hanging_prompt, id, prompt, scene, start};

/// The kinds of the updates of `session` in `messages`.
fn kinds(updates: &[Value]) -> Vec<&str> {
    updates
        .iter()
        .map(|u| u["sessionUpdate"].as_str().unwrap())
        .collect()
}

#[tokio::test]
async fn load_in_a_fresh_process_replays_the_conversation_before_answering() {
    let mut s = scene(json!({})).await;
    full_access(&mut s.acp, &s.session).await;
    s.mock.push(Step::Reply {
        thinking: vec!["hm".into()],
        text: vec!["I'll ".into(), "write".into()],
        tool_calls: vec![zi_test_support::mock_llm::MockToolCall {
            id: "w1".into(),
            name: "write".into(),
            args_chunks: vec![json!({"path": "a.txt", "content": "A\n"}).to_string()],
        }],
        finish_reason: "tool_calls".into(),
        usage: None,
    });
    s.mock.push(Step::text("written"));
    let asked = prompt(&mut s.acp, &s.session, "Write a\nnow").await;
    s.acp.response(asked).await;
    let live = s.acp.updates(&s.session);
    s.acp.close_stdin();
    s.acp.exit(Duration::from_secs(10)).await;

    let mut fresh = start(&s.agent, &s.cwd.path, json!({})).await;
    let load = fresh
        .call(
            "session/load",
            json!({"sessionId": s.session, "cwd": s.cwd.path, "mcpServers": []}),
        )
        .await;
    let answer = fresh.response(load).await;
    assert!(answer.get("result").is_some(), "{answer}");
    assert_eq!(answer["result"]["modes"]["currentModeId"], "ask");
    fresh
        .wait_for("the commands after the response", |m| {
            m["params"]["update"]["sessionUpdate"] == "available_commands_update"
        })
        .await;
    let replayed = fresh.updates(&s.session);
    let answered_at = fresh
        .received()
        .iter()
        .position(|m| m["id"] == json!(load))
        .unwrap();
    let after: Vec<&str> = fresh.received()[answered_at..]
        .iter()
        .filter(|m| m["method"] == "session/update")
        .map(|m| m["params"]["update"]["sessionUpdate"].as_str().unwrap())
        .collect();
    assert_eq!(
        after,
        ["available_commands_update"],
        "the replay precedes the response; only live updates follow it"
    );
    let user: Vec<&Value> = replayed
        .iter()
        .filter(|u| u["sessionUpdate"] == "user_message_chunk")
        .collect();
    assert_eq!(user[0]["content"]["text"], "Write a\nnow");
    assert!(user[0]["messageId"].is_string());
    assert_replayed_as_live(&live, &replayed);
    assert!(kinds(&replayed).contains(&"session_info_update"));
    // Live again: a prompt runs in the loaded session.
    s.mock.push(Step::text("again"));
    let asked = prompt(&mut fresh, &s.session, "more").await;
    let answer = fresh.response(asked).await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
}

/// The replay shows what was live: chunk ids, the text, the tool call.
fn assert_replayed_as_live(live: &[Value], replayed: &[Value]) {
    for kind in ["agent_message_chunk", "agent_thought_chunk"] {
        let ids = |updates: &[Value]| -> Vec<String> {
            let mut ids: Vec<String> = updates
                .iter()
                .filter(|u| u["sessionUpdate"] == kind)
                .map(|u| u["messageId"].as_str().unwrap().to_string())
                .collect();
            ids.dedup();
            ids
        };
        assert_eq!(ids(live), ids(replayed), "{kind}");
    }
    let text = |updates: &[Value]| -> String {
        updates
            .iter()
            .filter(|u| u["sessionUpdate"] == "agent_message_chunk")
            .filter_map(|u| u["content"]["text"].as_str())
            .collect()
    };
    assert_eq!(text(live), text(replayed));
    // The call shows as it did live.
    let call = |updates: &[Value]| -> Value {
        let start = updates
            .iter()
            .find(|u| u["sessionUpdate"] == "tool_call" && u["toolCallId"] == "w1")
            .unwrap()
            .clone();
        json!([
            start["kind"],
            start["title"],
            start["locations"],
            start["content"],
            start["rawInput"]
        ])
    };
    assert_eq!(call(live), call(replayed));
}

#[tokio::test]
async fn a_load_of_an_open_session_reuses_it_so_cancel_keeps_working() {
    let mut s = scene(json!({})).await;
    let asked = hanging_prompt(&mut s.acp, &s.mock, &s.session, "slow").await;
    let load = s
        .acp
        .request(
            "session/load",
            json!({"sessionId": s.session, "cwd": s.cwd.path, "mcpServers": []}),
        )
        .await;
    assert!(load.get("result").is_some(), "{load}");
    cancel(&mut s.acp, &s.session).await;
    let answer = s.acp.response(asked).await;
    assert_eq!(answer["result"]["stopReason"], "cancelled", "{answer}");
    let elsewhere = zi_test_support::dirs::temp_cwd();
    let wrong = s
        .acp
        .request(
            "session/load",
            json!({"sessionId": s.session, "cwd": elsewhere.path, "mcpServers": []}),
        )
        .await;
    assert_eq!(wrong["error"]["code"], -32602, "{wrong}");
    let unknown = s
        .acp
        .request(
            "session/load",
            json!({"sessionId": "00000000-0000-4000-8000-000000000000", "cwd": s.cwd.path, "mcpServers": []}),
        )
        .await;
    assert_eq!(unknown["error"]["code"], -32002, "{unknown}");
}

#[tokio::test]
async fn list_resume_close_and_delete() {
    let mut s = scene(json!({})).await;
    s.mock.push(Step::text("hello"));
    let asked = prompt(&mut s.acp, &s.session, "First words\nsecond line").await;
    s.acp.response(asked).await;
    let other = zi_test_support::dirs::temp_cwd();
    let elsewhere = id(&s.acp.new_session(&other.path).await);
    s.mock.push(Step::text("there"));
    let asked = prompt(&mut s.acp, &elsewhere, "Other place").await;
    s.acp.response(asked).await;

    let all = s.acp.request("session/list", json!({})).await;
    let sessions = all["result"]["sessions"].as_array().unwrap();
    assert_eq!(sessions.len(), 2, "{all}");
    assert!(all["result"].get("nextCursor").is_none());
    let listed = s
        .acp
        .request("session/list", json!({"cwd": s.cwd.path}))
        .await;
    let sessions = listed["result"]["sessions"].as_array().unwrap();
    assert_eq!(sessions.len(), 1, "{listed}");
    assert_eq!(sessions[0]["sessionId"], s.session.as_str());
    assert_eq!(sessions[0]["title"], "First words");
    assert_eq!(sessions[0]["cwd"], json!(s.cwd.path));
    assert!(sessions[0]["updatedAt"].as_str().unwrap().ends_with('Z'));
    let bad = s
        .acp
        .request("session/list", json!({"cursor": "not-ours"}))
        .await;
    assert_eq!(bad["error"]["code"], -32602, "{bad}");

    let resumed = s
        .acp
        .request(
            "session/resume",
            json!({"sessionId": s.session, "cwd": s.cwd.path, "mcpServers": []}),
        )
        .await;
    assert!(resumed["result"]["configOptions"].is_array(), "{resumed}");
    let closed = s
        .acp
        .request("session/close", json!({"sessionId": s.session}))
        .await;
    assert_eq!(closed["result"], json!({}), "{closed}");
    let after = prompt(&mut s.acp, &s.session, "hello?").await;
    let answer = s.acp.response(after).await;
    assert_eq!(answer["error"]["code"], -32002, "{answer}");
    let again = s
        .acp
        .request("session/close", json!({"sessionId": s.session}))
        .await;
    assert_eq!(again["error"]["code"], -32002, "{again}");

    let deleted = s
        .acp
        .request("session/delete", json!({"sessionId": elsewhere}))
        .await;
    assert_eq!(deleted["result"], json!({}), "{deleted}");
    let gone = s
        .acp
        .request("session/delete", json!({"sessionId": elsewhere}))
        .await;
    assert_eq!(gone["result"], json!({}), "deleting twice is fine");
    let all = s.acp.request("session/list", json!({})).await;
    let ids: Vec<&str> = all["result"]["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["sessionId"].as_str().unwrap())
        .collect();
    assert_eq!(ids, [s.session.as_str()]);
    let load = s
        .acp
        .request(
            "session/load",
            json!({"sessionId": elsewhere, "cwd": other.path, "mcpServers": []}),
        )
        .await;
    assert_eq!(load["error"]["code"], -32002, "{load}");
}

#[tokio::test]
async fn the_list_pages_fifty_at_a_time_behind_a_cursor() {
    let mock = start_mock().await;
    let agent = agent(&mock);
    let cwd = zi_test_support::dirs::temp_cwd();
    let dir = agent.path().join("sessions/--listed--");
    std::fs::create_dir_all(&dir).unwrap();
    for i in 0..55 {
        let id = format!("00000000-0000-4000-8000-{i:012}");
        let header = json!({"type": "session", "version": 2, "id": id,
            "timestamp": "2026-12-01T09:00:00.000Z", "cwd": cwd.path});
        std::fs::write(dir.join(format!("{id}.jsonl")), format!("{header}\n")).unwrap();
    }
    let mut acp = start(&agent, &cwd.path, json!({})).await;
    let first = acp.request("session/list", json!({})).await;
    assert_eq!(first["result"]["sessions"].as_array().unwrap().len(), 50);
    let cursor = first["result"]["nextCursor"].as_str().unwrap().to_string();
    let second = acp.request("session/list", json!({"cursor": cursor})).await;
    assert_eq!(second["result"]["sessions"].as_array().unwrap().len(), 5);
    assert!(second["result"].get("nextCursor").is_none());
    let _ = (WAIT, ZI);
}

#[tokio::test]
async fn close_stops_the_session_s_mcp_servers_and_their_children() {
    let mut s = scene(json!({})).await;
    let marker = tempfile::tempdir().unwrap();
    let command = zi_test_support::mcp::stdio_command(marker.path());
    let created = s
        .acp
        .request(
            "session/new",
            json!({"cwd": s.cwd.path, "mcpServers": [{
                "name": "local", "command": command[0], "args": command[1..], "env": []
            }]}),
        )
        .await;
    let session = id(&created["result"]);
    full_access(&mut s.acp, &session).await;
    s.mock.push(Step::tool_call(
        "c1",
        "mcp_call",
        json!({"server": "local", "tool": "spawn_child", "arguments": {}}),
    ));
    s.mock.push(Step::text("spawned"));
    let asked = prompt(&mut s.acp, &session, "spawn").await;
    let answer = s.acp.response(asked).await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let child: u32 = std::fs::read_to_string(marker.path().join("child.pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(zi_test_support::process::process_exists(child));
    let closed = s
        .acp
        .request("session/close", json!({"sessionId": session}))
        .await;
    assert_eq!(closed["result"], json!({}), "{closed}");
    let deadline = std::time::Instant::now() + WAIT;
    while zi_test_support::process::process_exists(child) {
        assert!(
            std::time::Instant::now() < deadline,
            "the MCP server's child outlived session/close"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // The other session is untouched.
    s.mock.push(Step::text("still here"));
    let asked = prompt(&mut s.acp, &s.session, "hello").await;
    let answer = s.acp.response(asked).await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
}

#[tokio::test]
async fn a_client_mcp_server_that_fails_is_a_warning_never_a_failed_session() {
    let mut s = scene(json!({})).await;
    let created = s
        .acp
        .request(
            "session/new",
            json!({"cwd": s.cwd.path, "mcpServers": [
                {"name": "broken", "command": "/nonexistent/zi-mcp-server", "args": [], "env": []},
                {"type": "http", "name": "badurl", "url": "ftp://example.invalid/mcp", "headers": []},
                {"type": "sse", "name": "oldsse", "url": "http://127.0.0.1:9/sse", "headers": []}
            ]}),
        )
        .await;
    let session = id(&created["result"]);
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        let stderr = s.acp.stderr();
        if ["broken", "badurl", "oldsse"].iter().all(|name| {
            stderr
                .lines()
                .any(|l| l.contains("Warning") && l.contains(name))
        }) {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "a warning per server: {stderr}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    s.mock.push(Step::text("served"));
    let asked = prompt(&mut s.acp, &session, "hello").await;
    let answer = s.acp.response(asked).await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
}
