//! The `openai-responses` API: `POST {base}/responses` with `stream: true` and `store: false`.
//!
//! The stream is a sequence of typed events (`response.created`, `response.output_item.added`,
//! `response.output_text.delta`, `response.reasoning_summary_text.delta`,
//! `response.function_call_arguments.delta`, `response.output_item.done`, …) ending with
//! `response.completed`, `response.incomplete` or `response.failed`. Reasoning items are kept
//! whole (with their encrypted content) in the thinking block's signature, so they can be
//! replayed to the same model; a tool call's id is `call_id|item_id`, which keeps both.
//!
//! Two flavours share this code: the plain API and ChatGPT's Codex backend
//! (`openai-codex-responses`, [`codex`]), which takes the system prompt as `instructions` and a
//! few fixed fields more. GitHub Copilot's Responses models use the plain flavour at
//! `{base}/responses` with Copilot's headers.

use reqwest::header::HeaderMap;

use super::common::{
    Assembler, ErrorDescriber, SseRequest, bearer_auth, drive, is_copilot, replay_messages,
    stream_sse_to_terminal, versioned_url,
};
use crate::model::Model;
use crate::stream::{EventSink, LlmContext, StreamOptions};

mod codex;
mod events;
mod request;

use events::StreamState;
use request::request_body;

/// Which service speaks the Responses API.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Flavor {
    /// OpenAI's API (and OpenAI-compatible gateways, GitHub Copilot).
    Plain,
    /// ChatGPT's Codex backend.
    Codex,
}

pub(crate) async fn stream(
    model: &Model,
    context: &LlmContext,
    options: &StreamOptions,
    sink: EventSink,
    flavor: Flavor,
) {
    drive(sink, async |out: &mut Assembler| {
        let replay = replay_messages(&context.messages);
        let body = request_body(model, context, &replay, options, flavor);
        let (url, headers, describe_error): (String, HeaderMap, Option<ErrorDescriber>) =
            match flavor {
                Flavor::Codex => (
                    codex::url(&model.base_url),
                    codex::headers(options)?,
                    Some(codex::describe_error),
                ),
                // Copilot serves `{base}/responses` without a version segment.
                Flavor::Plain if is_copilot(model) => (
                    format!("{}/responses", model.base_url.trim_end_matches('/')),
                    crate::auth::copilot::request_headers(
                        &context.messages,
                        model.accepts_images(),
                    ),
                    None,
                ),
                Flavor::Plain => (
                    versioned_url(&model.base_url, "v1", "responses"),
                    HeaderMap::new(),
                    None,
                ),
            };
        let request = SseRequest {
            url,
            auth: bearer_auth(options),
            headers,
            body: &body,
            describe_error,
        };
        let mut state = StreamState::new(flavor);
        stream_sse_to_terminal(model, request, options, out, &mut state).await?;
        state.complete(model, out)
    })
    .await;
}
