//! Black-box tests of the interactive mode's prompts and code highlighting
//! (docs/interactive.md): the project trust prompt and trust.json, the inline approval prompt
//! answering through the session's approval broker, and highlighted code blocks. The real
//! binary runs in tmux against the mock LLM.

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};
use zi_test_support::dirs::{AgentDir, temp_cwd};
use zi_test_support::mock_llm::{MockLlm, Step, start_mock};
use zi_test_support::tmux::Tmux;
use zi_test_support::zi_command::ZiCommand;

const WAIT: Duration = Duration::from_secs(60);

fn agent_with(mock: &MockLlm) -> AgentDir {
    AgentDir::new()
        .models(
            mock,
            "tui-key",
            &[json!({"id": "m1", "reasoning": true, "contextWindow": 100000})],
        )
        .settings(r#"{"retryEnabled": false}"#)
}

fn zi(agent: &AgentDir, cwd: &Path, extra: &[&str]) -> ZiCommand {
    ZiCommand::new(env!("CARGO_BIN_EXE_zi"))
        .agent_dir(agent)
        .model("mock/m1")
        .arg("--cwd")
        .arg(cwd)
        .arg("--no-session")
        .args(extra)
        .current_dir(cwd)
}

/// A project whose `.zi/settings.json` sets the thinking level to `low` (the status line shows
/// whether it took effect; without it the level is `medium`).
fn project_with_settings() -> zi_test_support::dirs::TempCwd {
    let cwd = temp_cwd();
    std::fs::create_dir(cwd.path.join(".zi")).unwrap();
    std::fs::write(
        cwd.path.join(".zi/settings.json"),
        r#"{"defaultThinkingLevel": "low"}"#,
    )
    .unwrap();
    cwd
}

fn trust_file(agent: &AgentDir) -> Value {
    let text = std::fs::read_to_string(agent.path().join("trust.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

/// Starts zi, answers the trust prompt with `key`, and waits for the main screen to show
/// `thinking` (the level the project's settings did or did not set).
async fn answer_trust_prompt(agent: &AgentDir, cwd: &Path, key: &str, thinking: &str) {
    let tmux = Tmux::start(&zi(agent, cwd, &[]), 80, 24);
    // The whole box (a capture may catch a frame half drawn): it names the project and its
    // `.zi/` content.
    let project = cwd.display().to_string();
    tmux.wait_until("the trust prompt", |s| {
        s.contains("Trust this project?")
            && s.contains(&project)
            && s.contains("has project configuration in .zi/: settings.json")
            && s.contains("Ctrl+C quits")
    })
    .await;
    assert!(
        !agent.path().join("trust.json").exists(),
        "nothing is recorded before the answer"
    );
    tmux.keys(&[key]);
    tmux.wait_for(thinking).await;
    tmux.keys(&["C-d"]);
    assert_eq!(tmux.exit_status().await, 0);
    tmux.assert_restored().await;
}

/// A second start reaches the main screen, showing `thinking`, without a prompt (the prompt
/// comes before the main screen, so a prompt would hold it back).
async fn second_start_is_not_asked(agent: &AgentDir, cwd: &Path, thinking: &str) {
    let tmux = Tmux::start(&zi(agent, cwd, &[]), 80, 24);
    let screen = tmux.wait_for(thinking).await;
    assert!(!screen.contains("Trust this project?"), "{screen}");
    tmux.keys(&["C-d"]);
    assert_eq!(tmux.exit_status().await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trusting_a_new_project_records_it_and_loads_its_settings() {
    let mock = start_mock().await;
    let agent = agent_with(&mock);
    let cwd = project_with_settings();
    // The project's settings took effect.
    answer_trust_prompt(&agent, &cwd.path, "y", "thinking low").await;
    let key = cwd.path.display().to_string();
    assert_eq!(trust_file(&agent), json!({ key: true }));
    second_start_is_not_asked(&agent, &cwd.path, "thinking low").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn not_trusting_a_project_records_it_and_leaves_its_settings_out() {
    let mock = start_mock().await;
    let agent = agent_with(&mock);
    let cwd = project_with_settings();
    // The project's settings were not loaded: the level stays the default.
    answer_trust_prompt(&agent, &cwd.path, "n", "thinking medium").await;
    let key = cwd.path.display().to_string();
    assert_eq!(trust_file(&agent), json!({ key: false }));
    second_start_is_not_asked(&agent, &cwd.path, "thinking medium").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_project_without_dot_zi_content_is_not_asked_about() {
    let mock = start_mock().await;
    let agent = agent_with(&mock);
    let cwd = temp_cwd();
    std::fs::create_dir(cwd.path.join(".zi")).unwrap();
    second_start_is_not_asked(&agent, &cwd.path, "thinking medium").await;
    assert!(
        !agent.path().join("trust.json").exists(),
        "nothing to decide, nothing recorded"
    );
}

/// An `ask` rule (`--ask 'bash(echo:*)'`, policy `on-failure`) and a scripted `bash` call the
/// rule matches: zi shows the request inline and waits.
async fn ask_for_a_bash_call(mock: &MockLlm, agent: &AgentDir, cwd: &Path) -> Tmux {
    mock.push(Step::tool_call(
        "call-1",
        "bash",
        json!({"command": "echo approved-run > out.txt"}),
    ));
    mock.push(Step::text("after the call"));
    let flags = ["--approvals", "on-failure", "--ask", "bash(echo:*)"];
    let tmux = Tmux::start(&zi(agent, cwd, &flags), 100, 30);
    tmux.wait_for("ready").await;
    tmux.type_text("write the file");
    tmux.keys(&["Enter"]);
    let needles = [
        "Approval needed: bash Run: echo approved-run > out.txt",
        "rule bash(echo:*) (cli)",
        "[y] Allow once",
        "[n] Deny",
        "[x] Deny and stop the turn",
    ];
    let screen = tmux
        .wait_until("the whole approval prompt", |s| {
            needles.iter().all(|needle| s.contains(needle))
        })
        .await;
    // An ask rule's request offers no session grant (docs/approvals.md#the-request).
    assert!(!screen.contains("[a] Allow for this session"), "{screen}");
    assert!(
        !cwd.join("out.txt").exists(),
        "nothing ran before the answer"
    );
    tmux
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ask_rule_prompts_inline_and_allow_once_runs_the_tool() {
    let mock = start_mock().await;
    let agent = agent_with(&mock);
    let cwd = temp_cwd();
    let tmux = ask_for_a_bash_call(&mock, &agent, &cwd.path).await;
    tmux.keys(&["y"]);
    let screen = tmux.wait_for("after the call").await;
    assert!(
        screen.contains("Allowed once: bash Run: echo approved-run > out.txt"),
        "{screen}"
    );
    assert!(
        !screen.contains("Approval needed"),
        "the prompt closed:\n{screen}"
    );
    assert_eq!(
        std::fs::read_to_string(cwd.path.join("out.txt")).unwrap(),
        "approved-run\n",
        "the approved call ran"
    );
    let requests = mock.wait_for_requests(2, WAIT).await;
    assert!(
        !requests[1].body.to_string().contains("denied"),
        "the model saw the real result: {}",
        requests[1].body
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deny_at_the_inline_prompt_makes_the_tool_result_an_error() {
    let mock = start_mock().await;
    let agent = agent_with(&mock);
    let cwd = temp_cwd();
    let tmux = ask_for_a_bash_call(&mock, &agent, &cwd.path).await;
    // Letters are the prompt's while it is shown: they do not reach the composer.
    tmux.keys(&["q"]);
    tmux.keys(&["n"]);
    let screen = tmux.wait_for("after the call").await;
    assert!(
        screen.contains("Denied: bash Run: echo approved-run > out.txt"),
        "{screen}"
    );
    assert!(screen.contains("✗"), "the tool row failed:\n{screen}");
    assert!(!screen.contains("› q"), "{screen}");
    assert!(
        !cwd.path.join("out.txt").exists(),
        "the denied call did not run"
    );
    let requests = mock.wait_for_requests(2, WAIT).await;
    assert!(
        requests[1]
            .body
            .to_string()
            .contains("The user denied this tool call."),
        "the model saw the denial as the tool result: {}",
        requests[1].body
    );
}

const CODE_ANSWER: &str = "Here:\n\n```rust\nfn main() {\n    let greeting = \"hello\";\n}\n```\n";

/// The answer's `fn main() {` row as tmux holds it, escapes included.
async fn code_row(no_color: bool) -> String {
    let mock = start_mock().await;
    mock.push(Step::text(CODE_ANSWER));
    let agent = agent_with(&mock);
    let cwd = temp_cwd();
    let mut command = zi(&agent, &cwd.path, &[]);
    if no_color {
        command = command.env("NO_COLOR", "1");
    }
    let tmux = Tmux::start(&command, 80, 24);
    tmux.wait_for("ready").await;
    tmux.type_text("show code");
    tmux.keys(&["Enter"]);
    tmux.wait_until("the whole code block", |s| {
        s.contains("fn main() {") && s.contains("let greeting = \"hello\";") && s.contains("ready")
    })
    .await;
    let coloured = tmux.screen_with_escapes();
    let row = |needle: &str| {
        coloured
            .lines()
            .find(|l| l.contains(needle))
            .unwrap_or_default()
            .to_string()
    };
    // The keyword and the string of the second line, to check both rows at once.
    format!("{}\n{}", row("main"), row("greeting"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fenced_code_is_highlighted() {
    let rows = code_row(false).await;
    let magenta = ["\x1b[35m", "\x1b[38;5;5m", "\x1b[1;35m"];
    let green = ["\x1b[32m", "\x1b[38;5;2m"];
    assert!(
        magenta.iter().any(|code| rows.contains(code)),
        "keywords are magenta: {rows:?}"
    );
    assert!(
        green.iter().any(|code| rows.contains(code)),
        "strings are green: {rows:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fenced_code_under_no_color_keeps_bold_keywords_only() {
    let rows = code_row(true).await;
    let mut colours: Vec<String> = (30..=37).map(|n| format!("\x1b[{n}m")).collect();
    colours.extend((30..=37).map(|n| format!(";{n}m")));
    colours.extend(["\x1b[38;".to_string(), "\x1b[9".to_string()]);
    for code in &colours {
        assert!(!rows.contains(code.as_str()), "colour {code:?}: {rows:?}");
    }
    assert!(rows.contains("\x1b[1m"), "keywords stay bold: {rows:?}");
}

/// `python3 tests/fixtures/tty_attack.py ARGS…` as a bash command.
fn tty_attack(args: &str) -> String {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/tty_attack.py");
    format!("python3 '{script}' {args}")
}

/// Issue 23 C1: a tool cannot draw on the person's terminal (window title, clipboard) nor type
/// into it: it has no controlling terminal, so `/dev/tty` cannot be opened.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_can_neither_draw_on_nor_type_into_the_terminal() {
    let mock = start_mock().await;
    mock.push(Step::tool_call(
        "draw",
        "bash",
        json!({"command": tty_attack("draw")}),
    ));
    mock.push(Step::tool_call(
        "type",
        "bash",
        json!({"command": tty_attack("type PWNED-TYPED")}),
    ));
    mock.push(Step::tool_call(
        "background",
        "bash",
        json!({"command": format!("{} > background.txt", tty_attack("draw")), "background": true}),
    ));
    mock.push(Step::text("after the attack"));
    let agent = agent_with(&mock);
    let cwd = temp_cwd();
    let tmux = Tmux::start(&zi(&agent, &cwd.path, &[]), 100, 30);
    // tmux turns an application's OSC 52 into a paste buffer only with this option.
    tmux.tmux(&["set-option", "-g", "set-clipboard", "on"]);
    tmux.wait_for("ready").await;
    let title_before = tmux.display("#{pane_title}");
    tmux.type_text("attack the terminal");
    tmux.keys(&["Enter"]);
    tmux.wait_for("after the attack").await;
    let screen = tmux.wait_for("ready").await;

    let requests = mock.wait_for_requests(4, WAIT).await;
    let results = requests[3].body.to_string();
    for mode in ["draw", "type"] {
        assert!(
            results.contains(&format!(
                "tty-attack {mode}: cannot open /dev/tty: No such device or address"
            )),
            "the {mode} attack found no terminal: {results}"
        );
    }
    let background = cwd.path.join("background.txt");
    let deadline = std::time::Instant::now() + WAIT;
    while std::fs::read_to_string(&background)
        .unwrap_or_default()
        .is_empty()
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the background task wrote nothing"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        std::fs::read_to_string(&background).unwrap(),
        "tty-attack draw: cannot open /dev/tty: No such device or address\n",
        "a background task finds no terminal either"
    );
    assert_eq!(
        tmux.display("#{pane_title}"),
        title_before,
        "the title is unchanged"
    );
    let buffers = tmux.tmux(&["list-buffers"]);
    assert!(
        String::from_utf8_lossy(&buffers.stdout).trim().is_empty(),
        "no clipboard buffer was set: {buffers:?}"
    );
    // The tool rows echo the command; the composer and the prompts are the `›` lines.
    assert!(
        screen
            .lines()
            .filter(|line| line.starts_with('›'))
            .all(|line| !line.contains("PWNED-TYPED")),
        "nothing was typed into the composer:\n{screen}"
    );
}

/// Issue 23 C1: a helper left running by an earlier command cannot answer the approval prompt
/// by typing `y` (TIOCSTI) while the prompt waits for the person.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_helper_left_by_a_command_cannot_approve_the_next_request() {
    let mock = start_mock().await;
    // A background helper whose output goes nowhere: the command returns at once and leaves it
    // running.
    mock.push(Step::tool_call(
        "helper",
        "bash",
        json!({"command": format!("{} >/dev/null 2>&1 < /dev/null &", tty_attack("type y 2"))}),
    ));
    mock.push(Step::tool_call(
        "payload",
        "bash",
        json!({"command": "touch PWNED-SELF-APPROVED"}),
    ));
    mock.push(Step::text("after the request"));
    let agent = agent_with(&mock);
    let cwd = temp_cwd();
    let flags = ["--approvals", "on-failure", "--ask", "bash(touch:*)"];
    let tmux = Tmux::start(&zi(&agent, &cwd.path, &flags), 100, 30);
    tmux.wait_for("ready").await;
    tmux.type_text("start the helper");
    tmux.keys(&["Enter"]);
    tmux.wait_for("Approval needed: bash Run: touch PWNED-SELF-APPROVED")
        .await;
    // The helper types its `y` two seconds after it started; give it time to.
    tokio::time::sleep(Duration::from_secs(4)).await;
    let screen = tmux.screen();
    assert!(
        screen.contains("Approval needed: bash Run: touch PWNED-SELF-APPROVED"),
        "the request still waits for the person:\n{screen}"
    );
    assert!(
        !cwd.path.join("PWNED-SELF-APPROVED").exists(),
        "the request was not approved by the helper"
    );
    tmux.keys(&["n"]);
    tmux.wait_for("after the request").await;
    assert!(!cwd.path.join("PWNED-SELF-APPROVED").exists());
}

/// An 8 KiB command whose middle hides a second command: the first and last few hundred bytes
/// look harmless.
fn long_command_with_a_payload() -> String {
    let filler = "harmless ".repeat(450);
    format!("echo {filler}; touch PWNED-long; echo {filler}")
}

/// Issue 23 C4: the approval prompt shows every character of a command too long for it, and
/// `y` is refused until the whole command was on screen.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_command_must_be_read_whole_before_it_can_be_allowed() {
    let mock = start_mock().await;
    let command = long_command_with_a_payload();
    assert!(command.len() > 8000);
    mock.push(Step::tool_call(
        "call-1",
        "bash",
        json!({ "command": command }),
    ));
    mock.push(Step::text("after the call"));
    let agent = agent_with(&mock);
    let cwd = temp_cwd();
    let flags = ["--approvals", "on-failure", "--ask", "bash(echo:*)"];
    let tmux = Tmux::start(&zi(&agent, &cwd.path, &flags), 100, 30);
    tmux.wait_for("ready").await;
    tmux.type_text("run the long one");
    tmux.keys(&["Enter"]);
    let screen = tmux.wait_for("Approval needed").await;
    assert!(
        !screen.contains("PWNED-long"),
        "the payload is further down:\n{screen}"
    );
    // Allowing before reading is refused, and the prompt says how to read on.
    tmux.keys(&["y"]);
    let screen = tmux
        .wait_for("read the whole command before allowing")
        .await;
    assert!(screen.contains("Approval needed"), "{screen}");
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(
        !cwd.path.join("PWNED-long").exists(),
        "y before reading the whole command ran nothing"
    );
    // Reading on (↓ a row, PageDown a page) brings every part on screen, the payload too.
    let mut payload_seen = false;
    let mut screen = tmux.screen();
    for _ in 0..200 {
        payload_seen |= screen.contains("touch PWNED-long");
        if screen.contains("whole command shown") {
            break;
        }
        tmux.keys(&["PageDown"]);
        tokio::time::sleep(Duration::from_millis(100)).await;
        screen = tmux.screen();
    }
    payload_seen |= screen.contains("touch PWNED-long");
    assert!(screen.contains("whole command shown"), "{screen}");
    assert!(
        payload_seen,
        "the hidden command was on screen at some point"
    );
    tmux.keys(&["y"]);
    tmux.wait_for("after the call").await;
    assert!(
        cwd.path.join("PWNED-long").exists(),
        "once read, y allows the command"
    );
}
