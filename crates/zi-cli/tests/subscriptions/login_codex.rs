//! `zi login openai-codex` through the real binary against the mock OAuth server: the browser
//! step (the test follows the sign-in page's redirect to zi's callback), the pasted address or
//! code, a forged state, a refused consent, an invalid auth.json, a failing code exchange.

use serde_json::json;
use zi_test_support::browser;
use zi_test_support::dirs::{AgentDir, temp_cwd};
use zi_test_support::mock_auth::{Consent, MockAuth, start_auth};
use zi_test_support::mock_llm::start_mock;
use zi_test_support::zi_command::OneShot;

use super::*;

/// `zi login ARGS…` with the endpoints at the mocks, stdin open for pasting.
pub async fn start_login(agent: &AgentDir, auth: &MockAuth, args: &[&str]) -> OneShot {
    let llm = start_mock().await;
    endpoints(
        ZiCommand::new(env!("CARGO_BIN_EXE_zi"))
            .arg("login")
            .args(args)
            .agent_dir(agent),
        auth,
        &llm,
    )
    .spawn_one_shot()
}

/// The authorization URL zi printed.
pub async fn authorize_url(run: &OneShot) -> String {
    run.stdout_line(WAIT, |line| line.trim().starts_with("http://127.0.0.1:"))
        .await
        .trim()
        .to_string()
}

/// The query parameters of a URL.
pub fn params(url: &str) -> Vec<(String, String)> {
    let query = url.split_once('?').map_or("", |(_, q)| q);
    query
        .split('&')
        .filter_map(|pair| pair.split_once('='))
        .map(|(k, v)| (k.to_string(), percent_decode(v)))
        .collect()
}

fn percent_decode(text: &str) -> String {
    let text = text.replace('+', " ");
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && let Some(byte) = text
                .get(i + 1..i + 3)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
        {
            out.push(byte);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8(out).unwrap()
}

pub fn param(params: &[(String, String)], name: &str) -> String {
    params
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.clone())
        .unwrap_or_else(|| panic!("no {name} in {params:?}"))
}

fn no_auth_json(agent: &AgentDir) {
    assert!(
        !agent.path().join("auth.json").exists(),
        "nothing may be written"
    );
}

/// Checks every parameter of the authorization URL; returns its challenge and redirect URI.
fn check_authorize_url(url: &str) -> (String, String) {
    let query = params(url);
    let names: Vec<&str> = query.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(
        names,
        [
            "response_type",
            "client_id",
            "redirect_uri",
            "scope",
            "code_challenge",
            "code_challenge_method",
            "state",
            "id_token_add_organizations",
            "codex_cli_simplified_flow",
            "originator"
        ]
    );
    assert_eq!(param(&query, "response_type"), "code");
    assert_eq!(param(&query, "client_id"), "app_EMoamEEZ73f0CkXaXp7hrann");
    assert_eq!(
        param(&query, "scope"),
        "openid profile email offline_access"
    );
    assert_eq!(param(&query, "code_challenge_method"), "S256");
    assert_eq!(param(&query, "originator"), "zi");
    assert_eq!(param(&query, "id_token_add_organizations"), "true");
    assert_eq!(param(&query, "codex_cli_simplified_flow"), "true");
    let challenge = param(&query, "code_challenge");
    assert_eq!(challenge.len(), 43);
    let state = param(&query, "state");
    assert!(state.len() == 32 && state.chars().all(|c| c.is_ascii_hexdigit()));
    let redirect = param(&query, "redirect_uri");
    assert!(
        redirect.starts_with("http://localhost:") && redirect.ends_with("/auth/callback"),
        "{redirect}"
    );
    assert!(
        !redirect.contains(":1455/"),
        "ZI_LOGIN_CALLBACK_PORT=0 picks a free port"
    );

    (challenge, redirect)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_browser_login_stores_the_entry() {
    let auth = start_auth().await;
    auth.set_account(ACCOUNT);
    let agent =
        AgentDir::new().auth(&json!({"anthropic": {"type": "api_key", "key": "sk-ant-kept"}}));
    // $BROWSER is honoured: this one writes down the address it was asked to open.
    let (script, opened) = recording_browser(agent.path());
    let llm = start_mock().await;
    let cwd = temp_cwd();
    let mut run = endpoints(
        ZiCommand::new(env!("CARGO_BIN_EXE_zi"))
            .args(["login", "openai-codex"])
            .agent_dir(&agent)
            .env("BROWSER", &script)
            .current_dir(&cwd.path),
        &auth,
        &llm,
    )
    .spawn_one_shot();
    let url = authorize_url(&run).await;
    assert!(url.starts_with(&format!("{}/oauth/authorize?", auth.base_url())));
    let (challenge, redirect) = check_authorize_url(&url);

    // The browser opened the page, signed in, and followed the redirect to zi.
    assert_eq!(opened_address(&opened).await, url);
    let location = auth.redirect_for(&url).unwrap();
    let page = browser::get(&location, WAIT).await;
    assert_eq!(page.status, 200, "{}", page.body);
    assert!(
        page.body
            .contains("Signed in to zi. You can close this window.")
    );
    let finished = run.wait(WAIT).await;
    assert_eq!(finished.code, Some(0), "{}", finished.stderr_text());
    assert!(
        finished.stdout_text().contains(
            "Signed in to ChatGPT Plus/Pro (Codex) (openai-codex). Models: openai-codex/gpt-5.5, openai-codex/gpt-5.4"
        ),
        "{}",
        finished.stdout_text()
    );

    let exchanges = auth.token_requests("authorization_code");
    assert_eq!(exchanges.len(), 1);
    let exchange = &exchanges[0];
    assert_eq!(
        exchange.header("content-type"),
        Some("application/x-www-form-urlencoded")
    );
    let fields: Vec<&str> = exchange.form.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(
        fields,
        [
            "grant_type",
            "client_id",
            "code",
            "code_verifier",
            "redirect_uri"
        ]
    );
    let code = param(&params(&location), "code");
    assert_eq!(exchange.field("code"), Some(code.as_str()));
    assert_eq!(exchange.field("redirect_uri"), Some(redirect.as_str()));
    // The mock checked S256(code_verifier) against the URL's challenge before answering.
    let verifier = exchange.field("code_verifier").unwrap();
    assert_eq!(verifier.len(), 43);
    assert_ne!(verifier, challenge);

    let stored = auth_json(&agent);
    let (refresh, access) = auth.current_tokens();
    let entry = &stored["openai-codex"];
    assert_eq!(entry["type"], "oauth");
    assert_eq!(entry["access"], access.unwrap());
    assert_eq!(entry["refresh"], refresh.unwrap());
    assert_eq!(entry["accountId"], ACCOUNT);
    let expires = entry["expires"].as_i64().unwrap();
    assert!((expires - (now_ms() + 3_600_000)).abs() < 60_000);
    assert_eq!(stored["anthropic"]["key"], "sk-ant-kept");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&agent.path().join("auth.json")), 0o600);
        assert_eq!(mode(agent.path()), 0o700);
    }
    for secret in [code.as_str(), verifier] {
        assert!(!finished.stdout_text().contains(secret));
        assert!(!finished.stderr_text().contains(secret));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_paste_path_accepts_url_code_and_code_hash_state() {
    let auth = start_auth().await;
    for (n, form) in ["address", "code#state", "code"].into_iter().enumerate() {
        let agent = AgentDir::new();
        let mut run = start_login(&agent, &auth, &["openai-codex"]).await;
        let url = authorize_url(&run).await;
        let location = auth.redirect_for(&url).unwrap();
        let query = params(&location);
        let line = match form {
            "address" => location.clone(),
            "code#state" => format!("{}#{}", param(&query, "code"), param(&query, "state")),
            _ => param(&query, "code"),
        };
        // An empty line first: ignored.
        run.write_stdin(&format!("\n{line}\n")).await;
        let finished = run.wait(WAIT).await;
        assert_eq!(finished.code, Some(0), "{form}: {}", finished.stderr_text());
        assert_eq!(auth.token_requests("authorization_code").len(), n + 1);
        assert_eq!(auth_json(&agent)["openai-codex"]["type"], "oauth");
    }

    // The callback port is taken: zi says so and the pasted address still works.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port().to_string();
    let agent = AgentDir::new();
    let llm = start_mock().await;
    let cwd = temp_cwd();
    let mut run = endpoints(
        ZiCommand::new(env!("CARGO_BIN_EXE_zi"))
            .args(["login", "openai-codex"])
            .agent_dir(&agent)
            .current_dir(&cwd.path),
        &auth,
        &llm,
    )
    .env("ZI_LOGIN_CALLBACK_PORT", &port)
    .spawn_one_shot();
    let url = authorize_url(&run).await;
    assert!(
        url.contains(&format!("localhost%3A{port}%2Fauth%2Fcallback")),
        "{url}"
    );
    run.write_stdin(&format!("{}\n", auth.redirect_for(&url).unwrap()))
        .await;
    let finished = run.wait(WAIT).await;
    assert_eq!(finished.code, Some(0), "{}", finished.stderr_text());
    assert!(
        finished
            .stderr_text()
            .contains(&format!("Warning: could not listen on 127.0.0.1:{port} ("))
            && finished
                .stderr_text()
                .contains("); paste the address instead"),
        "{}",
        finished.stderr_text()
    );
    drop(taken);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_state_mismatch_writes_nothing() {
    let auth = start_auth().await;
    auth.set_consent(Consent::ForgeState);
    let agent = AgentDir::new();
    let mut run = start_login(&agent, &auth, &["openai-codex"]).await;
    let url = authorize_url(&run).await;
    let forged = auth.redirect_for(&url).unwrap();
    let page = browser::get(&forged, WAIT).await;
    assert_eq!(page.status, 400);
    let finished = run.wait(WAIT).await;
    assert_eq!(finished.code, Some(1));
    assert!(
        finished
            .stderr_text()
            .contains("State mismatch: the sign-in reply did not come from this login"),
        "{}",
        finished.stderr_text()
    );

    // A pasted address with another login's state.
    auth.set_consent(Consent::Approve);
    let mut run = start_login(&agent, &auth, &["openai-codex"]).await;
    let url = authorize_url(&run).await;
    let location = auth.redirect_for(&url).unwrap();
    let state = param(&params(&location), "state");
    run.write_stdin(&format!(
        "{}\n",
        location.replace(&state, "0123456789abcdef0123456789abcdef")
    ))
    .await;
    let finished = run.wait(WAIT).await;
    assert_eq!(finished.code, Some(1));
    assert!(finished.stderr_text().contains("State mismatch"));
    assert!(auth.requests_to("/oauth/token").is_empty(), "no exchange");
    no_auth_json(&agent);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_denied_consent_writes_nothing() {
    let auth = start_auth().await;
    auth.set_consent(Consent::Deny);
    let agent = AgentDir::new();
    let mut run = start_login(&agent, &auth, &["openai-codex"]).await;
    let url = authorize_url(&run).await;
    let page = browser::get(&auth.redirect_for(&url).unwrap(), WAIT).await;
    assert_eq!(page.status, 400);
    let finished = run.wait(WAIT).await;
    assert_eq!(finished.code, Some(1));
    assert_eq!(
        finished.stderr_text().trim(),
        "Sign-in was denied (access_denied: The user refused)"
    );
    assert!(auth.requests_to("/oauth/token").is_empty());
    no_auth_json(&agent);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_invalid_auth_json_is_refused_before_login() {
    let auth = start_auth().await;
    let agent = AgentDir::new();
    agent.write("auth.json", "{ not json");
    let mut run = start_login(&agent, &auth, &["openai-codex"]).await;
    let finished = run.wait(WAIT).await;
    assert_eq!(finished.code, Some(1));
    assert!(finished.stdout.is_empty(), "{}", finished.stdout_text());
    assert!(
        finished
            .stderr_text()
            .contains("auth.json is not a valid JSON object; zi leaves it as it is"),
        "{}",
        finished.stderr_text()
    );
    assert_eq!(
        std::fs::read_to_string(agent.path().join("auth.json")).unwrap(),
        "{ not json"
    );
    assert!(auth.requests().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_token_exchange_failure_writes_nothing() {
    let auth = start_auth().await;
    auth.echo_next_token(400);
    let agent = AgentDir::new();
    let mut run = start_login(&agent, &auth, &["openai-codex"]).await;
    let url = authorize_url(&run).await;
    let location = auth.redirect_for(&url).unwrap();
    browser::get(&location, WAIT).await;
    let finished = run.wait(WAIT).await;
    assert_eq!(finished.code, Some(1));
    let stderr = finished.stderr_text();
    assert!(
        stderr.starts_with("Could not complete the sign-in: 400 invalid_request: you sent "),
        "{stderr}"
    );
    let exchange = &auth.token_requests("authorization_code")[0];
    let (code, verifier) = (
        exchange.field("code").unwrap(),
        exchange.field("code_verifier").unwrap(),
    );
    assert!(exchange.body.contains(code) && exchange.body.contains(verifier));
    for secret in [code, verifier] {
        assert!(!stderr.contains(secret), "{stderr}");
        assert!(!finished.stdout_text().contains(secret));
    }
    no_auth_json(&agent);
}
