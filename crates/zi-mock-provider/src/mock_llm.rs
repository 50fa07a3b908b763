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

use std::collections::VecDeque;
use std::fmt::Write as _;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures::Stream;
use serde_json::{Value, json};
use tokio::sync::watch;

pub use crate::mock_vendors::Vendor;
use crate::mock_vendors::{self, Script};

/// Message of the HTTP 500 answered when no step is left.
pub const SCRIPT_EXHAUSTED: &str = "mock script exhausted";

/// Body bytes gathered before the encoder starts a new body chunk.
const BODY_CHUNK_BYTES: usize = 16 * 1024;

/// Largest request body the mock reads.
const MAX_REQUEST_BYTES: usize = 64 * 1024 * 1024;

/// What the server answers to one chat-completions request.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// Content deltas, then finish_reason "stop".
    Text(Vec<String>),
    /// The general form: reasoning deltas (sent as `reasoning_content`), then text deltas, then
    /// tool calls whose arguments are streamed in `args_chunks` fragments (the first fragment
    /// carries id, type and name), then `finish_reason`. Like every step, the usage chunk is
    /// sent only when the request set `stream_options.include_usage`; without scripted `usage`
    /// the mock estimates it (a quarter of the messages' JSON bytes in, one token per delta out).
    Reply {
        thinking: Vec<String>,
        text: Vec<String>,
        tool_calls: Vec<MockToolCall>,
        finish_reason: String,
        usage: Option<MockUsage>,
    },
    /// An HTTP status with a JSON error body like OpenAI's `{"error":{"message","type","code"}}`.
    HttpError { status: u16, message: String },
    /// Some content deltas, then an SSE event `data: {"error":{"message":...}}`, and the body ends.
    MidStreamError { text: Vec<String>, message: String },
    /// Some content deltas, then the body ends with no finish_reason and no `[DONE]`.
    Truncated(Vec<String>),
    /// Headers and the given content deltas, then the response stays open until the client goes
    /// away (counted in [`MockLlm::disconnects`]) or the server shuts down.
    Hang(Vec<String>),
    /// A reply whose text is `total_bytes` bytes of `x`, sent as `delta_bytes`-byte content
    /// deltas, then finish_reason "stop" and usage.
    Bytes {
        total_bytes: usize,
        delta_bytes: usize,
    },
    /// A body sent exactly as given (a `text/event-stream` of any vendor's events), then the
    /// end of the body, or, with `hang`, a wait like [`Step::Hang`].
    Sse { body: String, hang: bool },
}

impl Step {
    /// A reply with one content delta.
    pub fn text(s: &str) -> Step {
        Step::Text(vec![s.to_string()])
    }

    /// A reply with one tool call whose arguments arrive in two fragments, finish_reason
    /// "tool_calls".
    pub fn tool_call(id: &str, name: &str, args: Value) -> Step {
        Step::Reply {
            thinking: Vec::new(),
            text: Vec::new(),
            tool_calls: vec![MockToolCall {
                id: id.to_string(),
                name: name.to_string(),
                args_chunks: split_in_two(&args.to_string()),
            }],
            finish_reason: "tool_calls".to_string(),
            usage: None,
        }
    }
}

/// A tool call of a [`Step::Reply`].
#[derive(Debug, Clone, PartialEq)]
pub struct MockToolCall {
    pub id: String,
    pub name: String,
    /// The JSON arguments text, in the fragments it is streamed in.
    pub args_chunks: Vec<String>,
}

/// Token counts reported in the final usage chunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MockUsage {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub cached_tokens: u64,
}

/// One request as the server received it.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordedRequest {
    pub path: String,
    /// Header names in lower case, in arrival order.
    pub headers: Vec<(String, String)>,
    /// The JSON body, or the body text as a JSON string when it is not JSON.
    pub body: Value,
}

impl RecordedRequest {
    /// The first value of a header, by case-insensitive name.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(key, _)| key.eq_ignore_ascii_case(name))
            .map(|(_, value)| value.as_str())
    }
}

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
    shared: Arc<Shared>,
    /// Held only for its `Drop`: the last handle to go stops the server.
    _lifetime: Arc<Lifetime>,
}

impl std::fmt::Debug for MockLlm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MockLlm")
            .field("base_url", &self.base_url())
            .finish_non_exhaustive()
    }
}

struct Shared {
    port: u16,
    script: Mutex<VecDeque<Step>>,
    requests: Mutex<Vec<RecordedRequest>>,
    disconnects: AtomicUsize,
    responses: AtomicU64,
    /// Bumped whenever a request is recorded or a disconnect counted.
    changes: watch::Sender<()>,
    shutdown: watch::Sender<bool>,
}

/// Stops the server when the last [`MockLlm`] handle goes away.
struct Lifetime {
    shared: Arc<Shared>,
}

impl Drop for Lifetime {
    fn drop(&mut self) {
        self.shared.shutdown.send_replace(true);
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
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
            requests: Mutex::new(Vec::new()),
            disconnects: AtomicUsize::new(0),
            responses: AtomicU64::new(0),
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

async fn handle(State(shared): State<Arc<Shared>>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let path = parts.uri.path().to_string();
    let headers = parts
        .headers
        .iter()
        .map(|(name, value)| {
            (
                name.as_str().to_string(),
                String::from_utf8_lossy(value.as_bytes()).into_owned(),
            )
        })
        .collect();
    let bytes = axum::body::to_bytes(body, MAX_REQUEST_BYTES)
        .await
        .unwrap_or_default();
    let body = serde_json::from_slice(&bytes)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()));
    let recorded = RecordedRequest {
        path,
        headers,
        body,
    };
    let request_body = recorded.body.clone();
    let vendor = Vendor::from_path(&recorded.path)
        .filter(|_| parts.method == Method::POST && recorded.path.starts_with("/v1"));
    lock(&shared.requests).push(recorded);
    shared.changes.send_replace(());

    let Some(vendor) = vendor else {
        return error_response(
            404,
            &format!("no route for {} {}", parts.method, parts.uri.path()),
        );
    };
    let Some(step) = lock(&shared.script).pop_front() else {
        return vendor_error(vendor, 500, SCRIPT_EXHAUSTED);
    };
    match (vendor, step) {
        (_, Step::HttpError { status, message }) => vendor_error(vendor, status, &message),
        (_, Step::Sse { body, hang }) => stream_response(shared, vec![Bytes::from(body)], hang),
        (Vendor::OpenAiCompletions, step) => respond(&shared, step, &request_body),
        (vendor, step) => {
            let number = shared.responses.fetch_add(1, Ordering::SeqCst) + 1;
            let model = request_body
                .get("model")
                .and_then(Value::as_str)
                .unwrap_or("mock");
            let (script, hang) = script_of(step);
            let body = mock_vendors::encode(vendor, &script, number, model);
            stream_response(shared, vec![Bytes::from(body)], hang)
        }
    }
}

/// The neutral form of a step, and whether the body stays open afterwards.
fn script_of(step: Step) -> (Script, bool) {
    let stop = Some("stop".to_string());
    match step {
        Step::Text(text) => (
            Script {
                text,
                finish: stop,
                ..Script::default()
            },
            false,
        ),
        Step::Reply {
            thinking,
            text,
            tool_calls,
            finish_reason,
            usage,
        } => (
            Script {
                thinking,
                text,
                tool_calls,
                finish: Some(finish_reason),
                usage,
                error: None,
            },
            false,
        ),
        Step::MidStreamError { text, message } => (
            Script {
                text,
                error: Some(message),
                ..Script::default()
            },
            false,
        ),
        Step::Truncated(text) => (
            Script {
                text,
                ..Script::default()
            },
            false,
        ),
        Step::Hang(text) => (
            Script {
                text,
                ..Script::default()
            },
            true,
        ),
        Step::Bytes {
            total_bytes,
            delta_bytes,
        } => {
            let delta = "x".repeat(delta_bytes.max(1));
            let mut text = Vec::new();
            let mut left = total_bytes;
            while left > 0 {
                let size = left.min(delta.len());
                text.push(delta[..size].to_string());
                left -= size;
            }
            (
                Script {
                    text,
                    finish: stop,
                    ..Script::default()
                },
                false,
            )
        }
        Step::HttpError { .. } | Step::Sse { .. } => (Script::default(), false),
    }
}

fn vendor_error(vendor: Vendor, status: u16, message: &str) -> Response {
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (
        status,
        axum::Json(vendor.error_body(status.as_u16(), message)),
    )
        .into_response()
}

/// A `text/event-stream` response of pre-encoded chunks.
fn stream_response(shared: Arc<Shared>, chunks: Vec<Bytes>, hang: bool) -> Response {
    let body = ScriptedBody {
        chunks: chunks.into(),
        hang: hang.then(|| {
            let mut shutdown = shared.shutdown.subscribe();
            Box::pin(async move {
                let _ = shutdown.wait_for(|stop| *stop).await;
            }) as Pin<Box<dyn Future<Output = ()> + Send>>
        }),
        guard: DisconnectGuard {
            shared,
            finished: false,
        },
    };
    let mut response = Body::from_stream(body).into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}

fn error_response(status: u16, message: &str) -> Response {
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let (kind, code) = match status.as_u16() {
        429 => ("requests", json!("rate_limit_exceeded")),
        400..=499 => ("invalid_request_error", Value::Null),
        _ => ("server_error", Value::Null),
    };
    let body = json!({"error": {"message": message, "type": kind, "param": null, "code": code}});
    (status, axum::Json(body)).into_response()
}

fn respond(shared: &Arc<Shared>, step: Step, request: &Value) -> Response {
    let number = shared.responses.fetch_add(1, Ordering::SeqCst) + 1;
    let model = request
        .get("model")
        .and_then(Value::as_str)
        .unwrap_or("mock");
    let include_usage = request
        .pointer("/stream_options/include_usage")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let mut sse = SseEncoder::new(number, model);
    let mut hang = false;
    let mut deltas = 0u64;
    let mut reply_usage = None;
    let mut finish_reason = None;
    match step {
        Step::HttpError { status, message } => return error_response(status, &message),
        Step::Sse { body, hang } => {
            return stream_response(Arc::clone(shared), vec![Bytes::from(body)], hang);
        }
        Step::Text(text) => {
            sse.role();
            deltas += sse.contents(&text);
            finish_reason = Some("stop".to_string());
        }
        Step::Reply {
            thinking,
            text,
            tool_calls,
            finish_reason: reason,
            usage,
        } => {
            sse.role();
            for delta in &thinking {
                sse.delta(
                    &format!("{{\"reasoning_content\":{}}}", json_string(delta)),
                    None,
                );
            }
            deltas += thinking.len() as u64 + sse.contents(&text);
            for (index, call) in tool_calls.iter().enumerate() {
                deltas += sse.tool_call(index, call);
            }
            finish_reason = Some(reason);
            reply_usage = usage;
        }
        Step::MidStreamError { text, message } => {
            sse.role();
            sse.contents(&text);
            let error =
                json!({"error": {"message": message, "type": "server_error", "code": null}});
            sse.data(&error.to_string());
        }
        Step::Truncated(text) => {
            sse.role();
            sse.contents(&text);
        }
        Step::Hang(text) => {
            sse.role();
            sse.contents(&text);
            hang = true;
        }
        Step::Bytes {
            total_bytes,
            delta_bytes,
        } => {
            sse.role();
            let delta_bytes = delta_bytes.max(1);
            let full = "x".repeat(delta_bytes);
            let mut left = total_bytes;
            while left > 0 {
                let size = left.min(delta_bytes);
                sse.delta(&format!("{{\"content\":\"{}\"}}", &full[..size]), None);
                left -= size;
                deltas += 1;
            }
            finish_reason = Some("stop".to_string());
        }
    }
    if let Some(reason) = &finish_reason {
        sse.delta("{}", Some(reason));
        if include_usage {
            let usage = reply_usage.unwrap_or_else(|| MockUsage {
                prompt_tokens: estimate_prompt_tokens(request),
                completion_tokens: deltas,
                cached_tokens: 0,
            });
            sse.usage(usage);
        }
        sse.data("[DONE]");
    }
    let body = ScriptedBody {
        chunks: sse.finish().into(),
        hang: hang.then(|| {
            let mut shutdown = shared.shutdown.subscribe();
            Box::pin(async move {
                let _ = shutdown.wait_for(|stop| *stop).await;
            }) as Pin<Box<dyn Future<Output = ()> + Send>>
        }),
        guard: DisconnectGuard {
            shared: Arc::clone(shared),
            finished: false,
        },
    };
    let mut response = Body::from_stream(body).into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}

/// A rough token count for a request without scripted usage: a quarter of its messages' JSON.
fn estimate_prompt_tokens(request: &Value) -> u64 {
    let bytes = request
        .get("messages")
        .map_or(0, |messages| messages.to_string().len());
    bytes.div_ceil(4) as u64
}

fn json_string(text: &str) -> String {
    serde_json::to_string(text).unwrap_or_else(|_| "\"\"".to_string())
}

/// Splits text in two at a char boundary near its middle.
fn split_in_two(text: &str) -> Vec<String> {
    let mut middle = text.len() / 2;
    while !text.is_char_boundary(middle) {
        middle += 1;
    }
    vec![text[..middle].to_string(), text[middle..].to_string()]
}

/// Encodes chat-completion chunks as SSE events into body chunks of about [`BODY_CHUNK_BYTES`].
struct SseEncoder {
    /// Everything of a chunk up to its delta: `{"id":..,"object":..,"created":..,"model":..,"choices":[{"index":0,"delta":`.
    prefix: String,
    /// Everything of a usage chunk up to its usage object.
    usage_prefix: String,
    buffer: String,
    chunks: Vec<Bytes>,
}

impl SseEncoder {
    fn new(number: u64, model: &str) -> Self {
        let created = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let head = format!(
            "{{\"id\":\"chatcmpl-mock-{number}\",\"object\":\"chat.completion.chunk\",\"created\":{created},\"model\":{}",
            json_string(model)
        );
        SseEncoder {
            prefix: format!("{head},\"choices\":[{{\"index\":0,\"delta\":"),
            usage_prefix: format!("{head},\"choices\":[],\"usage\":"),
            buffer: String::with_capacity(BODY_CHUNK_BYTES * 2),
            chunks: Vec::new(),
        }
    }

    /// One `data:` event.
    fn data(&mut self, payload: &str) {
        self.buffer.push_str("data: ");
        self.buffer.push_str(payload);
        self.buffer.push_str("\n\n");
        if self.buffer.len() >= BODY_CHUNK_BYTES {
            self.flush();
        }
    }

    /// One chunk with the given delta object and finish reason.
    fn delta(&mut self, delta: &str, finish_reason: Option<&str>) {
        self.buffer.push_str("data: ");
        self.buffer.push_str(&self.prefix);
        self.buffer.push_str(delta);
        match finish_reason {
            Some(reason) => {
                let _ = write!(
                    self.buffer,
                    ",\"finish_reason\":{}}}]}}\n\n",
                    json_string(reason)
                );
            }
            None => self
                .buffer
                .push_str(",\"logprobs\":null,\"finish_reason\":null}]}\n\n"),
        }
        if self.buffer.len() >= BODY_CHUNK_BYTES {
            self.flush();
        }
    }

    /// The first chunk, as llama.cpp sends it: the role with a null content.
    fn role(&mut self) {
        self.delta("{\"role\":\"assistant\",\"content\":null}", None);
    }

    /// One chunk per content delta; returns how many were sent.
    fn contents(&mut self, deltas: &[String]) -> u64 {
        for delta in deltas {
            self.delta(&format!("{{\"content\":{}}}", json_string(delta)), None);
        }
        deltas.len() as u64
    }

    /// The chunks of one tool call; returns how many were sent.
    fn tool_call(&mut self, index: usize, call: &MockToolCall) -> u64 {
        let first = call.args_chunks.first().map_or("", String::as_str);
        let head = json!({"tool_calls": [{
            "index": index,
            "id": call.id,
            "type": "function",
            "function": {"name": call.name, "arguments": first},
        }]});
        self.delta(&head.to_string(), None);
        for fragment in call.args_chunks.iter().skip(1) {
            let delta =
                json!({"tool_calls": [{"index": index, "function": {"arguments": fragment}}]});
            self.delta(&delta.to_string(), None);
        }
        call.args_chunks.len().max(1) as u64
    }

    fn usage(&mut self, usage: MockUsage) {
        let usage = json!({
            "prompt_tokens": usage.prompt_tokens,
            "completion_tokens": usage.completion_tokens,
            "total_tokens": usage.prompt_tokens + usage.completion_tokens,
            "prompt_tokens_details": {"cached_tokens": usage.cached_tokens},
        });
        let payload = format!("{}{usage}}}", self.usage_prefix);
        self.data(&payload);
    }

    fn flush(&mut self) {
        if !self.buffer.is_empty() {
            let text = std::mem::replace(
                &mut self.buffer,
                String::with_capacity(BODY_CHUNK_BYTES * 2),
            );
            self.chunks.push(Bytes::from(text));
        }
    }

    fn finish(mut self) -> Vec<Bytes> {
        self.flush();
        self.chunks
    }
}

/// Counts a disconnect when a response body is dropped before it was sent to the end.
struct DisconnectGuard {
    shared: Arc<Shared>,
    finished: bool,
}

impl Drop for DisconnectGuard {
    fn drop(&mut self) {
        if !self.finished {
            self.shared.disconnects.fetch_add(1, Ordering::SeqCst);
            self.shared.changes.send_replace(());
        }
    }
}

/// The body of a streamed reply: pre-encoded chunks, then either the end or, for
/// [`Step::Hang`], a wait that only shutdown ends.
struct ScriptedBody {
    chunks: VecDeque<Bytes>,
    hang: Option<Pin<Box<dyn Future<Output = ()> + Send>>>,
    guard: DisconnectGuard,
}

impl Stream for ScriptedBody {
    type Item = Result<Bytes, std::io::Error>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        if let Some(chunk) = this.chunks.pop_front() {
            return Poll::Ready(Some(Ok(chunk)));
        }
        match &mut this.hang {
            None => {
                this.guard.finished = true;
                Poll::Ready(None)
            }
            Some(stopped) => match stopped.as_mut().poll(cx) {
                Poll::Pending => Poll::Pending,
                Poll::Ready(()) => {
                    // Shutdown, not the client, ends this stream: abort the connection.
                    this.guard.finished = true;
                    this.hang = None;
                    Poll::Ready(Some(Err(std::io::Error::other("mock server shut down"))))
                }
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpStream;

    const WAIT: Duration = Duration::from_secs(10);

    async fn connect(mock: &MockLlm, path: &str, body: &Value) -> TcpStream {
        let text = body.to_string();
        let request = format!(
            "POST {path} HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\nauthorization: Bearer k\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{text}",
            text.len()
        );
        let mut stream = TcpStream::connect(("127.0.0.1", mock.shared.port))
            .await
            .unwrap_or_else(|e| panic!("connect: {e}"));
        stream
            .write_all(request.as_bytes())
            .await
            .unwrap_or_else(|e| panic!("write: {e}"));
        stream
    }

    async fn post(mock: &MockLlm, body: &Value) -> String {
        let mut stream = connect(mock, "/v1/chat/completions", body).await;
        let mut response = Vec::new();
        tokio::time::timeout(WAIT, stream.read_to_end(&mut response))
            .await
            .unwrap_or_else(|_| panic!("timed out"))
            .unwrap_or_else(|e| panic!("read: {e}"));
        String::from_utf8(response).unwrap_or_else(|e| panic!("utf8: {e}"))
    }

    /// The JSON payloads of the `data:` lines, in order (chunked framing lines are skipped).
    fn data_lines(response: &str) -> Vec<String> {
        response
            .lines()
            .filter_map(|line| line.strip_prefix("data: "))
            .map(str::to_string)
            .collect()
    }

    fn request_body(include_usage: bool) -> Value {
        json!({"model": "m1", "stream": true, "stream_options": {"include_usage": include_usage},
               "messages": [{"role": "user", "content": "hi"}]})
    }

    #[tokio::test]
    async fn streams_text_then_usage_then_done_and_records_the_request() {
        let mock = MockLlm::start().await.unwrap_or_else(|e| panic!("{e}"));
        mock.push(Step::Text(vec!["Hel".into(), "lo \"x\"".into()]));
        let response = post(&mock, &request_body(true)).await;
        assert!(response.starts_with("HTTP/1.1 200"), "{response}");
        assert!(
            response
                .to_ascii_lowercase()
                .contains("content-type: text/event-stream")
        );
        let data = data_lines(&response);
        assert_eq!(data.last().map(String::as_str), Some("[DONE]"));
        let chunks: Vec<Value> = data[..data.len() - 1]
            .iter()
            .map(|d| serde_json::from_str(d).unwrap_or_else(|e| panic!("{e}: {d}")))
            .collect();
        let text: String = chunks
            .iter()
            .filter_map(|c| {
                c.pointer("/choices/0/delta/content")
                    .and_then(Value::as_str)
            })
            .collect();
        assert_eq!(text, "Hello \"x\"");
        assert_eq!(chunks[0]["object"], "chat.completion.chunk");
        assert_eq!(chunks[0]["model"], "m1");
        assert!(
            chunks[0]
                .pointer("/choices/0/delta/content")
                .is_some_and(Value::is_null)
        );
        let finish = &chunks[chunks.len() - 2];
        assert_eq!(
            finish.pointer("/choices/0/finish_reason"),
            Some(&json!("stop"))
        );
        let usage = &chunks[chunks.len() - 1];
        assert_eq!(usage["choices"], json!([]));
        assert_eq!(usage.pointer("/usage/completion_tokens"), Some(&json!(2)));

        let requests = mock.wait_for_requests(1, WAIT).await;
        assert_eq!(requests.len(), 1);
        assert_eq!(requests[0].path, "/v1/chat/completions");
        assert_eq!(requests[0].header("Authorization"), Some("Bearer k"));
        assert_eq!(requests[0].body["model"], "m1");
        assert_eq!(mock.disconnects(), 0);
    }

    #[tokio::test]
    async fn reply_streams_reasoning_tool_fragments_and_scripted_usage() {
        let mock = MockLlm::start().await.unwrap_or_else(|e| panic!("{e}"));
        mock.push(Step::Reply {
            thinking: vec!["hmm".into()],
            text: vec![],
            tool_calls: vec![MockToolCall {
                id: "call_1".into(),
                name: "read".into(),
                args_chunks: vec!["{\"pa".into(), "th\":1}".into()],
            }],
            finish_reason: "tool_calls".into(),
            usage: Some(MockUsage {
                prompt_tokens: 50,
                completion_tokens: 7,
                cached_tokens: 20,
            }),
        });
        let response = post(&mock, &request_body(true)).await;
        let data = data_lines(&response);
        let chunks: Vec<Value> = data
            .iter()
            .filter(|d| *d != "[DONE]")
            .filter_map(|d| serde_json::from_str(d).ok())
            .collect();
        assert_eq!(
            chunks[1].pointer("/choices/0/delta/reasoning_content"),
            Some(&json!("hmm"))
        );
        let first_call = chunks[2]
            .pointer("/choices/0/delta/tool_calls/0")
            .cloned()
            .unwrap_or_default();
        assert_eq!(first_call["id"], "call_1");
        assert_eq!(first_call["function"]["name"], "read");
        assert_eq!(first_call["function"]["arguments"], "{\"pa");
        assert_eq!(
            chunks[3].pointer("/choices/0/delta/tool_calls/0/function/arguments"),
            Some(&json!("th\":1}"))
        );
        assert_eq!(
            chunks[4].pointer("/choices/0/finish_reason"),
            Some(&json!("tool_calls"))
        );
        assert_eq!(
            chunks[5].pointer("/usage/prompt_tokens_details/cached_tokens"),
            Some(&json!(20))
        );
        assert_eq!(chunks[5].pointer("/usage/total_tokens"), Some(&json!(57)));
    }

    #[tokio::test]
    async fn errors_exhaustion_and_truncation() {
        let mock = MockLlm::start().await.unwrap_or_else(|e| panic!("{e}"));
        mock.push(Step::HttpError {
            status: 429,
            message: "Rate limit reached".into(),
        });
        mock.push(Step::MidStreamError {
            text: vec!["a".into()],
            message: "boom".into(),
        });
        mock.push(Step::Truncated(vec!["part".into()]));
        let limited = post(&mock, &request_body(false)).await;
        assert!(limited.starts_with("HTTP/1.1 429"), "{limited}");
        assert!(limited.contains(r#""message":"Rate limit reached""#));
        let failed = data_lines(&post(&mock, &request_body(false)).await);
        assert_eq!(
            failed.last().map(String::as_str),
            Some(r#"{"error":{"message":"boom","type":"server_error","code":null}}"#)
        );
        let truncated = post(&mock, &request_body(true)).await;
        assert!(
            !truncated.contains("[DONE]")
                && !truncated.contains("finish_reason\":\"")
                && truncated.contains("part")
        );
        let exhausted = post(&mock, &request_body(false)).await;
        assert!(
            exhausted.starts_with("HTTP/1.1 500") && exhausted.contains(SCRIPT_EXHAUSTED),
            "{exhausted}"
        );
        assert_eq!(mock.requests().len(), 4);
        assert_eq!(mock.disconnects(), 0);
    }

    #[tokio::test]
    async fn bytes_step_sends_exact_text_and_no_usage_unless_asked() {
        let mock = MockLlm::start().await.unwrap_or_else(|e| panic!("{e}"));
        mock.push(Step::Bytes {
            total_bytes: 10_000,
            delta_bytes: 3,
        });
        let data = data_lines(&post(&mock, &request_body(false)).await);
        let mut text = String::new();
        for line in &data {
            if let Ok(chunk) = serde_json::from_str::<Value>(line) {
                assert!(chunk.get("usage").is_none());
                if let Some(content) = chunk
                    .pointer("/choices/0/delta/content")
                    .and_then(Value::as_str)
                {
                    text.push_str(content);
                }
            }
        }
        assert_eq!(text.len(), 10_000);
        assert!(text.bytes().all(|b| b == b'x'));
        assert_eq!(data.len(), 1 + 3334 + 1 + 1);
    }

    #[tokio::test]
    async fn hang_counts_a_disconnect_when_the_client_leaves() {
        let mock = MockLlm::start().await.unwrap_or_else(|e| panic!("{e}"));
        mock.push(Step::Hang(vec!["waiting".into()]));
        let mut stream = connect(&mock, "/v1/chat/completions", &request_body(true)).await;
        let mut seen = Vec::new();
        let mut buffer = [0u8; 4096];
        while !String::from_utf8_lossy(&seen).contains("waiting") {
            let read = tokio::time::timeout(WAIT, stream.read(&mut buffer))
                .await
                .unwrap_or_else(|_| panic!("no data"))
                .unwrap_or_else(|e| panic!("read: {e}"));
            assert!(read > 0, "closed early");
            seen.extend_from_slice(&buffer[..read]);
        }
        assert_eq!(mock.disconnects(), 0);
        drop(stream);
        assert_eq!(mock.wait_for_disconnects(1, WAIT).await, 1);
    }

    #[tokio::test]
    async fn other_paths_are_recorded_and_answered_404() {
        let mock = MockLlm::start().await.unwrap_or_else(|e| panic!("{e}"));
        mock.push(Step::text("unused"));
        let response = {
            let mut stream = connect(&mock, "/v1/models", &json!({})).await;
            let mut out = String::new();
            let _ = stream.read_to_string(&mut out).await;
            out
        };
        assert!(response.starts_with("HTTP/1.1 404"), "{response}");
        assert_eq!(mock.pending_steps(), 1);
        assert_eq!(mock.requests()[0].path, "/v1/models");
    }

    #[tokio::test]
    async fn models_json_points_at_the_server() {
        let mock = MockLlm::start().await.unwrap_or_else(|e| panic!("{e}"));
        let text = mock.models_json("KEY", &[json!({"id": "m1", "reasoning": true})]);
        let parsed: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            parsed["providers"]["mock"]["baseUrl"],
            json!(mock.base_url())
        );
        assert_eq!(parsed["providers"]["mock"]["api"], "openai-completions");
        assert_eq!(parsed["providers"]["mock"]["apiKey"], "KEY");
        assert_eq!(parsed["providers"]["mock"]["models"][0]["id"], "m1");
    }

    #[test]
    fn tool_call_step_splits_arguments_in_two() {
        let Step::Reply {
            tool_calls,
            finish_reason,
            ..
        } = Step::tool_call("c", "bash", json!({"command": "ls é"}))
        else {
            panic!("not a reply");
        };
        assert_eq!(finish_reason, "tool_calls");
        assert_eq!(tool_calls[0].args_chunks.len(), 2);
        assert_eq!(tool_calls[0].args_chunks.concat(), r#"{"command":"ls é"}"#);
    }
}
