//! Opt-in end-to-end run against a real local model (llama.cpp serving SmolLM2-135M). Ignored by
//! default: run `ZI_E2E_LOCAL_LLM=1 scripts/e2e-local-llm.sh`, which starts the server and sets
//! `LOCAL_LLM_BASE_URL`.

use std::time::Duration;

use serde_json::json;
use zi_test_support::dirs::{AgentDir, temp_cwd};
use zi_test_support::zi_command::ZiCommand;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a local model: ZI_E2E_LOCAL_LLM=1 scripts/e2e-local-llm.sh"]
async fn local_llm_end_to_end() {
    let Ok(base_url) = std::env::var("LOCAL_LLM_BASE_URL") else {
        panic!("LOCAL_LLM_BASE_URL is not set; run scripts/e2e-local-llm.sh");
    };
    let agent = AgentDir::new().settings(r#"{"retryMaxRetries": 1, "retryBaseDelayMs": 500}"#);
    agent.write(
        "models.json",
        &json!({"providers": {"local": {"baseUrl": base_url, "api": "openai-completions",
            "apiKey": "none",
            "compat": {"supportsDeveloperRole": false, "supportsReasoningEffort": false},
            "models": [{"id": "smollm2-135m", "contextWindow": 8192, "maxTokens": 256}]}}})
        .to_string(),
    );
    let cwd = temp_cwd();
    let mut p = ZiCommand::rpc(env!("CARGO_BIN_EXE_zi"), &agent, &cwd.path)
        .no_session()
        .model("local/smollm2-135m")
        .timeout(Duration::from_secs(300))
        .spawn_rpc()
        .await;
    let after = p.last_sequence();
    p.prompt("p1", "Say hello in five words.").await;
    let message = p.settled_reply(after).await;
    eprintln!("{message}");
    assert_eq!(message["stopReason"], "stop", "{message}");
    assert!(
        message["usage"]["output"].as_u64().unwrap_or(0) > 0,
        "{message}"
    );
    let text: String = message["content"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["text"].as_str())
        .collect();
    assert!(!text.trim().is_empty(), "{message}");
}

/// `scripts/e2e-local-llm.sh` finds `../shared/local-llm/up.sh` beside the repository it lives
/// in (not at a fixed machine path) and hands the URL it prints to the test run. Runs a copy of
/// the script in a scratch layout with a fake `up.sh` and a fake `cargo`; nothing is started.
#[test]
fn the_e2e_script_finds_up_sh_beside_the_repository() {
    use std::os::unix::fs::PermissionsExt as _;
    let root = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let executable = |path: &std::path::Path, body: &str| {
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).unwrap_or_else(|e| panic!("{e}"));
        }
        std::fs::write(path, body).unwrap_or_else(|e| panic!("{e}"));
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755))
            .unwrap_or_else(|e| panic!("{e}"));
    };
    let script = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/e2e-local-llm.sh"),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let repo = root.path().join("checkout");
    executable(&repo.join("scripts/e2e-local-llm.sh"), &script);
    let log = root.path().join("log");
    executable(
        &root.path().join("shared/local-llm/up.sh"),
        &format!(
            "#!/bin/sh\necho \"up $1\" >> '{log}'\necho starting\necho http://127.0.0.1:9/v1\n",
            log = log.display()
        ),
    );
    let bin = root.path().join("bin");
    executable(
        &bin.join("cargo"),
        &format!(
            "#!/bin/sh\necho \"cargo $* in $PWD at $LOCAL_LLM_BASE_URL\" >> '{log}'\n",
            log = log.display()
        ),
    );
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = std::process::Command::new("bash")
        .arg(repo.join("scripts/e2e-local-llm.sh"))
        .arg("8123")
        .env("ZI_E2E_LOCAL_LLM", "1")
        .env_remove("LOCAL_LLM_UP")
        .env("PATH", path)
        .current_dir(root.path())
        .output()
        .unwrap_or_else(|e| panic!("run the script: {e}"));
    assert!(out.status.success(), "{out:?}");
    let log = std::fs::read_to_string(&log).unwrap_or_default();
    let repo = repo
        .canonicalize()
        .unwrap_or_else(|e| panic!("{e}"))
        .display()
        .to_string();
    assert_eq!(
        log,
        format!(
            "up 8123\ncargo test -p zi-cli --test all local_llm -- --ignored --nocapture in {repo} \
             at http://127.0.0.1:9/v1\n"
        )
    );
}
