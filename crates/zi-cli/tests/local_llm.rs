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
    p.request_ok(
        "p1",
        "session.prompt",
        Some(json!({"delivery": "direct", "text": "Say hello in five words."})),
    )
    .await;
    p.event("agent_settled").await;
    let message = p
        .events()
        .iter()
        .filter(|e| e["type"] == "message_end")
        .map(|e| e["message"].clone())
        .rfind(|m| m["role"] == "assistant")
        .unwrap_or_default();
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
