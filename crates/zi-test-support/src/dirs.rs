//! Temporary directories a black-box test gives zi: an agent directory (`--agent-dir`) with the
//! files zi reads from it, and a canonical working directory.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::mock_llm::MockLlm;

/// A fresh temporary agent directory (pass it with `--agent-dir`). Removed on drop.
///
/// The builder methods write the files zi reads from an agent dir and return the directory, so a
/// test states its set-up in one expression:
///
/// ```no_run
/// # async fn demo() {
/// use zi_test_support::dirs::AgentDir;
/// use zi_test_support::mock_llm::start_mock;
/// let mock = start_mock().await;
/// let agent = AgentDir::new()
///     .models(&mock, "key", &[serde_json::json!({"id": "m1"})])
///     .settings(r#"{"retryEnabled": false}"#);
/// # }
/// ```
pub struct AgentDir {
    dir: tempfile::TempDir,
}

impl AgentDir {
    /// Creates an empty temporary agent directory.
    pub fn new() -> AgentDir {
        let dir = tempfile::Builder::new()
            .prefix("zi-agent-")
            .tempdir()
            .unwrap_or_else(|e| panic!("create a temporary agent dir: {e}"));
        AgentDir { dir }
    }

    /// Creates an empty temporary agent directory below `parent` (sandbox tests keep it out
    /// of `/tmp`, a writable root of the `workspace-write` sandbox).
    pub fn new_in(parent: &Path) -> AgentDir {
        let dir = tempfile::Builder::new()
            .prefix("zi-agent-")
            .tempdir_in(parent)
            .unwrap_or_else(|e| panic!("create a temporary agent dir: {e}"));
        AgentDir { dir }
    }

    /// The directory (`--agent-dir`).
    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Writes `contents` to `relative` (e.g. `"models.json"`, `"extensions/x.lua"`) below the
    /// agent dir, creating parent directories as needed.
    pub fn write(&self, relative: &str, contents: &str) {
        let path = self.dir.path().join(relative);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .unwrap_or_else(|e| panic!("create {}: {e}", parent.display()));
        }
        std::fs::write(&path, contents).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
    }

    /// A fresh agent dir whose `models.json` serves the mock's one model `m1` under `api_key`: the
    /// usual agent of a test that runs `mock/m1` (see `ZiCommand::rpc_m1`).
    pub fn with_m1(mock: &MockLlm, api_key: &str) -> AgentDir {
        AgentDir::new().models(mock, api_key, &[json!({"id": "m1"})])
    }

    /// `models.json` with provider `mock` (OpenAI chat completions) at `mock`, key `api_key`,
    /// serving `models` (see [`MockLlm::models_json`]).
    pub fn models(self, mock: &MockLlm, api_key: &str, models: &[Value]) -> AgentDir {
        self.write("models.json", &mock.models_json(api_key, models));
        self
    }

    /// Like [`AgentDir::models`] for any API zi speaks (see [`MockLlm::models_json_for`]).
    pub fn models_for(
        self,
        mock: &MockLlm,
        api: &str,
        api_key: &str,
        models: &[Value],
    ) -> AgentDir {
        self.write("models.json", &mock.models_json_for(api, api_key, models));
        self
    }

    /// `settings.json` (the global settings layer) with exactly `json`.
    pub fn settings(self, json: &str) -> AgentDir {
        self.write("settings.json", json);
        self
    }

    /// `trust.json` trusting exactly `projects`.
    pub fn trust(self, projects: &[&Path]) -> AgentDir {
        let trusted: Vec<String> = projects.iter().map(|p| p.display().to_string()).collect();
        self.write("trust.json", &json!({ "trusted": trusted }).to_string());
        self
    }

    /// `auth.json` with exactly `json` (credentials by provider).
    pub fn auth(self, json: &Value) -> AgentDir {
        self.write("auth.json", &json.to_string());
        self
    }

    /// A global extension: `extensions/<relative>` with `source`.
    pub fn extension(self, relative: &str, source: &str) -> AgentDir {
        self.write(&format!("extensions/{relative}"), source);
        self
    }
}

impl Default for AgentDir {
    fn default() -> Self {
        AgentDir::new()
    }
}

/// A temporary working directory, canonicalized as zi canonicalizes its cwd; removed on drop.
pub struct TempCwd {
    _dir: tempfile::TempDir,
    /// The canonical path.
    pub path: PathBuf,
}

/// Creates a [`TempCwd`].
pub fn temp_cwd() -> TempCwd {
    let dir = tempfile::Builder::new()
        .prefix("zi-cwd-")
        .tempdir()
        .unwrap_or_else(|e| panic!("create a temporary cwd: {e}"));
    let path = dir
        .path()
        .canonicalize()
        .unwrap_or_else(|e| panic!("canonicalize the cwd: {e}"));
    TempCwd { _dir: dir, path }
}

/// A temporary directory outside the `workspace-write` sandbox's fixed writable roots, `/tmp`
/// and `$TMPDIR` (docs/approvals.md), for tests whose "outside the roots" must be outside
/// wherever the checkout lives: a clone under `/tmp` puts the target's tmp dir inside a root.
/// It is below `preferred` (the target's tmp dir, `CARGO_TARGET_TMPDIR`) when that lies outside
/// the roots, else below `/var/tmp` or `$HOME`; canonical, removed on drop.
pub fn outside_writable_roots(prefix: &str, preferred: &Path) -> TempCwd {
    let roots: Vec<PathBuf> = [
        Some(PathBuf::from("/tmp")),
        std::env::var_os("TMPDIR").map(PathBuf::from),
    ]
    .into_iter()
    .flatten()
    .filter_map(|root| root.canonicalize().ok())
    .collect();
    let candidates = [
        Some(preferred.to_path_buf()),
        Some(PathBuf::from("/var/tmp")),
        std::env::var_os("HOME").map(PathBuf::from),
    ];
    for base in candidates.into_iter().flatten() {
        let Ok(base) = base.canonicalize() else {
            continue;
        };
        if roots.iter().any(|root| base.starts_with(root)) {
            continue;
        }
        if let Ok(dir) = tempfile::Builder::new().prefix(prefix).tempdir_in(&base)
            && let Ok(path) = dir.path().canonicalize()
        {
            return TempCwd { _dir: dir, path };
        }
    }
    panic!(
        "no writable directory outside /tmp and $TMPDIR (tried the target's tmp dir, /var/tmp, $HOME)"
    )
}

/// Every file below `dir`, recursively (what a test scans for bytes zi must never write, such as
/// secrets in journals). Unreadable entries are skipped.
pub fn all_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    collect_files(dir, &mut files);
    files
}

fn collect_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            collect_files(&path, out);
        } else {
            out.push(path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agent_dir_writes_nested_files() {
        let dir = AgentDir::new();
        dir.write("extensions/a/b.txt", "hi");
        assert_eq!(
            std::fs::read_to_string(dir.path().join("extensions/a/b.txt")).unwrap(),
            "hi"
        );
    }

    #[test]
    fn agent_dir_builders_write_the_files_zi_reads() {
        let cwd = temp_cwd();
        let dir = AgentDir::new()
            .settings(r#"{"retryEnabled": false}"#)
            .trust(&[&cwd.path])
            .auth(&json!({"mock": {"type": "api_key", "key": "k"}}))
            .extension("x/init.lua", "-- lua");
        let read = |name: &str| std::fs::read_to_string(dir.path().join(name)).unwrap();
        assert_eq!(read("settings.json"), r#"{"retryEnabled": false}"#);
        let trust: Value = serde_json::from_str(&read("trust.json")).unwrap();
        assert_eq!(trust, json!({"trusted": [cwd.path.display().to_string()]}));
        let auth: Value = serde_json::from_str(&read("auth.json")).unwrap();
        assert_eq!(auth["mock"]["key"], "k");
        assert_eq!(read("extensions/x/init.lua"), "-- lua");
    }
}
