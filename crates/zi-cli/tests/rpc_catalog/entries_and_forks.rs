//! `session.get_entries` and `session.fork` (docs/rpc.md#session-catalog-entry-pages-and-forks),
//! compacted sessions included, and the catalog during a run.

use super::*;

use crate::compaction_support::SUMMARY;

fn lines_of(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{line}: {e}")))
        .collect()
}

async fn failure(p: &mut Harness, id: &str, method: &str, params: Value) -> Value {
    let frame = p.request(id, method, Some(params)).await;
    assert_eq!(frame["ok"], false, "{frame}");
    frame["error"].clone()
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

/// Four prompts, the last of which compacts first.
async fn compacted_session(p: &mut Harness, mock: &MockLlm) {
    for (n, total) in [1100, 2200, 3500].into_iter().enumerate() {
        mock.push(reply(4000, total));
        p.prompt_and_settle(&format!("p{n}"), &format!("prompt {n}"))
            .await;
    }
    mock.push(Step::text(SUMMARY));
    mock.push(Step::text("after compaction"));
    p.prompt_and_settle("p3", "prompt 3").await;
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
    p.exit_by_eof().await;

    // After --continue (the compacted entries are on disk only): the same entries, then more.
    let mut c = spawn(&agent, &cwd.path, &["-c"]).await;
    assert_eq!(c.ready()["sessionId"], id.as_str());
    assert_eq!(all_entries(&mut c, 7).await, entries);
    mock.push(Step::text("continued"));
    c.prompt_and_settle("p9", "after continue").await;
    let more = all_entries(&mut c, 100).await;
    assert_eq!(&more[..entries.len()], &entries[..]);
    assert_eq!(more, lines_of(&journal).split_off(1));
    c.exit_by_eof().await;
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
    p.exit_by_eof().await;
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
    p.prompt_and_settle("p1", "first").await;
    mock.push(Step::text("two"));
    p.prompt_and_settle("p2", "second").await;
    p.exit_by_eof().await;
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
    c.exit_by_eof().await;
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
    r.prompt_and_settle("p3", "in the fork").await;
    assert_eq!(
        all_entries(&mut r, 100).await,
        lines_of(&fork_path).split_off(1)
    );
    let listed = r.request_ok("l", "session.list", None).await;
    assert_eq!(ids(&listed), [fork_id.clone(), parent_id.clone()]);
    r.exit_by_eof().await;
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
    p.exit_by_eof().await;
    let mut r = spawn(&agent, &cwd.path, &["-r", &path.display().to_string()]).await;
    let page = r.request_ok("m", "session.get_messages", None).await;
    assert_eq!(page["messages"][0]["content"][0]["text"], "prompt 0");
    assert_eq!(page["total"], 1);
    r.exit_by_eof().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fork_without_a_session_file_fails_with_an_exact_message() {
    let mock = start_mock().await;
    let agent = agent_with(&mock);
    let cwd = temp_cwd();
    let mut p = spawn(&agent, &cwd.path, &["--no-session", "--model", "mock/m1"]).await;
    mock.push(Step::text("one"));
    p.prompt_and_settle("p1", "first").await;
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
    p.exit_by_eof().await;
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
    p.exit_by_eof().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn catalog_methods_answer_while_a_run_is_active() {
    let mock = start_mock().await;
    let agent = agent_with(&mock);
    let cwd = temp_cwd();
    let mut p = spawn(&agent, &cwd.path, &["--model", "mock/m1"]).await;
    mock.push(Step::text("one"));
    p.prompt_and_settle("p1", "first").await;
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
    p.exit_by_eof().await;
}
