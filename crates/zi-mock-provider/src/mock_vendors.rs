//! The mock server's encoders for the non-OpenAI-chat vendors: the Anthropic Messages event
//! stream, the OpenAI Responses event stream and Google's `streamGenerateContent?alt=sse`.
//!
//! Each encoder turns one neutral [`Script`] into the SSE events that vendor documents, so one
//! scripted [`crate::mock_llm::Step`] can be served in any of the four formats depending on the
//! path the client posted to.

use serde_json::{Value, json};

use crate::mock_llm::{MockToolCall, MockUsage};

/// Which wire format a request path asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Vendor {
    /// `…/chat/completions`
    OpenAiCompletions,
    /// `…/messages`
    Anthropic,
    /// `…/responses`
    OpenAiResponses,
    /// `…/models/<model>:streamGenerateContent`
    Google,
}

impl Vendor {
    /// The vendor whose streaming endpoint `path` is, if any.
    pub fn from_path(path: &str) -> Option<Vendor> {
        if path.ends_with("/chat/completions") {
            Some(Vendor::OpenAiCompletions)
        } else if path.ends_with("/messages") {
            Some(Vendor::Anthropic)
        } else if path.ends_with("/responses") {
            Some(Vendor::OpenAiResponses)
        } else if path.contains("/models/") && path.ends_with(":streamGenerateContent") {
            Some(Vendor::Google)
        } else {
            None
        }
    }

    /// The vendor's JSON error body for an HTTP status.
    pub fn error_body(self, status: u16, message: &str) -> Value {
        match self {
            Vendor::Anthropic => {
                let kind = match status {
                    400 => "invalid_request_error",
                    401 => "authentication_error",
                    403 => "permission_error",
                    404 => "not_found_error",
                    413 => "request_too_large",
                    429 => "rate_limit_error",
                    529 => "overloaded_error",
                    _ => "api_error",
                };
                json!({"type": "error", "error": {"type": kind, "message": message}})
            }
            Vendor::Google => {
                let state = match status {
                    400 => "INVALID_ARGUMENT",
                    401 => "UNAUTHENTICATED",
                    403 => "PERMISSION_DENIED",
                    404 => "NOT_FOUND",
                    429 => "RESOURCE_EXHAUSTED",
                    503 => "UNAVAILABLE",
                    _ => "INTERNAL",
                };
                json!({"error": {"code": status, "message": message, "status": state}})
            }
            Vendor::OpenAiCompletions | Vendor::OpenAiResponses => {
                let (kind, code) = match status {
                    429 => ("requests", json!("rate_limit_exceeded")),
                    400..=499 => ("invalid_request_error", Value::Null),
                    _ => ("server_error", Value::Null),
                };
                json!({"error": {"message": message, "type": kind, "param": null, "code": code}})
            }
        }
    }
}

/// A reply in neutral form.
#[derive(Debug, Clone, Default)]
pub struct Script {
    /// Reasoning deltas.
    pub thinking: Vec<String>,
    /// Text deltas.
    pub text: Vec<String>,
    /// Tool calls, after the text.
    pub tool_calls: Vec<MockToolCall>,
    /// OpenAI-style finish reason (`stop`, `tool_calls`, `length`); `None` ends the body early.
    pub finish: Option<String>,
    /// The usage to report, if any.
    pub usage: Option<MockUsage>,
    /// An error event after the content.
    pub error: Option<String>,
}

/// Signature the mock attaches to thinking, as the vendors sign their reasoning.
pub const MOCK_SIGNATURE: &str = "mock-signature";

/// One SSE event with an `event:` name.
fn named(name: &str, data: &Value) -> String {
    format!("event: {name}\ndata: {data}\n\n")
}

fn data(data: &Value) -> String {
    format!("data: {data}\n\n")
}

fn usage_of(script: &Script, output: u64) -> MockUsage {
    script.usage.unwrap_or(MockUsage {
        prompt_tokens: 10,
        completion_tokens: output,
        cached_tokens: 0,
    })
}

/// Encodes `script` for `vendor` (not for OpenAI chat completions, which has its own encoder).
pub fn encode(vendor: Vendor, script: &Script, number: u64, model: &str) -> String {
    match vendor {
        Vendor::Anthropic => anthropic(script, number, model),
        Vendor::OpenAiResponses => responses(script, number, model),
        Vendor::Google => google(script, number, model),
        Vendor::OpenAiCompletions => String::new(),
    }
}

fn anthropic(script: &Script, number: u64, model: &str) -> String {
    let usage = usage_of(script, (script.text.len() + script.thinking.len()) as u64);
    let mut out = named(
        "message_start",
        &json!({"type": "message_start", "message": {
            "id": format!("msg_mock_{number}"), "type": "message", "role": "assistant",
            "content": [], "model": model, "stop_reason": null, "stop_sequence": null,
            "usage": {"input_tokens": usage.prompt_tokens.saturating_sub(usage.cached_tokens),
                      "cache_creation_input_tokens": 0,
                      "cache_read_input_tokens": usage.cached_tokens, "output_tokens": 1}}}),
    );
    out.push_str(&named("ping", &json!({"type": "ping"})));
    let mut index = 0;
    if !script.thinking.is_empty() {
        let deltas = script
            .thinking
            .iter()
            .map(|delta| json!({"type": "thinking_delta", "thinking": delta}))
            .chain([json!({"type": "signature_delta", "signature": MOCK_SIGNATURE})]);
        let block = json!({"type": "thinking", "thinking": "", "signature": ""});
        anthropic_block(&mut out, index, block, deltas, true);
        index += 1;
    }
    if !script.text.is_empty() {
        let deltas = script
            .text
            .iter()
            .map(|delta| json!({"type": "text_delta", "text": delta}));
        let complete = script.error.is_none() && script.finish.is_some();
        let block = json!({"type": "text", "text": ""});
        anthropic_block(&mut out, index, block, deltas, complete);
        index += 1;
    }
    if let Some(message) = &script.error {
        out.push_str(&named(
            "error",
            &json!({"type": "error",
            "error": {"type": "overloaded_error", "message": message}}),
        ));
        return out;
    }
    let Some(finish) = &script.finish else {
        return out;
    };
    for call in &script.tool_calls {
        let deltas = call
            .args_chunks
            .iter()
            .map(|fragment| json!({"type": "input_json_delta", "partial_json": fragment}));
        let block = json!({"type": "tool_use", "id": call.id, "name": call.name, "input": {}});
        anthropic_block(&mut out, index, block, deltas, true);
        index += 1;
    }
    let stop = match finish.as_str() {
        "stop" => "end_turn",
        "tool_calls" => "tool_use",
        "length" => "max_tokens",
        other => other,
    };
    out.push_str(&named(
        "message_delta",
        &json!({"type": "message_delta",
        "delta": {"stop_reason": stop, "stop_sequence": null},
        "usage": {"output_tokens": usage.completion_tokens}}),
    ));
    out.push_str(&named("message_stop", &json!({"type": "message_stop"})));
    out
}

/// One Anthropic content block: its start, its deltas and (unless cut off) its stop.
fn anthropic_block(
    out: &mut String,
    index: usize,
    content_block: Value,
    deltas: impl Iterator<Item = Value>,
    stop: bool,
) {
    out.push_str(&named(
        "content_block_start",
        &json!({"type": "content_block_start", "index": index, "content_block": content_block}),
    ));
    for delta in deltas {
        out.push_str(&named(
            "content_block_delta",
            &json!({"type": "content_block_delta", "index": index, "delta": delta}),
        ));
    }
    if stop {
        out.push_str(&named(
            "content_block_stop",
            &json!({"type": "content_block_stop", "index": index}),
        ));
    }
}

fn responses(script: &Script, number: u64, model: &str) -> String {
    let mut stream = ResponsesStream {
        id: format!("resp_mock_{number}"),
        model,
        seq: 0,
        out: String::new(),
        output: Vec::new(),
        index: 0,
    };
    let created = json!({"response": stream.response("in_progress", &json!([]), None)});
    stream.event("response.created", created.clone());
    stream.event("response.in_progress", created);
    if !script.thinking.is_empty() {
        stream.reasoning_item(&script.thinking, number);
    }
    if !script.text.is_empty() {
        let complete = script.error.is_none() && script.finish.is_some();
        stream.message_item(&script.text, number, complete);
    }
    if let Some(message) = &script.error {
        stream.event(
            "error",
            json!({"code": "server_error", "message": message, "param": null}),
        );
        return stream.out;
    }
    let Some(finish) = &script.finish else {
        return stream.out;
    };
    for call in &script.tool_calls {
        stream.function_call_item(call);
    }
    let usage = usage_of(script, (script.text.len() + script.thinking.len()) as u64);
    let usage = json!({"input_tokens": usage.prompt_tokens,
        "input_tokens_details": {"cached_tokens": usage.cached_tokens},
        "output_tokens": usage.completion_tokens,
        "output_tokens_details": {"reasoning_tokens": script.thinking.len()},
        "total_tokens": usage.prompt_tokens + usage.completion_tokens});
    let output = Value::Array(std::mem::take(&mut stream.output));
    if finish == "length" {
        let mut r = stream.response("incomplete", &output, Some(usage));
        r["incomplete_details"] = json!({"reason": "max_output_tokens"});
        stream.event("response.incomplete", json!({"response": r}));
    } else {
        let r = stream.response("completed", &output, Some(usage));
        stream.event("response.completed", json!({"response": r}));
    }
    stream.out
}

/// The OpenAI Responses event stream being written: numbered events, output items in order.
struct ResponsesStream<'a> {
    id: String,
    model: &'a str,
    seq: u64,
    out: String,
    /// The finished output items, for the final `response` object.
    output: Vec<Value>,
    /// The next item's `output_index`.
    index: usize,
}

impl ResponsesStream<'_> {
    fn event(&mut self, name: &str, mut payload: Value) {
        payload["type"] = json!(name);
        payload["sequence_number"] = json!(self.seq);
        self.seq += 1;
        self.out.push_str(&named(name, &payload));
    }

    fn response(&self, status: &str, output: &Value, usage: Option<Value>) -> Value {
        let mut r = json!({"id": self.id, "object": "response", "created_at": 1, "status": status,
            "model": self.model, "output": output});
        if let Some(usage) = usage {
            r["usage"] = usage;
        }
        r
    }

    fn reasoning_item(&mut self, thinking: &[String], number: u64) {
        let index = self.index;
        let item_id = format!("rs_mock_{number}");
        self.event(
            "response.output_item.added",
            json!({"output_index": index,
            "item": {"id": item_id, "type": "reasoning", "summary": []}}),
        );
        self.event("response.reasoning_summary_part.added", json!({"item_id": item_id,
            "output_index": index, "summary_index": 0, "part": {"type": "summary_text", "text": ""}}));
        for delta in thinking {
            self.event(
                "response.reasoning_summary_text.delta",
                json!({"item_id": item_id,
                "output_index": index, "summary_index": 0, "delta": delta}),
            );
        }
        let all = thinking.concat();
        self.event(
            "response.reasoning_summary_text.done",
            json!({"item_id": item_id,
            "output_index": index, "summary_index": 0, "text": all}),
        );
        self.event("response.reasoning_summary_part.done", json!({"item_id": item_id,
            "output_index": index, "summary_index": 0, "part": {"type": "summary_text", "text": all}}));
        let item = json!({"id": item_id, "type": "reasoning",
            "summary": [{"type": "summary_text", "text": all}], "encrypted_content": MOCK_SIGNATURE});
        self.event(
            "response.output_item.done",
            json!({"output_index": index, "item": item}),
        );
        self.output.push(item);
        self.index += 1;
    }

    /// A message item; `complete` is false when the script cuts the body off inside it.
    fn message_item(&mut self, text: &[String], number: u64, complete: bool) {
        let index = self.index;
        let item_id = format!("msg_mock_{number}");
        self.event("response.output_item.added", json!({"output_index": index,
            "item": {"id": item_id, "type": "message", "status": "in_progress", "role": "assistant", "content": []}}));
        self.event(
            "response.content_part.added",
            json!({"item_id": item_id, "output_index": index,
            "content_index": 0, "part": {"type": "output_text", "text": "", "annotations": []}}),
        );
        for delta in text {
            self.event(
                "response.output_text.delta",
                json!({"item_id": item_id,
                "output_index": index, "content_index": 0, "delta": delta}),
            );
        }
        if complete {
            let all = text.concat();
            self.event(
                "response.output_text.done",
                json!({"item_id": item_id,
                "output_index": index, "content_index": 0, "text": all}),
            );
            let part = json!({"type": "output_text", "text": all, "annotations": []});
            self.event(
                "response.content_part.done",
                json!({"item_id": item_id,
                "output_index": index, "content_index": 0, "part": part}),
            );
            let item = json!({"id": item_id, "type": "message", "status": "completed",
                "role": "assistant", "content": [part]});
            self.event(
                "response.output_item.done",
                json!({"output_index": index, "item": item}),
            );
            self.output.push(item);
        }
        self.index += 1;
    }

    fn function_call_item(&mut self, call: &MockToolCall) {
        let index = self.index;
        let item_id = format!("fc_{}", call.id);
        self.event(
            "response.output_item.added",
            json!({"output_index": index,
            "item": {"id": item_id, "type": "function_call", "status": "in_progress",
                     "arguments": "", "call_id": call.id, "name": call.name}}),
        );
        for fragment in &call.args_chunks {
            self.event(
                "response.function_call_arguments.delta",
                json!({"item_id": item_id,
                "output_index": index, "delta": fragment}),
            );
        }
        let arguments = call.args_chunks.concat();
        self.event(
            "response.function_call_arguments.done",
            json!({"item_id": item_id,
            "output_index": index, "arguments": arguments}),
        );
        let item = json!({"id": item_id, "type": "function_call", "status": "completed",
            "arguments": arguments, "call_id": call.id, "name": call.name});
        self.event(
            "response.output_item.done",
            json!({"output_index": index, "item": item}),
        );
        self.output.push(item);
        self.index += 1;
    }
}

fn google(script: &Script, number: u64, model: &str) -> String {
    let chunk = |parts: Value, finish: Option<&str>, usage: Option<Value>| {
        let mut candidate = json!({"content": {"parts": parts, "role": "model"}, "index": 0});
        if let Some(reason) = finish {
            candidate["finishReason"] = json!(reason);
        }
        let mut c = json!({"candidates": [candidate], "modelVersion": model,
            "responseId": format!("google-mock-{number}")});
        if let Some(usage) = usage {
            c["usageMetadata"] = usage;
        }
        data(&c)
    };
    let mut out = String::new();
    let last_thought = script.thinking.len().saturating_sub(1);
    for (i, delta) in script.thinking.iter().enumerate() {
        let mut part = json!({"text": delta, "thought": true});
        if i == last_thought {
            part["thoughtSignature"] = json!(MOCK_SIGNATURE);
        }
        out.push_str(&chunk(json!([part]), None, None));
    }
    for delta in &script.text {
        out.push_str(&chunk(json!([{"text": delta}]), None, None));
    }
    if let Some(message) = &script.error {
        out.push_str(&data(
            &json!({"error": {"code": 503, "message": message, "status": "UNAVAILABLE"}}),
        ));
        return out;
    }
    let Some(finish) = &script.finish else {
        return out;
    };
    let calls: Vec<Value> = script
        .tool_calls
        .iter()
        .map(|call| {
            let args: Value = serde_json::from_str(&call.args_chunks.concat()).unwrap_or(json!({}));
            json!({"functionCall": {"name": call.name, "args": args}})
        })
        .collect();
    let usage = usage_of(script, (script.text.len() + script.thinking.len()) as u64);
    let usage = json!({"promptTokenCount": usage.prompt_tokens,
        "candidatesTokenCount": usage.completion_tokens,
        "cachedContentTokenCount": usage.cached_tokens,
        "thoughtsTokenCount": script.thinking.len(),
        "totalTokenCount": usage.prompt_tokens + usage.completion_tokens + script.thinking.len() as u64});
    let reason = match finish.as_str() {
        "length" => "MAX_TOKENS",
        "stop" | "tool_calls" => "STOP",
        other => other,
    };
    out.push_str(&chunk(Value::Array(calls), Some(reason), Some(usage)));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_select_the_vendor() {
        assert_eq!(Vendor::from_path("/v1/messages"), Some(Vendor::Anthropic));
        assert_eq!(
            Vendor::from_path("/v1beta/models/gemini-2.5-flash:streamGenerateContent"),
            Some(Vendor::Google)
        );
        assert_eq!(
            Vendor::from_path("/v1/responses"),
            Some(Vendor::OpenAiResponses)
        );
        assert_eq!(Vendor::from_path("/v1/models"), None);
    }
}
