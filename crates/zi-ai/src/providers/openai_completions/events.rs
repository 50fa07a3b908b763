//! Decoding the response chunks and assembling the message from them.

use serde::Deserialize;
use serde_json::Value;
use std::borrow::Cow;
use zi_protocol::message::{StopReason, Usage};

use crate::model::Model;
use crate::providers::common::{
    Assembler, Halt, PREMATURE_END_MESSAGE, SseHandler, TextKind, failure,
};
use crate::stream::apply_cost;

impl SseHandler for StreamState {
    async fn on_data(&mut self, data: &str, out: &mut Assembler) -> Result<bool, Halt> {
        if data == "[DONE]" {
            return Ok(true);
        }
        match serde_json::from_str::<Chunk<'_>>(data) {
            Ok(chunk) => self.apply(chunk, out).await?,
            Err(error) => {
                tracing::debug!("ignoring an undecodable chat-completions chunk: {error}")
            }
        }
        Ok(false)
    }
}

// ---------------------------------------------------------------------------------------------
// Response chunks

/// One `data:` payload of the stream. Unknown fields (`object`, `timings`, …) are skipped.
#[derive(Deserialize)]
struct Chunk<'a> {
    #[serde(borrow, default)]
    id: Option<Borrowed<'a>>,
    #[serde(borrow, default)]
    choices: Option<Vec<Choice<'a>>>,
    #[serde(default)]
    usage: Option<ChunkUsage>,
    #[serde(default)]
    error: Option<Value>,
}

/// A string that borrows from the chunk text unless it had escapes.
#[derive(Deserialize)]
struct Borrowed<'a>(#[serde(borrow)] Cow<'a, str>);

#[derive(Deserialize)]
struct Choice<'a> {
    #[serde(borrow, default)]
    delta: Option<Delta<'a>>,
    #[serde(borrow, default)]
    finish_reason: Option<Borrowed<'a>>,
}

#[derive(Deserialize)]
struct Delta<'a> {
    // Deltas become owned event strings anyway, so decoding straight into `String` costs one
    // allocation either way.
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    reasoning_content: Option<String>,
    /// vLLM and OpenRouter name the reasoning text `reasoning`.
    #[serde(default)]
    reasoning: Option<String>,
    #[serde(borrow, default)]
    tool_calls: Option<Vec<ToolCallChunk<'a>>>,
}

#[derive(Deserialize)]
struct ToolCallChunk<'a> {
    #[serde(default)]
    index: Option<usize>,
    #[serde(borrow, default)]
    id: Option<Borrowed<'a>>,
    #[serde(borrow, default)]
    function: Option<FunctionChunk<'a>>,
}

#[derive(Deserialize)]
struct FunctionChunk<'a> {
    #[serde(borrow, default)]
    name: Option<Borrowed<'a>>,
    #[serde(default)]
    arguments: Option<String>,
}

#[derive(Deserialize, Default)]
struct ChunkUsage {
    #[serde(default)]
    prompt_tokens: u64,
    #[serde(default)]
    completion_tokens: u64,
    #[serde(default)]
    total_tokens: Option<u64>,
    #[serde(default)]
    prompt_tokens_details: Option<PromptTokensDetails>,
}

#[derive(Deserialize, Default)]
struct PromptTokensDetails {
    #[serde(default)]
    cached_tokens: Option<u64>,
}

/// A tool call of this reply: the provider's `index` when it sends one, and the call's block.
struct CallKey {
    key: Option<usize>,
    content_index: usize,
}

/// What the body has told so far beyond the content blocks, which the assembler builds.
#[derive(Default)]
pub(super) struct StreamState {
    tool_calls: Vec<CallKey>,
    finish_reason: Option<String>,
    usage: Option<ChunkUsage>,
}

impl StreamState {
    async fn apply(&mut self, chunk: Chunk<'_>, out: &mut Assembler) -> Result<(), Halt> {
        if let Some(error) = chunk.error.filter(|error| !error.is_null()) {
            return Err(failure(stream_error_message(&error)));
        }
        // Set at once so that a failed message still names the response it came from.
        if !out.has_response_id()
            && let Some(Borrowed(id)) = chunk.id.filter(|id| !id.0.is_empty())
        {
            out.set_response_id(id.into_owned());
        }
        if let Some(usage) = chunk.usage {
            self.usage = Some(usage);
        }
        for choice in chunk.choices.into_iter().flatten() {
            if let Some(delta) = choice.delta {
                // Some servers send the same reasoning under both names; take one.
                if let Some(thinking) = delta
                    .reasoning_content
                    .or(delta.reasoning)
                    .filter(|t| !t.is_empty())
                {
                    out.extend(TextKind::Thinking, thinking).await?;
                }
                if let Some(text) = delta.content.filter(|t| !t.is_empty()) {
                    out.extend(TextKind::Text, text).await?;
                }
                for call in delta.tool_calls.into_iter().flatten() {
                    self.tool_call_delta(call, out).await?;
                }
            }
            if let Some(Borrowed(reason)) =
                choice.finish_reason.filter(|reason| !reason.0.is_empty())
            {
                self.finish_reason = Some(reason.into_owned());
            }
        }
        Ok(())
    }

    async fn tool_call_delta(
        &mut self,
        chunk: ToolCallChunk<'_>,
        out: &mut Assembler,
    ) -> Result<(), Halt> {
        let id = chunk.id.map(|Borrowed(id)| id).filter(|id| !id.is_empty());
        let (name, arguments) = match chunk.function {
            Some(function) => (function.name.map(|Borrowed(name)| name), function.arguments),
            None => (None, None),
        };
        // Calls are keyed by `index`; servers that omit it send each call whole or continue the
        // last one.
        let existing = match (chunk.index, &id) {
            (Some(index), _) => self.tool_calls.iter().find(|call| call.key == Some(index)),
            (None, Some(id)) => self
                .tool_calls
                .iter()
                .find(|call| out.open_tool_call_id(call.content_index) == Some(id.as_ref())),
            (None, None) => self.tool_calls.last(),
        };
        let content_index = match existing {
            Some(call) => {
                let content_index = call.content_index;
                if let Some(name) = name {
                    out.name_tool_call(content_index, &name);
                }
                content_index
            }
            None => {
                let next_index = out.next_index();
                let id = id.map_or_else(|| format!("call_{next_index}"), Cow::into_owned);
                let name = name.map(Cow::into_owned).unwrap_or_default();
                let content_index = out.start_tool_call(id, name).await?;
                self.tool_calls.push(CallKey {
                    key: chunk.index,
                    content_index,
                });
                content_index
            }
        };
        if let Some(fragment) = arguments.filter(|fragment| !fragment.is_empty()) {
            out.delta(content_index, fragment).await?;
        }
        Ok(())
    }

    /// Closes every block, records usage, and maps the finish reason.
    pub(super) async fn complete(
        mut self,
        model: &Model,
        out: &mut Assembler,
    ) -> Result<StopReason, Halt> {
        let Some(finish_reason) = self.finish_reason.take() else {
            return Err(failure(PREMATURE_END_MESSAGE));
        };
        out.close().await?;
        let has_tool_calls = !self.tool_calls.is_empty();
        out.end_tool_calls().await?;
        if let Some(usage) = self.usage.take() {
            let cached = usage
                .prompt_tokens_details
                .and_then(|details| details.cached_tokens)
                .unwrap_or(0);
            let input = usage.prompt_tokens.saturating_sub(cached);
            let mut total = Usage {
                input,
                output: usage.completion_tokens,
                cache_read: cached,
                cache_write: 0,
                total_tokens: usage
                    .total_tokens
                    .unwrap_or(input + cached + usage.completion_tokens),
                cost: Default::default(),
            };
            apply_cost(model, &mut total);
            out.set_usage(total);
        }
        match finish_reason.as_str() {
            // Some servers report "stop" even when the reply is a tool call.
            "stop" if has_tool_calls => Ok(StopReason::ToolUse),
            "stop" => Ok(StopReason::Stop),
            "length" => Ok(StopReason::Length),
            "tool_calls" | "function_call" => Ok(StopReason::ToolUse),
            "content_filter" => Err(failure(crate::classify::refusal_message(
                "finish_reason content_filter",
            ))),
            other => Err(failure(format!(
                "Provider stopped with finish_reason {other}"
            ))),
        }
    }
}

fn stream_error_message(error: &Value) -> String {
    error
        .get("message")
        .and_then(Value::as_str)
        .or_else(|| error.as_str())
        .map_or_else(|| format!("Provider error: {error}"), str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::test_model;
    use crate::stream::EventSink;
    use zi_protocol::event::AssistantMessageEvent;

    #[tokio::test]
    async fn usage_may_come_first_and_tool_calls_may_lack_an_index() {
        let model = test_model();
        let (sender, mut receiver) = tokio::sync::mpsc::channel(64);
        let mut out = Assembler::new(EventSink::new(sender, &model));
        let mut state = StreamState::default();
        let chunks = [
            r#"{"id":"r1","choices":[],"usage":{"prompt_tokens":10,"completion_tokens":2,"prompt_tokens_details":null}}"#,
            r#"{"id":"r2","choices":[{"index":0,"delta":{"tool_calls":[{"id":"a","type":"function","function":{"name":"read","arguments":"{\"p\":1}"}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"id":"b","type":"function","function":{"name":"bash","arguments":""}}]},"finish_reason":"stop"}]}"#,
        ];
        for text in chunks {
            let chunk = serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}"));
            assert!(state.apply(chunk, &mut out).await.is_ok());
        }
        let reason = state.complete(&model, &mut out).await;
        assert!(
            matches!(reason, Ok(StopReason::ToolUse)),
            "stop with tool calls is tool use"
        );
        out.finish(StopReason::ToolUse).await;
        let mut partial = crate::stream::empty_assistant(&model);
        let mut starts = 0;
        while let Some(update) = receiver.recv().await {
            let event = update.apply(&mut partial);
            starts += usize::from(matches!(
                event,
                Some(AssistantMessageEvent::ToolCallStart { .. })
            ));
        }
        assert_eq!(starts, 2);
        assert_eq!(partial.response_id.as_deref(), Some("r1"));
        assert_eq!(
            (
                partial.usage.input,
                partial.usage.output,
                partial.usage.total_tokens
            ),
            (10, 2, 12)
        );
        let calls: Vec<(&str, &Value)> = partial
            .tool_calls()
            .map(|c| (c.id.as_str(), &c.arguments))
            .collect();
        assert_eq!(
            calls,
            vec![
                ("a", &serde_json::json!({"p": 1})),
                ("b", &serde_json::json!({}))
            ]
        );
    }

    #[test]
    fn chunks_decode_llama_cpp_quirks() {
        let text = r#"{"choices":[{"finish_reason":null,"index":0,"delta":{"role":"assistant","content":null}}],"created":1,"id":"chatcmpl-x","model":"m","object":"chat.completion.chunk","timings":{"prompt_n":3}}"#;
        let chunk: Chunk<'_> = serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}"));
        assert!(matches!(
            chunk.id,
            Some(Borrowed(Cow::Borrowed("chatcmpl-x")))
        ));
        let usage = r#"{"choices":[],"usage":{"completion_tokens":5,"prompt_tokens":9,"total_tokens":14},"id":"x"}"#;
        let chunk: Chunk<'_> = serde_json::from_str(usage).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(chunk.usage.map(|u| u.completion_tokens), Some(5));
    }
}
