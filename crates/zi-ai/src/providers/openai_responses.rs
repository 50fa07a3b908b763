//! The `openai-responses` API.

use super::common::{drive, failure};
use crate::model::Model;
use crate::stream::{EventSink, LlmContext, StreamOptions};

pub async fn stream(
    _model: &Model,
    _context: &LlmContext,
    _options: &StreamOptions,
    sink: EventSink,
) {
    drive(sink, async |_sink: &mut EventSink| {
        Err(failure(
            "The openai-responses API is not available in this build",
        ))
    })
    .await;
}
