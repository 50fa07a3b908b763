//! What a cell did, as the `code` call's `details` (docs/code-mode.md#evidence):
//! `{type: "code_mode", outcome, calls: [{id, name, arguments, state, durationMs}], logs,
//! logsTruncated, sandbox, durationMs}`. Arguments are bounded (each string at most 256
//! characters, each call's arguments at most 2 KiB); `write` and `edit` keep only the path and
//! sizes, so file contents never land in the details twice.

use std::time::Instant;

use serde_json::{Map, Value, json};

const MAX_ARGUMENT_CHARS: usize = 256;
const MAX_ARGUMENTS_BYTES: usize = 2048;

/// The state of one nested call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallState {
    Queued,
    Running,
    Ok,
    Error,
    Interrupted,
}

impl CallState {
    pub fn as_str(self) -> &'static str {
        match self {
            CallState::Queued => "queued",
            CallState::Running => "running",
            CallState::Ok => "ok",
            CallState::Error => "error",
            CallState::Interrupted => "interrupted",
        }
    }
}

#[derive(Debug, Clone)]
pub struct TracedCall {
    pub id: u64,
    pub name: String,
    pub arguments: Value,
    pub state: CallState,
    started: Option<Instant>,
    pub duration_ms: u64,
}

/// The calls and logs of one cell, in order.
#[derive(Debug, Clone, Default)]
pub struct Trace {
    pub calls: Vec<TracedCall>,
    pub logs: Vec<String>,
    pub logs_truncated: bool,
}

impl Trace {
    pub fn queue_call(&mut self, id: u64, name: &str, input: &Value) {
        self.calls.push(TracedCall {
            id,
            name: name.to_string(),
            arguments: reduce_arguments(name, input),
            state: CallState::Queued,
            started: None,
            duration_ms: 0,
        });
    }

    pub fn start_call(&mut self, id: u64) {
        if let Some(call) = self.call_mut(id) {
            call.state = CallState::Running;
            call.started = Some(Instant::now());
        }
    }

    pub fn end_call(&mut self, id: u64, state: CallState) {
        if let Some(call) = self.call_mut(id) {
            call.state = state;
            call.duration_ms = call.started.map_or(0, |at| at.elapsed().as_millis() as u64);
        }
    }

    /// Every call not finished yet ends as `state` (the cell was interrupted or died).
    pub fn end_unfinished(&mut self, state: CallState) {
        let ids: Vec<u64> = self
            .calls
            .iter()
            .filter(|c| matches!(c.state, CallState::Queued | CallState::Running))
            .map(|c| c.id)
            .collect();
        for id in ids {
            self.end_call(id, state);
        }
    }

    pub fn log(&mut self, text: String, truncated: bool) {
        if !(truncated && text.is_empty()) {
            self.logs.push(text);
        }
        self.logs_truncated |= truncated;
    }

    fn call_mut(&mut self, id: u64) -> Option<&mut TracedCall> {
        self.calls.iter_mut().find(|c| c.id == id)
    }

    /// `(ok, error)` counts of finished calls.
    pub fn counts(&self) -> (usize, usize) {
        let ok = self
            .calls
            .iter()
            .filter(|c| c.state == CallState::Ok)
            .count();
        let failed = self
            .calls
            .iter()
            .filter(|c| matches!(c.state, CallState::Error | CallState::Interrupted))
            .count();
        (ok, failed)
    }

    /// The `details` object (without `sandbox` and `durationMs`, which the tool adds).
    pub fn details(&self, outcome: &str) -> Value {
        let calls: Vec<Value> = self
            .calls
            .iter()
            .map(|c| {
                let duration = match (c.state, c.started) {
                    (CallState::Running, Some(at)) => at.elapsed().as_millis() as u64,
                    _ => c.duration_ms,
                };
                json!({"id": c.id, "name": c.name, "arguments": c.arguments,
                       "state": c.state.as_str(), "durationMs": duration})
            })
            .collect();
        json!({"type": "code_mode", "outcome": outcome, "calls": calls, "logs": self.logs,
               "logsTruncated": self.logs_truncated})
    }
}

/// A call's arguments as the details keep them.
pub fn reduce_arguments(name: &str, input: &Value) -> Value {
    let path = input.get("path").cloned().map(|p| bound_value(&p));
    match name {
        "write" => {
            let bytes = input["content"].as_str().map_or(0, str::len);
            json!({"path": path, "bytes": bytes})
        }
        "edit" => {
            let edits = input["edits"].as_array();
            let bytes: usize = edits
                .into_iter()
                .flatten()
                .map(|e| {
                    e["oldText"].as_str().map_or(0, str::len)
                        + e["newText"].as_str().map_or(0, str::len)
                })
                .sum();
            json!({"path": path, "edits": edits.map_or(0, Vec::len), "bytes": bytes})
        }
        _ => {
            let bounded = bound_value(input);
            if bounded.to_string().len() <= MAX_ARGUMENTS_BYTES {
                bounded
            } else {
                // Keep the keys that fit, in order; say how many were left out.
                let mut kept = Map::new();
                let mut size = 2;
                let mut omitted = 0;
                for (key, value) in bounded.as_object().into_iter().flatten() {
                    let entry = key.len() + value.to_string().len() + 4;
                    if size + entry <= MAX_ARGUMENTS_BYTES - 32 {
                        kept.insert(key.clone(), value.clone());
                        size += entry;
                    } else {
                        omitted += 1;
                    }
                }
                kept.insert("…omitted".into(), json!(omitted));
                Value::Object(kept)
            }
        }
    }
}

/// Strings cut at 256 characters, nesting below 4 levels replaced by a marker.
fn bound_value(value: &Value) -> Value {
    fn walk(value: &Value, depth: usize) -> Value {
        match value {
            Value::String(text) if text.chars().count() > MAX_ARGUMENT_CHARS => {
                let cut: String = text.chars().take(MAX_ARGUMENT_CHARS).collect();
                Value::String(format!("{cut}… [{} bytes]", text.len()))
            }
            Value::Array(_) | Value::Object(_) if depth >= 4 => json!("…"),
            Value::Array(items) => {
                Value::Array(items.iter().take(32).map(|v| walk(v, depth + 1)).collect())
            }
            Value::Object(map) => Value::Object(
                map.iter()
                    .map(|(k, v)| (k.clone(), walk(v, depth + 1)))
                    .collect(),
            ),
            other => other.clone(),
        }
    }
    walk(value, 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_changes_keep_only_paths_and_sizes() {
        let write = reduce_arguments("write", &json!({"path": "a.txt", "content": "hello"}));
        assert_eq!(write, json!({"path": "a.txt", "bytes": 5}));
        let edit = reduce_arguments(
            "edit",
            &json!({"path": "b", "edits": [{"oldText": "ab", "newText": "c"}]}),
        );
        assert_eq!(edit, json!({"path": "b", "edits": 1, "bytes": 3}));
    }

    #[test]
    fn other_arguments_are_bounded() {
        let long = "x".repeat(10_000);
        let reduced = reduce_arguments("bash", &json!({"command": long}));
        let command = reduced["command"].as_str().unwrap_or_default();
        assert!(command.starts_with(&"x".repeat(256)) && command.ends_with("[10000 bytes]"));
        let many: Map<String, Value> = (0..100)
            .map(|i| (format!("k{i}"), json!("y".repeat(200))))
            .collect();
        let reduced = reduce_arguments("mcp__a__b", &Value::Object(many));
        assert!(reduced.to_string().len() <= MAX_ARGUMENTS_BYTES);
        assert!(reduced["…omitted"].as_u64().is_some_and(|n| n > 0));
    }

    #[test]
    fn details_follow_the_calls() {
        let mut trace = Trace::default();
        trace.queue_call(1, "read", &json!({"path": "a"}));
        trace.start_call(1);
        trace.end_call(1, CallState::Ok);
        trace.queue_call(2, "bash", &json!({"command": "ls"}));
        trace.end_unfinished(CallState::Interrupted);
        trace.log("hi".into(), false);
        let details = trace.details("interrupted");
        assert_eq!(details["calls"][0]["state"], "ok");
        assert_eq!(details["calls"][1]["state"], "interrupted");
        assert_eq!(details["logs"], json!(["hi"]));
        assert_eq!(trace.counts(), (1, 1));
    }
}
