//! Project trust from `<agentDir>/trust.json` (runtime-reference §14.1). Untrusted projects'
//! `.zi/` configuration is excluded; zi never prompts, so it never records a decision itself.
//!
//! Two formats are read:
//! - Zi's: `{"<canonical path>": true | false, …}`. The listed directory nearest to the cwd
//!   (the cwd itself or its closest ancestor) decides.
//! - zi's earlier, documented one: `{"trusted": ["/abs/dir", …]}`: the cwd or an ancestor is
//!   listed. The key `trusted` cannot be a Zi path (those are absolute), so both can share a file.

use std::path::Path;

use serde_json::Value;

/// Largest trust.json zi reads.
pub const MAX_TRUST_BYTES: u64 = 1024 * 1024;

/// Whether the project at `cwd` (canonical) is trusted, and one `Warning:` text per problem.
pub fn project_trusted(agent_dir: &Path, cwd: &Path) -> (bool, Vec<String>) {
    let path = agent_dir.join("trust.json");
    let mut warnings = Vec::new();
    let text = match zi_ai::config_file::read_bounded_text(&path, MAX_TRUST_BYTES) {
        Ok(Some(text)) => text,
        Ok(None) => return (false, warnings),
        Err(error) => {
            warnings.push(format!("(trust) {error}; no project is trusted"));
            return (false, warnings);
        }
    };
    let map = match serde_json::from_str::<Value>(&text) {
        Ok(Value::Object(map)) => map,
        Ok(_) => {
            warnings.push(format!(
                "(trust) {} must contain a JSON object",
                path.display()
            ));
            return (false, warnings);
        }
        Err(error) => {
            warnings.push(format!(
                "(trust) {} is not valid JSON: {error}",
                path.display()
            ));
            return (false, warnings);
        }
    };
    // (depth of the deciding directory, decision): the nearest listed directory wins.
    let mut decision: Option<(usize, bool)> = None;
    let mut decide = |dir: &Path, trusted: bool| {
        if cwd.starts_with(dir) {
            let depth = dir.components().count();
            // At equal depth (a path listed in both formats), distrust wins.
            if decision.is_none_or(|(d, t)| depth > d || (depth == d && t && !trusted)) {
                decision = Some((depth, trusted));
            }
        }
    };
    for (key, value) in &map {
        match (key.as_str(), value) {
            ("trusted", Value::Array(dirs)) => {
                for dir in dirs {
                    match dir.as_str().map(Path::new) {
                        Some(dir) if dir.is_absolute() => decide(dir, true),
                        _ => warnings.push(format!(
                            "(trust) {}: \"trusted\" entries must be absolute paths; ignoring {dir}",
                            path.display()
                        )),
                    }
                }
            }
            (dir, Value::Bool(trusted)) if Path::new(dir).is_absolute() => {
                decide(Path::new(dir), *trusted);
            }
            _ => warnings.push(format!(
                "(trust) {}: entry {key:?} is not an absolute path mapped to true or false; ignoring it",
                path.display()
            )),
        }
    }
    (decision.is_some_and(|(_, trusted)| trusted), warnings)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trusted(text: &str, cwd: &str) -> (bool, Vec<String>) {
        let agent = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(agent.path().join("trust.json"), text).unwrap_or_else(|e| panic!("{e}"));
        project_trusted(agent.path(), Path::new(cwd))
    }

    #[test]
    fn zi_format_nearest_directory_decides() {
        let file = r#"{"/home/u/p": true, "/home/u/p/vendor": false}"#;
        assert_eq!(trusted(file, "/home/u/p"), (true, vec![]));
        assert_eq!(trusted(file, "/home/u/p/src"), (true, vec![]));
        assert_eq!(trusted(file, "/home/u/p/vendor/x"), (false, vec![]));
        assert_eq!(trusted(file, "/home/u/other"), (false, vec![]));
        assert_eq!(trusted(file, "/home/u/pp"), (false, vec![]));
    }

    #[test]
    fn earlier_list_format_is_still_read() {
        let file = r#"{"trusted": ["/home/u"]}"#;
        assert_eq!(trusted(file, "/home/u/p"), (true, vec![]));
        let mixed = r#"{"trusted": ["/home/u"], "/home/u/p": false}"#;
        assert!(!trusted(mixed, "/home/u/p").0);
        assert!(trusted(mixed, "/home/u/q").0);
    }

    #[test]
    fn bad_entries_are_warnings_naming_them() {
        let (ok, warnings) = trusted(r#"{"rel/dir": true, "/p": "yes"}"#, "/p");
        assert!(!ok);
        assert_eq!(warnings.len(), 2, "{warnings:?}");
        assert!(warnings[0].contains("\"/p\"") || warnings[1].contains("\"/p\""));
        let (ok, warnings) = trusted("[1]", "/p");
        assert!(!ok && warnings[0].contains("must contain a JSON object"));
    }
}
