//! The `openai-responses` API: `POST {base}/responses` with `stream: true` and `store: false`.
//!
//! The stream is a sequence of typed events (`response.created`, `response.output_item.added`,
//! `response.output_text.delta`, `response.reasoning_summary_text.delta`,
//! `response.function_call_arguments.delta`, `response.output_item.done`, …) ending with
//! `response.completed`, `response.incomplete` or `response.failed`. Reasoning items are kept
//! whole (with their encrypted content) in the thinking block's signature, so they can be
//! replayed to the same model; a tool call's id is `call_id|item_id`, which keeps both.

use reqwest::header::HeaderMap;

use super::common::{
    Assembler, SseRequest, bearer_auth, drive, replay_messages, stream_sse_to_terminal,
    versioned_url,
};
use crate::model::Model;
use crate::stream::{EventSink, LlmContext, StreamOptions};

mod events;
mod request;

use events::StreamState;
use request::request_body;

pub(crate) async fn stream(
    model: &Model,
    context: &LlmContext,
    options: &StreamOptions,
    sink: EventSink,
) {
    drive(sink, async |out: &mut Assembler| {
        let replay = replay_messages(&context.messages);
        let body = request_body(model, context, &replay, options);
        let request = SseRequest {
            url: versioned_url(&model.base_url, "v1", "responses"),
            auth: bearer_auth(options),
            headers: HeaderMap::new(),
            body: &body,
        };
        let mut state = StreamState::default();
        stream_sse_to_terminal(model, request, options, out, &mut state).await?;
        state.complete(model, out)
    })
    .await;
}
