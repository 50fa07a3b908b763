//! The approval configuration of the session: the operator's (at start-up), the connection
//! layer of `connection.set_approvals` with its ceiling checks
//! (docs/approvals.md#layers-and-precedence), the sandbox switch, the `approvals` state and the
//! connection's end.

use zi_config::approval::{Rule, RuleKind, RuleSet, RuleSource, SourcedRule};
use zi_protocol::approval::{ApprovalsState, ResolutionSource, SandboxMode, SandboxState};
use zi_protocol::params::SetApprovalsParams;

use super::super::AgentSession;
use super::{ApprovalBroker, ApprovalSetup, ApprovalSink};

/// Why `connection.set_approvals` was refused (docs/approvals.md#layers-and-precedence); nothing
/// changed. RPC answers it as `operation_failed`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ApprovalsError {
    /// Approvals cannot be disabled while requests wait for an answer; `{0}` counts them.
    #[error("Cannot disable approvals while {0} approval requests are pending")]
    Pending(usize),
    /// The requested policy is looser than the operator's.
    #[error("Approval policy cannot be looser than {policy} set by {set_by}")]
    LooserPolicy {
        /// The operator's policy.
        policy: String,
        /// Where the operator's policy comes from.
        set_by: String,
    },
    /// The requested sandbox is looser than the operator's.
    #[error("Sandbox cannot be looser than {mode} set by {set_by}")]
    LooserSandbox {
        /// The operator's sandbox mode.
        mode: String,
        /// Where the operator's sandbox comes from.
        set_by: String,
    },
    /// A requested writable root does not exist.
    #[error("Sandbox writable root does not exist: {0}")]
    MissingRoot(String),
}

impl ApprovalBroker {
    /// The sandbox for the connection layer's values over the operator's (already checked to
    /// be no looser), installed for the tools through the switch.
    fn switch_sandbox(&self) -> SandboxState {
        let params = &self.connection.sandbox;
        let operator = &self.operator_sandbox;
        let mode = params
            .mode
            .unwrap_or_else(|| SandboxMode::parse(&operator.mode).unwrap_or_default());
        let roots = params.writable_roots.clone().unwrap_or_default();
        // Always switched, so an emptied connection layer also restores the operator's.
        if let Some(switch) = &self.switch {
            return switch(mode, params.network, &roots);
        }
        if params.mode.is_none() && params.network.is_none() && params.writable_roots.is_none() {
            return operator.clone();
        }
        // Without the sandbox crate (unit tests) a confined mode cannot be applied.
        let network = params.network.unwrap_or(operator.network);
        if mode == SandboxMode::Full {
            return SandboxState {
                network,
                ..operator.clone()
            };
        }
        SandboxState {
            mode: mode.as_str().into(),
            network,
            writable_roots: roots,
            enforcement: "unavailable".into(),
            landlock_abi: 0,
            unavailable_reason: Some("this zi has no sandbox".into()),
        }
    }
}

impl AgentSession {
    /// Installs the operator's approval configuration (zi-cli, before serving).
    pub fn configure_approvals(&self, setup: ApprovalSetup) {
        let mut state = self.lock();
        let broker = &mut state.approvals;
        broker.base.home = setup.home;
        broker.operator = setup.operator;
        broker.operator_sandbox = setup.sandbox.clone();
        broker.sandbox = setup.sandbox;
        broker.sandbox_source = setup.sandbox_source;
        broker.switch = setup.switch;
        broker.rebuild_rules();
    }

    /// `connection.set_approvals` (docs/approvals.md#for-client-authors-the-wire-flow,
    /// docs/approvals.md#layers-and-precedence).
    pub fn set_approvals(
        &self,
        params: SetApprovalsParams,
        sink: ApprovalSink,
    ) -> Result<ApprovalsState, ApprovalsError> {
        let mut state = self.lock();
        let broker = &mut state.approvals;
        if !params.enabled && !broker.pending.is_empty() {
            return Err(ApprovalsError::Pending(broker.pending.len()));
        }
        if let Some(policy) = params.policy
            && policy < broker.operator.policy
        {
            let source = broker
                .operator
                .policy_source
                .map_or("default", |s| s.describe());
            return Err(ApprovalsError::LooserPolicy {
                policy: broker.operator.policy.as_str().to_string(),
                set_by: source.to_string(),
            });
        }
        if let Some(sandbox) = &params.sandbox {
            let operator_mode =
                SandboxMode::parse(&broker.operator_sandbox.mode).unwrap_or_default();
            let looser_mode = sandbox.mode.is_some_and(|mode| mode < operator_mode);
            let looser_network = sandbox.network == Some(true) && !broker.operator_sandbox.network;
            let roots = sandbox.writable_roots.as_deref().unwrap_or_default();
            let looser_roots = !roots.is_empty() && operator_mode != SandboxMode::Full;
            if looser_mode || looser_network || looser_roots {
                return Err(ApprovalsError::LooserSandbox {
                    mode: operator_mode.as_str().to_string(),
                    set_by: broker.sandbox_source.to_string(),
                });
            }
            if let Some(missing) = roots
                .iter()
                .find(|root| !std::path::Path::new(root).exists())
            {
                return Err(ApprovalsError::MissingRoot(missing.clone()));
            }
        }
        if let Some(policy) = params.policy {
            broker.connection.policy = Some(policy);
        }
        if let Some(timeout) = params.timeout_ms {
            broker.connection.timeout_ms = Some(timeout);
        }
        if let Some(sandbox) = params.sandbox {
            broker.connection.sandbox = sandbox;
            broker.sandbox = broker.switch_sandbox();
        }
        if let Some(rules) = params.rules {
            let mut set = RuleSet::default();
            for (kind, list) in [
                (RuleKind::Allow, &rules.allow),
                (RuleKind::Ask, &rules.ask),
                (RuleKind::Deny, &rules.deny),
            ] {
                for text in list {
                    // The decoder has parsed every rule already.
                    if let Ok(rule) = Rule::parse(text) {
                        set.push(
                            kind,
                            SourcedRule::new(rule, RuleSource::Connection, &broker.base),
                        );
                    }
                }
            }
            broker.connection.rules = set;
            broker.rebuild_rules();
        }
        broker.sink = params.enabled.then_some(sink);
        let mut result = broker.state();
        result.enabled = params.enabled;
        Ok(result)
    }

    /// The state snapshot with `approvals` appended, for an opted-in connection
    /// (docs/approvals.md#the-approvals-state); `None` when no connection opted in, so the cached
    /// v1 snapshot never carries the key.
    pub fn state_with_approvals(&self) -> Option<zi_protocol::state::SessionState> {
        let mut guard = self.lock();
        let approvals = guard
            .approvals
            .sink
            .is_some()
            .then(|| guard.approvals.state())?;
        let mut state = super::super::queries::snapshot(&mut guard);
        state.approvals = Some(approvals);
        Some(state)
    }

    /// Whether a connection has opted in.
    pub fn approvals_enabled(&self) -> bool {
        self.lock().approvals.sink.is_some()
    }

    /// The connection is gone (EOF, signal, quit): the stop path starts here, under one lock
    /// (docs/approvals.md#timeouts-interruption-and-eof).
    /// Pending requests resolve `cancelled` with source `disconnect`, journaled, without
    /// frames; queued input is discarded and the active work is aborted before the lock is
    /// released, so a call queued behind the pending ones (or later in a sequential batch)
    /// finds its run cancelled and ends aborted — never as an `unattended` denial, never
    /// through a gate left open. The caller still waits for the abort to settle.
    pub fn disconnect_approvals(&self) {
        let mut state = self.lock();
        state.approvals.sink = None;
        state.cancel_pending_approvals(ResolutionSource::Disconnect);
        state.discard_queued_input();
        // A disposed session has nothing left to stop.
        let _ = state.begin_abort();
    }
}
