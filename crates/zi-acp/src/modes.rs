//! The session modes (docs/acp.md#modes): each one an approval policy and a sandbox,
//! applied through zi's approval broker as a connection layer that may only be stricter than
//! what the operator configured.

use agent_client_protocol_schema::v1::{SessionMode, SessionModeState};
use zi_protocol::approval::{ApprovalPolicy, SandboxMode};

use crate::factory::OperatorFloor;

/// A mode, from the least strict to the strictest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    FullAccess,
    Auto,
    Ask,
    ReadOnly,
}

impl Mode {
    /// From the least strict.
    pub const ALL: [Mode; 4] = [Mode::FullAccess, Mode::Auto, Mode::Ask, Mode::ReadOnly];

    pub fn id(self) -> &'static str {
        match self {
            Mode::ReadOnly => "read-only",
            Mode::Ask => "ask",
            Mode::Auto => "auto",
            Mode::FullAccess => "full-access",
        }
    }

    pub fn parse(id: &str) -> Option<Mode> {
        Mode::ALL.into_iter().find(|mode| mode.id() == id)
    }

    pub fn name(self) -> &'static str {
        match self {
            Mode::ReadOnly => "Read-only",
            Mode::Ask => "Ask",
            Mode::Auto => "Auto",
            Mode::FullAccess => "Full access",
        }
    }

    fn description(self) -> &'static str {
        match self {
            Mode::ReadOnly => "Commands run in a read-only sandbox; edits and commands ask first",
            Mode::Ask => "Commands run in the workspace sandbox; edits and commands ask first",
            Mode::Auto => {
                "Edits in the workspace and sandboxed commands run; leaving the sandbox asks"
            }
            Mode::FullAccess => "No sandbox and no questions",
        }
    }

    pub fn policy(self) -> ApprovalPolicy {
        match self {
            Mode::ReadOnly | Mode::Ask => ApprovalPolicy::Untrusted,
            Mode::Auto => ApprovalPolicy::OnFailure,
            Mode::FullAccess => ApprovalPolicy::Never,
        }
    }

    pub fn sandbox(self) -> SandboxMode {
        match self {
            Mode::ReadOnly => SandboxMode::ReadOnly,
            Mode::Ask | Mode::Auto => SandboxMode::WorkspaceWrite,
            Mode::FullAccess => SandboxMode::Full,
        }
    }

    /// Whether the operator's floor allows this mode (it is not looser in policy or sandbox).
    pub fn allowed(self, floor: &OperatorFloor) -> bool {
        self.policy() >= floor.policy && self.sandbox() >= floor.sandbox
    }
}

/// The modes a client may choose.
pub fn available(floor: &OperatorFloor) -> Vec<Mode> {
    Mode::ALL
        .into_iter()
        .filter(|mode| mode.allowed(floor))
        .collect()
}

/// The mode a session starts in: `ask`, unless the operator chose a policy (then the mode that
/// is exactly the operator's policy and sandbox, else the least strict one allowed), or the
/// operator's sandbox is stricter than `ask`'s.
pub fn initial(floor: &OperatorFloor) -> Mode {
    let allowed = available(floor);
    if floor.policy_chosen
        && let Some(exact) = allowed
            .iter()
            .find(|m| m.policy() == floor.policy && m.sandbox() == floor.sandbox)
    {
        return *exact;
    }
    if !floor.policy_chosen && allowed.contains(&Mode::Ask) {
        return Mode::Ask;
    }
    allowed.first().copied().unwrap_or(Mode::ReadOnly)
}

/// The `modes` of a setup response.
pub fn state(current: Mode, floor: &OperatorFloor) -> SessionModeState {
    let modes = available(floor)
        .into_iter()
        .rev()
        .map(|mode| {
            SessionMode::new(mode.id(), mode.name()).description(mode.description().to_string())
        })
        .collect();
    SessionModeState::new(current.id(), modes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn floor(policy: ApprovalPolicy, chosen: bool, sandbox: SandboxMode) -> OperatorFloor {
        OperatorFloor {
            policy,
            policy_chosen: chosen,
            sandbox,
        }
    }

    #[test]
    fn without_operator_choices_every_mode_is_offered_and_ask_is_first() {
        let open = floor(ApprovalPolicy::Never, false, SandboxMode::Full);
        assert_eq!(available(&open), Mode::ALL.to_vec());
        assert_eq!(initial(&open), Mode::Ask);
    }

    #[test]
    fn the_operator_floor_hides_looser_modes_and_picks_the_start() {
        let sandboxed = floor(ApprovalPolicy::Never, false, SandboxMode::WorkspaceWrite);
        assert_eq!(
            available(&sandboxed),
            vec![Mode::Auto, Mode::Ask, Mode::ReadOnly]
        );
        assert_eq!(initial(&sandboxed), Mode::Ask);
        let read_only = floor(ApprovalPolicy::Never, false, SandboxMode::ReadOnly);
        assert_eq!(initial(&read_only), Mode::ReadOnly);
        let auto = floor(ApprovalPolicy::OnFailure, true, SandboxMode::WorkspaceWrite);
        assert_eq!(initial(&auto), Mode::Auto);
        let never = floor(ApprovalPolicy::Never, true, SandboxMode::Full);
        assert_eq!(initial(&never), Mode::FullAccess);
        // accept-edits is no mode: the least strict allowed one above it.
        let edits = floor(ApprovalPolicy::AcceptEdits, true, SandboxMode::Full);
        assert_eq!(available(&edits), vec![Mode::Ask, Mode::ReadOnly]);
        assert_eq!(initial(&edits), Mode::Ask);
    }
}
