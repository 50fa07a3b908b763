//! How `bash` and `write`/`edit` meet the session's sandbox (docs/approvals.md#the-sandbox): the
//! spawn plan of one command and what its result gains, and the path check of a file change.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{Value, json};
use zi_agent::ToolOutput;
use zi_config::approval::{Escape, Subject};
use zi_protocol::message::ContentBlock;
use zi_sandbox::{
    Confinement, Enforcement, OnUnavailable, PathDenied, Sandbox, likely_sandbox_denied,
};

use crate::ToolEnv;
use crate::shell::Termination;

/// The output tail an escalation request previews (docs/approvals.md#escalation).
const OUTPUT_PREVIEW_BYTES: usize = 4_096;

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
    /// The approval gate let this call run outside the sandbox: an approved
    /// `sandbox_unavailable` escape, or a command granted for the session by `allow_session` on
    /// an escalation (docs/approvals.md#decisions-and-session-grants).
    Approved { sandbox: Arc<Sandbox> },
}

impl SpawnPlan {
    /// The plan for a command now, or the `sandbox_unavailable` result (never an unconfined
    /// run when a sandbox is required and cannot be applied).
    /// `escape_approved`: the approval gate let this call run outside the sandbox.
    pub(crate) fn for_command(
        sandbox: Arc<Sandbox>,
        escape_approved: bool,
    ) -> Result<SpawnPlan, ToolOutput> {
        config_invalid(&sandbox)?;
        if !sandbox.is_confined_mode() {
            return Ok(SpawnPlan::Plain);
        }
        if escape_approved {
            return Ok(SpawnPlan::Approved { sandbox });
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
                Err(error) => error.to_string(),
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
            SpawnPlan::Confined { sandbox, .. }
            | SpawnPlan::Unconfined { sandbox, .. }
            | SpawnPlan::Approved { sandbox } => sandbox.login_shell(),
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
    /// notice of an unconfined run, or the hint (docs/approvals.md#what-a-confined-command-gets)
    /// for a likely sandbox denial, and `details.sandbox`. A spawn the sandbox refused becomes
    /// `sandbox_unavailable`.
    pub(crate) fn finish(&self, termination: &Termination, output: ToolOutput) -> ToolOutput {
        match self {
            SpawnPlan::Plain => output,
            SpawnPlan::Approved { sandbox } => {
                let mut output = output;
                if let Some(details) = output.details.as_mut().and_then(Value::as_object_mut) {
                    details.insert(
                        "sandbox".into(),
                        json!({"mode": "none", "escalatedFrom": sandbox.mode().as_str()}),
                    );
                }
                output
            }
            SpawnPlan::Unconfined { sandbox, reason } => {
                append_text(output, &sandbox.unavailable_notice(reason))
            }
            SpawnPlan::Confined { sandbox, .. } => {
                if let Termination::SandboxFailed(reason) = termination {
                    return unavailable(sandbox, reason);
                }
                let mut output = if self.denial(termination, &output).is_some() {
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

impl SpawnPlan {
    /// A confined foreground command that looks sandbox-denied (docs/approvals.md#escalation): the
    /// escape an escalation request carries.
    pub(crate) fn denial(&self, termination: &Termination, output: &ToolOutput) -> Option<Escape> {
        if !matches!(self, SpawnPlan::Confined { .. }) {
            return None;
        }
        let (code, signal, timed_out) = match termination {
            Termination::Exited(code) => (Some(*code), None, false),
            Termination::Signaled(signal) => (None, Some(*signal), false),
            Termination::TimedOut => (None, None, true),
            _ => return None,
        };
        likely_sandbox_denied(code, signal, timed_out, &output_text(output)).then(|| {
            Escape::SandboxDenied {
                exit_code: code.map(i64::from),
                signal: signal.map(zi_os::process::signal_name),
            }
        })
    }

    /// What the escalation request shows (docs/approvals.md#escalation): `Run outside the sandbox:
    /// CMD` (the session words the summary) and the first attempt's output tail (4,096 bytes) as
    /// `preview`.
    pub(crate) fn escalation_subject(
        command: &str,
        termination: &Termination,
        output: &ToolOutput,
    ) -> Subject {
        let text = output_text(output);
        let (kept, truncated) = crate::truncate::tail(&text, usize::MAX, OUTPUT_PREVIEW_BYTES);
        let exit_code = match termination {
            Termination::Exited(code) => json!(code),
            _ => Value::Null,
        };
        Subject {
            preview: Some(json!({
                "type": "output",
                "text": kept,
                "truncated": truncated,
                "exitCode": exit_code,
            })),
            ..Subject::exec(command, false)
        }
    }

    /// The result of a command re-run outside the sandbox after an approved escalation: the
    /// re-run's result, announced, with `details.sandbox`
    /// `{"mode":"none","escalatedFrom","approvalId"}`.
    pub(crate) fn escalated(
        &self,
        first: &Termination,
        rerun: ToolOutput,
        approval_id: &str,
    ) -> ToolOutput {
        let SpawnPlan::Confined { sandbox, .. } = self else {
            return rerun;
        };
        let how = match first {
            Termination::Exited(code) => format!("exit {code}"),
            Termination::Signaled(signal) => zi_os::process::signal_name(*signal),
            _ => "failed".to_string(),
        };
        let notice = format!(
            "[The first attempt failed in the {} sandbox ({how}); re-ran without the sandbox after approval.]",
            sandbox.mode().as_str()
        );
        let text = format!("{notice}\n\n{}", output_text(&rerun));
        let mut rerun = rerun;
        rerun.content = vec![ContentBlock::text(text)];
        if let Some(details) = rerun.details.as_mut().and_then(Value::as_object_mut) {
            details.insert(
                "sandbox".into(),
                json!({
                    "mode": "none",
                    "escalatedFrom": sandbox.mode().as_str(),
                    "approvalId": approval_id,
                }),
            );
        }
        rerun
    }
}

/// `approval_config_invalid` (docs/approvals.md#configuration) while the sandbox's settings file is
/// rejected.
fn config_invalid(sandbox: &Sandbox) -> Result<(), ToolOutput> {
    match (sandbox.invalid(), sandbox.invalid_text()) {
        (Some(invalid), Some(text)) => Err(ToolOutput::failure_with(
            "approval_config_invalid",
            text,
            json!({"path": invalid.path.display().to_string()}),
        )),
        _ => Ok(()),
    }
}

/// The `sandbox_unavailable` result (docs/approvals.md#what-the-model-sees).
pub(crate) fn unavailable(sandbox: &Sandbox, reason: &str) -> ToolOutput {
    let mut details = sandbox.details();
    details["enforcement"] = json!("unavailable");
    ToolOutput::failure_with(
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

/// The check (docs/approvals.md#write-and-edit) of a `write`/`edit` target in a confined mode: the
/// canonical path it was checked as. Mode `full` checks nothing (v1).
pub(crate) struct FileChangeCheck {
    sandbox: Arc<Sandbox>,
    checked: Option<PathBuf>,
    /// The approval gate let this call write outside the roots: only symlink swaps are checked.
    approved: bool,
}

impl FileChangeCheck {
    /// The first check, before the file is read or the change computed.
    pub(crate) fn before(
        sandbox: Arc<Sandbox>,
        path: &Path,
        escape_approved: bool,
    ) -> Result<Self, ToolOutput> {
        config_invalid(&sandbox)?;
        let checked = match (sandbox.is_confined_mode(), escape_approved) {
            (false, _) => None,
            (true, true) => Some(zi_sandbox::canonical_target(path)),
            (true, false) => Some(check_file_change(&sandbox, path)?),
        };
        Ok(FileChangeCheck {
            sandbox,
            checked,
            approved: escape_approved,
        })
    }

    /// The repeated check right before the bytes are written: a target that now resolves
    /// elsewhere (a symlink swapped in meanwhile) or outside the roots is `sandbox_denied`.
    pub(crate) fn again(&self, path: &Path) -> Result<(), ToolOutput> {
        let Some(checked) = &self.checked else {
            return Ok(());
        };
        let now = if self.approved {
            zi_sandbox::canonical_target(path)
        } else {
            check_file_change(&self.sandbox, path)?
        };
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
        ToolOutput::failure_with(
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
/// ([`zi_agent::TypedTool::approval_escape`]): its target path outside the writable roots or under a
/// protected path needs an escape.
pub(crate) fn file_escape(env: &ToolEnv, shown: &str) -> Option<Escape> {
    let sandbox = env.sandbox.get();
    if !sandbox.is_confined_mode() || sandbox.invalid().is_some() {
        return None;
    }
    let path = env.resolve(shown);
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
        _ => return zi_agent::approval_texts::approval_required(&escape.reason(), true),
    };
    match check_file_change(&sandbox, path) {
        Err(output) => output,
        Ok(_) => zi_agent::approval_texts::approval_required(&escape.reason(), true),
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
        _ => zi_agent::approval_texts::approval_required(&escape.reason(), true),
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
        assert_eq!(file_escape(&env, "inside.txt"), None);
        let outside = file_escape(&env, "/etc/x");
        assert_eq!(
            outside,
            Some(Escape::OutsideWritableRoots {
                path: PathBuf::from("/etc/x")
            })
        );
        let refused = file_escape_denied(&env, &outside.unwrap());
        assert_eq!(refused.details.unwrap()["code"], "sandbox_denied");
        assert_eq!(
            file_escape(&env, ".git/config"),
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
