//! What tools may do to the session that runs them (docs/tools.md#how-tools-reach-the-session,
//! docs/rpc.md#operation-outcomes).
//!
//! A [`SessionHost`] is handed to every tool call in [`crate::ToolCallContext`]. It holds a weak
//! reference, so a background task that outlives its call (and even its session) never keeps
//! the session alive; once the session is gone every method fails with [`SessionError::Disposed`].
//! Each method follows the journal commit order: append the entry (durable) → `entry_appended`
//! → the semantic event.

use std::sync::Weak;

use serde_json::Value;
use zi_os::sync::lock;
use zi_protocol::event::{
    AgentSessionEvent, EntryData, OperationOutcome, SessionEntry, SubagentEntry,
};
use zi_protocol::state::{PlanStep, WorkPlan};

use crate::errors::SessionError;
use crate::session::Inner;

/// Bounds of an outcome's `evidence` (docs/rpc.md#operation-outcomes).
pub(crate) const EVIDENCE_MAX_BYTES: usize = 8 * 1024;
pub(crate) const EVIDENCE_MAX_DEPTH: usize = 32;
pub(crate) const EVIDENCE_MAX_VALUES: usize = 4096;
const NAME_MAX_BYTES: usize = 64;
const OPERATION_ID_MAX_BYTES: usize = 256;

/// An operation outcome that breaks the envelope rules of docs/rpc.md#operation-outcomes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OutcomeError {
    /// The capability is not a bounded lowercase name.
    #[error("Invalid operation outcome capability: {0}")]
    Capability(String),
    /// The operation is not a bounded lowercase name.
    #[error("Invalid operation outcome operation: {0}")]
    Operation(String),
    /// The operation id is empty or too long.
    #[error("Invalid operation outcome id")]
    OperationId,
    /// The evidence serializes to more than 8 KiB.
    #[error("Operation outcome evidence exceeds 8 KiB")]
    EvidenceTooLarge,
    /// The evidence is too deep, too large, or holds a number JSON cannot carry.
    #[error("Operation outcome evidence exceeds 32 levels, 4096 values or is not finite JSON")]
    EvidenceUnbounded,
    /// The outcome could not be serialized.
    #[error("{0}")]
    Encode(String),
}

/// A tool's handle on its session.
#[derive(Clone, Default)]
pub struct SessionHost {
    pub(super) inner: Weak<Inner>,
}

impl SessionHost {
    /// A host bound to no session (unit tests of tools): every operation fails.
    pub fn detached() -> SessionHost {
        SessionHost::default()
    }

    /// The session, while it is alive.
    pub fn session(&self) -> Option<crate::AgentSession> {
        self.inner
            .upgrade()
            .map(|inner| crate::AgentSession { inner })
    }

    fn with_state<R>(
        &self,
        f: impl FnOnce(&mut crate::session::State) -> Result<R, SessionError>,
    ) -> Result<R, SessionError> {
        let inner = self.inner.upgrade().ok_or(SessionError::Disposed)?;
        let mut state = lock(&inner.state);
        f(&mut state)
    }

    /// Replaces the whole work plan with the next revision: appends a `work_plan` entry, then
    /// emits `entry_appended` and `work_plan_changed`. The caller has validated the limits.
    pub fn replace_work_plan(
        &self,
        explanation: Option<String>,
        steps: Vec<PlanStep>,
    ) -> Result<WorkPlan, SessionError> {
        self.with_state(|state| {
            let revision = state
                .journal
                .latest_work_plan()
                .map_or(0, |plan| plan.revision)
                + 1;
            let plan = WorkPlan {
                revision,
                explanation,
                steps,
            };
            state.append_announced(EntryData::WorkPlan(plan.clone()))?;
            state.emit(AgentSessionEvent::WorkPlanChanged { plan: plan.clone() });
            Ok(plan)
        })
    }

    /// Validates and appends an operation outcome, then emits `entry_appended` and
    /// `operation_outcome` with the same entry.
    pub fn append_outcome(&self, outcome: OperationOutcome) -> Result<SessionEntry, SessionError> {
        validate_outcome(&outcome)?;
        self.with_state(|state| {
            // Outcomes are unique per journal, including those before the resident tail.
            let duplicate = state.journal.all_entries().any(|entry| {
                matches!(&entry.data, EntryData::OperationOutcome(o) if o.operation_id == outcome.operation_id)
            });
            if duplicate {
                return Err(SessionError::DuplicateOutcome(outcome.operation_id));
            }
            let entry = state.append_announced(EntryData::OperationOutcome(outcome))?;
            state.emit(AgentSessionEvent::OperationOutcome {
                outcome: entry.clone(),
            });
            Ok(entry)
        })
    }

    /// Whether this call's sandbox escape was approved: run it outside the sandbox (see
    /// [`zi_config::approval`]).
    pub fn escape_approved(&self, call_id: &str) -> bool {
        self.session()
            .is_some_and(|session| session.escape_approved(call_id))
    }

    /// Asks the opted-in client to re-run a sandbox-denied `bash` call outside the sandbox
    /// (docs/approvals.md#escalation): the approval's id when allowed. `None` without asking under
    /// policy `never` or with no opted-in client, and when denied or cancelled.
    pub async fn request_escalation(
        &self,
        call_id: &str,
        arguments: &Value,
        subject: zi_config::approval::Subject,
        escape: zi_config::approval::Escape,
        cancel: &tokio_util::sync::CancellationToken,
    ) -> Option<String> {
        let session = self.session()?;
        let call = zi_protocol::message::ToolCall {
            id: call_id.to_string(),
            name: "bash".into(),
            arguments: arguments.clone(),
            thought_signature: None,
        };
        session
            .request_escalation(&call, subject, escape, cancel)
            .await
    }

    /// Runs a call that a tool makes on the model's behalf (a Code Mode cell's `zi.<tool>()`,
    /// docs/code-mode.md#approvals-and-the-sandbox) through the same path as the model's own calls:
    /// validation, the approval gate (a request names `call.id`), the sandbox the tool applies,
    /// the call in its own task with the cancellation grace. Only tools
    /// [`crate::ToolSet::get_reachable`] finds can be called; nothing is emitted for the call
    /// itself (its caller reports it). `gate` learns when the call waits in the approval gate.
    pub async fn run_nested_tool(
        &self,
        call: &zi_protocol::message::ToolCall,
        cancel: &tokio_util::sync::CancellationToken,
        gate: &crate::session::tool_call::GateObserver,
    ) -> crate::ToolOutput {
        let Some(session) = self.session() else {
            return crate::ToolOutput::error(SessionError::Disposed.to_string());
        };
        let Some(registered) = session.inner.tools.get_reachable(&call.name) else {
            return crate::ToolOutput::error(crate::errors::tool_not_found(&call.name));
        };
        let ignore: crate::tool::ProgressSink = std::sync::Arc::new(|_| {});
        let output = session
            .run_tool_call(call, &registered, cancel, ignore, Some(gate))
            .await;
        session.end_call_approval(&call.id);
        output
    }

    /// The tools [`SessionHost::run_nested_tool`] can call now, in offer order.
    pub fn reachable_tools(&self) -> Vec<std::sync::Arc<crate::RegisteredTool>> {
        self.inner
            .upgrade()
            .map(|inner| inner.tools.reachable())
            .unwrap_or_default()
    }

    /// Appends a `subagent` entry, then emits `entry_appended`.
    pub fn append_subagent(&self, entry: SubagentEntry) -> Result<SessionEntry, SessionError> {
        self.with_state(|state| Ok(state.append_announced(EntryData::Subagent(entry))?))
    }

    /// Emits `subagent_changed{name}`.
    pub fn subagent_changed(&self, name: &str) {
        let _ = self.with_state(|state| {
            state.emit(AgentSessionEvent::SubagentChanged {
                name: name.to_string(),
            });
            Ok(())
        });
    }

    /// Visits every journal entry kept in memory (the resident tail and the state entries
    /// before it), oldest first, under the session lock: `visit` must not call the session.
    pub fn visit_entries(&self, mut visit: impl FnMut(&SessionEntry)) -> Result<(), SessionError> {
        self.with_state(|state| {
            state.journal.all_entries().for_each(&mut visit);
            Ok(())
        })
    }

    /// Emits `shell_task_changed{taskId}`.
    pub fn shell_task_changed(&self, task_id: &str) {
        let _ = self.with_state(|state| {
            state.emit(AgentSessionEvent::ShellTaskChanged {
                task_id: task_id.to_string(),
            });
            Ok(())
        });
    }
}

fn valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    name.len() <= NAME_MAX_BYTES
        && chars.next().is_some_and(|c| c.is_ascii_lowercase())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-')
}

/// The envelope rules of docs/rpc.md#operation-outcomes (uniqueness is checked against the
/// journal).
pub fn validate_outcome(outcome: &OperationOutcome) -> Result<(), OutcomeError> {
    if !valid_name(&outcome.capability) {
        return Err(OutcomeError::Capability(outcome.capability.clone()));
    }
    if !valid_name(&outcome.operation) {
        return Err(OutcomeError::Operation(outcome.operation.clone()));
    }
    let id = &outcome.operation_id;
    if id.is_empty() || id.contains('\0') || id.len() > OPERATION_ID_MAX_BYTES {
        return Err(OutcomeError::OperationId);
    }
    let encoded =
        serde_json::to_vec(&outcome.evidence).map_err(|e| OutcomeError::Encode(e.to_string()))?;
    if encoded.len() > EVIDENCE_MAX_BYTES {
        return Err(OutcomeError::EvidenceTooLarge);
    }
    let mut values = 0;
    if !bounded(&outcome.evidence, 1, &mut values) {
        return Err(OutcomeError::EvidenceUnbounded);
    }
    Ok(())
}

fn bounded(value: &Value, depth: usize, values: &mut usize) -> bool {
    *values += 1;
    if depth > EVIDENCE_MAX_DEPTH || *values > EVIDENCE_MAX_VALUES {
        return false;
    }
    match value {
        Value::Array(items) => items.iter().all(|v| bounded(v, depth + 1, values)),
        Value::Object(map) => map.values().all(|v| bounded(v, depth + 1, values)),
        Value::Number(n) => n.as_f64().is_some_and(f64::is_finite),
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use zi_protocol::event::OutcomeResult;

    fn outcome(capability: &str, evidence: Value) -> OperationOutcome {
        OperationOutcome {
            operation_id: "shell/background_task/task-1".into(),
            capability: capability.into(),
            operation: "background_task".into(),
            result: OutcomeResult::Succeeded,
            duration_ms: 1,
            evidence,
        }
    }

    #[test]
    fn classifiers_and_evidence_are_bounded() {
        assert!(validate_outcome(&outcome("shell", json!({}))).is_ok());
        assert!(validate_outcome(&outcome("Shell", json!({}))).is_err());
        assert!(validate_outcome(&outcome("1shell", json!({}))).is_err());
        assert!(validate_outcome(&outcome(&"a".repeat(64), json!({}))).is_ok());
        assert!(validate_outcome(&outcome(&"a".repeat(65), json!({}))).is_err());
        let big = "x".repeat(EVIDENCE_MAX_BYTES);
        assert!(validate_outcome(&outcome("shell", json!(big))).is_err());
        let mut deep = json!(0);
        for _ in 0..32 {
            deep = json!([deep]);
        }
        assert!(validate_outcome(&outcome("shell", deep)).is_err());
        let mut id = outcome("shell", json!({}));
        id.operation_id = String::new();
        assert!(validate_outcome(&id).is_err());
    }

    #[test]
    fn a_detached_host_refuses() {
        let host = SessionHost::detached();
        assert_eq!(
            host.replace_work_plan(None, Vec::new()),
            Err(SessionError::Disposed)
        );
        assert!(host.reachable_tools().is_empty());
    }

    #[tokio::test]
    async fn a_nested_call_without_a_session_is_an_error_result() {
        let call = zi_protocol::message::ToolCall {
            id: "c1#1".into(),
            name: "read".into(),
            arguments: json!({"path": "a"}),
            thought_signature: None,
        };
        let gate: crate::session::tool_call::GateObserver = std::sync::Arc::new(|_| {});
        let output = SessionHost::detached()
            .run_nested_tool(&call, &tokio_util::sync::CancellationToken::new(), &gate)
            .await;
        assert!(output.is_error);
    }
}
