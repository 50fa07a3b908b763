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
    for _ in 0..8 {
        mock.push(Step::Bytes { total_bytes: 64 * 1024, delta_bytes: 4 });
        let t = Instant::now();
        let opts = StreamOptions { api_key: None, thinking: ThinkingLevel::Off, cancel: CancellationToken::new(), idle_timeout: Duration::from_secs(30), session_id: String::new() };
        let mut rx = stream_assistant(model.clone(), LlmContext::default(), opts);
        let mut n = 0;
        while let Some(_e) = rx.recv().await { n += 1; }
        eprintln!("events {n} in {:?}", t.elapsed());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn raw_vs_eventsource() {
    use futures::StreamExt;
    use eventsource_stream::Eventsource;
    let mock = MockLlm::start().await.unwrap();
    let client = reqwest::Client::new();
    let body = serde_json::json!({"model":"m","stream":true,"stream_options":{"include_usage":true}});
    for mode in 0..3 {
        for _ in 0..3 {
            mock.push(Step::Bytes { total_bytes: 64 * 1024, delta_bytes: 4 });
            let t = Instant::now();
            let resp = client.post(format!("{}/chat/completions", mock.base_url())).json(&body).send().await.unwrap();
            let mut n = 0usize;
            let mut chunks = 0usize;
            if mode == 0 {
                let mut s = resp.bytes_stream();
                while let Some(b) = s.next().await { n += b.unwrap().len(); chunks += 1; }
            } else if mode == 1 {
                let mut s = resp.bytes_stream().eventsource();
                while let Some(e) = s.next().await { n += e.unwrap().data.len(); }
            } else {
                let mut s = resp.bytes_stream().eventsource();
                while let Some(e) = s.next().await { let e = e.unwrap(); if e.data != "[DONE]" { let v: serde_json::Value = serde_json::from_str(&e.data).unwrap(); n += v.as_object().map_or(0, |o| o.len()); } }
            }
            eprintln!("mode {mode}: {n} bytes {chunks} chunks in {:?}", t.elapsed());
        }
    }
}
