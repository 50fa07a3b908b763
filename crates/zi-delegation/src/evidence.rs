//! Durable evidence (docs/delegation.md#evidence): `subagent` entries, work-cycle outcomes and
//! control-operation outcomes, appended through the parent's session host.

use std::time::Instant;

use serde_json::{Value, json};
use zi_agent::session::host::SessionHost;
use zi_protocol::event::{OperationOutcome, OutcomeResult, SubagentEntry};

use crate::completion::{Completion, Status};
use crate::error::SubagentError;
use crate::limits::{ERROR_MAX_BYTES, PREVIEW_JSON_MAX_BYTES, TASK_MAX_BYTES, clip, clip_json};

pub const CAPABILITY: &str = "subagent";

pub fn work_cycle_id(name: &str, work_cycle: u64) -> String {
    format!("subagent/{name}/work_cycle/{work_cycle}")
}

/// The work-cycle outcome of docs/delegation.md#evidence.
pub fn work_cycle_outcome(completion: &Completion, profile: Option<&str>) -> OperationOutcome {
    let preview = clip_json(&completion.text, ERROR_MAX_BYTES, PREVIEW_JSON_MAX_BYTES);
    let clipped = (completion.text.len() - preview.len()) as u64;
    let mut evidence = json!({
        "name": completion.name,
        "workCycle": completion.work_cycle,
    });
    if let Some(profile) = profile {
        evidence["profile"] = json!(profile);
    }
    evidence["preview"] = json!(preview);
    evidence["originalBytes"] = json!(completion.original_bytes);
    evidence["omittedBytes"] = json!(completion.omitted_bytes + clipped);
    evidence["truncated"] = json!(completion.truncated || clipped > 0);
    if completion.status == Status::Failed {
        evidence["errorCode"] = json!(completion.reason.unwrap_or("child_failed"));
        let message = completion.error.as_deref().unwrap_or("");
        evidence["errorMessage"] =
            json!(clip_json(message, ERROR_MAX_BYTES, PREVIEW_JSON_MAX_BYTES));
    }
    OperationOutcome {
        operation_id: work_cycle_id(&completion.name, completion.work_cycle),
        capability: CAPABILITY.to_string(),
        operation: "work_cycle".to_string(),
        result: match completion.status {
            Status::Completed => OutcomeResult::Succeeded,
            Status::Cancelled => OutcomeResult::Cancelled,
            Status::Failed => OutcomeResult::Failed,
        },
        duration_ms: completion.duration_ms,
        evidence,
    }
}

/// One parent-initiated control operation (docs/delegation.md#evidence), appended once when it
/// settles.
pub struct ControlOperation {
    pub operation: &'static str,
    command_id: String,
    started: Instant,
}

impl ControlOperation {
    pub fn start(operation: &'static str) -> ControlOperation {
        ControlOperation {
            operation,
            command_id: uuid::Uuid::new_v4().to_string(),
            started: Instant::now(),
        }
    }

    /// Appends the outcome; `fields` are the operation's evidence after `commandId`.
    pub fn finish(self, host: &SessionHost, result: OutcomeResult, fields: Value) {
        let mut evidence = json!({ "commandId": self.command_id });
        if let (Some(target), Value::Object(fields)) = (evidence.as_object_mut(), fields) {
            target.extend(fields);
        }
        let outcome = OperationOutcome {
            operation_id: format!("subagent/control/{}", self.command_id),
            capability: CAPABILITY.to_string(),
            operation: self.operation.to_string(),
            result,
            duration_ms: self.started.elapsed().as_millis() as u64,
            evidence,
        };
        if let Err(error) = host.append_outcome(outcome) {
            tracing::warn!(
                "could not record the subagent {} outcome: {error}",
                self.operation
            );
        }
    }
}

/// A control operation's outcome from its result: `succeeded` with the success's own evidence
/// (`succeeded` adds it), or `failed` with the `(message, errorCode)`'s code; returns the
/// message as the error.
pub fn settle<T>(
    control: ControlOperation,
    host: &SessionHost,
    mut fields: Value,
    result: Result<T, (SubagentError, &'static str)>,
    succeeded: impl FnOnce(&T, &mut Value),
) -> Result<T, SubagentError> {
    match result {
        Ok(value) => {
            succeeded(&value, &mut fields);
            control.finish(host, OutcomeResult::Succeeded, fields);
            Ok(value)
        }
        Err((message, code)) => {
            fields["errorCode"] = json!(code);
            control.finish(host, OutcomeResult::Failed, fields);
            Err(message)
        }
    }
}

/// The listed task: the raw prompt clipped to 256 bytes (absent when empty).
pub fn listed_task(text: &str) -> Option<String> {
    let task = clip(text, TASK_MAX_BYTES);
    (!task.is_empty()).then(|| task.to_string())
}

/// Appends an entry whose failure must fail the operation (`starting`, `ready`,
/// `work_cycle_started`).
pub fn append_required(host: &SessionHost, entry: SubagentEntry) -> Result<(), SubagentError> {
    host.append_subagent(entry).map(|_| ()).map_err(Into::into)
}

/// Appends an entry whose failure is swallowed (`closing`, `exited`, `work_cycle_delivered`,
/// `lost`).
pub fn append_best_effort(host: &SessionHost, entry: SubagentEntry) {
    if let Err(error) = host.append_subagent(entry) {
        tracing::warn!("could not record a subagent entry: {error}");
    }
}
