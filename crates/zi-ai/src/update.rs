//! What a provider task sends its consumer, and the one place where a streamed assistant message
//! is accumulated.
//!
//! The provider task never keeps the message's text: it sends [`StreamUpdate`]s, and the consumer
//! folds each into the partial message it holds ([`StreamUpdate::apply`]), which yields the event
//! to report. Block ends (`text_end`, `thinking_end`) and the final `done` or `error` take their
//! content from that partial message, so each delta is appended exactly once, on the consumer's
//! side, and the partial message a consumer shows (zi's `streamingMessage`) always matches the
//! events it has reported. What the provider learns beyond block content (the response id,
//! usage, signatures) travels with the final update, so a partial message shows only what its
//! events said.

use serde_json::Value;
use zi_protocol::event::AssistantMessageEvent;
use zi_protocol::message::{AssistantMessage, ContentBlock, StopReason, ToolCall, Usage};

/// One step of a provider stream. Apply it to the consumer's partial message to get the event.
#[derive(Debug)]
pub struct StreamUpdate(pub(crate) Update);

// Events are the common case and go through the channel by value: boxing them would cost an
// allocation per delta, while the rare final update boxes its details instead.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub(crate) enum Update {
    /// An event that carries everything it means (never an end of a text or thinking block,
    /// `done` or `error`).
    Event(AssistantMessageEvent),
    /// The end of the text or thinking block at this index, reported with its whole content.
    End { content_index: usize },
    /// The end of the stream; `error_message` is set for `error` and `aborted`.
    Final {
        reason: StopReason,
        error_message: Option<String>,
        details: Box<FinalDetails>,
    },
}

/// What the provider learned besides the blocks' content, applied to the final message.
#[derive(Debug, Default)]
pub(crate) struct FinalDetails {
    pub response_id: Option<String>,
    pub usage: Option<Usage>,
    pub signatures: Vec<BlockSignature>,
}

/// A signature the provider attached to a text or thinking block.
#[derive(Debug)]
pub(crate) struct BlockSignature {
    pub content_index: usize,
    pub signature: String,
    /// Redacted thinking: the signature is the opaque data.
    pub redacted: bool,
}

impl StreamUpdate {
    /// Folds this update into `partial` (which must start as
    /// [`empty_assistant`](crate::stream::empty_assistant) of the streaming model and see every
    /// update in order) and returns the event it stands for. Deltas append in place, so
    /// building a long message stays linear.
    pub fn apply(self, partial: &mut AssistantMessage) -> Option<AssistantMessageEvent> {
        match self.0 {
            Update::Event(event) => {
                apply_event(partial, &event);
                Some(event)
            }
            Update::End { content_index } => match partial.content.get(content_index)? {
                ContentBlock::Text { text, .. } => Some(AssistantMessageEvent::TextEnd {
                    content_index,
                    content: text.clone(),
                }),
                ContentBlock::Thinking { thinking, .. } => {
                    Some(AssistantMessageEvent::ThinkingEnd {
                        content_index,
                        content: thinking.clone(),
                    })
                }
                _ => None,
            },
            Update::Final {
                reason,
                error_message,
                details,
            } => {
                finish(partial, *details);
                partial.stop_reason = reason;
                let failed = error_message.is_some();
                partial.error_message = error_message;
                let message = partial.clone();
                Some(if failed {
                    AssistantMessageEvent::Error {
                        reason,
                        error: message,
                    }
                } else {
                    AssistantMessageEvent::Done { reason, message }
                })
            }
        }
    }
}

fn finish(partial: &mut AssistantMessage, details: FinalDetails) {
    if let Some(id) = details.response_id {
        partial.response_id = Some(id);
    }
    if let Some(usage) = details.usage {
        partial.usage = usage;
    }
    for signed in details.signatures {
        match partial.content.get_mut(signed.content_index) {
            Some(ContentBlock::Text { text_signature, .. }) => {
                *text_signature = Some(signed.signature);
            }
            Some(ContentBlock::Thinking {
                thinking_signature,
                redacted,
                ..
            }) => {
                *thinking_signature = Some(signed.signature);
                if signed.redacted {
                    *redacted = Some(true);
                }
            }
            _ => {}
        }
    }
}

/// Applies a self-contained event (starts, deltas, tool calls) to the partial message.
fn apply_event(partial: &mut AssistantMessage, event: &AssistantMessageEvent) {
    match event {
        AssistantMessageEvent::TextStart { content_index } => {
            set_block(partial, *content_index, ContentBlock::text(""));
        }
        AssistantMessageEvent::TextDelta {
            content_index,
            delta,
        } => {
            if let Some(ContentBlock::Text { text, .. }) = partial.content.get_mut(*content_index) {
                text.push_str(delta);
            }
        }
        AssistantMessageEvent::ThinkingStart { content_index } => set_block(
            partial,
            *content_index,
            ContentBlock::Thinking {
                thinking: String::new(),
                thinking_signature: None,
                redacted: None,
            },
        ),
        AssistantMessageEvent::ThinkingDelta {
            content_index,
            delta,
        } => {
            if let Some(ContentBlock::Thinking { thinking, .. }) =
                partial.content.get_mut(*content_index)
            {
                thinking.push_str(delta);
            }
        }
        AssistantMessageEvent::ToolCallStart {
            content_index,
            id,
            name,
        } => set_block(
            partial,
            *content_index,
            ContentBlock::ToolCall(ToolCall {
                id: id.clone(),
                name: name.clone(),
                arguments: Value::Object(Default::default()),
                thought_signature: None,
            }),
        ),
        AssistantMessageEvent::ToolCallEnd {
            content_index,
            tool_call,
        } => set_block(
            partial,
            *content_index,
            ContentBlock::ToolCall(tool_call.clone()),
        ),
        // Argument fragments are not valid JSON until the call ends; the partial keeps `{}`.
        AssistantMessageEvent::ToolCallDelta { .. } | AssistantMessageEvent::Start => {}
        // Ends and final events are built here from the partial, never sent whole.
        AssistantMessageEvent::TextEnd { .. }
        | AssistantMessageEvent::ThinkingEnd { .. }
        | AssistantMessageEvent::Done { .. }
        | AssistantMessageEvent::Error { .. } => {}
    }
}

fn set_block(partial: &mut AssistantMessage, index: usize, block: ContentBlock) {
    if index < partial.content.len() {
        partial.content[index] = block;
    } else {
        partial.content.push(block);
    }
}
