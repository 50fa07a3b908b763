//! The `anthropic-messages` API: `POST {base}/v1/messages` with `stream: true`.
//!
//! The stream is a sequence of typed events (`message_start`, `content_block_start`,
//! `content_block_delta`, `content_block_stop`, `message_delta`, `message_stop`, `ping`,
//! `error`); `message_stop` is the terminal event. Thinking blocks keep their signature (and
//! redacted thinking its opaque data) so that they can be replayed to the same model, which
//! Anthropic requires when thinking precedes a tool call.

use reqwest::header::{HeaderMap, HeaderName, HeaderValue};

use super::common::{
    Assembler, SseRequest, auth_header, bearer_auth, drive, is_copilot, replay_messages,
    stream_sse_to_terminal, versioned_url,
};
use crate::model::Model;
use crate::stream::{EventSink, LlmContext, StreamOptions};

mod events;
mod request;

use events::StreamState;
use request::{Thinking, request_body};

pub const ANTHROPIC_VERSION: &str = "2023-06-01";

/// Beta flag that lets budget thinking interleave with tool calls.
const INTERLEAVED_THINKING_BETA: &str = "interleaved-thinking-2025-05-14";

pub(crate) async fn stream(
    model: &Model,
    context: &LlmContext,
    options: &StreamOptions,
    sink: EventSink,
) {
    drive(sink, async |out: &mut Assembler| {
        let replay = replay_messages(&context.messages);
        let body = request_body(model, context, &replay, options);
        // Copilot: its headers, and the token as a bearer (it takes no `x-api-key`).
        let copilot = is_copilot(model);
        let mut headers = if copilot {
            crate::auth::copilot::request_headers(&context.messages, model.accepts_images())
        } else {
            HeaderMap::new()
        };
        headers.insert(
            HeaderName::from_static("anthropic-version"),
            HeaderValue::from_static(ANTHROPIC_VERSION),
        );
        if matches!(body.thinking, Some(Thinking::Enabled { .. })) {
            headers.insert(
                HeaderName::from_static("anthropic-beta"),
                HeaderValue::from_static(INTERLEAVED_THINKING_BETA),
            );
        }
        let auth = if copilot {
            bearer_auth(options)
        } else {
            auth_header(
                options,
                HeaderName::from_static("x-api-key"),
                str::to_string,
            )
        };
        let request = SseRequest {
            url: versioned_url(&model.base_url, "v1", "messages"),
            auth,
            headers,
            body: &body,
            describe_error: None,
        };
        let mut state = StreamState::default();
        stream_sse_to_terminal(model, request, options, out, &mut state).await?;
        state.complete(model, out)
    })
    .await;
}
