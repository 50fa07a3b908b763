//! A scriptable mock LLM server that speaks the OpenAI chat-completions streaming format over real
//! loopback HTTP, the way OpenAI, vLLM and llama.cpp do, and the other vendors' formats by path:
//! `…/messages` (Anthropic), `…/responses` (OpenAI Responses) and
//! `…/models/<m>:streamGenerateContent` (Google), encoded by [`crate::mock_vendors`].
//! [`Step::Sse`] sends a hand-written body for exact vendor fixtures.
//!
//! A test starts a server, pushes one [`Step`] per request it expects, points a `models.json`
//! provider at [`MockLlm::base_url`] (see [`MockLlm::models_json`]) and afterwards inspects what
//! was sent with [`MockLlm::requests`]. Each `POST {base}/chat/completions` consumes the next step;
//! with no step left the server answers HTTP 500 "mock script exhausted".
//!
//! Streams are pre-encoded and sent in batches of many SSE events per body chunk, so a long reply
//! costs the server almost nothing and a benchmark measures the client, not the mock.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU16, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use serde_json::{Value, json};
use tokio::sync::watch;
use zi_os::sync::lock;

pub use crate::mock_vendors::Vendor;

mod body;
mod serve;
mod sse;
mod step;

use serve::handle;
pub use step::{MockToolCall, MockUsage, RecordedRequest, Step};

/// Message of the HTTP 500 answered when no step is left.
pub const SCRIPT_EXHAUSTED: &str = "mock script exhausted";

/// Starts a mock server, panicking if it cannot (tests only).
pub async fn start_mock() -> MockLlm {
    MockLlm::start()
        .await
        .unwrap_or_else(|e| panic!("start the mock LLM: {e}"))
}

/// A running mock server. Clones share the server, which stops when the last handle is dropped
/// or [`MockLlm::shutdown`] is called.
#[derive(Clone)]
pub struct MockLlm {
    pub(super) shared: Arc<Shared>,
    /// Held only for its `Drop`: the last handle to go stops the server.
    pub(super) _lifetime: Arc<Lifetime>,
}

impl std::fmt::Debug for MockLlm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MockLlm")
            .field("base_url", &self.base_url())
            .finish_non_exhaustive()
    }
}

pub(super) struct Shared {
    pub(super) port: u16,
    pub(super) script: Mutex<VecDeque<Step>>,
    /// Steps for requests naming one model (`body.model`), taken before the shared script.
    pub(super) model_scripts: Mutex<HashMap<String, VecDeque<Step>>>,
    /// Steps for requests offering one tool (`tools[].function.name`), taken before the
    /// model's: a parent and a child on the same model differ by the tools they offer.
    pub(super) tool_scripts: Mutex<HashMap<String, VecDeque<Step>>>,
    pub(super) requests: Mutex<Vec<RecordedRequest>>,
    pub(super) disconnects: AtomicUsize,
    pub(super) responses: AtomicU64,
    /// The status of `POST …/models/<id>/policy` (GitHub Copilot's model enablement).
    pub(super) policy_status: AtomicU16,
    /// Bumped whenever a request is recorded or a disconnect counted.
    pub(super) changes: watch::Sender<()>,
    pub(super) shutdown: watch::Sender<bool>,
}

/// Stops the server when the last [`MockLlm`] handle goes away.
pub(super) struct Lifetime {
    shared: Arc<Shared>,
}

impl Drop for Lifetime {
    fn drop(&mut self) {
        self.shared.shutdown.send_replace(true);
    }
}

impl MockLlm {
    /// Binds `127.0.0.1` on a free port and starts serving on the current tokio runtime.
    pub async fn start() -> std::io::Result<MockLlm> {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await?;
        let port = listener.local_addr()?.port();
        let (shutdown, mut shutdown_rx) = watch::channel(false);
        let shared = Arc::new(Shared {
            port,
            script: Mutex::new(VecDeque::new()),
            model_scripts: Mutex::new(HashMap::new()),
            tool_scripts: Mutex::new(HashMap::new()),
            requests: Mutex::new(Vec::new()),
            disconnects: AtomicUsize::new(0),
            responses: AtomicU64::new(0),
            policy_status: AtomicU16::new(200),
            changes: watch::Sender::new(()),
            shutdown,
        });
        let router = Router::new()
            .fallback(handle)
            .with_state(Arc::clone(&shared));
        let stopped = async move {
            let _ = shutdown_rx.wait_for(|stop| *stop).await;
        };
        tokio::spawn(async move {
            let _ = axum::serve(listener, router)
                .with_graceful_shutdown(stopped)
                .await;
        });
        Ok(MockLlm {
            _lifetime: Arc::new(Lifetime {
                shared: Arc::clone(&shared),
            }),
            shared,
        })
    }

    /// `http://127.0.0.1:PORT/v1`; completions are served at `{base}/chat/completions`.
    pub fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}/v1", self.shared.port)
    }

    /// Appends a step to the script; each request consumes the oldest one.
    pub fn push(&self, step: Step) {
        lock(&self.shared.script).push_back(step);
    }

    /// Appends a step for requests whose body names `model` (the model id); such a request
    /// takes its model's oldest step first and falls back to the shared script.
    pub fn push_for(&self, model: &str, step: Step) {
        lock(&self.shared.model_scripts)
            .entry(model.to_string())
            .or_default()
            .push_back(step);
    }

    /// Appends a step for requests that offer the tool `tool` (a delegating parent offers
    /// `spawn_subagent`, its children never do); such a request takes that tool's oldest step
    /// before its model's and the shared script.
    pub fn push_offering(&self, tool: &str, step: Step) {
        lock(&self.shared.tool_scripts)
            .entry(tool.to_string())
            .or_default()
            .push_back(step);
    }

    /// The status `POST …/models/<id>/policy` answers (default 200, body `{}`).
    pub fn set_policy_status(&self, status: u16) {
        self.shared.policy_status.store(status, Ordering::SeqCst);
    }

    /// Steps not consumed yet.
    pub fn pending_steps(&self) -> usize {
        lock(&self.shared.script).len()
    }

    /// Every request received so far, in arrival order.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        lock(&self.shared.requests).clone()
    }

    /// Waits until at least `n` requests arrived or `timeout` passed, and returns them all.
    pub async fn wait_for_requests(&self, n: usize, timeout: Duration) -> Vec<RecordedRequest> {
        self.wait_until(timeout, || lock(&self.shared.requests).len() >= n)
            .await;
        self.requests()
    }

    /// Streams whose client went away before the stream finished.
    pub fn disconnects(&self) -> usize {
        self.shared.disconnects.load(Ordering::SeqCst)
    }

    /// Waits until at least `n` disconnects were counted or `timeout` passed; returns the count.
    pub async fn wait_for_disconnects(&self, n: usize, timeout: Duration) -> usize {
        self.wait_until(timeout, || self.disconnects() >= n).await;
        self.disconnects()
    }

    async fn wait_until(&self, timeout: Duration, mut done: impl FnMut() -> bool) {
        let deadline = tokio::time::Instant::now() + timeout;
        // Subscribing before checking means no change between the check and the wait is lost.
        let mut changes = self.shared.changes.subscribe();
        while !done() {
            match tokio::time::timeout_at(deadline, changes.changed()).await {
                Ok(Ok(())) => {}
                Ok(Err(_)) | Err(_) => return,
            }
        }
    }

    /// Stops accepting connections and ends hanging streams. Idempotent.
    pub fn shutdown(&self) {
        self.shared.shutdown.send_replace(true);
    }

    /// A `models.json` text with one provider `mock` (api `openai-completions`, the given
    /// `apiKey`) serving `models`.
    pub fn models_json(&self, api_key: &str, models: &[Value]) -> String {
        self.models_json_for("openai-completions", api_key, models)
    }

    /// Like [`MockLlm::models_json`] for any API zi speaks (`anthropic-messages`,
    /// `openai-responses`, `google-generative-ai`, `openai-completions`): the server answers each
    /// request in the format of the path it was sent to.
    pub fn models_json_for(&self, api: &str, api_key: &str, models: &[Value]) -> String {
        let file = json!({
            "providers": {
                "mock": {
                    "baseUrl": self.base_url(),
                    "api": api,
                    "apiKey": api_key,
                    "models": models,
                }
            }
        });
        serde_json::to_string_pretty(&file).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests;
