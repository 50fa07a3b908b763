//! Approval policies (docs/approvals.md#policies-and-rules): what is asked when no rule matches.

/// The policy type is the wire type.
pub use zi_protocol::approval::ApprovalPolicy as Policy;

/// The message part of a bad policy name (settings and `connection.set_approvals`).
pub const POLICY_VALUES: &str = "never, on-failure, accept-edits, or untrusted";

/// Tools no policy ever asks for (rules may still name them).
pub(crate) const CONTAINED_TOOLS: [&str; 4] = ["read", "task_output", "kill_task", "update_plan"];

/// Whether `tool` is one of them.
pub(crate) fn is_contained(tool: &str) -> bool {
    CONTAINED_TOOLS.contains(&tool)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_in_strictness_order() {
        let all = [
            Policy::Never,
            Policy::OnFailure,
            Policy::AcceptEdits,
            Policy::Untrusted,
        ];
        for pair in all.windows(2) {
            assert!(pair[0] < pair[1]);
        }
        for policy in all {
            assert_eq!(Policy::parse(policy.as_str()), Some(policy));
        }
        assert_eq!(Policy::parse("on-request"), None);
    }
}
