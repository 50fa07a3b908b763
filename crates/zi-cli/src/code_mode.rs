//! Code Mode for this invocation (docs/code-mode.md#settings): `--code-mode`, `--code-only`,
//! the `codeMode*` settings, and whether the worker can be confined here.

use std::sync::Arc;

use anyhow::{Result, bail};
use zi_code::{CodeModeConfig, CodeTool};
use zi_config::settings::SettingsStore;

use crate::runtime::warn;
use crate::startup::CodeModeFlag;

/// The `code` tool and how it is offered.
pub struct CodeMode {
    pub tool: Arc<CodeTool>,
    /// `--code-only`: the model is offered `code` alone.
    pub exclusive: bool,
}

impl CodeMode {
    /// The flag a subagent child gets, so it runs with the same Code Mode.
    pub fn child_flag(&self) -> &'static str {
        if self.exclusive {
            "--code-only"
        } else {
            "--code-mode"
        }
    }
}

/// `None` when Code Mode is off. A flag that asks for it where it cannot run (invalid settings,
/// no worker sandbox) stops start-up; the `codeMode` setting only warns.
pub fn configure(flag: CodeModeFlag, settings: &SettingsStore) -> Result<Option<CodeMode>> {
    let flagged = flag != CodeModeFlag::Unset;
    let read = zi_code::settings::read(|key| settings.layer_values(key));
    let settings = match read {
        Ok(settings) => settings,
        Err(problem) if flagged => bail!("Code Mode cannot start: {problem}"),
        Err(problem) => {
            warn(&problem.to_string());
            return Ok(None);
        }
    };
    if !(flagged || settings.enabled) {
        return Ok(None);
    }
    let hooks = crate::sandbox_config::test_hooks()?;
    let require_seccomp = match zi_sandbox::code_worker_support(&hooks) {
        Ok(0) => {
            warn("(code mode) Landlock is unavailable; the worker is confined by seccomp alone");
            true
        }
        Ok(_) => true,
        Err(reason) if settings.engine_only => {
            warn(&format!(
                "(code mode) the worker sandbox is unavailable ({reason}); cells run without it (codeModeSandbox: engine-only)"
            ));
            false
        }
        Err(reason) if flagged => {
            bail!("Code Mode cannot start: the worker sandbox is unavailable ({reason})")
        }
        Err(reason) => {
            warn(&format!(
                "(code mode) the worker sandbox is unavailable ({reason}); code is not offered"
            ));
            return Ok(None);
        }
    };
    let tool = CodeTool::new(CodeModeConfig {
        limits: settings.limits,
        require_seccomp,
        program: zi_code::host::WorkerProgram::current(),
    });
    Ok(Some(CodeMode {
        tool: Arc::new(tool),
        exclusive: flag == CodeModeFlag::Only,
    }))
}
