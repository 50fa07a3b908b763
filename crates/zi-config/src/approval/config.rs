//! Approval configuration and its layers (docs/approvals.md#layers-and-precedence): settings files
//! (global, trusted project), `ZI_APPROVALS`, CLI flags, then the connection
//! (`connection.set_approvals`).
//!
//! Scalars: the last layer that sets one wins, except that the connection may only make the
//! policy stricter (docs/approvals.md#layers-and-precedence). Rules: the union of every layer. An
//! invalid `approvals` value makes its settings file invalid and approvals *broken* (fail closed)
//! until a higher layer sets `policy`.

use serde_json::Value;

use super::paths::PathBase;
use super::policy::{POLICY_VALUES, Policy};
use super::rule::{MAX_RULES_PER_LIST, Rule, RuleError, RuleKind, RuleSource};
use super::rule_set::{RuleSet, SourcedRule};

/// Longest approval wait that can be configured, in ms (one day); 0 means no timeout.
pub const MAX_TIMEOUT_MS: u64 = 86_400_000;

/// One layer's approval values, parsed.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ApprovalLayer {
    /// `policy`, when the layer sets it.
    pub policy: Option<Policy>,
    /// `timeoutMs`, when the layer sets it.
    pub timeout_ms: Option<u64>,
    /// The layer's rules, each with its list.
    pub rules: Vec<(RuleKind, Rule)>,
}

const LISTS: [(&str, RuleKind); 3] = [
    ("allow", RuleKind::Allow),
    ("ask", RuleKind::Ask),
    ("deny", RuleKind::Deny),
];

/// Why an `approvals` settings value is invalid; `Display` is the problem named in the file's
/// warning and in `approval_config_invalid` results.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ApprovalConfigError {
    #[error("approvals must be an object with policy, timeoutMs, or rules")]
    NotAnObject,
    #[error("approvals.policy must be {POLICY_VALUES}")]
    Policy,
    #[error("approvals.timeoutMs must be an integer from 0 through {MAX_TIMEOUT_MS}")]
    TimeoutMs,
    #[error("approvals.rules must be an object of at most {MAX_RULES_PER_LIST} rules per list")]
    Rules,
    /// A rule that does not parse carries its own text.
    #[error(transparent)]
    Rule(#[from] RuleError),
}

/// Parses a rules object `{"allow":[…],"ask":[…],"deny":[…]}`.
pub(crate) fn parse_rules(value: &Value) -> Result<Vec<(RuleKind, Rule)>, ApprovalConfigError> {
    let shape = ApprovalConfigError::Rules;
    let Some(object) = value.as_object() else {
        return Err(shape);
    };
    if object
        .keys()
        .any(|key| !LISTS.iter().any(|(name, _)| name == key))
    {
        return Err(shape);
    }
    let mut rules = Vec::new();
    for (name, kind) in LISTS {
        let Some(list) = object.get(name) else {
            continue;
        };
        let Some(items) = list
            .as_array()
            .filter(|items| items.len() <= MAX_RULES_PER_LIST)
        else {
            return Err(shape);
        };
        for item in items {
            let Some(text) = item.as_str() else {
                return Err(shape);
            };
            rules.push((kind, Rule::parse(text)?));
        }
    }
    Ok(rules)
}

/// Parses the `approvals` value of one settings file.
pub(crate) fn parse_settings_value(value: &Value) -> Result<ApprovalLayer, ApprovalConfigError> {
    let Some(object) = value.as_object() else {
        return Err(ApprovalConfigError::NotAnObject);
    };
    if object
        .keys()
        .any(|key| !["policy", "timeoutMs", "rules"].contains(&key.as_str()))
    {
        return Err(ApprovalConfigError::NotAnObject);
    }
    let mut layer = ApprovalLayer::default();
    if let Some(policy) = object.get("policy") {
        layer.policy = Some(
            policy
                .as_str()
                .and_then(Policy::parse)
                .ok_or(ApprovalConfigError::Policy)?,
        );
    }
    if let Some(timeout) = object.get("timeoutMs") {
        layer.timeout_ms = Some(
            timeout
                .as_u64()
                .filter(|ms| *ms <= MAX_TIMEOUT_MS)
                .ok_or(ApprovalConfigError::TimeoutMs)?,
        );
    }
    if let Some(rules) = object.get("rules") {
        layer.rules = parse_rules(rules)?;
    }
    Ok(layer)
}

/// Where the effective policy came from, named in ceiling errors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PolicySource {
    /// The global settings file.
    Global,
    /// The trusted project's settings file.
    Project,
    /// `ZI_APPROVALS`.
    Environment,
    /// `--approvals`.
    Cli,
}

impl PolicySource {
    /// The source as error texts name it.
    pub fn describe(self) -> &'static str {
        match self {
            PolicySource::Global => "global settings",
            PolicySource::Project => "project settings",
            PolicySource::Environment => "ZI_APPROVALS",
            PolicySource::Cli => "--approvals",
        }
    }
}

/// One settings file's contribution: its values, or the problem that broke it.
#[derive(Debug, Clone)]
pub enum SettingsLayer {
    /// The file has no `approvals` key, or there is no file.
    Absent,
    /// The file's `approvals` value, parsed.
    Valid(ApprovalLayer),
    /// The file's path and problem.
    Broken {
        /// The settings file.
        path: String,
        /// Why its `approvals` value is invalid.
        problem: String,
    },
}

/// The operator's approval configuration: every layer below the connection.
#[derive(Debug, Clone, Default)]
pub struct OperatorApprovals {
    /// The effective policy.
    pub policy: Policy,
    /// The layer that set it; `None` when none did (the default policy).
    pub policy_source: Option<PolicySource>,
    /// How long a request waits for an answer, in ms; 0 waits forever.
    pub timeout_ms: u64,
    /// The union of every layer's rules.
    pub rules: RuleSet,
    /// `(path, problem)` of the settings file that broke approvals.
    pub broken: Option<(String, String)>,
}

impl OperatorApprovals {
    /// Layers in precedence order: global and project settings, `ZI_APPROVALS`, then the CLI
    /// (`--approvals`, `--approval-timeout-ms`, `--allow`/`--ask`/`--deny`).
    pub fn from_layers(
        global: SettingsLayer,
        project: SettingsLayer,
        environment: Option<Policy>,
        cli: ApprovalLayer,
        base: &PathBase,
    ) -> OperatorApprovals {
        let mut config = OperatorApprovals::default();
        let mut broken_rank = None;
        for (rank, (layer, source, policy_source)) in [
            (global, RuleSource::Global, PolicySource::Global),
            (project, RuleSource::Project, PolicySource::Project),
        ]
        .into_iter()
        .enumerate()
        {
            match layer {
                SettingsLayer::Absent => {}
                SettingsLayer::Valid(values) => config.apply(values, source, policy_source, base),
                SettingsLayer::Broken { path, problem } => {
                    if config.broken.is_none() {
                        config.broken = Some((path, problem));
                        broken_rank = Some(rank);
                    }
                }
            }
            if let Some(broken) = broken_rank
                && rank > broken
                && config.policy_source == Some(PolicySource::Project)
            {
                config.broken = None;
            }
        }
        if let Some(policy) = environment {
            config.policy = policy;
            config.policy_source = Some(PolicySource::Environment);
            config.broken = None;
        }
        if cli.policy.is_some() {
            config.broken = None;
        }
        config.apply(cli, RuleSource::Cli, PolicySource::Cli, base);
        config
    }

    fn apply(
        &mut self,
        layer: ApprovalLayer,
        source: RuleSource,
        policy_source: PolicySource,
        base: &PathBase,
    ) {
        if let Some(policy) = layer.policy {
            self.policy = policy;
            self.policy_source = Some(policy_source);
        }
        if let Some(timeout) = layer.timeout_ms {
            self.timeout_ms = timeout;
        }
        for (kind, rule) in layer.rules {
            self.rules.push(kind, SourcedRule::new(rule, source, base));
        }
    }

    /// True when nothing is configured: zi behaves as v1 and evaluates nothing.
    pub fn is_inert(&self) -> bool {
        self.policy == Policy::Never
            && self.broken.is_none()
            && self.rules.allow.is_empty()
            && self.rules.ask.is_empty()
            && self.rules.deny.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn base() -> PathBase {
        PathBase {
            cwd: "/p".into(),
            home: None,
        }
    }

    #[test]
    fn settings_values_are_checked_with_their_messages() {
        let ok = parse_settings_value(
            &json!({"policy":"untrusted","timeoutMs":5,"rules":{"deny":["bash(rm:*)"]}}),
        )
        .unwrap();
        assert_eq!(ok.policy, Some(Policy::Untrusted));
        assert_eq!(ok.timeout_ms, Some(5));
        assert_eq!(ok.rules.len(), 1);
        for (value, message) in [
            (
                json!(1),
                "approvals must be an object with policy, timeoutMs, or rules",
            ),
            (
                json!({"mode":1}),
                "approvals must be an object with policy, timeoutMs, or rules",
            ),
            (
                json!({"policy":"always"}),
                "approvals.policy must be never, on-failure, accept-edits, or untrusted",
            ),
            (
                json!({"timeoutMs":86_400_001u64}),
                "approvals.timeoutMs must be an integer from 0 through 86400000",
            ),
            (
                json!({"rules":{"allow":"bash"}}),
                "approvals.rules must be an object of at most 256 rules per list",
            ),
            (
                json!({"rules":{"maybe":[]}}),
                "approvals.rules must be an object of at most 256 rules per list",
            ),
            (
                json!({"rules":{"deny":["bash(rm"]}}),
                "Invalid approval rule: bash(rm: unknown syntax",
            ),
        ] {
            assert_eq!(
                parse_settings_value(&value).unwrap_err().to_string(),
                message
            );
        }
    }

    #[test]
    fn later_layers_win_and_a_higher_policy_unbreaks() {
        let global = SettingsLayer::Valid(ApprovalLayer {
            policy: Some(Policy::Untrusted),
            ..ApprovalLayer::default()
        });
        let broken = SettingsLayer::Broken {
            path: "/p/.zi/settings.json".into(),
            problem: "x".into(),
        };
        let config = OperatorApprovals::from_layers(
            global.clone(),
            broken.clone(),
            None,
            ApprovalLayer::default(),
            &base(),
        );
        assert_eq!(config.policy, Policy::Untrusted);
        assert!(config.broken.is_some());
        let cli = ApprovalLayer {
            policy: Some(Policy::AcceptEdits),
            ..ApprovalLayer::default()
        };
        let config = OperatorApprovals::from_layers(global, broken, None, cli, &base());
        assert_eq!(config.policy, Policy::AcceptEdits);
        assert_eq!(config.policy_source, Some(PolicySource::Cli));
        assert!(config.broken.is_none());
        assert!(OperatorApprovals::default().is_inert());
    }
}
