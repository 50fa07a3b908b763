//! `zi login github-copilot` through the real binary against the mock GitHub: the device flow's
//! polling (pending, `slow_down`, expiry, refusal), the Copilot token exchange, enterprise
//! domains, and enabling the plan's models.

use serde_json::json;
use zi_test_support::dirs::AgentDir;
use zi_test_support::mock_auth::{DevicePoll, MockAuth, USER_CODE, start_auth};
use zi_test_support::mock_llm::{MockLlm, start_mock};
use zi_test_support::zi_command::{Finished, OneShot};

use super::*;

const GITHUB: &str = "gho_device-login-secret-4a2f";

fn start(agent: &AgentDir, auth: &MockAuth, llm: &MockLlm, args: &[&str]) -> OneShot {
    let mut run = endpoints(
        ZiCommand::new(env!("CARGO_BIN_EXE_zi"))
            .arg("login")
            .args(args)
            .agent_dir(agent),
        auth,
        llm,
    )
    .spawn_one_shot();
    run.close_stdin();
    run
}

async fn login(agent: &AgentDir, auth: &MockAuth, llm: &MockLlm, args: &[&str]) -> Finished {
    let mut run = start(agent, auth, llm, args);
    run.wait(Duration::from_secs(60)).await
}

/// The instants of the polls, after the device-code request.
fn poll_gaps(auth: &MockAuth) -> Vec<Duration> {
    let mut instants = vec![auth.requests_to("/login/device/code")[0].at];
    instants.extend(
        auth.requests_to("/login/oauth/access_token")
            .iter()
            .map(|r| r.at),
    );
    instants.windows(2).map(|w| w[1] - w[0]).collect()
}

/// Every catalog model was enabled once, with the Copilot token and Copilot's headers.
fn check_models_enabled(llm: &MockLlm, copilot: &str) {
    let policies: Vec<_> = llm
        .requests()
        .into_iter()
        .filter(|r| r.path.ends_with("/policy"))
        .collect();
    assert!(policies.len() >= 10, "{}", policies.len());
    assert!(
        policies
            .iter()
            .any(|r| r.path == "/v1/models/claude-sonnet-4.5/policy")
    );
    let copilot_bearer = format!("Bearer {copilot}");
    for policy in &policies {
        assert_eq!(policy.body, json!({"state": "enabled"}));
        assert_eq!(
            policy.header("authorization"),
            Some(copilot_bearer.as_str())
        );
        assert_eq!(policy.header("openai-intent"), Some("chat-policy"));
        assert_eq!(policy.header("x-interaction-type"), Some("chat-policy"));
        assert_eq!(policy.header("copilot-integration-id"), Some("vscode-chat"));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copilot_device_flow_exchanges_and_enables_models() {
    let (auth, llm) = (start_auth().await, start_mock().await);
    auth.set_device_timing(1, 900);
    auth.push_poll(DevicePoll::Pending);
    auth.push_poll(DevicePoll::Pending);
    auth.push_poll(DevicePoll::Token(GITHUB.into()));
    let agent = AgentDir::new();
    let run = start(&agent, &auth, &llm, &["github-copilot"]);
    let line = run.stdout_line(WAIT, |line| line.contains(USER_CODE)).await;
    assert_eq!(
        line,
        format!(
            "Open {}/login/device and enter the code {USER_CODE} (valid for 15 min).",
            auth.base_url()
        )
    );
    let mut run = run;
    let finished = run.wait(WAIT).await;
    assert_eq!(finished.code, Some(0), "{}", finished.stderr_text());
    assert!(
        finished
            .stdout_text()
            .contains("Signed in to GitHub Copilot (github-copilot). Models: github-copilot/"),
        "{}",
        finished.stdout_text()
    );

    let device = &auth.requests_to("/login/device/code")[0];
    let form: Vec<(&str, &str)> = device
        .form
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    assert_eq!(
        form,
        [
            ("client_id", "Iv1.b507a08c87ecfe98"),
            ("scope", "read:user")
        ]
    );
    assert_eq!(device.header("accept"), Some("application/json"));
    assert_eq!(
        device.header("user-agent"),
        Some("GitHubCopilotChat/0.35.0")
    );
    let polls = auth.requests_to("/login/oauth/access_token");
    assert_eq!(polls.len(), 3);
    assert_eq!(
        polls[0].field("grant_type"),
        Some("urn:ietf:params:oauth:grant-type:device_code")
    );
    // The first poll waits one interval; each later one waits the interval again.
    for gap in poll_gaps(&auth) {
        assert!(gap >= Duration::from_millis(990), "{gap:?}");
    }
    let exchange = &auth.requests_to("/copilot_internal/v2/token")[0];
    let bearer = format!("Bearer {GITHUB}");
    assert_eq!(exchange.header("authorization"), Some(bearer.as_str()));
    assert_eq!(
        exchange.header("editor-plugin-version"),
        Some("copilot-chat/0.35.0")
    );

    let copilot = auth.last_copilot_token().unwrap();
    check_models_enabled(&llm, &copilot);

    let entry = &auth_json(&agent)["github-copilot"];
    assert_eq!(entry["type"], "oauth");
    assert_eq!(entry["refresh"], GITHUB);
    assert_eq!(entry["access"], copilot.as_str());
    assert!(entry.get("enterpriseUrl").is_none());
    let expires_at: i64 = copilot
        .split(';')
        .find_map(|f| f.strip_prefix("exp="))
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(entry["expires"], expires_at * 1000 - 300_000);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copilot_slow_down_adds_five_seconds() {
    let (auth, llm) = (start_auth().await, start_mock().await);
    auth.set_device_timing(1, 900);
    auth.push_poll(DevicePoll::SlowDown(None));
    auth.push_poll(DevicePoll::Token(GITHUB.into()));
    let finished = login(&AgentDir::new(), &auth, &llm, &["github-copilot"]).await;
    assert_eq!(finished.code, Some(0), "{}", finished.stderr_text());
    let gaps = poll_gaps(&auth);
    assert!(gaps[1] >= Duration::from_millis(5_990), "{gaps:?}");

    // A slow_down that names an interval: that interval.
    let (auth, llm) = (start_auth().await, start_mock().await);
    auth.set_device_timing(1, 900);
    auth.push_poll(DevicePoll::SlowDown(Some(3)));
    auth.push_poll(DevicePoll::Token(GITHUB.into()));
    let finished = login(&AgentDir::new(), &auth, &llm, &["github-copilot"]).await;
    assert_eq!(finished.code, Some(0), "{}", finished.stderr_text());
    let gaps = poll_gaps(&auth);
    assert!(
        gaps[1] >= Duration::from_millis(2_990) && gaps[1] < Duration::from_millis(5_000),
        "{gaps:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copilot_expired_and_denied_device_codes_fail() {
    for (poll, expires_in, message) in [
        (
            Some(DevicePoll::Expired),
            900,
            "The device code expired; run zi login github-copilot again",
        ),
        (
            Some(DevicePoll::Denied),
            900,
            "Sign-in was denied (access_denied)",
        ),
        (None, 2, "Device flow timed out"),
    ] {
        let (auth, llm) = (start_auth().await, start_mock().await);
        auth.set_device_timing(1, expires_in);
        if let Some(poll) = poll {
            auth.push_poll(poll);
        }
        let agent = AgentDir::new();
        let finished = login(&agent, &auth, &llm, &["github-copilot"]).await;
        assert_eq!(finished.code, Some(1), "{message}");
        assert_eq!(finished.stderr_text().trim(), message);
        assert!(!agent.path().join("auth.json").exists());
        assert!(auth.requests_to("/copilot_internal/v2/token").is_empty());
        assert!(
            !finished.stdout_text().contains("dc-mock"),
            "the device code stays secret"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copilot_enterprise_domain_is_stored() {
    let (auth, llm) = (start_auth().await, start_mock().await);
    auth.push_poll(DevicePoll::Token(GITHUB.into()));
    let agent = AgentDir::new();
    let finished = login(
        &agent,
        &auth,
        &llm,
        &["github-copilot", "--enterprise", "https://Company.ghe.com/"],
    )
    .await;
    assert_eq!(finished.code, Some(0), "{}", finished.stderr_text());
    assert_eq!(
        auth_json(&agent)["github-copilot"]["enterpriseUrl"],
        "company.ghe.com"
    );
    let status = ZiCommand::new(env!("CARGO_BIN_EXE_zi"))
        .args(["login", "--status"])
        .agent_dir(&agent)
        .run_to_end(b"", WAIT)
        .await
        .unwrap();
    assert!(
        status
            .stdout_text()
            .contains("github-copilot  signed in to company.ghe.com (token valid until "),
        "{}",
        status.stdout_text()
    );
    let finished = login(
        &AgentDir::new(),
        &auth,
        &llm,
        &["github-copilot", "--enterprise", "https://"],
    )
    .await;
    assert_eq!(finished.code, Some(1));
    assert_eq!(
        finished.stderr_text().trim(),
        "Invalid GitHub Enterprise URL/domain"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copilot_policy_failures_do_not_fail_login() {
    let (auth, llm) = (start_auth().await, start_mock().await);
    auth.push_poll(DevicePoll::Token(GITHUB.into()));
    llm.set_policy_status(500);
    let agent = AgentDir::new();
    let finished = login(&agent, &auth, &llm, &["github-copilot"]).await;
    assert_eq!(finished.code, Some(0), "{}", finished.stderr_text());
    assert!(
        llm.requests().iter().any(|r| r.path.ends_with("/policy")),
        "the models were asked for"
    );
    assert_eq!(auth_json(&agent)["github-copilot"]["refresh"], GITHUB);
}
