//! Crash safety: SIGKILL at announced entries and at a random point leaves a journal that resumes
//! to what was announced.

use super::*;

const SIGKILL: i32 = 9;

// ---------------------------------------------------------------------------------------------
// 1. Crash safety
// ---------------------------------------------------------------------------------------------

const CRASH_PROMPTS: usize = 30;

/// Starts 30 queued prompts, SIGKILLs zi after `kill_after` `entry_appended` events, and checks
/// that every announced entry is on disk, byte-for-byte equal as JSON, and that the journal
/// resumes.
async fn crash_round(kill_after: usize) {
    let mock = start_mock().await;
    for n in 0..CRASH_PROMPTS {
        mock.push(Step::text(&format!("reply {n}")));
    }
    let agent = agent_with(&mock, &["m1"]);
    let cwd = temp_cwd();
    let mut p = spawn(&agent, &cwd.path, &["--model", "mock/m1"]).await;
    let id = session_id(&p.ready());
    // `continue` starts a run when idle and queues a follow-up while running.
    for n in 0..CRASH_PROMPTS {
        p.send(
            &format!("p{n}"),
            "session.prompt",
            Some(json!({"delivery": "continue", "text": format!("prompt {n}")})),
        )
        .await;
    }
    for _ in 0..kill_after {
        p.event("entry_appended").await;
    }
    p.signal(SIGKILL);
    let exited = p.wait_exit(WAIT).await;
    assert_eq!(exited.signal, Some(SIGKILL), "killed after {kill_after}");

    let announced = announced_entries(&p, kill_after);

    let path = default_journal(&agent, &cwd.path, &id);
    if !path.exists() {
        // Still pending: allowed only while no assistant message was announced.
        assert!(
            announced
                .iter()
                .all(|e| e["message"]["role"] != "assistant"),
            "an assistant message was announced but no journal exists (kill after {kill_after})"
        );
        return;
    }
    let journal = read_journal(&path);
    eprintln!(
        "kill after {kill_after}: {} announced, {} on disk, torn tail: {}",
        announced.len(),
        journal.entries.len(),
        journal.torn.is_some()
    );
    assert_eq!(journal.header["type"], "session");
    assert_eq!(journal.header["version"], 2);
    assert_eq!(journal.header["id"], id.as_str());
    assert_eq!(journal.header["cwd"], cwd.path.display().to_string());

    assert_announced_entries_on_disk(kill_after, &announced, &journal);

    // Resume the crashed journal with `-r FILE`.
    let mock2 = start_mock().await;
    agent.write("models.json", &mock2.models_json(KEY, &reasoning(&["m1"])));
    let mut r = spawn(&agent, &cwd.path, &["-r", &path_arg(&path)]).await;
    let state = r.ready();
    assert_eq!(session_id(&state), id);
    assert_eq!(state["activity"], json!({"type": "idle"}));
    assert_eq!(state["model"]["model"]["id"], "m1", "{state}");
    let on_disk = journal_messages(&journal.entries);
    assert_eq!(state["messageCount"], json!(on_disk.len()), "{state}");
    assert_eq!(all_messages(&mut r).await, on_disk);

    // And it keeps going: a new prompt extends the same chain.
    mock2.push(Step::text("after the crash"));
    r.prompt_and_settle("after", "after the crash?").await;
    let stderr = r.exit_by_eof().await.stderr;
    if journal.torn.is_some() {
        assert!(
            !warnings(&stderr).is_empty(),
            "a repair is reported: {stderr}"
        );
    } else {
        assert!(warnings(&stderr).is_empty(), "{stderr}");
    }
    let after = read_journal(&path);
    assert!(after.torn.is_none() && after.ends_with_newline);
    assert_eq!(
        &after.entries[..journal.entries.len()],
        &journal.entries[..]
    );
    let messages = journal_messages(&after.entries);
    let tail: Vec<String> = messages[messages.len() - 2..]
        .iter()
        .map(|m| text_of(&m["content"]))
        .collect();
    assert_eq!(tail, ["after the crash?", "after the crash"]);
}

/// Everything zi wrote to stdout before dying, including frames read after the kill: the
/// announced entries (at least `kill_after`), and no prompt refused.
fn announced_entries(p: &Harness, kill_after: usize) -> Vec<Value> {
    let announced: Vec<Value> = p
        .frames()
        .iter()
        .filter(|f| f["type"] == "session_event" && f["event"]["type"] == "entry_appended")
        .map(|f| f["event"]["entry"].clone())
        .collect();
    for f in p.frames() {
        if f["type"] == "response" {
            assert_eq!(f["ok"], true, "a prompt was refused: {f}");
        }
    }
    assert!(announced.len() >= kill_after);
    announced
}

/// Announced entries appear on disk, identical and in order; user and assistant messages
/// alternate.
fn assert_announced_entries_on_disk(kill_after: usize, announced: &[Value], journal: &JournalText) {
    let mut cursor = 0;
    for entry in announced {
        let found = journal.entries[cursor..]
            .iter()
            .position(|e| e == entry)
            .unwrap_or_else(|| {
                panic!(
                    "kill after {kill_after}: announced entry missing from (or out of order in) \
                     the journal: {entry}\n{} entries on disk, torn tail: {:?}",
                    journal.entries.len(),
                    journal.torn
                )
            });
        cursor += found + 1;
    }
    // Nothing on disk is out of order: user / assistant alternate.
    let roles: Vec<String> = journal_messages(&journal.entries)
        .iter()
        .map(|m| m["role"].as_str().unwrap_or_default().to_string())
        .collect();
    for (n, role) in roles.iter().enumerate() {
        let expected = if n % 2 == 0 { "user" } else { "assistant" };
        assert_eq!(role, expected, "message {n} of {roles:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_after_the_first_announced_entry() {
    crash_round(1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_after_two_announced_entries() {
    crash_round(2).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_after_nine_announced_entries() {
    crash_round(9).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_after_twenty_six_announced_entries() {
    crash_round(26).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_after_forty_seven_announced_entries() {
    crash_round(47).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_at_a_random_point() {
    let nanos = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos() as usize);
    let kill_after = 2 + nanos % (2 * CRASH_PROMPTS - 2);
    eprintln!("killing after {kill_after} entry_appended events");
    crash_round(kill_after).await;
}
