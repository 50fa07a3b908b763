//! Damaged journals: torn-tail repair, the 64 MiB bound, missing or corrupt files; pending journals
//! and `--no-session`.

use super::*;

const MAX_JOURNAL_BYTES: u64 = 64 * 1024 * 1024;

// ---------------------------------------------------------------------------------------------
// 4. Torn-tail repair
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_torn_final_line_is_removed_on_resume() {
    let recorded = Recorded::new().await;
    // Half of an entry line, as a crash in the middle of a write would leave it.
    let half = r#"{"type":"message","message":{"role":"user","content":[{"type":"text","te"#;
    let mut torn = recorded.bytes.clone();
    torn.extend_from_slice(half.as_bytes());
    std::fs::write(&recorded.path, &torn).unwrap_or_else(|e| panic!("{e}"));

    let (ready, after) = recorded.resume_repaired("after repair").await;
    assert_eq!(session_id(&ready), recorded.id);
    let clean = &recorded.journal;
    let added = &after.entries[clean.entries.len()..];
    assert_eq!(added.len(), 2, "{added:?}");
    assert_eq!(text_of(&added[0]["message"]["content"]), "after repair?");
    assert_eq!(text_of(&added[1]["message"]["content"]), "after repair");
    assert_eq!(
        added[0]["parentId"],
        clean
            .entries
            .last()
            .map_or(Value::Null, |e| e["id"].clone())
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_complete_last_entry_missing_its_newline_is_kept() {
    let recorded = Recorded::new().await;
    let clean_bytes = &recorded.bytes;
    std::fs::write(&recorded.path, &clean_bytes[..clean_bytes.len() - 1])
        .unwrap_or_else(|e| panic!("{e}"));

    let (_, after) = recorded.resume_repaired("still fine").await;
    assert_eq!(journal_messages(&after.entries).len(), 4);
}

/// A persistent session with one exchange, as it was written.
struct Recorded {
    mock: MockLlm,
    agent: AgentDir,
    cwd: TempCwd,
    id: String,
    path: PathBuf,
    journal: JournalText,
    bytes: Vec<u8>,
}

impl Recorded {
    async fn new() -> Recorded {
        let (mock, agent, cwd) = scene(&["m1"]).await;
        let (id, path) = recorded_session(&agent, &mock, &cwd.path, 1).await;
        let journal = read_journal(&path);
        let bytes = std::fs::read(&path).unwrap_or_default();
        Recorded {
            mock,
            agent,
            cwd,
            id,
            path,
            journal,
            bytes,
        }
    }

    /// Resumes the damaged journal, which zi must repair at open back to the clean bytes (with
    /// one warning), and runs one more exchange (`{reply}?` answered `reply`); returns the ready
    /// state and the journal afterwards, which starts with the clean entries.
    async fn resume_repaired(&self, reply: &str) -> (Value, JournalText) {
        let mut r = spawn(&self.agent, &self.cwd.path, &["-r", &path_arg(&self.path)]).await;
        let ready = r.ready();
        assert_eq!(ready["messageCount"], 2);
        assert_eq!(
            std::fs::read(&self.path).unwrap_or_default(),
            self.bytes,
            "repaired at open: the torn bytes are gone and the last entry ends with a newline"
        );
        self.mock.push(Step::text(reply));
        r.prompt_and_settle("p2", &format!("{reply}?")).await;
        let stderr = r.exit_by_eof().await.stderr;
        assert_eq!(warnings(&stderr).len(), 1, "one repair warning: {stderr}");
        let after = read_journal(&self.path);
        assert!(after.torn.is_none() && after.ends_with_newline);
        let clean = &self.journal.entries;
        assert_eq!(&after.entries[..clean.len()], &clean[..]);
        (ready, after)
    }
}

// ---------------------------------------------------------------------------------------------
// 5. 64 MiB bound
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_journal_over_64_mib_is_refused_before_ready() {
    let (_mock, agent, cwd) = scene(&["m1"]).await;
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let path = dir.path().join("huge.jsonl");
    write_journal(&path, &uuid_like("huge", 0), &cwd.path, &["hi", "hello"]);
    // Sparse padding past the bound: the size check comes before any parsing.
    std::fs::File::options()
        .write(true)
        .open(&path)
        .and_then(|f| f.set_len(MAX_JOURNAL_BYTES + 1))
        .unwrap_or_else(|e| panic!("{e}"));

    let stderr = resume_fails(&agent, &cwd.path, &path).await;
    assert!(
        stderr.contains(&path_arg(&path)),
        "names the file: {stderr}"
    );
    assert!(
        stderr.contains("exceeds") && stderr.contains(&MAX_JOURNAL_BYTES.to_string()),
        "explains the bound: {stderr}"
    );
    assert_eq!(
        std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0),
        MAX_JOURNAL_BYTES + 1,
        "the file is left alone"
    );
}

/// Runs `zi --mode rpc … -r FILE` with empty stdin and expects a startup failure.
async fn resume_fails(agent: &AgentDir, cwd: &Path, path: &Path) -> String {
    let finished = builder(agent, cwd, &["-r", &path_arg(path)])
        .run_to_end(b"", WAIT)
        .await
        .unwrap_or_else(|e| panic!("run zi: {e}"));
    assert_eq!(finished.code, Some(1), "stderr: {}", finished.stderr_text());
    assert!(
        finished.stdout.is_empty(),
        "no ready frame: {}",
        finished.stdout_text()
    );
    finished.stderr_text()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_or_corrupt_journals_are_refused_before_ready() {
    let (_mock, agent, cwd) = scene(&["m1"]).await;
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));

    let missing = dir.path().join("missing.jsonl");
    let stderr = resume_fails(&agent, &cwd.path, &missing).await;
    assert!(stderr.contains(&path_arg(&missing)), "{stderr}");
    assert!(!missing.exists());

    // A malformed line in the middle is corruption, not a torn tail.
    let corrupt = dir.path().join("corrupt.jsonl");
    write_journal(
        &corrupt,
        &uuid_like("corrupt", 0),
        &cwd.path,
        &["a", "b", "c", "d"],
    );
    let text = std::fs::read_to_string(&corrupt).unwrap_or_default();
    let mut lines: Vec<&str> = text.lines().collect();
    lines[2] = r#"{"type":"message","message":"#;
    let broken = format!("{}\n", lines.join("\n"));
    std::fs::write(&corrupt, &broken).unwrap_or_else(|e| panic!("{e}"));
    let stderr = resume_fails(&agent, &cwd.path, &corrupt).await;
    assert!(stderr.contains(&path_arg(&corrupt)), "{stderr}");
    assert_eq!(
        std::fs::read_to_string(&corrupt).unwrap_or_default(),
        broken,
        "a corrupt journal is not modified"
    );

    // A journal whose working directory is gone cannot be resumed.
    let gone = temp_cwd();
    let orphan = dir.path().join("orphan.jsonl");
    write_journal(&orphan, &uuid_like("orphan", 0), &gone.path, &["a", "b"]);
    drop(gone);
    let stderr = resume_fails(&agent, &cwd.path, &orphan).await;
    assert!(!stderr.trim().is_empty());
}

// ---------------------------------------------------------------------------------------------
// 6. Pending journals and --no-session
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_session_never_writes_a_journal() {
    let (mock, agent, cwd) = scene(&["m1", "m2"]).await;
    let unused = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let session_dir = unused.path().join("never");
    let mut p = spawn(
        &agent,
        &cwd.path,
        &[
            "--no-session",
            "--session-dir",
            &path_arg(&session_dir),
            "--model",
            "mock/m1",
        ],
    )
    .await;
    let id = session_id(&p.ready());
    assert_eq!(id.len(), 36, "still a UUID");
    mock.push(Step::text("one"));
    p.prompt_and_settle("p1", "first").await;
    select_m2_thinking(&mut p, "high").await;
    mock.push(Step::text("two"));
    p.prompt_and_settle("p2", "second").await;
    assert_eq!(
        p.request_ok("s", "session.get_state", None).await["messageCount"],
        4
    );
    p.exit_by_eof().await;
    assert_eq!(
        files_under(&agent.path().join("sessions")),
        Vec::<PathBuf>::new()
    );
    assert!(!session_dir.exists(), "--session-dir is not created either");
    assert!(!cwd.path.join(".zi").exists());
    let stray: Vec<PathBuf> = files_under(agent.path())
        .into_iter()
        .filter(|f| f.extension().is_some_and(|e| e == "jsonl"))
        .collect();
    assert!(stray.is_empty(), "{stray:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_session_writes_nothing_before_its_first_assistant_message() {
    // No models at all: prompts fail before any provider call.
    let agent = AgentDir::new();
    let cwd = temp_cwd();
    let sessions = agent.path().join("sessions");
    let mut p = spawn(&agent, &cwd.path, &[]).await;
    let state = p.ready();
    assert_eq!(state["model"], json!({"type": "unselected"}));
    let frame = p
        .request(
            "p1",
            "session.prompt",
            Some(json!({"delivery": "direct", "text": "hello?"})),
        )
        .await;
    assert_eq!(frame["ok"], false, "{frame}");
    assert_eq!(frame["error"]["message"], NO_MODEL, "{frame}");
    // Queued input alone does not need a model and writes nothing either.
    p.request_ok(
        "q1",
        "session.prompt",
        Some(json!({"delivery": "follow_up", "text": "later"})),
    )
    .await;
    assert_eq!(files_under(&sessions), Vec::<PathBuf>::new());
    p.exit_by_eof().await;
    assert_eq!(files_under(&sessions), Vec::<PathBuf>::new());

    // With a model: selecting a thinking level journals only in memory until the first reply.
    let mock = start_mock().await;
    agent.write("models.json", &mock.models_json(KEY, &reasoning(&["m1"])));
    let mut p = spawn(&agent, &cwd.path, &["--model", "mock/m1"]).await;
    let id = session_id(&p.ready());
    p.request_ok("ts", "thinking.select", Some(json!({"level": "high"})))
        .await;
    assert_eq!(files_under(&sessions), Vec::<PathBuf>::new());
    mock.push(Step::text("first reply"));
    p.prompt_and_settle("p1", "first").await;
    let path = default_journal(&agent, &cwd.path, &id);
    assert_eq!(files_under(&sessions), std::slice::from_ref(&path));
    let mode = std::fs::metadata(&path)
        .map(|m| m.permissions().mode() & 0o777)
        .unwrap_or_default();
    assert_eq!(mode, 0o600, "journal mode {mode:o}");
    // The buffered entries were written with it, in order.
    let journal = read_journal(&path);
    let types: Vec<&str> = journal
        .entries
        .iter()
        .map(|e| e["type"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(types.last(), Some(&"message"));
    assert!(types.contains(&"thinking_level_change"), "{types:?}");
    let last_thinking = journal
        .entries
        .iter()
        .rev()
        .find(|e| e["type"] == "thinking_level_change")
        .cloned()
        .unwrap_or_default();
    assert_eq!(last_thinking["thinkingLevel"], "high");
    p.exit_by_eof().await;
}
