//! STOPGAP until engineer `profiles` lands discovery (delegation-reference §3): reads
//! `<agentDir>/subagents/*.md` with `key: value` front matter. Not for landing.

use std::path::Path;

use zi_agent::subagent_profiles::{ProfileSource, SubagentCatalog, SubagentProfile};
use zi_protocol::ThinkingLevel;

pub fn load(agent_dir: &Path) -> SubagentCatalog {
    let mut profiles = Vec::new();
    let Ok(dir) = std::fs::read_dir(agent_dir.join("subagents")) else {
        return SubagentCatalog::default();
    };
    let mut paths: Vec<_> = dir.filter_map(|e| e.ok()).map(|e| e.path()).collect();
    paths.sort();
    for path in paths {
        let Some(name) = path
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.strip_suffix(".md"))
        else {
            continue;
        };
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        let (front, body) = match text
            .strip_prefix("---\n")
            .and_then(|rest| rest.split_once("\n---"))
        {
            Some((front, body)) => (front, body.trim()),
            None => ("", text.trim()),
        };
        let field = |key: &str| {
            front.lines().find_map(|line| {
                line.strip_prefix(key)
                    .and_then(|rest| rest.strip_prefix(':'))
                    .map(|v| v.trim().to_string())
            })
        };
        let Some(description) = field("description") else {
            continue;
        };
        profiles.push(SubagentProfile {
            name: name.to_string(),
            description,
            instructions: body.to_string(),
            model: field("model"),
            thinking: field("thinking").and_then(|t| ThinkingLevel::parse(&t)),
            source: ProfileSource::Global(path.clone()),
        });
    }
    SubagentCatalog::from_profiles(profiles)
}
