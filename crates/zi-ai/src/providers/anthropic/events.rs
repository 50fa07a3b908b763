//! Decoding the response events and assembling the message from them.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;
use zi_protocol::message::{StopReason, Usage};

use crate::model::Model;
use crate::providers::common::{
    Assembler, BlockKind, Halt, MaybeStr, SseHandler, TextKind, event_error_message, failure,
    finish_usage,
};

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Event<'a> {
    MessageStart {
        #[serde(borrow)]
        message: StartMessage<'a>,
    },
    ContentBlockStart {
        index: usize,
        #[serde(borrow)]
        content_block: StartBlock<'a>,
    },
    ContentBlockDelta {
        index: usize,
        #[serde(borrow)]
        delta: Delta<'a>,
    },
    ContentBlockStop {
        index: usize,
    },
    MessageDelta {
        #[serde(borrow, default)]
        delta: Option<MessageDelta<'a>>,
        #[serde(default)]
        usage: Option<WireUsage>,
    },
    MessageStop,
    Ping,
    Error {
        error: Value,
    },
    #[serde(other)]
    Unknown,
}

#[derive(Deserialize)]
struct StartMessage<'a> {
    #[serde(borrow, default)]
    id: MaybeStr<'a>,
    #[serde(default)]
    usage: Option<WireUsage>,
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum StartBlock<'a> {
    Text {
        #[serde(borrow, default)]
        text: MaybeStr<'a>,
    },
    Thinking,
    RedactedThinking {
        #[serde(borrow, default)]
        data: MaybeStr<'a>,
    },
    ToolUse {
        #[serde(borrow, default)]
        id: MaybeStr<'a>,
        #[serde(borrow, default)]
        name: MaybeStr<'a>,
    },
    #[serde(other)]
    Unknown,
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Delta<'a> {
    #[serde(rename = "text_delta")]
    Text {
        #[serde(borrow, default)]
        text: MaybeStr<'a>,
    },
    #[serde(rename = "thinking_delta")]
    Thinking {
        #[serde(borrow, default)]
        thinking: MaybeStr<'a>,
    },
    #[serde(rename = "signature_delta")]
    Signature {
        #[serde(borrow, default)]
        signature: MaybeStr<'a>,
    },
    #[serde(rename = "input_json_delta")]
    InputJson {
        #[serde(borrow, default)]
        partial_json: MaybeStr<'a>,
    },
    #[serde(other)]
    Unknown,
}

#[derive(Deserialize)]
struct MessageDelta<'a> {
    #[serde(borrow, default)]
    stop_reason: MaybeStr<'a>,
}

#[derive(Deserialize, Default, Clone, Copy)]
struct WireUsage {
    #[serde(default)]
    input_tokens: Option<u64>,
    #[serde(default)]
    output_tokens: Option<u64>,
    #[serde(default)]
    cache_creation_input_tokens: Option<u64>,
    #[serde(default)]
    cache_read_input_tokens: Option<u64>,
}

#[derive(Default)]
pub(super) struct StreamState {
    /// Anthropic block index → content index.
    blocks: BTreeMap<usize, usize>,
    usage: Usage,
    stop_reason: Option<String>,
}

impl SseHandler for StreamState {
    async fn on_data(&mut self, data: &str, out: &mut Assembler) -> Result<bool, Halt> {
        let event: Event<'_> = match serde_json::from_str(data) {
            Ok(event) => event,
            Err(error) => {
                tracing::debug!("ignoring an undecodable anthropic event: {error}");
                return Ok(false);
            }
        };
        match event {
            Event::MessageStart { message } => {
                if let Some(id) = message.id.into_owned() {
                    out.set_response_id(id);
                }
                if let Some(usage) = message.usage {
                    self.add_usage(usage);
                }
            }
            Event::ContentBlockStart {
                index,
                content_block,
            } => self.start_block(index, content_block, out).await?,
            Event::ContentBlockDelta { index, delta } => self.delta(index, delta, out).await?,
            Event::ContentBlockStop { index } => {
                if let Some(content_index) = self.blocks.remove(&index) {
                    out.end(content_index).await?;
                }
            }
            Event::MessageDelta { delta, usage } => {
                if let Some(reason) = delta.and_then(|delta| delta.stop_reason.into_owned()) {
                    self.stop_reason = Some(reason);
                }
                if let Some(usage) = usage {
                    self.add_usage(usage);
                }
            }
            Event::MessageStop => return Ok(true),
            Event::Error { error } => return Err(failure(stream_error(&error))),
            Event::Ping | Event::Unknown => {}
        }
        Ok(false)
    }
}

/// `overloaded_error: Overloaded` keeps the type, which classification relies on.
fn stream_error(error: &Value) -> String {
    let message = event_error_message(error);
    match error.get("type").and_then(Value::as_str) {
        Some(kind) if !message.contains(kind) => format!("{kind}: {message}"),
        _ => message,
    }
}

impl StreamState {
    /// Later reports replace earlier ones field by field (`message_delta` carries cumulative
    /// output tokens and may repeat the input counts).
    fn add_usage(&mut self, usage: WireUsage) {
        if let Some(n) = usage.input_tokens {
            self.usage.input = n;
        }
        if let Some(n) = usage.output_tokens {
            self.usage.output = n;
        }
        if let Some(n) = usage.cache_creation_input_tokens {
            self.usage.cache_write = n;
        }
        if let Some(n) = usage.cache_read_input_tokens {
            self.usage.cache_read = n;
        }
    }

    async fn start_block(
        &mut self,
        index: usize,
        block: StartBlock<'_>,
        out: &mut Assembler,
    ) -> Result<(), Halt> {
        let content_index = match block {
            StartBlock::Text { text } => {
                let content_index = out.start(TextKind::Text).await?;
                if let Some(text) = text.0.filter(|text| !text.is_empty()) {
                    out.delta(content_index, text.into_owned()).await?;
                }
                content_index
            }
            StartBlock::Thinking => out.start(TextKind::Thinking).await?,
            StartBlock::RedactedThinking { data } => {
                out.start_redacted_thinking(data.or_empty()).await?
            }
            StartBlock::ToolUse { id, name } => {
                out.start_tool_call(id.or_empty(), name.or_empty()).await?
            }
            StartBlock::Unknown => {
                tracing::debug!("ignoring an anthropic content block of an unknown type");
                return Ok(());
            }
        };
        self.blocks.insert(index, content_index);
        Ok(())
    }

    async fn delta(
        &mut self,
        index: usize,
        delta: Delta<'_>,
        out: &mut Assembler,
    ) -> Result<(), Halt> {
        let Some(&content_index) = self.blocks.get(&index) else {
            return Ok(());
        };
        match (delta, out.kind(content_index)) {
            (Delta::Text { text }, Some(BlockKind::Text)) => {
                out.delta(content_index, text.or_empty()).await
            }
            (Delta::Thinking { thinking }, Some(BlockKind::Thinking)) => {
                out.delta(content_index, thinking.or_empty()).await
            }
            (Delta::Signature { signature }, Some(BlockKind::Thinking)) => {
                out.append_signature(content_index, signature.as_deref().unwrap_or(""));
                Ok(())
            }
            (Delta::InputJson { partial_json }, Some(BlockKind::ToolCall)) => {
                match partial_json.0.filter(|fragment| !fragment.is_empty()) {
                    Some(fragment) => out.delta(content_index, fragment.into_owned()).await,
                    None => Ok(()),
                }
            }
            _ => Ok(()),
        }
    }

    pub(super) fn complete(
        &mut self,
        model: &Model,
        out: &mut Assembler,
    ) -> Result<StopReason, Halt> {
        out.set_usage(finish_usage(model, std::mem::take(&mut self.usage)));
        match self.stop_reason.as_deref() {
            Some("end_turn" | "stop_sequence" | "pause_turn") | None => Ok(StopReason::Stop),
            Some("max_tokens") | Some("model_context_window_exceeded") => Ok(StopReason::Length),
            Some("tool_use") => Ok(StopReason::ToolUse),
            Some("refusal") => Err(failure(crate::classify::refusal_message(
                "stop_reason refusal",
            ))),
            Some(other) => Err(failure(format!(
                "Provider stopped with stop_reason {other}"
            ))),
        }
    }
}
