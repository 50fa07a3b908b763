//! Project trust from `<agentDir>/trust.json` (docs/configuration.md#trustjson). Untrusted
//! projects' `.zi/` configuration is excluded. The headless modes never prompt; the interactive
//! mode asks once per undecided project with `.zi/` content ([`needs_prompt`]) and records the
//! answer in Zi's format ([`record_decision`]).
//!
//! Two formats are read:
//! - Zi's: `{"<canonical path>": true | false, …}`. The listed directory nearest to the cwd
//!   (the cwd itself or its closest ancestor) decides.
//! - zi's earlier, documented one: `{"trusted": ["/abs/dir", …]}`: the cwd or an ancestor is
//!   listed. The key `trusted` cannot be a Zi path (those are absolute), so both can share a file.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

/// Largest trust.json zi reads.
pub(crate) const MAX_TRUST_BYTES: u64 = 1024 * 1024;

/// The file name under the agent directory.
pub(crate) const TRUST_FILE: &str = "trust.json";

/// Whether the project at `cwd` (canonical) is trusted, and one `Warning:` text per problem.
pub fn project_trusted(agent_dir: &Path, cwd: &Path) -> (bool, Vec<String>) {
    let (decision, warnings) = project_decision(agent_dir, cwd);
    (decision == Some(true), warnings)
}

/// The decision trust.json holds for `cwd` (canonical): `None` when no listed directory
/// covers it (or the file is unusable, which the warnings say).
pub(crate) fn project_decision(agent_dir: &Path, cwd: &Path) -> (Option<bool>, Vec<String>) {
    let path = agent_dir.join(TRUST_FILE);
    let mut warnings = Vec::new();
    let map = match read_map(&path) {
        Ok(Some(map)) => map,
        Ok(None) => return (None, warnings),
        Err(problem) => {
            warnings.push(problem.to_string());
            return (None, warnings);
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
    (decision.map(|(_, trusted)| trusted), warnings)
}

/// Why trust.json cannot be used; the Display is the warning users read.
#[derive(Debug, thiserror::Error)]
pub enum TrustReadError {
    /// The file could not be read (or is not a bounded regular text file).
    #[error("(trust) {0}; no project is trusted")]
    Read(#[from] zi_os::config_file::ConfigFileError),
    /// The file holds JSON that is not an object.
    #[error("(trust) {} must contain a JSON object", .0.display())]
    NotObject(PathBuf),
    /// The file is not JSON.
    #[error("(trust) {} is not valid JSON: {source}", path.display())]
    Json {
        /// trust.json.
        path: PathBuf,
        /// What the parser reported.
        source: serde_json::Error,
    },
}

/// trust.json's object (`None`: no file), or why it cannot be used.
fn read_map(path: &Path) -> Result<Option<Map<String, Value>>, TrustReadError> {
    let Some(text) = zi_os::config_file::read_bounded_text(path, MAX_TRUST_BYTES)? else {
        return Ok(None);
    };
    match serde_json::from_str::<Value>(&text) {
        Ok(Value::Object(map)) => Ok(Some(map)),
        Ok(_) => Err(TrustReadError::NotObject(path.to_path_buf())),
        Err(source) => Err(TrustReadError::Json {
            path: path.to_path_buf(),
            source,
        }),
    }
}

/// The names in `<cwd>/.zi/` when the project has content there that trust would load, sorted
/// (directories with a trailing `/`); empty when there is nothing to ask about: no `.zi/`, an
/// empty one, or one that is the agent directory itself (docs/interactive.md#project-trust: then it
/// is the global configuration, not a project's).
pub fn project_content(agent_dir: &Path, cwd: &Path) -> Vec<String> {
    let dir = cwd.join(".zi");
    let same = |a: &Path, b: &Path| match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    };
    if same(&dir, agent_dir) {
        return Vec::new();
    }
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Vec::new();
    };
    let mut names: Vec<String> = entries
        .filter_map(Result::ok)
        .map(|entry| {
            let name = entry.file_name().to_string_lossy().into_owned();
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                format!("{name}/")
            } else {
                name
            }
        })
        .collect();
    names.sort();
    names
}

/// Whether the interactive mode asks about `cwd`: it has `.zi/` content and trust.json decides
/// nothing for it. A trust.json zi cannot read is never overwritten, so it asks nothing then.
pub fn needs_prompt(agent_dir: &Path, cwd: &Path) -> bool {
    if project_content(agent_dir, cwd).is_empty() {
        return false;
    }
    match read_map(&agent_dir.join(TRUST_FILE)) {
        Ok(_) => project_decision(agent_dir, cwd).0.is_none(),
        Err(_) => false,
    }
}

/// Why a decision could not be recorded.
#[derive(Debug, thiserror::Error)]
pub enum TrustWriteError {
    /// trust.json exists but cannot be read as a trust file; zi does not overwrite it.
    #[error("cannot update {path}: {problem}")]
    Unreadable {
        /// trust.json.
        path: PathBuf,
        /// What is wrong with it.
        problem: TrustReadError,
    },
    /// A file-system step of the write failed.
    #[error("cannot {action} {path}: {source}")]
    Io {
        /// The step, as the text says it (`create`, `write`, `rename`, …).
        action: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The system's error.
        source: std::io::Error,
    },
}

/// Records `trusted` for `cwd` (canonical) in trust.json in Zi's format (`"<cwd>": bool`),
/// keeping every other entry. Like settings writes: under a lock file, merged into the current
/// object, written to a temporary file and renamed over; a file zi cannot read is never
/// overwritten.
pub fn record_decision(agent_dir: &Path, cwd: &Path, trusted: bool) -> Result<(), TrustWriteError> {
    let path = agent_dir.join(TRUST_FILE);
    let io = |action: &'static str, path: &Path| {
        let path = path.to_path_buf();
        move |source| TrustWriteError::Io {
            action,
            path,
            source,
        }
    };
    std::fs::create_dir_all(agent_dir).map_err(io("create", agent_dir))?;
    let lock_path = agent_dir.join(".trust.json.lock");
    let lock = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(io("open", &lock_path))?;
    lock.lock().map_err(io("lock", &lock_path))?;
    let result = (|| {
        let mut map = read_map(&path)
            .map_err(|problem| TrustWriteError::Unreadable {
                path: path.clone(),
                problem,
            })?
            .unwrap_or_default();
        map.insert(cwd.to_string_lossy().into_owned(), Value::Bool(trusted));
        let mut text = serde_json::to_string_pretty(&Value::Object(map))
            .unwrap_or_else(|_| String::from("{}"));
        text.push('\n');
        let temp = agent_dir.join(format!(".trust.json.{}.tmp", std::process::id()));
        let mut file = File::create(&temp).map_err(io("write", &temp))?;
        file.write_all(text.as_bytes())
            .and_then(|()| file.sync_all())
            .map_err(io("write", &temp))?;
        std::fs::rename(&temp, &path).map_err(|error| {
            let _ = std::fs::remove_file(&temp);
            io("replace", &path)(error)
        })
    })();
    let _ = lock.unlock();
    result
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

    #[test]
    fn a_recorded_decision_is_read_back_and_keeps_other_entries() {
        let agent = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let file = agent.path().join(TRUST_FILE);
        std::fs::write(&file, r#"{"trusted": ["/a"], "/b": true}"#)
            .unwrap_or_else(|e| panic!("{e}"));
        record_decision(agent.path(), Path::new("/c/p"), false).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            project_decision(agent.path(), Path::new("/c/p")),
            (Some(false), vec![])
        );
        assert_eq!(
            project_decision(agent.path(), Path::new("/a/x")),
            (Some(true), vec![])
        );
        record_decision(agent.path(), Path::new("/d"), true).unwrap_or_else(|e| panic!("{e}"));
        let text = std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{e}"));
        let value: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            value,
            serde_json::json!({"trusted": ["/a"], "/b": true, "/c/p": false, "/d": true})
        );
    }

    #[test]
    fn an_unreadable_file_is_not_overwritten_and_asks_nothing() {
        let agent = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let cwd = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        std::fs::create_dir(cwd.path().join(".zi")).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(cwd.path().join(".zi/settings.json"), "{}")
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(project_content(agent.path(), cwd.path()), ["settings.json"]);
        assert!(needs_prompt(agent.path(), cwd.path()));
        std::fs::write(agent.path().join(TRUST_FILE), "not json").unwrap_or_else(|e| panic!("{e}"));
        assert!(!needs_prompt(agent.path(), cwd.path()));
        assert!(record_decision(agent.path(), cwd.path(), true).is_err());
        assert_eq!(
            std::fs::read_to_string(agent.path().join(TRUST_FILE)).unwrap_or_default(),
            "not json"
        );
    }

    #[test]
    fn an_empty_dot_zi_or_the_agent_dir_itself_is_not_asked_about() {
        let cwd = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let agent = cwd.path().join(".zi");
        std::fs::create_dir(&agent).unwrap_or_else(|e| panic!("{e}"));
        assert!(project_content(cwd.path(), cwd.path()).is_empty());
        std::fs::write(agent.join("settings.json"), "{}").unwrap_or_else(|e| panic!("{e}"));
        assert!(!needs_prompt(&agent, cwd.path()));
    }
}
