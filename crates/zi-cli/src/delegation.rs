//! Delegation (docs/delegation.md): the one place that hands zi's executable, environment,
//! credentials and settings to the delegation crate. A child (`ZI_SUBAGENT_DEPTH=1`) and a
//! session with an empty profile catalog get no supervisor and no tools.

use std::ffi::OsString;
use std::path::Path;
use std::sync::Arc;

use zi_agent::session::approvals::ApprovalSetup;
use zi_ai::catalog::Catalog;
use zi_ai::credentials::Credentials;
use zi_config::settings::SettingsStore;
use zi_config::subagent_profiles::SubagentProfileRegistry;
use zi_delegation::{DEPTH_VARIABLE, Delegation, SupervisorConfig};
use zi_sandbox::{Mode, Sandbox};

use crate::startup::ApiKey;

/// Whether this process is a subagent child.
pub fn is_child() -> bool {
    std::env::var_os(DEPTH_VARIABLE).is_some_and(|depth| depth == "1")
}

/// Takes a parent's key handoff out of the environment before any thread, extension or shell
/// tool exists, so it is used like `--api-key` and inherited by nothing
/// (docs/delegation.md#children).
pub fn take_child_api_key() -> Option<String> {
    if !is_child() {
        return None;
    }
    let key = std::env::var(zi_delegation::API_KEY_VARIABLE).ok();
    // SAFETY: called from `main` before the async runtime or any other thread starts.
    unsafe { zi_os::env::scrub(zi_delegation::API_KEY_VARIABLE) };
    key.filter(|key| !key.is_empty())
}

pub struct Inputs<'a> {
    pub profiles: Arc<SubagentProfileRegistry>,
    pub cwd: &'a Path,
    pub agent_dir: &'a Path,
    pub settings: &'a SettingsStore,
    pub catalog: &'a Arc<Catalog>,
    pub credentials: &'a Credentials,
    pub api_key: Option<ApiKey>,
    /// Flags every child gets after the reference's (see [`child_approval_flags`]).
    pub child_args: Vec<String>,
}

/// The supervisor and its tools, unless this process is a child. The tools appear only while
/// the profile catalog is not empty.
pub fn configure(inputs: Inputs<'_>) -> Option<Delegation> {
    if is_child() {
        return None;
    }
    let program = match std::env::current_exe() {
        Ok(program) => program,
        Err(error) => {
            crate::runtime::warn(&format!(
                "subagents are unavailable: cannot locate the zi executable: {error}"
            ));
            return None;
        }
    };
    let catalog = Arc::clone(inputs.catalog);
    let credentials = inputs.credentials.clone();
    let resolve_model = Arc::new(move |reference: &str| {
        let model = catalog.resolve(reference).ok()?;
        credentials.is_configured(model).then(|| model.reference())
    });
    let timers = inputs.settings.effective().subagents;
    let environment: Vec<(OsString, OsString)> = std::env::vars_os().collect();
    Some(Delegation::new(SupervisorConfig {
        catalog: inputs.profiles,
        program,
        cwd: inputs.cwd.to_path_buf(),
        agent_dir: inputs.agent_dir.to_path_buf(),
        environment,
        api_key: inputs.api_key.map(|key| key.expose().to_string()),
        wait_timeout_ms: timers.wait_timeout_ms,
        work_timeout_ms: timers.work_timeout_ms,
        resolve_model,
        extra_args: inputs.child_args,
    }))
}

/// The parent's effective approval policy, rules and sandbox as child flags
/// (docs/approvals.md#one-shot-modes-and-subagents): a child runs with no opted-in client, so
/// whatever needs approval resolves `approval_required` there, and it is bounded at least as
/// strictly as its parent whatever the child itself reads.
///
/// The child shares the parent's environment (`ZI_APPROVALS`, `ZI_SANDBOX`), agent directory
/// and cwd, so it reads the same settings files; the flags add what only the parent knows: its
/// own flags, and the project layers its trust admitted. Nothing is passed for a layer that
/// broke the configuration (an invalid settings file): a flag would mend it, and the child,
/// reading the same file, fails closed like its parent. With nothing configured anywhere a
/// child gets no flag (its argv is the reference's).
pub fn child_approval_flags(approvals: &ApprovalSetup, sandbox: &Sandbox) -> Vec<String> {
    let operator = &approvals.operator;
    let mut flags = Vec::new();
    if operator.policy_source.is_some() && operator.broken.is_none() {
        flags.extend([
            "--approvals".to_string(),
            operator.policy.as_str().to_string(),
        ]);
    }
    for (flag, rules) in [
        ("--allow", &operator.rules.allow),
        ("--ask", &operator.rules.ask),
        ("--deny", &operator.rules.deny),
    ] {
        for rule in rules {
            flags.extend([flag.to_string(), rule.rule.text.clone()]);
        }
    }
    if sandbox.invalid().is_none() && approvals.sandbox_source != "default" {
        flags.extend(["--sandbox".to_string(), sandbox.mode().as_str().to_string()]);
        if sandbox.mode() != Mode::Full && sandbox.network_setting() {
            flags.push("--sandbox-network".to_string());
        }
        for root in sandbox.writable_roots() {
            flags.push("--sandbox-writable-root".to_string());
            flags.push(root.to_string_lossy().into_owned());
        }
    }
    flags
}
