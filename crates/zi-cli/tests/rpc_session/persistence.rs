//! The session journal (docs/configuration.md#session-journals): private, linear, pending until the
//! first assistant message, absent with `--no-session`.

use super::*;

// ---------------------------------------------------------------------------------------------
// 9. Journal
// ---------------------------------------------------------------------------------------------

fn encoded_cwd(cwd: &Path) -> String {
    let text = cwd.display().to_string();
    let trimmed = text.strip_prefix('/').unwrap_or(&text);
    format!("--{}--", trimmed.replace(['/', '\\', ':'], "-"))
}

fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return found;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            found.extend(files_under(&path));
        } else {
            found.push(path);
        }
    }
    found
}

fn is_iso_millis(text: &str) -> bool {
    // YYYY-MM-DDTHH:MM:SS.mmmZ
    let b = text.as_bytes();
    b.len() == 24
        && b.iter().enumerate().all(|(i, c)| match i {
            4 | 7 => *c == b'-',
            10 => *c == b'T',
            13 | 16 => *c == b':',
            19 => *c == b'.',
            23 => *c == b'Z',
            _ => c.is_ascii_digit(),
        })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn persistent_session_writes_a_private_linear_journal() {
    let mock = start_mock().await;
    mock.push(Step::text("journal reply"));
    let agent = agent_with(&mock, &reasoning_m1());
    let cwd = temp_cwd();
    let mut p = spawn(&agent, &cwd.path, &["--model", "mock/m1"]).await;
    let session_id = p.ready()["sessionId"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert_eq!(session_id.len(), 36, "a UUID: {session_id}");

    let events = run_direct(&mut p, "p1", "hello journal").await;
    let path = agent
        .path()
        .join("sessions")
        .join(encoded_cwd(&cwd.path))
        .join(format!("{session_id}.jsonl"));
    assert!(
        path.is_file(),
        "no journal at {}; files: {:?}",
        path.display(),
        files_under(&agent.path().join("sessions"))
    );
    assert_eq!(
        files_under(&agent.path().join("sessions")),
        std::slice::from_ref(&path)
    );
    let mode = std::fs::metadata(&path)
        .map(|m| m.permissions().mode() & 0o777)
        .unwrap_or_default();
    assert_eq!(mode, 0o600, "journal mode {mode:o}");

    let text = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(text.ends_with('\n'));
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("journal line {l}: {e}")))
        .collect();
    let header = &lines[0];
    assert_eq!(header["type"], "session", "{header}");
    assert_eq!(header["version"], 2, "{header}");
    assert_eq!(header["id"], session_id.as_str(), "{header}");
    assert_eq!(header["cwd"], cwd.path.display().to_string(), "{header}");
    assert!(
        header["timestamp"]
            .as_str()
            .is_some_and(|t| t.contains('T')),
        "{header}"
    );

    let entries = &lines[1..];
    let mut previous = Value::Null;
    for entry in entries {
        assert!(
            entry["id"].as_str().is_some_and(|id| id.len() == 36),
            "{entry}"
        );
        assert_eq!(entry["parentId"], previous, "linear chain: {entry}");
        assert!(
            entry["timestamp"].as_str().is_some_and(is_iso_millis),
            "{entry}"
        );
        previous = entry["id"].clone();
    }
    let messages: Vec<&Value> = entries.iter().filter(|e| e["type"] == "message").collect();
    assert_eq!(messages.len(), 2, "{text}");
    assert_eq!(messages[0]["message"]["role"], "user");
    assert_eq!(text_of(&messages[0]["message"]["content"]), "hello journal");
    assert_eq!(messages[1]["message"]["role"], "assistant");
    assert_eq!(text_of(&messages[1]["message"]["content"]), "journal reply");

    // The announced entries are the ones on disk.
    let announced: Vec<Value> = events
        .iter()
        .filter(|e| e["type"] == "entry_appended")
        .map(|e| e["entry"].clone())
        .collect();
    assert_eq!(announced.len(), 2);
    assert_eq!(announced[0], *messages[0]);
    assert_eq!(announced[1], *messages[1]);

    p.exit_by_eof().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn journal_stays_pending_until_the_first_assistant_message() {
    let mock = start_mock().await;
    mock.push(Step::Hang(vec!["slow".into()]));
    let agent = agent_with(&mock, &reasoning_m1());
    let cwd = temp_cwd();
    let mut p = spawn(&agent, &cwd.path, &["--model", "mock/m1"]).await;
    let sessions = agent.path().join("sessions");

    let response = prompt_ok(&mut p, "p1", "direct", "first", None).await;
    // The user message is committed and the assistant is streaming: nothing on disk yet.
    update_after(&mut p, "text_delta", seq(&response)).await;
    assert_eq!(files_under(&sessions), Vec::<PathBuf>::new());

    // The aborted assistant message is the first assistant entry: the file appears.
    p.request_ok("i1", "session.interrupt", None).await;
    let files = files_under(&sessions);
    assert_eq!(files.len(), 1, "{files:?}");
    let text = std::fs::read_to_string(&files[0]).unwrap_or_default();
    let lines: Vec<Value> = text
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    assert_eq!(lines[0]["type"], "session");
    let roles: Vec<&Value> = lines
        .iter()
        .filter(|l| l["type"] == "message")
        .map(|l| &l["message"]["role"])
        .collect();
    assert_eq!(roles, [&json!("user"), &json!("assistant")], "{text}");
    let last = lines.last().cloned().unwrap_or_default();
    assert_eq!(last["message"]["stopReason"], "aborted", "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_session_writes_nothing() {
    let mock = start_mock().await;
    mock.push(Step::text("ephemeral"));
    let agent = agent_with(&mock, &reasoning_m1());
    let cwd = temp_cwd();
    let mut p = spawn_m1(&agent, &cwd.path).await;
    run_direct(&mut p, "p1", "hello").await;
    p.exit_by_eof().await;
    assert_eq!(
        files_under(&agent.path().join("sessions")),
        Vec::<PathBuf>::new()
    );
    assert!(!cwd.path.join(".zi").exists());
}
