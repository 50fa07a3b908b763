//! What an operator configures: the mode, network, extra writable roots, what to do when the
//! sandbox is unavailable, and whether confined commands keep the login shell.

use std::path::PathBuf;

/// The sandbox mode (docs/approvals.md#the-sandbox), in strictness order `full` < `workspace-write`
/// < `read-only`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub enum Mode {
    /// zi v1: no confinement, no path checks.
    #[default]
    Full,
    /// Commands and edits may write under the writable roots only.
    WorkspaceWrite,
    /// Commands and edits may write nowhere (`/dev/null` aside).
    ReadOnly,
}

impl Mode {
    /// The mode a setting, variable or flag names; `None` for anything else.
    pub fn parse(text: &str) -> Option<Mode> {
        match text {
            "full" => Some(Mode::Full),
            "workspace-write" => Some(Mode::WorkspaceWrite),
            "read-only" => Some(Mode::ReadOnly),
            _ => None,
        }
    }

    /// The name settings, flags and the wire use.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Full => "full",
            Mode::WorkspaceWrite => "workspace-write",
            Mode::ReadOnly => "read-only",
        }
    }
}

/// `sandbox.onUnavailable` (docs/approvals.md#start-up-probe-and-unavailability).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OnUnavailable {
    /// The call fails with `sandbox_unavailable` (or asks for an escalation).
    #[default]
    Error,
    /// The command runs unsandboxed with a notice appended to its result.
    Warn,
}

impl OnUnavailable {
    /// The value `sandbox.onUnavailable` names; `None` for anything else.
    pub fn parse(text: &str) -> Option<OnUnavailable> {
        match text {
            "error" => Some(OnUnavailable::Error),
            "warn" => Some(OnUnavailable::Warn),
            _ => None,
        }
    }
}

/// The effective configuration after every layer (settings, environment, flags).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SandboxConfig {
    /// What commands and edits may write.
    pub mode: Mode,
    /// Network for confined commands (off by default).
    pub network: bool,
    /// Extra writable roots (absolute) for `workspace-write`.
    pub writable_roots: Vec<PathBuf>,
    /// What a confined command does when the kernel cannot confine it.
    pub on_unavailable: OnUnavailable,
    /// `sandbox.loginShell`: confined commands run `$SHELL -lc` instead of `$SHELL -c`
    /// (docs/approvals.md#what-a-confined-command-gets).
    pub login_shell: bool,
}
