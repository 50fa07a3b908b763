//! The client's file system (docs/acp.md#edits-the-editor-can-review): `write` and `edit`
//! hand their result to `fs/write_text_file`, `read` and `edit` read through
//! `fs/read_text_file`; outside the session's roots, and without the capabilities, the disk.

use serde_json::{Value, json};
use zi_test_support::acp::AcpHarness;
use zi_test_support::mock_llm::Step;

use super::{full_access, prompt, scene};

const FS: &str = r#"{"fs": {"readTextFile": true, "writeTextFile": true}}"#;

/// The next `fs/*` request zi sends.
async fn fs_request(acp: &mut AcpHarness, method: &str) -> Value {
    acp.wait_for(method, |m| m["method"] == method).await
}

fn tool_end(acp: &AcpHarness, session: &str, call: &str) -> Value {
    acp.updates(session)
        .into_iter()
        .rev()
        .find(|u| u["toolCallId"] == call && u.get("status").is_some())
        .expect("the call ended")
}

#[tokio::test]
async fn write_and_edit_go_through_the_client_and_read_sees_its_buffer() {
    let mut s = scene(serde_json::from_str(FS).unwrap()).await;
    full_access(&mut s.acp, &s.session).await;
    let notes = s.cwd.path.join("notes.txt");
    std::fs::write(&notes, "on disk\n").unwrap();
    s.mock.push(Step::tool_call(
        "w1",
        "write",
        json!({"path": "new.txt", "content": "hello\n"}),
    ));
    s.mock
        .push(Step::tool_call("r1", "read", json!({"path": "notes.txt"})));
    s.mock.push(Step::tool_call(
        "e1",
        "edit",
        json!({"path": "notes.txt", "edits": [{"oldText": "unsaved", "newText": "edited"}]}),
    ));
    s.mock.push(Step::text("done"));
    let asked = prompt(&mut s.acp, &s.session, "write, read, edit").await;

    let write = fs_request(&mut s.acp, "fs/write_text_file").await;
    assert_eq!(
        write["params"],
        json!({"sessionId": s.session, "path": s.cwd.path.join("new.txt"), "content": "hello\n"})
    );
    s.acp.answer(&write["id"], json!({})).await;
    let read = fs_request(&mut s.acp, "fs/read_text_file").await;
    assert_eq!(read["params"]["path"], json!(notes));
    s.acp
        .answer(&read["id"], json!({"content": "unsaved buffer\n"}))
        .await;
    // edit reads the buffer, then writes its result back through the client.
    let read = fs_request(&mut s.acp, "fs/read_text_file").await;
    s.acp
        .answer(&read["id"], json!({"content": "unsaved buffer\n"}))
        .await;
    let write = fs_request(&mut s.acp, "fs/write_text_file").await;
    assert_eq!(write["params"]["content"], "edited buffer\n");
    s.acp.answer(&write["id"], json!({})).await;
    let answer = s.acp.response(asked).await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");

    assert!(
        !s.cwd.path.join("new.txt").exists(),
        "the client decides what reaches the disk"
    );
    assert_eq!(std::fs::read_to_string(&notes).unwrap(), "on disk\n");
    assert_eq!(tool_end(&s.acp, &s.session, "w1")["status"], "completed");
    let read_end = tool_end(&s.acp, &s.session, "r1");
    assert_eq!(read_end["content"][0]["content"]["text"], "unsaved buffer");
    assert_eq!(tool_end(&s.acp, &s.session, "e1")["status"], "completed");
}

#[tokio::test]
async fn a_client_error_fails_the_call_and_paths_outside_the_roots_use_the_disk() {
    let mut s = scene(serde_json::from_str(FS).unwrap()).await;
    full_access(&mut s.acp, &s.session).await;
    let outside = tempfile::tempdir().unwrap();
    let elsewhere = outside.path().join("out.txt");
    s.mock.push(Step::tool_call(
        "w1",
        "write",
        json!({"path": "refused.txt", "content": "x"}),
    ));
    s.mock.push(Step::tool_call(
        "w2",
        "write",
        json!({"path": elsewhere, "content": "disk\n"}),
    ));
    s.mock.push(Step::text("done"));
    let asked = prompt(&mut s.acp, &s.session, "write twice").await;
    let write = fs_request(&mut s.acp, "fs/write_text_file").await;
    s.acp
        .send(json!({"jsonrpc": "2.0", "id": write["id"],
                     "error": {"code": -32603, "message": "the buffer is read-only"}}))
        .await;
    let answer = s.acp.response(asked).await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let refused = tool_end(&s.acp, &s.session, "w1");
    assert_eq!(refused["status"], "failed");
    assert_eq!(
        refused["content"][0]["content"]["text"],
        "Cannot write refused.txt: the buffer is read-only"
    );
    assert_eq!(std::fs::read_to_string(&elsewhere).unwrap(), "disk\n");
    assert_eq!(
        s.acp
            .received()
            .iter()
            .filter(|m| m["method"] == "fs/write_text_file")
            .count(),
        1,
        "only the path under the roots went to the client"
    );
}

#[tokio::test]
async fn without_the_capabilities_the_disk_is_used() {
    let mut s = scene(json!({})).await;
    full_access(&mut s.acp, &s.session).await;
    s.mock.push(Step::tool_call(
        "w1",
        "write",
        json!({"path": "new.txt", "content": "on disk\n"}),
    ));
    s.mock.push(Step::text("done"));
    let asked = prompt(&mut s.acp, &s.session, "write").await;
    s.acp.response(asked).await;
    assert_eq!(
        std::fs::read_to_string(s.cwd.path.join("new.txt")).unwrap(),
        "on disk\n"
    );
    assert!(
        !s.acp
            .received()
            .iter()
            .any(|m| m["method"].as_str().is_some_and(|m| m.starts_with("fs/")))
    );
}

#[tokio::test]
async fn additional_directories_are_roots_of_the_session_and_must_be_absolute() {
    let mut s = scene(serde_json::from_str(FS).unwrap()).await;
    let relative = s
        .acp
        .request(
            "session/new",
            json!({"cwd": s.cwd.path, "mcpServers": [], "additionalDirectories": ["lib"]}),
        )
        .await;
    assert_eq!(relative["error"]["code"], -32602, "{relative}");
    assert!(
        relative["error"]["message"]
            .as_str()
            .unwrap()
            .contains("additionalDirectories"),
        "{relative}"
    );
    let extra = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let created = s
        .acp
        .request(
            "session/new",
            json!({"cwd": s.cwd.path, "mcpServers": [],
                   "additionalDirectories": [extra.path()]}),
        )
        .await;
    let session = super::id(&created["result"]);
    full_access(&mut s.acp, &session).await;
    s.mock.push(Step::tool_call(
        "w1",
        "write",
        json!({"path": extra.path().join("lib.txt"), "content": "root\n"}),
    ));
    s.mock.push(Step::tool_call(
        "w2",
        "write",
        json!({"path": outside.path().join("out.txt"), "content": "disk\n"}),
    ));
    s.mock.push(Step::text("done"));
    let asked = prompt(&mut s.acp, &session, "write twice").await;
    // The additional directory is a root: its file goes to the client.
    let write = fs_request(&mut s.acp, "fs/write_text_file").await;
    assert_eq!(
        write["params"]["path"],
        json!(extra.path().join("lib.txt")),
        "{write}"
    );
    s.acp.answer(&write["id"], json!({})).await;
    let answer = s.acp.response(asked).await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    assert!(!extra.path().join("lib.txt").exists());
    assert_eq!(
        std::fs::read_to_string(outside.path().join("out.txt")).unwrap(),
        "disk\n"
    );
    assert_eq!(tool_end(&s.acp, &session, "w1")["status"], "completed");
}
