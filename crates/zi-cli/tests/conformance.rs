//! Runs the `zi-conformance` kit against the real `zi` binary: every check must pass.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zi_passes_the_conformance_kit() {
    let config = zi_conformance::Config {
        server: format!(
            "{} --mode rpc --no-session --agent-dir {{agent_dir}} --model {{model}}",
            env!("CARGO_BIN_EXE_zi")
        ),
        filter: None,
    };
    let summary = zi_conformance::run(&config).await;
    assert!(summary.results.len() >= 60, "{}", summary.text());
    assert_eq!(summary.failed(), 0, "{}", summary.text());
}
