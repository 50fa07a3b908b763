//! The `codeMode*` settings (docs/code-mode.md#settings), read from the global and (trusted)
//! project settings files like `mcpServers`: the project layer wins key by key. A value that is
//! not valid is a warning and turns Code Mode off (its bounds must never be looser than the
//! operator wrote).

use serde_json::Value;

use crate::limits::{Limits, MAX_CALLS, MEMORY_MIB, TIMEOUT_MS};

/// What the settings say.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CodeModeSettings {
    /// `codeMode`: offer `code` beside the other tools.
    pub enabled: bool,
    /// `codeModeTimeoutMs`, `codeModeMaxCalls` and `codeModeMemoryMiB`, or their defaults.
    pub limits: Limits,
    /// `codeModeSandbox: "engine-only"`: run cells where the worker cannot be confined.
    pub engine_only: bool,
}

/// The keys, in the order problems are reported.
pub const KEYS: [&str; 5] = [
    "codeMode",
    "codeModeTimeoutMs",
    "codeModeMaxCalls",
    "codeModeMemoryMiB",
    "codeModeSandbox",
];

/// The first invalid Code Mode setting; its Display is the warning (or, with `--code-mode`,
/// the start-up error) users read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SettingsError {
    /// A limit outside `1..=max`.
    #[error("(code mode) {key} must be an integer from 1 to {max}; Code Mode is off")]
    Range {
        /// The setting.
        key: String,
        /// Its largest value.
        max: u64,
    },
    /// `codeMode` is not a boolean.
    #[error("(code mode) codeMode must be true or false; Code Mode is off")]
    Enabled,
    /// `codeModeSandbox` is neither word.
    #[error("(code mode) codeModeSandbox must be required or engine-only; Code Mode is off")]
    Sandbox,
}

/// Reads the settings; `values(key)` gives the key's `(global, project)` values. `Err` is the
/// first invalid value (Code Mode is then off).
pub fn read(
    values: impl Fn(&str) -> (Option<Value>, Option<Value>),
) -> Result<CodeModeSettings, SettingsError> {
    let value = |key: &str| {
        let (global, project) = values(key);
        project.or(global)
    };
    let ranged = |key: &str, max: u64| -> Result<Option<u64>, SettingsError> {
        match value(key) {
            None => Ok(None),
            Some(v) => v
                .as_u64()
                .filter(|n| (1..=max).contains(n))
                .map(Some)
                .ok_or_else(|| SettingsError::Range {
                    key: key.to_string(),
                    max,
                }),
        }
    };
    let enabled = match value("codeMode") {
        None => false,
        Some(Value::Bool(on)) => on,
        Some(_) => {
            return Err(SettingsError::Enabled);
        }
    };
    let defaults = Limits::default();
    let limits = Limits {
        timeout_ms: ranged("codeModeTimeoutMs", TIMEOUT_MS)?.unwrap_or(defaults.timeout_ms),
        max_calls: ranged("codeModeMaxCalls", MAX_CALLS)?.unwrap_or(defaults.max_calls),
        memory_mib: ranged("codeModeMemoryMiB", MEMORY_MIB)?.unwrap_or(defaults.memory_mib),
        log_bytes: defaults.log_bytes,
    };
    let engine_only = match value("codeModeSandbox").as_ref().map(|v| v.as_str()) {
        None | Some(Some("required")) => false,
        Some(Some("engine-only")) => true,
        Some(_) => {
            return Err(SettingsError::Sandbox);
        }
    };
    Ok(CodeModeSettings {
        enabled,
        limits,
        engine_only,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn layers(global: Value, project: Value) -> impl Fn(&str) -> (Option<Value>, Option<Value>) {
        move |key: &str| (global.get(key).cloned(), project.get(key).cloned())
    }

    #[test]
    fn the_project_wins_and_bounds_only_go_down() {
        let read_ = |g, p| read(layers(g, p));
        assert_eq!(read_(json!({}), json!({})), Ok(CodeModeSettings::default()));
        let settings = read_(
            json!({"codeMode": true, "codeModeTimeoutMs": 5000}),
            json!({"codeModeTimeoutMs": 2000, "codeModeMaxCalls": 8}),
        )
        .unwrap_or_default();
        assert!(settings.enabled);
        assert_eq!(
            (settings.limits.timeout_ms, settings.limits.max_calls),
            (2000, 8)
        );
        assert_eq!(settings.limits.memory_mib, 64);
        for bad in [
            json!({"codeModeTimeoutMs": 120_001}),
            json!({"codeModeMaxCalls": 0}),
            json!({"codeModeMemoryMiB": 65}),
            json!({"codeMode": "yes"}),
            json!({"codeModeSandbox": "none"}),
        ] {
            assert!(read_(bad.clone(), json!({})).is_err(), "{bad}");
        }
        let engine = read_(json!({"codeModeSandbox": "engine-only"}), json!({}));
        assert!(engine.is_ok_and(|s| s.engine_only));
    }
}
