//! Input: Esc, steering with Enter, history, pastes and completion of paths and slash commands.

use super::*;

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
