//! The `ApprovalBroker` (docs/approvals.md#approvals): the session's approval configuration,
//! pending requests, session grants, timeouts and their outcomes.
//!
//! Everything happens under the session lock, so an `approval_request` frame follows the
//! call's `tool_execution_start`, and a resolution's `approval_resolved` frame, its
//! `entry_appended` and its `operation_outcome` precede whatever comes next (the response to
//! `approval.respond` or `session.interrupt`, the call's `tool_execution_end`). Frames go to
//! the opted-in connection's [`ApprovalSink`] only; without one every request resolves at once
//! as `approval_required` (source `unattended`), journaled.

mod connection;
mod gate;
mod request;
mod resolve;

use std::collections::HashSet;
use std::sync::Arc;

use tokio::sync::Semaphore;
use zi_config::approval::{Evaluator, Grants, OperatorApprovals, PathBase, Policy, RuleSet};
use zi_protocol::approval::{
    ApprovalRequest, ApprovalResolution, ApprovalsState, BrokenApprovals, RuleCounts, SandboxMode,
    SandboxState,
};
use zi_protocol::params::SandboxParams;

pub use connection::ApprovalsError;
use resolve::Pending;
pub use resolve::RespondError;

/// At most this many requests are pending per session; later ones wait unsent, in call order.
pub(crate) const MAX_PENDING: usize = 16;

/// A frame for the opted-in connection.
pub enum ApprovalFrame<'a> {
    /// A call waits for an answer.
    Request(&'a ApprovalRequest),
    /// A request was answered, withdrawn or timed out.
    Resolved(&'a ApprovalResolution),
}

/// Where an opted-in connection receives its approval frames. Called under the session lock:
/// it must only enqueue.
pub type ApprovalSink = Arc<dyn Fn(ApprovalFrame<'_>) + Send + Sync>;

/// Builds the sandbox of a connection that made it stricter (mode, network, added roots),
/// installs it for the tools' later calls and reports it (the sandbox crate's probe). Called
/// once per `connection.set_approvals` that carries `sandbox`.
/// `None` for network keeps the operator's configured value.
pub type SandboxSwitch =
    Arc<dyn Fn(SandboxMode, Option<bool>, &[String]) -> SandboxState + Send + Sync>;

/// The operator's configuration, given once at start-up.
pub struct ApprovalSetup {
    /// Policy, timeout and rules from settings, `ZI_APPROVALS` and flags.
    pub operator: OperatorApprovals,
    /// The home directory `~/` in rules resolves to.
    pub home: Option<std::path::PathBuf>,
    /// The operator's sandbox (mode, network, roots, enforcement) and who set its mode.
    pub sandbox: SandboxState,
    /// Who set the sandbox's mode (`default`, `settings`, `ZI_SANDBOX`, `--sandbox`), named
    /// when a connection asks for a looser one.
    pub sandbox_source: String,
    /// How a connection's stricter sandbox is installed; `None` when there is no sandbox to
    /// replace (tests, embedders).
    pub switch: Option<SandboxSwitch>,
}

/// The sandbox zi reports without a sandbox configured: v1.
pub(crate) fn no_sandbox() -> SandboxState {
    SandboxState {
        mode: SandboxMode::Full.as_str().into(),
        network: true,
        writable_roots: Vec::new(),
        enforcement: "none".into(),
        landlock_abi: 0,
        unavailable_reason: None,
    }
}

/// What a connection set with `connection.set_approvals`.
#[derive(Default)]
struct ConnectionLayer {
    policy: Option<Policy>,
    timeout_ms: Option<u64>,
    rules: RuleSet,
    sandbox: SandboxParams,
}

impl ConnectionLayer {
    /// Neither a policy nor a rule: nothing that asks or refuses.
    fn is_empty(&self) -> bool {
        self.policy.is_none()
            && self.rules.allow.is_empty()
            && self.rules.ask.is_empty()
            && self.rules.deny.is_empty()
    }
}

pub(super) struct ApprovalBroker {
    operator: OperatorApprovals,
    base: PathBase,
    /// The operator's sandbox, the floor a connection may only tighten
    /// (docs/approvals.md#layers-and-precedence).
    operator_sandbox: SandboxState,
    /// The sandbox calls run under now (the operator's, or the connection's stricter one).
    sandbox: SandboxState,
    sandbox_source: String,
    switch: Option<SandboxSwitch>,
    connection: ConnectionLayer,
    /// Operator rules plus connection rules.
    rules: RuleSet,
    sink: Option<ApprovalSink>,
    grants: Grants,
    pending: Vec<Pending>,
    resolved: HashSet<String>,
    escapes_approved: HashSet<String>,
    slots: Arc<Semaphore>,
}

impl ApprovalBroker {
    pub(super) fn new(cwd: &std::path::Path) -> ApprovalBroker {
        ApprovalBroker {
            operator: OperatorApprovals::default(),
            base: PathBase {
                cwd: cwd.to_path_buf(),
                home: None,
            },
            operator_sandbox: no_sandbox(),
            sandbox: no_sandbox(),
            sandbox_source: "default".into(),
            switch: None,
            connection: ConnectionLayer::default(),
            rules: RuleSet::default(),
            sink: None,
            grants: Grants::default(),
            pending: Vec::new(),
            resolved: HashSet::new(),
            escapes_approved: HashSet::new(),
            slots: Arc::new(Semaphore::new(MAX_PENDING)),
        }
    }

    fn policy(&self) -> Policy {
        self.connection.policy.unwrap_or(self.operator.policy)
    }

    fn timeout_ms(&self) -> u64 {
        self.connection
            .timeout_ms
            .unwrap_or(self.operator.timeout_ms)
    }

    fn broken(&self) -> Option<&(String, String)> {
        match self.connection.policy {
            Some(_) => None,
            None => self.operator.broken.as_ref(),
        }
    }

    /// Nothing configured and nobody opted in: the gate is skipped entirely (v1). A connection
    /// that set a policy or rules keeps the gate shut after it disconnected (its later calls
    /// are unattended) or opted out.
    fn inert(&self) -> bool {
        self.operator.is_inert()
            && self.connection.is_empty()
            && self.sink.is_none()
            && self.sandbox.mode == "full"
    }

    fn effective_sandbox(&self) -> SandboxState {
        self.sandbox.clone()
    }

    fn state(&self) -> ApprovalsState {
        let count = |kind: fn(&RuleSet) -> usize| kind(&self.rules) as u64;
        ApprovalsState {
            enabled: self.sink.is_some(),
            policy: self.policy().as_str().into(),
            sandbox: self.effective_sandbox(),
            timeout_ms: self.timeout_ms(),
            rules: RuleCounts {
                allow: count(|r| r.allow.len()),
                ask: count(|r| r.ask.len()),
                deny: count(|r| r.deny.len()),
            },
            session_grants: self.grants.len() as u64,
            broken: self.broken().map(|(path, message)| BrokenApprovals {
                path: path.clone(),
                message: message.clone(),
            }),
            pending: self.pending.iter().map(|p| p.request.clone()).collect(),
        }
    }

    fn evaluator(&self) -> Evaluator<'_> {
        Evaluator {
            policy: self.policy(),
            broken: self.broken(),
            rules: &self.rules,
            grants: &self.grants,
            base: &self.base,
        }
    }

    /// Where the pending request `approval_id` is, if it is still pending.
    fn pending_index(&self, approval_id: &str) -> Option<usize> {
        self.pending
            .iter()
            .position(|p| p.request.approval_id == approval_id)
    }

    /// The run is over: no call of it is running any more (abandoned ones included).
    pub(super) fn end_run(&mut self) {
        self.escapes_approved.clear();
    }

    fn rebuild_rules(&mut self) {
        let mut rules = self.operator.rules.clone();
        rules.extend(&self.connection.rules);
        self.rules = rules;
    }
}
