//! The `ApprovalBroker` (approvals-reference §4, §5): the session's approval configuration,
//! pending requests, session grants, timeouts and their outcomes.
//!
//! Everything happens under the session lock, so an `approval_request` frame follows the
//! call's `tool_execution_start`, and a resolution's `approval_resolved` frame, its
//! `entry_appended` and its `operation_outcome` precede whatever comes next (the response to
//! `approval.respond` or `session.interrupt`, the call's `tool_execution_end`). Frames go to
//! the opted-in connection's [`ApprovalSink`] only; without one every request resolves at once
//! as `approval_required` (source `unattended`), journaled.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Instant;

use serde_json::{Value, json};
use tokio::sync::{Semaphore, oneshot};
use tokio_util::sync::CancellationToken;
use zi_protocol::approval::{
    ApprovalDecision, ApprovalKind, ApprovalReason, ApprovalRequest, ApprovalResolution,
    ApprovalRespondResult, ApprovalsState, ArgsPreview, BrokenApprovals, CallSandbox,
    ResolutionSource, ResolvedDecision, RuleCounts, SandboxMode, SandboxState,
};
use zi_protocol::event::{AgentSessionEvent, EntryData, OperationOutcome, OutcomeResult};
use zi_protocol::message::ToolCall;
use zi_protocol::params::{SandboxParams, SetApprovalsParams};
use zi_protocol::results::clip_utf8;

use super::AgentSession;
use super::state::State;
use crate::approval::{
    Ask, Escape, Evaluator, Grants, OperatorApprovals, PathBase, Policy, Refusal, Rule, RuleKind,
    RuleSet, RuleSource, SourcedRule, Subject, SubjectKind, Verdict, texts,
};
use crate::errors;
use crate::journal::now_millis;
use crate::tool::{Tool, ToolOutput};

/// At most this many requests are pending per session; later ones wait unsent, in call order.
pub const MAX_PENDING: usize = 16;
const MAX_SUMMARY_BYTES: usize = 1_024;
const MAX_INLINE_ARGS_BYTES: usize = 65_536;

/// A frame for the opted-in connection.
pub enum ApprovalFrame<'a> {
    Request(&'a ApprovalRequest),
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
    pub operator: OperatorApprovals,
    pub home: Option<std::path::PathBuf>,
    /// The operator's sandbox (mode, network, roots, enforcement) and who set its mode.
    pub sandbox: SandboxState,
    pub sandbox_source: String,
    pub switch: Option<SandboxSwitch>,
}

/// The sandbox zi reports without a sandbox configured: v1.
pub fn no_sandbox() -> SandboxState {
    SandboxState {
        mode: SandboxMode::Full.as_str().into(),
        network: true,
        writable_roots: Vec::new(),
        enforcement: "none".into(),
        landlock_abi: 0,
        unavailable_reason: None,
    }
}

/// How a request ended, for the waiting call.
struct Resolution {
    approval_id: String,
    decision: ResolvedDecision,
    source: ResolutionSource,
    message: Option<String>,
    /// The request's own timeout (a later `connection.set_approvals` does not change it).
    timeout_ms: u64,
}

struct Pending {
    request: ApprovalRequest,
    tool: String,
    subject: Subject,
    escape: Option<Escape>,
    operation: &'static str,
    opened: Instant,
    sender: oneshot::Sender<Resolution>,
}

/// What a connection set with `connection.set_approvals`.
#[derive(Default)]
struct ConnectionLayer {
    policy: Option<Policy>,
    timeout_ms: Option<u64>,
    rules: RuleSet,
    sandbox: SandboxParams,
}

pub(super) struct ApprovalBroker {
    operator: OperatorApprovals,
    base: PathBase,
    /// The operator's sandbox, the floor a connection may only tighten (§13.3).
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

    /// Nothing configured and nobody opted in: the gate is skipped entirely (v1).
    fn inert(&self) -> bool {
        self.operator.is_inert() && self.sink.is_none() && self.sandbox.mode == "full"
    }

    fn effective_sandbox(&self) -> SandboxState {
        self.sandbox.clone()
    }

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

/// Why `approval.respond` failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RespondError {
    /// `not_found`.
    NotFound(String),
    /// `operation_failed`.
    Failed(String),
}

/// `summary`: control-character runs become one space; clipped at 1,021 bytes plus `…`.
fn one_line(text: &str) -> String {
    let mut out = String::with_capacity(text.len().min(MAX_SUMMARY_BYTES));
    let mut in_control = false;
    for c in text.chars() {
        if c.is_ascii_control() {
            if !in_control {
                out.push(' ');
            }
            in_control = true;
        } else {
            out.push(c);
            in_control = false;
        }
    }
    if out.len() <= MAX_SUMMARY_BYTES {
        return out;
    }
    let (kept, _) = clip_utf8(&out, MAX_SUMMARY_BYTES - '…'.len_utf8());
    format!("{kept}…")
}

/// `args` verbatim when small, else `argsPreview`.
fn args_fields(arguments: &Value) -> (Option<Value>, Option<ArgsPreview>) {
    let text = serde_json::to_string(arguments).unwrap_or_default();
    if text.len() <= MAX_INLINE_ARGS_BYTES {
        return (Some(arguments.clone()), None);
    }
    let (kept, omitted) = clip_utf8(&text, MAX_INLINE_ARGS_BYTES);
    (
        None,
        Some(ArgsPreview {
            text: kept.to_string(),
            original_bytes: text.len() as u64,
            omitted_bytes: omitted as u64,
        }),
    )
}

fn outcome_result(decision: ResolvedDecision) -> OutcomeResult {
    match decision {
        ResolvedDecision::AllowOnce | ResolvedDecision::AllowSession => OutcomeResult::Succeeded,
        ResolvedDecision::Deny => OutcomeResult::Failed,
        ResolvedDecision::CancelTurn | ResolvedDecision::Cancelled => OutcomeResult::Cancelled,
    }
}

/// Journals a resolution as `operation_outcome` `approval/<id>` (evidence without command or
/// file text), then emits `entry_appended` and `operation_outcome`.
fn journal_resolution(
    state: &mut State,
    request: &ApprovalRequest,
    operation: &str,
    resolution: &ApprovalResolution,
    duration_ms: u64,
) {
    let mut evidence = json!({
        "approvalId": request.approval_id,
        "toolCallId": request.tool_call_id,
        "toolName": request.tool_name,
        "kind": request.kind.as_str(),
        "reason": request.reason.type_name(),
    });
    if let ApprovalReason::Rule { rule, .. } = &request.reason {
        evidence["rule"] = json!(rule);
    }
    evidence["decision"] = json!(resolution.decision.as_str());
    evidence["source"] = json!(resolution.source.as_str());
    if let Some(message) = &resolution.message {
        evidence["messageBytes"] = json!(message.len());
    }
    let outcome = OperationOutcome {
        operation_id: format!("approval/{}", request.approval_id),
        capability: "approval".into(),
        operation: operation.into(),
        result: outcome_result(resolution.decision),
        duration_ms,
        evidence,
    };
    match state.append_announced(EntryData::OperationOutcome(outcome)) {
        Ok(entry) => state.emit(AgentSessionEvent::OperationOutcome { outcome: entry }),
        Err(error) => tracing::warn!("could not journal an approval outcome: {error}"),
    }
}

impl State {
    /// Resolves the pending request at `index`: frame (when a client is attached), outcome,
    /// then the waiting call.
    fn resolve_pending(
        &mut self,
        index: usize,
        decision: ResolvedDecision,
        source: ResolutionSource,
        message: Option<String>,
    ) -> Pending {
        let pending = self.approvals.pending.remove(index);
        let resolution = ApprovalResolution {
            approval_id: pending.request.approval_id.clone(),
            tool_call_id: pending.request.tool_call_id.clone(),
            decision,
            source,
            message: message.clone(),
        };
        self.approvals
            .resolved
            .insert(pending.request.approval_id.clone());
        if let Some(sink) = self.approvals.sink.clone() {
            sink(ApprovalFrame::Resolved(&resolution));
        }
        let duration = pending.opened.elapsed().as_millis() as u64;
        journal_resolution(
            self,
            &pending.request,
            pending.operation,
            &resolution,
            duration,
        );
        pending
    }

    fn deliver(
        pending: Pending,
        decision: ResolvedDecision,
        source: ResolutionSource,
        message: Option<String>,
    ) {
        let request = &pending.request;
        let timeout_ms = request
            .expires_at
            .map_or(0, |expires| expires.saturating_sub(request.requested_at));
        let _ = pending.sender.send(Resolution {
            approval_id: pending.request.approval_id,
            decision,
            source,
            message,
            timeout_ms,
        });
    }

    /// Resolves every pending request as `cancelled` (interrupt, `cancel_turn`, disconnect).
    pub(super) fn cancel_pending_approvals(&mut self, source: ResolutionSource) {
        while !self.approvals.pending.is_empty() {
            let pending = self.resolve_pending(0, ResolvedDecision::Cancelled, source, None);
            State::deliver(pending, ResolvedDecision::Cancelled, source, None);
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

    /// `connection.set_approvals` (approvals-reference §4, decision §13.3).
    pub fn set_approvals(
        &self,
        params: SetApprovalsParams,
        sink: ApprovalSink,
    ) -> Result<ApprovalsState, String> {
        let mut state = self.lock();
        let broker = &mut state.approvals;
        if !params.enabled && !broker.pending.is_empty() {
            return Err(format!(
                "Cannot disable approvals while {} approval requests are pending",
                broker.pending.len()
            ));
        }
        if let Some(policy) = params.policy
            && policy < broker.operator.policy
        {
            let source = broker
                .operator
                .policy_source
                .map_or("default", |s| s.describe());
            return Err(format!(
                "Approval policy cannot be looser than {} set by {source}",
                broker.operator.policy.as_str()
            ));
        }
        if let Some(sandbox) = &params.sandbox {
            let operator_mode =
                SandboxMode::parse(&broker.operator_sandbox.mode).unwrap_or_default();
            let looser_mode = sandbox.mode.is_some_and(|mode| mode < operator_mode);
            let looser_network = sandbox.network == Some(true) && !broker.operator_sandbox.network;
            let roots = sandbox.writable_roots.as_deref().unwrap_or_default();
            let looser_roots = !roots.is_empty() && operator_mode != SandboxMode::Full;
            if looser_mode || looser_network || looser_roots {
                return Err(format!(
                    "Sandbox cannot be looser than {} set by {}",
                    operator_mode.as_str(),
                    broker.sandbox_source
                ));
            }
            if let Some(missing) = roots
                .iter()
                .find(|root| !std::path::Path::new(root).exists())
            {
                return Err(format!("Sandbox writable root does not exist: {missing}"));
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
    /// (approvals-reference §5.7); `None` when no connection opted in, so the cached v1
    /// snapshot never carries the key.
    pub fn state_with_approvals(&self) -> Option<zi_protocol::state::SessionState> {
        let mut guard = self.lock();
        let approvals = guard
            .approvals
            .sink
            .is_some()
            .then(|| guard.approvals.state())?;
        let mut state = super::queries::snapshot(&mut guard);
        state.approvals = Some(approvals);
        Some(state)
    }

    /// Whether a connection has opted in.
    pub fn approvals_enabled(&self) -> bool {
        self.lock().approvals.sink.is_some()
    }

    /// The connection is gone (EOF, signal): pending requests resolve `cancelled` with source
    /// `disconnect`, journaled, without frames; later requests are unattended.
    pub fn disconnect_approvals(&self) {
        let mut state = self.lock();
        state.approvals.sink = None;
        state.cancel_pending_approvals(ResolutionSource::Disconnect);
    }

    /// `approval.respond` (approvals-reference §5.2): resolved at admission; the frame and the
    /// journal events precede the response.
    pub fn respond_approval(
        &self,
        approval_id: &str,
        decision: ApprovalDecision,
        message: Option<String>,
        rule: Option<String>,
    ) -> Result<ApprovalRespondResult, RespondError> {
        let mut guard = self.lock();
        let state = &mut *guard;
        if state.approvals.sink.is_none() {
            return Err(RespondError::Failed(
                "Approvals are not enabled on this connection".into(),
            ));
        }
        let Some(index) = state
            .approvals
            .pending
            .iter()
            .position(|p| p.request.approval_id == approval_id)
        else {
            return Err(if state.approvals.resolved.contains(approval_id) {
                RespondError::Failed(format!("Approval already resolved: {approval_id}"))
            } else {
                RespondError::NotFound(format!("Approval not found: {approval_id}"))
            });
        };
        let pending = &state.approvals.pending[index];
        if !pending.request.decisions.contains(&decision) {
            return Err(RespondError::Failed(format!(
                "Decision {} is not offered for approval {approval_id}",
                decision.as_str()
            )));
        }
        let rule = match rule {
            None => None,
            Some(text) => {
                let parsed = Rule::parse(&text).map_err(|e| RespondError::Failed(e.to_string()))?;
                let matches = state.approvals.evaluator().rule_matches_call(
                    &parsed,
                    &pending.tool,
                    &pending.subject,
                );
                if !matches {
                    return Err(RespondError::Failed(format!(
                        "Approval rule {text} does not match tool call {}",
                        pending.request.tool_call_id
                    )));
                }
                Some(parsed)
            }
        };
        let resolved = ResolvedDecision::from(decision);
        let pending =
            state.resolve_pending(index, resolved, ResolutionSource::Client, message.clone());
        let broker = &mut state.approvals;
        if decision == ApprovalDecision::AllowSession {
            match rule {
                Some(rule) => {
                    let sourced = SourcedRule::new(rule, RuleSource::Session, &broker.base);
                    broker.grants.grant_rule(sourced);
                }
                None => {
                    broker.grants.grant_call(
                        &pending.tool,
                        &pending.subject,
                        pending.escape.as_ref(),
                        &broker.base,
                    );
                }
            }
        }
        if matches!(
            decision,
            ApprovalDecision::AllowOnce | ApprovalDecision::AllowSession
        ) && pending.escape.is_some()
        {
            broker
                .escapes_approved
                .insert(pending.request.tool_call_id.clone());
        }
        State::deliver(pending, resolved, ResolutionSource::Client, message);
        if decision == ApprovalDecision::CancelTurn {
            state.cancel_pending_approvals(ResolutionSource::CancelTurn);
            // Aborted exactly as by `session.interrupt`; the response does not wait.
            // The run is active (a request was pending), so this cannot find it disposed.
            let _ = state.begin_abort();
        }
        Ok(ApprovalRespondResult {
            approval_id: approval_id.to_string(),
            decision,
        })
    }

    /// Whether the call's sandbox escape was approved (see [`crate::approval`]).
    pub(crate) fn escape_approved(&self, call_id: &str) -> bool {
        self.lock().approvals.escapes_approved.contains(call_id)
    }

    /// The call is over: its approved escape ends with it, so a later call that reuses the id
    /// (ids come from the model) is asked again.
    pub(super) fn end_call_approval(&self, call_id: &str) {
        self.lock().approvals.escapes_approved.remove(call_id);
    }

    /// The approval gate of one validated call (approvals-reference §3.4): `None` runs it,
    /// `Some` is its result without running.
    pub(super) async fn approve_call(
        &self,
        call: &ToolCall,
        tool: &Arc<dyn Tool>,
        cancel: &CancellationToken,
    ) -> Option<ToolOutput> {
        if self.lock().approvals.inert() {
            return None;
        }
        let subject = match tool.approval_subject(&call.arguments) {
            Ok(subject) => subject,
            Err(output) => return Some(output),
        };
        let escape = tool.approval_escape(&call.arguments, &subject);
        let verdict = {
            let mut state = self.lock();
            let broker = &mut state.approvals;
            let verdict = broker
                .evaluator()
                .evaluate(&call.name, &subject, escape.as_ref());
            // `allow_session` on an escalation lets that exact command run outside the
            // sandbox from then on (§5.4): the tool learns it through `escape_approved`.
            if verdict == Verdict::Run && broker.grants.allows_escalation(&subject) {
                broker.escapes_approved.insert(call.id.clone());
            }
            verdict
        };
        let ask = match verdict {
            Verdict::Run => return None,
            Verdict::Refuse(Refusal::Never { reason }) => {
                return Some(match &escape {
                    Some(escape) => tool.escape_denied(escape),
                    None => texts::approval_required(&reason, true),
                });
            }
            Verdict::Refuse(refusal) => return Some(texts::refusal(&refusal)),
            Verdict::Ask(ask) => ask,
        };
        let operation = "tool_call";
        let resolution = self
            .ask(call, subject.clone(), escape, ask, operation, cancel)
            .await;
        let resolution = match resolution {
            Ok(resolution) => resolution,
            Err(output) => return Some(output),
        };
        match resolution.decision {
            ResolvedDecision::AllowOnce | ResolvedDecision::AllowSession => {
                if subject.kind == SubjectKind::FileChange {
                    // An approved change re-runs on the current file: a different diff is stale.
                    match tool.approval_subject(&call.arguments) {
                        Ok(now) if now.preview != subject.preview => {
                            let path = subject
                                .paths
                                .first()
                                .map(|p| p.display().to_string())
                                .unwrap_or_default();
                            return Some(texts::stale(&path, &resolution.approval_id));
                        }
                        Ok(_) => {}
                        Err(output) => return Some(output),
                    }
                }
                None
            }
            decision => Some(texts::resolved(
                &resolution.approval_id,
                decision,
                resolution.source,
                resolution.message.as_deref(),
                resolution.timeout_ms,
            )),
        }
    }

    /// Asks for an escalation of a running `bash` call (approvals-reference §6.5): the
    /// approval's id when the client allowed running it outside the sandbox.
    pub(crate) async fn request_escalation(
        &self,
        call: &ToolCall,
        subject: Subject,
        escape: Escape,
        cancel: &CancellationToken,
    ) -> Option<String> {
        let ask = {
            let state = self.lock();
            let broker = &state.approvals;
            if broker.policy() == Policy::Never || broker.sink.is_none() {
                return None;
            }
            let mut decisions = vec![ApprovalDecision::AllowOnce, ApprovalDecision::AllowSession];
            decisions.extend([ApprovalDecision::Deny, ApprovalDecision::CancelTurn]);
            Ask {
                kind: ApprovalKind::Escalation,
                reason: escape.reason(),
                decisions,
                suggested_rule: None,
            }
        };
        let escalation = Subject {
            summary: format!(
                "Run outside the sandbox: {}",
                subject.command.as_deref().unwrap_or_default()
            ),
            ..subject
        };
        match self
            .ask(call, escalation, Some(escape), ask, "escalation", cancel)
            .await
        {
            Ok(Resolution {
                decision: ResolvedDecision::AllowOnce | ResolvedDecision::AllowSession,
                approval_id,
                ..
            }) => Some(approval_id),
            _ => None,
        }
    }

    /// Opens one request (waiting for a slot first) and waits for its resolution; with no
    /// client it resolves at once as `unattended` and returns `approval_required`.
    async fn ask(
        &self,
        call: &ToolCall,
        subject: Subject,
        escape: Option<Escape>,
        ask: Ask,
        operation: &'static str,
        cancel: &CancellationToken,
    ) -> Result<Resolution, ToolOutput> {
        let slots = {
            let mut state = self.lock();
            if state.approvals.sink.is_none() {
                return Err(self.unattended(&mut state, call, &subject, &ask, operation));
            }
            state.approvals.slots.clone()
        };
        let _permit = tokio::select! {
            permit = slots.acquire_owned() => match permit {
                Ok(permit) => permit,
                Err(_) => return Err(ToolOutput::error(errors::TOOL_ABORTED)),
            },
            () = cancel.cancelled() => return Err(ToolOutput::error(errors::TOOL_ABORTED)),
        };
        let (receiver, approval_id, timeout_ms) = {
            let mut state = self.lock();
            if cancel.is_cancelled() {
                return Err(ToolOutput::error(errors::TOOL_ABORTED));
            }
            if state.approvals.sink.is_none() {
                return Err(self.unattended(&mut state, call, &subject, &ask, operation));
            }
            let request = self.request(&state, call, &subject, &ask);
            let approval_id = request.approval_id.clone();
            let timeout_ms = state.approvals.timeout_ms();
            let (sender, receiver) = oneshot::channel();
            if let Some(sink) = state.approvals.sink.clone() {
                sink(ApprovalFrame::Request(&request));
            }
            state.approvals.pending.push(Pending {
                request,
                tool: call.name.clone(),
                subject,
                escape,
                operation,
                opened: Instant::now(),
                sender,
            });
            (receiver, approval_id, timeout_ms)
        };
        if timeout_ms > 0 {
            let host = self.host();
            let id = approval_id.clone();
            tokio::spawn(async move {
                tokio::time::sleep(std::time::Duration::from_millis(timeout_ms)).await;
                if let Some(session) = host.session() {
                    session.expire(&id);
                }
            });
        }
        receiver.await.map_err(|_| {
            texts::resolved(
                &approval_id,
                ResolvedDecision::Cancelled,
                ResolutionSource::Disconnect,
                None,
                0,
            )
        })
    }

    /// Resolves a request whose `expiresAt` passed: `deny`, source `timeout`.
    fn expire(&self, approval_id: &str) {
        let mut state = self.lock();
        let Some(index) = state
            .approvals
            .pending
            .iter()
            .position(|p| p.request.approval_id == approval_id)
        else {
            return;
        };
        let pending = state.resolve_pending(
            index,
            ResolvedDecision::Deny,
            ResolutionSource::Timeout,
            None,
        );
        State::deliver(
            pending,
            ResolvedDecision::Deny,
            ResolutionSource::Timeout,
            None,
        );
    }

    fn request(
        &self,
        state: &State,
        call: &ToolCall,
        subject: &Subject,
        ask: &Ask,
    ) -> ApprovalRequest {
        let broker = &state.approvals;
        let sandbox = broker.effective_sandbox();
        let (args, args_preview) = args_fields(&call.arguments);
        let requested_at = u64::try_from(now_millis()).unwrap_or_default();
        let timeout = broker.timeout_ms();
        ApprovalRequest {
            approval_id: uuid::Uuid::new_v4().to_string(),
            tool_call_id: call.id.clone(),
            tool_name: call.name.clone(),
            kind: ask.kind,
            reason: ask.reason.clone(),
            summary: one_line(&subject.summary),
            args,
            args_preview,
            preview: subject.preview.clone(),
            cwd: self.inner.cwd.display().to_string(),
            sandbox: CallSandbox {
                mode: sandbox.mode,
                network: sandbox.network,
            },
            suggested_rule: ask.suggested_rule.clone(),
            decisions: ask.decisions.clone(),
            requested_at,
            expires_at: (timeout > 0).then(|| requested_at + timeout),
        }
    }

    /// No client can approve: journal a `deny`/`unattended` outcome and refuse.
    fn unattended(
        &self,
        state: &mut State,
        call: &ToolCall,
        subject: &Subject,
        ask: &Ask,
        operation: &str,
    ) -> ToolOutput {
        let request = self.request(state, call, subject, ask);
        let resolution = ApprovalResolution {
            approval_id: request.approval_id.clone(),
            tool_call_id: call.id.clone(),
            decision: ResolvedDecision::Deny,
            source: ResolutionSource::Unattended,
            message: None,
        };
        state.approvals.resolved.insert(request.approval_id.clone());
        journal_resolution(state, &request, operation, &resolution, 0);
        texts::approval_required(&ask.reason, false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summaries_are_one_bounded_line() {
        assert_eq!(one_line("Run: a\n\n\tb"), "Run: a b");
        let long = one_line(&format!("Run: {}", "é".repeat(1000)));
        assert!(long.len() <= MAX_SUMMARY_BYTES);
        assert!(long.ends_with('…'));
    }

    #[test]
    fn large_arguments_become_a_preview() {
        let (args, preview) = args_fields(&json!({"content": "x".repeat(70_000)}));
        assert!(args.is_none());
        let preview = preview.unwrap();
        assert_eq!(preview.text.len(), MAX_INLINE_ARGS_BYTES);
        assert_eq!(
            preview.original_bytes,
            preview.text.len() as u64 + preview.omitted_bytes
        );
    }
}
