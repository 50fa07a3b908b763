use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;
use zi_ai::model::{Compat, ModelCost};
use zi_ai::{Api, LlmContext, Model, StreamOptions, stream_assistant};
use zi_protocol::ThinkingLevel;
use zi_protocol::state::InputKind;
use zi_test_support::mock_llm::{MockLlm, Step};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timing() {
    let mock = MockLlm::start().await.unwrap();
    let model = Arc::new(Model { provider: "mock".into(), id: "m".into(), name: "m".into(), api: Api::OpenAiCompletions, base_url: mock.base_url(), reasoning: false, thinking_level_map: BTreeMap::new(), input: vec![InputKind::Text], cost: ModelCost::default(), context_window: 1000, max_tokens: 100, headers: BTreeMap::new(), compat: Compat::default(), api_key: None });
    for _ in 0..6 {
        mock.push(Step::Bytes { total_bytes: 64 * 1024, delta_bytes: 4 });
        let t = Instant::now();
        let opts = StreamOptions { api_key: None, thinking: ThinkingLevel::Off, cancel: CancellationToken::new(), idle_timeout: Duration::from_secs(30), session_id: String::new() };
        let mut rx = stream_assistant(model.clone(), LlmContext::default(), opts);
        let mut n = 0;
        while let Some(_e) = rx.recv().await { n += 1; }
        eprintln!("events {n} in {:?}", t.elapsed());
    }
}
