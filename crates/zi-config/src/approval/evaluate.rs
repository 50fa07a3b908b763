//! The per-call evaluation (docs/approvals.md#how-a-call-is-evaluated): broken → deny rules →
//! sandbox escapes → ask rules → allow rules and grants → policy.

use std::path::PathBuf;

use zi_protocol::approval::{ApprovalDecision, ApprovalKind, ApprovalReason};

use super::bash;
use super::paths::PathBase;
use super::policy::{Policy, is_contained};
use super::rule::{Rule, RuleSource, Specifier};
use super::rule_set::{RuleSet, SourcedRule};
use super::subject::{Subject, SubjectKind};

/// Why a call would leave its sandbox (docs/approvals.md#write-and-edit,
/// docs/approvals.md#escalation). The sandbox code computes it and hands it to
/// [`Evaluator::evaluate`]; every escape needs an approval (or is denied under `never`), and allow
/// rules never remove it.
#[derive(Debug, Clone, PartialEq)]
pub enum Escape {
    /// A `write`/`edit` target outside the writable roots.
    OutsideWritableRoots {
        /// The canonical target.
        path: PathBuf,
    },
    /// A `write`/`edit` target under `.git/`, `.zi/` or the agent directory.
    ProtectedPath {
        /// The canonical target.
        path: PathBuf,
    },
    /// A `bash` call whose required sandbox cannot be applied.
    SandboxUnavailable {
        /// Why the sandbox is unavailable.
        message: String,
    },
    /// A sandboxed `bash` call that looks sandbox-denied (asks to re-run it unsandboxed).
    SandboxDenied {
        /// The command's exit code, when it exited.
        exit_code: Option<i64>,
        /// The signal that ended it, when one did.
        signal: Option<String>,
    },
}

impl Escape {
    /// The reason an approval request gives for it.
    pub fn reason(&self) -> ApprovalReason {
        match self {
            Escape::OutsideWritableRoots { path } => ApprovalReason::OutsideWritableRoots {
                path: path.display().to_string(),
            },
            Escape::ProtectedPath { path } => ApprovalReason::ProtectedPath {
                path: path.display().to_string(),
            },
            Escape::SandboxUnavailable { message } => ApprovalReason::SandboxUnavailable {
                message: message.clone(),
            },
            Escape::SandboxDenied { exit_code, signal } => ApprovalReason::SandboxDenied {
                exit_code: *exit_code,
                signal: signal.clone(),
            },
        }
    }

    /// Escapes of `bash` are requests to run it outside the sandbox.
    fn is_escalation(&self) -> bool {
        matches!(
            self,
            Escape::SandboxUnavailable { .. } | Escape::SandboxDenied { .. }
        )
    }
}

/// What `allow_session` granted: allow rules (commands as exact rules, paths, tool names) and
/// commands allowed to run outside the sandbox.
#[derive(Debug, Clone, Default)]
pub struct Grants {
    /// Whole normalised `bash` commands.
    commands: Vec<String>,
    rules: Vec<SourcedRule>,
    escalations: Vec<String>,
}

impl Grants {
    /// How many grants there are, for the approvals state.
    pub fn len(&self) -> usize {
        self.commands.len() + self.rules.len() + self.escalations.len()
    }

    /// Whether nothing was granted.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Grants an explicit rule (an `allow_session` answer that names one).
    pub fn grant_rule(&mut self, rule: SourcedRule) {
        self.rules.push(rule);
    }

    /// The grant `allow_session` adds for a call without an explicit rule
    /// (docs/approvals.md#decisions-and-session-grants).
    pub fn grant_call(
        &mut self,
        tool: &str,
        subject: &Subject,
        escape: Option<&Escape>,
        base: &PathBase,
    ) {
        match (escape, subject.command.as_deref()) {
            (Some(escape), Some(command)) if escape.is_escalation() => {
                self.escalations.push(bash::collapse_whitespace(command));
            }
            (_, Some(command)) => self.commands.push(bash::collapse_whitespace(command)),
            _ => {
                let text = match subject.paths.first() {
                    Some(path) if subject.kind == SubjectKind::FileChange => {
                        format!("edit({})", path.display())
                    }
                    _ => tool.to_string(),
                };
                if let Ok(rule) = Rule::parse(&text) {
                    self.rules
                        .push(SourcedRule::new(rule, RuleSource::Session, base));
                }
            }
        }
    }

    fn allows(&self, tool: &str, subject: &Subject) -> bool {
        if let Some(command) = &subject.command
            && self.commands.contains(&bash::collapse_whitespace(command))
        {
            return true;
        }
        self.rules.iter().any(|r| {
            r.rule.names_tool(tool)
                && match r.rule.specifier {
                    Specifier::All => true,
                    Specifier::Path(_) => r.matches_paths(subject),
                    _ => false,
                }
        })
    }

    /// Whether `allow_session` on an escalation granted this exact command.
    pub fn allows_escalation(&self, subject: &Subject) -> bool {
        subject
            .command
            .as_ref()
            .is_some_and(|c| self.escalations.contains(&bash::collapse_whitespace(c)))
    }
}

/// A refusal decided without asking.
#[derive(Debug, Clone, PartialEq)]
pub enum Refusal {
    /// Approvals are broken (fail closed).
    ConfigInvalid {
        /// The settings file that broke them.
        path: String,
        /// Its problem.
        message: String,
    },
    /// A deny rule matched.
    DeniedByRule {
        /// The rule's text.
        rule: String,
        /// The layer it came from.
        source: RuleSource,
    },
    /// Something needed approval and the policy is `never`.
    Never {
        /// What needed it.
        reason: ApprovalReason,
    },
}

/// A request to make (or, with no client, to resolve as `unattended`).
#[derive(Debug, Clone, PartialEq)]
pub struct Ask {
    /// What the call does, for the person who answers.
    pub kind: ApprovalKind,
    /// Why it needs an answer.
    pub reason: ApprovalReason,
    /// The answers offered.
    pub decisions: Vec<ApprovalDecision>,
    /// An allow rule that would cover calls like this one, offered for `allow_session`.
    pub suggested_rule: Option<String>,
}

/// The evaluation of one call.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// The call runs without asking.
    Run,
    /// The call does not run; nobody is asked.
    Refuse(Refusal),
    /// Someone must answer before the call runs.
    Ask(Ask),
}

/// Everything the evaluation reads, borrowed for one call.
pub struct Evaluator<'a> {
    /// The effective policy.
    pub policy: Policy,
    /// `(path, problem)` of the settings file that broke approvals: every call is refused.
    pub broken: Option<&'a (String, String)>,
    /// Every layer's rules.
    pub rules: &'a RuleSet,
    /// The session's grants.
    pub grants: &'a Grants,
    /// What relative and `~/` paths in rules and subjects are resolved against.
    pub base: &'a PathBase,
}

impl Evaluator<'_> {
    /// Evaluates one validated call. `escape` is the sandbox's finding for it, if any.
    pub fn evaluate(&self, tool: &str, subject: &Subject, escape: Option<&Escape>) -> Verdict {
        if let Some((path, message)) = self.broken
            && !is_contained(tool)
        {
            return Verdict::Refuse(Refusal::ConfigInvalid {
                path: path.clone(),
                message: message.clone(),
            });
        }
        let parsed = subject.command.as_deref().map(bash::parse);
        // Split and canonicalised once per call, not once per rule.
        let candidates = match &parsed {
            Some(parsed) if !(self.rules.deny.is_empty() && self.rules.ask.is_empty()) => {
                Some(parsed.deny_candidates())
            }
            _ => None,
        };
        let candidates = candidates.as_deref();
        if let Some(deny) = self
            .rules
            .deny
            .first_matching_any(tool, subject, candidates)
        {
            return Verdict::Refuse(Refusal::DeniedByRule {
                rule: deny.rule.text.clone(),
                source: deny.source,
            });
        }
        let escape =
            escape.filter(|e| !(e.is_escalation() && self.grants.allows_escalation(subject)));
        let ask_rule = self.rules.ask.first_matching_any(tool, subject, candidates);
        let allowed = || {
            self.grants.allows(tool, subject)
                || self.rules.allow.allows(tool, subject, parsed.as_ref())
        };
        let policy_asks = escape.is_none()
            && ask_rule.is_none()
            && !allowed()
            && self.policy_asks(tool, subject, parsed.as_ref());
        let reason = match (escape, ask_rule) {
            (Some(escape), _) => escape.reason(),
            (None, Some(rule)) => ApprovalReason::Rule {
                rule: rule.rule.text.clone(),
                source: rule.source.as_str().to_string(),
            },
            (None, None) if policy_asks => ApprovalReason::Policy {
                policy: self.policy.as_str().to_string(),
            },
            (None, None) => return Verdict::Run,
        };
        if self.policy == Policy::Never {
            return Verdict::Refuse(Refusal::Never { reason });
        }
        let kind = match (escape, subject.kind) {
            (Some(escape), _) if escape.is_escalation() => ApprovalKind::Escalation,
            (_, SubjectKind::Exec) => ApprovalKind::Exec,
            (_, SubjectKind::FileChange) => ApprovalKind::FileChange,
            (_, SubjectKind::Tool) => ApprovalKind::Tool,
        };
        // An ask rule offers no `allow_session` (docs/approvals.md#the-request), so there is no
        // rule to suggest for it (`suggestedRule` is a rule to pass with `allow_session`,
        // docs/approvals.md#decisions-and-session-grants).
        let session_grant = !matches!(reason, ApprovalReason::Rule { .. });
        let mut decisions = vec![ApprovalDecision::AllowOnce];
        if session_grant {
            decisions.push(ApprovalDecision::AllowSession);
        }
        decisions.extend([ApprovalDecision::Deny, ApprovalDecision::CancelTurn]);
        let suggested_rule = match kind {
            ApprovalKind::Escalation => None,
            _ if !session_grant => None,
            _ => suggested_rule(tool, subject, parsed.as_ref(), self.base),
        };
        Verdict::Ask(Ask {
            kind,
            reason,
            decisions,
            suggested_rule,
        })
    }

    fn policy_asks(
        &self,
        tool: &str,
        subject: &Subject,
        parsed: Option<&bash::ParsedCommand>,
    ) -> bool {
        if is_contained(tool) {
            return false;
        }
        let safe_bash = || parsed.is_some_and(bash::ParsedCommand::is_safe);
        match self.policy {
            Policy::Never | Policy::OnFailure => false,
            Policy::AcceptEdits => match subject.kind {
                SubjectKind::Exec => !safe_bash(),
                SubjectKind::FileChange => false,
                SubjectKind::Tool => true,
            },
            Policy::Untrusted => subject.kind != SubjectKind::Exec || !safe_bash(),
        }
    }

    /// Does `rule` (given with `allow_session`) match this call as an allow rule would?
    pub fn rule_matches_call(&self, rule: &Rule, tool: &str, subject: &Subject) -> bool {
        let parsed = subject.command.as_deref().map(bash::parse);
        let sourced = SourcedRule::new(rule.clone(), RuleSource::Session, self.base);
        RuleSet::single_allow(sourced)
            .allow
            .allows(tool, subject, parsed.as_ref())
    }
}

const TWO_WORD_COMMANDS: [&str; 10] = [
    "git", "npm", "pnpm", "yarn", "cargo", "go", "make", "docker", "kubectl", "pip",
];

/// `suggestedRule` (docs/approvals.md#decisions-and-session-grants).
fn suggested_rule(
    tool: &str,
    subject: &Subject,
    parsed: Option<&bash::ParsedCommand>,
    base: &PathBase,
) -> Option<String> {
    if let Some(parsed) = parsed {
        let words = &parsed.commands.first()?.words;
        let first = words.first()?;
        if first.raw.contains(['*', '(', ')']) {
            return None;
        }
        let candidate = match words.get(1) {
            Some(second)
                if TWO_WORD_COMMANDS.contains(&first.value.as_str())
                    && !second.raw.contains(['*', '(', ')']) =>
            {
                format!("bash({} {}:*)", first.raw, second.raw)
            }
            _ => format!("bash({}:*)", first.raw),
        };
        return Rule::parse(&candidate).ok().map(|rule| rule.text);
    }
    if subject.kind == SubjectKind::FileChange {
        let path = subject.paths.first()?;
        let dir = path.parent()?;
        let cwd = base.cwd.canonicalize().unwrap_or_else(|_| base.cwd.clone());
        let shown = match dir.strip_prefix(&cwd) {
            Ok(relative) if relative.as_os_str().is_empty() => "**".to_string(),
            Ok(relative) => format!("{}/**", relative.display()),
            Err(_) => format!("{}/**", dir.display()),
        };
        return Rule::parse(&format!("edit({shown})"))
            .ok()
            .map(|rule| rule.text);
    }
    Some(tool.to_string())
}
