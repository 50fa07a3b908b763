//! How a pending request ends: `approval.respond` (docs/approvals.md#decisions-and-session-grants),
//! timeouts, interruption and disconnection (docs/approvals.md#timeouts-interruption-and-eof), each
//! with its `approval_resolved` frame and its journaled `operation_outcome`
//! (docs/approvals.md#outcomes), then the waiting call's [`Resolution`].

use std::time::Instant;

use serde_json::json;
use tokio::sync::oneshot;
use zi_config::approval::{Escape, Rule, RuleSource, SourcedRule, Subject};
use zi_protocol::approval::{
    ApprovalDecision, ApprovalReason, ApprovalRequest, ApprovalResolution, ApprovalRespondResult,
    ResolutionSource, ResolvedDecision,
};
use zi_protocol::event::{AgentSessionEvent, EntryData, OperationOutcome, OutcomeResult};

use super::super::AgentSession;
use super::super::state::State;
use super::ApprovalFrame;

/// How a request ended, for the waiting call.
pub(super) struct Resolution {
    pub(super) approval_id: String,
    pub(super) decision: ResolvedDecision,
    pub(super) source: ResolutionSource,
    pub(super) message: Option<String>,
    /// The request's own timeout (a later `connection.set_approvals` does not change it).
    pub(super) timeout_ms: u64,
    /// The request's preview, for the stale check of an approved file change.
    pub(super) preview: Option<serde_json::Value>,
}

/// A request sent and waiting for its answer.
pub(super) struct Pending {
    pub(super) request: ApprovalRequest,
    pub(super) tool: String,
    pub(super) subject: Subject,
    pub(super) escape: Option<Escape>,
    pub(super) operation: &'static str,
    pub(super) opened: Instant,
    pub(super) sender: oneshot::Sender<Resolution>,
}

/// Why `approval.respond` failed; the text is the message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RespondError {
    /// `not_found`.
    #[error("{0}")]
    NotFound(String),
    /// `operation_failed`.
    #[error("{0}")]
    Failed(String),
}

fn outcome_result(decision: ResolvedDecision) -> OutcomeResult {
    match decision {
        ResolvedDecision::AllowOnce | ResolvedDecision::AllowSession => OutcomeResult::Succeeded,
        ResolvedDecision::Deny => OutcomeResult::Failed,
        ResolvedDecision::CancelTurn | ResolvedDecision::Cancelled => OutcomeResult::Cancelled,
    }
}

/// Journals a resolution as `operation_outcome` `approval/<id>` (evidence without command or
/// file text), then emits `entry_appended` and `operation_outcome`.
pub(super) fn journal_resolution(
    state: &mut State,
    request: &ApprovalRequest,
    operation: &str,
    resolution: &ApprovalResolution,
    duration_ms: u64,
) {
    let mut evidence = json!({
        "approvalId": request.approval_id,
        "toolCallId": request.tool_call_id,
        "toolName": request.tool_name,
        "kind": request.kind.as_str(),
        "reason": request.reason.type_name(),
    });
    if let ApprovalReason::Rule { rule, .. } = &request.reason {
        evidence["rule"] = json!(rule);
    }
    evidence["decision"] = json!(resolution.decision.as_str());
    evidence["source"] = json!(resolution.source.as_str());
    if let Some(message) = &resolution.message {
        evidence["messageBytes"] = json!(message.len());
    }
    let outcome = OperationOutcome {
        operation_id: format!("approval/{}", request.approval_id),
        capability: "approval".into(),
        operation: operation.into(),
        result: outcome_result(resolution.decision),
        duration_ms,
        evidence,
    };
    match state.append_announced(EntryData::OperationOutcome(outcome)) {
        Ok(entry) => state.emit(AgentSessionEvent::OperationOutcome { outcome: entry }),
        Err(error) => tracing::warn!("could not journal an approval outcome: {error}"),
    }
}

impl State {
    /// Resolves the pending request at `index`: frame (when a client is attached), outcome,
    /// then the waiting call.
    fn resolve_pending(
        &mut self,
        index: usize,
        decision: ResolvedDecision,
        source: ResolutionSource,
        message: Option<String>,
    ) -> Pending {
        let pending = self.approvals.pending.remove(index);
        let resolution = ApprovalResolution {
            approval_id: pending.request.approval_id.clone(),
            tool_call_id: pending.request.tool_call_id.clone(),
            decision,
            source,
            message: message.clone(),
        };
        self.approvals
            .resolved
            .insert(pending.request.approval_id.clone());
        if let Some(sink) = self.approvals.sink.clone() {
            sink(ApprovalFrame::Resolved(&resolution));
        }
        let duration = pending.opened.elapsed().as_millis() as u64;
        journal_resolution(
            self,
            &pending.request,
            pending.operation,
            &resolution,
            duration,
        );
        pending
    }

    fn deliver(
        pending: Pending,
        decision: ResolvedDecision,
        source: ResolutionSource,
        message: Option<String>,
    ) {
        let request = pending.request;
        let timeout_ms = request
            .expires_at
            .map_or(0, |expires| expires.saturating_sub(request.requested_at));
        let _ = pending.sender.send(Resolution {
            approval_id: request.approval_id,
            decision,
            source,
            message,
            timeout_ms,
            preview: request.preview,
        });
    }

    /// Resolves every pending request as `cancelled` (interrupt, `cancel_turn`, disconnect).
    pub(in crate::session) fn cancel_pending_approvals(&mut self, source: ResolutionSource) {
        while !self.approvals.pending.is_empty() {
            let pending = self.resolve_pending(0, ResolvedDecision::Cancelled, source, None);
            State::deliver(pending, ResolvedDecision::Cancelled, source, None);
        }
    }
}

impl AgentSession {
    /// `approval.respond` (docs/approvals.md#decisions-and-session-grants): resolved at admission;
    /// the frame and the journal events precede the response.
    pub fn respond_approval(
        &self,
        approval_id: &str,
        decision: ApprovalDecision,
        message: Option<String>,
        rule: Option<String>,
    ) -> Result<ApprovalRespondResult, RespondError> {
        let mut guard = self.lock();
        let state = &mut *guard;
        if state.approvals.sink.is_none() {
            return Err(RespondError::Failed(
                "Approvals are not enabled on this connection".into(),
            ));
        }
        let Some(index) = state.approvals.pending_index(approval_id) else {
            return Err(if state.approvals.resolved.contains(approval_id) {
                RespondError::Failed(format!("Approval already resolved: {approval_id}"))
            } else {
                RespondError::NotFound(format!("Approval not found: {approval_id}"))
            });
        };
        let pending = &state.approvals.pending[index];
        if !pending.request.decisions.contains(&decision) {
            return Err(RespondError::Failed(format!(
                "Decision {} is not offered for approval {approval_id}",
                decision.as_str()
            )));
        }
        let rule = match rule {
            None => None,
            Some(text) => {
                let parsed = Rule::parse(&text).map_err(|e| RespondError::Failed(e.to_string()))?;
                let matches = state.approvals.evaluator().rule_matches_call(
                    &parsed,
                    &pending.tool,
                    &pending.subject,
                );
                if !matches {
                    return Err(RespondError::Failed(format!(
                        "Approval rule {text} does not match tool call {}",
                        pending.request.tool_call_id
                    )));
                }
                Some(parsed)
            }
        };
        let resolved = ResolvedDecision::from(decision);
        let pending =
            state.resolve_pending(index, resolved, ResolutionSource::Client, message.clone());
        let broker = &mut state.approvals;
        if decision == ApprovalDecision::AllowSession {
            match rule {
                Some(rule) => {
                    let sourced = SourcedRule::new(rule, RuleSource::Session, &broker.base);
                    broker.grants.grant_rule(sourced);
                }
                None => {
                    broker.grants.grant_call(
                        &pending.tool,
                        &pending.subject,
                        pending.escape.as_ref(),
                        &broker.base,
                    );
                }
            }
        }
        if matches!(
            decision,
            ApprovalDecision::AllowOnce | ApprovalDecision::AllowSession
        ) && pending.escape.is_some()
        {
            broker
                .escapes_approved
                .insert(pending.request.tool_call_id.clone());
        }
        State::deliver(pending, resolved, ResolutionSource::Client, message);
        if decision == ApprovalDecision::CancelTurn {
            state.cancel_pending_approvals(ResolutionSource::CancelTurn);
            // Aborted exactly as by `session.interrupt`; the response does not wait.
            // The run is active (a request was pending), so this cannot find it disposed.
            let _ = state.begin_abort();
        }
        Ok(ApprovalRespondResult {
            approval_id: approval_id.to_string(),
            decision,
        })
    }

    /// Resolves a request whose `expiresAt` passed: `deny`, source `timeout`.
    pub(super) fn expire(&self, approval_id: &str) {
        let mut state = self.lock();
        let Some(index) = state.approvals.pending_index(approval_id) else {
            return;
        };
        let pending = state.resolve_pending(
            index,
            ResolvedDecision::Deny,
            ResolutionSource::Timeout,
            None,
        );
        State::deliver(
            pending,
            ResolvedDecision::Deny,
            ResolutionSource::Timeout,
            None,
        );
    }

    /// The client withdrew its answer to a pending request (ACP's `cancelled` outcome): the
    /// request resolves `cancelled`, source client — the call is not run, and this is not a
    /// denial the model is told about. False when the request is no longer pending.
    pub fn cancel_approval(&self, approval_id: &str) -> bool {
        let mut state = self.lock();
        let Some(index) = state.approvals.pending_index(approval_id) else {
            return false;
        };
        let source = ResolutionSource::Client;
        let pending = state.resolve_pending(index, ResolvedDecision::Cancelled, source, None);
        State::deliver(pending, ResolvedDecision::Cancelled, source, None);
        true
    }
}
