//! The approval gate of each call (docs/approvals.md#how-a-call-is-evaluated) and the escalation of
//! a running `bash` call (docs/approvals.md#escalation): evaluate, then ask and wait, or refuse.

use std::sync::Arc;
use std::time::Instant;

use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;
use zi_config::approval::{Ask, Escape, Policy, Refusal, Subject, SubjectKind, Verdict};
use zi_protocol::approval::{ApprovalDecision, ApprovalKind, ResolutionSource, ResolvedDecision};
use zi_protocol::message::ToolCall;

use super::super::AgentSession;
use super::ApprovalFrame;
use super::resolve::{Pending, Resolution};
use crate::approval_texts;
use crate::errors;
use crate::tool::{PreparedCall, Tool, ToolOutput};

impl AgentSession {
    /// Whether the call's sandbox escape was approved (see [`zi_config::approval`]).
    pub(crate) fn escape_approved(&self, call_id: &str) -> bool {
        self.lock().approvals.escapes_approved.contains(call_id)
    }

    /// The call is over: its approved escape ends with it, so a later call that reuses the id
    /// (ids come from the model) is asked again.
    pub(in crate::session) fn end_call_approval(&self, call_id: &str) {
        self.lock().approvals.escapes_approved.remove(call_id);
    }

    /// The approval gate of one validated call (docs/approvals.md#how-a-call-is-evaluated): `None`
    /// runs it, `Some` is its result without running.
    pub(in crate::session) async fn approve_call(
        &self,
        call: &ToolCall,
        tool: &Arc<dyn Tool>,
        prepared: &dyn PreparedCall,
        cancel: &CancellationToken,
    ) -> Option<ToolOutput> {
        if self.lock().approvals.inert() {
            return None;
        }
        let subject = match prepared.approval_subject() {
            Ok(subject) => subject,
            Err(output) => return Some(output),
        };
        let escape = prepared.approval_escape(&subject);
        let verdict = {
            let mut state = self.lock();
            let broker = &mut state.approvals;
            let verdict = broker
                .evaluator()
                .evaluate(&call.name, &subject, escape.as_ref());
            // `allow_session` on an escalation lets that exact command run outside the
            // sandbox from then on (docs/approvals.md#decisions-and-session-grants): the tool
            // learns it through `escape_approved`.
            if verdict == Verdict::Run && broker.grants.allows_escalation(&subject) {
                broker.escapes_approved.insert(call.id.clone());
            }
            verdict
        };
        let ask = match verdict {
            Verdict::Run => return None,
            Verdict::Refuse(Refusal::Never { reason }) => {
                return Some(match &escape {
                    Some(escape) => tool.escape_denied(escape),
                    None => approval_texts::approval_required(&reason, true),
                });
            }
            Verdict::Refuse(refusal) => return Some(approval_texts::refusal(&refusal)),
            Verdict::Ask(ask) => ask,
        };
        let operation = "tool_call";
        let file_change = (subject.kind == SubjectKind::FileChange).then(|| {
            subject
                .paths
                .first()
                .map(|p| p.display().to_string())
                .unwrap_or_default()
        });
        // The subject (and its preview) moves into the request; the resolution hands the
        // preview back for the stale check, so a waiting call holds one copy of it.
        let resolution = self
            .ask(call, subject, escape, ask, operation, cancel)
            .await;
        let resolution = match resolution {
            Ok(resolution) => resolution,
            Err(output) => return Some(output),
        };
        match resolution.decision {
            ResolvedDecision::AllowOnce | ResolvedDecision::AllowSession => {
                if let Some(path) = file_change {
                    // An approved change re-runs on the current file: a different diff is stale.
                    match prepared.approval_subject() {
                        Ok(now) if now.preview != resolution.preview => {
                            return Some(approval_texts::stale(&path, &resolution.approval_id));
                        }
                        Ok(_) => {}
                        Err(output) => return Some(output),
                    }
                }
                None
            }
            decision => Some(approval_texts::resolved(
                &resolution.approval_id,
                decision,
                resolution.source,
                resolution.message.as_deref(),
                resolution.timeout_ms,
            )),
        }
    }

    /// Asks for an escalation of a running `bash` call (docs/approvals.md#escalation): the
    /// approval's id when the client allowed running it outside the sandbox.
    pub(crate) async fn request_escalation(
        &self,
        call: &ToolCall,
        subject: Subject,
        escape: Escape,
        cancel: &CancellationToken,
    ) -> Option<String> {
        let ask = {
            let state = self.lock();
            let broker = &state.approvals;
            if broker.policy() == Policy::Never || broker.sink.is_none() {
                return None;
            }
            let mut decisions = vec![ApprovalDecision::AllowOnce, ApprovalDecision::AllowSession];
            decisions.extend([ApprovalDecision::Deny, ApprovalDecision::CancelTurn]);
            Ask {
                kind: ApprovalKind::Escalation,
                reason: escape.reason(),
                decisions,
                suggested_rule: None,
            }
        };
        let escalation = Subject {
            summary: format!(
                "Run outside the sandbox: {}",
                subject.command.as_deref().unwrap_or_default()
            ),
            ..subject
        };
        match self
            .ask(call, escalation, Some(escape), ask, "escalation", cancel)
            .await
        {
            Ok(Resolution {
                decision: ResolvedDecision::AllowOnce | ResolvedDecision::AllowSession,
                approval_id,
                ..
            }) => Some(approval_id),
            _ => None,
        }
    }

    /// Opens one request (waiting for a slot first) and waits for its resolution; with no
    /// client it resolves at once as `unattended` and returns `approval_required`.
    async fn ask(
        &self,
        call: &ToolCall,
        mut subject: Subject,
        escape: Option<Escape>,
        ask: Ask,
        operation: &'static str,
        cancel: &CancellationToken,
    ) -> Result<Resolution, ToolOutput> {
        let slots = {
            let mut state = self.lock();
            // A call that reaches the gate after its run was stopped (interrupt, EOF) is not
            // asked, and not journaled as unattended either: it ends aborted
            // (docs/approvals.md#timeouts-interruption-and-eof).
            if cancel.is_cancelled() {
                return Err(ToolOutput::error(errors::TOOL_ABORTED));
            }
            if state.approvals.sink.is_none() {
                return Err(self.unattended(&mut state, call, &subject, &ask, operation));
            }
            state.approvals.slots.clone()
        };
        let _permit = tokio::select! {
            permit = slots.acquire_owned() => match permit {
                Ok(permit) => permit,
                Err(_) => return Err(ToolOutput::error(errors::TOOL_ABORTED)),
            },
            () = cancel.cancelled() => return Err(ToolOutput::error(errors::TOOL_ABORTED)),
        };
        let (receiver, approval_id, timeout_ms) = {
            let mut state = self.lock();
            if cancel.is_cancelled() {
                return Err(ToolOutput::error(errors::TOOL_ABORTED));
            }
            if state.approvals.sink.is_none() {
                return Err(self.unattended(&mut state, call, &subject, &ask, operation));
            }
            // The request owns the preview; the pending subject keeps what rules and grants
            // read (command, paths).
            let preview = subject.preview.take();
            let request = self.request(&state, call, &subject, preview, &ask);
            let approval_id = request.approval_id.clone();
            let timeout_ms = state.approvals.timeout_ms();
            let (sender, receiver) = oneshot::channel();
            if let Some(sink) = state.approvals.sink.clone() {
                sink(ApprovalFrame::Request(&request));
            }
            state.approvals.pending.push(Pending {
                request,
                tool: call.name.clone(),
                subject,
                escape,
                operation,
                opened: Instant::now(),
                sender,
            });
            (receiver, approval_id, timeout_ms)
        };
        if timeout_ms > 0 {
            let host = self.host();
            let id = approval_id.clone();
            tokio::spawn(async move {
                tokio::time::sleep(std::time::Duration::from_millis(timeout_ms)).await;
                if let Some(session) = host.session() {
                    session.expire(&id);
                }
            });
        }
        receiver.await.map_err(|_| {
            approval_texts::resolved(
                &approval_id,
                ResolvedDecision::Cancelled,
                ResolutionSource::Disconnect,
                None,
                0,
            )
        })
    }
}
