//! Start and end of the terminal view: quitting and signals restore the terminal, `--continue`, large
//! journals, start-up warnings.

use super::*;

const SIGTERM: i32 = 15;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streamed_answer_renders_and_sigterm_restores_the_terminal() {
    let mock = start_mock().await;
    mock.push(Step::Text(vec![
        "Hel".into(),
        "lo from ".into(),
        "the **mock**".into(),
    ]));
    let agent = agent_with(&mock);
    let cwd = temp_cwd();
    let tmux = Tmux::start(&zi(&agent, &cwd.path, &["--no-session"]), 80, 24);
    let screen = tmux.wait_for("ready").await;
    assert!(
        screen.contains("mock/m1"),
        "the status line names the model:\n{screen}"
    );
    assert_eq!(
        tmux.display("#{alternate_on}"),
        "1",
        "the screen is the alternate one"
    );
    tmux.type_text("say hello");
    tmux.keys(&["Enter"]);
    let screen = tmux.wait_for("Hello from the mock").await;
    assert!(
        screen.contains("› say hello"),
        "the prompt is in the transcript:\n{screen}"
    );
    let requests = mock.wait_for_requests(1, WAIT).await;
    assert_eq!(user_texts(&requests[0].body), ["say hello"]);
    tmux.wait_for("ready").await;

    tmux.signal(SIGTERM).await;
    assert_eq!(tmux.exit_status().await, 128 + SIGTERM);
    tmux.assert_restored().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_d_on_an_empty_composer_quits_and_restores_the_terminal() {
    let mock = start_mock().await;
    let agent = agent_with(&mock);
    let cwd = temp_cwd();
    let tmux = Tmux::start(&zi(&agent, &cwd.path, &["--no-session"]), 80, 24);
    tmux.wait_for("ready").await;
    tmux.type_text("x");
    // Ctrl+D with text deletes under the cursor instead; Ctrl+U empties the line.
    tmux.keys(&["C-u", "C-d"]);
    assert_eq!(tmux.exit_status().await, 0);
    tmux.assert_restored().await;
    assert!(
        !agent.path().join("interactive.log").exists()
            || std::fs::read_to_string(agent.path().join("interactive.log"))
                .unwrap()
                .lines()
                .all(|l| !l.contains("panicked")),
        "no panic was logged"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_twice_quits() {
    let mock = start_mock().await;
    let agent = agent_with(&mock);
    let cwd = temp_cwd();
    let tmux = Tmux::start(&zi(&agent, &cwd.path, &["--no-session"]), 80, 24);
    tmux.wait_for("ready").await;
    tmux.type_text("draft text");
    tmux.keys(&["C-c"]);
    let screen = tmux.wait_for("Press Ctrl+C again to quit").await;
    assert!(
        !screen.contains("draft text"),
        "the first Ctrl+C clears the composer:\n{screen}"
    );
    tmux.keys(&["C-c"]);
    assert_eq!(tmux.exit_status().await, 0);
    tmux.assert_restored().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn continue_rebuilds_the_transcript_from_the_journal() {
    let mock = start_mock().await;
    mock.push(Step::text("first session answer"));
    let agent = agent_with(&mock);
    let cwd = temp_cwd();
    let first = Tmux::start(&zi(&agent, &cwd.path, &[]), 80, 24);
    first.wait_for("ready").await;
    first.type_text("remember this");
    first.keys(&["Enter"]);
    first.wait_for("first session answer").await;
    first.wait_for("ready").await;
    first.keys(&["C-d"]);
    assert_eq!(first.exit_status().await, 0);
    drop(first);

    let second = Tmux::start(&zi(&agent, &cwd.path, &["-c"]), 80, 24);
    let screen = second.wait_for("first session answer").await;
    assert!(screen.contains("› remember this"), "{screen}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_restores_the_terminal() {
    let mock = start_mock().await;
    let agent = agent_with(&mock);
    let cwd = temp_cwd();
    let tmux = Tmux::start(&zi(&agent, &cwd.path, &["--no-session"]), 80, 24);
    tmux.wait_for("ready").await;
    tmux.signal(1).await;
    assert_eq!(tmux.exit_status().await, 128 + 1);
    tmux.assert_restored().await;
}

/// A journal of `messages` alternating user and assistant messages (the last one
/// `last_answer`), whose header names `session_cwd`; about 640 bytes a message, and each answer
/// cost $0.0001.
fn write_large_journal(path: &Path, session_cwd: &Path, messages: usize, last_answer: &str) {
    use std::io::Write;
    let mut out = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    let header = json!({"type":"session","version":2,"id":"preview-session","timestamp":"2026-11-30T00:00:00.000Z","cwd":session_cwd.display().to_string()});
    writeln!(out, "{header}").unwrap();
    let mut parent: Option<String> = None;
    let filler = "lorem ipsum dolor sit amet ".repeat(20);
    for n in 0..=messages {
        let id = format!("00000000-0000-4000-8000-{n:012}");
        let mut entry = if n == 0 {
            json!({"type":"model_change","provider":"mock","modelId":"m1"})
        } else {
            let text = if n == messages {
                last_answer.to_string()
            } else {
                format!("{n} {filler}")
            };
            let message = if n % 2 == 1 {
                json!({"role":"user","content":[{"type":"text","text":text}],"timestamp":n})
            } else {
                json!({"role":"assistant","content":[{"type":"text","text":text}],"api":"openai-completions","provider":"mock","model":"m1","usage":{"input":1,"output":1,"cacheRead":0,"cacheWrite":0,"totalTokens":2,"cost":{"input":0.0,"output":0.0001,"cacheRead":0.0,"cacheWrite":0.0,"total":0.0001}},"stopReason":"stop","timestamp":n})
            };
            json!({"type":"message","message":message})
        };
        entry["id"] = json!(id);
        entry["parentId"] = json!(parent);
        entry["timestamp"] = json!("2026-11-30T00:00:00.000Z");
        writeln!(out, "{entry}").unwrap();
        parent = Some(id);
    }
    out.flush().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_journal_shows_its_last_screen_while_it_opens_and_keeps_what_is_typed() {
    let mock = start_mock().await;
    mock.push(Step::text("answer after the preview"));
    // A window the 5 MiB of messages fit in, so the prompt goes out without a compaction.
    let agent = AgentDir::new()
        .models(
            &mock,
            "tui-key",
            // $100 per million output tokens: the journal's 4,000 answers of one token cost $0.40.
            &[json!({"id": "m1", "contextWindow": 10_000_000, "cost": {"input": 0.0, "output": 100.0}})],
        )
        .settings(r#"{"retryEnabled": false}"#);
    let cwd = temp_cwd();
    let journal = cwd.path.join("large.jsonl");
    // 8,000 messages: over 4 MiB, so the preview is drawn from the journal's tail.
    write_large_journal(&journal, &cwd.path, 8_000, "the very last answer");
    assert!(std::fs::metadata(&journal).unwrap().len() > 4 * 1024 * 1024);
    let journal_arg = journal.display().to_string();
    // Wide enough for the status line's cost.
    let tmux = Tmux::start(&zi(&agent, &cwd.path, &["-r", &journal_arg]), 120, 30);
    tmux.wait_for("the very last answer").await;
    // Typed at once, perhaps before the session is open: it must reach the composer.
    tmux.type_text("typed while opening");
    let screen = tmux.wait_for("ready").await;
    assert!(screen.contains("the very last answer"), "{screen}");
    let screen = tmux.wait_for("› typed while opening").await;
    assert!(!screen.contains(zi_tui::preview::OPENING), "{screen}");
    // The session's cost, totalled from the whole journal off the first frame.
    tmux.wait_for("$0.4000").await;
    tmux.keys(&["Enter"]);
    tmux.wait_for("answer after the preview").await;
    let requests = mock.wait_for_requests(1, WAIT).await;
    let texts = user_texts(&requests[0].body);
    assert_eq!(texts.len(), 4_001, "the whole journal is the context");
    assert_eq!(
        texts.last().map(String::as_str),
        Some("typed while opening")
    );
    tmux.wait_for("ready").await;
    tmux.keys(&["C-d"]);
    assert_eq!(tmux.exit_status().await, 0);
    tmux.assert_restored().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_journal_that_cannot_be_resumed_says_why_on_the_restored_terminal() {
    let mock = start_mock().await;
    let agent = agent_with(&mock);
    let cwd = temp_cwd();
    let journal = cwd.path.join("orphan.jsonl");
    // Its working directory is gone: the open refuses it after the preview was drawn.
    write_large_journal(
        &journal,
        &cwd.path.join("gone"),
        8_000,
        "an orphaned answer",
    );
    let journal_arg = journal.display().to_string();
    let tmux = Tmux::start(&zi(&agent, &cwd.path, &["-r", &journal_arg]), 80, 24);
    assert_eq!(tmux.exit_status().await, 1);
    let screen = tmux.screen();
    assert!(
        screen.contains("no longer exists"),
        "the error is on the shell's screen:\n{screen}"
    );
    tmux.assert_restored().await;
}

/// Issue 23 L4: warnings of the start-up — a broken project settings.json, an ignored MCP
/// server definition, a bad auth.json entry, an MCP server that fails to start after the view
/// is up — reach the terminal only as notices inside the view (and interactive.log), never as
/// raw text under or behind the screen.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn start_up_warnings_show_as_notices_in_the_view_and_never_on_the_terminal() {
    let mock = start_mock().await;
    let cwd = temp_cwd();
    std::fs::create_dir(cwd.path.join(".zi")).unwrap();
    std::fs::write(cwd.path.join(".zi/settings.json"), "{ not json").unwrap();
    let agent = AgentDir::new()
        .models(
            &mock,
            "tui-key",
            &[json!({"id": "m1", "contextWindow": 100000})],
        )
        .settings(
            &json!({
                "retryEnabled": false,
                "mcpServers": {
                    "ftp": {"url": "ftp://h.example/"},
                    "gone": {"command": ["/nonexistent/zi-test-mcp-server"]}
                }
            })
            .to_string(),
        )
        .trust(&[&cwd.path])
        .auth(&json!({"openai": "not an object"}));
    let tmux = Tmux::start(&zi(&agent, &cwd.path, &["--no-session"]), 120, 30);
    let expected = [
        "(project settings)",
        "http:// or https://",
        "entry openai in",
        "MCP server \"gone\" failed to start",
    ];
    let screen = tmux
        .wait_until("every warning as a notice", |s| {
            s.contains("ready") && expected.iter().all(|needle| s.contains(needle))
        })
        .await;
    for needle in expected {
        let rows: Vec<&str> = screen.lines().filter(|l| l.contains(needle)).collect();
        assert_eq!(rows.len(), 1, "{needle} once:\n{screen}");
        assert!(
            rows[0].starts_with("· Warning: "),
            "{needle} is a notice in the view:\n{screen}"
        );
    }
    let log = std::fs::read_to_string(agent.path().join("interactive.log")).unwrap();
    for needle in expected {
        assert!(log.contains(needle), "{needle} in interactive.log:\n{log}");
    }
    tmux.keys(&["C-d"]);
    assert_eq!(tmux.exit_status().await, 0);
    // The terminal's own screen, back from the alternate one: nothing zi printed while it
    // started is under the view.
    let screen = tmux.screen();
    assert!(!screen.contains("Warning"), "{screen}");
    tmux.assert_restored().await;
}
