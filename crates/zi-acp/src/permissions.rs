//! zi's approval requests as `session/request_permission` (docs/acp.md#permissions), and
//! the client's choice back as the broker's decision.
//!
//! The options keep the decisions' order, with `reject_once` before `reject_and_stop` so a
//! client that picks the first rejection (acpx `--deny-all`) denies the call without stopping
//! the turn.

use std::path::Path;

use agent_client_protocol_schema::v1::{
    ContentBlock, PermissionOption, PermissionOptionKind, RequestPermissionOutcome,
    RequestPermissionRequest, RequestPermissionResponse, TextContent, ToolCallContent,
    ToolCallStatus, ToolCallUpdate, ToolCallUpdateFields,
};
use serde_json::Value;
use zi_protocol::approval::{ApprovalDecision, ApprovalKind, ApprovalRequest};

use crate::mapper::tools;

/// The option id of each decision.
fn option(decision: ApprovalDecision) -> PermissionOption {
    let (id, name, kind) = match decision {
        ApprovalDecision::AllowOnce => {
            ("allow_once", "Allow once", PermissionOptionKind::AllowOnce)
        }
        ApprovalDecision::AllowSession => (
            "allow_always",
            "Allow for this session",
            PermissionOptionKind::AllowAlways,
        ),
        ApprovalDecision::Deny => ("reject_once", "Reject", PermissionOptionKind::RejectOnce),
        ApprovalDecision::CancelTurn => (
            "reject_and_stop",
            "Reject and stop",
            PermissionOptionKind::RejectOnce,
        ),
    };
    PermissionOption::new(id.to_string(), name, kind)
}

/// The decision an option id stands for.
pub fn decision(option_id: &str) -> Option<ApprovalDecision> {
    match option_id {
        "allow_once" => Some(ApprovalDecision::AllowOnce),
        "allow_always" => Some(ApprovalDecision::AllowSession),
        "reject_once" => Some(ApprovalDecision::Deny),
        "reject_and_stop" => Some(ApprovalDecision::CancelTurn),
        _ => None,
    }
}

/// The request for `approval`: the tool call as the client shows it (kind, title, `rawInput`,
/// and the diff of an edit or the output of a command that failed in the sandbox).
pub fn request(
    session_id: &str,
    approval: &ApprovalRequest,
    cwd: &Path,
) -> RequestPermissionRequest {
    let args = approval.args.clone().unwrap_or(Value::Null);
    let view = tools::start_view(&approval.tool_name, &args, cwd);
    let (title, content) = match approval.kind {
        ApprovalKind::Escalation => {
            let preview = approval
                .preview
                .as_ref()
                .map(preview_text)
                .unwrap_or_default();
            let content = (!preview.is_empty()).then(|| {
                vec![ToolCallContent::from(ContentBlock::Text(TextContent::new(
                    format!("```\n{preview}\n```"),
                )))]
            });
            (approval.summary.clone(), content)
        }
        _ => (
            view.title,
            (!view.content.is_empty()).then_some(view.content),
        ),
    };
    let mut fields = ToolCallUpdateFields::new()
        .kind(view.kind)
        .status(ToolCallStatus::Pending)
        .title(title)
        .raw_input(args);
    if let Some(content) = content {
        fields = fields.content(content);
    }
    if !view.locations.is_empty() {
        fields = fields.locations(view.locations);
    }
    RequestPermissionRequest::new(
        session_id.to_string(),
        ToolCallUpdate::new(approval.tool_call_id.clone(), fields),
        approval.decisions.iter().copied().map(option).collect(),
    )
}

fn preview_text(preview: &Value) -> String {
    match preview {
        Value::String(text) => text.clone(),
        Value::Object(map) => ["output", "text", "tail"]
            .iter()
            .find_map(|key| map.get(*key).and_then(Value::as_str))
            .map(str::to_string)
            .unwrap_or_else(|| preview.to_string()),
        other => other.to_string(),
    }
}

/// What the client chose: a decision, or `None` for `cancelled` (and for an option zi did not
/// offer, which is logged).
pub fn outcome(result: Result<Value, Value>) -> Option<ApprovalDecision> {
    let value = match result {
        Ok(value) => value,
        Err(error) => {
            tracing::debug!("the client failed a permission request: {error}");
            return None;
        }
    };
    let response: RequestPermissionResponse = match serde_json::from_value(value) {
        Ok(response) => response,
        Err(error) => {
            tracing::warn!("a permission response does not decode: {error}");
            return None;
        }
    };
    match response.outcome {
        RequestPermissionOutcome::Selected(selected) => {
            let id = selected.option_id.0.to_string();
            let decision = decision(&id);
            if decision.is_none() {
                tracing::warn!("the client chose an option zi did not offer: {id}");
            }
            decision
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn options_keep_the_decision_order_and_kinds() {
        let approval: ApprovalRequest = serde_json::from_value(json!({
            "approvalId": "a1", "toolCallId": "call_1", "toolName": "bash", "kind": "exec",
            "reason": {"type": "policy", "policy": "untrusted"},
            "summary": "Run: git push", "args": {"command": "git push"}, "cwd": "/p",
            "sandbox": {"mode": "workspace-write", "network": false},
            "decisions": ["allow_once", "allow_session", "deny", "cancel_turn"],
            "requestedAt": 1, "expiresAt": null
        }))
        .unwrap();
        let request = serde_json::to_value(request("s1", &approval, Path::new("/p"))).unwrap();
        assert_eq!(
            request["options"],
            json!([
                {"optionId": "allow_once", "name": "Allow once", "kind": "allow_once"},
                {"optionId": "allow_always", "name": "Allow for this session", "kind": "allow_always"},
                {"optionId": "reject_once", "name": "Reject", "kind": "reject_once"},
                {"optionId": "reject_and_stop", "name": "Reject and stop", "kind": "reject_once"}
            ])
        );
        assert_eq!(request["toolCall"]["title"], "`git push`");
        assert_eq!(request["toolCall"]["kind"], "execute");
        assert_eq!(
            request["toolCall"]["rawInput"],
            json!({"command": "git push"})
        );
    }

    #[test]
    fn outcomes_map_back() {
        let selected = |id: &str| json!({"outcome": {"outcome": "selected", "optionId": id}});
        assert_eq!(
            outcome(Ok(selected("allow_always"))),
            Some(ApprovalDecision::AllowSession)
        );
        assert_eq!(
            outcome(Ok(selected("reject_and_stop"))),
            Some(ApprovalDecision::CancelTurn)
        );
        assert_eq!(outcome(Ok(selected("other"))), None);
        assert_eq!(
            outcome(Ok(json!({"outcome": {"outcome": "cancelled"}}))),
            None
        );
        assert_eq!(outcome(Err(json!({"code": -1, "message": "m"}))), None);
    }
}
