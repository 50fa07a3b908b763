//! Params of `connection.set_approvals` and `approval.respond`
//! (docs/approvals.md#decisions-and-session-grants).

use serde::Serialize;
use serde_json::{Map, Value};

use super::{AllowEmpty, DecodeFailure, DecodeParams, bounded_string, non_negative_integer};
use crate::approval::{ApprovalDecision, ApprovalPolicy, SandboxMode};
#[cfg(feature = "schema")]
use crate::approval_rule::MAX_RULE_BYTES;
use crate::approval_rule::{MAX_RULES_PER_LIST, Rule};
use crate::errors;

/// Most writable roots a connection may add, and longest root in bytes.
pub const MAX_WRITABLE_ROOTS: usize = 32;
/// Longest writable root in bytes.
pub const MAX_WRITABLE_ROOT_BYTES: usize = 4_096;
/// Longest approval wait in ms (one day); 0 is no timeout.
pub const MAX_APPROVAL_TIMEOUT_MS: u64 = 86_400_000;
/// Longest `approval.respond` deny message.
pub const MAX_APPROVAL_MESSAGE_BYTES: usize = 8_192;
/// Longest approval id.
pub const MAX_APPROVAL_ID_BYTES: usize = 256;

/// The sandbox a connection asks for (it may only tighten the operator's).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SandboxParams {
    /// The mode.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<SandboxMode>,
    /// Whether the network stays reachable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<bool>,
    /// Extra writable roots: at most 32 absolute paths of at most 4,096 bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(length(max = MAX_WRITABLE_ROOTS)))]
    pub writable_roots: Option<Vec<String>>,
}

/// Rules a connection adds, by list (each at most 256 rules of at most 4,096 bytes).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct ApprovalRules {
    /// Calls that run without asking.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[cfg_attr(feature = "schema", schemars(length(max = MAX_RULES_PER_LIST)))]
    pub allow: Vec<String>,
    /// Calls that always ask.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[cfg_attr(feature = "schema", schemars(length(max = MAX_RULES_PER_LIST)))]
    pub ask: Vec<String>,
    /// Calls that never run.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[cfg_attr(feature = "schema", schemars(length(max = MAX_RULES_PER_LIST)))]
    pub deny: Vec<String>,
}

/// Params of `connection.set_approvals`. Given keys replace the connection's earlier values.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SetApprovalsParams {
    /// Whether this connection receives approval requests.
    pub enabled: bool,
    /// The policy (only stricter than the operator's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<ApprovalPolicy>,
    /// The sandbox (only stricter than the operator's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<SandboxParams>,
    /// Rules added to every other layer's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rules: Option<ApprovalRules>,
    /// How long a request waits, 0 through 86,400,000 ms (0: no timeout).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(range(max = MAX_APPROVAL_TIMEOUT_MS)))]
    pub timeout_ms: Option<u64>,
}

fn decode_sandbox(value: Value) -> Result<SandboxParams, DecodeFailure> {
    let Value::Object(object) = value else {
        return Err(errors::SANDBOX_OBJECT.into());
    };
    if object
        .keys()
        .any(|key| !["mode", "network", "writableRoots"].contains(&key.as_str()))
    {
        return Err(errors::SANDBOX_OBJECT.into());
    }
    let mut sandbox = SandboxParams::default();
    if let Some(mode) = object.get("mode") {
        sandbox.mode = Some(
            mode.as_str()
                .and_then(SandboxMode::parse)
                .ok_or(errors::SANDBOX_MODE)?,
        );
    }
    if let Some(network) = object.get("network") {
        sandbox.network = Some(network.as_bool().ok_or(errors::SANDBOX_NETWORK)?);
    }
    if let Some(roots) = object.get("writableRoots") {
        let roots = roots
            .as_array()
            .filter(|roots| roots.len() <= MAX_WRITABLE_ROOTS)
            .and_then(|roots| {
                roots
                    .iter()
                    .map(|root| {
                        root.as_str()
                            .filter(|r| r.starts_with('/') && r.len() <= MAX_WRITABLE_ROOT_BYTES)
                            .map(str::to_string)
                    })
                    .collect::<Option<Vec<_>>>()
            })
            .ok_or(errors::SANDBOX_WRITABLE_ROOTS)?;
        sandbox.writable_roots = Some(roots);
    }
    Ok(sandbox)
}

/// A rules object: its shape first, then each rule in list order.
fn decode_rules(value: Value) -> Result<ApprovalRules, DecodeFailure> {
    let Value::Object(object) = value else {
        return Err(errors::APPROVAL_RULES.into());
    };
    if object
        .keys()
        .any(|key| !["allow", "ask", "deny"].contains(&key.as_str()))
    {
        return Err(errors::APPROVAL_RULES.into());
    }
    let list = |key: &str| -> Result<Vec<String>, DecodeFailure> {
        match object.get(key) {
            None => Ok(Vec::new()),
            Some(Value::Array(items)) if items.len() <= MAX_RULES_PER_LIST => items
                .iter()
                .map(|item| item.as_str().map(str::to_string))
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| errors::APPROVAL_RULES.into()),
            Some(_) => Err(errors::APPROVAL_RULES.into()),
        }
    };
    let rules = ApprovalRules {
        allow: list("allow")?,
        ask: list("ask")?,
        deny: list("deny")?,
    };
    for rule in rules.allow.iter().chain(&rules.ask).chain(&rules.deny) {
        Rule::parse(rule).map_err(|error| DecodeFailure::Owned(error.to_string()))?;
    }
    Ok(rules)
}

impl DecodeParams for SetApprovalsParams {
    const KEYS: &'static [&'static str] = &["enabled", "policy", "sandbox", "rules", "timeoutMs"];
    const REQUIRED: &'static [&'static str] = &[];

    fn decode_checked(mut params: Map<String, Value>) -> Result<Self, DecodeFailure> {
        let enabled = params
            .get("enabled")
            .and_then(Value::as_bool)
            .ok_or(errors::APPROVALS_ENABLED)?;
        let policy = match params.get("policy") {
            None => None,
            Some(value) => Some(
                value
                    .as_str()
                    .and_then(ApprovalPolicy::parse)
                    .ok_or(errors::APPROVAL_POLICY)?,
            ),
        };
        let sandbox = params.remove("sandbox").map(decode_sandbox).transpose()?;
        let rules = params.remove("rules").map(decode_rules).transpose()?;
        let timeout_ms = match params.get("timeoutMs") {
            None => None,
            Some(value) => Some(
                non_negative_integer(value)
                    .filter(|ms| *ms <= MAX_APPROVAL_TIMEOUT_MS)
                    .ok_or(errors::APPROVAL_TIMEOUT)?,
            ),
        };
        Ok(SetApprovalsParams {
            enabled,
            policy,
            sandbox,
            rules,
            timeout_ms,
        })
    }
}

/// Params of `approval.respond`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ApprovalRespondParams {
    /// The request, a non-empty string of at most 256 bytes.
    #[cfg_attr(feature = "schema", schemars(length(min = 1, max = MAX_APPROVAL_ID_BYTES)))]
    pub approval_id: String,
    /// The decision (one of the request's `decisions`).
    pub decision: ApprovalDecision,
    /// With `deny`: what the model is told, at most 8,192 bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(length(max = MAX_APPROVAL_MESSAGE_BYTES)))]
    pub message: Option<String>,
    /// With `allow_session`: the grant instead of the default one, at most 4,096 bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(length(min = 1, max = MAX_RULE_BYTES)))]
    pub rule: Option<String>,
}

impl DecodeParams for ApprovalRespondParams {
    const KEYS: &'static [&'static str] = &["approvalId", "decision", "message", "rule"];
    const REQUIRED: &'static [&'static str] = &[];

    fn decode_checked(mut params: Map<String, Value>) -> Result<Self, DecodeFailure> {
        let approval_id = bounded_string(
            params.remove("approvalId"),
            MAX_APPROVAL_ID_BYTES,
            AllowEmpty::No,
            errors::APPROVAL_ID,
        )?;
        let decision = params
            .get("decision")
            .and_then(Value::as_str)
            .and_then(ApprovalDecision::parse)
            .ok_or(errors::APPROVAL_DECISION)?;
        let message = match params.remove("message") {
            None => None,
            Some(value) => Some(bounded_string(
                Some(value),
                MAX_APPROVAL_MESSAGE_BYTES,
                AllowEmpty::Yes,
                errors::APPROVAL_MESSAGE,
            )?),
        };
        if message.is_some() && decision != ApprovalDecision::Deny {
            return Err(errors::APPROVAL_MESSAGE_DENY_ONLY.into());
        }
        let rule = match params.remove("rule") {
            None => None,
            Some(Value::String(rule)) => {
                Rule::parse(&rule).map_err(|error| DecodeFailure::Owned(error.to_string()))?;
                Some(rule)
            }
            Some(other) => {
                return Err(DecodeFailure::Owned(format!(
                    "Invalid approval rule: {other}: unknown syntax"
                )));
            }
        };
        if rule.is_some() && decision != ApprovalDecision::AllowSession {
            return Err(errors::APPROVAL_RULE_SESSION_ONLY.into());
        }
        Ok(ApprovalRespondParams {
            approval_id,
            decision,
            message,
            rule,
        })
    }
}
