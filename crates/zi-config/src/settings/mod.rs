//! Layered settings (docs/configuration.md#settingsjson): defaults < global < project < invocation.
//!
//! Files are small JSON objects. An invalid or oversized file is reported once as a warning and
//! skipped; it is never overwritten. Writes take a lock, merge into the current object, and
//! replace the file atomically through a temporary file and rename.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};
use zi_protocol::ThinkingLevel;
use zi_protocol::request::SettingsScope;
use zi_protocol::state::QueueMode;

mod file;
mod problem;
mod sandbox;

use file::SettingsFile;
use file::{Field, Name};
use problem::SettingsProblem;
pub use sandbox::SandboxSettings;

/// Largest settings file zi reads.
const MAX_SETTINGS_BYTES: u64 = 1024 * 1024;

/// Why a settings write failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SettingsError {
    /// The project is not trusted: its settings file is neither read nor written.
    #[error("Cannot update project settings before project trust: {}", .0.display())]
    ProjectUntrusted(PathBuf),
    /// The file exists but is not a valid settings object; it is never overwritten.
    #[error("Cannot update invalid {scope} settings: {}", .path.display())]
    Invalid {
        /// `global` or `project`.
        scope: &'static str,
        /// The file.
        path: PathBuf,
    },
    /// The file's path has no parent directory to create it in.
    #[error("Invalid settings path: {}", .0.display())]
    InvalidPath(PathBuf),
    /// A file-system step of the locked write failed.
    #[error("Could not {action} {}: {reason}", .path.display())]
    Io {
        /// The step, as the text says it (`create`, `lock settings`, `write`, `replace`, …).
        action: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The system's error.
        reason: String,
    },
    /// The merged object could not be serialized.
    #[error("Could not encode settings: {0}")]
    Encode(String),
}

fn io_error(action: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> SettingsError {
    let path = path.to_path_buf();
    move |error| SettingsError::Io {
        action,
        path,
        reason: error.to_string(),
    }
}

/// The effective values zi uses.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    /// `defaultProvider`: with `default_model`, the model a new session starts with.
    pub default_provider: Option<String>,
    /// `defaultModel`.
    pub default_model: Option<String>,
    /// `defaultThinkingLevel`: the level a new session starts with.
    pub default_thinking_level: Option<ThinkingLevel>,
    /// `steeringMode`: how many steering messages one delivery takes.
    pub steering_mode: QueueMode,
    /// `followUpMode`: how many follow-up messages one delivery takes.
    pub follow_up_mode: QueueMode,
    /// When and how the conversation is compacted.
    pub compaction: CompactionSettings,
    /// Retries of failed provider requests.
    pub retry: RetrySettings,
    /// Delegation timers.
    pub subagents: SubagentSettings,
}

/// Delegation timers (docs/delegation.md#limits).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SubagentSettings {
    /// Default of `wait_subagents` and the interrupt evidence wait; 0–3,600,000 ms.
    pub wait_timeout_ms: u64,
    /// Per work cycle; 1–3,600,000 ms.
    pub work_timeout_ms: u64,
}

impl Default for SubagentSettings {
    fn default() -> Self {
        SubagentSettings {
            wait_timeout_ms: 30_000,
            work_timeout_ms: 900_000,
        }
    }
}

/// Automatic retry of retryable provider errors (docs/providers.md#automatic-retry).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetrySettings {
    /// `retryEnabled`: whether retryable provider errors are retried.
    pub enabled: bool,
    /// 0–3.
    pub max_retries: u32,
    /// 0–17,000 ms.
    pub base_delay_ms: u64,
}

/// Longest wait between two attempts.
pub(crate) const MAX_RETRY_DELAY_MS: u64 = 68_000;

impl RetrySettings {
    /// `min(base × 2^(attempt−1), 68 s)` for a 1-based attempt.
    pub fn delay_ms(&self, attempt: u32) -> u64 {
        let factor = 1u64 << attempt.saturating_sub(1).min(16);
        self.base_delay_ms
            .saturating_mul(factor)
            .min(MAX_RETRY_DELAY_MS)
    }
}

impl Default for RetrySettings {
    fn default() -> Self {
        RetrySettings {
            enabled: true,
            max_retries: 3,
            base_delay_ms: 2_000,
        }
    }
}

/// Compaction settings (docs/configuration.md#compaction).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CompactionSettings {
    /// `compactionEnabled`: whether zi compacts long sessions on its own.
    pub enabled: bool,
    /// `compactionReserveTokens`: room kept free in the window for the next answer; zi
    /// compacts when the context would take it.
    pub reserve_tokens: u64,
    /// `compactionKeepRecentTokens`: how much recent conversation stays verbatim.
    pub keep_recent_tokens: u64,
}

impl Default for CompactionSettings {
    fn default() -> Self {
        CompactionSettings {
            enabled: true,
            reserve_tokens: 16_384,
            keep_recent_tokens: 20_000,
        }
    }
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            default_provider: None,
            default_model: None,
            default_thinking_level: None,
            steering_mode: QueueMode::OneAtATime,
            follow_up_mode: QueueMode::OneAtATime,
            compaction: CompactionSettings::default(),
            retry: RetrySettings::default(),
            subagents: SubagentSettings::default(),
        }
    }
}

/// Most entries of a path list setting, and longest path in bytes.
pub(crate) const MAX_PATH_ENTRIES: usize = 128;
pub(crate) const MAX_PATH_BYTES: usize = 4_096;

/// One file layer: its object, or why it was rejected.
#[derive(Debug, Clone)]
enum Layer {
    Missing,
    Valid(Box<SettingsFile>),
    Invalid,
}

/// The settings files of one invocation.
#[derive(Debug)]
pub struct SettingsStore {
    global_path: PathBuf,
    project_path: PathBuf,
    project_trusted: bool,
    global: Layer,
    project: Layer,
    /// Invocation overrides (flags and env), cleared per key when that key is written.
    overrides: Map<String, Value>,
    /// `overrides`, deserialized.
    overrides_file: SettingsFile,
    /// The merged view, computed once per change (every state snapshot reads it).
    merged: std::sync::OnceLock<Settings>,
    /// The first rejected layer that carried a `sandbox` key: dropping it would silently
    /// loosen the sandbox, so zi fails closed instead (docs/approvals.md#layers-and-precedence).
    sandbox_problem: Option<InvalidLayer>,
    /// The `approvals` values of the global and project files, or what broke them.
    approval_layers: [crate::approval::SettingsLayer; 2],
}

/// A rejected settings file and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidLayer {
    /// The settings file.
    pub path: PathBuf,
    /// The start-up warning's text.
    pub problem: String,
}

impl SettingsStore {
    /// Loads both layers and returns the store with one warning per rejected file.
    pub fn load(
        agent_dir: &Path,
        cwd: &Path,
        project_trusted: bool,
    ) -> (SettingsStore, Vec<String>) {
        let global_path = agent_dir.join("settings.json");
        let project_path = cwd.join(".zi").join("settings.json");
        let mut warnings = Vec::new();
        let mut sandbox_problem = None;
        let (global, global_approvals) =
            read_layer(&global_path, "global", &mut warnings, &mut sandbox_problem);
        let (project, project_approvals) =
            if project_trusted && !same_file(&project_path, &global_path) {
                read_layer(
                    &project_path,
                    "project",
                    &mut warnings,
                    &mut sandbox_problem,
                )
            } else {
                (Layer::Missing, crate::approval::SettingsLayer::Absent)
            };
        let store = SettingsStore {
            global_path,
            project_path,
            project_trusted,
            global,
            project,
            overrides: Map::new(),
            overrides_file: SettingsFile::default(),
            merged: std::sync::OnceLock::new(),
            sandbox_problem,
            approval_layers: [global_approvals, project_approvals],
        };
        (store, warnings)
    }

    /// The `approvals` layers of the global and project files
    /// (docs/approvals.md#layers-and-precedence), as loaded at start-up.
    pub fn approval_layers(&self) -> [crate::approval::SettingsLayer; 2] {
        self.approval_layers.clone()
    }

    /// Sets `key` for this invocation only (a flag or variable), above both files, until the
    /// key is written.
    pub fn set_override(&mut self, key: &str, value: Value) {
        self.overrides.insert(key.to_string(), value);
        self.reparse_overrides();
        self.merged = std::sync::OnceLock::new();
    }

    fn reparse_overrides(&mut self) {
        self.overrides_file = SettingsFile::from_map(self.overrides.clone()).unwrap_or_default();
    }

    /// The merged view.
    pub fn effective(&self) -> Settings {
        self.merged.get_or_init(|| self.merge()).clone()
    }

    fn merge(&self) -> Settings {
        let mut merged = SettingsFile::default();
        for layer in [&self.global, &self.project] {
            if let Layer::Valid(file) = layer {
                merged = file.over(&merged);
            }
        }
        parse_settings(&self.overrides_file.over(&merged))
    }

    /// The `sandbox` keys of the global and project layers, merged key by key.
    pub fn sandbox(&self) -> SandboxSettings {
        let mut merged = SandboxSettings::default();
        for layer in [&self.global, &self.project] {
            if let Layer::Valid(file) = layer
                && let Some(sandbox) = file.sandbox()
            {
                merged = sandbox.over(&merged);
            }
        }
        merged
    }

    /// `codexFastMode`, read from the global layer only (docs/configuration.md#settingsjson): a
    /// project cannot make Codex requests spend the plan's priority usage.
    pub fn codex_fast_mode(&self) -> bool {
        matches!(&self.global, Layer::Valid(file) if file.codex_fast_mode.valid() == Some(&true))
    }

    /// The first settings file rejected while it carried a `sandbox` key (fail closed).
    pub fn sandbox_problem(&self) -> Option<&InvalidLayer> {
        self.sandbox_problem.as_ref()
    }

    /// The `skills` path lists of the global and project layers (strings only; non-strings are
    /// ignored). The project list is empty for untrusted projects.
    pub fn skill_paths(&self) -> (Vec<String>, Vec<String>) {
        self.path_lists("skills")
    }

    /// The `extensions` path lists of the global and project layers, like
    /// [`SettingsStore::skill_paths`].
    pub fn extension_paths(&self) -> (Vec<String>, Vec<String>) {
        self.path_lists("extensions")
    }

    /// A key another crate interprets (`mcpServers`), as written in the global and project
    /// layers; the project value is `None` for untrusted projects.
    pub fn layer_values(&self, key: &str) -> (Option<Value>, Option<Value>) {
        let value = |layer: &Layer| match layer {
            Layer::Valid(file) => file.unparsed(key).cloned(),
            _ => None,
        };
        (value(&self.global), value(&self.project))
    }

    fn path_lists(&self, key: &str) -> (Vec<String>, Vec<String>) {
        let list = |layer: &Layer| -> Vec<String> {
            match layer {
                Layer::Valid(file) => file.paths(key),
                _ => Vec::new(),
            }
        };
        (list(&self.global), list(&self.project))
    }

    fn path_for(&self, scope: SettingsScope) -> &Path {
        match scope {
            SettingsScope::Global => &self.global_path,
            SettingsScope::Project if same_file(&self.project_path, &self.global_path) => {
                &self.global_path
            }
            SettingsScope::Project => &self.project_path,
        }
    }

    /// Merges `patch` into one scope's file.
    pub fn write(
        &mut self,
        scope: SettingsScope,
        patch: Map<String, Value>,
    ) -> Result<(), SettingsError> {
        let path = self.path_for(scope).to_path_buf();
        let scope = if path == self.global_path {
            SettingsScope::Global
        } else {
            scope
        };
        if scope == SettingsScope::Project && !self.project_trusted {
            return Err(SettingsError::ProjectUntrusted(path));
        }
        let scope_name = scope.as_str();
        let merged = write_merged(&path, scope_name, &patch)?;
        for key in patch.keys() {
            self.overrides.remove(key);
        }
        self.reparse_overrides();
        // What zi wrote is valid; an unknown key it merged stays in `other`.
        let merged = SettingsFile::from_map(merged).unwrap_or_default();
        match scope {
            SettingsScope::Global => self.global = Layer::Valid(Box::new(merged)),
            SettingsScope::Project => self.project = Layer::Valid(Box::new(merged)),
        }
        self.merged = std::sync::OnceLock::new();
        Ok(())
    }
}

fn same_file(a: &Path, b: &Path) -> bool {
    a == b || matches!((a.canonicalize(), b.canonicalize()), (Ok(x), Ok(y)) if x == y)
}

/// Reads one file layer and its `approvals` value. An invalid `approvals` value invalidates
/// the file; a file with `approvals` or `sandbox` keys that is dropped for any reason breaks
/// approvals (fail closed: dropping it would drop its deny rules).
fn read_layer(
    path: &Path,
    scope: &str,
    warnings: &mut Vec<String>,
    sandbox_problem: &mut Option<InvalidLayer>,
) -> (Layer, crate::approval::SettingsLayer) {
    use crate::approval::SettingsLayer;
    match read_object(path) {
        Ok(Some(map)) => {
            let approvals = map
                .get("approvals")
                .map(crate::approval::config::parse_settings_value)
                .transpose();
            let checked = approvals
                .clone()
                .map_err(SettingsProblem::from)
                .and_then(|_| validate(&map))
                .map_err(|problem| problem.to_string());
            match checked {
                Ok(file) => {
                    let layer = match approvals {
                        Ok(Some(values)) => SettingsLayer::Valid(values),
                        _ => SettingsLayer::Absent,
                    };
                    (Layer::Valid(Box::new(file)), layer)
                }
                Err(problem) => {
                    warnings.push(format!("({scope} settings) {}: {problem}", path.display()));
                    if map.contains_key("sandbox") && sandbox_problem.is_none() {
                        *sandbox_problem = Some(InvalidLayer {
                            path: path.to_path_buf(),
                            problem: problem.clone(),
                        });
                    }
                    // Dropping the file drops its approval rules, so approvals fail closed
                    // until a higher layer sets `policy`; a dropped `sandbox` value fails
                    // closed in the sandbox's own configuration (until a layer sets the mode).
                    let layer = if map.contains_key("approvals") {
                        SettingsLayer::Broken {
                            path: path.display().to_string(),
                            problem,
                        }
                    } else {
                        SettingsLayer::Absent
                    };
                    (Layer::Invalid, layer)
                }
            }
        }
        Ok(None) => (Layer::Missing, SettingsLayer::Absent),
        Err(problem) => {
            warnings.push(format!("({scope} settings) {problem}"));
            (Layer::Invalid, SettingsLayer::Absent)
        }
    }
}

/// Reads a settings object. `Ok(None)` when the file does not exist.
fn read_object(path: &Path) -> Result<Option<Map<String, Value>>, SettingsProblem> {
    let Some(text) = zi_os::config_file::read_bounded_text(path, MAX_SETTINGS_BYTES)? else {
        return Ok(None);
    };
    match serde_json::from_str::<Value>(&text) {
        Ok(Value::Object(map)) => Ok(Some(map)),
        Ok(_) => Err(SettingsProblem::NotAnObject {
            path: path.to_path_buf(),
        }),
        Err(source) => Err(SettingsProblem::NotJson {
            path: path.to_path_buf(),
            source,
        }),
    }
}

/// Deserializes a settings object and checks the fields zi understands; unknown keys are kept.
fn validate(map: &Map<String, Value>) -> Result<SettingsFile, SettingsProblem> {
    let file = SettingsFile::from_map(map.clone())?;
    file.check()?;
    Ok(file)
}

/// The effective values of merged layers. Invalid values (only invocation overrides can hold
/// them) read leniently: a string is taken as is, anything else falls back to the default.
fn parse_settings(file: &SettingsFile) -> Settings {
    let defaults = Settings::default();
    let text = |field: &Field<Name>| match field {
        Field::Valid(name) => Some(name.0.clone()),
        Field::Invalid(value) => value.as_str().map(str::to_string),
        Field::Absent => None,
    };
    let flag = |field: &Field<bool>, default: bool| field.valid().copied().unwrap_or(default);
    let mode = |field: &Field<QueueMode>| field.valid().copied().unwrap_or(QueueMode::OneAtATime);
    let compaction = CompactionSettings::default();
    Settings {
        default_provider: text(&file.default_provider),
        default_model: text(&file.default_model),
        default_thinking_level: file.default_thinking_level.valid().copied(),
        steering_mode: mode(&file.steering_mode),
        follow_up_mode: mode(&file.follow_up_mode),
        compaction: CompactionSettings {
            enabled: flag(&file.compaction_enabled, compaction.enabled),
            reserve_tokens: file
                .compaction_reserve_tokens
                .valid()
                .map_or(compaction.reserve_tokens, |n| n.0),
            keep_recent_tokens: file
                .compaction_keep_recent_tokens
                .valid()
                .map_or(compaction.keep_recent_tokens, |n| n.0),
        },
        retry: RetrySettings {
            enabled: flag(&file.retry_enabled, defaults.retry.enabled),
            max_retries: file
                .retry_max_retries
                .valid()
                .map_or(defaults.retry.max_retries, |n| n.0 as u32),
            base_delay_ms: file
                .retry_base_delay_ms
                .valid()
                .map_or(defaults.retry.base_delay_ms, |n| n.0),
        },
        subagents: SubagentSettings {
            wait_timeout_ms: file
                .subagent_wait_timeout_ms
                .valid()
                .map_or(defaults.subagents.wait_timeout_ms, |n| n.0),
            work_timeout_ms: file
                .subagent_work_timeout_ms
                .valid()
                .map_or(defaults.subagents.work_timeout_ms, |n| n.0),
        },
    }
}

/// Lock, read, merge, write a temporary file, rename. Returns the merged object.
fn write_merged(
    path: &Path,
    scope: &'static str,
    patch: &Map<String, Value>,
) -> Result<Map<String, Value>, SettingsError> {
    let dir = path
        .parent()
        .ok_or_else(|| SettingsError::InvalidPath(path.to_path_buf()))?;
    std::fs::create_dir_all(dir).map_err(io_error("create", dir))?;
    let lock_path = dir.join(".settings.json.lock");
    let lock = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(io_error("open settings lock", &lock_path))?;
    lock.lock().map_err(io_error("lock settings", &lock_path))?;
    let result = (|| {
        let mut current = match read_object(path) {
            Ok(Some(map)) if validate(&map).is_ok() => map,
            Ok(None) => Map::new(),
            _ => {
                return Err(SettingsError::Invalid {
                    scope,
                    path: path.to_path_buf(),
                });
            }
        };
        current.extend(patch.iter().map(|(k, v)| (k.clone(), v.clone())));
        let mut text = serde_json::to_string_pretty(&Value::Object(current.clone()))
            .map_err(|error| SettingsError::Encode(error.to_string()))?;
        text.push('\n');
        let temp = dir.join(format!(".settings.json.{}.tmp", std::process::id()));
        let mut file = File::create(&temp).map_err(io_error("write", &temp))?;
        file.write_all(text.as_bytes())
            .and_then(|()| file.sync_all())
            .map_err(io_error("write", &temp))?;
        std::fs::rename(&temp, path).map_err(|error| {
            let _ = std::fs::remove_file(&temp);
            io_error("replace", path)(error)
        })?;
        Ok(current)
    })();
    let _ = lock.unlock();
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("zi-settings-{name}-{}", uuid::Uuid::new_v4()));
        let _ = std::fs::create_dir_all(&dir);
        dir
    }

    #[test]
    fn layers_merge_and_project_needs_trust() {
        let agent = temp_dir("agent");
        let cwd = temp_dir("cwd");
        std::fs::write(
            agent.join("settings.json"),
            r#"{"defaultThinkingLevel":"low"}"#,
        )
        .unwrap();
        std::fs::create_dir_all(cwd.join(".zi")).unwrap();
        std::fs::write(
            cwd.join(".zi/settings.json"),
            r#"{"defaultThinkingLevel":"high"}"#,
        )
        .unwrap();
        let (untrusted, warnings) = SettingsStore::load(&agent, &cwd, false);
        assert!(warnings.is_empty());
        assert_eq!(
            untrusted.effective().default_thinking_level,
            Some(ThinkingLevel::Low)
        );
        let (trusted, _) = SettingsStore::load(&agent, &cwd, true);
        assert_eq!(
            trusted.effective().default_thinking_level,
            Some(ThinkingLevel::High)
        );
    }

    #[test]
    fn invalid_file_warns_and_is_never_overwritten() {
        let agent = temp_dir("invalid");
        let cwd = temp_dir("invalid-cwd");
        std::fs::write(agent.join("settings.json"), "{not json").unwrap();
        let (mut store, warnings) = SettingsStore::load(&agent, &cwd, false);
        assert_eq!(warnings.len(), 1);
        let mut patch = Map::new();
        patch.insert("defaultThinkingLevel".into(), Value::from("high"));
        let error = store
            .write(SettingsScope::Global, patch)
            .unwrap_err()
            .to_string();
        assert!(error.starts_with("Cannot update invalid global settings: "));
        assert_eq!(
            std::fs::read_to_string(agent.join("settings.json")).unwrap(),
            "{not json"
        );
    }

    #[test]
    fn writes_merge_and_clear_overrides() {
        let agent = temp_dir("write");
        let cwd = temp_dir("write-cwd");
        std::fs::write(agent.join("settings.json"), r#"{"custom":1}"#).unwrap();
        let (mut store, _) = SettingsStore::load(&agent, &cwd, false);
        store.set_override("defaultThinkingLevel", Value::from("max"));
        let mut patch = Map::new();
        patch.insert("defaultThinkingLevel".into(), Value::from("low"));
        store.write(SettingsScope::Global, patch.clone()).unwrap();
        assert_eq!(
            store.effective().default_thinking_level,
            Some(ThinkingLevel::Low)
        );
        let text = std::fs::read_to_string(agent.join("settings.json")).unwrap();
        assert_eq!(
            text,
            "{\n  \"custom\": 1,\n  \"defaultThinkingLevel\": \"low\"\n}\n"
        );
        let error = store
            .write(SettingsScope::Project, patch)
            .unwrap_err()
            .to_string();
        assert!(error.starts_with("Cannot update project settings before project trust: "));
    }

    #[test]
    fn every_field_is_validated() {
        let bad = [
            r#"{"retryEnabled": "yes"}"#,
            r#"{"retryMaxRetries": 4}"#,
            r#"{"retryMaxRetries": -1}"#,
            r#"{"retryBaseDelayMs": 17001}"#,
            r#"{"retryBaseDelayMs": 1.5}"#,
            r#"{"compactionEnabled": 1}"#,
            r#"{"compactionReserveTokens": 0}"#,
            r#"{"compactionKeepRecentTokens": 1000001}"#,
            r#"{"steeringMode": "some"}"#,
            r#"{"followUpMode": null}"#,
            r#"{"defaultModel": ""}"#,
            r#"{"defaultThinkingLevel": "huge"}"#,
            r#"{"extensions": "a.lua"}"#,
            r#"{"skills": [""]}"#,
            r#"{"prompts": [1]}"#,
        ];
        for text in bad {
            let map = serde_json::from_str::<Map<String, Value>>(text).unwrap();
            assert!(validate(&map).is_err(), "{text} should be rejected");
        }
        let too_many = serde_json::json!({"extensions": vec!["x"; MAX_PATH_ENTRIES + 1]});
        assert!(validate(too_many.as_object().unwrap()).is_err());
        let long = serde_json::json!({"skills": ["x".repeat(MAX_PATH_BYTES + 1)]});
        assert!(validate(long.as_object().unwrap()).is_err());
        let good = serde_json::json!({"retryEnabled": false, "retryMaxRetries": 0,
            "retryBaseDelayMs": 17000, "compactionEnabled": false, "compactionReserveTokens": 1,
            "compactionKeepRecentTokens": 1000000, "extensions": ["a.lua"], "unknown": {"kept": 1}});
        let file = validate(good.as_object().unwrap()).unwrap();
        assert_eq!(
            file.other.get("unknown"),
            Some(&serde_json::json!({"kept": 1}))
        );
        let parsed = parse_settings(&file);
        assert_eq!(
            parsed.retry,
            RetrySettings {
                enabled: false,
                max_retries: 0,
                base_delay_ms: 17_000
            }
        );
        assert!(!parsed.compaction.enabled);
        assert_eq!(parsed.compaction.reserve_tokens, 1);
        assert_eq!(parsed.compaction.keep_recent_tokens, 1_000_000);
    }

    /// The texts of the start-up warnings (configuration.md), byte for byte.
    // Long on purpose: the table of every start-up warning text, one row each, as configuration.md
    // lists them.
    #[test]
    fn every_problem_reads_exactly_as_documented() {
        let cases = [
            (
                r#"{"defaultModel": ""}"#,
                "defaultModel must be a non-empty string",
            ),
            (
                r#"{"defaultProvider": 1}"#,
                "defaultProvider must be a non-empty string",
            ),
            (
                r#"{"defaultThinkingLevel": "huge"}"#,
                "defaultThinkingLevel must be one of off, minimal, low, medium, high, xhigh, max",
            ),
            (
                r#"{"compactionEnabled": 1}"#,
                "compactionEnabled must be true or false",
            ),
            (
                r#"{"compactionReserveTokens": 0}"#,
                "compactionReserveTokens must be an integer from 1 through 1000000",
            ),
            (
                r#"{"compactionKeepRecentTokens": 1000001}"#,
                "compactionKeepRecentTokens must be an integer from 1 through 1000000",
            ),
            (
                r#"{"steeringMode": "some"}"#,
                r#"steeringMode must be "all" or "one-at-a-time""#,
            ),
            (
                r#"{"followUpMode": null}"#,
                r#"followUpMode must be "all" or "one-at-a-time""#,
            ),
            (
                r#"{"retryEnabled": "yes"}"#,
                "retryEnabled must be true or false",
            ),
            (
                r#"{"codexFastMode": 0}"#,
                "codexFastMode must be true or false",
            ),
            (
                r#"{"retryMaxRetries": 4}"#,
                "retryMaxRetries must be an integer from 0 to 3",
            ),
            (
                r#"{"retryBaseDelayMs": 1.5}"#,
                "retryBaseDelayMs must be an integer from 0 to 17000",
            ),
            (
                r#"{"subagentWaitTimeoutMs": 3600001}"#,
                "Invalid subagentWaitTimeoutMs setting",
            ),
            (
                r#"{"subagentWorkTimeoutMs": 0}"#,
                "Invalid subagentWorkTimeoutMs setting",
            ),
            (
                r#"{"externalEditor": 1}"#,
                "externalEditor must be a string",
            ),
            (
                r#"{"extensions": "a.lua"}"#,
                "extensions must be an array of paths",
            ),
            (
                r#"{"skills": [""]}"#,
                "skills entries must be non-empty paths of at most 4096 bytes",
            ),
            // The first invalid key in the documented order wins.
            (
                r#"{"prompts": [1], "retryEnabled": 1, "defaultModel": ""}"#,
                "defaultModel must be a non-empty string",
            ),
        ];
        for (text, message) in cases {
            let map = serde_json::from_str::<Map<String, Value>>(text).unwrap();
            let problem = validate(&map).err().map(|problem| problem.to_string());
            assert_eq!(problem.as_deref(), Some(message), "{text}");
        }
        let too_many = serde_json::json!({"prompts": vec!["x"; MAX_PATH_ENTRIES + 1]});
        assert_eq!(
            validate(too_many.as_object().unwrap())
                .err()
                .map(|p| p.to_string()),
            Some("prompts has more than 128 entries".to_string())
        );
        let dir = temp_dir("problems");
        let path = dir.join("settings.json");
        std::fs::write(&path, "[]").unwrap();
        assert_eq!(
            read_object(&path).err().map(|p| p.to_string()),
            Some(format!("{} must contain a JSON object", path.display()))
        );
        std::fs::write(&path, "{").unwrap();
        let problem = read_object(&path)
            .err()
            .map(|p| p.to_string())
            .unwrap_or_default();
        assert!(
            problem.starts_with(&format!("{} is not valid JSON: ", path.display())),
            "{problem}"
        );
    }

    #[test]
    fn retry_delay_doubles_and_caps_at_68_seconds() {
        let retry = RetrySettings::default();
        assert_eq!(retry.delay_ms(1), 2_000);
        assert_eq!(retry.delay_ms(2), 4_000);
        assert_eq!(retry.delay_ms(3), 8_000);
        let slow = RetrySettings {
            base_delay_ms: 17_000,
            ..retry
        };
        assert_eq!(slow.delay_ms(3), 68_000);
        assert_eq!(slow.delay_ms(4), 68_000);
        assert_eq!(slow.delay_ms(40), 68_000);
    }

    #[test]
    fn invalid_project_layer_falls_back_to_global() {
        let agent = temp_dir("fallback");
        let cwd = temp_dir("fallback-cwd");
        std::fs::write(agent.join("settings.json"), r#"{"retryMaxRetries": 1}"#).unwrap();
        std::fs::create_dir_all(cwd.join(".zi")).unwrap();
        std::fs::write(cwd.join(".zi/settings.json"), r#"{"retryMaxRetries": 9}"#).unwrap();
        let (store, warnings) = SettingsStore::load(&agent, &cwd, true);
        assert_eq!(warnings.len(), 1);
        assert!(
            warnings[0].starts_with("(project settings) "),
            "{warnings:?}"
        );
        assert_eq!(store.effective().retry.max_retries, 1);
    }

    #[test]
    fn concurrent_writers_lose_no_key() {
        let agent = temp_dir("concurrent");
        let cwd = temp_dir("concurrent-cwd");
        let threads: Vec<_> = (0..8)
            .map(|n| {
                let agent = agent.clone();
                let cwd = cwd.clone();
                std::thread::spawn(move || {
                    let (mut store, _) = SettingsStore::load(&agent, &cwd, false);
                    for round in 0..5 {
                        let mut patch = Map::new();
                        patch.insert(format!("key{n}"), Value::from(round));
                        store.write(SettingsScope::Global, patch).unwrap();
                    }
                })
            })
            .collect();
        for thread in threads {
            thread.join().unwrap();
        }
        let text = std::fs::read_to_string(agent.join("settings.json")).unwrap();
        let map: Map<String, Value> = serde_json::from_str(&text).unwrap();
        for n in 0..8 {
            assert_eq!(map.get(&format!("key{n}")), Some(&Value::from(4)), "{text}");
        }
    }
}
