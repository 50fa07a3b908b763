//! The model-visible results of the gate (docs/approvals.md#what-the-model-sees), exact texts. All
//! are error results with `details.outcome` `error` and a `details.code`.

use serde_json::{Value, json};
use zi_config::approval::Refusal;
use zi_protocol::approval::{ApprovalReason, ResolutionSource, ResolvedDecision};

use crate::tool::ToolOutput;

fn failure(code: &str, text: String, extra: Value) -> ToolOutput {
    ToolOutput::failure_with(code, text, extra)
}

/// The REASON of `approval_required` texts.
pub fn reason_text(reason: &ApprovalReason) -> String {
    match reason {
        ApprovalReason::Policy { policy } => format!("policy {policy}"),
        ApprovalReason::Rule { rule, .. } => format!("rule {rule}"),
        ApprovalReason::OutsideWritableRoots { .. } => "outside the writable roots".into(),
        ApprovalReason::ProtectedPath { .. } | ApprovalReason::SandboxDenied { .. } => {
            "sandbox escape".into()
        }
        ApprovalReason::SandboxUnavailable { .. } => "sandbox unavailable".into(),
    }
}

/// `approval_config_invalid`.
pub fn config_invalid(path: &str, message: &str) -> ToolOutput {
    failure(
        "approval_config_invalid",
        format!("Approval settings are invalid ({path}: {message}). The tool call was not run."),
        json!({"path": path}),
    )
}

/// `denied_by_rule`.
pub fn denied_by_rule(rule: &str, source: &str) -> ToolOutput {
    failure(
        "denied_by_rule",
        format!("This tool call is denied by the approval rule {rule} ({source} settings)."),
        json!({"rule": rule, "source": source}),
    )
}

/// `approval_required`: no client can approve (`never` has its own ending).
pub fn approval_required(reason: &ApprovalReason, policy_never: bool) -> ToolOutput {
    let ending = if policy_never {
        "but the approval policy is never"
    } else {
        "but no client can approve it in this zi run"
    };
    failure(
        "approval_required",
        format!(
            "This tool call needs approval ({}), {ending}. It was not run.",
            reason_text(reason)
        ),
        json!({"reason": reason}),
    )
}

/// The result of a refusal decided without asking.
pub fn refusal(refusal: &Refusal) -> ToolOutput {
    match refusal {
        Refusal::ConfigInvalid { path, message } => config_invalid(path, message),
        Refusal::DeniedByRule { rule, source } => denied_by_rule(rule, source.as_str()),
        Refusal::Never { reason } => approval_required(reason, true),
    }
}

/// `timeoutMs` as the `N` of "after N seconds": whole seconds when whole, else with the
/// milliseconds as decimals (200 → `0.2`), so a short timeout never reads "after 0 seconds".
fn seconds(timeout_ms: u64) -> String {
    let (whole, millis) = (timeout_ms / 1000, timeout_ms % 1000);
    if millis == 0 {
        return whole.to_string();
    }
    let decimals = format!("{millis:03}");
    format!("{whole}.{}", decimals.trim_end_matches('0'))
}

/// The result of a request that ended without running the call.
pub fn resolved(
    approval_id: &str,
    decision: ResolvedDecision,
    source: ResolutionSource,
    message: Option<&str>,
    timeout_ms: u64,
) -> ToolOutput {
    let ids = json!({"approvalId": approval_id, "decision": decision.as_str(), "source": source.as_str()});
    match (decision, source) {
        (_, ResolutionSource::Timeout) => failure(
            "approval_timeout",
            format!(
                "The approval request timed out after {} seconds. The tool call was not run.",
                seconds(timeout_ms)
            ),
            json!({"approvalId": approval_id}),
        ),
        (ResolvedDecision::CancelTurn, _) => failure(
            "approval_denied",
            "The user denied this tool call and stopped the turn.".into(),
            ids,
        ),
        (ResolvedDecision::Cancelled, _) => failure(
            "approval_cancelled",
            "The tool call was not run: its approval request was cancelled.".into(),
            json!({"approvalId": approval_id, "source": source.as_str()}),
        ),
        _ => {
            let mut text = "The user denied this tool call.".to_string();
            if let Some(message) = message {
                text.push_str("\n\nThe user said: ");
                text.push_str(message);
            }
            failure("approval_denied", text, ids)
        }
    }
}

/// `approval_stale`: the file changed while its edit waited.
pub fn stale(path: &str, approval_id: &str) -> ToolOutput {
    failure(
        "approval_stale",
        format!("{path} changed while the edit was awaiting approval. The change was not applied."),
        json!({"approvalId": approval_id}),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use zi_protocol::message::ContentBlock;

    fn text(output: &ToolOutput) -> String {
        match &output.content[0] {
            ContentBlock::Text { text, .. } => text.clone(),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn texts_are_exact() {
        let policy = ApprovalReason::Policy {
            policy: "untrusted".into(),
        };
        assert_eq!(
            text(&approval_required(&policy, false)),
            "This tool call needs approval (policy untrusted), but no client can approve it in this zi run. It was not run."
        );
        assert_eq!(
            text(&approval_required(&policy, true)),
            "This tool call needs approval (policy untrusted), but the approval policy is never. It was not run."
        );
        let denied = resolved(
            "a",
            ResolvedDecision::Deny,
            ResolutionSource::Client,
            Some("No."),
            0,
        );
        assert_eq!(
            text(&denied),
            "The user denied this tool call.\n\nThe user said: No."
        );
        assert_eq!(
            denied.details.unwrap().to_string(),
            r#"{"outcome":"error","code":"approval_denied","approvalId":"a","decision":"deny","source":"client"}"#
        );
        let timeout = resolved(
            "a",
            ResolvedDecision::Deny,
            ResolutionSource::Timeout,
            None,
            200,
        );
        assert_eq!(
            text(&timeout),
            "The approval request timed out after 0.2 seconds. The tool call was not run."
        );
        for (ms, shown) in [
            (600_000, "600"),
            (1_500, "1.5"),
            (1_234, "1.234"),
            (5, "0.005"),
        ] {
            assert_eq!(seconds(ms), shown);
        }
        assert_eq!(
            text(&denied_by_rule("bash(rm:*)", "global")),
            "This tool call is denied by the approval rule bash(rm:*) (global settings)."
        );
    }
}
