//! Tool approvals (docs/approvals.md#approvals): policies, rules, the bash splitter and safe list,
//! the evaluator and configuration layers. Pure: the session's `ApprovalBroker` (pending
//! requests, grants, timeouts, outcomes) and its model-visible texts (zi-agent) build on it.
//!
//! # For the sandbox (docs/approvals.md#write-and-edit, docs/approvals.md#escalation)
//!
//! The sandbox code does not decide approvals; it reports an [`Escape`] and the gate decides:
//!
//! - `write`/`edit` path checks and `bash` with an unavailable sandbox: implement
//!   `zi_agent::Tool::approval_escape` (the gate calls it after
//!   `zi_agent::Tool::approval_subject`, only when approvals or the sandbox are configured) and
//!   return [`Escape::OutsideWritableRoots`], [`Escape::ProtectedPath`] or
//!   [`Escape::SandboxUnavailable`]. The gate then asks (kind `file_change`, or `escalation` for
//!   `bash`), resolves `approval_required` (source `unattended`) with no opted-in client, or,
//!   under policy `never`, returns `zi_agent::Tool::escape_denied` (override it for the exact
//!   `sandbox_denied` / `sandbox_unavailable` texts of docs/approvals.md#what-the-model-sees).
//!   When the call was approved the tool runs and
//!   `zi_agent::SessionHost::escape_approved(call_id)` is `true`: run it unsandboxed (`bash`) or
//!   skip the path check (`write`/`edit`, still re-checking for symlink swaps as
//!   docs/approvals.md#write-and-edit says).
//! - escalation after a likely sandbox denial (docs/approvals.md#escalation): the running `bash`
//!   tool awaits
//!   `zi_agent::SessionHost::request_escalation(call_id, subject, escape)`, which returns
//!   `true` when the client chose `allow_once`/`allow_session` (re-run unsandboxed) and `false`
//!   otherwise (keep the sandboxed result). With no opted-in client or policy `never` it
//!   returns `false` without asking (append the hint of
//!   docs/approvals.md#what-a-confined-command-gets); cancellation returns `false`.
//!
//! [`Evaluator::evaluate`] is the pure entry point both paths go through.

mod bash;
pub mod config;
mod evaluate;
pub mod paths;
pub mod policy;
mod rule;
mod rule_set;
mod subject;

pub use config::{ApprovalLayer, OperatorApprovals, PolicySource, SettingsLayer};
pub use evaluate::{Ask, Escape, Evaluator, Grants, Refusal, Verdict};
pub use paths::PathBase;
pub use policy::Policy;
pub use rule::{Rule, RuleKind, RuleSource};
pub use rule_set::{RuleList, RuleSet, SourcedRule};
pub use subject::{Subject, SubjectKind};

#[cfg(test)]
mod tests;
