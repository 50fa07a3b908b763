//! Write failures (docs/configuration.md#session-journals): a full disk, a journal that cannot be
//! created, a session dir that is a file, print mode.

use super::*;

// ---------------------------------------------------------------------------------------------
// Write failures: a full disk, an uncreatable journal (docs/configuration.md#session-journals)
// ---------------------------------------------------------------------------------------------
//
// A full disk is simulated with the file-size limit of the zi process (RLIMIT_FSIZE, changed
// from outside with prlimit): a write past it is cut short and the next one fails with EFBIG,
// exactly like ENOSPC in the middle of a line. zi catches SIGXFSZ, so the limit cannot kill it.

/// Sets the soft file-size limit of process `pid` (`None`: unlimited).
fn limit_file_size(pid: u32, bytes: Option<u64>) {
    let limit = libc::rlimit {
        rlim_cur: bytes.unwrap_or(libc::RLIM_INFINITY),
        rlim_max: libc::RLIM_INFINITY,
    };
    // SAFETY: prlimit reads `limit` and writes nothing (the old-limit pointer is null).
    let result = unsafe {
        libc::prlimit(
            pid as libc::pid_t,
            libc::RLIMIT_FSIZE,
            &limit,
            std::ptr::null_mut(),
        )
    };
    assert_eq!(result, 0, "prlimit: {}", std::io::Error::last_os_error());
}

/// Spawns zi with `--session-dir DIR`; returns it and the path its journal will have.
async fn spawn_in_session_dir(
    agent: &AgentDir,
    cwd: &Path,
    dir: &Path,
    extra: &[&str],
) -> (Harness, PathBuf) {
    let dir_arg = path_arg(dir);
    let mut args = vec!["--model", "mock/m1", "--session-dir", &dir_arg];
    args.extend(extra);
    let p = spawn(agent, cwd, &args).await;
    let journal = dir.join(format!("{}.jsonl", session_id(&p.ready())));
    (p, journal)
}

/// The session events among the frames received since frame `start`.
fn events_since(p: &Harness, start: usize) -> Vec<Value> {
    p.frames()[start..]
        .iter()
        .filter(|f| f["type"] == "session_event")
        .map(|f| f["event"].clone())
        .collect()
}

fn file_len(path: &Path) -> u64 {
    std::fs::metadata(path).map_or(0, |m| m.len())
}

/// One direct prompt with a completion id, to settlement. Returns the `await_idle` result's
/// `completion` and the session events of the run.
async fn prompt_to_completion(p: &mut Harness, id: &str, text: &str) -> (Value, Vec<Value>) {
    let start = p.frames().len();
    let admitted = p
        .request(
            &format!("{id}-prompt"),
            "session.prompt",
            Some(json!({"delivery": "direct", "text": text, "completionId": id})),
        )
        .await;
    assert_eq!(
        admitted["ok"], true,
        "prompt {id} was not admitted: {admitted}"
    );
    let idle = p
        .request_ok(
            &format!("{id}-idle"),
            "session.await_idle",
            Some(json!({"completionId": id})),
        )
        .await;
    (idle["completion"].clone(), events_since(p, start))
}

/// The entries the client was told about (`entry_appended`).
fn acknowledged(events: &[Value]) -> Vec<Value> {
    events
        .iter()
        .filter(|e| e["type"] == "entry_appended")
        .map(|e| e["entry"].clone())
        .collect()
}

/// The events of a run stopped by a journal failure: the run ends with an assistant
/// `message_end` (stop reason `error`) naming the journal, which is also the completion; no
/// `entry_appended` announces anything that was not saved.
fn assert_failed_visibly(completion: &Value, events: &[Value], journal: &Path) {
    assert_eq!(completion["stopReason"], "error", "{completion}");
    let error = completion["error"].as_str().unwrap_or_default();
    assert!(
        error.contains(&journal.display().to_string()),
        "the error names the journal {}: {error}",
        journal.display()
    );
    assert!(error.contains("journal"), "{error}");
    let last_end = events
        .iter()
        .rev()
        .find(|e| e["type"] == "message_end")
        .unwrap_or_else(|| panic!("no message_end: {events:?}"));
    assert_eq!(last_end["message"]["role"], "assistant", "{last_end}");
    assert_eq!(last_end["message"]["stopReason"], "error", "{last_end}");
    assert_eq!(last_end["message"]["errorMessage"].as_str(), Some(error));
    let agent_end = events
        .iter()
        .find(|e| e["type"] == "agent_end")
        .unwrap_or_else(|| panic!("no agent_end: {events:?}"));
    assert_eq!(agent_end["willRetry"], false, "{agent_end}");
    let ended = agent_end["messages"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(
        ended.last().map(|m| &m["errorMessage"]),
        Some(&json!(error)),
        "agent_end ends with the failure: {agent_end}"
    );
    // Every message_start has its message_end.
    let count = |ty: &str| events.iter().filter(|e| e["type"] == ty).count();
    assert_eq!(count("message_start"), count("message_end"), "{events:?}");
    assert_eq!(count("agent_settled"), 1);
}

/// The journal's `message` entries are exactly the acknowledged ones, in order.
fn assert_journal_holds(journal: &Path, acknowledged: &[Value]) {
    let on_disk = read_journal(journal);
    assert_eq!(
        on_disk.torn,
        None,
        "no partial line in {}",
        journal.display()
    );
    assert!(on_disk.ends_with_newline);
    let saved: Vec<&Value> = on_disk
        .entries
        .iter()
        .filter(|e| e["type"] == "message")
        .collect();
    let announced: Vec<&Value> = acknowledged
        .iter()
        .filter(|e| e["type"] == "message")
        .collect();
    assert_eq!(
        saved, announced,
        "the journal holds every acknowledged entry"
    );
}

/// A bash call that waits for `gate` to exist, then prints 20,000 bytes.
fn gated_output_call(gate: &Path) -> Step {
    let command = format!(
        "while [ ! -e {} ]; do sleep 0.05; done; head -c 20000 /dev/zero | tr '\\0' y",
        gate.display()
    );
    Step::tool_call("call-1", "bash", json!({"command": command}))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_fails_the_run_visibly_and_never_tears_the_journal() {
    let (mock, agent, cwd) = scene(&["m1"]).await;
    let sessions = cwd.path.join("sessions");
    let (mut p, journal) = spawn_in_session_dir(&agent, &cwd.path, &sessions, &[]).await;
    let mut announced = Vec::new();

    mock.push(Step::text("first reply"));
    let (completion, events) = prompt_to_completion(&mut p, "c1", "one").await;
    assert_eq!(completion["stopReason"], "stop", "{completion}");
    announced.extend(acknowledged(&events));

    // The disk fills up in the middle of the next line (the user message).
    let before = std::fs::read(&journal).unwrap_or_else(|e| panic!("{e}"));
    limit_file_size(p.pid(), Some(before.len() as u64 + 40));
    let (completion, events) = prompt_to_completion(&mut p, "c2", "two").await;
    assert_failed_visibly(&completion, &events, &journal);
    assert!(acknowledged(&events).is_empty(), "{events:?}");
    assert_eq!(
        std::fs::read(&journal).unwrap_or_default(),
        before,
        "the failed append left the file exactly as it was"
    );

    // Space comes back: the next prompt is saved after the last complete line.
    limit_file_size(p.pid(), None);
    mock.push(Step::text("third reply"));
    let (completion, events) = prompt_to_completion(&mut p, "c3", "three").await;
    assert_eq!(completion["stopReason"], "stop", "{completion}");
    assert_eq!(completion["text"], "third reply");
    announced.extend(acknowledged(&events));

    // The disk fills up in the middle of a long assistant reply: the user message is saved,
    // the streamed reply ends as an error naming the journal.
    limit_file_size(p.pid(), Some(file_len(&journal) + 2_000));
    mock.push(Step::Bytes {
        total_bytes: 20_000,
        delta_bytes: 1_000,
    });
    let (completion, events) = prompt_to_completion(&mut p, "c4", "four").await;
    assert_failed_visibly(&completion, &events, &journal);
    assert_eq!(completion["text"].as_str().map(str::len), Some(20_000));
    let saved = acknowledged(&events);
    assert_eq!(saved.len(), 1, "only the user message was saved: {saved:?}");
    assert_eq!(saved[0]["message"]["role"], "user");
    announced.extend(saved);
    assert_journal_holds(&journal, &announced);

    // The disk fills up while a tool runs: its result is not saved.
    a_full_disk_while_a_tool_runs(&mut p, &mock, &cwd, &journal, &mut announced).await;
    p.exit_by_eof().await;

    // `-c` reopens the session with every acknowledged entry and keeps appending.
    let (mut p, continued) = spawn_in_session_dir(&agent, &cwd.path, &sessions, &["-c"]).await;
    assert_eq!(continued, journal, "-c picked the session");
    let expected: Vec<Value> = announced
        .iter()
        .filter(|e| e["type"] == "message")
        .map(|e| e["message"].clone())
        .collect();
    assert_eq!(all_messages(&mut p).await, expected);
    assert_eq!(
        texts(&expected)[..5],
        ["one", "first reply", "three", "third reply", "four"]
    );
    mock.push(Step::text("sixth reply"));
    let (completion, _) = prompt_to_completion(&mut p, "c6", "six").await;
    assert_eq!(completion["stopReason"], "stop", "{completion}");
    p.exit_by_eof().await;
    assert!(read_journal(&journal).torn.is_none());
}

/// The disk fills up while a tool runs: its result is not saved, what was announced is on disk.
async fn a_full_disk_while_a_tool_runs(
    p: &mut Harness,
    mock: &MockLlm,
    cwd: &TempCwd,
    journal: &Path,
    announced: &mut Vec<Value>,
) {
    limit_file_size(p.pid(), None);
    let gate = cwd.path.join("gate");
    mock.push(gated_output_call(&gate));
    p.send(
        "c5-prompt",
        "session.prompt",
        Some(json!({"delivery": "direct", "text": "five", "completionId": "c5"})),
    )
    .await;
    let start = p.frames().len();
    p.event("tool_execution_start").await;
    limit_file_size(p.pid(), Some(file_len(journal) + 100));
    std::fs::write(&gate, b"").unwrap_or_else(|e| panic!("{e}"));
    let idle = p
        .request_ok(
            "c5-idle",
            "session.await_idle",
            Some(json!({"completionId": "c5"})),
        )
        .await;
    let events = events_since(p, start);
    assert_failed_visibly(&idle["completion"], &events, journal);
    let unsaved_result = events
        .iter()
        .find(|e| e["type"] == "message_end" && e["message"]["role"] == "toolResult")
        .unwrap_or_else(|| panic!("the tool result is ended: {events:?}"));
    assert!(unsaved_result["message"]["toolCallId"] == "call-1");
    assert!(
        acknowledged(&events)
            .iter()
            .all(|e| e["message"]["role"] != "toolResult"),
        "the tool result was not saved"
    );
    announced.extend(
        p.frames()
            .iter()
            .filter(|f| f["type"] == "session_event" && f["event"]["type"] == "entry_appended")
            .map(|f| f["event"]["entry"].clone())
            .filter(|e| !announced.contains(e))
            .collect::<Vec<_>>(),
    );
    assert_journal_holds(journal, announced);
    limit_file_size(p.pid(), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_journal_that_cannot_be_created_fails_visibly_leaves_no_file_and_is_retried() {
    let (mock, agent, cwd) = scene(&["m1"]).await;
    let sessions = cwd.path.join("sessions");
    std::fs::create_dir_all(&sessions).unwrap_or_else(|e| panic!("{e}"));
    let (mut p, journal) = spawn_in_session_dir(&agent, &cwd.path, &sessions, &[]).await;

    // The disk is full when the journal is created (at the first assistant message).
    limit_file_size(p.pid(), Some(10));
    mock.push(Step::text("lost reply"));
    let (completion, events) = prompt_to_completion(&mut p, "c1", "one").await;
    assert_failed_visibly(&completion, &events, &journal);
    assert_eq!(
        completion["text"], "lost reply",
        "the streamed text is reported"
    );
    assert_eq!(
        files_under(&sessions),
        Vec::<PathBuf>::new(),
        "no empty or partial journal is left"
    );
    let pending = acknowledged(&events);

    // A later prompt creates it: the pending user message and the new exchange are saved.
    limit_file_size(p.pid(), None);
    mock.push(Step::text("second reply"));
    let (completion, events) = prompt_to_completion(&mut p, "c2", "two").await;
    assert_eq!(completion["stopReason"], "stop", "{completion}");
    let mut announced = pending;
    announced.extend(acknowledged(&events));
    assert_journal_holds(&journal, &announced);
    assert_eq!(
        texts(&journal_messages(&read_journal(&journal).entries)),
        ["one", "two", "second reply"]
    );
    p.exit_by_eof().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_dir_that_is_a_file_fails_every_run_visibly() {
    let (mock, agent, cwd) = scene(&["m1"]).await;
    let blocker = cwd.path.join("not-a-dir");
    std::fs::write(&blocker, b"a file").unwrap_or_else(|e| panic!("{e}"));
    for session_dir in [blocker.clone(), blocker.join("below")] {
        let (mut p, journal) = spawn_in_session_dir(&agent, &cwd.path, &session_dir, &[]).await;
        for n in 0..2 {
            mock.push(Step::text("unsaved reply"));
            let (completion, events) =
                prompt_to_completion(&mut p, &format!("c{n}"), "hello").await;
            assert_failed_visibly(&completion, &events, &journal);
        }
        let stderr = p.exit_by_eof().await.stderr;
        assert!(stderr.contains("journal"), "{stderr}");
        assert_eq!(std::fs::read(&blocker).unwrap_or_default(), b"a file");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn print_mode_reports_a_journal_that_cannot_be_written() {
    let mock = start_mock().await;
    mock.push(Step::text("unsaved reply"));
    let agent = agent_with(&mock, &["m1"]);
    let cwd = temp_cwd();
    let blocker = cwd.path.join("not-a-dir");
    std::fs::write(&blocker, b"a file").unwrap_or_else(|e| panic!("{e}"));
    let finished = ZiCommand::new(env!("CARGO_BIN_EXE_zi"))
        .args(["--agent-dir"])
        .arg(agent.path())
        .arg("--cwd")
        .arg(&cwd.path)
        .args(["--model", "mock/m1", "--session-dir"])
        .arg(&blocker)
        .args(["-p", "hello"])
        .current_dir(&cwd.path)
        .run_to_end(b"", WAIT)
        .await
        .unwrap_or_else(|e| panic!("run zi -p: {e}"));
    let stderr = finished.stderr_text();
    assert_eq!(finished.code, Some(1), "stderr: {stderr}");
    assert!(
        stderr.contains("session journal could not be written")
            && stderr.contains(&blocker.display().to_string()),
        "{stderr}"
    );
}
