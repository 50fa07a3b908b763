//! Secrets of the sign-ins never leave zi (issue 26 point 6): after both logins, refreshes of
//! both sign-ins and provider errors that echo the tokens back, no code, verifier, device code,
//! token or account id appears in anything zi wrote — the logins' stdout and stderr, every
//! frame, stderr and the journal of an RPC session.

use serde_json::json;
use zi_test_support::browser;
use zi_test_support::dirs::{AgentDir, temp_cwd};
use zi_test_support::mock_auth::{DevicePoll, MockAuth, start_auth};
use zi_test_support::mock_llm::{Step, start_mock};
use zi_test_support::zi_command::Finished;

use super::login_codex::{authorize_url, start_login};
use super::*;

const GITHUB: &str = "gho_leak-check-secret-81c2";

/// The secrets of the two sign-ins.
struct SignedIn {
    code: String,
    verifier: String,
    first_access: String,
    first_refresh: String,
    device_code: String,
    first_copilot: String,
}

/// `zi login openai-codex` (through the browser) and `zi login github-copilot`.
async fn sign_in_to_both(agent: &AgentDir, auth: &MockAuth) -> (Finished, Finished, SignedIn) {
    // ChatGPT, through the browser.
    let mut run = start_login(agent, auth, &["openai-codex"]).await;
    let url = authorize_url(&run).await;
    let location = auth.redirect_for(&url).unwrap();
    browser::get(&location, WAIT).await;
    let codex = run.wait(WAIT).await;
    assert_eq!(codex.code, Some(0), "{}", codex.stderr_text());
    let exchange = &auth.token_requests("authorization_code")[0];
    let code = exchange.field("code").unwrap().to_string();
    let verifier = exchange.field("code_verifier").unwrap().to_string();
    let (first_refresh, first_access) = auth.current_tokens();
    let (first_refresh, first_access) = (first_refresh.unwrap(), first_access.unwrap());

    // GitHub Copilot, through the device flow.
    auth.push_poll(DevicePoll::Token(GITHUB.into()));
    let mut run = start_login(agent, auth, &["github-copilot"]).await;
    run.close_stdin();
    let copilot = run.wait(WAIT).await;
    assert_eq!(copilot.code, Some(0), "{}", copilot.stderr_text());
    let device_code = auth.requests_to("/login/oauth/access_token")[0]
        .field("device_code")
        .unwrap()
        .to_string();
    let first_copilot = auth.last_copilot_token().unwrap();
    let signed_in = SignedIn {
        code,
        verifier,
        first_access,
        first_refresh,
        device_code,
        first_copilot,
    };
    (codex, copilot, signed_in)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn login_and_refresh_secrets_never_leak() {
    let (auth, llm) = (start_auth().await, start_mock().await);
    auth.set_account(ACCOUNT);
    let agent = AgentDir::new();
    let mut outputs: Vec<(String, String)> = Vec::new();

    let (codex, copilot, signed_in) = sign_in_to_both(&agent, &auth).await;
    let SignedIn {
        code,
        verifier,
        first_access,
        first_refresh,
        device_code,
        first_copilot,
    } = signed_in;
    for (name, finished) in [("codex login", &codex), ("copilot login", &copilot)] {
        outputs.push((format!("{name} stdout"), finished.stdout_text()));
        outputs.push((format!("{name} stderr"), finished.stderr_text()));
    }

    // Both sign-ins expire: the session refreshes them, and the provider echoes the tokens.
    let mut stored = auth_json(&agent);
    stored["openai-codex"]["expires"] = json!(now_ms() - 1_000);
    stored["github-copilot"]["expires"] = json!(now_ms() - 1_000);
    agent.write("auth.json", &stored.to_string());
    let (cwd, sessions) = (temp_cwd(), temp_cwd());
    let mut p = rpc(&agent, &cwd.path, &auth, &llm)
        .arg("--session-dir")
        .arg(&sessions.path)
        .model("openai-codex/gpt-5.5")
        .spawn_rpc()
        .await;
    let echo = |secrets: &[&str]| Step::HttpError {
        status: 401,
        message: format!("rejected credentials {}", secrets.join(" ")),
    };
    let (second_refresh, second_access) = {
        llm.push(Step::text("placeholder"));
        prompt(&mut p, "p0", text("warm up")).await;
        let (r, a) = auth.current_tokens();
        (r.unwrap(), a.unwrap())
    };
    assert_ne!(second_access, first_access, "refreshed");
    llm.push(echo(&[&second_access, ACCOUNT]));
    let message = prompt(&mut p, "p1", text("go")).await;
    assert_eq!(message["stopReason"], "error");
    p.request_ok(
        "s",
        "model.select",
        Some(json!({"provider": "github-copilot", "id": "gpt-4.1"})),
    )
    .await;
    llm.push(Step::text("placeholder"));
    prompt(&mut p, "p2", text("warm up")).await;
    let second_copilot = auth.last_copilot_token().unwrap();
    assert_ne!(second_copilot, first_copilot, "exchanged again");
    llm.push(echo(&[&second_copilot]));
    let message = prompt(&mut p, "p3", text("go")).await;
    assert_eq!(message["stopReason"], "error");
    // The secrets did reach the provider, so the scan below means something.
    let requests = llm.requests();
    assert!(requests.iter().any(|r| {
        r.header("authorization")
            .is_some_and(|h| h.contains(&second_copilot))
    }));
    p.exit_by_eof().await;

    outputs.extend(written(&p, &[&sessions.path]));
    assert!(
        outputs.iter().any(|(source, _)| source.ends_with(".jsonl")),
        "a journal was written"
    );
    assert_no_secrets(
        &outputs,
        &[
            &code,
            &verifier,
            &device_code,
            &first_access,
            &first_refresh,
            &second_access,
            &second_refresh,
            GITHUB,
            &first_copilot,
            &second_copilot,
            ACCOUNT,
        ],
    );
}
