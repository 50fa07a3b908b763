//! The provider-neutral request and event stream.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use zi_protocol::ThinkingLevel;
use zi_protocol::event::AssistantMessageEvent;
use zi_protocol::message::{
    AgentMessage, AssistantMessage, ContentBlock, StopReason, ToolCall, Usage,
};

use crate::model::{Api, Model};
use crate::redact::Redactor;

/// Error text of an assistant message cut short by cancellation.
pub const ABORTED_MESSAGE: &str = "Request was aborted";

/// A tool as the model sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    /// JSON Schema of the arguments.
    pub parameters: Value,
}

/// What one model request contains.
#[derive(Debug, Clone, Default)]
pub struct LlmContext {
    pub system_prompt: String,
    /// The provider-context projection of the conversation.
    pub messages: Vec<AgentMessage>,
    pub tools: Vec<ToolSpec>,
}

/// Per-request options.
#[derive(Clone)]
pub struct StreamOptions {
    /// Already resolved key, if the provider needs one.
    pub api_key: Option<String>,
    pub thinking: ThinkingLevel,
    pub cancel: CancellationToken,
    /// Longest silence tolerated between body chunks before the stream fails (retryable).
    pub idle_timeout: Duration,
    pub session_id: String,
}

impl std::fmt::Debug for StreamOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StreamOptions")
            .field("thinking", &self.thinking)
            .field("idle_timeout", &self.idle_timeout)
            .finish_non_exhaustive()
    }
}

/// Default body idle timeout.
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(300);

/// Channel capacity between a provider task and its consumer: enough to decouple parsing from
/// event handling without letting a fast stream buffer unboundedly.
const EVENT_CHANNEL_CAPACITY: usize = 1024;

/// Starts one streaming request. The returned receiver yields `start`, content events, and
/// finally exactly one `done` or `error` carrying the whole message. Failures never panic or
/// vanish: they arrive as an `error` event with `stopReason` `error` or `aborted`.
pub fn stream_assistant(
    model: Arc<Model>,
    context: LlmContext,
    options: StreamOptions,
) -> mpsc::Receiver<AssistantMessageEvent> {
    let (sender, receiver) = mpsc::channel(EVENT_CHANNEL_CAPACITY);
    let mut sink = EventSink::new(sender, &model);
    if let Some(key) = options.api_key.clone() {
        sink.redactor.hide_key(key);
    }
    tokio::spawn(async move {
        if let Err(problem) = crate::http::check_base_url(&model.base_url, &model.provider) {
            if sink.emit(AssistantMessageEvent::Start).await {
                sink.fail(StopReason::Error, problem).await;
            }
            return;
        }
        match model.api {
            Api::OpenAiCompletions => {
                crate::providers::openai_completions::stream(&model, &context, &options, sink).await
            }
            Api::AnthropicMessages => {
                crate::providers::anthropic::stream(&model, &context, &options, sink).await
            }
            Api::OpenAiResponses => {
                crate::providers::openai_responses::stream(&model, &context, &options, sink).await
            }
            Api::GoogleGenerativeAi => {
                crate::providers::google::stream(&model, &context, &options, sink).await
            }
        }
    });
    receiver
}

/// Builds the partial message while forwarding events, so every provider ends the stream the
/// same way.
pub struct EventSink {
    sender: mpsc::Sender<AssistantMessageEvent>,
    pub partial: AssistantMessage,
    finished: bool,
    /// Removes the endpoint and every configured secret from error texts: endpoints are
    /// configuration, never output, and a server may echo a secret back.
    pub redactor: Redactor,
}

impl EventSink {
    pub fn new(sender: mpsc::Sender<AssistantMessageEvent>, model: &Model) -> Self {
        EventSink {
            sender,
            partial: empty_assistant(model),
            finished: false,
            redactor: Redactor::for_base_url(&model.base_url),
        }
    }

    /// Applies an event to the partial message and forwards it. Returns false when the consumer
    /// is gone (the caller should stop).
    pub async fn emit(&mut self, event: AssistantMessageEvent) -> bool {
        apply_event(&mut self.partial, &event);
        self.sender.send(event).await.is_ok()
    }

    /// Ends the stream successfully with the partial message as final.
    pub async fn finish(mut self, reason: StopReason) {
        self.partial.stop_reason = reason;
        self.finished = true;
        let message = self.partial.clone();
        let _ = self
            .sender
            .send(AssistantMessageEvent::Done { reason, message })
            .await;
    }

    /// Ends the stream with an error (`error` or `aborted`), keeping whatever content arrived.
    pub async fn fail(mut self, reason: StopReason, error_message: String) {
        self.partial.stop_reason = reason;
        self.partial.error_message = Some(self.redactor.scrub(error_message));
        self.finished = true;
        let error = self.partial.clone();
        let _ = self
            .sender
            .send(AssistantMessageEvent::Error { reason, error })
            .await;
    }

    pub fn is_finished(&self) -> bool {
        self.finished
    }
}

/// An empty assistant message attributed to `model`.
pub fn empty_assistant(model: &Model) -> AssistantMessage {
    AssistantMessage {
        content: Vec::new(),
        api: model.api.as_str().to_string(),
        provider: model.provider.clone(),
        model: model.id.clone(),
        usage: Usage::default(),
        stop_reason: StopReason::Stop,
        error_message: None,
        response_id: None,
        timestamp: now_millis(),
    }
}

pub fn now_millis() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// Applies one stream event to a partial message. Deltas append in place, so building a long
/// message stays linear.
pub fn apply_event(partial: &mut AssistantMessage, event: &AssistantMessageEvent) {
    match event {
        AssistantMessageEvent::Start => {}
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
        AssistantMessageEvent::TextEnd {
            content_index,
            content,
        } => {
            if let Some(ContentBlock::Text { text, .. }) = partial.content.get_mut(*content_index)
                && text != content
            {
                *text = content.clone();
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
        AssistantMessageEvent::ThinkingEnd {
            content_index,
            content,
        } => {
            if let Some(ContentBlock::Thinking { thinking, .. }) =
                partial.content.get_mut(*content_index)
                && thinking != content
            {
                *thinking = content.clone();
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
        // Argument fragments are not valid JSON until the call ends; the partial keeps `{}`.
        AssistantMessageEvent::ToolCallDelta { .. } => {}
        AssistantMessageEvent::ToolCallEnd {
            content_index,
            tool_call,
        } => {
            set_block(
                partial,
                *content_index,
                ContentBlock::ToolCall(tool_call.clone()),
            );
        }
        AssistantMessageEvent::Done { message, .. } => *partial = message.clone(),
        AssistantMessageEvent::Error { error, .. } => *partial = error.clone(),
    }
}

fn set_block(partial: &mut AssistantMessage, index: usize, block: ContentBlock) {
    if index < partial.content.len() {
        partial.content[index] = block;
    } else {
        partial.content.push(block);
    }
}

/// Cost in dollars from per-million prices.
pub fn apply_cost(model: &Model, usage: &mut Usage) {
    let per = |tokens: u64, price: f64| tokens as f64 * price / 1_000_000.0;
    usage.cost.input = per(usage.input, model.cost.input);
    usage.cost.output = per(usage.output, model.cost.output);
    usage.cost.cache_read = per(usage.cache_read, model.cost.cache_read);
    usage.cost.cache_write = per(usage.cache_write, model.cost.cache_write);
    usage.cost.total =
        usage.cost.input + usage.cost.output + usage.cost.cache_read + usage.cost.cache_write;
}
