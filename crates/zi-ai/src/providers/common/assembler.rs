//! The one text/thinking/tool-call block assembler every provider client builds its message with.
//!
//! A client translates its API's events into calls here; the assembler numbers the content
//! blocks, turns each call into the [`Update`] the consumer applies, gathers tool-call argument
//! fragments, and keeps what belongs on the final message only (response id, usage,
//! signatures). Block text is not kept here: the consumer's partial message is the only copy
//! ([`crate::update`]).
//!
//! APIs that name their blocks (Anthropic, OpenAI Responses) map their index to the content
//! index [`Assembler::start`] returns; APIs that send bare text and thinking deltas (chat
//! completions, Gemini) use [`Assembler::extend`], which continues the open block while the kind
//! stays the same and otherwise closes it and starts the next.

use serde_json::Value;
use zi_protocol::event::AssistantMessageEvent;
use zi_protocol::message::{StopReason, ToolCall, Usage};

use super::{Halt, parse_arguments};
use crate::stream::EventSink;
use crate::update::{BlockSignature, FinalDetails, Update};

/// The kind of a text-like block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TextKind {
    Text,
    Thinking,
}

/// What a content block is, as far as the provider's deltas are concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BlockKind {
    Text,
    Thinking,
    /// Redacted thinking: opaque data, no deltas.
    RedactedThinking,
    ToolCall,
}

enum Block {
    Text {
        signature: Option<String>,
    },
    Thinking {
        signature: Option<String>,
        redacted: bool,
    },
    /// `None` once the call has ended.
    ToolCall(Option<PendingCall>),
}

struct PendingCall {
    id: String,
    name: String,
    /// The argument fragments so far.
    arguments: String,
}

pub(crate) struct Assembler {
    sink: EventSink,
    /// One entry per content block, by content index.
    blocks: Vec<Block>,
    /// The text or thinking block [`Assembler::extend`] continues.
    open: Option<(TextKind, usize)>,
    response_id: Option<String>,
    usage: Option<Usage>,
}

impl Assembler {
    pub fn new(sink: EventSink) -> Self {
        Assembler {
            sink,
            blocks: Vec::new(),
            open: None,
            response_id: None,
            usage: None,
        }
    }

    async fn send(&mut self, update: Update) -> Result<(), Halt> {
        if self.sink.send(update).await {
            Ok(())
        } else {
            Err(Halt::ConsumerGone)
        }
    }

    async fn event(&mut self, event: AssistantMessageEvent) -> Result<(), Halt> {
        self.send(Update::Event(event)).await
    }

    /// Emits `start`, the first event of every stream.
    pub async fn begin(&mut self) -> Result<(), Halt> {
        self.event(AssistantMessageEvent::Start).await
    }

    /// Starts a text or thinking block; returns its content index.
    pub async fn start(&mut self, kind: TextKind) -> Result<usize, Halt> {
        let content_index = self.blocks.len();
        let (block, event) = match kind {
            TextKind::Text => (
                Block::Text { signature: None },
                AssistantMessageEvent::TextStart { content_index },
            ),
            TextKind::Thinking => (
                Block::Thinking {
                    signature: None,
                    redacted: false,
                },
                AssistantMessageEvent::ThinkingStart { content_index },
            ),
        };
        self.blocks.push(block);
        self.event(event).await?;
        Ok(content_index)
    }

    /// Starts a redacted thinking block, whose opaque `data` is its signature.
    pub async fn start_redacted_thinking(&mut self, data: String) -> Result<usize, Halt> {
        let content_index = self.blocks.len();
        self.blocks.push(Block::Thinking {
            signature: Some(data),
            redacted: true,
        });
        self.event(AssistantMessageEvent::ThinkingStart { content_index })
            .await?;
        Ok(content_index)
    }

    /// Closes the open text or thinking block and starts a tool call; returns its content index.
    pub async fn start_tool_call(&mut self, id: String, name: String) -> Result<usize, Halt> {
        self.close().await?;
        let content_index = self.blocks.len();
        self.blocks.push(Block::ToolCall(Some(PendingCall {
            id: id.clone(),
            name: name.clone(),
            arguments: String::new(),
        })));
        self.event(AssistantMessageEvent::ToolCallStart {
            content_index,
            id,
            name,
        })
        .await?;
        Ok(content_index)
    }

    /// The content index the next block will have.
    pub fn next_index(&self) -> usize {
        self.blocks.len()
    }

    pub fn kind(&self, content_index: usize) -> Option<BlockKind> {
        Some(match self.blocks.get(content_index)? {
            Block::Text { .. } => BlockKind::Text,
            Block::Thinking {
                redacted: false, ..
            } => BlockKind::Thinking,
            Block::Thinking { redacted: true, .. } => BlockKind::RedactedThinking,
            Block::ToolCall(_) => BlockKind::ToolCall,
        })
    }

    /// Adds `delta` to the block: text, thinking, or a fragment of a tool call's arguments.
    /// Empty deltas are sent as given; callers drop them where their API means nothing by them.
    pub async fn delta(&mut self, content_index: usize, delta: String) -> Result<(), Halt> {
        let event = match self.blocks.get_mut(content_index) {
            Some(Block::Text { .. }) => AssistantMessageEvent::TextDelta {
                content_index,
                delta,
            },
            Some(Block::Thinking { .. }) => AssistantMessageEvent::ThinkingDelta {
                content_index,
                delta,
            },
            Some(Block::ToolCall(Some(call))) => {
                call.arguments.push_str(&delta);
                AssistantMessageEvent::ToolCallDelta {
                    content_index,
                    delta,
                }
            }
            Some(Block::ToolCall(None)) | None => return Ok(()),
        };
        self.event(event).await
    }

    /// Continues the open block of this kind with `delta` (skipped when empty), or closes the
    /// open block and starts a new one. Returns the block's content index.
    pub async fn extend(&mut self, kind: TextKind, delta: String) -> Result<usize, Halt> {
        let content_index = match self.open {
            Some((open, index)) if open == kind => index,
            _ => {
                self.close().await?;
                let index = self.start(kind).await?;
                self.open = Some((kind, index));
                index
            }
        };
        if !delta.is_empty() {
            self.delta(content_index, delta).await?;
        }
        Ok(content_index)
    }

    /// Ends the block [`Assembler::extend`] left open, if any.
    pub async fn close(&mut self) -> Result<(), Halt> {
        match self.open.take() {
            Some((_, content_index)) => self.end(content_index).await,
            None => Ok(()),
        }
    }

    /// Ends a block: text and thinking with their whole content, a tool call with the arguments
    /// its fragments spell (`{}` when they are not valid JSON).
    pub async fn end(&mut self, content_index: usize) -> Result<(), Halt> {
        if self.open.is_some_and(|(_, open)| open == content_index) {
            self.open = None;
        }
        match self.blocks.get_mut(content_index) {
            Some(Block::Text { .. } | Block::Thinking { .. }) => {
                self.send(Update::End { content_index }).await
            }
            Some(Block::ToolCall(call)) => match call.take() {
                Some(call) => {
                    let arguments = parse_arguments(&call.arguments);
                    self.send_tool_call_end(content_index, call, arguments, None)
                        .await
                }
                None => Ok(()),
            },
            None => Ok(()),
        }
    }

    /// Ends a tool call with arguments the API gave whole.
    pub async fn end_tool_call(
        &mut self,
        content_index: usize,
        arguments: Value,
        thought_signature: Option<String>,
    ) -> Result<(), Halt> {
        let Some(Block::ToolCall(call)) = self.blocks.get_mut(content_index) else {
            return Ok(());
        };
        match call.take() {
            Some(call) => {
                self.send_tool_call_end(content_index, call, arguments, thought_signature)
                    .await
            }
            None => Ok(()),
        }
    }

    async fn send_tool_call_end(
        &mut self,
        content_index: usize,
        call: PendingCall,
        arguments: Value,
        thought_signature: Option<String>,
    ) -> Result<(), Halt> {
        self.event(AssistantMessageEvent::ToolCallEnd {
            content_index,
            tool_call: ToolCall {
                id: call.id,
                name: call.name,
                arguments,
                thought_signature,
            },
        })
        .await
    }

    /// Ends every tool call still open, in content order (for APIs that end calls only with
    /// the message).
    pub async fn end_tool_calls(&mut self) -> Result<(), Halt> {
        for content_index in 0..self.blocks.len() {
            if matches!(self.blocks[content_index], Block::ToolCall(Some(_))) {
                self.end(content_index).await?;
            }
        }
        Ok(())
    }

    /// The id of a tool call that has not ended.
    pub fn open_tool_call_id(&self, content_index: usize) -> Option<&str> {
        match self.blocks.get(content_index) {
            Some(Block::ToolCall(Some(call))) => Some(&call.id),
            _ => None,
        }
    }

    /// Names a tool call whose start came without a name.
    pub fn name_tool_call(&mut self, content_index: usize, name: &str) {
        if let Some(Block::ToolCall(Some(call))) = self.blocks.get_mut(content_index)
            && call.name.is_empty()
        {
            call.name = name.to_string();
        }
    }

    pub fn tool_call_count(&self) -> usize {
        self.blocks
            .iter()
            .filter(|block| matches!(block, Block::ToolCall(_)))
            .count()
    }

    /// Sets the signature of a text or thinking block.
    pub fn set_signature(&mut self, content_index: usize, value: String) {
        if let Some(Block::Text { signature } | Block::Thinking { signature, .. }) =
            self.blocks.get_mut(content_index)
        {
            *signature = Some(value);
        }
    }

    /// Appends to the signature of a thinking block (signatures that stream in fragments).
    pub fn append_signature(&mut self, content_index: usize, fragment: &str) {
        if let Some(Block::Thinking { signature, .. }) = self.blocks.get_mut(content_index) {
            signature.get_or_insert_with(String::new).push_str(fragment);
        }
    }

    pub fn has_response_id(&self) -> bool {
        self.response_id.is_some()
    }

    pub fn set_response_id(&mut self, id: String) {
        self.response_id = Some(id);
    }

    /// Removes `secret` from any error text this stream reports.
    pub fn hide(&mut self, secret: &str) {
        self.sink.redactor.hide(secret);
    }

    pub fn set_usage(&mut self, usage: Usage) {
        self.usage = Some(usage);
    }

    fn into_details(self) -> (EventSink, FinalDetails) {
        let signatures = self
            .blocks
            .into_iter()
            .enumerate()
            .filter_map(|(content_index, block)| match block {
                Block::Text {
                    signature: Some(signature),
                } => Some(BlockSignature {
                    content_index,
                    signature,
                    redacted: false,
                }),
                Block::Thinking {
                    signature: Some(signature),
                    redacted,
                } => Some(BlockSignature {
                    content_index,
                    signature,
                    redacted,
                }),
                _ => None,
            })
            .collect();
        let details = FinalDetails {
            response_id: self.response_id,
            usage: self.usage,
            signatures,
        };
        (self.sink, details)
    }

    /// Ends the stream with `done`.
    pub async fn finish(self, reason: StopReason) {
        let (mut sink, details) = self.into_details();
        sink.send(Update::Final {
            reason,
            error_message: None,
            details: Box::new(details),
        })
        .await;
    }

    /// Ends the stream with `error` (`error` or `aborted`), keeping whatever content arrived.
    pub async fn fail(self, reason: StopReason, error_message: String) {
        let (mut sink, details) = self.into_details();
        let error_message = Some(sink.redactor.scrub(error_message));
        sink.send(Update::Final {
            reason,
            error_message,
            details: Box::new(details),
        })
        .await;
    }
}
