//! Black-box tests of subscriptions (issue 26, docs/providers.md#subscriptions): the real binary
//! against the mock sign-in server (`zi_test_support::mock_auth`) and the mock provider, with
//! every endpoint pointed at them through the documented `ZI_*` variables.
//!
//! - [`login_codex`], [`login_copilot`]: both sign-in flows through `zi login`.
//! - [`commands`]: `zi login --status`, `zi logout`, the picker, the agent dir, refusals.
//! - [`interactive`]: `/login` and `/logout` in the terminal view (tmux).
//! - [`providers`]: the Codex and Copilot requests (paths, headers, bodies, usage limits).
//! - [`secrets`]: a scan of everything zi wrote for the sign-ins' secrets.
//! - [`refresh`]: refresh before expiry under the auth.json lock, shared by processes, and its
//!   failures.

mod commands;
mod interactive;
mod login_codex;
mod login_copilot;
mod providers;
mod refresh;
mod secrets;

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};
use zi_test_support::dirs::AgentDir;
use zi_test_support::harness::Harness;
use zi_test_support::mock_auth::{MockAuth, fake_jwt};
use zi_test_support::mock_llm::MockLlm;
use zi_test_support::scan::{assert_no_secrets, written};
use zi_test_support::zi_command::ZiCommand;

/// How long a test waits for an event or a screen.
pub const WAIT: Duration = Duration::from_secs(30);
/// The ChatGPT account of the stored sign-ins.
pub const ACCOUNT: &str = "acct-secret-7d1c";
/// The refresh token of a stored ChatGPT sign-in (the mock is told it is valid).
pub const CODEX_REFRESH: &str = "rt-seeded-secret-2b8e";
/// The GitHub token of a stored Copilot sign-in.
pub const GITHUB_TOKEN: &str = "gho_seeded-secret-5f3a";
/// The Copilot token of a stored Copilot sign-in.
pub const COPILOT_TOKEN: &str =
    "tid=seeded;exp=1;proxy-ep=proxy.seeded.invalid;sku=x:sig-seeded-secret-9c4d";

/// Now, in milliseconds since the Unix epoch.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// A stored ChatGPT sign-in whose access token expires `expires_in_ms` from now.
pub fn codex_entry(expires_in_ms: i64) -> Value {
    json!({"type": "oauth", "access": fake_jwt(ACCOUNT, 0), "refresh": CODEX_REFRESH,
           "expires": now_ms() + expires_in_ms, "accountId": ACCOUNT})
}

/// A stored Copilot sign-in whose token expires `expires_in_ms` from now.
pub fn copilot_entry(expires_in_ms: i64) -> Value {
    json!({"type": "oauth", "access": COPILOT_TOKEN, "refresh": GITHUB_TOKEN,
           "expires": now_ms() + expires_in_ms})
}

/// `zi --mode rpc` with every sign-in endpoint at `auth` and both subscription APIs at `llm`.
pub fn rpc(agent: &AgentDir, cwd: &Path, auth: &MockAuth, llm: &MockLlm) -> ZiCommand {
    endpoints(
        ZiCommand::rpc(env!("CARGO_BIN_EXE_zi"), agent, cwd).timeout(WAIT),
        auth,
        llm,
    )
}

/// [`rpc`] with `--no-session --model MODEL`, started.
pub async fn session(
    agent: &AgentDir,
    cwd: &Path,
    (auth, llm): (&MockAuth, &MockLlm),
    model: &str,
) -> Harness {
    rpc(agent, cwd, auth, llm)
        .no_session()
        .model(model)
        .spawn_rpc()
        .await
}

/// The `ZI_*` endpoint variables pointing at the mocks.
pub fn endpoints(command: ZiCommand, auth: &MockAuth, llm: &MockLlm) -> ZiCommand {
    command
        .env("ZI_OPENAI_AUTH_URL", auth.base_url())
        .env("ZI_GITHUB_URL", auth.base_url())
        .env("ZI_GITHUB_API_URL", auth.base_url())
        .env("ZI_CODEX_BASE_URL", llm.base_url())
        .env("ZI_COPILOT_BASE_URL", llm.base_url())
        .env("ZI_LOGIN_CALLBACK_PORT", "0")
}

/// Prompts and returns the final assistant message of the run.
pub async fn prompt(p: &mut Harness, id: &str, params: Value) -> Value {
    let after = p.last_sequence();
    let response = p.request(id, "session.prompt", Some(params)).await;
    assert_eq!(response["ok"], true, "{response}");
    p.settled_reply(after).await
}

/// A direct prompt of `text`.
pub fn text(text: &str) -> Value {
    json!({"delivery": "direct", "text": text})
}

/// Whether every model of `provider` in a `model.list` result is configured.
pub fn configured(list: &Value, provider: &str) -> bool {
    let models: Vec<&Value> = list["models"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["model"]["provider"] == provider || m["provider"] == provider)
        .collect();
    assert!(!models.is_empty(), "{provider} lists models: {list}");
    models.iter().all(|m| m["configured"] == true)
}

/// A `$BROWSER` for tests: a script in `dir` that writes the address it is asked to open into
/// a file. Returns the script and that file.
pub fn recording_browser(dir: &Path) -> (std::path::PathBuf, std::path::PathBuf) {
    let opened = dir.join("browser-opened.txt");
    let script = dir.join("browser.sh");
    std::fs::write(
        &script,
        format!("#!/bin/sh\nprintf '%s' \"$1\" > '{}'\n", opened.display()),
    )
    .unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    (script, opened)
}

/// The address the [`recording_browser`] was asked to open, once it was.
pub async fn opened_address(opened: &Path) -> String {
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        let url = std::fs::read_to_string(opened).unwrap_or_default();
        if url.contains("/oauth/authorize?") {
            return url;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no browser was opened"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// auth.json as JSON.
pub fn auth_json(agent: &AgentDir) -> Value {
    let text = std::fs::read_to_string(agent.path().join("auth.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}
