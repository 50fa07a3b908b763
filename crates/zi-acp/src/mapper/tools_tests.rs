use std::path::Path;

use serde_json::{Value, json};
use zi_protocol::message::ContentBlock as ZiBlock;

use super::*;

const CWD: &str = "/work/proj";

fn start(name: &str, args: Value) -> Value {
    let view = start_view(name, &args, Path::new(CWD));
    json!({
        "kind": serde_json::to_value(view.kind).unwrap(),
        "title": view.title,
        "locations": serde_json::to_value(view.locations).unwrap(),
        "content": serde_json::to_value(view.content).unwrap(),
        "rawInput": view.raw_input,
    })
}

fn end(name: &str, args: Value, text: &str, details: Option<Value>, is_error: bool) -> Value {
    let content = vec![ZiBlock::text(text)];
    let view = end_view(
        name,
        &args,
        &content,
        details.as_ref(),
        is_error,
        Path::new(CWD),
    );
    json!({
        "status": serde_json::to_value(view.status).unwrap(),
        "content": serde_json::to_value(view.content).unwrap(),
        "locations": serde_json::to_value(view.locations).unwrap(),
        "rawOutput": view.raw_output,
    })
}

#[test]
fn read_shows_the_file_and_its_window() {
    assert_eq!(
        start(
            "read",
            json!({"path": "src/main.rs", "offset": 10, "limit": 50})
        ),
        json!({
            "kind": "read", "title": "Read src/main.rs (lines 10–59)",
            "locations": [{"path": "/work/proj/src/main.rs", "line": 10}],
            "content": [], "rawInput": {"path": "src/main.rs", "offset": 10, "limit": 50}
        })
    );
    assert_eq!(
        start("read", json!({"path": "/etc/hosts"}))["title"],
        "Read /etc/hosts"
    );
    let done = end("read", json!({"path": "a"}), "line one", None, false);
    assert_eq!(done["status"], "completed");
    assert_eq!(
        done["content"],
        json!([{"type": "content", "content": {"type": "text", "text": "line one"}}])
    );
}

#[test]
fn write_and_edit_show_real_diffs() {
    let write = start("write", json!({"path": "notes.txt", "content": "new\n"}));
    assert_eq!(write["kind"], "edit");
    assert_eq!(write["title"], "Write notes.txt");
    assert_eq!(
        write["content"],
        json!([{"type": "diff", "path": "/work/proj/notes.txt", "newText": "new\n"}]),
        "a new file: no oldText"
    );
    assert_eq!(
        end("write", json!({"path": "notes.txt"}), "ok", None, false)["content"],
        Value::Null,
        "the start's diff stays"
    );
    let edit = start(
        "edit",
        json!({"path": "src/lib.rs", "edits": [{"oldText": "a", "newText": "b"}]}),
    );
    assert_eq!(edit["title"], "Edit src/lib.rs");
    assert_eq!(
        edit["content"],
        json!([{"type": "diff", "path": "/work/proj/src/lib.rs", "oldText": "a", "newText": "b"}])
    );
    let diff = "--- a/src/lib.rs\n+++ b/src/lib.rs\n@@ -2,3 +2,3 @@\n one\n-two\n+TWO\n three\n@@ -20,2 +20,3 @@\n x\n+y\n z\n";
    let done = end(
        "edit",
        json!({"path": "src/lib.rs"}),
        "Successfully replaced 2 block(s) in src/lib.rs",
        Some(json!({"diff": diff, "firstChangedLine": 3})),
        false,
    );
    assert_eq!(
        done["content"],
        json!([
            {"type": "diff", "path": "/work/proj/src/lib.rs", "oldText": "one\ntwo\nthree\n", "newText": "one\nTWO\nthree\n"},
            {"type": "diff", "path": "/work/proj/src/lib.rs", "oldText": "x\nz\n", "newText": "x\ny\nz\n"}
        ])
    );
    assert_eq!(
        done["locations"],
        json!([{"path": "/work/proj/src/lib.rs", "line": 2}, {"path": "/work/proj/src/lib.rs", "line": 20}])
    );
}

#[test]
fn large_diffs_and_write_contents_are_bounded() {
    let big = "x".repeat(300 * 1024);
    let write = start("write", json!({"path": "big.txt", "content": big}));
    assert_eq!(
        write["content"],
        json!([{"type": "content", "content": {"type": "text", "text": format!("diff omitted: {} bytes", 300 * 1024)}}])
    );
    assert_eq!(write["rawInput"]["contentBytes"], 300 * 1024);
    assert_eq!(
        write["rawInput"]["content"].as_str().unwrap().len(),
        8 * 1024
    );
}

#[test]
fn commands_show_their_first_line_and_fail_visibly() {
    let bash = start("bash", json!({"command": "cargo test --workspace"}));
    assert_eq!(bash["kind"], "execute");
    assert_eq!(bash["title"], "`cargo test --workspace`");
    let long = "echo ".to_string() + &"y".repeat(200);
    assert!(
        start("bash", json!({"command": long}))["title"]
            .as_str()
            .unwrap()
            .ends_with("…`")
    );
    assert_eq!(
        start("bash", json!({"command": "ls\nrm x"}))["title"],
        "`ls…`"
    );
    assert_eq!(
        start(
            "bash",
            json!({"command": "x", "description": "List the files"})
        )["title"],
        "List the files"
    );
    let failed = end(
        "bash",
        json!({"command": "false"}),
        "(no output)\n\nCommand exited with code 1",
        Some(json!({"exitCode": 1})),
        true,
    );
    assert_eq!(failed["status"], "failed");
    assert_eq!(
        failed["content"][0]["content"]["text"],
        "(no output)\n\nCommand exited with code 1"
    );
}

#[test]
fn other_tools_get_kinds_and_titles() {
    assert_eq!(start("update_plan", json!({}))["kind"], "think");
    assert_eq!(start("update_plan", json!({}))["title"], "Update plan");
    assert_eq!(
        start("code", json!({"code": "return 1"}))["title"],
        "Run code"
    );
    assert_eq!(
        start(
            "code",
            json!({"code": "x", "description": "Count the files"})
        )["title"],
        "Count the files"
    );
    assert_eq!(
        start("mcp__docs__search_pages", json!({"q": "x"}))["title"],
        "docs: search_pages"
    );
    assert_eq!(
        start(
            "mcp_call",
            json!({"server": "db", "tool": "query", "arguments": {}})
        )["title"],
        "db: query"
    );
    assert_eq!(
        start("mcp_search", json!({"query": "pdf"}))["kind"],
        "search"
    );
    assert_eq!(
        start("task_output", json!({"taskId": "task-3"}))["title"],
        "Output of task-3"
    );
    assert_eq!(
        start("kill_task", json!({"taskId": "task-3"}))["title"],
        "Stop task-3"
    );
    assert_eq!(
        start("grep_files", json!({"pattern": "TODO"}))["kind"],
        "search"
    );
    assert_eq!(
        start("grep_files", json!({"pattern": "TODO"}))["title"],
        "Search TODO"
    );
    assert_eq!(
        start(
            "spawn_subagent",
            json!({"profile": "p", "name": "rev", "prompt": "Review it"})
        )["title"],
        "Subagent rev: Review it"
    );
    let extension = start("weather", json!({"city": "Oslo"}));
    assert_eq!(extension["kind"], "other");
    assert_eq!(extension["title"], "weather: Oslo");
}
