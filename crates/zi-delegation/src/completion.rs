//! One work cycle's bounded result (docs/delegation.md#completions) and its projection from the
//! child's `session.await_idle` evidence (docs/delegation.md#completions).

use serde_json::{Value, json};
use zi_protocol::message::StopReason;
use zi_rpc_client::CompletionResult;

use crate::limits::{ERROR_MAX_BYTES, clip};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    Completed,
    Failed,
    Cancelled,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Completed => "completed",
            Status::Failed => "failed",
            Status::Cancelled => "cancelled",
        }
    }

    pub fn parse(text: &str) -> Option<Status> {
        match text {
            "completed" | "succeeded" => Some(Status::Completed),
            "failed" => Some(Status::Failed),
            "cancelled" => Some(Status::Cancelled),
            _ => None,
        }
    }
}

/// Why a cycle failed (docs/delegation.md#completions).
pub const FAILURE_CODES: [&str; 10] = [
    "assignment_failed",
    "work_cycle_timeout",
    "interrupt_settlement_timeout",
    "missing_assistant",
    "provider_error",
    "missing_final_answer",
    "incomplete_final_answer",
    "child_killed",
    "child_failed",
    "child_exited",
];

#[derive(Debug, Clone, PartialEq)]
pub struct Completion {
    pub name: String,
    pub work_cycle: u64,
    pub status: Status,
    pub text: String,
    pub original_bytes: u64,
    pub omitted_bytes: u64,
    pub truncated: bool,
    pub duration_ms: u64,
    /// The failure code; only when failed.
    pub reason: Option<&'static str>,
    pub error: Option<String>,
}

impl Completion {
    /// A failure with empty text and zero byte counts (synthesized by the supervisor).
    pub fn failure(
        name: &str,
        work_cycle: u64,
        reason: &'static str,
        error: Option<String>,
        duration_ms: u64,
    ) -> Completion {
        Completion {
            name: name.to_string(),
            work_cycle,
            status: Status::Failed,
            text: String::new(),
            original_bytes: 0,
            omitted_bytes: 0,
            truncated: false,
            duration_ms,
            reason: Some(reason),
            error: error.map(|e| clip(&e, ERROR_MAX_BYTES).to_string()),
        }
    }

    /// The child's idle observation, projected as docs/delegation.md#completions says.
    pub fn from_idle(
        name: &str,
        work_cycle: u64,
        result: &CompletionResult,
        duration_ms: u64,
    ) -> Completion {
        let Some(evidence) = &result.completion else {
            return Completion::failure(name, work_cycle, "missing_assistant", None, duration_ms);
        };
        let (status, reason) = match evidence.stop_reason {
            StopReason::Aborted => (Status::Cancelled, None),
            StopReason::Error => (Status::Failed, Some("provider_error")),
            StopReason::ToolUse => (Status::Failed, Some("missing_final_answer")),
            StopReason::Stop | StopReason::Length => (Status::Completed, None),
        };
        let error = match reason {
            Some("provider_error") => evidence
                .error
                .as_ref()
                .map(|e| clip(e, ERROR_MAX_BYTES).to_string()),
            _ => None,
        };
        Completion {
            name: name.to_string(),
            work_cycle,
            status,
            text: evidence.text.clone(),
            original_bytes: evidence.original_bytes,
            omitted_bytes: evidence.omitted_bytes,
            truncated: evidence.stop_reason == StopReason::Length || evidence.omitted_bytes > 0,
            duration_ms,
            reason,
            error,
        }
    }

    /// The projection in result texts (snake_case, docs/delegation.md#tools).
    pub fn text_projection(&self) -> Value {
        let mut value = json!({
            "work_cycle": self.work_cycle,
            "status": self.status.as_str(),
            "text": self.text,
            "original_bytes": self.original_bytes,
            "omitted_bytes": self.omitted_bytes,
            "truncated": self.truncated,
            "duration_ms": self.duration_ms,
        });
        if let Some(reason) = self.reason {
            value["reason"] = json!(reason);
        }
        if let Some(error) = &self.error {
            value["error"] = json!(error);
        }
        value
    }

    /// The projection in details (camelCase, no `originalBytes`, docs/delegation.md#tools).
    pub fn details_projection(&self) -> Value {
        let mut value = json!({
            "workCycle": self.work_cycle,
            "status": self.status.as_str(),
            "text": self.text,
            "omittedBytes": self.omitted_bytes,
            "truncated": self.truncated,
            "durationMs": self.duration_ms,
        });
        if let Some(reason) = self.reason {
            value["reason"] = json!(reason);
        }
        if let Some(error) = &self.error {
            value["error"] = json!(error);
        }
        value
    }
}
