//! What every provider client shares: failure values, the HTTP request with its headers and
//! error bodies, the SSE decoder and the body loop with cancellation and the idle timeout.
//!
//! Providers never retry: every failure becomes a [`Halt`], which the caller turns into an
//! assistant message with `stopReason` `error` (or `aborted`).

use std::time::Duration;

use futures::{FutureExt, StreamExt};
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use serde::Serialize;
use serde_json::Value;
use std::borrow::Cow;
use tokio::time::Instant;

use zi_protocol::message::{
    AgentMessage, AssistantMessage, ContentBlock, StopReason, ToolResultMessage, Usage,
};

use crate::model::Model;
use crate::stream::{ABORTED_MESSAGE, EventSink, StreamOptions};

mod assembler;
mod conversation;
mod lenient;
pub(crate) use assembler::{Assembler, BlockKind, TextKind};
pub(crate) use conversation::Conversation;
pub(crate) use lenient::{MaybeBool, MaybeStr, MaybeU64, present};

/// Error text of a body that ends before the API's terminal event.
pub const PREMATURE_END_MESSAGE: &str = "Provider stream ended before the final event";

/// Longest error text taken from an HTTP error body.
const MAX_ERROR_MESSAGE_BYTES: usize = 2_000;

/// Largest SSE event accepted; a body that grows one event past this is broken, not slow.
const MAX_EVENT_BYTES: usize = 32 * 1024 * 1024;

/// Most bytes of an HTTP error body read before giving up on the rest.
const MAX_ERROR_BODY_BYTES: usize = 64 * 1024;

/// Why a stream stopped before finishing normally.
pub enum Halt {
    Failed(StopReason, String),
    /// The receiver was dropped: nobody is listening, so stop quietly.
    ConsumerGone,
}

pub fn failure(message: impl Into<String>) -> Halt {
    Halt::Failed(StopReason::Error, message.into())
}

pub fn aborted() -> Halt {
    Halt::Failed(StopReason::Aborted, ABORTED_MESSAGE.to_string())
}

pub fn timed_out(idle: Duration) -> Halt {
    failure(format!(
        "Provider stream timed out after {}s without data",
        idle.as_secs_f64()
    ))
}

/// A transport failure. The URL is stripped: base URLs never leave zi.
pub fn network_error(error: reqwest::Error) -> Halt {
    failure(format!(
        "Network error: {}",
        error_chain(&error.without_url())
    ))
}

/// An error and its sources, `outer: inner: …`, without repeating a source the outer text
/// already contains.
fn error_chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

/// The request headers: the bearer key, then the model's configured headers (which may override
/// it). Header values may run `!command`s.
pub async fn request_headers(
    model: &Model,
    auth: Option<(HeaderName, String)>,
    mut headers: HeaderMap,
) -> Result<HeaderMap, Halt> {
    if let Some((name, value)) = auth {
        let value = HeaderValue::from_str(&value).map_err(|_| {
            failure("The API key contains characters not allowed in an HTTP header")
        })?;
        headers.insert(name, value);
    }
    if model.headers.is_empty() {
        return Ok(headers);
    }
    // `!command` values are bounded and die with this future (zi_os::command).
    let mut resolved = Vec::with_capacity(model.headers.len());
    for (name, source) in &model.headers {
        let value = crate::credentials::resolve_config_value(source)
            .await
            .map_err(|reason| {
                failure(format!(
                    "Could not resolve header {name} for provider {}: {reason}",
                    model.provider
                ))
            })?;
        resolved.push((name, value));
    }
    for (name, value) in resolved {
        let header = HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| failure(format!("Invalid header name {name:?}")))?;
        let value = HeaderValue::from_str(&value)
            .map_err(|_| failure(format!("Invalid value for header {name}")))?;
        headers.insert(header, value);
    }
    Ok(headers)
}

/// Reads at most [`MAX_ERROR_BODY_BYTES`] of an error response.
pub async fn read_error_body(mut response: reqwest::Response) -> Vec<u8> {
    let mut body = Vec::new();
    while body.len() < MAX_ERROR_BODY_BYTES {
        match response.chunk().await {
            Ok(Some(chunk)) => body.extend_from_slice(&chunk),
            Ok(None) | Err(_) => break,
        }
    }
    body
}

/// The message of an error body: `error.message` (or a string `error`, or a top-level
/// `message`) when it is JSON, else the text itself, clipped to 2,000 bytes.
pub fn http_error_message(body: &[u8]) -> Option<String> {
    let from_json = serde_json::from_slice::<Value>(body).ok().and_then(|json| {
        [
            json.pointer("/error/message"),
            json.get("error"),
            json.get("message"),
            json.get("detail"),
        ]
        .into_iter()
        .flatten()
        .find_map(|value| value.as_str().map(str::to_string))
    });
    let text = from_json.unwrap_or_else(|| String::from_utf8_lossy(body).into_owned());
    let text = text.trim();
    (!text.is_empty()).then(|| clip(text, MAX_ERROR_MESSAGE_BYTES).to_string())
}

/// The longest prefix of `text` of at most `max` bytes that ends on a char boundary.
fn clip(text: &str, max: usize) -> &str {
    zi_protocol::results::clip_utf8(text, max).0
}

// ---------------------------------------------------------------------------------------------
// Server-sent events

/// Splits an SSE body into the `data` of its events, following the WHATWG rules for the lines
/// zi needs (`data` fields, comments, `\n`, `\r\n` or `\r` line ends, a leading BOM).
///
/// Hand-written rather than `eventsource-stream` because that crate copies the rest of its
/// buffer after every line, which is quadratic in the size of a body chunk and dominated the
/// cost of long replies made of tiny deltas. Here each byte is scanned once and the data
/// buffer is reused, so an event costs no allocation.
#[derive(Default)]
pub struct SseDecoder {
    buffer: Vec<u8>,
    /// How much of `buffer` has been parsed into lines.
    consumed: usize,
    /// The data of the event being read; lines joined by `\n`.
    data: Vec<u8>,
    has_data: bool,
    started: bool,
}

impl SseDecoder {
    pub fn push(&mut self, bytes: &[u8]) {
        if self.consumed > 0 {
            self.buffer.drain(..self.consumed);
            self.consumed = 0;
        }
        self.buffer.extend_from_slice(bytes);
        if !self.started && self.buffer.len() >= 3 {
            self.started = true;
            if self.buffer.starts_with(b"\xEF\xBB\xBF") {
                self.consumed = 3;
            }
        }
    }

    /// Bytes held for the event being read.
    pub fn pending_bytes(&self) -> usize {
        self.buffer.len() - self.consumed + self.data.len()
    }

    /// Ends the body: a last event without its closing blank line still counts.
    pub fn end(&mut self) {
        self.started = true;
        self.push(b"\n\n");
    }

    /// The next complete event's data, or `None` until more bytes arrive.
    pub fn next_event(&mut self) -> Option<Result<&str, std::str::Utf8Error>> {
        loop {
            let rest = &self.buffer[self.consumed..];
            let end = rest
                .iter()
                .position(|&byte| byte == b'\n' || byte == b'\r')?;
            let terminator = match (rest[end], rest.get(end + 1)) {
                (b'\r', Some(b'\n')) => 2,
                // A `\r` that ends the buffer may be the first half of `\r\n`.
                (b'\r', None) => return None,
                _ => 1,
            };
            let line_start = self.consumed;
            self.consumed += end + terminator;
            let line = &self.buffer[line_start..line_start + end];
            if line.is_empty() {
                if std::mem::take(&mut self.has_data) {
                    return Some(std::str::from_utf8(&self.data));
                }
                continue;
            }
            let (field, value) = match line.iter().position(|&byte| byte == b':') {
                Some(0) => continue,
                Some(colon) => {
                    let value = &line[colon + 1..];
                    (&line[..colon], value.strip_prefix(b" ").unwrap_or(value))
                }
                None => (line, &[][..]),
            };
            if field == b"data" {
                if !self.has_data {
                    self.data.clear();
                    self.has_data = true;
                } else {
                    self.data.push(b'\n');
                }
                self.data.extend_from_slice(value);
            }
        }
    }
}

/// Parsed tool arguments: `{}` for an empty or invalid text (the tool's validation reports it).
pub fn parse_arguments(text: &str) -> Value {
    if text.trim().is_empty() {
        return Value::Object(Default::default());
    }
    serde_json::from_str(text).unwrap_or_else(|error| {
        tracing::debug!("tool call arguments are not valid JSON: {error}");
        Value::Object(Default::default())
    })
}

/// What a provider does with the events of its stream.
pub(crate) trait SseHandler {
    /// Handles the data of one SSE event. Returns `Ok(true)` at the API's terminal event.
    async fn on_data(&mut self, data: &str, out: &mut Assembler) -> Result<bool, Halt>;
}

/// The auth header `name: value(key)`, when the options carry a non-empty key (an empty one
/// sends no header, as no key does).
pub(crate) fn auth_header(
    options: &StreamOptions,
    name: HeaderName,
    value: fn(&str) -> String,
) -> Option<(HeaderName, String)> {
    let key = options.api_key.as_deref().filter(|key| !key.is_empty())?;
    Some((name, value(key)))
}

/// `Authorization: Bearer <key>` (the OpenAI APIs).
pub(crate) fn bearer_auth(options: &StreamOptions) -> Option<(HeaderName, String)> {
    auth_header(options, reqwest::header::AUTHORIZATION, |key| {
        format!("Bearer {key}")
    })
}

/// A provider request: where it goes, its auth header, extra headers and JSON body.
pub(crate) struct SseRequest<'a, B: Serialize> {
    pub url: String,
    pub auth: Option<(HeaderName, String)>,
    pub headers: HeaderMap,
    pub body: &'a B,
    /// The error text of an error answer (status, body), when the API words some errors
    /// itself; `None` (or a `None` answer) gives `"<status> <message>"`.
    pub describe_error: Option<ErrorDescriber>,
}

/// Words an API's error answer: `(status, body)` → the assistant message's error text.
pub(crate) type ErrorDescriber = fn(u16, &[u8]) -> Option<String>;

/// Whether a model is reached through a GitHub Copilot sign-in (its requests carry Copilot's
/// headers and a bearer token on every API).
pub(crate) fn is_copilot(model: &Model) -> bool {
    model.provider == crate::auth::COPILOT
}

/// Runs the stream for a provider: emits `start`, runs `body` on the message's assembler, and
/// ends the stream with `done` or `error`.
pub(crate) async fn drive<F>(sink: EventSink, body: F)
where
    F: AsyncFnOnce(&mut Assembler) -> Result<StopReason, Halt>,
{
    let mut out = Assembler::new(sink);
    if out.begin().await.is_err() {
        return;
    }
    match body(&mut out).await {
        Ok(reason) => out.finish(reason).await,
        Err(Halt::Failed(reason, message)) => out.fail(reason, message).await,
        Err(Halt::ConsumerGone) => {}
    }
}

/// [`stream_sse`] for an API whose body must end with its terminal event: a body that ends
/// before it is [`PREMATURE_END_MESSAGE`].
pub(crate) async fn stream_sse_to_terminal<B: Serialize, H: SseHandler>(
    model: &Model,
    request: SseRequest<'_, B>,
    options: &StreamOptions,
    out: &mut Assembler,
    handler: &mut H,
) -> Result<(), Halt> {
    if stream_sse(model, request, options, out, handler).await? {
        Ok(())
    } else {
        Err(failure(PREMATURE_END_MESSAGE))
    }
}

/// Sends the request and feeds every SSE event to `handler` until the terminal event or the end
/// of the body. Returns whether the terminal event was seen; a body that ends without it is
/// for the handler to judge (some APIs have no terminal event beyond the body's end).
///
/// Cancellation and the idle timeout apply to every wait: the request, the error body and each
/// body chunk.
pub(crate) async fn stream_sse<B: Serialize, H: SseHandler>(
    model: &Model,
    request: SseRequest<'_, B>,
    options: &StreamOptions,
    out: &mut Assembler,
    handler: &mut H,
) -> Result<bool, Halt> {
    if options.cancel.is_cancelled() {
        return Err(aborted());
    }
    let response = send_request(model, request, options, out).await?;
    read_events(response, options, out, handler).await
}

/// Sends the request and waits for a successful status; an error status becomes a failure
/// carrying the body's error message.
async fn send_request<B: Serialize>(
    model: &Model,
    request: SseRequest<'_, B>,
    options: &StreamOptions,
    out: &mut Assembler,
) -> Result<reqwest::Response, Halt> {
    let cancel = &options.cancel;
    let idle = options.idle_timeout;
    let headers = tokio::select! {
        biased;
        () = cancel.cancelled() => return Err(aborted()),
        headers = request_headers(model, request.auth, request.headers) => headers?,
    };
    // Configured header values are secrets a server might echo back.
    for name in model.headers.keys() {
        if let Some(value) = headers.get(name.as_str()).and_then(|v| v.to_str().ok()) {
            out.hide(value);
        }
    }
    let client = crate::http::client().map_err(|error| failure(error.to_string()))?;
    let sent = client
        .post(request.url)
        .headers(headers)
        .json(request.body)
        .send();
    let response = tokio::select! {
        biased;
        () = cancel.cancelled() => return Err(aborted()),
        sent = tokio::time::timeout(idle, sent) => match sent {
            Err(_) => return Err(timed_out(idle)),
            Ok(Err(error)) => return Err(network_error(error)),
            Ok(Ok(response)) => response,
        },
    };
    let status = response.status();
    if !status.is_success() {
        let body = tokio::select! {
            biased;
            () = cancel.cancelled() => return Err(aborted()),
            body = tokio::time::timeout(idle, read_error_body(response)) => body.map_err(|_| timed_out(idle))?,
        };
        if let Some(text) = request
            .describe_error
            .and_then(|describe| describe(status.as_u16(), &body))
        {
            return Err(failure(text));
        }
        let message = http_error_message(&body)
            .unwrap_or_else(|| status.canonical_reason().unwrap_or("").to_string());
        return Err(failure(
            format!("{} {}", status.as_u16(), message)
                .trim_end()
                .to_string(),
        ));
    }
    Ok(response)
}

/// Feeds the body's SSE events to `handler` until it reports the terminal event or the body
/// ends (see [`stream_sse`]).
async fn read_events<H: SseHandler>(
    response: reqwest::Response,
    options: &StreamOptions,
    out: &mut Assembler,
    handler: &mut H,
) -> Result<bool, Halt> {
    let cancel = &options.cancel;
    let idle = options.idle_timeout;
    let mut body = response.bytes_stream();
    let mut decoder = SseDecoder::default();
    let cancelled = cancel.cancelled();
    tokio::pin!(cancelled);
    let silence = tokio::time::sleep(idle);
    tokio::pin!(silence);
    let mut body_ended = false;
    loop {
        while let Some(data) = decoder.next_event() {
            let data =
                data.map_err(|_| failure("Invalid provider stream: the body is not UTF-8"))?;
            let data = data.trim_ascii();
            if data.is_empty() {
                continue;
            }
            if handler.on_data(data, out).await? {
                // Reading the (already buffered) end of the body lets the connection go back
                // to the pool instead of being closed.
                for _ in 0..4 {
                    match body.next().now_or_never() {
                        Some(Some(Ok(_))) => {}
                        _ => break,
                    }
                }
                return Ok(true);
            }
        }
        if body_ended {
            return Ok(false);
        }
        // Data already received wins over the idle timer: a slow consumer is not a silent server.
        let next = tokio::select! {
            biased;
            () = &mut cancelled => return Err(aborted()),
            next = body.next() => next,
            () = &mut silence => return Err(timed_out(idle)),
        };
        match next {
            Some(Ok(bytes)) => {
                silence.as_mut().reset(Instant::now() + idle);
                decoder.push(&bytes);
                if decoder.pending_bytes() > MAX_EVENT_BYTES {
                    return Err(failure(format!(
                        "Invalid provider stream: an event exceeds {MAX_EVENT_BYTES} bytes"
                    )));
                }
            }
            Some(Err(error)) => return Err(network_error(error)),
            None => {
                body_ended = true;
                decoder.end();
            }
        }
    }
}

/// `{base}/{path}`, adding `/v1` when the base is a bare origin (pi's models.json gives
/// `https://api.anthropic.com`; zi's catalog gives `…/v1`).
pub fn versioned_url(base_url: &str, version: &str, path: &str) -> String {
    let base = base_url.trim_end_matches('/');
    let has_version = base.rsplit('/').next().is_some_and(|last| {
        last.starts_with('v') && last[1..].starts_with(|c: char| c.is_ascii_digit())
    });
    if has_version {
        format!("{base}/{path}")
    } else {
        format!("{base}/{version}/{path}")
    }
}

/// An error event's message: `error.message`, `message`, or the JSON itself.
pub fn event_error_message(value: &Value) -> String {
    let error = value.get("error").unwrap_or(value);
    error
        .get("message")
        .and_then(Value::as_str)
        .or_else(|| error.as_str())
        .map_or_else(|| format!("Provider error: {error}"), str::to_string)
}

/// Text of the synthetic result given to a tool call that has none.
pub const MISSING_TOOL_RESULT: &str = "No result provided";

/// The conversation as a provider should see it: failed (`error` or `aborted`) assistant
/// messages are dropped, since they are zi's record of a failure rather than something the model
/// said, and every tool call left without a result gets a synthetic error result, because the
/// APIs reject unpaired calls.
pub fn replay_messages(messages: &[AgentMessage]) -> Vec<Cow<'_, AgentMessage>> {
    let mut out = Vec::with_capacity(messages.len());
    let mut unanswered: Vec<(String, String)> = Vec::new();
    let close = |out: &mut Vec<Cow<'_, AgentMessage>>, unanswered: &mut Vec<(String, String)>| {
        for (id, name) in unanswered.drain(..) {
            out.push(Cow::Owned(AgentMessage::ToolResult(ToolResultMessage {
                tool_call_id: id,
                tool_name: name,
                content: vec![ContentBlock::text(MISSING_TOOL_RESULT)],
                details: None,
                is_error: true,
                timestamp: 0,
            })));
        }
    };
    for message in messages {
        match message {
            AgentMessage::Assistant(assistant)
                if matches!(
                    assistant.stop_reason,
                    StopReason::Error | StopReason::Aborted
                ) =>
            {
                continue;
            }
            AgentMessage::ToolResult(result) => {
                unanswered.retain(|(id, _)| *id != result.tool_call_id);
                out.push(Cow::Borrowed(message));
                continue;
            }
            _ => {}
        }
        close(&mut out, &mut unanswered);
        if let AgentMessage::Assistant(assistant) = message {
            unanswered.extend(
                assistant
                    .tool_calls()
                    .map(|call| (call.id.clone(), call.name.clone())),
            );
        }
        out.push(Cow::Borrowed(message));
    }
    close(&mut out, &mut unanswered);
    out
}

/// Whether an assistant message came from this very model through this API, so that its
/// signed thinking may be replayed.
pub fn same_model(model: &Model, message: &AssistantMessage) -> bool {
    message.api == model.api.as_str()
        && message.provider == model.provider
        && message.model == model.id
}

/// Text for the model from a custom or compaction-summary message (sent as user text).
pub fn user_text_of(message: &AgentMessage) -> Option<String> {
    match message {
        AgentMessage::Custom(custom) => Some(custom.content.text()),
        AgentMessage::CompactionSummary(summary) => Some(compaction_summary_text(&summary.summary)),
        _ => None,
    }
}

/// How a compaction summary is presented to the model (docs/configuration.md#the-commit).
pub const COMPACTION_SUMMARY_PREFIX: &str = "The conversation history before this point was compacted into the following checkpoint. Continue from the checkpoint and exact recent messages that follow:\n\n<summary>\n";
pub const COMPACTION_SUMMARY_SUFFIX: &str = "\n</summary>";

/// The user-message text a compaction summary is sent as.
pub fn compaction_summary_text(summary: &str) -> String {
    format!("{COMPACTION_SUMMARY_PREFIX}{summary}{COMPACTION_SUMMARY_SUFFIX}")
}

/// Tokens of a usage report with the total filled in and the cost computed.
pub fn finish_usage(model: &Model, mut usage: Usage) -> Usage {
    if usage.total_tokens == 0 {
        usage.total_tokens = usage.input + usage.output + usage.cache_read + usage.cache_write;
    }
    crate::stream::apply_cost(model, &mut usage);
    usage
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_messages_prefer_json_and_clip_text() {
        assert_eq!(
            http_error_message(br#"{"error":{"message":"Rate limit reached"}}"#).as_deref(),
            Some("Rate limit reached")
        );
        assert_eq!(
            http_error_message(br#"{"error":"bad"}"#).as_deref(),
            Some("bad")
        );
        assert_eq!(http_error_message(b"  ").as_deref(), None);
        let long = "é".repeat(1_500);
        assert_eq!(
            http_error_message(long.as_bytes()).map(|m| m.len()),
            Some(2_000)
        );
        assert_eq!(clip("aé", 2), "a");
    }

    fn decode(chunks: &[&[u8]]) -> Vec<String> {
        let mut decoder = SseDecoder::default();
        let mut events = Vec::new();
        for chunk in chunks {
            decoder.push(chunk);
            while let Some(data) = decoder.next_event() {
                events.push(data.unwrap_or_else(|e| panic!("{e}")).to_string());
            }
        }
        decoder.end();
        while let Some(data) = decoder.next_event() {
            events.push(data.unwrap_or_else(|e| panic!("{e}")).to_string());
        }
        events
    }

    #[test]
    fn sse_decoder_follows_the_line_rules() {
        assert_eq!(decode(&[b"data: a\n\ndata:b\n\n"]), vec!["a", "b"]);
        assert_eq!(decode(&[b"da", b"ta: sp", b"lit\n", b"\n"]), vec!["split"]);
        assert_eq!(decode(&[b"data: x\r\n\r\ndata: y\r\r"]), vec!["x", "y"]);
        assert_eq!(decode(&[b"data: x\r", b"\n\r", b"\n"]), vec!["x"]);
        assert_eq!(
            decode(&[b": keep-alive\n\nevent: message\nid: 7\ndata: one\ndata: two\n\n"]),
            vec!["one\ntwo"]
        );
        assert_eq!(decode(&[b"\xEF\xBB\xBFdata: bom\n\n"]), vec!["bom"]);
        assert_eq!(
            decode(&[b"data: last"]),
            vec!["last"],
            "the body end closes a last event"
        );
        assert_eq!(decode(&[b"event: ping\n\n\n\ndata\n\n"]), vec![""]);
        let split_char = "data: é\n\n".as_bytes();
        assert_eq!(decode(&[&split_char[..7], &split_char[7..]]), vec!["é"]);
        assert!(matches!(
            {
                let mut decoder = SseDecoder::default();
                decoder.push(b"data: \xFF\n\n");
                decoder.next_event().map(|data| data.is_err())
            },
            Some(true)
        ));
    }

    #[test]
    fn arguments_parse_leniently() {
        assert_eq!(parse_arguments(""), serde_json::json!({}));
        assert_eq!(parse_arguments("{\"a\":"), serde_json::json!({}));
        assert_eq!(parse_arguments("{\"a\":1}"), serde_json::json!({"a": 1}));
    }

    #[test]
    fn replay_drops_failures_and_answers_orphan_calls() {
        use zi_protocol::message::{ToolCall, UserMessage};
        let user = AgentMessage::User(UserMessage {
            content: zi_protocol::message::MessageContent::Text("hi".into()),
            timestamp: 0,
        });
        let mut failed = crate::stream::empty_assistant(&crate::model::test_model());
        failed.stop_reason = StopReason::Error;
        let mut calling = failed.clone();
        calling.stop_reason = StopReason::ToolUse;
        calling.content = vec![ContentBlock::ToolCall(ToolCall {
            id: "c1".into(),
            name: "read".into(),
            arguments: serde_json::json!({}),
            thought_signature: None,
        })];
        let messages = vec![
            user.clone(),
            AgentMessage::Assistant(failed),
            AgentMessage::Assistant(calling),
            user,
        ];
        let replay = replay_messages(&messages);
        let roles: Vec<&str> = replay
            .iter()
            .map(|m| match m.as_ref() {
                AgentMessage::User(_) => "user",
                AgentMessage::Assistant(_) => "assistant",
                AgentMessage::ToolResult(r) if r.is_error => "missing-result",
                _ => "other",
            })
            .collect();
        assert_eq!(roles, ["user", "assistant", "missing-result", "user"]);
    }

    #[test]
    fn urls_gain_a_version_only_when_missing() {
        assert_eq!(
            versioned_url("https://api.anthropic.com", "v1", "messages"),
            "https://api.anthropic.com/v1/messages"
        );
        assert_eq!(
            versioned_url("http://127.0.0.1:9/v1/", "v1", "messages"),
            "http://127.0.0.1:9/v1/messages"
        );
        assert_eq!(
            versioned_url("https://g.example/v1beta", "v1beta", "models/x"),
            "https://g.example/v1beta/models/x"
        );
    }
}
