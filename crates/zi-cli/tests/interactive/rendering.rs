//! Rendering: diffs, colours, reflow, the work plan, background tasks and markdown.

use super::*;

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
