//! The `google-generative-ai` API (Gemini):
//! `POST {base}/models/{model}:streamGenerateContent?alt=sse`.
//!
//! Every SSE event is a whole `GenerateContentResponse` whose first candidate carries new parts:
//! text, thought text (`thought: true`), and function calls (sent whole). The stream has no
//! terminal event beyond a candidate's `finishReason`; a body that ends without one is a
//! premature end. Thought signatures are kept on the block they arrived with and replayed to
//! the same model.

use reqwest::header::{HeaderMap, HeaderName};

use super::common::{
    Assembler, SseRequest, auth_header, drive, replay_messages, stream_sse, versioned_url,
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
        let auth = auth_header(
            options,
            HeaderName::from_static("x-goog-api-key"),
            str::to_string,
        );
        let path = format!("models/{}:streamGenerateContent?alt=sse", model.id);
        let request = SseRequest {
            url: versioned_url(&model.base_url, "v1beta", &path),
            auth,
            headers: HeaderMap::new(),
            body: &body,
            describe_error: None,
        };
        let mut state = StreamState::default();
        stream_sse(model, request, options, out, &mut state).await?;
        state.complete(model, out).await
    })
    .await;
}
