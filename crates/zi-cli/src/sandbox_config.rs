//! The sandbox configuration of this invocation (docs/approvals.md#configuration): settings
//! (global < trusted project, key by key) < `ZI_SANDBOX` < `--sandbox` / `--sandbox-network` /
//! `--sandbox-writable-root`, then the start-up probe.
//!
//! Test-only hooks (docs/approvals.md#test-only-hooks): `ZI_TEST_SANDBOX_ABI=N`
//! acts as if the kernel's Landlock ABI were `min(real, N)` and `ZI_TEST_SANDBOX_UNAVAILABLE=WHY`
//! (`not-linux`, `not-supported`, `disabled`, `no-seccomp-arch`) reports that reason. Both can
//! only make the sandbox unavailable; neither can weaken enforcement.

use std::path::{Path, PathBuf};

use anyhow::{Result, bail};
use zi_config::settings::SettingsStore;
use zi_sandbox::{
    ForcedUnavailable, InvalidSettings, Mode, OnUnavailable, Sandbox, SandboxConfig, SandboxEnv,
    TestHooks,
};

use crate::startup::SandboxOptions;

/// The session's sandbox. Mode `full` (the default) probes nothing and is zi v1.
pub fn build(
    flags: &SandboxOptions,
    settings: &SettingsStore,
    cwd: &Path,
    agent_dir: &Path,
) -> Result<Sandbox> {
    let layered = settings.sandbox();
    let explicit_mode = flags.mode.map(|(mode, _)| mode);
    if let Some(invalid) = settings.sandbox_problem()
        && explicit_mode.is_none()
    {
        return Ok(Sandbox::invalid_settings(InvalidSettings {
            path: invalid.path.clone(),
            problem: invalid.problem.clone(),
        }));
    }
    let mode = explicit_mode
        .or_else(|| layered.mode.as_deref().and_then(Mode::parse))
        .unwrap_or_default();
    let home = std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from);
    let mut writable_roots: Vec<PathBuf> = layered
        .writable_roots
        .iter()
        .flatten()
        .filter_map(|root| match root.strip_prefix("~/") {
            Some(rest) => home.as_ref().map(|home| home.join(rest)),
            None => Some(PathBuf::from(root)),
        })
        .collect();
    writable_roots.extend(flags.writable_roots.iter().cloned());
    let config = SandboxConfig {
        mode,
        network: flags.network || layered.network.unwrap_or(false),
        writable_roots,
        on_unavailable: layered
            .on_unavailable
            .as_deref()
            .and_then(OnUnavailable::parse)
            .unwrap_or_default(),
        login_shell: layered.login_shell.unwrap_or(false),
    };
    let env = SandboxEnv {
        cwd: cwd.to_path_buf(),
        agent_dir: agent_dir.to_path_buf(),
        tmpdir: std::env::var_os("TMPDIR")
            .filter(|t| !t.is_empty())
            .map(PathBuf::from),
    };
    Ok(Sandbox::new(config, &env, &test_hooks()?))
}

pub fn test_hooks() -> Result<TestHooks> {
    let abi = match std::env::var("ZI_TEST_SANDBOX_ABI") {
        Ok(text) => match text.parse::<u32>() {
            Ok(abi) => Some(abi),
            Err(_) => bail!("ZI_TEST_SANDBOX_ABI must be a non-negative integer"),
        },
        Err(_) => None,
    };
    let unavailable = match std::env::var("ZI_TEST_SANDBOX_UNAVAILABLE") {
        Ok(text) => match ForcedUnavailable::parse(&text) {
            Some(reason) => Some(reason),
            None => bail!(
                "ZI_TEST_SANDBOX_UNAVAILABLE must be not-linux, not-supported, disabled, or no-seccomp-arch"
            ),
        },
        Err(_) => None,
    };
    Ok(TestHooks { abi, unavailable })
}
