//! `/login` and `/logout` in the terminal view (tmux): the picker, the device flow's code in a
//! notice, the ChatGPT address pasted into the composer (and kept out of the transcript and the
//! history), Esc cancelling a sign-in, and signing out of the selected model's provider.

use zi_test_support::dirs::{AgentDir, TempCwd, temp_cwd};
use zi_test_support::mock_auth::{DevicePoll, MockAuth, USER_CODE, start_auth};
use zi_test_support::mock_llm::{MockLlm, Step, start_mock};
use zi_test_support::tmux::Tmux;

use super::*;

fn view(agent: &AgentDir, cwd: &TempCwd, (auth, llm): (&MockAuth, &MockLlm)) -> ZiCommand {
    endpoints(
        ZiCommand::new(env!("CARGO_BIN_EXE_zi"))
            .agent_dir(agent)
            .arg("--cwd")
            .arg(&cwd.path)
            .arg("--no-session")
            .current_dir(&cwd.path),
        auth,
        llm,
    )
}

/// Everything zi wrote into the agent dir besides auth.json (the log, the prompt history).
fn agent_files(agent: &AgentDir) -> Vec<(String, String)> {
    zi_test_support::dirs::all_files(agent.path())
        .into_iter()
        .filter(|path| path.file_name().is_some_and(|n| n != "auth.json"))
        .map(|path| {
            let text =
                String::from_utf8_lossy(&std::fs::read(&path).unwrap_or_default()).into_owned();
            (path.display().to_string(), text)
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slash_login_runs_the_device_flow_in_the_view() {
    let (auth, llm) = (start_auth().await, start_mock().await);
    auth.push_poll(DevicePoll::Token("gho_view-login-secret".into()));
    let agent = AgentDir::new().settings(r#"{"retryEnabled": false}"#);
    let cwd = temp_cwd();
    let tmux = Tmux::start(&view(&agent, &cwd, (&auth, &llm)), 110, 30);
    tmux.wait_for("ready").await;
    tmux.type_text("/login");
    tmux.keys(&["Enter"]);
    let screen = tmux
        .wait_until("the sign-in picker", |s| {
            s.contains("Sign in to") && s.contains("GitHub Copilot")
        })
        .await;
    assert!(
        screen.contains("ChatGPT Plus/Pro (Codex)") && screen.contains("not signed in"),
        "{screen}"
    );
    tmux.type_text("copilot");
    tmux.keys(&["Enter"]);
    let screen = tmux.wait_for(&format!("enter the code {USER_CODE}")).await;
    assert!(screen.contains("/login/device"), "{screen}");
    tmux.wait_for("Signed in to GitHub Copilot (github-copilot)")
        .await;
    assert_eq!(
        auth_json(&agent)["github-copilot"]["refresh"],
        "gho_view-login-secret"
    );

    // The new sign-in's models work at once.
    llm.push(Step::text("copilot says hi"));
    tmux.type_text("/model github-copilot/gpt-4.1");
    tmux.keys(&["Enter"]);
    tmux.wait_for("github-copilot/gpt-4.1").await;
    tmux.type_text("hello");
    tmux.keys(&["Enter"]);
    tmux.wait_for("copilot says hi").await;
    let copilot = auth.last_copilot_token().unwrap();
    let bearer = format!("Bearer {copilot}");
    let request = llm
        .requests()
        .into_iter()
        .find(|r| r.path == "/v1/chat/completions")
        .unwrap();
    assert_eq!(request.header("authorization"), Some(bearer.as_str()));

    tmux.type_text("/logout github-copilot");
    tmux.keys(&["Enter"]);
    let screen = tmux
        .wait_for("Signed out of GitHub Copilot (github-copilot); the selected model")
        .await;
    assert!(
        screen.contains("github-copilot/gpt-4.1 is no longer"),
        "{screen}"
    );
    assert!(auth_json(&agent).get("github-copilot").is_none());
    tmux.type_text("/logout");
    tmux.keys(&["Enter"]);
    tmux.wait_for("Usage: /logout PROVIDER").await;
    tmux.keys(&["C-u", "C-d"]);
    assert_eq!(tmux.exit_status().await, 0);
    let device_code = auth.requests_to("/login/oauth/access_token")[0]
        .field("device_code")
        .unwrap()
        .to_string();
    assert_no_secrets(
        &agent_files(&agent),
        &["gho_view-login-secret", &copilot, &device_code],
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slash_login_takes_the_pasted_address_in_the_view() {
    let (auth, llm) = (start_auth().await, start_mock().await);
    let agent = AgentDir::new();
    let (script, opened) = recording_browser(agent.path());
    let cwd = temp_cwd();
    let command = view(&agent, &cwd, (&auth, &llm)).env("BROWSER", &script);
    let tmux = Tmux::start(&command, 110, 30);
    tmux.wait_for("ready").await;

    // Esc cancels a running sign-in.
    tmux.type_text("/login openai-codex");
    tmux.keys(&["Enter"]);
    tmux.wait_for("Sign in to ChatGPT in a browser").await;
    tmux.keys(&["Escape"]);
    tmux.wait_for("Sign-in cancelled").await;

    std::fs::remove_file(&opened).ok();
    tmux.type_text("/login openai-codex");
    tmux.keys(&["Enter"]);
    tmux.wait_for("Sign in to ChatGPT in a browser").await;
    let url = opened_address(&opened).await;
    let location = auth.redirect_for(&url).unwrap();
    let code = location
        .split("code=")
        .nth(1)
        .and_then(|rest| rest.split('&').next())
        .unwrap()
        .to_string();
    tmux.type_text(&location);
    tmux.keys(&["Enter"]);
    let screen = tmux
        .wait_for("Signed in to ChatGPT Plus/Pro (Codex) (openai-codex)")
        .await;
    assert!(
        !screen.contains(&code),
        "the pasted address is not shown:\n{screen}"
    );
    assert!(screen.contains("/model openai-codex/gpt-5.5"), "{screen}");
    assert_eq!(auth_json(&agent)["openai-codex"]["type"], "oauth");
    tmux.keys(&["C-d"]);
    assert_eq!(tmux.exit_status().await, 0);
    let (refresh, access) = auth.current_tokens();
    let verifier = auth.token_requests("authorization_code")[0]
        .field("code_verifier")
        .unwrap()
        .to_string();
    assert_no_secrets(
        &agent_files(&agent),
        &[&code, &verifier, &refresh.unwrap(), &access.unwrap()],
    );
}
