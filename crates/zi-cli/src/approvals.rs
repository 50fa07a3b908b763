//! The operator's approval configuration (approvals-reference §3.3): settings layers, then
//! `ZI_APPROVALS`, then `--approvals`, `--approval-timeout-ms`, `--allow`, `--ask`, `--deny`.

use std::path::Path;

use anyhow::{Result, anyhow};
use zi_agent::approval::config::MAX_TIMEOUT_MS;
use zi_agent::approval::policy::POLICY_VALUES;
use zi_agent::approval::{ApprovalLayer, OperatorApprovals, PathBase, Policy, Rule, RuleKind};
use zi_agent::session::approvals::{ApprovalSetup, no_sandbox};
use zi_agent::settings::SettingsStore;

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

/// Builds the setup the session is configured with.
pub fn setup(args: &Args, settings: &SettingsStore, cwd: &Path) -> Result<ApprovalSetup> {
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
        sandbox: no_sandbox(),
        sandbox_source: "default".into(),
        probe: None,
    })
}
