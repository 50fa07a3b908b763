//! The `sandbox` settings object (docs/approvals.md#configuration): one layer's keys, each optional
//! so layers merge key by key (the last layer that sets a key wins). The values are checked
//! here; zi-cli turns the merged keys into the sandbox configuration.

use serde_json::Value;

use super::file::Known;

const KEYS: [&str; 5] = [
    "mode",
    "network",
    "writableRoots",
    "onUnavailable",
    "loginShell",
];
/// Most writable roots, and longest root in bytes (docs/approvals.md#bounds).
pub(crate) const MAX_WRITABLE_ROOTS: usize = 32;
pub(crate) const MAX_ROOT_BYTES: usize = 4096;

/// One layer's `sandbox` object.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SandboxSettings {
    /// `read-only`, `workspace-write` or `full`.
    pub mode: Option<String>,
    /// Whether confined commands reach the network.
    pub network: Option<bool>,
    /// Absolute or `~/` paths.
    pub writable_roots: Option<Vec<String>>,
    /// `error` or `warn`.
    pub on_unavailable: Option<String>,
    /// Whether confined commands run through the login shell.
    pub login_shell: Option<bool>,
}

impl SandboxSettings {
    /// This layer over `earlier`, key by key.
    pub(super) fn over(&self, earlier: &SandboxSettings) -> SandboxSettings {
        SandboxSettings {
            mode: self.mode.clone().or_else(|| earlier.mode.clone()),
            network: self.network.or(earlier.network),
            writable_roots: self
                .writable_roots
                .clone()
                .or_else(|| earlier.writable_roots.clone()),
            on_unavailable: self
                .on_unavailable
                .clone()
                .or_else(|| earlier.on_unavailable.clone()),
            login_shell: self.login_shell.or(earlier.login_shell),
        }
    }

    /// Whether any key is set.
    pub fn is_empty(&self) -> bool {
        *self == SandboxSettings::default()
    }
}

impl Known for SandboxSettings {
    fn from_value(value: &Value) -> Option<Self> {
        parse(value).ok()
    }
}

/// Why a `sandbox` value is invalid (the settings file is then invalid: fail closed).
/// `Display` is the text of the start-up warning.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SandboxProblem {
    #[error(
        "sandbox must be an object with mode, network, writableRoots, onUnavailable, or loginShell"
    )]
    NotAnObject,
    #[error("sandbox.mode must be read-only, workspace-write, or full")]
    Mode,
    #[error("sandbox.network must be true or false")]
    Network,
    #[error(
        "sandbox.writableRoots must be at most {MAX_WRITABLE_ROOTS} absolute or ~/ paths of at most {MAX_ROOT_BYTES} bytes"
    )]
    WritableRoots,
    #[error("sandbox.onUnavailable must be \"error\" or \"warn\"")]
    OnUnavailable,
    #[error("sandbox.loginShell must be true or false")]
    LoginShell,
}

pub(super) fn parse(value: &Value) -> Result<SandboxSettings, SandboxProblem> {
    let Some(object) = value.as_object() else {
        return Err(SandboxProblem::NotAnObject);
    };
    if object.keys().any(|key| !KEYS.contains(&key.as_str())) {
        return Err(SandboxProblem::NotAnObject);
    }
    let mut settings = SandboxSettings::default();
    if let Some(mode) = object.get("mode") {
        match mode.as_str() {
            Some(text @ ("read-only" | "workspace-write" | "full")) => {
                settings.mode = Some(text.to_string());
            }
            _ => return Err(SandboxProblem::Mode),
        }
    }
    if let Some(network) = object.get("network") {
        settings.network = Some(network.as_bool().ok_or(SandboxProblem::Network)?);
    }
    if let Some(roots) = object.get("writableRoots") {
        settings.writable_roots = Some(roots_of(roots).ok_or(SandboxProblem::WritableRoots)?);
    }
    if let Some(on) = object.get("onUnavailable") {
        match on.as_str() {
            Some(text @ ("error" | "warn")) => settings.on_unavailable = Some(text.to_string()),
            _ => return Err(SandboxProblem::OnUnavailable),
        }
    }
    if let Some(login) = object.get("loginShell") {
        settings.login_shell = Some(login.as_bool().ok_or(SandboxProblem::LoginShell)?);
    }
    Ok(settings)
}

fn roots_of(value: &Value) -> Option<Vec<String>> {
    let items = value.as_array()?;
    if items.len() > MAX_WRITABLE_ROOTS {
        return None;
    }
    items
        .iter()
        .map(|item| {
            item.as_str()
                .filter(|p| {
                    p.len() <= MAX_ROOT_BYTES
                        && !p.contains('\0')
                        && (p.starts_with('/') || p.starts_with("~/"))
                })
                .map(str::to_string)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn values_are_checked_with_their_messages() {
        assert_eq!(
            parse(&json!({"mode": "workspace-write", "writableRoots": ["~/.cache", "/opt/x"]})),
            Ok(SandboxSettings {
                mode: Some("workspace-write".into()),
                writable_roots: Some(vec!["~/.cache".into(), "/opt/x".into()]),
                ..SandboxSettings::default()
            })
        );
        assert_eq!(
            parse(&json!({"mode": "loose"})).unwrap_err().to_string(),
            "sandbox.mode must be read-only, workspace-write, or full"
        );
        assert!(
            parse(&json!({"writableRoots": ["relative"]}))
                .unwrap_err()
                .to_string()
                .starts_with("sandbox.writableRoots")
        );
        assert_eq!(
            parse(&json!({"other": 1})),
            Err(SandboxProblem::NotAnObject)
        );
        assert!(
            parse(&json!("full"))
                .unwrap_err()
                .to_string()
                .starts_with("sandbox must be an object")
        );
        assert_eq!(
            parse(&json!({"network": "no"})).unwrap_err().to_string(),
            "sandbox.network must be true or false"
        );
    }
}
