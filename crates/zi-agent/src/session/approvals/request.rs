//! The `approval_request` object (docs/approvals.md#the-request) with its bounded `summary` and
//! `args`/`argsPreview`, and the unattended resolution when no client can answer
//! (docs/approvals.md#how-a-call-is-evaluated).

use serde_json::Value;
use zi_config::approval::{Ask, Subject};
use zi_os::clock::now_millis;
use zi_protocol::approval::{
    ApprovalRequest, ApprovalResolution, ArgsPreview, CallSandbox, ResolutionSource,
    ResolvedDecision,
};
use zi_protocol::message::ToolCall;
use zi_protocol::results::clip_utf8;

use super::super::AgentSession;
use super::super::state::State;
use super::resolve::journal_resolution;
use crate::approval_texts;
use crate::tool::ToolOutput;

const MAX_SUMMARY_BYTES: usize = 1_024;
const MAX_INLINE_ARGS_BYTES: usize = 65_536;

/// `summary`: control-character runs become one space; clipped at 1,021 bytes plus `…`.
fn one_line(text: &str) -> String {
    let mut out = String::with_capacity(text.len().min(MAX_SUMMARY_BYTES));
    let mut in_control = false;
    for c in text.chars() {
        if c.is_ascii_control() {
            if !in_control {
                out.push(' ');
            }
            in_control = true;
        } else {
            out.push(c);
            in_control = false;
        }
    }
    if out.len() <= MAX_SUMMARY_BYTES {
        return out;
    }
    let (kept, _) = clip_utf8(&out, MAX_SUMMARY_BYTES - '…'.len_utf8());
    format!("{kept}…")
}

/// `args` verbatim when small, else `argsPreview`.
fn args_fields(arguments: &Value) -> (Option<Value>, Option<ArgsPreview>) {
    let text = serde_json::to_string(arguments).unwrap_or_default();
    if text.len() <= MAX_INLINE_ARGS_BYTES {
        return (Some(arguments.clone()), None);
    }
    let (kept, omitted) = clip_utf8(&text, MAX_INLINE_ARGS_BYTES);
    (
        None,
        Some(ArgsPreview {
            text: kept.to_string(),
            original_bytes: text.len() as u64,
            omitted_bytes: omitted as u64,
        }),
    )
}

impl AgentSession {
    pub(super) fn request(
        &self,
        state: &State,
        call: &ToolCall,
        subject: &Subject,
        preview: Option<Value>,
        ask: &Ask,
    ) -> ApprovalRequest {
        let broker = &state.approvals;
        let sandbox = broker.effective_sandbox();
        let (args, args_preview) = args_fields(&call.arguments);
        let requested_at = u64::try_from(now_millis()).unwrap_or_default();
        let timeout = broker.timeout_ms();
        ApprovalRequest {
            approval_id: uuid::Uuid::new_v4().to_string(),
            tool_call_id: call.id.clone(),
            tool_name: call.name.clone(),
            kind: ask.kind,
            reason: ask.reason.clone(),
            summary: one_line(&subject.summary),
            args,
            args_preview,
            preview,
            cwd: self.inner.cwd.display().to_string(),
            sandbox: CallSandbox {
                mode: sandbox.mode,
                network: sandbox.network,
            },
            suggested_rule: ask.suggested_rule.clone(),
            decisions: ask.decisions.clone(),
            requested_at,
            expires_at: (timeout > 0).then(|| requested_at + timeout),
        }
    }

    /// No client can approve: journal a `deny`/`unattended` outcome and refuse.
    pub(super) fn unattended(
        &self,
        state: &mut State,
        call: &ToolCall,
        subject: &Subject,
        ask: &Ask,
        operation: &str,
    ) -> ToolOutput {
        // Only journaled: its preview is never sent.
        let request = self.request(state, call, subject, None, ask);
        let resolution = ApprovalResolution {
            approval_id: request.approval_id.clone(),
            tool_call_id: call.id.clone(),
            decision: ResolvedDecision::Deny,
            source: ResolutionSource::Unattended,
            message: None,
        };
        state.approvals.resolved.insert(request.approval_id.clone());
        journal_resolution(state, &request, operation, &resolution, 0);
        approval_texts::approval_required(&ask.reason, false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn summaries_are_one_bounded_line() {
        assert_eq!(one_line("Run: a\n\n\tb"), "Run: a b");
        let long = one_line(&format!("Run: {}", "é".repeat(1000)));
        assert!(long.len() <= MAX_SUMMARY_BYTES);
        assert!(long.ends_with('…'));
    }

    #[test]
    fn large_arguments_become_a_preview() {
        let (args, preview) = args_fields(&json!({"content": "x".repeat(70_000)}));
        assert!(args.is_none());
        let preview = preview.unwrap();
        assert_eq!(preview.text.len(), MAX_INLINE_ARGS_BYTES);
        assert_eq!(
            preview.original_bytes,
            preview.text.len() as u64 + preview.omitted_bytes
        );
    }
}
