//! Slash commands: `/model`, `/new`, `/resume` and the model and thinking pickers.

use super::*;

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
