//! The session's subscriber and approval sink. Both run under the session lock: they map,
//! keep the books of the open prompts and queue lines, and never call back into the session
//! (what needs the session — a config push, the next queued prompt — runs in a task).

use std::sync::Arc;

use agent_client_protocol_schema::v1::PromptResponse;
use serde_json::{Value, json};
use zi_agent::session::approvals::{ApprovalFrame, ApprovalSink};
use zi_agent::{EventContext, Subscriber};
use zi_protocol::approval::{ResolutionSource, ResolvedDecision};
use zi_protocol::event::AgentSessionEvent;
use zi_protocol::message::AgentMessage;

use super::AcpSession;
use crate::jsonrpc::{self, RpcError};
use crate::lock;
use crate::mapper::live::Out;
use crate::outgoing::Waiter;
use crate::permissions;
use crate::turns::Answer;

/// The subscriber of `acp`'s session (weak: the session table owns the ACP session).
pub(super) fn subscriber(acp: &Arc<AcpSession>) -> Subscriber {
    let weak = Arc::downgrade(acp);
    Arc::new(move |event: &AgentSessionEvent, context: &EventContext| {
        if let Some(acp) = weak.upgrade() {
            acp.on_event(event, context);
        }
    })
}

/// The approval sink of `acp`'s session (weak: the sink lives in the session's broker).
pub(super) fn approval_sink(acp: &AcpSession) -> ApprovalSink {
    let me = acp.me.clone();
    Arc::new(move |frame: ApprovalFrame<'_>| {
        if let Some(acp) = me.upgrade() {
            acp.on_approval(frame);
        }
    })
}

impl AcpSession {
    fn on_event(&self, event: &AgentSessionEvent, context: &EventContext) {
        let mut inner = lock(&self.inner);
        let outs = inner.mapper.map(event, context);
        let mut answers: Vec<Answer> = Vec::new();
        let mut stranded = false;
        match event {
            AgentSessionEvent::QueueUpdate { follow_up, .. } => {
                let ids: Vec<u64> = follow_up.iter().map(|q| q.id).collect();
                answers = inner.turns.queue_changed(&ids);
            }
            AgentSessionEvent::MessageEnd {
                message: AgentMessage::Assistant(message),
            } => inner.turns.assistant_ended(message),
            _ => {}
        }
        // The prompts the delivered follow-up ends precede its message.
        for (id, outcome) in answers.drain(..) {
            self.send_answer(&id, outcome);
        }
        let mut config_changed = false;
        for out in outs {
            match out {
                Out::Update(update) if !inner.muted => self.send_update(update),
                // The client's own prompt is not echoed back to it.
                Out::UserMessage(chunks) if !inner.muted && !inner.turns.claim_user_message() => {
                    for chunk in chunks {
                        self.send_update(chunk);
                    }
                }
                Out::ConfigChanged => config_changed = true,
                _ => {}
            }
        }
        if matches!(event, AgentSessionEvent::AgentSettled) {
            let (settled, left) = inner.turns.settled();
            answers = settled;
            stranded = left;
            inner.muted = false;
            inner.settles += 1;
        }
        for (id, outcome) in answers {
            self.send_answer(&id, outcome);
        }
        let refresh = config_changed && !inner.refreshing;
        if refresh {
            inner.refreshing = true;
        }
        drop(inner);
        if refresh {
            self.later(|acp| {
                lock(&acp.inner).refreshing = false;
                acp.push_config();
            });
        }
        if stranded {
            self.later(|acp| {
                if let Some(starter) = acp.session.run_queued_follow_up() {
                    drop(starter);
                }
            });
        }
    }

    /// Runs `work` in a task, outside the session lock.
    fn later(&self, work: impl FnOnce(&AcpSession) + Send + 'static) {
        let Some(acp) = self.me.upgrade() else {
            return;
        };
        self.link.runtime.spawn(async move { work(&acp) });
    }

    pub(super) fn send_answer(
        &self,
        id: &Value,
        outcome: Result<agent_client_protocol_schema::v1::StopReason, RpcError>,
    ) {
        let line = match outcome {
            Ok(stop) => jsonrpc::result_line(id, &PromptResponse::new(stop)),
            Err(error) => jsonrpc::error_line(id, &error),
        };
        self.sink.send(line);
    }

    fn on_approval(&self, frame: ApprovalFrame<'_>) {
        match frame {
            ApprovalFrame::Request(request) => {
                let params = permissions::request(&self.id, request, &self.cwd);
                let id = self.link.outgoing.register(Waiter::Permission {
                    session_id: self.id.clone(),
                    approval_id: request.approval_id.clone(),
                });
                self.sink.send(jsonrpc::request_line(
                    id,
                    "session/request_permission",
                    &params,
                ));
            }
            ApprovalFrame::Resolved(resolution) => {
                // `reject_and_stop` aborts the run as `session/cancel` does: its prompts end
                // `cancelled`.
                if resolution.decision == ResolvedDecision::CancelTurn {
                    lock(&self.inner).turns.cancel();
                }
                if matches!(
                    resolution.decision,
                    ResolvedDecision::AllowOnce | ResolvedDecision::AllowSession
                ) && let Some(update) =
                    lock(&self.inner).mapper.approved(&resolution.tool_call_id)
                {
                    self.send_update(update);
                }
                // Ended otherwise (interrupt, timeout, another request's cancel_turn): the
                // client's answer no longer counts.
                if resolution.source != ResolutionSource::Client
                    && let Some(id) = self
                        .link
                        .outgoing
                        .forget_permission(&resolution.approval_id)
                {
                    self.sink.send(jsonrpc::notification_line(
                        "$/cancel_request",
                        &json!({ "requestId": id }),
                    ));
                }
            }
        }
    }
}
