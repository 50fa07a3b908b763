//! Rule syntax (docs/approvals.md#rule-syntax): `TOOL` or `TOOL(SPEC)`, in `allow`, `ask` and
//! `deny` lists. Pure, so the decoder of `connection.set_approvals` and `approval.respond` checks
//! rules with the same parser the evaluator uses.

use std::fmt;

/// Longest rule in bytes.
pub const MAX_RULE_BYTES: usize = 4_096;
/// Most rules per list per layer.
pub const MAX_RULES_PER_LIST: usize = 256;

/// Tools whose rules take a specifier: a command prefix for `bash`, a path glob for the rest.
const SPECIFIER_TOOLS: [&str; 4] = ["bash", "edit", "write", "read"];

/// Where a rule came from; named in `reason.source` and in `denied_by_rule` texts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuleSource {
    /// `<agentDir>/settings.json`.
    Global,
    /// Trusted `<cwd>/.zi/settings.json`.
    Project,
    /// `--allow`, `--ask`, `--deny`.
    Cli,
    /// `connection.set_approvals`.
    Connection,
    /// A session grant (`allow_session`); only ever an allow rule.
    Session,
}

impl RuleSource {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            RuleSource::Global => "global",
            RuleSource::Project => "project",
            RuleSource::Cli => "cli",
            RuleSource::Connection => "connection",
            RuleSource::Session => "session",
        }
    }
}

/// Which list a rule is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuleKind {
    /// Runs without asking.
    Allow,
    /// Always asks.
    Ask,
    /// Never runs.
    Deny,
}

/// Why a rule does not parse; `Display` is the reason part of the message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuleProblem {
    /// Not `TOOL` or `TOOL(SPEC)`.
    UnknownSyntax,
    /// A `*` in a bash specifier other than a trailing `:*`.
    StarNotTrailing,
    /// A specifier on a tool that takes none.
    NoSpecifier,
    /// `TOOL()`.
    EmptySpecifier,
    /// Over 4,096 bytes.
    TooLong,
}

impl fmt::Display for RuleProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            RuleProblem::UnknownSyntax => "unknown syntax",
            RuleProblem::StarNotTrailing => "\"*\" is allowed only as a trailing \":*\"",
            RuleProblem::NoSpecifier => "this tool takes no specifier",
            RuleProblem::EmptySpecifier => "empty specifier",
            RuleProblem::TooLong => "rule exceeds 4096 bytes",
        })
    }
}

/// A rule that does not parse: `Invalid approval rule: RULE: REASON`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleError {
    /// The rule as written.
    pub rule: String,
    /// What is wrong.
    pub problem: RuleProblem,
}

impl fmt::Display for RuleError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Invalid approval rule: {}: {}", self.rule, self.problem)
    }
}

impl std::error::Error for RuleError {}

/// What a rule's specifier says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Specifier {
    /// No specifier: every call of the tool.
    All,
    /// `bash(CMD)`: exactly the normalised command.
    Exact(String),
    /// `bash(CMD:*)`: the command and anything after it at a word boundary.
    Prefix(String),
    /// `edit(GLOB)`, `write(GLOB)`, `read(GLOB)`: the path glob as written.
    Path(String),
}

/// One parsed rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    /// The rule as written (named in reasons and texts).
    pub text: String,
    /// The tool name, or `*`.
    pub tool: String,
    /// What the specifier says.
    pub specifier: Specifier,
}

fn valid_tool_name(name: &str) -> bool {
    name == "*"
        || (!name.is_empty()
            && name.len() <= 64
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-'))
}

/// True when every `)` closes an earlier `(`.
fn balanced(spec: &str) -> bool {
    let mut depth = 0usize;
    for c in spec.chars() {
        match c {
            '(' => depth += 1,
            ')' if depth == 0 => return false,
            ')' => depth -= 1,
            _ => {}
        }
    }
    true
}

impl Rule {
    /// Parses one rule (docs/approvals.md#rule-syntax).
    pub fn parse(text: &str) -> Result<Rule, RuleError> {
        let error = |problem| RuleError {
            rule: text.to_string(),
            problem,
        };
        if text.len() > MAX_RULE_BYTES {
            return Err(error(RuleProblem::TooLong));
        }
        let (tool, spec) = match text.find('(') {
            None => (text, None),
            Some(open) => {
                let Some(inner) = text[open + 1..].strip_suffix(')') else {
                    return Err(error(RuleProblem::UnknownSyntax));
                };
                (&text[..open], Some(inner))
            }
        };
        if !valid_tool_name(tool) {
            return Err(error(RuleProblem::UnknownSyntax));
        }
        let Some(spec) = spec else {
            return Ok(Rule {
                text: text.to_string(),
                tool: tool.to_string(),
                specifier: Specifier::All,
            });
        };
        if !balanced(spec) {
            return Err(error(RuleProblem::UnknownSyntax));
        }
        if !SPECIFIER_TOOLS.contains(&tool) {
            return Err(error(RuleProblem::NoSpecifier));
        }
        if spec.trim().is_empty() {
            return Err(error(RuleProblem::EmptySpecifier));
        }
        let specifier = if tool == "bash" {
            let (command, prefix) = match spec.strip_suffix(":*") {
                Some(command) => (command, true),
                None => (spec, false),
            };
            if command.contains('*') {
                return Err(error(RuleProblem::StarNotTrailing));
            }
            let command = collapse_whitespace(command);
            if command.is_empty() {
                return Err(error(RuleProblem::EmptySpecifier));
            }
            if prefix {
                Specifier::Prefix(command)
            } else {
                Specifier::Exact(command)
            }
        } else {
            Specifier::Path(spec.to_string())
        };
        Ok(Rule {
            text: text.to_string(),
            tool: tool.to_string(),
            specifier,
        })
    }

    /// True when the rule names this tool: `*`, the tool itself, or `edit` for `write` (an
    /// `edit` rule covers every editing tool).
    pub fn names_tool(&self, tool: &str) -> bool {
        self.tool == "*" || self.tool == tool || (self.tool == "edit" && tool == "write")
    }

    /// For a `bash` rule with a command specifier: does the normalised simple command match?
    pub fn matches_command(&self, command: &str) -> bool {
        match &self.specifier {
            Specifier::All => true,
            Specifier::Exact(exact) => command == exact,
            Specifier::Prefix(prefix) => {
                command == prefix
                    || command
                        .strip_prefix(prefix.as_str())
                        .is_some_and(|rest| rest.starts_with(' '))
            }
            Specifier::Path(_) => false,
        }
    }
}

/// Collapses whitespace runs outside quotes to one space and trims the ends.
pub fn collapse_whitespace(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut quote: Option<char> = None;
    let mut escaped = false;
    let mut pending_space = false;
    for c in text.chars() {
        if quote.is_none() && !escaped && c.is_whitespace() {
            pending_space = !out.is_empty();
            continue;
        }
        if pending_space {
            out.push(' ');
            pending_space = false;
        }
        out.push(c);
        if escaped {
            escaped = false;
        } else if c == '\\' && quote != Some('\'') {
            escaped = true;
        } else if quote == Some(c) {
            quote = None;
        } else if quote.is_none() && (c == '\'' || c == '"') {
            quote = Some(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn problem(text: &str) -> RuleProblem {
        Rule::parse(text).unwrap_err().problem
    }

    #[test]
    fn parses_every_documented_form() {
        assert_eq!(Rule::parse("bash").unwrap().specifier, Specifier::All);
        assert_eq!(
            Rule::parse("bash(npm  test)").unwrap().specifier,
            Specifier::Exact("npm test".into())
        );
        assert_eq!(
            Rule::parse("bash(npm test:*)").unwrap().specifier,
            Specifier::Prefix("npm test".into())
        );
        assert_eq!(
            Rule::parse("edit(src/**)").unwrap().specifier,
            Specifier::Path("src/**".into())
        );
        assert_eq!(Rule::parse("*").unwrap().tool, "*");
        assert_eq!(Rule::parse("word_stats").unwrap().tool, "word_stats");
        assert!(Rule::parse("bash(echo (a))").is_ok());
    }

    #[test]
    fn every_problem_has_its_reason() {
        assert_eq!(problem("bash(npm"), RuleProblem::UnknownSyntax);
        assert_eq!(problem("ba sh"), RuleProblem::UnknownSyntax);
        assert_eq!(problem("bash(a))"), RuleProblem::UnknownSyntax);
        assert_eq!(problem("bash(npm *)"), RuleProblem::StarNotTrailing);
        assert_eq!(problem("update_plan(x)"), RuleProblem::NoSpecifier);
        assert_eq!(problem("*(x)"), RuleProblem::NoSpecifier);
        assert_eq!(problem("bash()"), RuleProblem::EmptySpecifier);
        assert_eq!(
            problem(&format!("bash({})", "a".repeat(4096))),
            RuleProblem::TooLong
        );
        assert_eq!(
            Rule::parse("bash(npm *)").unwrap_err().to_string(),
            "Invalid approval rule: bash(npm *): \"*\" is allowed only as a trailing \":*\""
        );
    }

    #[test]
    fn prefixes_stop_at_word_boundaries() {
        let rule = Rule::parse("bash(npm test:*)").unwrap();
        assert!(rule.matches_command("npm test"));
        assert!(rule.matches_command("npm test --watch"));
        assert!(!rule.matches_command("npm tests"));
        let exact = Rule::parse("bash(npm test)").unwrap();
        assert!(!exact.matches_command("npm test --watch"));
    }
}
