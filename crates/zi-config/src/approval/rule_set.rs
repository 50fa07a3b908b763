//! The rules of every layer as the gate reads them (docs/approvals.md#rule-syntax,
//! docs/approvals.md#how-a-call-is-evaluated): each list keeps its rules in order and indexes the
//! `bash` command rules by the first word of their command when a rule is added, so one evaluation
//! tests a command part only against the rules that can match it, instead of every rule against
//! every part.

use std::collections::HashMap;

use super::bash::ParsedCommand;
use super::paths::{PathBase, PathPattern};
use super::rule::{Rule, RuleKind, RuleSource, Specifier};
use super::subject::Subject;

/// A rule with its layer, and its path pattern resolved against the session.
#[derive(Debug, Clone)]
pub struct SourcedRule {
    /// The rule as written.
    pub rule: Rule,
    /// The layer it came from, named when it decides a call.
    pub source: RuleSource,
    pattern: Option<PathPattern>,
}

impl SourcedRule {
    /// `rule` from `source`, its path pattern (if any) resolved against `base`.
    pub fn new(rule: Rule, source: RuleSource, base: &PathBase) -> SourcedRule {
        let pattern = match &rule.specifier {
            Specifier::Path(spec) => Some(PathPattern::new(base, spec)),
            _ => None,
        };
        SourcedRule {
            rule,
            source,
            pattern,
        }
    }

    /// A path rule: every target path of the call matches its pattern.
    pub(super) fn matches_paths(&self, subject: &Subject) -> bool {
        let Some(pattern) = &self.pattern else {
            return false;
        };
        !subject.paths.is_empty() && subject.paths.iter().all(|path| pattern.matches(path))
    }

    /// The command of a `bash(CMD)` or `bash(CMD:*)` rule.
    fn command(&self) -> Option<&str> {
        match &self.rule.specifier {
            Specifier::Exact(command) | Specifier::Prefix(command) => Some(command),
            Specifier::All | Specifier::Path(_) => None,
        }
    }
}

/// The index key of a command or a rule's command: the text before its first space. A command
/// a rule matches (`CMD` itself, or `CMD` followed by a space) has the same key as the rule,
/// because both are normalised to single spaces the same way.
fn first_word(command: &str) -> &str {
    command.split_once(' ').map_or(command, |(first, _)| first)
}

/// One list (allow, ask or deny) in layer order.
#[derive(Debug, Clone, Default)]
pub struct RuleList {
    rules: Vec<SourcedRule>,
    /// Positions (ascending) of the command rules, by [`first_word`] of their command.
    commands: HashMap<String, Vec<usize>>,
    /// Positions (ascending) of every other rule: no specifier, or a path glob.
    others: Vec<usize>,
}

impl RuleList {
    /// How many rules the list holds.
    pub fn len(&self) -> usize {
        self.rules.len()
    }

    /// Whether the list holds no rule.
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// The rules in layer order.
    pub fn iter(&self) -> impl Iterator<Item = &SourcedRule> {
        self.rules.iter()
    }

    /// Adds a rule after the others, indexing it by its command's first word.
    pub fn push(&mut self, rule: SourcedRule) {
        let position = self.rules.len();
        match rule.command() {
            Some(command) => self
                .commands
                .entry(first_word(command).to_string())
                .or_default()
                .push(position),
            None => self.others.push(position),
        }
        self.rules.push(rule);
    }

    /// The command rules naming `tool` whose key is `command`'s, in list order.
    fn command_rules<'a>(
        &'a self,
        tool: &'a str,
        command: &str,
    ) -> impl Iterator<Item = (usize, &'a SourcedRule)> + 'a {
        let positions = self
            .commands
            .get(first_word(command))
            .map_or(&[][..], Vec::as_slice);
        positions
            .iter()
            .map(|&i| (i, &self.rules[i]))
            .filter(move |(_, r)| r.rule.names_tool(tool))
    }

    /// Deny and ask matching: the first rule, in list order, that matches any part of the
    /// call. `candidates` are the command's texts ([`ParsedCommand::deny_candidates`]), computed
    /// once per call.
    pub(super) fn first_matching_any(
        &self,
        tool: &str,
        subject: &Subject,
        candidates: Option<&[String]>,
    ) -> Option<&SourcedRule> {
        let mut first = self.others.iter().copied().find(|&i| {
            let rule = &self.rules[i];
            rule.rule.names_tool(tool)
                && match rule.rule.specifier {
                    Specifier::Path(_) => rule.matches_paths(subject),
                    _ => true,
                }
        });
        for candidate in candidates.unwrap_or_default() {
            let earlier = self
                .command_rules(tool, candidate)
                .take_while(|(i, _)| first.is_none_or(|f| *i < f))
                .find(|(_, r)| r.rule.matches_command(candidate));
            if let Some((i, _)) = earlier {
                first = Some(i);
            }
        }
        first.map(|i| &self.rules[i])
    }

    /// Allow matching: a rule without specifier allows every call of its tool; otherwise
    /// every part of a command (as [`ParsedCommand::allowed_by`] says), or every path, must
    /// match one rule.
    pub(super) fn allows(
        &self,
        tool: &str,
        subject: &Subject,
        parsed: Option<&ParsedCommand>,
    ) -> bool {
        let others = || {
            self.others
                .iter()
                .map(|&i| &self.rules[i])
                .filter(|r| r.rule.names_tool(tool))
        };
        if others().any(|r| r.rule.specifier == Specifier::All) {
            return true;
        }
        match parsed {
            Some(parsed) => parsed.allowed_by(|command| {
                self.command_rules(tool, command)
                    .any(|(_, r)| r.rule.matches_command(command))
            }),
            None => others().any(|r| r.matches_paths(subject)),
        }
    }
}

impl<'a> IntoIterator for &'a RuleList {
    type Item = &'a SourcedRule;
    type IntoIter = std::slice::Iter<'a, SourcedRule>;

    fn into_iter(self) -> Self::IntoIter {
        self.rules.iter()
    }
}

/// The rules of every layer, by list.
#[derive(Debug, Clone, Default)]
pub struct RuleSet {
    /// Calls these match run without asking (unless a deny or ask rule or an escape says
    /// otherwise).
    pub allow: RuleList,
    /// Calls these match are asked about, whatever the policy.
    pub ask: RuleList,
    /// Calls these match are refused; checked first.
    pub deny: RuleList,
}

impl RuleSet {
    /// Adds a rule to the list `kind` names.
    pub fn push(&mut self, kind: RuleKind, rule: SourcedRule) {
        match kind {
            RuleKind::Allow => self.allow.push(rule),
            RuleKind::Ask => self.ask.push(rule),
            RuleKind::Deny => self.deny.push(rule),
        }
    }

    /// Adds every rule of `other`, list by list.
    pub fn extend(&mut self, other: &RuleSet) {
        for (list, more) in [
            (&mut self.allow, &other.allow),
            (&mut self.ask, &other.ask),
            (&mut self.deny, &other.deny),
        ] {
            for rule in more.iter() {
                list.push(rule.clone());
            }
        }
    }

    /// A set of one allow rule (does a rule given with `allow_session` match the call?).
    pub fn single_allow(rule: SourcedRule) -> RuleSet {
        let mut set = RuleSet::default();
        set.allow.push(rule);
        set
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::super::bash;
    use super::*;

    fn base() -> PathBase {
        PathBase {
            cwd: PathBuf::from("/nonexistent-zi-test/p"),
            home: None,
        }
    }

    fn list(rules: &[&str]) -> RuleList {
        let mut list = RuleList::default();
        for text in rules {
            let rule = Rule::parse(text).unwrap();
            list.push(SourcedRule::new(rule, RuleSource::Global, &base()));
        }
        list
    }

    /// The old per-rule scan, in list order: the reference the index must agree with.
    fn scanned<'a>(list: &'a RuleList, tool: &str, command: &str) -> Option<&'a str> {
        let candidates = bash::parse(command).deny_candidates();
        list.iter()
            .find(|r| {
                r.rule.names_tool(tool)
                    && match r.rule.specifier {
                        Specifier::All => true,
                        Specifier::Path(_) => false,
                        _ => candidates.iter().any(|c| r.rule.matches_command(c)),
                    }
            })
            .map(|r| r.rule.text.as_str())
    }

    #[test]
    fn the_first_matching_rule_in_list_order_wins_as_in_a_scan() {
        let list = list(&[
            "bash(git push origin:*)",
            "bash(rm -rf:*)",
            "bash(git:*)",
            "bash(git push)",
            "read",
            "bash(sudo:*)",
            "bash('my tool' run:*)",
            "bash",
        ]);
        for command in [
            "git push origin main",
            "git push",
            "git status && rm -rf x",
            "rm -rf x; git push origin main",
            "sudo rm -rf x",
            "ls",
            "'my tool' run now",
            "echo $(git push)",
        ] {
            let subject = Subject::exec(command, false);
            let candidates = bash::parse(command).deny_candidates();
            assert_eq!(
                list.first_matching_any("bash", &subject, Some(&candidates))
                    .map(|r| r.rule.text.as_str()),
                scanned(&list, "bash", command),
                "{command}"
            );
        }
        let rules = self::list(&["bash(ls:*)", "read"]);
        let read = Subject::read(PathBuf::from("/x"));
        assert_eq!(
            rules
                .first_matching_any("read", &read, None)
                .map(|r| r.rule.text.as_str()),
            Some("read")
        );
        assert!(rules.first_matching_any("edit", &read, None).is_none());
    }

    #[test]
    fn allow_lists_need_every_part_through_the_index() {
        let list = list(&[
            "bash(cargo test:*)",
            "bash(cargo build)",
            "bash(echo 'a b':*)",
        ]);
        let allows = |command: &str| {
            let parsed = bash::parse(command);
            list.allows("bash", &Subject::exec(command, false), Some(&parsed))
        };
        assert!(allows("cargo test -p x && cargo build"));
        assert!(allows("echo 'a b' c"));
        assert!(!allows("cargo test && cargo build --release"));
        assert!(!allows("cargo   tests"));
        assert!(!allows("echo 'a  b'"));
    }

    #[test]
    fn first_words_agree_for_every_matching_command() {
        for (rule, command) in [
            ("git push", "git push origin"),
            ("git", "git push"),
            ("make", "make"),
            ("'a b' c", "'a b' c d"),
        ] {
            assert_eq!(first_word(rule), first_word(command));
        }
    }
}
