//! Black-box tests of the provider layer through the real binary: every API over a loopback
//! socket, each credential source, `model.list` `configured`, thinking replay across turns, and
//! a scan of every byte zi wrote (frames, stderr, journal) for the configured secrets.

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};
use zi_test_support::dirs::{AgentDir, TempCwd, temp_cwd};
use zi_test_support::harness::Harness;
use zi_test_support::mock_llm::{MockLlm, MockUsage, Step};
use zi_test_support::scan::{assert_no_secrets, written};
use zi_test_support::zi_command::ZiCommand;

const WAIT: Duration = Duration::from_secs(30);
const ANTHROPIC_KEY: &str = "secret-anthropic-env-1f2e";
const OPENAI_KEY: &str = "secret-openai-authjson-3c4d";
const GOOGLE_KEY: &str = "secret-google-command-5a6b";
const OPENROUTER_KEY: &str = "secret-openrouter-flag-7e8f";
const HEADER_SECRET: &str = "secret-header-value-9a0b";
const PRICE: &str = "123.456";

/// models.json pointing four built-in providers at the mock, one key source each.
fn models_json(mock: &MockLlm) -> String {
    let base = mock.base_url();
    json!({"providers": {
        "anthropic": {"baseUrl": base,
            "modelOverrides": {"claude-sonnet-4-5": {"cost": {"input": 123.456, "output": 1, "cacheRead": 0, "cacheWrite": 0}}}},
        "openai": {"baseUrl": base},
        "google": {"baseUrl": base, "apiKey": format!("!printf {GOOGLE_KEY}"),
                   "headers": {"x-team-secret": HEADER_SECRET}},
        "openrouter": {"baseUrl": base}
    }})
    .to_string()
}

async fn spawn(agent: &AgentDir, cwd: &Path, sessions: &Path) -> Harness {
    ZiCommand::rpc(env!("CARGO_BIN_EXE_zi"), agent, cwd)
        .arg("--session-dir")
        .arg(sessions)
        .model("openrouter/moonshotai/kimi-k2.6")
        .args(["--api-key", OPENROUTER_KEY])
        .env("ANTHROPIC_API_KEY", ANTHROPIC_KEY)
        .timeout(WAIT)
        .spawn_rpc()
        .await
}

/// Prompts and returns the final assistant message of the run.
async fn prompt(p: &mut Harness, id: &str, text: &str) -> Value {
    let after = p.last_sequence();
    p.prompt(id, text).await;
    p.settled_reply(after).await
}

async fn select(p: &mut Harness, id: &str, provider: &str, model: &str) {
    p.request_ok(
        id,
        "model.select",
        Some(json!({"provider": provider, "id": model})),
    )
    .await;
}

fn reply(text: &str) -> Step {
    Step::Reply {
        thinking: vec!["thinking about it".into()],
        text: vec![text.into()],
        tool_calls: vec![],
        finish_reason: "stop".into(),
        usage: Some(MockUsage {
            prompt_tokens: 10,
            completion_tokens: 5,
            cached_tokens: 0,
        }),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_api_and_credential_source_through_the_binary() {
    let mock = MockLlm::start()
        .await
        .unwrap_or_else(|e| panic!("mock: {e}"));
    let agent = AgentDir::new().auth(&json!({"openai": {"type": "api_key", "key": OPENAI_KEY},
                "xai": {"type": "oauth", "refresh": "r", "access": "a", "expires": 1}}));
    agent.write("models.json", &models_json(&mock));
    let cwd = temp_cwd();
    let sessions = temp_cwd();
    let mut p = spawn(&agent, &cwd.path, &sessions.path).await;

    // configured: the flag's provider, auth.json, env and models.json apiKey; OAuth is not.
    let list = p.request_ok("l", "model.list", None).await;
    let configured = |provider: &str| {
        list["models"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|m| m["provider"] == provider)
            .all(|m| m["configured"] == true)
    };
    for provider in ["anthropic", "openai", "google", "openrouter"] {
        assert!(configured(provider), "{provider}: {list}");
    }
    for provider in ["xai", "groq", "mistral"] {
        assert!(!configured(provider), "{provider}: {list}");
    }

    // openai-completions (OpenRouter, --api-key).
    mock.push(reply("from openrouter"));
    let message = prompt(&mut p, "p1", "one").await;
    assert_eq!(message["api"], "openai-completions");
    assert_eq!(message["stopReason"], "stop", "{message}");

    // anthropic-messages (env var), twice: the second request replays the signed thinking.
    select(&mut p, "s2", "anthropic", "claude-sonnet-4-5").await;
    mock.push(reply("from anthropic"));
    mock.push(Step::text("again"));
    let message = prompt(&mut p, "p2", "two").await;
    assert_eq!(message["api"], "anthropic-messages");
    assert_eq!(message["content"][0]["thinkingSignature"], "mock-signature");
    assert!(message["usage"]["cost"]["input"].as_f64().unwrap_or(0.0) > 0.0);
    prompt(&mut p, "p3", "three").await;

    // openai-responses (auth.json).
    select(&mut p, "s4", "openai", "gpt-5").await;
    mock.push(reply("from openai"));
    let message = prompt(&mut p, "p4", "four").await;
    assert_eq!(message["api"], "openai-responses");
    assert_eq!(message["stopReason"], "stop", "{message}");

    // google-generative-ai (models.json `!command` key and a secret header).
    select(&mut p, "s5", "google", "gemini-2.5-flash").await;
    mock.push(reply("from google"));
    let message = prompt(&mut p, "p5", "five").await;
    assert_eq!(message["api"], "google-generative-ai");
    assert_eq!(message["stopReason"], "stop", "{message}");

    // A failure whose text would name the endpoint.
    mock.push(Step::HttpError {
        status: 400,
        message: format!("bad request to {}", mock.base_url()),
    });
    let message = prompt(&mut p, "p6", "six").await;
    assert_eq!(message["stopReason"], "error");

    assert_the_requests(&mock);

    p.exit_by_eof().await;

    assert_nothing_written_carries_a_secret(&p, &sessions, &mock);
    // The OAuth entry is reported on stderr, without its tokens.
    assert!(
        p.stderr_text().contains("xai has OAuth credentials"),
        "{}",
        p.stderr_text()
    );
}

/// What the providers received: each API's path and credential header, and the thinking replayed
/// as text (OpenRouter's, foreign and unsigned) or with its signature (Anthropic's own).
fn assert_the_requests(mock: &MockLlm) {
    let requests = mock.requests();
    let paths: Vec<&str> = requests.iter().map(|r| r.path.as_str()).collect();
    assert_eq!(
        paths,
        [
            "/v1/chat/completions",
            "/v1/messages",
            "/v1/messages",
            "/v1/responses",
            "/v1/models/gemini-2.5-flash:streamGenerateContent",
            "/v1/models/gemini-2.5-flash:streamGenerateContent",
        ]
    );
    let bearer = |k: &str| format!("Bearer {k}");
    assert_eq!(
        requests[0].header("authorization"),
        Some(bearer(OPENROUTER_KEY).as_str())
    );
    assert_eq!(requests[1].header("x-api-key"), Some(ANTHROPIC_KEY));
    assert_eq!(
        requests[3].header("authorization"),
        Some(bearer(OPENAI_KEY).as_str())
    );
    assert_eq!(requests[4].header("x-goog-api-key"), Some(GOOGLE_KEY));
    assert_eq!(requests[4].header("x-team-secret"), Some(HEADER_SECRET));
    // The OpenRouter reply's thinking goes as text (foreign, unsigned); Anthropic's own is
    // replayed with its signature.
    assert_eq!(
        requests[2].body["messages"][1]["content"][0],
        json!({"type": "text", "text": "thinking about it"})
    );
    let replayed = &requests[2].body["messages"][3]["content"][0];
    assert_eq!(
        replayed,
        &json!({"type": "thinking", "thinking": "thinking about it", "signature": "mock-signature"})
    );
}

/// Nothing zi wrote (frames, stderr, the journal) carries a key, a header value, the endpoint or
/// a price.
fn assert_nothing_written_carries_a_secret(p: &Harness, sessions: &TempCwd, mock: &MockLlm) {
    let files = zi_test_support::dirs::all_files(&sessions.path);
    assert!(!files.is_empty(), "a journal was written");
    let endpoint = mock.base_url();
    let origin = endpoint.trim_end_matches("/v1").to_string();
    assert_no_secrets(
        &written(p, &[&sessions.path]),
        &[
            ANTHROPIC_KEY,
            OPENAI_KEY,
            GOOGLE_KEY,
            OPENROUTER_KEY,
            HEADER_SECRET,
            PRICE,
            origin.as_str(),
        ],
    );
}

async fn initial_state(agent: &AgentDir, extra_args: &[&str], env: &[(&str, &str)]) -> Value {
    let cwd = temp_cwd();
    let mut builder = ZiCommand::rpc(env!("CARGO_BIN_EXE_zi"), agent, &cwd.path)
        .no_session()
        .args(extra_args)
        .timeout(WAIT);
    for (key, value) in env {
        builder = builder.env(key, value);
    }
    let mut p = builder.spawn_rpc().await;
    let ready = p.ready();
    p.close_stdin().await;
    let _ = p.wait_exit(WAIT).await;
    ready
}

fn selected(state: &Value) -> String {
    format!(
        "{}/{}",
        state["model"]["model"]["provider"].as_str().unwrap_or("-"),
        state["model"]["model"]["id"].as_str().unwrap_or("-")
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn initial_model_follows_flags_env_settings_and_the_preferred_list() {
    let agent = AgentDir::new();
    // Nothing configured: unselected, and RPC still starts.
    let state = initial_state(&agent, &[], &[]).await;
    assert_eq!(state["model"], json!({"type": "unselected"}));
    assert_eq!(state["thinkingLevel"], "off");

    // A key for groq only: the first configured model in catalog order.
    let groq = [("GROQ_API_KEY", "k-groq")];
    assert_eq!(
        selected(&initial_state(&agent, &[], &groq).await),
        "groq/openai/gpt-oss-120b"
    );
    // With an Anthropic key the preferred list wins.
    let both = [("GROQ_API_KEY", "k-groq"), ("ANTHROPIC_API_KEY", "k-ant")];
    let state = initial_state(&agent, &[], &both).await;
    assert_eq!(selected(&state), "anthropic/claude-opus-4-8");
    assert_eq!(state["thinkingLevel"], "medium");

    // The settings default, when configured, comes before the preferred list.
    agent.write(
        "settings.json",
        r#"{"defaultProvider": "groq", "defaultModel": "llama-3.3-70b-versatile", "defaultThinkingLevel": "high"}"#,
    );
    let state = initial_state(&agent, &[], &both).await;
    assert_eq!(selected(&state), "groq/llama-3.3-70b-versatile");
    assert_eq!(
        state["thinkingLevel"], "off",
        "clamped for a non-reasoning model"
    );

    // ZI_DEFAULT_MODEL and ZI_DEFAULT_THINKING beat settings; flags beat them.
    let env = [
        ("GROQ_API_KEY", "k-groq"),
        ("ANTHROPIC_API_KEY", "k-ant"),
        ("ZI_DEFAULT_MODEL", "claude-sonnet-4-5"),
        ("ZI_DEFAULT_THINKING", "low"),
    ];
    let state = initial_state(&agent, &[], &env).await;
    assert_eq!(selected(&state), "anthropic/claude-sonnet-4-5");
    assert_eq!(state["thinkingLevel"], "low");
    let state = initial_state(
        &agent,
        &[
            "--model",
            "groq/openai/gpt-oss-20b",
            "--thinking",
            "minimal",
        ],
        &env,
    )
    .await;
    assert_eq!(selected(&state), "groq/openai/gpt-oss-20b");
    assert_eq!(state["thinkingLevel"], "minimal");
}
