//! Decoding the response chunks and assembling the message from them.

use serde::Deserialize;
use serde_json::{Value, json};
use zi_protocol::message::{StopReason, Usage};

use crate::model::Model;
use crate::providers::common::{
    Assembler, Halt, MaybeBool, MaybeStr, MaybeU64, PREMATURE_END_MESSAGE, SseHandler, TextKind,
    failure, finish_usage, present,
};

/// One SSE event: a whole `GenerateContentResponse`.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Chunk<'a> {
    #[serde(default)]
    error: Option<Value>,
    #[serde(borrow, default)]
    response_id: MaybeStr<'a>,
    #[serde(default)]
    usage_metadata: Option<UsageMetadata>,
    #[serde(borrow, default)]
    candidates: Option<Vec<Candidate<'a>>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct UsageMetadata {
    #[serde(default)]
    prompt_token_count: MaybeU64,
    #[serde(default)]
    cached_content_token_count: MaybeU64,
    #[serde(default)]
    candidates_token_count: MaybeU64,
    #[serde(default)]
    thoughts_token_count: MaybeU64,
    #[serde(default)]
    total_token_count: MaybeU64,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Candidate<'a> {
    #[serde(borrow, default)]
    content: Option<CandidateContent<'a>>,
    #[serde(borrow, default)]
    finish_reason: MaybeStr<'a>,
}

#[derive(Deserialize)]
struct CandidateContent<'a> {
    #[serde(borrow, default)]
    parts: Option<Vec<ResponsePart<'a>>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ResponsePart<'a> {
    #[serde(borrow, default)]
    text: MaybeStr<'a>,
    #[serde(default)]
    thought: MaybeBool,
    #[serde(borrow, default)]
    thought_signature: MaybeStr<'a>,
    #[serde(borrow, default)]
    function_call: Option<ResponseFunctionCall<'a>>,
}

#[derive(Deserialize)]
struct ResponseFunctionCall<'a> {
    #[serde(borrow, default)]
    id: MaybeStr<'a>,
    #[serde(borrow, default)]
    name: MaybeStr<'a>,
    #[serde(default, deserialize_with = "present")]
    args: Option<Value>,
}

#[derive(Default)]
pub(super) struct StreamState {
    finish_reason: Option<String>,
    usage: Option<Usage>,
}

fn error_text(error: &Value) -> String {
    let message = error
        .get("message")
        .and_then(Value::as_str)
        .unwrap_or("Provider error");
    match error.get("code").and_then(Value::as_u64) {
        Some(code) => format!("{code} {message}"),
        None => message.to_string(),
    }
}

impl SseHandler for StreamState {
    async fn on_data(&mut self, data: &str, out: &mut Assembler) -> Result<bool, Halt> {
        let chunk: Chunk<'_> = match serde_json::from_str(data) {
            Ok(chunk) => chunk,
            Err(error) => {
                tracing::debug!("ignoring an undecodable gemini chunk: {error}");
                return Ok(false);
            }
        };
        if let Some(error) = chunk.error.filter(|e| !e.is_null()) {
            return Err(failure(error_text(&error)));
        }
        if !out.has_response_id()
            && let Some(id) = chunk.response_id.into_owned()
        {
            out.set_response_id(id);
        }
        if let Some(usage) = chunk.usage_metadata {
            let cached = usage.cached_content_token_count.or_zero();
            self.usage = Some(Usage {
                input: usage.prompt_token_count.or_zero().saturating_sub(cached),
                output: usage.candidates_token_count.or_zero()
                    + usage.thoughts_token_count.or_zero(),
                cache_read: cached,
                cache_write: 0,
                total_tokens: usage.total_token_count.or_zero(),
                cost: Default::default(),
            });
        }
        let Some(candidate) = chunk.candidates.and_then(|c| c.into_iter().next()) else {
            return Ok(false);
        };
        let parts = candidate.content.and_then(|content| content.parts);
        for part in parts.into_iter().flatten() {
            part_update(part, out).await?;
        }
        if let Some(reason) = candidate.finish_reason.into_owned() {
            self.finish_reason = Some(reason);
        }
        Ok(false)
    }
}

/// One part: a whole function call, or text or thought text extending the open block.
async fn part_update(part: ResponsePart<'_>, out: &mut Assembler) -> Result<(), Halt> {
    let signature = part.thought_signature.into_owned();
    if let Some(call) = part.function_call {
        let name = call.name.or_empty();
        let number = out.tool_call_count() + 1;
        let id = call
            .id
            .into_owned()
            .unwrap_or_else(|| format!("{name}_{number}"));
        let arguments = call.args.unwrap_or_else(|| json!({}));
        let content_index = out.start_tool_call(id, name).await?;
        out.delta(content_index, arguments.to_string()).await?;
        return out.end_tool_call(content_index, arguments, signature).await;
    }
    let Some(text) = part.text.0 else {
        return Ok(());
    };
    let kind = if part.thought.0 == Some(true) {
        TextKind::Thinking
    } else {
        TextKind::Text
    };
    let content_index = out.extend(kind, text.into_owned()).await?;
    if let Some(signature) = signature {
        out.set_signature(content_index, signature);
    }
    Ok(())
}

impl StreamState {
    pub(super) async fn complete(
        &mut self,
        model: &Model,
        out: &mut Assembler,
    ) -> Result<StopReason, Halt> {
        let Some(reason) = self.finish_reason.take() else {
            return Err(failure(PREMATURE_END_MESSAGE));
        };
        out.close().await?;
        if let Some(usage) = self.usage.take() {
            out.set_usage(finish_usage(model, usage));
        }
        match reason.as_str() {
            "STOP" if out.tool_call_count() > 0 => Ok(StopReason::ToolUse),
            "STOP" => Ok(StopReason::Stop),
            "MAX_TOKENS" => Ok(StopReason::Length),
            "SAFETY" | "RECITATION" | "PROHIBITED_CONTENT" | "BLOCKLIST" | "SPII" => Err(failure(
                crate::classify::refusal_message(&format!("finishReason {reason}")),
            )),
            other => Err(failure(format!(
                "Provider stopped with finishReason {other}"
            ))),
        }
    }
}
