//! Decoding the response events and assembling the message from them.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;
use zi_protocol::message::{StopReason, Usage};

use crate::model::Model;
use crate::providers::common::{
    Assembler, Halt, MaybeStr, MaybeU64, SseHandler, TextKind, failure, finish_usage,
    parse_arguments,
};

#[derive(Deserialize)]
#[serde(tag = "type")]
enum Event<'a> {
    #[serde(rename = "response.created", alias = "response.in_progress")]
    Created {
        #[serde(borrow, default)]
        response: Option<ResponseId<'a>>,
    },
    #[serde(rename = "response.output_item.added")]
    ItemAdded {
        #[serde(default)]
        output_index: MaybeU64,
        #[serde(borrow, default)]
        item: Option<AddedItem<'a>>,
    },
    /// Summary parts are paragraphs of one thinking block.
    #[serde(rename = "response.reasoning_summary_part.added")]
    SummaryPartAdded {
        #[serde(default)]
        output_index: MaybeU64,
        #[serde(default)]
        summary_index: MaybeU64,
    },
    #[serde(
        rename = "response.output_text.delta",
        alias = "response.reasoning_summary_text.delta",
        alias = "response.reasoning_text.delta",
        alias = "response.refusal.delta",
        alias = "response.function_call_arguments.delta"
    )]
    Delta {
        #[serde(default)]
        output_index: MaybeU64,
        #[serde(borrow, default)]
        delta: MaybeStr<'a>,
    },
    #[serde(rename = "response.output_item.done")]
    ItemDone {
        #[serde(default)]
        output_index: MaybeU64,
        #[serde(borrow, default)]
        item: Option<DoneItem<'a>>,
    },
    /// `response.done` is how the Codex backend names the end.
    #[serde(
        rename = "response.completed",
        alias = "response.incomplete",
        alias = "response.done"
    )]
    Completed {
        #[serde(borrow, default)]
        response: Option<FinalResponse<'a>>,
    },
    #[serde(rename = "response.failed")]
    Failed {
        #[serde(default)]
        response: Option<FailedResponse>,
    },
    #[serde(rename = "error")]
    Error,
    #[serde(other)]
    Unknown,
}

#[derive(Deserialize)]
struct ResponseId<'a> {
    #[serde(borrow, default)]
    id: MaybeStr<'a>,
}

#[derive(Deserialize)]
struct AddedItem<'a> {
    #[serde(rename = "type", borrow, default)]
    kind: MaybeStr<'a>,
    #[serde(borrow, default)]
    id: MaybeStr<'a>,
    #[serde(borrow, default)]
    call_id: MaybeStr<'a>,
    #[serde(borrow, default)]
    name: MaybeStr<'a>,
}

#[derive(Deserialize)]
struct DoneItem<'a> {
    #[serde(borrow, default)]
    id: MaybeStr<'a>,
    #[serde(borrow, default)]
    arguments: MaybeStr<'a>,
}

#[derive(Deserialize)]
struct FinalResponse<'a> {
    #[serde(borrow, default)]
    status: MaybeStr<'a>,
    #[serde(borrow, default)]
    incomplete_details: Option<IncompleteDetails<'a>>,
    #[serde(default)]
    usage: Option<ResponseUsage>,
}

#[derive(Deserialize)]
struct IncompleteDetails<'a> {
    #[serde(borrow, default)]
    reason: MaybeStr<'a>,
}

#[derive(Deserialize)]
struct ResponseUsage {
    #[serde(default)]
    input_tokens: MaybeU64,
    #[serde(default)]
    output_tokens: MaybeU64,
    #[serde(default)]
    total_tokens: MaybeU64,
    #[serde(default)]
    input_tokens_details: Option<InputTokensDetails>,
}

#[derive(Deserialize)]
struct InputTokensDetails {
    #[serde(default)]
    cached_tokens: MaybeU64,
}

#[derive(Deserialize)]
struct FailedResponse {
    #[serde(default)]
    error: Option<Value>,
}

/// What an output item is, by its `output_index`.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Item {
    Reasoning,
    Message,
    Call,
}

#[derive(Default)]
pub(super) struct StreamState {
    /// Codex words its plan's usage limits ([`super::codex::usage_limit_text`]).
    codex: bool,
    /// `output_index` → (content index, item).
    items: BTreeMap<u64, (usize, Item)>,
    usage: Option<Usage>,
    status: Option<String>,
    incomplete_reason: Option<String>,
}

fn text(value: &Value, key: &str) -> String {
    value
        .get(key)
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string()
}

/// `code: message` unless the message already names the code.
fn plain_error_text(error: &Value) -> String {
    let message = text(error, "message");
    let code = text(error, "code");
    match (code.is_empty(), message.is_empty()) {
        (true, true) => format!("Provider error: {error}"),
        (true, false) => message,
        (false, true) => code,
        (false, false) if message.contains(&code) => message,
        (false, false) => format!("{code}: {message}"),
    }
}

impl SseHandler for StreamState {
    async fn on_data(&mut self, data: &str, out: &mut Assembler) -> Result<bool, Halt> {
        let event: Event<'_> = match serde_json::from_str(data) {
            Ok(event) => event,
            Err(error) => {
                tracing::debug!("ignoring an undecodable responses event: {error}");
                return Ok(false);
            }
        };
        match event {
            Event::Created { response } => {
                if let Some(id) = response.and_then(|response| response.id.into_owned()) {
                    out.set_response_id(id);
                }
            }
            Event::ItemAdded { output_index, item } => {
                if let Some(index) = output_index.0 {
                    self.item_added(index, item, out).await?;
                }
            }
            Event::SummaryPartAdded {
                output_index,
                summary_index,
            } => {
                if summary_index.0 != Some(0) {
                    self.delta(output_index.0, "\n\n".to_string(), out).await?;
                }
            }
            Event::Delta {
                output_index,
                delta,
            } => self.delta(output_index.0, delta.or_empty(), out).await?,
            Event::ItemDone { output_index, item } => {
                if let Some(index) = output_index.0 {
                    self.item_done(index, item, data, out).await?;
                }
            }
            Event::Completed { response } => {
                self.finish_response(response);
                return Ok(true);
            }
            Event::Failed { response } => {
                let error = response.and_then(|r| r.error).filter(|e| !e.is_null());
                return Err(failure(error.map_or_else(
                    || "The provider reported the response as failed".to_string(),
                    |error| self.error_text(&error),
                )));
            }
            Event::Error => {
                // The whole event is the error; read it again as it came.
                let event: Value = serde_json::from_str(data).unwrap_or_default();
                let error = event
                    .get("error")
                    .filter(|e| e.is_object())
                    .unwrap_or(&event);
                return Err(failure(self.error_text(error)));
            }
            Event::Unknown => {}
        }
        Ok(false)
    }
}

impl StreamState {
    pub(super) fn new(flavor: super::Flavor) -> StreamState {
        StreamState {
            codex: flavor == super::Flavor::Codex,
            ..StreamState::default()
        }
    }

    /// The text of an error the stream reported.
    fn error_text(&self, error: &Value) -> String {
        self.codex
            .then(|| super::codex::usage_limit_text(None, error, zi_os::clock::now_millis()))
            .flatten()
            .unwrap_or_else(|| plain_error_text(error))
    }

    async fn item_added(
        &mut self,
        index: u64,
        item: Option<AddedItem<'_>>,
        out: &mut Assembler,
    ) -> Result<(), Halt> {
        let Some(item) = item else {
            return Ok(());
        };
        let (content_index, kind) = match item.kind.as_deref() {
            Some("reasoning") => (out.start(TextKind::Thinking).await?, Item::Reasoning),
            Some("message") => (out.start(TextKind::Text).await?, Item::Message),
            Some("function_call") => {
                let id = format!(
                    "{}|{}",
                    item.call_id.as_deref().unwrap_or(""),
                    item.id.as_deref().unwrap_or("")
                );
                (
                    out.start_tool_call(id, item.name.or_empty()).await?,
                    Item::Call,
                )
            }
            _ => return Ok(()),
        };
        self.items.insert(index, (content_index, kind));
        Ok(())
    }

    async fn delta(
        &mut self,
        index: Option<u64>,
        delta: String,
        out: &mut Assembler,
    ) -> Result<(), Halt> {
        let Some(&(content_index, _)) = index.and_then(|i| self.items.get(&i)) else {
            return Ok(());
        };
        if delta.is_empty() {
            return Ok(());
        }
        out.delta(content_index, delta).await
    }

    async fn item_done(
        &mut self,
        index: u64,
        item: Option<DoneItem<'_>>,
        data: &str,
        out: &mut Assembler,
    ) -> Result<(), Halt> {
        let Some((content_index, kind)) = self.items.remove(&index) else {
            return Ok(());
        };
        match kind {
            Item::Reasoning => {
                // The whole item, encrypted content included, is what replay sends back.
                let event: Value = serde_json::from_str(data).unwrap_or_default();
                out.set_signature(content_index, event["item"].to_string());
                out.end(content_index).await
            }
            Item::Message => {
                if let Some(id) = item
                    .and_then(|item| item.id.into_owned())
                    .filter(|id| !id.is_empty())
                {
                    out.set_signature(content_index, id);
                }
                out.end(content_index).await
            }
            Item::Call => match item.and_then(|item| item.arguments.0) {
                Some(arguments) => {
                    out.end_tool_call(content_index, parse_arguments(&arguments), None)
                        .await
                }
                None => out.end(content_index).await,
            },
        }
    }

    fn finish_response(&mut self, response: Option<FinalResponse<'_>>) {
        let Some(response) = response else {
            self.status = None;
            self.incomplete_reason = None;
            return;
        };
        self.status = response.status.into_owned();
        self.incomplete_reason = response
            .incomplete_details
            .and_then(|details| details.reason.into_owned());
        if let Some(usage) = response.usage {
            let cached = usage
                .input_tokens_details
                .map_or(0, |details| details.cached_tokens.or_zero());
            self.usage = Some(Usage {
                input: usage.input_tokens.or_zero().saturating_sub(cached),
                output: usage.output_tokens.or_zero(),
                cache_read: cached,
                cache_write: 0,
                total_tokens: usage.total_tokens.or_zero(),
                cost: Default::default(),
            });
        }
    }

    pub(super) fn complete(
        &mut self,
        model: &Model,
        out: &mut Assembler,
    ) -> Result<StopReason, Halt> {
        if let Some(usage) = self.usage.take() {
            out.set_usage(finish_usage(model, usage));
        }
        match (self.status.as_deref(), self.incomplete_reason.as_deref()) {
            (Some("incomplete"), Some("max_output_tokens")) => Ok(StopReason::Length),
            (Some("incomplete"), Some("content_filter")) => Err(failure(
                crate::classify::refusal_message("incomplete_details content_filter"),
            )),
            (Some("incomplete"), reason) => Err(failure(format!(
                "The response is incomplete ({})",
                reason.unwrap_or("no reason given")
            ))),
            _ if out.tool_call_count() > 0 => Ok(StopReason::ToolUse),
            _ => Ok(StopReason::Stop),
        }
    }
}
