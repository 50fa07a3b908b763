//! The operator's approval configuration (docs/approvals.md#layers-and-precedence): settings
//! layers, then `ZI_APPROVALS`, then `--approvals`, `--approval-timeout-ms`, `--allow`, `--ask`,
//! `--deny`.

use std::path::Path;

use zi_agent::session::approvals::{ApprovalSetup, SandboxSwitch};
use zi_config::approval::{OperatorApprovals, PathBase};
use zi_config::settings::SettingsStore;
use zi_protocol::approval::SandboxState;
use zi_sandbox::{Mode, Sandbox, SandboxHandle};

use crate::startup::{Origin, SessionOptions};

/// `sandbox` in the approvals state (docs/approvals.md#the-approvals-state): the sandbox's own
/// report, typed.
fn sandbox_state(sandbox: &Sandbox) -> SandboxState {
    serde_json::from_value(sandbox.state()).unwrap_or_else(|error| {
        // Sandbox::state always has the shape of docs/approvals.md#the-approvals-state; a mismatch
        // is a bug, reported, not hidden.
        tracing::error!("sandbox state does not decode: {error}");
        SandboxState {
            mode: sandbox.mode().as_str().into(),
            network: sandbox.network(),
            writable_roots: Vec::new(),
            enforcement: "unavailable".into(),
            landlock_abi: 0,
            unavailable_reason: Some(error.to_string()),
        }
    })
}

/// A connection's stricter sandbox (docs/approvals.md#layers-and-precedence): derived from the
/// operator's, probed again and installed for the tools' later calls.
fn sandbox_switch(handle: &SandboxHandle) -> SandboxSwitch {
    let handle = handle.clone();
    let operator = handle.get();
    std::sync::Arc::new(move |mode, network: Option<bool>, roots: &[String]| {
        let roots: Vec<std::path::PathBuf> = roots.iter().map(Into::into).collect();
        let mode = Mode::parse(mode.as_str()).unwrap_or_default();
        let network = network.unwrap_or(operator.network_setting());
        if let Some(stricter) = operator.with_mode(mode, network, &roots) {
            handle.replace(stricter);
        }
        sandbox_state(&handle.get())
    })
}

/// Who set the operator's sandbox mode, as `Sandbox cannot be looser than MODE set by SOURCE`
/// names it.
fn sandbox_source(options: &SessionOptions, settings: &SettingsStore) -> String {
    match options.sandbox.mode {
        Some((_, Origin::Environment)) => return "ZI_SANDBOX".into(),
        Some((_, Origin::Flag)) => return "--sandbox".into(),
        None => {}
    }
    if settings.sandbox().mode.is_some() {
        return "settings".into();
    }
    "default".into()
}

/// Builds the setup the session is configured with; `sandbox` is the session's sandbox (its
/// state is reported in `state.approvals`, a connection may replace it with a stricter one).
/// The command line's layer and `ZI_APPROVALS` were checked by crate::startup::resolve.
pub fn setup(
    options: &SessionOptions,
    settings: &SettingsStore,
    cwd: &Path,
    sandbox: &SandboxHandle,
) -> ApprovalSetup {
    let cli = options.approvals.flags.clone();
    let environment = options.approvals.environment;
    let home = std::env::var_os("HOME").map(std::path::PathBuf::from);
    let base = PathBase {
        cwd: cwd.to_path_buf(),
        home: home.clone(),
    };
    let [global, project] = settings.approval_layers();
    ApprovalSetup {
        operator: OperatorApprovals::from_layers(global, project, environment, cli, &base),
        home,
        sandbox: sandbox_state(&sandbox.get()),
        sandbox_source: sandbox_source(options, settings),
        switch: Some(sandbox_switch(sandbox)),
    }
}
