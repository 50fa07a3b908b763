//! The `openai-completions` API: OpenAI chat completions with `stream: true`, as served by OpenAI
//! and by OpenAI-compatible servers (vLLM, llama.cpp, Ollama, LM Studio, gateways).
//!
//! One call sends one request and turns its SSE chunks into [`AssistantMessageEvent`]s. It never
//! retries: every failure becomes an assistant message with `stopReason` `error` (or `aborted`
//! on cancellation) so that the session's retry policy decides, visibly, what happens next.
//!
//! The body loop is on the hot path of long replies: chunks are decoded into small borrowing
//! structs, each delta is moved into exactly one event, and accumulated text lives only in the
//! consumer's partial message.

use reqwest::header::HeaderMap;
use zi_protocol::message::StopReason;

use super::common::{
    Assembler, Halt, SseRequest, bearer_auth, drive, is_copilot, replay_messages, stream_sse,
};
use crate::model::Model;
use crate::stream::{EventSink, LlmContext, StreamOptions};

mod events;
mod request;

use events::StreamState;
use request::request_body;

/// Streams one assistant message from `{model.base_url}/chat/completions` into `sink`.
pub(crate) async fn stream(
    model: &Model,
    context: &LlmContext,
    options: &StreamOptions,
    sink: EventSink,
) {
    drive(sink, async |out: &mut Assembler| {
        run(model, context, options, out).await
    })
    .await;
}

async fn run(
    model: &Model,
    context: &LlmContext,
    options: &StreamOptions,
    out: &mut Assembler,
) -> Result<StopReason, Halt> {
    let replay = replay_messages(&context.messages);
    let body = request_body(model, context, &replay, options);
    let headers = if is_copilot(model) {
        crate::auth::copilot::request_headers(&context.messages, model.accepts_images())
    } else {
        HeaderMap::new()
    };
    let request = SseRequest {
        url: format!("{}/chat/completions", model.base_url.trim_end_matches('/')),
        auth: bearer_auth(options),
        headers,
        body: &body,
        describe_error: None,
    };
    let mut state = StreamState::default();
    stream_sse(model, request, options, out, &mut state).await?;
    state.complete(model, out).await
}
