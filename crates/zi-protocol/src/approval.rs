//! The tool-approval extension of Zi RPC v1
//! (docs/approvals.md#for-client-authors-the-wire-flow): the `approval` object of
//! `approval_request` frames and `state.approvals.pending`, decisions, resolutions, and the
//! `approvals` state of opted-in connections. A connection that never opts in sees none of it.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// An approval policy, in strictness order (`Never` is the loosest).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "kebab-case")]
pub enum ApprovalPolicy {
    /// Asks nothing; ask rules and sandbox escapes resolve to deny.
    #[default]
    Never,
    /// Asks only for sandbox escapes.
    OnFailure,
    /// Asks for `bash` calls off the safe list, extension tools and sandbox escapes.
    AcceptEdits,
    /// Asks for every call except contained tools, safe-list `bash` and allow-rule matches.
    Untrusted,
}

impl ApprovalPolicy {
    /// Parses a wire name.
    pub fn parse(text: &str) -> Option<ApprovalPolicy> {
        match text {
            "never" => Some(ApprovalPolicy::Never),
            "on-failure" => Some(ApprovalPolicy::OnFailure),
            "accept-edits" => Some(ApprovalPolicy::AcceptEdits),
            "untrusted" => Some(ApprovalPolicy::Untrusted),
            _ => None,
        }
    }

    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            ApprovalPolicy::Never => "never",
            ApprovalPolicy::OnFailure => "on-failure",
            ApprovalPolicy::AcceptEdits => "accept-edits",
            ApprovalPolicy::Untrusted => "untrusted",
        }
    }
}

/// A sandbox mode, in strictness order (`Full` is the loosest).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "kebab-case")]
pub enum SandboxMode {
    /// No sandbox (v1).
    #[default]
    Full,
    /// Writes limited to the writable roots.
    WorkspaceWrite,
    /// Writes only to `/dev/null`.
    ReadOnly,
}

impl SandboxMode {
    /// Parses a wire name.
    pub fn parse(text: &str) -> Option<SandboxMode> {
        match text {
            "full" => Some(SandboxMode::Full),
            "workspace-write" => Some(SandboxMode::WorkspaceWrite),
            "read-only" => Some(SandboxMode::ReadOnly),
            _ => None,
        }
    }

    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            SandboxMode::Full => "full",
            SandboxMode::WorkspaceWrite => "workspace-write",
            SandboxMode::ReadOnly => "read-only",
        }
    }
}

/// Why a call needs approval (`approval.reason`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ApprovalReason {
    /// The policy asks for this call.
    Policy {
        /// The effective policy.
        policy: String,
    },
    /// An ask rule matched.
    Rule {
        /// The rule as written.
        rule: String,
        /// The layer it came from: `global`, `project`, `cli` or `connection`.
        source: String,
    },
    /// A `write`/`edit` target outside the writable roots.
    OutsideWritableRoots {
        /// The canonical target.
        path: String,
    },
    /// A `write`/`edit` target under a protected path.
    ProtectedPath {
        /// The canonical target.
        path: String,
    },
    /// A sandboxed `bash` call that looks sandbox-denied.
    SandboxDenied {
        /// The exit code, when it exited.
        #[serde(rename = "exitCode")]
        exit_code: Option<i64>,
        /// The signal name, when a signal ended it.
        signal: Option<String>,
    },
    /// The sandbox cannot be applied.
    SandboxUnavailable {
        /// Why.
        message: String,
    },
}

impl ApprovalReason {
    /// The `type` tag (outcome evidence names only the type).
    pub fn type_name(&self) -> &'static str {
        match self {
            ApprovalReason::Policy { .. } => "policy",
            ApprovalReason::Rule { .. } => "rule",
            ApprovalReason::OutsideWritableRoots { .. } => "outside_writable_roots",
            ApprovalReason::ProtectedPath { .. } => "protected_path",
            ApprovalReason::SandboxDenied { .. } => "sandbox_denied",
            ApprovalReason::SandboxUnavailable { .. } => "sandbox_unavailable",
        }
    }
}

/// What kind of call is asked about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum ApprovalKind {
    /// `bash`.
    Exec,
    /// `write`, `edit`.
    FileChange,
    /// Any other tool.
    Tool,
    /// Running `bash` outside the sandbox.
    Escalation,
}

impl ApprovalKind {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            ApprovalKind::Exec => "exec",
            ApprovalKind::FileChange => "file_change",
            ApprovalKind::Tool => "tool",
            ApprovalKind::Escalation => "escalation",
        }
    }
}

/// A client's decision (`approval.respond` `decision`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum ApprovalDecision {
    /// Run this call.
    AllowOnce,
    /// Run this call and grant similar calls for the session.
    AllowSession,
    /// Do not run it; the model sees the message.
    Deny,
    /// Do not run it, and abort the run.
    CancelTurn,
}

impl ApprovalDecision {
    /// Parses a wire name.
    pub fn parse(text: &str) -> Option<ApprovalDecision> {
        match text {
            "allow_once" => Some(ApprovalDecision::AllowOnce),
            "allow_session" => Some(ApprovalDecision::AllowSession),
            "deny" => Some(ApprovalDecision::Deny),
            "cancel_turn" => Some(ApprovalDecision::CancelTurn),
            _ => None,
        }
    }

    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            ApprovalDecision::AllowOnce => "allow_once",
            ApprovalDecision::AllowSession => "allow_session",
            ApprovalDecision::Deny => "deny",
            ApprovalDecision::CancelTurn => "cancel_turn",
        }
    }
}

/// How a request ended (`approval_resolved.decision`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum ResolvedDecision {
    /// Allowed once.
    AllowOnce,
    /// Allowed for the session.
    AllowSession,
    /// Denied (by the client, a timeout or no client).
    Deny,
    /// The client cancelled the turn.
    CancelTurn,
    /// Cancelled by an interrupt, another request's `cancel_turn` or the end of the connection.
    Cancelled,
}

impl ResolvedDecision {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            ResolvedDecision::AllowOnce => "allow_once",
            ResolvedDecision::AllowSession => "allow_session",
            ResolvedDecision::Deny => "deny",
            ResolvedDecision::CancelTurn => "cancel_turn",
            ResolvedDecision::Cancelled => "cancelled",
        }
    }
}

impl From<ApprovalDecision> for ResolvedDecision {
    fn from(decision: ApprovalDecision) -> Self {
        match decision {
            ApprovalDecision::AllowOnce => ResolvedDecision::AllowOnce,
            ApprovalDecision::AllowSession => ResolvedDecision::AllowSession,
            ApprovalDecision::Deny => ResolvedDecision::Deny,
            ApprovalDecision::CancelTurn => ResolvedDecision::CancelTurn,
        }
    }
}

/// Who resolved a request (`approval_resolved.source`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum ResolutionSource {
    /// `approval.respond`.
    Client,
    /// `expiresAt` passed.
    Timeout,
    /// `session.interrupt`.
    Interrupt,
    /// Another request of the turn chose `cancel_turn`.
    CancelTurn,
    /// The connection ended (journal only).
    Disconnect,
    /// No client could be asked (journal only).
    Unattended,
}

impl ResolutionSource {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            ResolutionSource::Client => "client",
            ResolutionSource::Timeout => "timeout",
            ResolutionSource::Interrupt => "interrupt",
            ResolutionSource::CancelTurn => "cancel_turn",
            ResolutionSource::Disconnect => "disconnect",
            ResolutionSource::Unattended => "unattended",
        }
    }
}

/// Arguments too large to inline.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ArgsPreview {
    /// The compact JSON, clipped to 65,536 bytes.
    pub text: String,
    /// Its full size.
    pub original_bytes: u64,
    /// Bytes left out.
    pub omitted_bytes: u64,
}

/// The sandbox a call would run under.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct CallSandbox {
    /// `read-only`, `workspace-write` or `full`.
    pub mode: String,
    /// Whether the network is reachable.
    pub network: bool,
}

/// One approval request: the `approval` of an `approval_request` frame and an item of
/// `state.approvals.pending`. Key order is the wire order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ApprovalRequest {
    /// A UUID v4, unique per session.
    pub approval_id: String,
    /// As in `tool_execution_start`.
    pub tool_call_id: String,
    /// As in `tool_execution_start`.
    pub tool_name: String,
    /// What is asked about.
    pub kind: ApprovalKind,
    /// Why.
    pub reason: ApprovalReason,
    /// One line, at most 1,024 bytes.
    pub summary: String,
    /// The arguments verbatim, when their compact JSON is at most 65,536 bytes.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub args: Option<Value>,
    /// Instead of `args` when they are larger.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub args_preview: Option<ArgsPreview>,
    /// A diff, content or output preview.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub preview: Option<Value>,
    /// The absolute session cwd.
    pub cwd: String,
    /// The sandbox the call would run under.
    pub sandbox: CallSandbox,
    /// A rule the client may pass with `allow_session`.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub suggested_rule: Option<String>,
    /// The decisions offered, in order.
    pub decisions: Vec<ApprovalDecision>,
    /// Epoch milliseconds.
    pub requested_at: u64,
    /// Epoch milliseconds; `null` without a timeout.
    pub expires_at: Option<u64>,
}

/// The `approval_resolved` frame's fields after `type`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ApprovalResolution {
    /// The request.
    pub approval_id: String,
    /// Its tool call.
    pub tool_call_id: String,
    /// How it ended.
    pub decision: ResolvedDecision,
    /// Who ended it.
    pub source: ResolutionSource,
    /// The client's deny message.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub message: Option<String>,
}

/// The effective sandbox in `state.approvals`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct SandboxState {
    /// `read-only`, `workspace-write` or `full`.
    pub mode: String,
    /// Whether the network is reachable.
    pub network: bool,
    /// The effective absolute writable roots.
    pub writable_roots: Vec<String>,
    /// `none`, `landlock+seccomp`, `landlock` or `unavailable`.
    pub enforcement: String,
    /// The kernel's Landlock ABI (0 when not probed).
    pub landlock_abi: u32,
    /// Why the sandbox is unavailable.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub unavailable_reason: Option<String>,
}

/// Rule counts over all layers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct RuleCounts {
    /// Allow rules.
    pub allow: u64,
    /// Ask rules.
    pub ask: u64,
    /// Deny rules.
    pub deny: u64,
}

/// Why approvals are broken (fail closed).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct BrokenApprovals {
    /// The invalid settings file.
    pub path: String,
    /// What is wrong with it.
    pub message: String,
}

/// `state.approvals` (opted-in connections only) and the result of `connection.set_approvals`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ApprovalsState {
    /// Whether the connection receives approval requests.
    pub enabled: bool,
    /// The effective policy.
    pub policy: String,
    /// The effective sandbox.
    pub sandbox: SandboxState,
    /// The effective timeout (0: none).
    pub timeout_ms: u64,
    /// Rule counts over all layers.
    pub rules: RuleCounts,
    /// Session grants.
    pub session_grants: u64,
    /// Present only when approvals are broken.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub broken: Option<BrokenApprovals>,
    /// The pending requests, oldest first.
    pub pending: Vec<ApprovalRequest>,
}

/// The result of `approval.respond`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ApprovalRespondResult {
    /// The request answered.
    pub approval_id: String,
    /// The decision taken.
    pub decision: ApprovalDecision,
}
