//! What a tool call returns, and the one convention of its `details` (docs/tools.md):
//! `details.outcome` is `"success"` or `"error"`, a failure adds the `code` that says why, and
//! a result whose `outcome` is `"error"` is an error whatever else it says.

use serde_json::{Map, Value};
use zi_protocol::event::ToolResult;
use zi_protocol::message::ContentBlock;

/// The key of a result's outcome in its `details`.
pub(crate) const OUTCOME: &str = "outcome";

/// How a call ended, as `details.outcome` says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// `"success"`.
    Success,
    /// `"error"`: the result is an error result.
    Error,
}

impl Outcome {
    /// The wire word.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Success => "success",
            Outcome::Error => "error",
        }
    }

    /// `Error` for a failed call, else `Success`.
    pub fn of(failed: bool) -> Outcome {
        if failed {
            Outcome::Error
        } else {
            Outcome::Success
        }
    }
}

impl From<Outcome> for Value {
    fn from(outcome: Outcome) -> Value {
        Value::from(outcome.as_str())
    }
}

/// What a tool returns: model-visible content, client-facing details, and whether it failed.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolOutput {
    /// What the model sees (text blocks, images).
    pub content: Vec<ContentBlock>,
    /// What clients see beside it (`tool_execution_end`, the journal); never sent to the model.
    pub details: Option<Value>,
    /// An error result: the model is told the call failed.
    pub is_error: bool,
}

impl ToolOutput {
    /// A successful result of plain text, without details.
    pub fn text(text: impl Into<String>) -> Self {
        ToolOutput {
            content: vec![ContentBlock::text(text)],
            details: None,
            is_error: false,
        }
    }

    /// A failed result of plain text, without details (no `code`).
    pub fn error(text: impl Into<String>) -> Self {
        ToolOutput {
            is_error: true,
            ..ToolOutput::text(text)
        }
    }

    /// A result whose details are `{"outcome": …}` followed by the fields of `fields` (an
    /// object; anything else adds nothing); an `Error` outcome makes it an error result.
    pub(crate) fn with_outcome(outcome: Outcome, text: impl Into<String>, fields: Value) -> Self {
        let mut details = Map::new();
        details.insert(OUTCOME.into(), outcome.into());
        if let Value::Object(fields) = fields {
            details.extend(fields);
        }
        ToolOutput {
            content: vec![ContentBlock::text(text)],
            details: Some(Value::Object(details)),
            is_error: outcome == Outcome::Error,
        }
    }

    /// A successful result: details `{"outcome":"success", …fields}`.
    pub fn success(text: impl Into<String>, fields: Value) -> Self {
        ToolOutput::with_outcome(Outcome::Success, text, fields)
    }

    /// A failed result with its error code: details `{"outcome":"error","code":code}`.
    pub fn failure(code: &str, text: impl Into<String>) -> Self {
        ToolOutput::failure_with(code, text, Value::Null)
    }

    /// A failed result whose details add `fields` (an object) after the outcome and code.
    pub fn failure_with(code: &str, text: impl Into<String>, fields: Value) -> Self {
        let mut details = Map::new();
        details.insert("code".into(), Value::from(code));
        if let Value::Object(fields) = fields {
            details.extend(fields);
        }
        ToolOutput::with_outcome(Outcome::Error, text, Value::Object(details))
    }

    /// The outcome its details state, if they state one.
    pub fn outcome(&self) -> Option<Outcome> {
        match self.details.as_ref()?.get(OUTCOME)?.as_str()? {
            "success" => Some(Outcome::Success),
            "error" => Some(Outcome::Error),
            _ => None,
        }
    }

    /// Marks the result as an error when its details say `outcome: "error"` (whatever
    /// `is_error` the tool set), so the convention holds for every tool.
    pub(crate) fn settle_outcome(&mut self) {
        if self.outcome() == Some(Outcome::Error) {
            self.is_error = true;
        }
    }

    /// The result as events and the journal carry it.
    pub(crate) fn to_result(&self) -> ToolResult {
        ToolResult {
            content: self.content.clone(),
            details: self.details.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn details(output: &ToolOutput) -> String {
        serde_json::to_string(&output.details).unwrap_or_default()
    }

    #[test]
    fn the_outcome_comes_first_then_the_code_then_the_fields() {
        let ok = ToolOutput::success("done", json!({"path": "/a", "bytes": 3}));
        assert_eq!(
            details(&ok),
            r#"{"outcome":"success","path":"/a","bytes":3}"#
        );
        assert!(!ok.is_error);
        let failed = ToolOutput::failure_with("too_large", "no", json!({"limit": 8}));
        assert_eq!(
            details(&failed),
            r#"{"outcome":"error","code":"too_large","limit":8}"#
        );
        assert!(failed.is_error);
        assert_eq!(
            details(&ToolOutput::failure("not_found", "gone")),
            r#"{"outcome":"error","code":"not_found"}"#
        );
    }

    #[test]
    fn details_that_say_error_make_an_error_result() {
        let mut output = ToolOutput::text("looks fine");
        output.details = Some(json!({"type": "code_mode", "outcome": "error"}));
        output.settle_outcome();
        assert!(output.is_error);
        let mut plain = ToolOutput::text("fine");
        plain.settle_outcome();
        assert!(!plain.is_error);
    }
}
