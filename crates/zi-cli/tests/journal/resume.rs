//! Resume equivalence, `--continue` selection, long cwds, and a saved model that is gone.

use super::*;

/// The state fields that survive a restart (activity must be idle).
fn durable_state(state: &Value) -> Value {
    assert_eq!(state["activity"], json!({"type": "idle"}), "{state}");
    json!({
        "sessionId": state["sessionId"],
        "model": state["model"],
        "thinkingLevel": state["thinkingLevel"],
        "supportedThinkingLevels": state["supportedThinkingLevels"],
        "messageCount": state["messageCount"],
        "workPlan": state["workPlan"],
        "contextUsage": state["contextUsage"],
        "queuedInputs": state["queuedInputs"],
    })
}

fn set_mtime(path: &Path, time: SystemTime) {
    let file = std::fs::File::options()
        .write(true)
        .open(path)
        .unwrap_or_else(|e| panic!("open {}: {e}", path.display()));
    file.set_modified(time)
        .unwrap_or_else(|e| panic!("set mtime of {}: {e}", path.display()));
}

// ---------------------------------------------------------------------------------------------
// 2. Resume equivalence
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resume_and_continue_restore_the_same_session() {
    let (mock, agent, cwd) = scene(&["m1", "m2"]).await;
    let mut p = spawn(&agent, &cwd.path, &["--model", "mock/m1"]).await;
    let id = session_id(&p.ready());
    mock.push(Step::text("one"));
    p.prompt_and_settle("p1", "first").await;
    let selected = select_m2_thinking(&mut p, "low").await;
    assert_eq!(selected["effective"], "low");
    mock.push(Step::text("two"));
    p.prompt_and_settle("p2", "second").await;
    mock.push(Step::text("three"));
    p.prompt_and_settle("p3", "third").await;
    let before = p.request_ok("s1", "session.get_state", None).await;
    let before_state = durable_state(&before);
    assert_eq!(before["model"]["model"]["id"], "m2");
    assert_eq!(before["thinkingLevel"], "low");
    assert_eq!(before["messageCount"], 6);
    let before_messages = all_messages(&mut p).await;
    assert_eq!(before_messages.len(), 6);
    p.exit_by_eof().await;
    let path = default_journal(&agent, &cwd.path, &id);
    let journal_before = read_journal(&path);

    // The journal, not the settings, decides the model and thinking level of a resumed session.
    agent.write(
        "settings.json",
        r#"{"defaultProvider": "mock", "defaultModel": "m1", "defaultThinkingLevel": "high"}"#,
    );

    let mut r = spawn(&agent, &cwd.path, &["-r", &path_arg(&path)]).await;
    assert_eq!(durable_state(&r.ready()), before_state);
    let state = r.request_ok("s2", "session.get_state", None).await;
    assert_eq!(durable_state(&state), before_state);
    assert_eq!(all_messages(&mut r).await, before_messages);
    let stderr = r.exit_by_eof().await.stderr;
    assert!(warnings(&stderr).is_empty(), "{stderr}");
    // Resuming without changes appends nothing.
    assert_eq!(read_journal(&path).entries, journal_before.entries);

    // `-c` from the same cwd finds the same session.
    let mut c = spawn(&agent, &cwd.path, &["-c"]).await;
    assert_eq!(durable_state(&c.ready()), before_state);
    assert_eq!(all_messages(&mut c).await, before_messages);
    // And continues it: the provider sees the whole conversation, with the restored model.
    mock.push(Step::text("four"));
    c.prompt_and_settle("p4", "fourth").await;
    let body = mock.requests().pop().map(|r| r.body).unwrap_or_default();
    assert_eq!(body["model"], "m2", "{body}");
    let users: Vec<String> = body["messages"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .filter(|m| m["role"] == "user")
        .map(|m| text_of(&m["content"]))
        .collect();
    assert_eq!(users, ["first", "second", "third", "fourth"]);
    c.exit_by_eof().await;
    let journal_after = read_journal(&path);
    assert_eq!(
        &journal_after.entries[..journal_before.entries.len()],
        &journal_before.entries[..]
    );
    assert_eq!(journal_messages(&journal_after.entries).len(), 8);
    assert_eq!(
        files_under(&agent.path().join("sessions")),
        [path],
        "no second journal"
    );
}

// ---------------------------------------------------------------------------------------------
// 3. `--continue` selection
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn continue_picks_the_newest_session_of_the_cwd() {
    let (mock, agent, cwd) = scene(&["m1"]).await;
    let other_cwd = temp_cwd();
    let fresh_cwd = temp_cwd();
    let shared = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let dir = shared.path().join("shared-sessions");
    let base = SystemTime::now() - Duration::from_secs(3600);

    let make = |name: &str, cwd: &Path, age: u64, text: &str| {
        let path = dir.join(format!("{name}.jsonl"));
        let id = uuid_like(name, 0);
        write_journal(&path, &id, cwd, &[text, &format!("{text} reply")]);
        set_mtime(&path, base - Duration::from_secs(age));
        (id, path)
    };
    // Creation order, name order and mtime order all differ.
    let (_, _) = make("a-oldest", &cwd.path, 30, "oldest");
    let (newest_id, newest_path) = make("b-newest", &cwd.path, 10, "newest");
    let (_, _) = make("c-middle", &cwd.path, 20, "middle");
    let (other_id, _) = make("d-other", &other_cwd.path, 1, "other cwd");
    let before = files_under(&dir);

    let dir_arg = path_arg(&dir);
    let mut p = spawn(&agent, &cwd.path, &["--session-dir", &dir_arg, "-c"]).await;
    let state = p.ready();
    assert_eq!(session_id(&state), newest_id, "{state}");
    let texts: Vec<String> = all_messages(&mut p)
        .await
        .iter()
        .map(|m| text_of(&m["content"]))
        .collect();
    assert_eq!(texts, ["newest", "newest reply"]);
    p.exit_by_eof().await;

    // The other cwd's session is found from its own cwd.
    let mut p = spawn(&agent, &other_cwd.path, &["--session-dir", &dir_arg, "-c"]).await;
    assert_eq!(session_id(&p.ready()), other_id);
    p.exit_by_eof().await;

    // No session for this cwd: a new one, which stays pending.
    let mut p = spawn(&agent, &fresh_cwd.path, &["--session-dir", &dir_arg, "-c"]).await;
    let state = p.ready();
    let new_id = session_id(&state);
    assert_eq!(new_id.len(), 36, "{state}");
    assert!(
        ![newest_id.as_str(), other_id.as_str()].contains(&new_id.as_str()),
        "{state}"
    );
    assert_eq!(state["messageCount"], 0);
    p.exit_by_eof().await;
    assert_eq!(
        files_under(&dir),
        before,
        "an unused new session writes nothing"
    );

    // A session created now lands in the shared dir and becomes the newest for its cwd.
    let mut p = spawn(
        &agent,
        &cwd.path,
        &["--session-dir", &dir_arg, "--model", "mock/m1"],
    )
    .await;
    let created = session_id(&p.ready());
    mock.push(Step::text("brand new reply"));
    p.prompt_and_settle("p1", "brand new").await;
    p.exit_by_eof().await;
    assert!(dir.join(format!("{created}.jsonl")).is_file());
    let mut p = spawn(&agent, &cwd.path, &["--session-dir", &dir_arg, "-c"]).await;
    assert_eq!(session_id(&p.ready()), created);
    p.exit_by_eof().await;
    assert!(newest_path.is_file());

    // Without --session-dir, -c looks in the default dir, which has nothing for this cwd.
    let mut p = spawn(&agent, &cwd.path, &["-c"]).await;
    let state = p.ready();
    assert_ne!(session_id(&state), created);
    assert_eq!(state["messageCount"], 0);
    p.exit_by_eof().await;
}

/// Issue 23 C6: a cwd whose encoded name would exceed NAME_MAX gets a bounded session
/// directory; the run is saved, and `-c` and `session.list` find it again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cwd_too_long_for_a_directory_name_is_saved_continued_and_listed() {
    let mock = start_mock().await;
    let agent = agent_with(&mock, &["m1"]);
    let root = temp_cwd();
    let cwd = root
        .path
        .join("a".repeat(120))
        .join("b".repeat(120))
        .join("c".repeat(60));
    std::fs::create_dir_all(&cwd).unwrap();
    assert!(encoded_cwd(&cwd).len() > 255);
    let mut p = spawn(&agent, &cwd, &["--model", "mock/m1"]).await;
    let id = session_id(&p.ready());
    mock.push(Step::text("saved"));
    p.prompt_and_settle("p1", "first").await;
    let messages = all_messages(&mut p).await;
    assert_eq!(messages.len(), 2, "{messages:?}");
    assert_eq!(messages[1]["stopReason"], "stop", "{messages:?}");
    p.exit_by_eof().await;
    let journals = files_under(&agent.path().join("sessions"));
    assert_eq!(journals.len(), 1, "{journals:?}");
    let directory = journals[0].parent().unwrap().file_name().unwrap();
    assert!(directory.len() <= 255, "{directory:?}");
    assert_eq!(
        journals[0].file_name().unwrap(),
        format!("{id}.jsonl").as_str()
    );

    let mut c = spawn(&agent, &cwd, &["-c"]).await;
    assert_eq!(session_id(&c.ready()), id, "-c finds the session");
    let listed = c.request_ok("l1", "session.list", None).await;
    let sessions = listed["sessions"].as_array().unwrap();
    assert_eq!(sessions.len(), 1, "{listed}");
    assert_eq!(sessions[0]["sessionId"], id.as_str());
    assert_eq!(sessions[0]["cwd"], cwd.display().to_string());
    c.exit_by_eof().await;
}

// ---------------------------------------------------------------------------------------------
// 7. Saved model unavailable
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resuming_with_the_saved_model_gone_falls_back_with_a_warning() {
    let (mock, agent, cwd) = scene(&["m1"]).await;
    let (id, path) = recorded_session(&agent, &mock, &cwd.path, 1).await;

    // m1 disappears from models.json; m2 takes its place.
    agent.write("models.json", &mock.models_json(KEY, &reasoning(&["m2"])));
    let mut r = spawn(&agent, &cwd.path, &["-r", &path_arg(&path)]).await;
    let state = r.ready();
    assert_eq!(session_id(&state), id);
    assert_eq!(state["model"]["type"], "selected", "{state}");
    assert_eq!(state["model"]["model"]["id"], "m2", "{state}");
    assert_eq!(state["messageCount"], 2);
    // The fallback model answers the next prompt.
    mock.push(Step::text("from m2"));
    r.prompt_and_settle("p2", "who?").await;
    let body = mock.requests().pop().map(|r| r.body).unwrap_or_default();
    assert_eq!(body["model"], "m2");
    let stderr = r.exit_by_eof().await.stderr;
    let found = warnings(&stderr);
    assert!(
        found.iter().any(|w| w.contains("mock/m1")),
        "a Warning: line names the saved model: {stderr}"
    );

    // No models at all: RPC still starts, without a model.
    std::fs::remove_file(agent.path().join("models.json")).unwrap_or_else(|e| panic!("{e}"));
    std::fs::remove_file(agent.path().join("settings.json")).ok();
    let mut r = spawn(&agent, &cwd.path, &["-r", &path_arg(&path)]).await;
    let state = r.ready();
    assert_eq!(state["model"], json!({"type": "unselected"}), "{state}");
    assert_eq!(state["messageCount"], 4);
    let frame = r
        .request(
            "p3",
            "session.prompt",
            Some(json!({"delivery": "direct", "text": "anyone?"})),
        )
        .await;
    assert_eq!(frame["error"]["message"], NO_MODEL, "{frame}");
    let stderr = r.exit_by_eof().await.stderr;
    assert!(
        warnings(&stderr).iter().any(|w| w.contains("mock/m2")),
        "the saved model (now m2) is named: {stderr}"
    );
}
