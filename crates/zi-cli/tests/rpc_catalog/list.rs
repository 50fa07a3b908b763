//! `session.list` (docs/rpc.md#session-catalog-entry-pages-and-forks) and the exact decode errors of
//! the catalog methods.

use super::*;

/// A journal of alternating user and assistant messages (model `mock/m1`).
fn write_journal(path: &Path, id: &str, cwd: &Path, texts: &[&str]) {
    let mut text = json!({
        "type": "session", "version": 2, "id": id,
        "timestamp": "2026-01-01T00:00:00.000Z", "cwd": cwd.display().to_string(),
    })
    .to_string();
    text.push('\n');
    let mut parent = Value::Null;
    for (n, message_text) in texts.iter().enumerate() {
        let message = if n % 2 == 0 {
            json!({"role": "user", "content": [{"type": "text", "text": message_text}], "timestamp": 1_000 + n})
        } else {
            json!({"role": "assistant", "content": [{"type": "text", "text": message_text}],
                   "api": "openai-completions", "provider": "mock", "model": "m1",
                   "usage": {"input": 1, "output": 1, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 2,
                             "cost": {"input": 0.0, "output": 0.0, "cacheRead": 0.0, "cacheWrite": 0.0, "total": 0.0}},
                   "stopReason": "stop", "timestamp": 1_000 + n})
        };
        let entry_id = format!("00000000-0000-4000-8000-{n:012}");
        text.push_str(
            &json!({"type": "message", "message": message, "id": entry_id,
                    "parentId": parent, "timestamp": "2026-01-01T00:00:01.000Z"})
            .to_string(),
        );
        text.push('\n');
        parent = json!(entry_id);
    }
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// 2026-01-01T00:00:00.123Z in epoch milliseconds.
const BASE_MILLIS: u64 = 1_767_225_600_123;

/// Sets the modification time to [`BASE_MILLIS`] minus `seconds_before`.
fn set_mtime(path: &Path, seconds_before: i64) {
    let millis = BASE_MILLIS as i64 - seconds_before * 1000;
    let time = SystemTime::UNIX_EPOCH + Duration::from_millis(millis as u64);
    std::fs::File::options()
        .write(true)
        .open(path)
        .and_then(|file| file.set_modified(time))
        .unwrap_or_else(|e| panic!("set mtime of {}: {e}", path.display()));
}

async fn invalid(p: &mut Harness, id: &str, method: &str, params: &str, message: &str) {
    let line = format!(r#"{{"version":1,"id":"{id}","method":"{method}","params":{params}}}"#);
    p.send_raw(format!("{line}\n").as_bytes()).await;
    let error = p.protocol_error(Some(id)).await;
    assert_eq!(error["code"], "invalid_request", "{line}: {error}");
    assert_eq!(error["message"], message, "{line}");
}

// ---------------------------------------------------------------------------------------------
// Decode errors
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn catalog_requests_with_bad_params_get_exact_decode_errors() {
    let mock = start_mock().await;
    let agent = agent_with(&mock);
    let cwd = temp_cwd();
    let mut p = spawn(&agent, &cwd.path, &["--no-session"]).await;
    let cases = [
        (
            "session.list",
            "[]",
            "session.list params must be an object",
        ),
        (
            "session.list",
            r#"{"x":1}"#,
            "RPC request contains unknown fields",
        ),
        (
            "session.list",
            r#"{"start":-1}"#,
            "Session list start must be a non-negative integer",
        ),
        (
            "session.list",
            r#"{"limit":101}"#,
            "Session list limit must be an integer from 1 through 100",
        ),
        (
            "session.list",
            r#"{"scope":"everything"}"#,
            "Session list scope must be cwd or all",
        ),
        (
            "session.get_entries",
            "null",
            "session.get_entries params must be an object",
        ),
        (
            "session.get_entries",
            r#"{"start":0.5}"#,
            "Entry start must be a non-negative integer",
        ),
        (
            "session.get_entries",
            r#"{"limit":0}"#,
            "Entry limit must be an integer from 1 through 100",
        ),
        (
            "session.get_entries",
            r#"{"limit":1,"scope":"all"}"#,
            "RPC request contains unknown fields",
        ),
        (
            "session.fork",
            "{}",
            "RPC request is missing required fields",
        ),
        (
            "session.fork",
            r#"{"entryId":""}"#,
            "Entry id must be a non-empty string of at most 256 bytes",
        ),
        (
            "session.fork",
            r#"{"entryId":null}"#,
            "Entry id must be a non-empty string of at most 256 bytes",
        ),
        (
            "session.fork",
            "\"x\"",
            "session.fork params must be an object",
        ),
    ];
    for (n, (method, params, message)) in cases.into_iter().enumerate() {
        invalid(&mut p, &format!("d{n}"), method, params, message).await;
    }
    let long = "a".repeat(257);
    invalid(
        &mut p,
        "long",
        "session.fork",
        &json!({"entryId": long}).to_string(),
        "Entry id must be a non-empty string of at most 256 bytes",
    )
    .await;
    // A missing params key of the required-params method.
    p.send_raw(b"{\"version\":1,\"id\":\"np\",\"method\":\"session.fork\"}\n")
        .await;
    let error = p.protocol_error(Some("np")).await;
    assert_eq!(error["message"], "RPC request is missing required fields");
    // zi keeps serving; null params values take their defaults.
    let page = p
        .request_ok(
            "ok",
            "session.list",
            Some(json!({"start": null, "limit": null, "scope": null})),
        )
        .await;
    assert_eq!(page["total"], 0, "{page}");
    p.exit_by_eof().await;
}

// ---------------------------------------------------------------------------------------------
// session.list
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_list_is_newest_first_paged_and_skips_foreign_files() {
    let mock = start_mock().await;
    let agent = agent_with(&mock);
    let cwd = temp_cwd();
    let other = temp_cwd();
    let dir = session_dir(&agent, &cwd.path);
    let long = format!("{}{}", "x".repeat(255), "é and more");
    write_journal(
        &dir.join("a.jsonl"),
        "old",
        &cwd.path,
        &["first old", "reply"],
    );
    write_journal(
        &dir.join("b.jsonl"),
        "new",
        &cwd.path,
        &[&long, "r", "u", "r"],
    );
    write_journal(&dir.join("c.jsonl"), "mid", &cwd.path, &[]);
    // In the cwd's directory but of another cwd: listed only by scope all.
    write_journal(&dir.join("d.jsonl"), "moved", &other.path, &["elsewhere"]);
    write_journal(
        &session_dir(&agent, &other.path).join("e.jsonl"),
        "other",
        &other.path,
        &["other cwd", "ok"],
    );
    std::fs::write(dir.join("junk.jsonl"), "not a journal\n").unwrap();
    std::fs::write(dir.join("half.jsonl"), "{\"type\":\"session\"").unwrap();
    std::fs::write(dir.join("notes.txt"), "ignored: not .jsonl").unwrap();
    for (name, age) in [("a", 400), ("b", 0), ("c", 200), ("d", 300)] {
        set_mtime(&dir.join(format!("{name}.jsonl")), age);
    }
    set_mtime(&session_dir(&agent, &other.path).join("e.jsonl"), -50);

    let mut p = spawn(&agent, &cwd.path, &["--no-session"]).await;
    let page = p.request_ok("l1", "session.list", None).await;
    assert_eq!(ids(&page), ["new", "mid", "old"], "{page}");
    assert_eq!(page["start"], 0);
    assert_eq!(page["total"], 3);
    assert_eq!(page["nextStart"], Value::Null);
    assert_eq!(page["skipped"], 2, "junk.jsonl and half.jsonl");
    let newest = &page["sessions"][0];
    let path = dir.join("b.jsonl");
    assert_eq!(newest["path"], path.display().to_string());
    assert_eq!(newest["cwd"], cwd.path.display().to_string());
    assert_eq!(newest["createdAt"], "2026-01-01T00:00:00.000Z");
    assert_eq!(newest["messageCount"], 4);
    // Clipped to 256 bytes on a char boundary: "é" would end at byte 257.
    assert_eq!(newest["firstUserText"], "x".repeat(255));
    assert_eq!(newest["model"], json!({"provider": "mock", "id": "m1"}));
    assert_eq!(newest["modifiedAt"], "2026-01-01T00:00:00.123Z");
    // A journal without messages: no text, no model key.
    let empty = &page["sessions"][1];
    assert_eq!(empty["messageCount"], 0);
    assert_eq!(empty["firstUserText"], "");
    assert!(empty.get("model").is_none(), "{empty}");

    session_list_pages(&mut p).await;

    // Scope all: every session directory, any cwd.
    let all = p
        .request_ok("l5", "session.list", Some(json!({"scope": "all"})))
        .await;
    assert_eq!(ids(&all), ["other", "new", "mid", "moved", "old"], "{all}");
    assert_eq!(all["skipped"], 2);

    // A journal that grew is re-read (the catalog cache resumes its scan at the old end).
    grow_journal_a(&dir);
    let again = p.request_ok("l6", "session.list", None).await;
    assert_eq!(ids(&again), ["old", "new", "mid"], "{again}");
    assert_eq!(again["sessions"][0]["messageCount"], 3);
    assert_eq!(again["sessions"][0]["firstUserText"], "first old");
    assert_eq!(
        again["sessions"][0]["model"],
        json!({"provider": "mock", "id": "m9"})
    );
    // A deleted journal disappears; the cache file itself is never listed or skipped.
    std::fs::remove_file(dir.join("c.jsonl")).unwrap();
    let after = p.request_ok("l7", "session.list", None).await;
    assert_eq!(ids(&after), ["old", "new"]);
    assert_eq!(after["skipped"], 2);
    p.exit_by_eof().await;
}

/// Paging: two by two, and a start beyond the end.
async fn session_list_pages(p: &mut Harness) {
    let first = p
        .request_ok("l2", "session.list", Some(json!({"limit": 2})))
        .await;
    assert_eq!(ids(&first), ["new", "mid"]);
    assert_eq!(first["nextStart"], 2);
    let rest = p
        .request_ok("l3", "session.list", Some(json!({"start": 2, "limit": 2})))
        .await;
    assert_eq!(ids(&rest), ["old"]);
    assert_eq!(rest["nextStart"], Value::Null);
    let beyond = p
        .request_ok("l4", "session.list", Some(json!({"start": 9})))
        .await;
    assert_eq!(beyond["sessions"], json!([]));
    assert_eq!(
        (beyond["start"].clone(), beyond["total"].clone()),
        (json!(9), json!(3))
    );
}

/// Appends a model change and a third user message to `a.jsonl`.
fn grow_journal_a(dir: &Path) {
    let mut grown = std::fs::read_to_string(dir.join("a.jsonl")).unwrap();
    grown.push_str(
        &json!({"type": "model_change", "provider": "mock", "modelId": "m9",
                "id": "00000000-0000-4000-8000-00000000aaaa",
                "parentId": "00000000-0000-4000-8000-000000000001",
                "timestamp": "2026-01-01T00:00:02.000Z"})
        .to_string(),
    );
    grown.push('\n');
    grown.push_str(
        &json!({"type": "message", "message": {"role": "user", "content": "third", "timestamp": 5},
                "id": "00000000-0000-4000-8000-00000000bbbb",
                "parentId": "00000000-0000-4000-8000-00000000aaaa",
                "timestamp": "2026-01-01T00:00:03.000Z"})
        .to_string(),
    );
    grown.push('\n');
    std::fs::write(dir.join("a.jsonl"), grown).unwrap();
}

/// A listing scans only the journals on its page; the others are known by their header until
/// a page shows them, also after they grew and in a new process reading the cache.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_list_pages_scan_journals_first_seen_by_their_header() {
    let mock = start_mock().await;
    let agent = agent_with(&mock);
    let cwd = temp_cwd();
    let dir = session_dir(&agent, &cwd.path);
    write_journal(
        &dir.join("x.jsonl"),
        "x",
        &cwd.path,
        &["x1", "r", "x2", "r"],
    );
    write_journal(&dir.join("y.jsonl"), "y", &cwd.path, &["y1", "r"]);
    write_journal(&dir.join("z.jsonl"), "z", &cwd.path, &[]);
    for (name, age) in [("x", 0), ("y", 100), ("z", 200)] {
        set_mtime(&dir.join(format!("{name}.jsonl")), age);
    }
    let mut p = spawn(&agent, &cwd.path, &["--no-session"]).await;
    let first = p
        .request_ok("l1", "session.list", Some(json!({"limit": 1})))
        .await;
    assert_eq!(ids(&first), ["x"], "{first}");
    assert_eq!(
        (
            first["total"].clone(),
            first["sessions"][0]["messageCount"].clone()
        ),
        (json!(3), json!(4))
    );
    // y, so far seen only by its header, grows before any page shows it.
    let mut grown = std::fs::read_to_string(dir.join("y.jsonl")).unwrap();
    grown.push_str(
        &json!({"type": "message", "message": {"role": "user", "content": "y2", "timestamp": 5},
                "id": "00000000-0000-4000-8000-00000000cccc",
                "parentId": "00000000-0000-4000-8000-000000000001",
                "timestamp": "2026-01-01T00:00:03.000Z"})
        .to_string(),
    );
    grown.push('\n');
    std::fs::write(dir.join("y.jsonl"), grown).unwrap();
    set_mtime(&dir.join("y.jsonl"), 50);
    let second = p
        .request_ok("l2", "session.list", Some(json!({"start": 1, "limit": 1})))
        .await;
    assert_eq!(ids(&second), ["y"], "{second}");
    assert_eq!(second["sessions"][0]["messageCount"], 3);
    assert_eq!(second["sessions"][0]["firstUserText"], "y1");
    assert_eq!(second["nextStart"], 2);
    p.exit_by_eof().await;

    // A new process: x and y come from the cache, z (header only there) is scanned now.
    let mut p = spawn(&agent, &cwd.path, &["--no-session"]).await;
    let all = p.request_ok("l3", "session.list", None).await;
    assert_eq!(ids(&all), ["x", "y", "z"], "{all}");
    let counts: Vec<&Value> = all["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| &s["messageCount"])
        .collect();
    assert_eq!(counts, [&json!(4), &json!(3), &json!(0)], "{all}");
    assert_eq!(all["sessions"][2]["firstUserText"], "");
    p.exit_by_eof().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_list_sees_the_running_session_and_a_continued_one() {
    let mock = start_mock().await;
    let agent = agent_with(&mock);
    let cwd = temp_cwd();
    let mut p = spawn(&agent, &cwd.path, &["--model", "mock/m1"]).await;
    let id = p.ready()["sessionId"].as_str().unwrap().to_string();
    // Pending: nothing written yet, so nothing listed.
    let page = p.request_ok("l0", "session.list", None).await;
    assert_eq!(page["total"], 0, "{page}");
    mock.push(Step::text("one"));
    p.prompt_and_settle("p1", "hello catalog").await;
    let page = p.request_ok("l1", "session.list", None).await;
    assert_eq!(ids(&page), [id.as_str()]);
    assert_eq!(page["sessions"][0]["messageCount"], 2);
    assert_eq!(page["sessions"][0]["firstUserText"], "hello catalog");
    assert_eq!(
        page["sessions"][0]["model"],
        json!({"provider": "mock", "id": "m1"})
    );
    p.exit_by_eof().await;

    let mut c = spawn(&agent, &cwd.path, &["-c"]).await;
    assert_eq!(c.ready()["sessionId"], id.as_str());
    mock.push(Step::text("two"));
    c.prompt_and_settle("p2", "more").await;
    let page = c.request_ok("l2", "session.list", None).await;
    assert_eq!(ids(&page), [id.as_str()]);
    assert_eq!(page["sessions"][0]["messageCount"], 4);
    assert_eq!(page["sessions"][0]["firstUserText"], "hello catalog");
    c.exit_by_eof().await;
}
