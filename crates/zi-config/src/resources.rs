//! Skills, prompt templates and their expansion (docs/configuration.md#skills,
//! docs/configuration.md#prompt-templates).
//!
//! Discovery is plain filesystem reading; which directories are searched (and whether project
//! directories are trusted) is decided by the caller, in precedence order. Expansion is pure.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// At most this many skills are loaded.
pub(crate) const MAX_SKILLS: usize = 256;
const MAX_DESCRIPTION_CHARS: usize = 1024;
const MAX_SKILL_NAME: usize = 64;
/// Directory levels searched below a skills root for `SKILL.md` files.
const MAX_SKILL_DEPTH: usize = 6;
/// Largest `SKILL.md` or prompt template zi reads (read as bounded regular files).
pub(crate) const MAX_RESOURCE_BYTES: u64 = 1024 * 1024;

/// A skill (`SKILL.md`): instructions the model loads when its description fits the task.
#[derive(Debug, Clone, PartialEq)]
pub struct Skill {
    /// What `/skill:name` and the system prompt call it.
    pub name: String,
    /// What the model reads to decide whether to load it.
    pub description: String,
    /// Absolute path of the `SKILL.md` file.
    pub path: PathBuf,
    /// The Markdown body, without front matter.
    pub body: String,
    /// `disable-model-invocation`: left out of the system prompt; only `/skill:name` uses it.
    pub disable_model_invocation: bool,
}

/// A prompt template: a Markdown file whose body `/name args` expands into the prompt.
#[derive(Debug, Clone, PartialEq)]
pub struct PromptTemplate {
    /// The file name without `.md`: what `/name` calls.
    pub name: String,
    /// Shown in command lists.
    pub description: Option<String>,
    /// `argument-hint`: what arguments it takes, shown in command lists.
    pub argument_hint: Option<String>,
    /// The text, with `$1`, `$@` and `$ARGUMENTS` placeholders.
    pub body: String,
}

/// Splits `---\nkey: value\n---\nbody` into its front matter pairs and body. Only flat
/// `key: value` lines are understood (quotes around values are removed).
pub(crate) fn split_front_matter(text: &str) -> (Vec<(String, String)>, String) {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let normalized = text.replace("\r\n", "\n");
    let Some(rest) = normalized.strip_prefix("---\n") else {
        return (Vec::new(), normalized);
    };
    let Some(end) = rest.find("\n---").filter(|&i| {
        let after = &rest[i + 4..];
        after.is_empty() || after.starts_with('\n')
    }) else {
        return (Vec::new(), normalized);
    };
    let pairs = rest[..end]
        .lines()
        .filter_map(|line| {
            let (key, value) = line.split_once(':')?;
            let value = value.trim();
            let value = value
                .strip_prefix('"')
                .and_then(|v| v.strip_suffix('"'))
                .or_else(|| value.strip_prefix('\'').and_then(|v| v.strip_suffix('\'')))
                .unwrap_or(value);
            Some((key.trim().to_string(), value.to_string()))
        })
        .collect();
    let body = rest[end + 4..]
        .strip_prefix('\n')
        .unwrap_or(&rest[end + 4..]);
    (pairs, body.to_string())
}

fn field<'a>(pairs: &'a [(String, String)], key: &str) -> Option<&'a str> {
    pairs
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
        .filter(|v| !v.is_empty())
}

/// Whether `name` is a valid skill name: lowercase `a-z0-9-`, no leading, trailing or double
/// hyphen, at most 64 characters.
pub(crate) fn valid_skill_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_SKILL_NAME
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !name.starts_with('-')
        && !name.ends_with('-')
        && !name.contains("--")
}

/// Why a `SKILL.md` was skipped (reported as a warning).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum SkillError {
    #[error("skill {} has no description", .0.display())]
    NoDescription(PathBuf),
    #[error("skill {} has a description over 1024 characters", .0.display())]
    LongDescription(PathBuf),
    #[error("skill {} has an invalid name: {name:?}", .path.display())]
    InvalidName { path: PathBuf, name: String },
}

/// Parses one `SKILL.md`. Errors say why the skill was skipped.
pub(crate) fn parse_skill(path: &Path, text: &str) -> Result<Skill, SkillError> {
    let (pairs, body) = split_front_matter(text);
    let description = field(&pairs, "description")
        .ok_or_else(|| SkillError::NoDescription(path.to_path_buf()))?;
    if description.chars().count() > MAX_DESCRIPTION_CHARS {
        return Err(SkillError::LongDescription(path.to_path_buf()));
    }
    let name = match field(&pairs, "name") {
        Some(name) => name.to_string(),
        None => path
            .parent()
            .and_then(Path::file_name)
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
    };
    if !valid_skill_name(&name) {
        return Err(SkillError::InvalidName {
            path: path.to_path_buf(),
            name,
        });
    }
    Ok(Skill {
        name,
        description: description.to_string(),
        path: path.to_path_buf(),
        body: body.trim().to_string(),
        disable_model_invocation: field(&pairs, "disable-model-invocation") == Some("true"),
    })
}

fn find_skill_files(dir: &Path, depth: usize, found: &mut Vec<PathBuf>) {
    let skill = dir.join("SKILL.md");
    if skill.is_file() {
        found.push(skill);
        return;
    }
    if depth >= MAX_SKILL_DEPTH {
        return;
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut dirs: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| !n.to_string_lossy().starts_with('.'))
        })
        .collect();
    dirs.sort();
    for sub in dirs {
        find_skill_files(&sub, depth + 1, found);
    }
}

/// Loads skills from `roots` in precedence order: the first occurrence of a name wins. Returns
/// the skills and a warning per skipped file.
pub fn discover_skills(roots: &[PathBuf]) -> (Vec<Skill>, Vec<String>) {
    let mut skills: Vec<Skill> = Vec::new();
    let mut warnings = Vec::new();
    let mut seen = HashSet::new();
    for root in roots {
        let mut files = Vec::new();
        if root.is_dir() {
            let Ok(entries) = std::fs::read_dir(root) else {
                continue;
            };
            let mut dirs: Vec<PathBuf> = entries
                .filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| p.is_dir())
                .collect();
            dirs.sort();
            for dir in dirs {
                find_skill_files(&dir, 1, &mut files);
            }
        }
        for file in files {
            if skills.len() >= MAX_SKILLS {
                warnings.push(format!("more than {MAX_SKILLS} skills; ignoring the rest"));
                return (skills, warnings);
            }
            let path = file.canonicalize().unwrap_or(file);
            let text = match zi_os::config_file::read_bounded_text(&path, MAX_RESOURCE_BYTES) {
                Ok(Some(text)) => text,
                Ok(None) => continue,
                Err(error) => {
                    warnings.push(format!("skill {error}"));
                    continue;
                }
            };
            match parse_skill(&path, &text) {
                Ok(skill) => {
                    if seen.insert(skill.name.clone()) {
                        skills.push(skill);
                    }
                }
                Err(warning) => warnings.push(warning.to_string()),
            }
        }
    }
    (skills, warnings)
}

/// Loads `*.md` templates from `dirs` in precedence order (first name wins).
pub fn discover_templates(dirs: &[PathBuf]) -> Vec<PromptTemplate> {
    let mut templates: Vec<PromptTemplate> = Vec::new();
    for dir in dirs {
        let Ok(entries) = std::fs::read_dir(dir) else {
            continue;
        };
        let mut files: Vec<PathBuf> = entries
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|e| e == "md") && p.is_file())
            .collect();
        files.sort();
        for file in files {
            let Some(name) = file.file_stem().map(|s| s.to_string_lossy().into_owned()) else {
                continue;
            };
            if templates.iter().any(|t| t.name == name) {
                continue;
            }
            let Ok(Some(text)) = zi_os::config_file::read_bounded_text(&file, MAX_RESOURCE_BYTES)
            else {
                continue;
            };
            let (pairs, body) = split_front_matter(&text);
            templates.push(PromptTemplate {
                name,
                description: field(&pairs, "description").map(str::to_string),
                argument_hint: field(&pairs, "argument-hint").map(str::to_string),
                body,
            });
        }
    }
    templates
}

/// Splits arguments on whitespace; single or double quotes group words (quotes removed).
pub(crate) fn parse_args(text: &str) -> Vec<String> {
    let mut args = Vec::new();
    let mut current = String::new();
    let mut quote: Option<char> = None;
    let mut in_arg = false;
    for c in text.chars() {
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => current.push(c),
            None if c == '"' || c == '\'' => {
                quote = Some(c);
                in_arg = true;
            }
            None if c.is_whitespace() => {
                if in_arg {
                    args.push(std::mem::take(&mut current));
                    in_arg = false;
                }
            }
            None => {
                current.push(c);
                in_arg = true;
            }
        }
    }
    if in_arg {
        args.push(current);
    }
    args
}

/// Substitutes `$ARGUMENTS`, `$@`, `$1`…, `${1:-default}`, `${@:N}` and `${@:N:L}` in one pass:
/// substituted text is never scanned again.
pub(crate) fn substitute_args(body: &str, args: &[String]) -> String {
    let all = args.join(" ");
    let positional = |n: usize| -> Option<&str> {
        n.checked_sub(1)
            .and_then(|i| args.get(i))
            .map(String::as_str)
    };
    let mut out = String::with_capacity(body.len());
    let mut rest = body;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let tail = &rest[at + 1..];
        if let Some(after) = tail.strip_prefix("ARGUMENTS") {
            out.push_str(&all);
            rest = after;
        } else if let Some(after) = tail.strip_prefix('@') {
            out.push_str(&all);
            rest = after;
        } else if tail.starts_with(|c: char| c.is_ascii_digit()) {
            let digits = tail.chars().take_while(char::is_ascii_digit).count();
            let n: usize = tail[..digits].parse().unwrap_or(0);
            out.push_str(positional(n).unwrap_or(""));
            rest = &tail[digits..];
        } else if let Some((expansion, after)) = braced(tail, args, &all) {
            out.push_str(&expansion);
            rest = after;
        } else {
            out.push('$');
            rest = tail;
        }
    }
    out.push_str(rest);
    out
}

/// `${1:-default}`, `${@:N}`, `${@:N:L}`; `None` leaves the text alone.
fn braced<'a>(tail: &'a str, args: &[String], _all: &str) -> Option<(String, &'a str)> {
    let inner_end = tail.strip_prefix('{')?.find('}')? + 1;
    let inner = &tail[1..inner_end];
    let after = &tail[inner_end + 1..];
    if let Some(slice) = inner.strip_prefix("@:") {
        let mut parts = slice.splitn(2, ':');
        let start: usize = parts.next()?.parse().ok()?;
        let from = start.saturating_sub(1).min(args.len());
        let selected: Vec<&String> = match parts.next() {
            Some(len) => {
                let len: usize = len.parse().ok()?;
                args[from..].iter().take(len).collect()
            }
            None => args[from..].iter().collect(),
        };
        let joined = selected
            .iter()
            .map(|s| s.as_str())
            .collect::<Vec<_>>()
            .join(" ");
        return Some((joined, after));
    }
    let (index, default) = match inner.split_once(":-") {
        Some((index, default)) => (index, Some(default)),
        None => (inner, None),
    };
    let n: usize = index.parse().ok()?;
    let value = n
        .checked_sub(1)
        .and_then(|i| args.get(i))
        .filter(|v| !v.is_empty())
        .map(String::as_str)
        .or(default)
        .unwrap_or("");
    Some((value.to_string(), after))
}

/// Splits `/name rest` into the name and the (trimmed-at-start) rest.
fn slash_command(text: &str) -> Option<(&str, &str)> {
    let rest = text.strip_prefix('/')?;
    let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
    let name = &rest[..end];
    if name.is_empty() {
        return None;
    }
    Some((name, rest[end..].trim_start()))
}

/// Applies `/skill:name` expansion, then prompt templates, to prompt text.
#[derive(Debug, Clone, Default)]
pub struct InputExpander {
    skills: Arc<Vec<Skill>>,
    templates: Arc<Vec<PromptTemplate>>,
}

impl InputExpander {
    /// The expander of these skills and templates (discovered once per session).
    pub fn new(skills: Vec<Skill>, templates: Vec<PromptTemplate>) -> Self {
        InputExpander {
            skills: Arc::new(skills),
            templates: Arc::new(templates),
        }
    }

    /// The skills, for the system prompt and the command lists.
    pub fn skills(&self) -> &[Skill] {
        &self.skills
    }

    /// The templates, for the command lists.
    pub fn templates(&self) -> &[PromptTemplate] {
        &self.templates
    }

    /// The prompt as the model gets it: text that starts with a skill or template command is
    /// expanded, anything else comes back unchanged.
    pub fn expand(&self, text: &str) -> String {
        let text = self.expand_skill(text);
        self.expand_template(&text)
    }

    fn expand_skill(&self, text: &str) -> String {
        let Some((command, args)) = slash_command(text) else {
            return text.to_string();
        };
        let Some(name) = command.strip_prefix("skill:") else {
            return text.to_string();
        };
        let Some(skill) = self.skills.iter().find(|s| s.name == name) else {
            return text.to_string();
        };
        let dir = skill.path.parent().unwrap_or(Path::new("/"));
        let mut out = format!(
            "<skill name=\"{}\" location=\"{}\">\nReferences are relative to {}.\n\n{}\n</skill>",
            skill.name,
            skill.path.display(),
            dir.display(),
            skill.body
        );
        let args = args.trim_end();
        if !args.is_empty() {
            out.push_str("\n\n");
            out.push_str(args);
        }
        out
    }

    fn expand_template(&self, text: &str) -> String {
        let Some((name, args)) = slash_command(text) else {
            return text.to_string();
        };
        match self.templates.iter().find(|t| t.name == name) {
            Some(template) => substitute_args(&template.body, &parse_args(args)),
            None => text.to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn placeholders_expand_in_one_pass() {
        let a = args(&["one", "two", "three", "four"]);
        assert_eq!(
            substitute_args("$1-$2 [$ARGUMENTS] [$@]", &a),
            "one-two [one two three four] [one two three four]"
        );
        assert_eq!(substitute_args("${@:2}", &a), "two three four");
        assert_eq!(substitute_args("${@:2:2}", &a), "two three");
        assert_eq!(substitute_args("${@:9}", &a), "");
        assert_eq!(substitute_args("${5:-none} ${1:-none}", &a), "none one");
        assert_eq!(substitute_args("$9|$", &a), "|$");
        assert_eq!(substitute_args("cost $ 5", &a), "cost $ 5");
        // An argument containing a placeholder is not expanded again.
        assert_eq!(substitute_args("$1 $2", &args(&["$2", "x"])), "$2 x");
    }

    #[test]
    fn quoted_arguments_group_words() {
        assert_eq!(
            parse_args(r#"a "b c" 'd e' f"#),
            args(&["a", "b c", "d e", "f"])
        );
        assert_eq!(parse_args("  "), Vec::<String>::new());
        assert_eq!(parse_args(r#""""#), args(&[""]));
    }

    #[test]
    fn skill_names_and_front_matter_are_validated() {
        assert!(valid_skill_name("pdf-tools2"));
        for bad in ["", "-a", "a-", "a--b", "A", "a_b", &"a".repeat(65)] {
            assert!(!valid_skill_name(bad), "{bad}");
        }
        let path = Path::new("/s/my-skill/SKILL.md");
        let skill = parse_skill(path, "---\ndescription: \"Does X\"\n---\nBody\n")
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(skill.name, "my-skill");
        assert_eq!(skill.description, "Does X");
        assert_eq!(skill.body, "Body");
        assert!(parse_skill(path, "---\nname: x\n---\nBody").is_err());
        assert!(parse_skill(path, "no front matter").is_err());
        let long = format!("---\ndescription: {}\n---\n", "d".repeat(1025));
        assert!(parse_skill(path, &long).is_err());
    }

    #[test]
    fn skills_expand_before_templates_and_unknown_names_pass_through() {
        let skill = Skill {
            name: "deploy".into(),
            description: "d".into(),
            path: PathBuf::from("/s/deploy/SKILL.md"),
            body: "Steps.".into(),
            disable_model_invocation: false,
        };
        let template = PromptTemplate {
            name: "review".into(),
            description: None,
            argument_hint: None,
            body: "Review $1 carefully (${2:-all}).".into(),
        };
        let expander = InputExpander::new(vec![skill], vec![template]);
        assert_eq!(
            expander.expand("/skill:deploy now please"),
            "<skill name=\"deploy\" location=\"/s/deploy/SKILL.md\">\nReferences are relative to /s/deploy.\n\nSteps.\n</skill>\n\nnow please"
        );
        assert_eq!(
            expander.expand("/review main.rs"),
            "Review main.rs carefully (all)."
        );
        assert_eq!(expander.expand("/skill:nope x"), "/skill:nope x");
        assert_eq!(expander.expand("/unknown x"), "/unknown x");
        assert_eq!(expander.expand("please /review"), "please /review");
    }
}
