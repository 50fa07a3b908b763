//! Black-box tests of the session catalog, raw entry pages and forks (issue 14 points 4–6:
//! `session.list`, `session.get_entries`, `session.fork`), through the real binary against the
//! mock LLM, with real journals under a temporary agent dir: decode errors, happy paths,
//! answers while a run is active (all three are read-only for the running session), and
//! behaviour after `--continue` and `-r`.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use serde_json::{Value, json};
use zi_test_support::dirs::{AgentDir, temp_cwd};
use zi_test_support::harness::Harness;
use zi_test_support::mock_llm::start_mock;
use zi_test_support::mock_llm::{MockLlm, MockUsage, Step};
use zi_test_support::zi_command::ZiCommand;

const WAIT: Duration = Duration::from_secs(30);
const KEY: &str = "catalog-test-key";
const SUMMARY: &str = "## Goal\nKeep going.\n## Progress\n### Done\nEarlier work.";

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

fn agent_with(mock: &MockLlm) -> AgentDir {
    let agent = AgentDir::new();
    agent.write(
        "models.json",
        &mock.models_json(KEY, &[json!({"id": "m1", "reasoning": true})]),
    );
    agent
}

async fn spawn(agent: &AgentDir, cwd: &Path, extra: &[&str]) -> Harness {
    ZiCommand::rpc(env!("CARGO_BIN_EXE_zi"), agent, cwd)
        .args(extra)
        .timeout(WAIT)
        .spawn_rpc()
        .await
}

fn seq(frame: &Value) -> u64 {
    frame["sequence"].as_u64().unwrap_or(0)
}

async fn run_direct(p: &mut Harness, id: &str, text: &str) {
    let frame = p
        .request(
            id,
            "session.prompt",
            Some(json!({"delivery": "direct", "text": text})),
        )
        .await;
    assert_eq!(frame["ok"], true, "prompt {id} was not admitted: {frame}");
    p.event_after("agent_settled", seq(&frame)).await;
}

async fn exit_by_eof(mut p: Harness) {
    p.close_stdin().await;
    let exited = p.wait_exit(WAIT).await;
    assert_eq!(exited.code, Some(0), "stderr: {}", exited.stderr);
}

fn encoded_cwd(cwd: &Path) -> String {
    let text = cwd.display().to_string();
    let trimmed = text.strip_prefix('/').unwrap_or(&text);
    format!("--{}--", trimmed.replace(['/', '\\', ':'], "-"))
}

fn session_dir(agent: &AgentDir, cwd: &Path) -> PathBuf {
    agent.path().join("sessions").join(encoded_cwd(cwd))
}

fn lines_of(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{line}: {e}")))
        .collect()
}

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

fn ids(page: &Value) -> Vec<String> {
    page["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["sessionId"].as_str().unwrap().to_string())
        .collect()
}

async fn failure(p: &mut Harness, id: &str, method: &str, params: Value) -> Value {
    let frame = p.request(id, method, Some(params)).await;
    assert_eq!(frame["ok"], false, "{frame}");
    frame["error"].clone()
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
    exit_by_eof(p).await;
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

    // Paging.
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

    // Scope all: every session directory, any cwd.
    let all = p
        .request_ok("l5", "session.list", Some(json!({"scope": "all"})))
        .await;
    assert_eq!(ids(&all), ["other", "new", "mid", "moved", "old"], "{all}");
    assert_eq!(all["skipped"], 2);

    // A journal that grew is re-read (the catalog cache resumes its scan at the old end).
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
    exit_by_eof(p).await;
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
    exit_by_eof(p).await;

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
    exit_by_eof(p).await;
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
    run_direct(&mut p, "p1", "hello catalog").await;
    let page = p.request_ok("l1", "session.list", None).await;
    assert_eq!(ids(&page), [id.as_str()]);
    assert_eq!(page["sessions"][0]["messageCount"], 2);
    assert_eq!(page["sessions"][0]["firstUserText"], "hello catalog");
    assert_eq!(
        page["sessions"][0]["model"],
        json!({"provider": "mock", "id": "m1"})
    );
    exit_by_eof(p).await;

    let mut c = spawn(&agent, &cwd.path, &["-c"]).await;
    assert_eq!(c.ready()["sessionId"], id.as_str());
    mock.push(Step::text("two"));
    run_direct(&mut c, "p2", "more").await;
    let page = c.request_ok("l2", "session.list", None).await;
    assert_eq!(ids(&page), [id.as_str()]);
    assert_eq!(page["sessions"][0]["messageCount"], 4);
    assert_eq!(page["sessions"][0]["firstUserText"], "hello catalog");
    exit_by_eof(c).await;
}

// ---------------------------------------------------------------------------------------------
// session.get_entries
// ---------------------------------------------------------------------------------------------

/// A compacting setup: window 4000 (trigger 3000, keep-recent 1500).
fn compacting_agent(mock: &MockLlm) -> AgentDir {
    AgentDir::new()
        .models(
            mock,
            "k",
            &[json!({"id": "small", "contextWindow": 4000, "maxTokens": 500})],
        )
        .settings(r#"{"retryEnabled": false}"#)
}

fn reply(bytes: usize, total: u64) -> Step {
    Step::Reply {
        thinking: Vec::new(),
        text: vec!["y".repeat(bytes)],
        tool_calls: Vec::new(),
        finish_reason: "stop".to_string(),
        usage: Some(MockUsage {
            prompt_tokens: total.saturating_sub(bytes as u64 / 4),
            completion_tokens: bytes as u64 / 4,
            cached_tokens: 0,
        }),
    }
}

/// Four prompts, the last of which compacts first.
async fn compacted_session(p: &mut Harness, mock: &MockLlm) {
    for (n, total) in [1100, 2200, 3500].into_iter().enumerate() {
        mock.push(reply(4000, total));
        run_direct(p, &format!("p{n}"), &format!("prompt {n}")).await;
    }
    mock.push(Step::text(SUMMARY));
    mock.push(Step::text("after compaction"));
    run_direct(p, "p3", "prompt 3").await;
    assert!(
        p.events().iter().any(|e| e["type"] == "compaction_end"),
        "the session compacted"
    );
}

async fn all_entries(p: &mut Harness, limit: u64) -> Vec<Value> {
    let mut entries = Vec::new();
    let mut start = 0;
    let mut total = None;
    loop {
        let page = p
            .request_ok(
                &format!("e{start}"),
                "session.get_entries",
                Some(json!({"start": start, "limit": limit})),
            )
            .await;
        assert_eq!(page["start"], start);
        let page_total = page["total"].as_u64().unwrap();
        assert_eq!(*total.get_or_insert(page_total), page_total);
        let items = page["entries"].as_array().unwrap();
        assert!(!items.is_empty() || page_total == 0);
        entries.extend(items.iter().cloned());
        match page["nextStart"].as_u64() {
            Some(next) => {
                assert_eq!(next, start + items.len() as u64);
                start = next;
            }
            None => {
                assert_eq!(entries.len() as u64, page_total);
                return entries;
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn entries_page_the_whole_journal_cold_entries_included_and_after_continue() {
    let mock = MockLlm::start().await.unwrap();
    let agent = compacting_agent(&mock);
    let cwd = temp_cwd();
    let mut p = spawn(&agent, &cwd.path, &["--model", "mock/small"]).await;
    let id = p.ready()["sessionId"].as_str().unwrap().to_string();
    compacted_session(&mut p, &mock).await;
    let journal = session_dir(&agent, &cwd.path).join(format!("{id}.jsonl"));
    let on_disk: Vec<Value> = lines_of(&journal).split_off(1);
    // Every type, compacted messages included, exactly as the file holds them.
    let entries = all_entries(&mut p, 100).await;
    assert_eq!(entries, on_disk);
    let types: Vec<&str> = entries
        .iter()
        .map(|e| e["type"].as_str().unwrap())
        .collect();
    for ty in [
        "model_change",
        "thinking_level_change",
        "message",
        "compaction",
    ] {
        assert!(types.contains(&ty), "{ty} in {types:?}");
    }
    assert_eq!(entries[2]["message"]["content"][0]["text"], "prompt 0");
    // Every entry_appended of the live session is among them, unchanged.
    let announced: Vec<Value> = p
        .events()
        .into_iter()
        .filter(|e| e["type"] == "entry_appended")
        .map(|e| e["entry"].clone())
        .collect();
    assert!(!announced.is_empty());
    for entry in &announced {
        assert!(entries.contains(entry), "{entry}");
    }
    // Small pages give the same list; a start past the end is empty.
    assert_eq!(all_entries(&mut p, 3).await, entries);
    let beyond = p
        .request_ok("eb", "session.get_entries", Some(json!({"start": 500})))
        .await;
    assert_eq!(beyond["entries"], json!([]));
    assert_eq!(beyond["nextStart"], Value::Null);
    assert_eq!(beyond["total"], entries.len());
    exit_by_eof(p).await;

    // After --continue (the compacted entries are on disk only): the same entries, then more.
    let mut c = spawn(&agent, &cwd.path, &["-c"]).await;
    assert_eq!(c.ready()["sessionId"], id.as_str());
    assert_eq!(all_entries(&mut c, 7).await, entries);
    mock.push(Step::text("continued"));
    run_direct(&mut c, "p9", "after continue").await;
    let more = all_entries(&mut c, 100).await;
    assert_eq!(&more[..entries.len()], &entries[..]);
    assert_eq!(more, lines_of(&journal).split_off(1));
    exit_by_eof(c).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn entries_without_a_session_file_keep_the_compacted_ones() {
    let mock = MockLlm::start().await.unwrap();
    let agent = compacting_agent(&mock);
    let cwd = temp_cwd();
    let mut p = spawn(
        &agent,
        &cwd.path,
        &["--no-session", "--model", "mock/small"],
    )
    .await;
    compacted_session(&mut p, &mock).await;
    let entries = all_entries(&mut p, 100).await;
    let users: Vec<&Value> = entries
        .iter()
        .filter(|e| e["type"] == "message" && e["message"]["role"] == "user")
        .map(|e| &e["message"]["content"][0]["text"])
        .collect();
    assert_eq!(users, ["prompt 0", "prompt 1", "prompt 2", "prompt 3"]);
    // Chained in journal order.
    for pair in entries.windows(2) {
        assert_eq!(pair[1]["parentId"], pair[0]["id"]);
    }
    exit_by_eof(p).await;
}

// ---------------------------------------------------------------------------------------------
// session.fork
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fork_keeps_the_chain_up_to_its_entry_and_resumes_with_r() {
    let mock = start_mock().await;
    let agent = agent_with(&mock);
    let cwd = temp_cwd();
    let mut p = spawn(&agent, &cwd.path, &["--model", "mock/m1"]).await;
    let parent_id = p.ready()["sessionId"].as_str().unwrap().to_string();
    mock.push(Step::text("one"));
    run_direct(&mut p, "p1", "first").await;
    mock.push(Step::text("two"));
    run_direct(&mut p, "p2", "second").await;
    exit_by_eof(p).await;
    let parent = session_dir(&agent, &cwd.path).join(format!("{parent_id}.jsonl"));
    let parent_before = std::fs::read_to_string(&parent).unwrap();

    // Continued, then forked at the first assistant message.
    let mut c = spawn(&agent, &cwd.path, &["-c"]).await;
    let entries = all_entries(&mut c, 100).await;
    let cut = entries
        .iter()
        .position(|e| e["type"] == "message" && e["message"]["role"] == "assistant")
        .unwrap();
    let entry_id = entries[cut]["id"].as_str().unwrap().to_string();
    let fork = c
        .request_ok("f1", "session.fork", Some(json!({"entryId": entry_id})))
        .await;
    let fork_id = fork["sessionId"].as_str().unwrap().to_string();
    let fork_path = PathBuf::from(fork["path"].as_str().unwrap());
    assert_ne!(fork_id, parent_id);
    assert_eq!(
        fork_path,
        session_dir(&agent, &cwd.path).join(format!("{fork_id}.jsonl"))
    );
    // Not switched: the running session is still the parent.
    let state = c.request_ok("s", "session.get_state", None).await;
    assert_eq!(state["sessionId"], parent_id.as_str());
    // Unknown ids are not_found.
    let error = failure(&mut c, "f2", "session.fork", json!({"entryId": "nope"})).await;
    assert_eq!(
        error,
        json!({"code": "not_found", "message": "Entry not found: nope"})
    );
    exit_by_eof(c).await;
    assert_eq!(std::fs::read_to_string(&parent).unwrap(), parent_before);

    // The fork: a new header naming the parent, then the parent's lines byte for byte.
    let text = std::fs::read_to_string(&fork_path).unwrap();
    let (header, body) = text.split_once('\n').unwrap();
    let header: Value = serde_json::from_str(header).unwrap();
    assert_eq!(header["type"], "session");
    assert_eq!(header["version"], 2);
    assert_eq!(header["id"], fork_id.as_str());
    assert_eq!(header["cwd"], cwd.path.display().to_string());
    assert_eq!(header["parentSession"], parent.display().to_string());
    let parent_body: Vec<&str> = parent_before.lines().skip(1).take(cut + 1).collect();
    assert_eq!(body, format!("{}\n", parent_body.join("\n")));
    use std::os::unix::fs::PermissionsExt as _;
    let mode = std::fs::metadata(&fork_path).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);

    // `zi -r FORK` resumes it: its messages are the parent's up to the cut, and new work goes
    // to the fork only.
    let mut r = spawn(&agent, &cwd.path, &["-r", &fork_path.display().to_string()]).await;
    assert_eq!(r.ready()["sessionId"], fork_id.as_str());
    let page = r.request_ok("m", "session.get_messages", None).await;
    let texts: Vec<&Value> = page["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| &m["content"][0]["text"])
        .collect();
    assert_eq!(texts, ["first", "one"]);
    mock.push(Step::text("branch"));
    run_direct(&mut r, "p3", "in the fork").await;
    assert_eq!(
        all_entries(&mut r, 100).await,
        lines_of(&fork_path).split_off(1)
    );
    let listed = r.request_ok("l", "session.list", None).await;
    assert_eq!(ids(&listed), [fork_id.clone(), parent_id.clone()]);
    exit_by_eof(r).await;
    assert_eq!(std::fs::read_to_string(&parent).unwrap(), parent_before);
    // The resumed fork still names its parent.
    assert_eq!(
        lines_of(&fork_path)[0]["parentSession"],
        parent.display().to_string()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fork_of_a_compacted_session_reaches_its_cold_entries() {
    let mock = MockLlm::start().await.unwrap();
    let agent = compacting_agent(&mock);
    let cwd = temp_cwd();
    let mut p = spawn(&agent, &cwd.path, &["--model", "mock/small"]).await;
    compacted_session(&mut p, &mock).await;
    let entries = all_entries(&mut p, 100).await;
    // The first user message was compacted away from memory.
    let first = entries.iter().find(|e| e["type"] == "message").unwrap();
    let fork = p
        .request_ok("f", "session.fork", Some(json!({"entryId": first["id"]})))
        .await;
    let path = PathBuf::from(fork["path"].as_str().unwrap());
    let forked = lines_of(&path).split_off(1);
    assert_eq!(forked, entries[..=2].to_vec());
    exit_by_eof(p).await;
    let mut r = spawn(&agent, &cwd.path, &["-r", &path.display().to_string()]).await;
    let page = r.request_ok("m", "session.get_messages", None).await;
    assert_eq!(page["messages"][0]["content"][0]["text"], "prompt 0");
    assert_eq!(page["total"], 1);
    exit_by_eof(r).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fork_without_a_session_file_fails_with_an_exact_message() {
    let mock = start_mock().await;
    let agent = agent_with(&mock);
    let cwd = temp_cwd();
    let mut p = spawn(&agent, &cwd.path, &["--no-session", "--model", "mock/m1"]).await;
    mock.push(Step::text("one"));
    run_direct(&mut p, "p1", "first").await;
    let entries = all_entries(&mut p, 100).await;
    let error = failure(
        &mut p,
        "f",
        "session.fork",
        json!({"entryId": entries[0]["id"]}),
    )
    .await;
    assert_eq!(
        error,
        json!({"code": "operation_failed", "message": "Cannot fork a session that runs with --no-session"})
    );
    assert!(!agent.path().join("sessions").exists());
    exit_by_eof(p).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pending_session_forks_from_memory() {
    let mock = start_mock().await;
    let agent = agent_with(&mock);
    let cwd = temp_cwd();
    let mut p = spawn(&agent, &cwd.path, &["--model", "mock/m1"]).await;
    // Nothing is written before the first assistant message; memory holds the bootstrap.
    let entries = all_entries(&mut p, 100).await;
    assert_eq!(entries.len(), 2, "{entries:?}");
    let fork = p
        .request_ok(
            "f",
            "session.fork",
            Some(json!({"entryId": entries[1]["id"]})),
        )
        .await;
    let path = PathBuf::from(fork["path"].as_str().unwrap());
    assert_eq!(lines_of(&path).split_off(1), entries);
    exit_by_eof(p).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn catalog_methods_answer_while_a_run_is_active() {
    let mock = start_mock().await;
    let agent = agent_with(&mock);
    let cwd = temp_cwd();
    let mut p = spawn(&agent, &cwd.path, &["--model", "mock/m1"]).await;
    mock.push(Step::text("one"));
    run_direct(&mut p, "p1", "first").await;
    mock.push(Step::Hang(vec!["partial".to_string()]));
    let frame = p
        .request(
            "p2",
            "session.prompt",
            Some(json!({"delivery": "direct", "text": "second"})),
        )
        .await;
    assert_eq!(frame["ok"], true);
    // Only the second run's stream counts: the first run's updates are already received.
    p.event_after("message_update", seq(&frame)).await;
    let state = p.request_ok("s", "session.get_state", None).await;
    assert_eq!(state["activity"]["type"], "running");
    let entries = p.request_ok("e", "session.get_entries", None).await;
    let listed = p.request_ok("l", "session.list", None).await;
    assert_eq!(listed["total"], 1);
    let last = entries["entries"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(last["message"]["content"][0]["text"], "second");
    let fork = p
        .request_ok("f", "session.fork", Some(json!({"entryId": last["id"]})))
        .await;
    let path = PathBuf::from(fork["path"].as_str().unwrap());
    assert_eq!(
        lines_of(&path).split_off(1),
        entries["entries"].as_array().unwrap().clone()
    );
    p.request_ok("i", "session.interrupt", None).await;
    exit_by_eof(p).await;
}
