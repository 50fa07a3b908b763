//! The operator's approval configuration (docs/approvals.md#layers-and-precedence): settings
//! layers, then `ZI_APPROVALS`, then `--approvals`, `--approval-timeout-ms`, `--allow`, `--ask`,
//! `--deny`.

use std::path::Path;

use anyhow::{Result, anyhow};
use zi_agent::session::approvals::{ApprovalSetup, SandboxSwitch};
use zi_config::approval::config::MAX_TIMEOUT_MS;
use zi_config::approval::policy::POLICY_VALUES;
use zi_config::approval::{ApprovalLayer, OperatorApprovals, PathBase, Policy, Rule, RuleKind};
use zi_config::settings::SettingsStore;
use zi_protocol::approval::SandboxState;
use zi_sandbox::{Mode, Sandbox, SandboxHandle};

use crate::args::Args;

fn policy(text: &str, name: &str) -> Result<Policy> {
    Policy::parse(text).ok_or_else(|| anyhow!("{name} must be {POLICY_VALUES}"))
}

/// The CLI layer: a bad flag is a start-up error (exit 1).
fn cli_layer(args: &Args) -> Result<ApprovalLayer> {
    let mut layer = ApprovalLayer {
        policy: args
            .approvals
            .as_deref()
            .map(|text| policy(text, "--approvals"))
            .transpose()?,
        ..ApprovalLayer::default()
    };
    if let Some(text) = &args.approval_timeout_ms {
        layer.timeout_ms = Some(
            text.parse::<u64>()
                .ok()
                .filter(|ms| *ms <= MAX_TIMEOUT_MS)
                .ok_or_else(|| {
                    anyhow!(
                        "--approval-timeout-ms must be an integer from 0 through {MAX_TIMEOUT_MS}"
                    )
                })?,
        );
    }
    for (kind, rules) in [
        (RuleKind::Allow, &args.allow_rules),
        (RuleKind::Ask, &args.ask_rules),
        (RuleKind::Deny, &args.deny_rules),
    ] {
        for text in rules {
            layer
                .rules
                .push((kind, Rule::parse(text).map_err(|e| anyhow!(e.to_string()))?));
        }
    }
    Ok(layer)
}

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
fn sandbox_source(args: &Args, settings: &SettingsStore) -> String {
    if args.sandbox.is_some() {
        let from_env = std::env::var("ZI_SANDBOX").is_ok() && !crate::args::flag_given("--sandbox");
        return if from_env { "ZI_SANDBOX" } else { "--sandbox" }.into();
    }
    if settings.sandbox().mode.is_some() {
        return "settings".into();
    }
    "default".into()
}

/// Builds the setup the session is configured with; `sandbox` is the session's sandbox (its
/// state is reported in `state.approvals`, a connection may replace it with a stricter one).
pub fn setup(
    args: &Args,
    settings: &SettingsStore,
    cwd: &Path,
    sandbox: &SandboxHandle,
) -> Result<ApprovalSetup> {
    let cli = cli_layer(args)?;
    let environment = match std::env::var("ZI_APPROVALS") {
        Ok(text) => Some(policy(&text, "ZI_APPROVALS")?),
        Err(_) => None,
    };
    let home = std::env::var_os("HOME").map(std::path::PathBuf::from);
    let base = PathBase {
        cwd: cwd.to_path_buf(),
        home: home.clone(),
    };
    let [global, project] = settings.approval_layers();
    Ok(ApprovalSetup {
        operator: OperatorApprovals::from_layers(global, project, environment, cli, &base),
        home,
        sandbox: sandbox_state(&sandbox.get()),
        sandbox_source: sandbox_source(args, settings),
        switch: Some(sandbox_switch(sandbox)),
    })
}
