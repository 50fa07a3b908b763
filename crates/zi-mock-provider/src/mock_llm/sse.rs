//! The chat-completions SSE encoder: pre-encoded events batched into body chunks.

use std::fmt::Write as _;

use axum::body::Bytes;
use serde_json::json;

use super::{MockToolCall, MockUsage};

/// Body bytes gathered before the encoder starts a new body chunk.
pub(super) const BODY_CHUNK_BYTES: usize = 16 * 1024;

pub(super) fn json_string(text: &str) -> String {
    serde_json::to_string(text).unwrap_or_else(|_| "\"\"".to_string())
}

/// Encodes chat-completion chunks as SSE events into body chunks of about [`BODY_CHUNK_BYTES`].
pub(super) struct SseEncoder {
    /// Everything of a chunk up to its delta: `{"id":..,"object":..,"created":..,"model":..,"choices":[{"index":0,"delta":`.
    pub(super) prefix: String,
    /// Everything of a usage chunk up to its usage object.
    pub(super) usage_prefix: String,
    pub(super) buffer: String,
    pub(super) chunks: Vec<Bytes>,
}

impl SseEncoder {
    pub(super) fn new(number: u64, model: &str) -> Self {
        let created = zi_os::clock::now_millis() / 1000;
        let head = format!(
            "{{\"id\":\"chatcmpl-mock-{number}\",\"object\":\"chat.completion.chunk\",\"created\":{created},\"model\":{}",
            json_string(model)
        );
        SseEncoder {
            prefix: format!("{head},\"choices\":[{{\"index\":0,\"delta\":"),
            usage_prefix: format!("{head},\"choices\":[],\"usage\":"),
            buffer: String::with_capacity(BODY_CHUNK_BYTES * 2),
            chunks: Vec::new(),
        }
    }

    /// One `data:` event.
    pub(super) fn data(&mut self, payload: &str) {
        self.buffer.push_str("data: ");
        self.buffer.push_str(payload);
        self.buffer.push_str("\n\n");
        if self.buffer.len() >= BODY_CHUNK_BYTES {
            self.flush();
        }
    }

    /// One chunk with the given delta object and finish reason.
    pub(super) fn delta(&mut self, delta: &str, finish_reason: Option<&str>) {
        self.buffer.push_str("data: ");
        self.buffer.push_str(&self.prefix);
        self.buffer.push_str(delta);
        match finish_reason {
            Some(reason) => {
                let _ = write!(
                    self.buffer,
                    ",\"finish_reason\":{}}}]}}\n\n",
                    json_string(reason)
                );
            }
            None => self
                .buffer
                .push_str(",\"logprobs\":null,\"finish_reason\":null}]}\n\n"),
        }
        if self.buffer.len() >= BODY_CHUNK_BYTES {
            self.flush();
        }
    }

    /// The first chunk, as llama.cpp sends it: the role with a null content.
    pub(super) fn role(&mut self) {
        self.delta("{\"role\":\"assistant\",\"content\":null}", None);
    }

    /// One chunk per content delta; returns how many were sent.
    pub(super) fn contents(&mut self, deltas: &[String]) -> u64 {
        for delta in deltas {
            self.delta(&format!("{{\"content\":{}}}", json_string(delta)), None);
        }
        deltas.len() as u64
    }

    /// The chunks of one tool call; returns how many were sent.
    pub(super) fn tool_call(&mut self, index: usize, call: &MockToolCall) -> u64 {
        let first = call.args_chunks.first().map_or("", String::as_str);
        let head = json!({"tool_calls": [{
            "index": index,
            "id": call.id,
            "type": "function",
            "function": {"name": call.name, "arguments": first},
        }]});
        self.delta(&head.to_string(), None);
        for fragment in call.args_chunks.iter().skip(1) {
            let delta =
                json!({"tool_calls": [{"index": index, "function": {"arguments": fragment}}]});
            self.delta(&delta.to_string(), None);
        }
        call.args_chunks.len().max(1) as u64
    }

    pub(super) fn usage(&mut self, usage: MockUsage) {
        let usage = json!({
            "prompt_tokens": usage.prompt_tokens,
            "completion_tokens": usage.completion_tokens,
            "total_tokens": usage.prompt_tokens + usage.completion_tokens,
            "prompt_tokens_details": {"cached_tokens": usage.cached_tokens},
        });
        let payload = format!("{}{usage}}}", self.usage_prefix);
        self.data(&payload);
    }

    pub(super) fn flush(&mut self) {
        if !self.buffer.is_empty() {
            let text = std::mem::replace(
                &mut self.buffer,
                String::with_capacity(BODY_CHUNK_BYTES * 2),
            );
            self.chunks.push(Bytes::from(text));
        }
    }

    /// `total_bytes` of `x` as content deltas of `delta_bytes` (at least 1) each; returns the
    /// number of deltas.
    pub(super) fn filler(&mut self, total_bytes: usize, delta_bytes: usize) -> u64 {
        let delta_bytes = delta_bytes.max(1);
        let full = "x".repeat(delta_bytes);
        let mut left = total_bytes;
        let mut deltas = 0;
        while left > 0 {
            let size = left.min(delta_bytes);
            self.delta(&format!("{{\"content\":\"{}\"}}", &full[..size]), None);
            left -= size;
            deltas += 1;
        }
        deltas
    }

    pub(super) fn finish(mut self) -> Vec<Bytes> {
        self.flush();
        self.chunks
    }
}
