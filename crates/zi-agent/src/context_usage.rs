//! Context usage (docs/configuration.md#context-usage): provider-reported usage of the latest valid
//! assistant message plus estimates for what follows it.

use std::borrow::Borrow;

use zi_ai::Model;
use zi_protocol::message::{AgentMessage, ContentBlock, MessageContent, StopReason};
use zi_protocol::state::{ContextUsage, UnavailableReason};

/// Tokens charged per image.
const IMAGE_TOKENS: u64 = 1200;

fn bytes_to_tokens(bytes: usize) -> u64 {
    (bytes as u64).div_ceil(4)
}

fn blocks_tokens(blocks: &[ContentBlock]) -> u64 {
    blocks
        .iter()
        .map(|block| match block {
            ContentBlock::Text { text, .. } => bytes_to_tokens(text.len()),
            ContentBlock::Thinking { thinking, .. } => bytes_to_tokens(thinking.len()),
            ContentBlock::Image { .. } => IMAGE_TOKENS,
            ContentBlock::ToolCall(call) => bytes_to_tokens(
                call.name.len() + serde_json::to_string(&call.arguments).map_or(0, |s| s.len()),
            ),
        })
        .sum()
}

fn content_tokens(content: &MessageContent) -> u64 {
    match content {
        MessageContent::Text(text) => bytes_to_tokens(text.len()),
        MessageContent::Parts(parts) => blocks_tokens(parts),
    }
}

/// Estimated tokens of one message.
pub fn estimate_message(message: &AgentMessage) -> u64 {
    match message {
        AgentMessage::User(m) => content_tokens(&m.content),
        AgentMessage::Assistant(m) => {
            blocks_tokens(&m.content)
                + m.error_message
                    .as_ref()
                    .map_or(0, |e| bytes_to_tokens(e.len()))
        }
        AgentMessage::ToolResult(m) => blocks_tokens(&m.content),
        AgentMessage::Custom(m) => content_tokens(&m.content),
        AgentMessage::CompactionSummary(m) => bytes_to_tokens(m.summary.len()),
    }
}

/// Computes the usage of `messages` (the active context) against `model`. Provider-reported
/// usage counts only from position `anchor` on (messages after the latest compaction).
pub fn context_usage<M: Borrow<AgentMessage>>(
    model: Option<&Model>,
    messages: &[M],
    anchor: usize,
) -> ContextUsage {
    let Some(model) = model else {
        return ContextUsage::Unavailable {
            reason: UnavailableReason::NoModel,
        };
    };
    if model.context_window == 0 {
        return ContextUsage::Unavailable {
            reason: UnavailableReason::UnknownWindow,
        };
    }
    let measured_from = messages
        .iter()
        .enumerate()
        .skip(anchor)
        .rev()
        .find(|(_, m)| {
            Borrow::<AgentMessage>::borrow(*m)
                .as_assistant()
                .is_some_and(|a| {
                    !matches!(a.stop_reason, StopReason::Error | StopReason::Aborted)
                        && a.usage.tokens() > 0
                })
        });
    let (tokens, measured) = match measured_from.map(|(index, _)| index) {
        Some(index) => {
            let reported = Borrow::<AgentMessage>::borrow(&messages[index])
                .as_assistant()
                .map_or(0, |a| a.usage.tokens());
            let trailing: u64 = messages[index + 1..]
                .iter()
                .map(|m| estimate_message(m.borrow()))
                .sum();
            (reported + trailing, index + 1 == messages.len())
        }
        None => (
            messages.iter().map(|m| estimate_message(m.borrow())).sum(),
            false,
        ),
    };
    let context_window = model.context_window;
    let percent = (tokens as f64 / context_window as f64 * 100.0).clamp(0.0, 100.0);
    if measured {
        ContextUsage::Measured {
            tokens,
            context_window,
            percent,
        }
    } else {
        ContextUsage::Estimated {
            tokens,
            context_window,
            percent,
        }
    }
}
