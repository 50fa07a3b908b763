//! How `bash` and `write`/`edit` meet the session's sandbox (approvals-reference §6): the spawn
//! plan of one command and what its result gains, and the path check of a file change.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{Value, json};
use zi_agent::ToolOutput;
use zi_agent::approval::Escape;
use zi_protocol::message::ContentBlock;
use zi_sandbox::{
    Confinement, Enforcement, OnUnavailable, PathDenied, Sandbox, likely_sandbox_denied,
};

use crate::shell::Termination;
use crate::{ToolEnv, failure_with};

/// How one `bash` command runs.
pub(crate) enum SpawnPlan {
    /// Mode `full`: zi v1 exactly (login shell, no confinement, no `details.sandbox`).
    Plain,
    /// Confined by a ruleset built for this spawn.
    Confined {
        sandbox: Arc<Sandbox>,
        confinement: Arc<Confinement>,
    },
    /// The sandbox is unavailable and `onUnavailable` is `warn`: runs unconfined, with a notice.
    Unconfined {
        sandbox: Arc<Sandbox>,
        reason: String,
    },
}

impl SpawnPlan {
    /// The plan for a command now, or the `sandbox_unavailable` result (never an unconfined
    /// run when a sandbox is required and cannot be applied).
    pub(crate) fn for_command(sandbox: Arc<Sandbox>) -> Result<SpawnPlan, ToolOutput> {
        config_invalid(&sandbox)?;
        if !sandbox.is_confined_mode() {
            return Ok(SpawnPlan::Plain);
        }
        let reason = match sandbox.enforcement() {
            Enforcement::Unavailable { reason, .. } => reason.clone(),
            _ => match sandbox.confine() {
                Ok(confinement) => {
                    return Ok(SpawnPlan::Confined {
                        sandbox,
                        confinement: Arc::new(confinement),
                    });
                }
                Err(error) => error.0,
            },
        };
        if sandbox.on_unavailable() == OnUnavailable::Warn {
            return Ok(SpawnPlan::Unconfined { sandbox, reason });
        }
        Err(unavailable(&sandbox, &reason))
    }

    pub(crate) fn login(&self) -> bool {
        match self {
            SpawnPlan::Plain => true,
            SpawnPlan::Confined { sandbox, .. } | SpawnPlan::Unconfined { sandbox, .. } => {
                sandbox.login_shell()
            }
        }
    }

    pub(crate) fn confinement(&self) -> Option<Arc<Confinement>> {
        match self {
            SpawnPlan::Confined { confinement, .. } => Some(confinement.clone()),
            _ => None,
        }
    }

    /// `details.sandbox` for a sandboxed result; nothing for an unsandboxed one (v1 shape).
    pub(crate) fn details(&self) -> Option<Value> {
        match self {
            SpawnPlan::Confined { sandbox, .. } => Some(sandbox.details()),
            _ => None,
        }
    }

    /// Adds what the sandbox contributes to a finished foreground command's result: the
    /// notice of an unconfined run, or the §6.5 hint for a likely sandbox denial, and
    /// `details.sandbox`. A spawn the sandbox refused becomes `sandbox_unavailable`.
    pub(crate) fn finish(&self, termination: &Termination, output: ToolOutput) -> ToolOutput {
        match self {
            SpawnPlan::Plain => output,
            SpawnPlan::Unconfined { sandbox, reason } => {
                append_text(output, &sandbox.unavailable_notice(reason))
            }
            SpawnPlan::Confined { sandbox, .. } => {
                if let Termination::SandboxFailed(reason) = termination {
                    return unavailable(sandbox, reason);
                }
                let (code, signal, timed_out) = match termination {
                    Termination::Exited(code) => (Some(*code), None, false),
                    Termination::Signaled(signal) => (None, Some(*signal), false),
                    Termination::TimedOut => (None, None, true),
                    _ => (None, None, false),
                };
                let text = output_text(&output);
                let mut output = if likely_sandbox_denied(code, signal, timed_out, &text) {
                    append_text(output, &sandbox.denied_hint())
                } else {
                    output
                };
                if let Some(details) = output.details.as_mut().and_then(Value::as_object_mut) {
                    details.insert("sandbox".into(), sandbox.details());
                }
                output
            }
        }
    }
}

/// `approval_config_invalid` (§3.3) while the sandbox's settings file is rejected.
fn config_invalid(sandbox: &Sandbox) -> Result<(), ToolOutput> {
    match (sandbox.invalid(), sandbox.invalid_text()) {
        (Some(invalid), Some(text)) => Err(failure_with(
            "approval_config_invalid",
            text,
            json!({"path": invalid.path.display().to_string()}),
        )),
        _ => Ok(()),
    }
}

/// The `sandbox_unavailable` result (§5.9).
pub(crate) fn unavailable(sandbox: &Sandbox, reason: &str) -> ToolOutput {
    let mut details = sandbox.details();
    details["enforcement"] = json!("unavailable");
    failure_with(
        "sandbox_unavailable",
        sandbox.unavailable_text(reason),
        json!({"sandbox": details}),
    )
}

fn output_text(output: &ToolOutput) -> String {
    output
        .content
        .iter()
        .filter_map(|block| match block {
            ContentBlock::Text { text, .. } => Some(text.clone()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn append_text(mut output: ToolOutput, addition: &str) -> ToolOutput {
    let text = format!("{}\n\n{addition}", output_text(&output));
    output.content = vec![ContentBlock::text(text)];
    output
}

/// The §6.4 check of a `write`/`edit` target in a confined mode: the canonical path it was
/// checked as. Mode `full` checks nothing (v1).
pub(crate) struct FileChangeCheck {
    sandbox: Arc<Sandbox>,
    checked: Option<PathBuf>,
}

impl FileChangeCheck {
    /// The first check, before the file is read or the change computed.
    pub(crate) fn before(sandbox: Arc<Sandbox>, path: &Path) -> Result<Self, ToolOutput> {
        config_invalid(&sandbox)?;
        let checked = if sandbox.is_confined_mode() {
            Some(check_file_change(&sandbox, path)?)
        } else {
            None
        };
        Ok(FileChangeCheck { sandbox, checked })
    }

    /// The repeated check right before the bytes are written: a target that now resolves
    /// elsewhere (a symlink swapped in meanwhile) or outside the roots is `sandbox_denied`.
    pub(crate) fn again(&self, path: &Path) -> Result<(), ToolOutput> {
        let Some(checked) = &self.checked else {
            return Ok(());
        };
        let now = check_file_change(&self.sandbox, path)?;
        if &now != checked {
            let denied = zi_sandbox::PathDenied::OutsideWritableRoots { path: now };
            return Err(denied_output(&self.sandbox, &denied));
        }
        Ok(())
    }
}

fn check_file_change(sandbox: &Sandbox, path: &Path) -> Result<PathBuf, ToolOutput> {
    sandbox
        .check_write(path)
        .map_err(|denied| denied_output(sandbox, &denied))
}

fn denied_output(sandbox: &Sandbox, denied: &zi_sandbox::PathDenied) -> ToolOutput {
    {
        failure_with(
            "sandbox_denied",
            sandbox.path_denied_text(denied),
            json!({
                "path": denied.path().display().to_string(),
                "sandbox": {"mode": sandbox.mode().as_str(), "network": sandbox.network()},
            }),
        )
    }
}

/// The sandbox's finding for a `write`/`edit` call, for the approval gate
/// ([`zi_agent::Tool::approval_escape`]): a target outside the writable roots or under a
/// protected path needs an escape.
pub(crate) fn file_escape(env: &ToolEnv, arguments: &Value) -> Option<Escape> {
    let sandbox = env.sandbox.get();
    if !sandbox.is_confined_mode() || sandbox.invalid().is_some() {
        return None;
    }
    let path = env.resolve(arguments.get("path").and_then(Value::as_str)?);
    match sandbox.check_write(&path) {
        Ok(_) => None,
        Err(PathDenied::OutsideWritableRoots { path }) => {
            Some(Escape::OutsideWritableRoots { path })
        }
        Err(PathDenied::ProtectedPath { path, .. }) => Some(Escape::ProtectedPath { path }),
    }
}

/// The `sandbox_denied` result of a file escape refused without asking (policy `never`).
pub(crate) fn file_escape_denied(env: &ToolEnv, escape: &Escape) -> ToolOutput {
    let sandbox = env.sandbox.get();
    let path = match escape {
        Escape::OutsideWritableRoots { path } | Escape::ProtectedPath { path } => path,
        _ => return zi_agent::approval::texts::approval_required(&escape.reason(), true),
    };
    match check_file_change(&sandbox, path) {
        Err(output) => output,
        Ok(_) => zi_agent::approval::texts::approval_required(&escape.reason(), true),
    }
}

/// The sandbox's finding for a `bash` call: a required sandbox that cannot be applied
/// (`onUnavailable: error`) needs an escape.
pub(crate) fn bash_escape(env: &ToolEnv) -> Option<Escape> {
    let sandbox = env.sandbox.get();
    if sandbox.invalid().is_some() || sandbox.on_unavailable() != OnUnavailable::Error {
        return None;
    }
    sandbox
        .enforcement()
        .unavailable_reason()
        .map(|reason| Escape::SandboxUnavailable {
            message: reason.to_string(),
        })
}

/// The `sandbox_unavailable` result of a `bash` escape refused without asking.
pub(crate) fn bash_escape_denied(env: &ToolEnv, escape: &Escape) -> ToolOutput {
    match escape {
        Escape::SandboxUnavailable { message } => unavailable(&env.sandbox.get(), message),
        _ => zi_agent::approval::texts::approval_required(&escape.reason(), true),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use zi_sandbox::{
        ForcedUnavailable, Mode, SandboxConfig, SandboxEnv, SandboxHandle, TestHooks,
    };

    fn env(cwd: &Path) -> ToolEnv {
        let sandbox = Sandbox::new(
            SandboxConfig {
                mode: Mode::WorkspaceWrite,
                ..SandboxConfig::default()
            },
            &SandboxEnv {
                cwd: cwd.to_path_buf(),
                agent_dir: cwd.join("agent-elsewhere/../../agent"),
                tmpdir: None,
            },
            &TestHooks {
                abi: None,
                unavailable: Some(ForcedUnavailable::NotSupported),
            },
        );
        ToolEnv::new(cwd.to_path_buf(), None).with_sandbox(SandboxHandle::new(sandbox))
    }

    #[test]
    fn escapes_are_reported_to_the_gate_with_their_refusals() {
        let dir = tempfile::tempdir().unwrap();
        let cwd = dir.path().canonicalize().unwrap();
        let env = env(&cwd);
        assert_eq!(file_escape(&env, &json!({"path": "inside.txt"})), None);
        let outside = file_escape(&env, &json!({"path": "/etc/x"}));
        assert_eq!(
            outside,
            Some(Escape::OutsideWritableRoots {
                path: PathBuf::from("/etc/x")
            })
        );
        let refused = file_escape_denied(&env, &outside.unwrap());
        assert_eq!(refused.details.unwrap()["code"], "sandbox_denied");
        assert_eq!(
            file_escape(&env, &json!({"path": ".git/config"})),
            Some(Escape::ProtectedPath {
                path: cwd.join(".git/config")
            })
        );
        let escape = bash_escape(&env).unwrap();
        assert_eq!(
            bash_escape_denied(&env, &escape).details.unwrap()["code"],
            "sandbox_unavailable"
        );
    }
}
