//! System prompt assembly (docs/configuration.md#system-prompt): base prompt, append prompts,
//! context files in `<project_context>`, the skills catalog, then the date and working directory.
//!
//! [`build_system_prompt`] is pure; [`load_context_files`] and the `SYSTEM.md` lookups read the
//! filesystem for the caller, which decides what is trusted.

use std::path::{Path, PathBuf};

use zi_config::resources::Skill;

/// The first sentence of the built-in base prompt.
pub const BASE_PROMPT: &str = "You are an expert coding assistant operating inside Zi. You help users by reading files, running commands, editing code, and writing new files.";

/// Short guidelines that follow the tool list in the built-in prompt.
const GUIDELINES: &[(&str, &str)] = &[
    ("read", "Use read to look at files rather than cat or sed."),
    (
        "edit",
        "Use edit for precise changes: oldText must match the file exactly.",
    ),
    (
        "write",
        "Use write only for new files or complete rewrites.",
    ),
    (
        "bash",
        "Use bash for searching (rg, find, ls), building and testing.",
    ),
    (
        "update_plan",
        "For multi-step work keep a plan with update_plan, one step in progress at a time.",
    ),
];

const SKILLS_PREAMBLE: &str = "The following skills provide specialized instructions for specific tasks.\nUse the read tool to load a skill's file when the task matches its description.\nWhen a skill file references a relative path, resolve it against the skill's directory.";

/// Inputs to the system prompt.
#[derive(Debug, Clone, Default)]
pub struct SystemPromptParts {
    /// `--system-prompt` or `SYSTEM.md`, replacing the built-in base prompt.
    pub custom: Option<String>,
    /// `--append-system-prompt` values, or `APPEND_SYSTEM.md`.
    pub append: Vec<String>,
    /// Names and one-line descriptions of the active tools.
    pub tools: Vec<(String, String)>,
    /// `(path, content)` of each context file, global first, then root down to the cwd.
    pub context_files: Vec<(PathBuf, String)>,
    /// The skills; those the model may invoke are listed with their descriptions.
    pub skills: Vec<Skill>,
}

fn xml_escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or("").trim()
}

fn builtin_base(tools: &[(String, String)]) -> String {
    let mut base = BASE_PROMPT.to_string();
    if !tools.is_empty() {
        base.push_str("\n\nAvailable tools:");
        for (name, description) in tools {
            base.push_str(&format!("\n- {name}: {}", first_line(description)));
        }
    }
    base.push_str("\n\nGuidelines:");
    for (tool, line) in GUIDELINES {
        if tools.iter().any(|(name, _)| name == tool) {
            base.push_str(&format!("\n- {line}"));
        }
    }
    base.push_str(
        "\n- Be concise in your responses.\n- Show file paths clearly when working with files.",
    );
    base
}

/// Joins the sections with blank lines; `date` is `YYYY-MM-DD`.
pub fn build_system_prompt(parts: &SystemPromptParts, cwd: &Path, date: &str) -> String {
    let mut sections = Vec::new();
    match &parts.custom {
        Some(custom) => sections.push(custom.clone()),
        None => sections.push(builtin_base(&parts.tools)),
    }
    sections.extend(
        parts
            .append
            .iter()
            .filter(|s| !s.trim().is_empty())
            .cloned(),
    );
    if !parts.context_files.is_empty() {
        let mut block = String::from("<project_context>");
        for (path, content) in &parts.context_files {
            block.push_str(&format!(
                "\n<project_instructions path=\"{}\">\n{}\n</project_instructions>",
                xml_escape(&path.display().to_string()),
                content.trim_end()
            ));
        }
        block.push_str("\n</project_context>");
        sections.push(block);
    }
    let has_read = parts.tools.iter().any(|(name, _)| name == "read");
    let visible: Vec<&Skill> = parts
        .skills
        .iter()
        .filter(|s| !s.disable_model_invocation)
        .collect();
    if has_read && !visible.is_empty() {
        let mut block = format!("{SKILLS_PREAMBLE}\n\n<available_skills>");
        for skill in visible {
            block.push_str(&format!(
                "\n  <skill>\n    <name>{}</name>\n    <description>{}</description>\n    <location>{}</location>\n  </skill>",
                xml_escape(&skill.name),
                xml_escape(&skill.description),
                xml_escape(&skill.path.display().to_string())
            ));
        }
        block.push_str("\n</available_skills>");
        sections.push(block);
    }
    sections.push(format!(
        "Current date: {date}\nCurrent working directory: {}",
        cwd.display()
    ));
    sections.join("\n\n")
}

/// A session's system prompt. Everything but the tool list is fixed at start-up; the text is
/// rebuilt when the active tools change (docs/configuration.md#system-prompt: tools that appear
/// later, such as MCP direct tools, a changed activation, an extension reload) and only then,
/// so the prompt stays byte-identical — and a provider's prompt cache valid — while the tools
/// do.
#[derive(Debug, Clone)]
pub struct SystemPrompt {
    /// The parts, working directory and date the text is built from; `None` for a fixed text.
    source: Option<(SystemPromptParts, PathBuf, String)>,
    text: String,
}

impl SystemPrompt {
    /// The prompt of `parts` (whose `tools` are the tools at start-up); `date` is `YYYY-MM-DD`.
    pub fn new(parts: SystemPromptParts, cwd: &Path, date: &str) -> SystemPrompt {
        let text = build_system_prompt(&parts, cwd, date);
        SystemPrompt {
            source: Some((parts, cwd.to_path_buf(), date.to_string())),
            text,
        }
    }

    /// A text that does not follow the tools.
    pub fn fixed(text: impl Into<String>) -> SystemPrompt {
        SystemPrompt {
            source: None,
            text: text.into(),
        }
    }

    /// The prompt as it is sent.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Rebuilds the text if the active tools (name, description) differ from the ones it was
    /// built for; true when the text was rebuilt. Comparing costs no allocation.
    pub fn follow_tools<'a, I>(&mut self, tools: I) -> bool
    where
        I: Iterator<Item = (&'a str, &'a str)> + Clone,
    {
        let Some((parts, cwd, date)) = &mut self.source else {
            return false;
        };
        let mut built_for = parts.tools.iter();
        let mut offered = tools.clone();
        let unchanged = loop {
            match (offered.next(), built_for.next()) {
                (None, None) => break true,
                (Some((name, description)), Some((built_name, built_description)))
                    if name == built_name && description == built_description => {}
                _ => break false,
            }
        };
        if unchanged {
            return false;
        }
        parts.tools = tools
            .map(|(name, description)| (name.to_string(), description.to_string()))
            .collect();
        self.text = build_system_prompt(parts, cwd, date);
        true
    }
}

impl From<&str> for SystemPrompt {
    fn from(text: &str) -> SystemPrompt {
        SystemPrompt::fixed(text)
    }
}

impl From<String> for SystemPrompt {
    fn from(text: String) -> SystemPrompt {
        SystemPrompt::fixed(text)
    }
}

/// Largest context or prompt file (`AGENTS.md`, `SYSTEM.md`, …) zi reads.
pub const MAX_PROMPT_FILE_BYTES: u64 = 1024 * 1024;

/// The text of a prompt file when it is a non-empty regular file within the bound; anything
/// else that exists (a FIFO, a device, an oversized file) is a warning.
fn read_nonempty(path: &Path, warnings: &mut Vec<String>) -> Option<String> {
    match zi_os::config_file::read_bounded_text(path, MAX_PROMPT_FILE_BYTES) {
        Ok(text) => text.filter(|text| !text.trim().is_empty()),
        Err(error) => {
            warnings.push(format!("(context) {error}; ignoring it"));
            None
        }
    }
}

/// The context file of one directory: `AGENTS.md`, else `CLAUDE.md` (zi loads one per
/// directory, preferring `AGENTS.md`).
fn context_file_in(dir: &Path, warnings: &mut Vec<String>) -> Option<(PathBuf, String)> {
    ["AGENTS.md", "CLAUDE.md"].iter().find_map(|name| {
        let path = dir.join(name);
        read_nonempty(&path, warnings).map(|text| (path, text))
    })
}

/// Context files (docs/configuration.md#system-prompt): the global one in `agent_dir`, then every
/// directory from the filesystem root down to `cwd`. Trust does not apply: only `.zi/`
/// configuration is gated by it. Problems are pushed to `warnings`.
pub fn load_context_files(
    agent_dir: &Path,
    cwd: &Path,
    warnings: &mut Vec<String>,
) -> Vec<(PathBuf, String)> {
    let mut files: Vec<(PathBuf, String)> =
        context_file_in(agent_dir, warnings).into_iter().collect();
    let mut dirs: Vec<&Path> = cwd.ancestors().collect();
    dirs.reverse();
    for dir in dirs {
        if let Some(file) = context_file_in(dir, warnings)
            && !files.iter().any(|(path, _)| path == &file.0)
        {
            files.push(file);
        }
    }
    files
}

/// The first readable, non-empty `name` of `<cwd>/.zi/` (trusted projects only), then
/// `<agent_dir>/` — used for `SYSTEM.md` and `APPEND_SYSTEM.md`.
pub fn find_prompt_file(
    name: &str,
    agent_dir: &Path,
    cwd: &Path,
    trusted: bool,
    warnings: &mut Vec<String>,
) -> Option<String> {
    let project = trusted
        .then(|| read_nonempty(&cwd.join(".zi").join(name), warnings))
        .flatten();
    project.or_else(|| read_nonempty(&agent_dir.join(name), warnings))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn custom_prompt_replaces_the_base_and_appends_follow() {
        let parts = SystemPromptParts {
            custom: Some("Be brief.".into()),
            append: vec!["Extra.".into()],
            ..Default::default()
        };
        assert_eq!(
            build_system_prompt(&parts, Path::new("/w"), "2026-01-02"),
            "Be brief.\n\nExtra.\n\nCurrent date: 2026-01-02\nCurrent working directory: /w"
        );
    }

    #[test]
    fn the_prompt_follows_the_tools_and_only_their_changes() {
        let parts = SystemPromptParts {
            tools: vec![("read".into(), "Read a file.".into())],
            ..Default::default()
        };
        let mut prompt = SystemPrompt::new(parts, Path::new("/w"), "2026-01-02");
        let before = prompt.text().to_string();
        assert!(!prompt.follow_tools([("read", "Read a file.")].into_iter()));
        assert_eq!(prompt.text(), before);
        let tools = [
            ("read", "Read a file."),
            ("mcp__s__echo", "Echo it.\nMore."),
        ];
        assert!(prompt.follow_tools(tools.into_iter()));
        assert!(
            prompt
                .text()
                .contains("Available tools:\n- read: Read a file.\n- mcp__s__echo: Echo it.\n\n")
        );
        assert!(
            prompt
                .text()
                .ends_with("Current date: 2026-01-02\nCurrent working directory: /w")
        );
        assert!(!prompt.follow_tools(tools.into_iter()));
        // A changed description is a change too.
        assert!(prompt.follow_tools([("read", "Read.")].into_iter()));
        assert!(prompt.text().contains("- read: Read.\n"));
        let mut fixed = SystemPrompt::fixed("Be brief.");
        assert!(!fixed.follow_tools(tools.into_iter()));
        assert_eq!(fixed.text(), "Be brief.");
    }

    #[test]
    fn full_assembly_snapshot() {
        let parts = SystemPromptParts {
            custom: None,
            append: vec!["Appended.".into()],
            tools: vec![
                ("read".into(), "Read a file.\nMore.".into()),
                ("bash".into(), "Run a command.".into()),
            ],
            context_files: vec![(PathBuf::from("/w/AGENTS.md"), "Use tabs.\n".into())],
            skills: vec![
                Skill {
                    name: "pdf".into(),
                    description: "PDF <tools>".into(),
                    path: PathBuf::from("/s/pdf/SKILL.md"),
                    body: String::new(),
                    disable_model_invocation: false,
                },
                Skill {
                    name: "hidden".into(),
                    description: "x".into(),
                    path: PathBuf::from("/s/hidden/SKILL.md"),
                    body: String::new(),
                    disable_model_invocation: true,
                },
            ],
        };
        let expected = format!(
            "{BASE_PROMPT}\n\nAvailable tools:\n- read: Read a file.\n- bash: Run a command.\n\nGuidelines:\n- Use read to look at files rather than cat or sed.\n- Use bash for searching (rg, find, ls), building and testing.\n- Be concise in your responses.\n- Show file paths clearly when working with files.\n\nAppended.\n\n<project_context>\n<project_instructions path=\"/w/AGENTS.md\">\nUse tabs.\n</project_instructions>\n</project_context>\n\n{SKILLS_PREAMBLE}\n\n<available_skills>\n  <skill>\n    <name>pdf</name>\n    <description>PDF &lt;tools&gt;</description>\n    <location>/s/pdf/SKILL.md</location>\n  </skill>\n</available_skills>\n\nCurrent date: 2026-01-02\nCurrent working directory: /w"
        );
        assert_eq!(
            build_system_prompt(&parts, Path::new("/w"), "2026-01-02"),
            expected
        );
    }

    #[test]
    fn context_files_ignore_trust_and_prefer_agents_md() {
        let root = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let agent = root.path().join("agent");
        let project = root.path().join("p");
        let sub = project.join("sub");
        std::fs::create_dir_all(&agent).unwrap_or_else(|e| panic!("{e}"));
        std::fs::create_dir_all(&sub).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(agent.join("AGENTS.md"), "global").unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(project.join("AGENTS.md"), "project").unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(project.join("CLAUDE.md"), "claude").unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(sub.join("CLAUDE.md"), "sub").unwrap_or_else(|e| panic!("{e}"));
        let texts = |files: Vec<(PathBuf, String)>| -> Vec<String> {
            files.into_iter().map(|(_, t)| t).collect()
        };
        let mut warnings = Vec::new();
        assert_eq!(
            texts(load_context_files(&agent, &sub, &mut warnings)),
            ["global", "project", "sub"]
        );
        assert!(warnings.is_empty(), "{warnings:?}");
    }
}
