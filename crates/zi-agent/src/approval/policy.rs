//! Approval policies (approvals-reference §3.1): what is asked when no rule matches.

/// A policy, in strictness order (`Never` is the loosest).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub enum Policy {
    /// Asks nothing; ask rules and sandbox escapes resolve to deny (v1 with sandbox `full`).
    #[default]
    Never,
    /// Asks only for sandbox escapes.
    OnFailure,
    /// Asks for `bash` calls off the safe list, extension tools and sandbox escapes.
    AcceptEdits,
    /// Asks for every call except contained tools, safe-list `bash` and allow-rule matches.
    Untrusted,
}

/// The message of a bad policy name (settings and `connection.set_approvals`).
pub const POLICY_VALUES: &str = "never, on-failure, accept-edits, or untrusted";

impl Policy {
    pub fn parse(text: &str) -> Option<Policy> {
        match text {
            "never" => Some(Policy::Never),
            "on-failure" => Some(Policy::OnFailure),
            "accept-edits" => Some(Policy::AcceptEdits),
            "untrusted" => Some(Policy::Untrusted),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Policy::Never => "never",
            Policy::OnFailure => "on-failure",
            Policy::AcceptEdits => "accept-edits",
            Policy::Untrusted => "untrusted",
        }
    }
}

/// Tools no policy ever asks for (rules may still name them).
pub const CONTAINED_TOOLS: [&str; 4] = ["read", "task_output", "kill_task", "update_plan"];

pub fn is_contained(tool: &str) -> bool {
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
