//! The provider-neutral request and event stream.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use zi_os::redact::Redactor;
use zi_protocol::ThinkingLevel;
use zi_protocol::event::AssistantMessageEvent;
use zi_protocol::message::{AgentMessage, AssistantMessage, StopReason, Usage};

use crate::model::{Api, Model};
use crate::update::{StreamUpdate, Update};

/// Error text of an assistant message cut short by cancellation.
pub const ABORTED_MESSAGE: &str = "Request was aborted";

/// A tool as the model sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolSpec {
    /// The name the model calls it by.
    pub name: String,
    /// What the model reads to decide when to call it.
    pub description: String,
    /// JSON Schema of the arguments.
    pub parameters: Value,
}

/// What one model request contains.
#[derive(Debug, Clone, Default)]
pub struct LlmContext {
    /// The system prompt, sent the way the API takes it.
    pub system_prompt: String,
    /// The provider-context projection of the conversation.
    pub messages: Vec<AgentMessage>,
    /// The tools the model may call.
    pub tools: Vec<ToolSpec>,
}

/// Per-request options.
#[derive(Clone)]
pub struct StreamOptions {
    /// Already resolved key, if the provider needs one.
    pub api_key: Option<String>,
    /// How hard the model thinks; mapped to the provider's effort or budget.
    pub thinking: ThinkingLevel,
    /// Cancelling it aborts the request: the stream ends with an aborted error message.
    pub cancel: CancellationToken,
    /// Longest silence tolerated between body chunks before the stream fails (retryable).
    pub idle_timeout: Duration,
    /// Sent where the API takes a cache or session key, so requests of one session share a
    /// prompt cache.
    pub session_id: String,
    /// Replaces the model's base URL: the endpoint a subscription's token names (Copilot) or
    /// `ZI_CODEX_BASE_URL` ([`crate::credentials::RequestAuth`]).
    pub base_url: Option<String>,
    /// The ChatGPT account of a Codex request (`chatgpt-account-id`).
    pub account_id: Option<String>,
    /// `codexFastMode`: Codex requests ask for the priority tier.
    pub fast_mode: bool,
}

impl StreamOptions {
    /// Options for one request with the given credentials and the defaults for the rest
    /// (thinking off, no cancellation, [`DEFAULT_IDLE_TIMEOUT`], no session id).
    pub fn with_auth(auth: crate::credentials::RequestAuth) -> StreamOptions {
        StreamOptions {
            api_key: auth.key,
            thinking: ThinkingLevel::Off,
            cancel: CancellationToken::new(),
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
            session_id: String::new(),
            base_url: auth.base_url,
            account_id: auth.account_id,
            fast_mode: false,
        }
    }
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

/// Starts one streaming request. The stream yields `start`, content events, and finally exactly
/// one `done` or `error` carrying the whole message. Failures never panic or vanish: they arrive
/// as an `error` event with `stopReason` `error` or `aborted`.
pub fn stream_assistant(
    model: Arc<Model>,
    context: LlmContext,
    options: StreamOptions,
) -> AssistantStream {
    let (sender, receiver) = mpsc::channel(EVENT_CHANNEL_CAPACITY);
    // A subscription's endpoint replaces the catalog's, so URL checks, URL building and the
    // scrubbing of error texts all see the endpoint the request goes to.
    let model = match &options.base_url {
        Some(base_url) if *base_url != model.base_url => Arc::new(Model {
            base_url: base_url.clone(),
            ..(*model).clone()
        }),
        _ => model,
    };
    let mut sink = EventSink::new(sender, &model);
    if let Some(key) = options.api_key.clone() {
        sink.redactor.hide_key(key);
    }
    if let Some(account) = options.account_id.clone() {
        sink.redactor.hide(account);
    }
    tokio::spawn(async move {
        if let Err(problem) = crate::http::check_base_url(&model.base_url, &model.provider) {
            let fail = async |_: &mut crate::providers::common::Assembler| {
                Err(crate::providers::common::failure(problem.to_string()))
            };
            crate::providers::common::drive(sink, fail).await;
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
                use crate::providers::openai_responses::{Flavor, stream};
                stream(&model, &context, &options, sink, Flavor::Plain).await
            }
            Api::OpenAiCodexResponses => {
                use crate::providers::openai_responses::{Flavor, stream};
                stream(&model, &context, &options, sink, Flavor::Codex).await
            }
            Api::GoogleGenerativeAi => {
                crate::providers::google::stream(&model, &context, &options, sink).await
            }
        }
    });
    AssistantStream { updates: receiver }
}

/// The consumer's end of one streaming request.
///
/// The consumer holds the partial message (starting as [`empty_assistant`] of the model) and
/// applies each update to it: that partial message is the only place the reply accumulates.
pub struct AssistantStream {
    updates: mpsc::Receiver<StreamUpdate>,
}

impl AssistantStream {
    /// The next update, `None` after the final one.
    pub async fn recv(&mut self) -> Option<StreamUpdate> {
        self.updates.recv().await
    }

    /// The next event, accumulating the reply into `partial`.
    pub async fn next_event(
        &mut self,
        partial: &mut AssistantMessage,
    ) -> Option<AssistantMessageEvent> {
        loop {
            if let Some(event) = self.recv().await?.apply(partial) {
                return Some(event);
            }
        }
    }
}

/// The provider task's end of the channel. It keeps no content: it forwards updates and hides
/// configuration and secrets from error texts.
pub(crate) struct EventSink {
    sender: mpsc::Sender<StreamUpdate>,
    /// Removes the endpoint and every configured secret from error texts: endpoints are
    /// configuration, never output, and a server may echo a secret back.
    pub(crate) redactor: Redactor,
}

impl EventSink {
    pub(crate) fn new(sender: mpsc::Sender<StreamUpdate>, model: &Model) -> Self {
        EventSink {
            sender,
            redactor: Redactor::for_base_url(&model.base_url),
        }
    }

    /// Forwards an update. Returns false when the consumer is gone (the caller should stop).
    pub(crate) async fn send(&mut self, update: Update) -> bool {
        self.sender.send(StreamUpdate(update)).await.is_ok()
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
        timestamp: zi_os::clock::now_millis(),
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
