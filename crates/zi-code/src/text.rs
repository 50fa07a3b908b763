//! What the model sees of a cell (docs/code-mode.md#what-the-model-sees):
//!
//! ```text
//! [calls: 3 ok, 1 error]
//! [logs]
//! …
//! [result]
//! {"files":3}
//! ```
//!
//! or `[error] ZiToolError from zi.read: …` with the stack, head-truncated like every tool
//! result (2,000 lines / 50 KiB).

use serde_json::Value;

use crate::protocol::CellError;
use crate::trace::Trace;

const MAX_LINES: usize = 2000;
const MAX_BYTES: usize = 50 * 1024;

pub fn model_text(trace: &Trace, result: &Result<Option<Value>, CellError>) -> String {
    let mut text = String::new();
    let (ok, failed) = trace.counts();
    if !trace.calls.is_empty() {
        text.push_str(&format!("[calls: {ok} ok, {failed} error]\n"));
    }
    if !trace.logs.is_empty() {
        text.push_str("[logs]\n");
        for line in &trace.logs {
            text.push_str(line);
            text.push('\n');
        }
        if trace.logs_truncated {
            text.push_str("[logs truncated at 64 KiB]\n");
        }
    }
    match result {
        Ok(value) => {
            text.push_str("[result]\n");
            match value {
                None => text.push_str("undefined"),
                Some(Value::String(s)) => text.push_str(s),
                Some(other) => text.push_str(&other.to_string()),
            }
        }
        Err(error) => text.push_str(&error_line(error)),
    }
    truncate_head(text)
}

fn error_line(error: &CellError) -> String {
    let name = error.name.as_deref().unwrap_or(match error.kind.as_str() {
        "timeout" => "TimeoutError",
        "interrupted" => "Interrupted",
        "memory" => "MemoryError",
        "call_limit" => "CallLimitError",
        "unawaited" => "UnawaitedCallError",
        "sandbox" => "SandboxError",
        _ => "Error",
    });
    let mut line = match &error.tool_name {
        Some(tool) => format!("[error] {name} from zi.{tool}: {}", error.message),
        None => format!("[error] {name}: {}", error.message),
    };
    if let Some(stack) = error.stack.as_deref().filter(|s| !s.trim().is_empty()) {
        line.push('\n');
        line.push_str(stack.trim_end());
    }
    line
}

/// The first 2,000 lines / 50 KiB, with a notice when cut.
fn truncate_head(text: String) -> String {
    if text.len() <= MAX_BYTES && text.lines().count() <= MAX_LINES {
        return text;
    }
    let mut kept = String::new();
    for (index, line) in text.lines().enumerate() {
        if index >= MAX_LINES || kept.len() + line.len() + 1 > MAX_BYTES {
            break;
        }
        kept.push_str(line);
        kept.push('\n');
    }
    kept.push_str(&format!(
        "\n[Output truncated: {} bytes in all; return less, or log less]",
        text.len()
    ));
    kept
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn calls_logs_and_result() {
        let mut trace = Trace::default();
        trace.queue_call(1, "read", &json!({"path": "a"}));
        trace.end_call(1, crate::trace::CallState::Ok);
        trace.log("hi".into(), false);
        let text = model_text(&trace, &Ok(Some(json!({"n": 1}))));
        assert_eq!(
            text,
            "[calls: 1 ok, 0 error]\n[logs]\nhi\n[result]\n{\"n\":1}"
        );
        let mut error = CellError::new("exception", "nope: no such file");
        error.name = Some("ZiToolError".into());
        error.tool_name = Some("read".into());
        error.stack = Some("    at <anonymous> (cell.js:2:17)".into());
        let text = model_text(&Trace::default(), &Err(error));
        assert_eq!(
            text,
            "[error] ZiToolError from zi.read: nope: no such file\n    at <anonymous> (cell.js:2:17)"
        );
        let long = model_text(&Trace::default(), &Ok(Some(json!("x\n".repeat(3000)))));
        assert!(long.lines().count() <= MAX_LINES + 2 && long.ends_with("or log less]"));
    }
}
