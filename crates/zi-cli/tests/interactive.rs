//! Black-box tests of the interactive mode (docs/interactive.md): the real binary in a real
//! terminal (tmux), against the mock LLM, typed at with `send-keys` and read with
//! `capture-pane`.

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};
use zi_test_support::dirs::{AgentDir, temp_cwd};
use zi_test_support::mock_llm::{MockLlm, Step, start_mock};
use zi_test_support::process::{descendants, wait_until_gone};
use zi_test_support::tmux::Tmux;
use zi_test_support::zi_command::ZiCommand;

const WAIT: Duration = Duration::from_secs(60);
const SIGTERM: i32 = 15;

fn agent_with(mock: &MockLlm) -> AgentDir {
    AgentDir::new()
        .models(
            mock,
            "tui-key",
            &[
                json!({"id": "m1", "reasoning": true, "contextWindow": 100000}),
                json!({"id": "m2", "contextWindow": 100000}),
            ],
        )
        .settings(r#"{"retryEnabled": false}"#)
}

/// `zi` with no mode flag: a terminal on both ends makes it interactive.
fn zi(agent: &AgentDir, cwd: &Path, extra: &[&str]) -> ZiCommand {
    ZiCommand::new(env!("CARGO_BIN_EXE_zi"))
        .agent_dir(agent)
        .model("mock/m1")
        .arg("--cwd")
        .arg(cwd)
        .args(extra)
        .current_dir(cwd)
}

fn user_texts(body: &Value) -> Vec<String> {
    body["messages"]
        .as_array()
        .map(|m| {
            m.iter()
                .filter(|m| m["role"] == "user")
                .map(|m| match &m["content"] {
                    Value::String(s) => s.clone(),
                    Value::Array(parts) => {
                        parts.iter().filter_map(|p| p["text"].as_str()).collect()
                    }
                    _ => String::new(),
                })
                .collect()
        })
        .unwrap_or_default()
}

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
async fn an_edit_tool_call_shows_its_coloured_diff_and_ctrl_o_expands_it() {
    let mock = start_mock().await;
    mock.push(Step::tool_call(
        "call-1",
        "edit",
        json!({"path": "notes.txt", "edits": [{"oldText": "old line", "newText": "new line"}]}),
    ));
    mock.push(Step::text("Edited the notes."));
    let agent = agent_with(&mock);
    let cwd = temp_cwd();
    let body: String = (1..=30).map(|n| format!("line {n}\n")).collect();
    std::fs::write(cwd.path.join("notes.txt"), format!("old line\n{body}")).unwrap();
    let tmux = Tmux::start(&zi(&agent, &cwd.path, &["--no-session"]), 80, 24);
    tmux.wait_for("ready").await;
    tmux.type_text("fix the notes");
    tmux.keys(&["Enter"]);
    let screen = tmux.wait_for("Edited the notes.").await;
    assert!(screen.contains("✓ edit notes.txt  +1 -1"), "{screen}");
    assert!(screen.contains("-old line"), "{screen}");
    assert!(screen.contains("+new line"), "{screen}");
    assert_eq!(
        std::fs::read_to_string(cwd.path.join("notes.txt")).unwrap(),
        format!("new line\n{body}"),
        "the real edit tool ran"
    );
    let coloured = tmux.screen_with_escapes();
    let added = coloured
        .lines()
        .find(|l| l.contains("+new line"))
        .unwrap_or_default()
        .to_string();
    let green = |l: &str| l.contains("\x1b[32m") || l.contains("\x1b[38;5;2m");
    let red = |l: &str| l.contains("\x1b[31m") || l.contains("\x1b[38;5;1m");
    assert!(green(&added), "the added line is green: {added:?}");
    let removed = coloured
        .lines()
        .find(|l| l.contains("-old line"))
        .unwrap_or_default()
        .to_string();
    assert!(red(&removed), "the removed line is red: {removed:?}");
    tmux.keys(&["C-o"]);
    tmux.wait_until("the collapsed row toggles", |s| {
        s.contains("+new line") && s.contains("line 3")
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_color_drops_the_colours() {
    let mock = start_mock().await;
    mock.push(Step::text("plain answer"));
    let agent = agent_with(&mock);
    let cwd = temp_cwd();
    let tmux = Tmux::start(
        &zi(&agent, &cwd.path, &["--no-session"]).env("NO_COLOR", "1"),
        80,
        24,
    );
    tmux.wait_for("ready").await;
    tmux.type_text("hi");
    tmux.keys(&["Enter"]);
    tmux.wait_for("plain answer").await;
    let coloured = tmux.screen_with_escapes();
    let mut colours: Vec<String> = (30..=37).map(|n| format!("\x1b[{n}m")).collect();
    colours.extend(["\x1b[38;".to_string(), "\x1b[9".to_string()]);
    for code in &colours {
        assert!(
            !coloured.contains(code.as_str()),
            "colour {code:?} with NO_COLOR: {coloured:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn esc_interrupts_a_streaming_answer_and_a_second_esc_clears_the_composer() {
    let mock = start_mock().await;
    mock.push(Step::Hang(vec!["partial ".into(), "answer".into()]));
    let agent = agent_with(&mock);
    let cwd = temp_cwd();
    let tmux = Tmux::start(&zi(&agent, &cwd.path, &["--no-session"]), 80, 24);
    tmux.wait_for("ready").await;
    tmux.type_text("start");
    tmux.keys(&["Enter"]);
    tmux.wait_for("partial answer").await;
    tmux.type_text("draft");
    tmux.keys(&["Escape"]);
    let screen = tmux.wait_for("Interrupted").await;
    assert!(
        screen.contains("draft"),
        "the first Esc keeps the composer:\n{screen}"
    );
    assert_eq!(
        mock.wait_for_disconnects(1, WAIT).await,
        1,
        "the provider request was dropped"
    );
    tmux.wait_for("ready").await;
    tmux.keys(&["Escape"]);
    tmux.wait_until("the composer is cleared", |s| !s.contains("draft"))
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn esc_kills_a_spinning_code_mode_worker_and_the_next_prompt_works() {
    let mock = start_mock().await;
    mock.push(Step::tool_call(
        "c1",
        "code",
        json!({"description": "spin", "code": "while (true) {}"}),
    ));
    let agent = agent_with(&mock);
    let cwd = temp_cwd();
    let command = zi(&agent, &cwd.path, &["--no-session", "--code-mode"]);
    let tmux = Tmux::start(&command, 100, 30);
    tmux.wait_for("ready").await;
    tmux.type_text("spin");
    tmux.keys(&["Enter"]);
    // The `zi __code-worker` child of zi (docs/code-mode.md#the-worker).
    let zi_pid = u32::try_from(tmux.zi_pid().await).unwrap();
    let deadline = std::time::Instant::now() + WAIT;
    let worker = loop {
        let workers: Vec<u32> = descendants(zi_pid)
            .into_iter()
            .filter(|pid| {
                std::fs::read(format!("/proc/{pid}/cmdline"))
                    .is_ok_and(|c| String::from_utf8_lossy(&c).contains("__code-worker"))
            })
            .collect();
        if let [pid] = workers[..] {
            break pid;
        }
        assert!(std::time::Instant::now() < deadline, "a worker starts");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    // Once confined, the worker is past its start and into the cell (or about to be).
    while !std::fs::read_to_string(format!("/proc/{worker}/status"))
        .is_ok_and(|status| status.contains("Seccomp:\t2"))
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the worker confines itself"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tmux.keys(&["Escape"]);
    // The cell ends as interrupted (docs/code-mode.md).
    tmux.wait_for("Interrupted: the cell was interrupted").await;
    // docs/code-mode.md says within 0.5 s; the bound here only proves the kill.
    assert_eq!(
        wait_until_gone(&[worker], Duration::from_secs(3)).await,
        Vec::<u32>::new(),
        "Esc kills the worker"
    );
    tmux.wait_for("ready").await;
    mock.push(Step::text("still here"));
    tmux.type_text("again");
    tmux.keys(&["Enter"]);
    tmux.wait_for("still here").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn enter_while_a_tool_runs_steers_the_run() {
    let mock = start_mock().await;
    mock.push(Step::tool_call(
        "call-1",
        "bash",
        json!({"command": "sleep 4; echo slept"}),
    ));
    mock.push(Step::text("steered reply"));
    let agent = agent_with(&mock);
    let cwd = temp_cwd();
    let tmux = Tmux::start(&zi(&agent, &cwd.path, &["--no-session"]), 100, 30);
    tmux.wait_for("ready").await;
    tmux.type_text("run something");
    tmux.keys(&["Enter"]);
    tmux.wait_for("running bash").await;
    tmux.type_text("also check the logs");
    tmux.keys(&["Enter"]);
    let screen = tmux.wait_for("steered reply").await;
    assert!(screen.contains("$ sleep 4; echo slept  exit 0"), "{screen}");
    assert!(screen.contains("› also check the logs"), "{screen}");
    let requests = mock.wait_for_requests(2, WAIT).await;
    assert_eq!(
        user_texts(&requests[1].body),
        ["run something", "also check the logs"],
        "the steer reached the run's next provider call"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slash_model_switches_the_model() {
    let mock = start_mock().await;
    mock.push(Step::text("answer from m2"));
    let agent = agent_with(&mock);
    let cwd = temp_cwd();
    let tmux = Tmux::start(&zi(&agent, &cwd.path, &["--no-session"]), 80, 24);
    tmux.wait_for("mock/m1").await;
    // Tab completes the command name.
    tmux.type_text("/mod");
    tmux.keys(&["Tab"]);
    tmux.wait_for("› /model").await;
    tmux.type_text("mock/m2");
    tmux.keys(&["Enter"]);
    tmux.wait_for("Model: mock/m2").await;
    tmux.type_text("hi");
    tmux.keys(&["Enter"]);
    tmux.wait_for("answer from m2").await;
    let requests = mock.wait_for_requests(1, WAIT).await;
    assert_eq!(requests[0].body["model"], "m2");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resize_reflows_the_transcript() {
    let mock = start_mock().await;
    let words: Vec<String> = (0..40).map(|n| format!("word{n:02}")).collect();
    mock.push(Step::text(&words.join(" ")));
    let agent = agent_with(&mock);
    let cwd = temp_cwd();
    let tmux = Tmux::start(&zi(&agent, &cwd.path, &["--no-session"]), 100, 24);
    tmux.wait_for("ready").await;
    tmux.type_text("talk");
    tmux.keys(&["Enter"]);
    tmux.wait_for("word39").await;
    tmux.resize(40, 24);
    let screen = tmux
        .wait_until("rows of at most 40 cells", |s| {
            s.contains("word39") && s.lines().all(|l| l.chars().count() <= 40)
        })
        .await;
    // Every word is whole on some row: the text was re-wrapped, not cut.
    for word in &words[words.len() - 10..] {
        assert!(
            screen.contains(word.as_str()),
            "{word} after the resize:\n{screen}"
        );
    }
    tmux.resize(80, 24);
    tmux.wait_until("the wider layout", |s| {
        s.lines().any(|l| l.contains("word30 word31 word32 word33"))
    })
    .await;
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
async fn up_recalls_history_persisted_in_the_agent_dir() {
    let mock = start_mock().await;
    mock.push(Step::text("one"));
    let agent = agent_with(&mock);
    let cwd = temp_cwd();
    let first = Tmux::start(&zi(&agent, &cwd.path, &["--no-session"]), 80, 24);
    first.wait_for("ready").await;
    first.type_text("a remembered prompt");
    first.keys(&["Enter"]);
    first.wait_for("one").await;
    first.keys(&["C-d"]);
    assert_eq!(first.exit_status().await, 0);
    drop(first);
    let second = Tmux::start(&zi(&agent, &cwd.path, &["--no-session"]), 80, 24);
    second.wait_for("ready").await;
    second.keys(&["Up"]);
    second.wait_for("› a remembered prompt").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_100_kib_paste_arrives_as_one_input() {
    let mock = start_mock().await;
    mock.push(Step::text("got it"));
    let agent = agent_with(&mock);
    let cwd = temp_cwd();
    let tmux = Tmux::start(&zi(&agent, &cwd.path, &["--no-session"]), 80, 24);
    tmux.wait_for("ready").await;
    let line = "0123456789abcdef".repeat(4) + "\n";
    let text: String = line.repeat(100 * 1024 / line.len());
    let buffer = cwd.path.join("paste.txt");
    std::fs::write(&buffer, &text).unwrap();
    let out = tmux.tmux(&["load-buffer", &buffer.to_string_lossy()]);
    assert!(out.status.success(), "{out:?}");
    // -p: bracketed, as a terminal pastes.
    let out = tmux.tmux(&["paste-buffer", "-p", "-t", "zi"]);
    assert!(out.status.success(), "{out:?}");
    tmux.keys(&["Enter"]);
    tmux.wait_for("got it").await;
    let requests = mock.wait_for_requests(1, WAIT).await;
    let sent = user_texts(&requests[0].body);
    assert_eq!(sent.len(), 1, "one prompt");
    assert!(
        sent[0].trim_end() == text.trim_end(),
        "the pasted text (with its newlines) is the prompt: {} bytes sent, {} pasted",
        sent[0].len(),
        text.len()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_work_plan_shows_as_a_checklist_that_ctrl_p_toggles() {
    let mock = start_mock().await;
    mock.push(Step::tool_call(
        "call-1",
        "update_plan",
        json!({"steps": [
            {"text": "read the code", "status": "completed"},
            {"text": "write the fix", "status": "in_progress"},
            {"text": "run the tests", "status": "pending"}
        ]}),
    ));
    mock.push(Step::text("planned"));
    let agent = agent_with(&mock);
    let cwd = temp_cwd();
    let tmux = Tmux::start(&zi(&agent, &cwd.path, &["--no-session"]), 80, 30);
    tmux.wait_for("ready").await;
    tmux.type_text("make a plan");
    tmux.keys(&["Enter"]);
    let screen = tmux.wait_for("planned").await;
    for row in [
        "Plan 1/3 · Ctrl+P hides",
        "[x] read the code",
        "[~] write the fix",
        "[ ] run the tests",
    ] {
        assert!(screen.contains(row), "{row}:\n{screen}");
    }
    tmux.keys(&["C-p"]);
    tmux.wait_until("the plan pane hidden", |s| !s.contains("[ ] run the tests"))
        .await;
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

/// Every journal under the agent directory's sessions/ (one per session of the cwd).
fn journals(agent: &AgentDir) -> Vec<std::path::PathBuf> {
    zi_test_support::dirs::all_files(&agent.path().join("sessions"))
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slash_new_replaces_the_session_with_a_fresh_journaled_one() {
    let mock = start_mock().await;
    mock.push(Step::text("old answer"));
    mock.push(Step::text("fresh answer"));
    let agent = agent_with(&mock).extension("lifecycle.lua", LIFECYCLE_EXTENSION);
    let cwd = temp_cwd();
    let tmux = Tmux::start(&zi(&agent, &cwd.path, &[]), 80, 24);
    tmux.wait_for("ready").await;
    tmux.type_text("old context");
    tmux.keys(&["Enter"]);
    tmux.wait_for("old answer").await;
    tmux.wait_for("ready").await;
    tmux.type_text("/new");
    tmux.keys(&["Enter"]);
    // One condition: a capture may catch a frame half drawn.
    tmux.wait_until("the new session's empty transcript", |s| {
        s.contains("New session") && !s.contains("old answer") && !s.contains("› old context")
    })
    .await;
    tmux.type_text("fresh start");
    tmux.keys(&["Enter"]);
    tmux.wait_for("fresh answer").await;
    let requests = mock.wait_for_requests(2, WAIT).await;
    assert_eq!(
        user_texts(&requests[1].body),
        ["fresh start"],
        "the new session has none of the old context"
    );
    tmux.wait_for("ready").await;
    tmux.keys(&["C-d"]);
    assert_eq!(tmux.exit_status().await, 0);
    tmux.assert_restored().await;
    let texts: Vec<String> = journals(&agent)
        .iter()
        .map(|p| std::fs::read_to_string(p).unwrap())
        .collect();
    assert_eq!(texts.len(), 2, "two journals: {texts:?}");
    assert_eq!(
        texts.iter().filter(|t| t.contains("old context")).count(),
        1
    );
    let fresh: Vec<&String> = texts.iter().filter(|t| t.contains("fresh start")).collect();
    assert_eq!(fresh.len(), 1, "{texts:?}");
    assert!(
        !fresh[0].contains("old context"),
        "the new journal is its own"
    );
    // Each extension generation runs on its own thread: compare the lines as a set.
    let mut lifecycle: Vec<String> = std::fs::read_to_string(cwd.path.join("lifecycle.txt"))
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    lifecycle.sort();
    assert_eq!(
        lifecycle,
        [
            "shutdown new",
            "shutdown quit",
            "start new",
            "start startup"
        ],
        "the replaced session's extensions learn why"
    );
}

/// Records every `session_start` and `session_shutdown` reason in `<cwd>/lifecycle.txt`.
const LIFECYCLE_EXTENSION: &str = r#"
local function note(ctx, line)
  local file = assert(io.open(ctx.cwd .. "/lifecycle.txt", "a"))
  file:write(line .. "\n")
  file:close()
end
zi.on("session_start", function(event, ctx) note(ctx, "start " .. event.reason) end)
zi.on("session_shutdown", function(event, ctx) note(ctx, "shutdown " .. event.reason) end)
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slash_resume_picks_a_session_and_rebuilds_its_transcript_in_place() {
    let mock = start_mock().await;
    mock.push(Step::text("first answer"));
    mock.push(Step::text("second answer"));
    mock.push(Step::text("resumed answer"));
    let agent = agent_with(&mock);
    let cwd = temp_cwd();
    let first = Tmux::start(&zi(&agent, &cwd.path, &[]), 80, 24);
    first.wait_for("ready").await;
    first.type_text("remember the first");
    first.keys(&["Enter"]);
    first.wait_for("first answer").await;
    first.wait_for("ready").await;
    first.keys(&["C-d"]);
    assert_eq!(first.exit_status().await, 0);
    drop(first);
    let earlier = journals(&agent);
    assert_eq!(earlier.len(), 1);

    let tmux = Tmux::start(&zi(&agent, &cwd.path, &[]), 100, 30);
    tmux.wait_for("ready").await;
    tmux.type_text("a second session");
    tmux.keys(&["Enter"]);
    tmux.wait_for("second answer").await;
    tmux.wait_for("ready").await;
    tmux.type_text("/resume");
    tmux.keys(&["Enter"]);
    let screen = tmux
        .wait_until("the picker with the other session selected", |s| {
            s.contains("Resume a session")
                && s.contains("› remember the first")
                && s.contains("ago · 2 msgs ·")
        })
        .await;
    assert_eq!(
        screen.matches("msgs ·").count(),
        1,
        "only the other session is offered, not the open one:\n{screen}"
    );
    tmux.keys(&["Enter"]);
    tmux.wait_until("the resumed transcript", |s| {
        s.contains("› remember the first")
            && s.contains("first answer")
            && s.contains("Resumed")
            && !s.contains("second answer")
    })
    .await;
    tmux.type_text("after resume");
    tmux.keys(&["Enter"]);
    tmux.wait_for("resumed answer").await;
    let requests = mock.wait_for_requests(3, WAIT).await;
    assert_eq!(
        user_texts(&requests[2].body),
        ["remember the first", "after resume"],
        "the resumed session's context"
    );
    tmux.wait_for("ready").await;
    tmux.keys(&["C-d"]);
    assert_eq!(tmux.exit_status().await, 0);
    let resumed = std::fs::read_to_string(&earlier[0]).unwrap();
    assert!(
        resumed.contains("after resume"),
        "the resumed journal goes on: {resumed}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slash_completion_offers_prompt_templates_and_extension_commands() {
    let mock = start_mock().await;
    mock.push(Step::text("reviewed"));
    let agent = agent_with(&mock).extension(
        "greet.lua",
        r#"zi.register_command{ name = "greet", description = "says hello", execute = function(args) return "Hello, " .. args end }"#,
    );
    agent.write(
        "prompts/review.md",
        "---\ndescription: Review a file\nargument-hint: <path>\n---\nPlease review $1 carefully.",
    );
    let cwd = temp_cwd();
    let tmux = Tmux::start(&zi(&agent, &cwd.path, &["--no-session"]), 80, 24);
    tmux.wait_for("ready").await;
    tmux.type_text("/gre");
    tmux.wait_until("the extension command in the menu", |s| {
        s.contains("› /greet") && s.contains("says hello")
    })
    .await;
    tmux.keys(&["Tab"]);
    tmux.type_text("world");
    tmux.keys(&["Enter"]);
    tmux.wait_for("Hello, world").await;
    tmux.type_text("/rev");
    tmux.wait_until("the template in the menu", |s| {
        s.contains("› /review") && s.contains("Review a file <path>")
    })
    .await;
    tmux.keys(&["Tab"]);
    tmux.wait_for("› /review").await;
    tmux.type_text("notes.txt");
    tmux.keys(&["Enter"]);
    tmux.wait_for("reviewed").await;
    let requests = mock.wait_for_requests(1, WAIT).await;
    assert_eq!(
        user_texts(&requests[0].body),
        ["Please review notes.txt carefully."],
        "the template was completed and expanded"
    );
    // `/reload` runs the extensions' reload.
    tmux.wait_for("ready").await;
    tmux.type_text("/reload");
    tmux.keys(&["Enter"]);
    tmux.wait_for("Reloaded 1 extension").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_completes_paths_under_the_cwd_respecting_gitignore() {
    let mock = start_mock().await;
    mock.push(Step::text("looked"));
    let agent = agent_with(&mock);
    let cwd = temp_cwd();
    for file in ["src/main.rs", "ignored/main.txt"] {
        let path = cwd.path.join(file);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, "x").unwrap();
    }
    std::fs::write(cwd.path.join(".gitignore"), "ignored/\n").unwrap();
    let tmux = Tmux::start(&zi(&agent, &cwd.path, &["--no-session"]), 80, 24);
    tmux.wait_for("ready").await;
    tmux.type_text("look at @mai");
    let screen = tmux.wait_for("› @src/main.rs").await;
    assert!(
        !screen.contains("ignored/main.txt"),
        "ignored files are not offered:\n{screen}"
    );
    tmux.keys(&["Tab"]);
    tmux.type_text("please");
    tmux.wait_for("› look at @src/main.rs please").await;
    tmux.keys(&["Enter"]);
    tmux.wait_for("looked").await;
    let requests = mock.wait_for_requests(1, WAIT).await;
    assert_eq!(
        user_texts(&requests[0].body),
        ["look at @src/main.rs please"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn background_tasks_show_with_their_status() {
    let mock = start_mock().await;
    // The task waits for a file the test creates, so nothing depends on timing.
    mock.push(Step::tool_call(
        "call-1",
        "bash",
        json!({"command": "until [ -f go ]; do sleep 0.1; done; echo done", "background": true}),
    ));
    mock.push(Step::text("started it"));
    mock.push(Step::text("next answer"));
    let agent = agent_with(&mock);
    let cwd = temp_cwd();
    let tmux = Tmux::start(&zi(&agent, &cwd.path, &["--no-session"]), 100, 30);
    tmux.wait_for("ready").await;
    tmux.type_text("start a task");
    tmux.keys(&["Enter"]);
    tmux.wait_until("the running task", |s| {
        s.contains("started it")
            && s.contains("Background tasks · 1 running")
            && s.contains("⋯ task-1  $ until [ -f go ]")
            && s.contains("  running")
    })
    .await;
    std::fs::write(cwd.path.join("go"), "").unwrap();
    tmux.wait_until("the finished task", |s| {
        s.contains("Background tasks · 0 running") && s.contains("✓ task-1") && s.contains("exit 0")
    })
    .await;
    // The next prompt: the finished task has been seen and leaves the pane.
    tmux.type_text("anything else");
    tmux.keys(&["Enter"]);
    tmux.wait_until("the pane gone", |s| {
        s.contains("next answer") && !s.contains("Background tasks")
    })
    .await;
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

const TABLE_ANSWER: &str = "Files:\n\n| Name | Size | Notes |\n|:-----|-----:|:------|\n| a.txt | 12 | first file |\n| b-long-name.txt | 1234 | the second file, with a longer note that wraps when the terminal is narrow |\n\nDone.";

/// The rows of `screen` that belong to the table: those with a column separator.
fn table_rows(screen: &str) -> Vec<String> {
    screen
        .lines()
        .filter(|l| l.contains('│') || l.contains('┼'))
        .map(str::to_string)
        .collect()
}

/// Every table row has its separators in the same columns (counted in characters).
fn columns_align(rows: &[String]) -> bool {
    let positions = |row: &String| -> Vec<usize> {
        row.chars()
            .enumerate()
            .filter(|(_, c)| *c == '│' || *c == '┼')
            .map(|(i, _)| i)
            .collect()
    };
    rows.first()
        .is_some_and(|first| rows.iter().all(|r| positions(r) == positions(first)))
}

/// Issue 23 L5: a table is drawn as aligned columns, and its cells wrap inside their columns
/// when the terminal is narrow.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_markdown_table_renders_as_aligned_columns_that_wrap_when_narrow() {
    let mock = start_mock().await;
    mock.push(Step::text(TABLE_ANSWER));
    let agent = agent_with(&mock);
    let cwd = temp_cwd();
    let tmux = Tmux::start(&zi(&agent, &cwd.path, &["--no-session"]), 120, 30);
    tmux.wait_for("ready").await;
    tmux.type_text("list them");
    tmux.keys(&["Enter"]);
    let screen = tmux.wait_for("Done.").await;
    let rows = table_rows(&screen);
    assert_eq!(rows.len(), 4, "header, rule and two rows:\n{screen}");
    assert!(
        rows[0].contains("Name") && rows[0].contains("Size") && rows[0].contains("Notes"),
        "the header is one row:\n{screen}"
    );
    assert!(
        rows[1].contains("─┼─"),
        "a rule under the header:\n{screen}"
    );
    assert!(rows[2].contains("a.txt") && rows[2].contains("first file"));
    assert!(columns_align(&rows), "aligned columns:\n{screen}");
    // The size column is right-aligned: both numbers end in the same column.
    let end_of = |row: &str, needle: &str| row.find(needle).map(|i| i + needle.len());
    assert_eq!(
        end_of(&rows[2], "12 "),
        end_of(&rows[3], "1234 "),
        "{screen}"
    );

    tmux.resize(40, 30);
    // tmux cuts the old rows to the new width at once; the redrawn table has more rows, the long
    // note wrapping inside its column, still aligned.
    let screen = tmux
        .wait_until("the table laid out again within 40 columns", |s| {
            let rows = table_rows(s);
            s.contains("Done.")
                && s.lines().all(|l| l.chars().count() <= 40)
                && rows.len() > 4
                && columns_align(&rows)
        })
        .await;
    let rows = table_rows(&screen);
    let text: String = rows.join(" ");
    for word in ["longer", "note", "wraps", "terminal", "narrow"] {
        assert!(text.contains(word), "{word}:\n{screen}");
    }
}

const CONSTRUCTS_ANSWER: &str = "## Plan `v2`\n\n- [x] read the code\n- [ ] write the fix\n  - nested item\n\n> Run this:\n>\n> ```sh\n> cargo test\n> ```\n\nSee <https://example.com/docs> and ~~old~~ new.";

/// Issue 23 L5: the other constructs models write — headings, task lists, nested lists, a
/// quote holding code, autolinks, strikethrough.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn task_lists_quotes_with_code_and_links_render_cleanly() {
    let mock = start_mock().await;
    mock.push(Step::text(CONSTRUCTS_ANSWER));
    let agent = agent_with(&mock);
    let cwd = temp_cwd();
    let tmux = Tmux::start(&zi(&agent, &cwd.path, &["--no-session"]), 80, 30);
    tmux.wait_for("ready").await;
    tmux.type_text("show");
    tmux.keys(&["Enter"]);
    let screen = tmux.wait_for("old new.").await;
    let lines: Vec<&str> = screen.lines().map(str::trim_end).collect();
    let has = |row: &str| lines.contains(&row);
    assert!(has("## Plan v2"), "{screen}");
    // A task item's checkbox stands where its bullet would.
    assert!(has("[x] read the code"), "{screen}");
    assert!(has("[ ] write the fix"), "{screen}");
    assert!(has("    • nested item"), "{screen}");
    // The quote's bar runs through its blank row and its code block.
    let quote = lines
        .iter()
        .position(|l| *l == "│ Run this:")
        .unwrap_or_else(|| panic!("{screen}"));
    assert_eq!(
        &lines[quote + 1..quote + 3],
        ["│", "│   cargo test"],
        "{screen}"
    );
    // An autolink is written once.
    assert!(has("See https://example.com/docs and old new."), "{screen}");
    let coloured = tmux.screen_with_escapes();
    let row = coloured
        .lines()
        .find(|l| l.contains("old"))
        .unwrap_or_default();
    assert!(row.contains("\x1b[9m"), "strikethrough: {row:?}");
}

/// Issue 23 L3: `/model` opens a picker over the catalog — configured models first, each with
/// its state — that typing filters, Enter selects from and Esc closes; `/thinking` opens the
/// same picker over the model's levels.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slash_model_and_slash_thinking_open_filtering_pickers() {
    let mock = start_mock().await;
    mock.push(Step::text("answer from m2"));
    let agent = agent_with(&mock);
    let cwd = temp_cwd();
    let tmux = Tmux::start(&zi(&agent, &cwd.path, &["--no-session"]), 100, 30);
    tmux.wait_for("mock/m1").await;
    tmux.type_text("/model");
    tmux.keys(&["Enter"]);
    let screen = tmux
        .wait_until("the model picker", |s| {
            s.contains("Select a model") && s.contains("not configured")
        })
        .await;
    // The current model is selected; configured models come before the others.
    assert!(screen.contains("› mock/m1"), "{screen}");
    let row = |needle: &str| screen.lines().position(|l| l.contains(needle));
    let (Some(m2), Some(unconfigured)) = (row("mock/m2"), row("not configured")) else {
        panic!("both states are listed:\n{screen}");
    };
    assert!(m2 < unconfigured, "configured first:\n{screen}");
    assert!(
        screen
            .lines()
            .nth(m2)
            .is_some_and(|l| l.contains("configured")),
        "{screen}"
    );
    // Esc closes without a change.
    tmux.keys(&["Escape"]);
    tmux.wait_until("the picker closed", |s| !s.contains("Select a model"))
        .await;
    // Typing filters; Enter selects the first match.
    tmux.type_text("/model");
    tmux.keys(&["Enter"]);
    tmux.wait_for("Select a model").await;
    tmux.type_text("mock/m2");
    let screen = tmux
        .wait_until("the filtered list", |s| {
            s.contains("filter: mock/m2") && s.contains("› mock/m2")
        })
        .await;
    assert!(
        !screen
            .lines()
            .any(|l| l.contains('│') && l.contains("mock/m1")),
        "m1 is filtered out:\n{screen}"
    );
    tmux.keys(&["Enter"]);
    tmux.wait_until("m2 selected", |s| {
        s.contains("Model: mock/m2") && !s.contains("Select a model")
    })
    .await;
    tmux.type_text("hi");
    tmux.keys(&["Enter"]);
    tmux.wait_for("answer from m2").await;
    let requests = mock.wait_for_requests(1, WAIT).await;
    assert_eq!(requests[0].body["model"], "m2");

    // m1 reasons: its levels are on offer.
    tmux.type_text("/model mock/m1");
    tmux.keys(&["Enter"]);
    tmux.wait_for("Model: mock/m1").await;
    tmux.type_text("/thinking");
    tmux.keys(&["Enter"]);
    let screen = tmux
        .wait_until("the thinking picker", |s| {
            s.contains("Thinking level") && s.contains("› medium") && s.contains("high")
        })
        .await;
    assert!(screen.contains("off"), "{screen}");
    tmux.type_text("hi");
    tmux.wait_for("› high").await;
    tmux.keys(&["Enter"]);
    tmux.wait_until("high selected", |s| {
        s.contains("Thinking: high") && s.contains("thinking high")
    })
    .await;
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
