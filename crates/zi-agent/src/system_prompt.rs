//! System prompt assembly (runtime-reference §18.1). This covers the base prompt, append
//! prompts and the date/working-directory footer; context files, skills and templates join it
//! with the coding tools.

use std::path::Path;

/// The built-in base prompt.
pub const BASE_PROMPT: &str = "You are an expert coding assistant operating inside Zi. You help users by reading files, running commands, editing code, and writing new files.";

/// Inputs to the system prompt.
#[derive(Debug, Clone, Default)]
pub struct SystemPromptParts {
    /// `--system-prompt`, replacing the base prompt.
    pub custom: Option<String>,
    /// `--append-system-prompt` values.
    pub append: Vec<String>,
    /// Names and one-line descriptions of the active tools.
    pub tools: Vec<(String, String)>,
}

/// Joins the sections with blank lines; `date` is `YYYY-MM-DD`.
pub fn build_system_prompt(parts: &SystemPromptParts, cwd: &Path, date: &str) -> String {
    let mut sections = Vec::new();
    match &parts.custom {
        Some(custom) => sections.push(custom.clone()),
        None => {
            let mut base = BASE_PROMPT.to_string();
            if !parts.tools.is_empty() {
                base.push_str("\n\nAvailable tools:");
                for (name, description) in &parts.tools {
                    base.push_str(&format!("\n- {name}: {description}"));
                }
            }
            sections.push(base);
        }
    }
    sections.extend(parts.append.iter().filter(|s| !s.is_empty()).cloned());
    sections.push(format!(
        "Current date: {date}\nCurrent working directory: {}",
        cwd.display()
    ));
    sections.join("\n\n")
}

/// Today's date in UTC.
pub fn today() -> String {
    jiff::Timestamp::now().strftime("%Y-%m-%d").to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn custom_prompt_replaces_the_base_and_appends_follow() {
        let parts = SystemPromptParts {
            custom: Some("Be brief.".into()),
            append: vec!["Extra.".into()],
            tools: vec![],
        };
        assert_eq!(
            build_system_prompt(&parts, Path::new("/w"), "2026-01-02"),
            "Be brief.\n\nExtra.\n\nCurrent date: 2026-01-02\nCurrent working directory: /w"
        );
    }
}
