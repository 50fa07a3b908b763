//! The effective sandbox of a session: mode, roots, protected paths, the probe's result, and
//! the texts results carry.

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use serde_json::{Value, json};

use crate::config::{Mode, OnUnavailable, SandboxConfig};
use crate::confine::Confinement;
use crate::paths::{PathDenied, canonical_target};
use crate::probe::{Enforcement, TestHooks, probe};

/// Where a session runs: what the roots and protected paths are made of.
#[derive(Debug, Clone)]
pub struct SandboxEnv {
    /// The session cwd (absolute).
    pub cwd: PathBuf,
    /// The agent directory (settings, `trust.json`, `auth.json`): always protected.
    pub agent_dir: PathBuf,
    /// `$TMPDIR` of the zi process.
    pub tmpdir: Option<PathBuf>,
}

/// A confined spawn that cannot be set up.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    /// The sandbox is unavailable: the reason its probe found.
    #[error("{0}")]
    Unavailable(String),
    /// Mode `full` confines nothing.
    #[error("mode full has no confinement")]
    Full,
    /// The rules of this spawn could not be built (Landlock, the seccomp filter, the
    /// supervisor).
    #[error("{0}")]
    Confine(#[source] Box<dyn std::error::Error + Send + Sync>),
}

/// One session's sandbox; `Sandbox::full()` is zi v1.
#[derive(Debug, Clone)]
pub struct Sandbox {
    config: SandboxConfig,
    roots: Vec<PathBuf>,
    protected: Vec<PathBuf>,
    enforcement: Enforcement,
    invalid: Option<InvalidSettings>,
    /// Where it was built, to derive a stricter sandbox later ([`Sandbox::with_mode`]).
    origin: Option<(SandboxEnv, TestHooks)>,
}

/// A settings file with a `sandbox` key that was rejected: zi fails closed
/// (docs/approvals.md#configuration).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidSettings {
    /// The settings file.
    pub path: PathBuf,
    /// What is wrong with its `sandbox` key.
    pub problem: String,
}

impl Default for Sandbox {
    fn default() -> Self {
        Sandbox::full()
    }
}

impl Sandbox {
    /// Mode `full`: no confinement and no path checks.
    pub fn full() -> Sandbox {
        Sandbox {
            config: SandboxConfig::default(),
            roots: Vec::new(),
            protected: Vec::new(),
            enforcement: Enforcement::None,
            invalid: None,
            origin: None,
        }
    }

    /// Fail closed: the configured sandbox is unknown because its settings file was rejected;
    /// `bash`, `write` and `edit` refuse to run until it is fixed or a higher layer (environment,
    /// flag) sets the mode.
    pub fn invalid_settings(invalid: InvalidSettings) -> Sandbox {
        Sandbox {
            config: SandboxConfig {
                mode: Mode::ReadOnly,
                ..SandboxConfig::default()
            },
            invalid: Some(invalid),
            ..Sandbox::full()
        }
    }

    /// The rejected settings file, when the sandbox fails closed.
    pub fn invalid(&self) -> Option<&InvalidSettings> {
        self.invalid.as_ref()
    }

    /// The `approval_config_invalid` text (docs/approvals.md#configuration) when the sandbox fails
    /// closed.
    pub fn invalid_text(&self) -> Option<String> {
        self.invalid.as_ref().map(|invalid| {
            format!(
                "Approval settings are invalid ({}: {}). The tool call was not run.",
                invalid.path.display(),
                invalid.problem
            )
        })
    }

    /// Resolves the roots and protected paths and, for a confined mode, probes the kernel.
    pub fn new(config: SandboxConfig, env: &SandboxEnv, hooks: &TestHooks) -> Sandbox {
        if config.mode == Mode::Full {
            return Sandbox {
                config,
                origin: Some((env.clone(), *hooks)),
                ..Sandbox::full()
            };
        }
        let mut roots: Vec<PathBuf> = Vec::new();
        if config.mode == Mode::WorkspaceWrite {
            let candidates = [Some(env.cwd.clone()), Some(PathBuf::from("/tmp"))]
                .into_iter()
                .chain([env.tmpdir.clone()])
                .flatten()
                .chain(config.writable_roots.iter().cloned());
            for candidate in candidates {
                // A root that does not exist cannot be written under Landlock either.
                if let Ok(root) = candidate.canonicalize()
                    && !roots.contains(&root)
                {
                    roots.push(root);
                }
            }
        }
        let agent_dir = canonical_target(&env.agent_dir);
        let protected = vec![
            canonical_target(&env.cwd.join(".git")),
            canonical_target(&env.cwd.join(".zi")),
            agent_dir.clone(),
        ];
        let enforcement = match probe(hooks) {
            Err((reason, abi)) => Enforcement::Unavailable { reason, abi },
            Ok(abi) => match roots.iter().find(|root| agent_dir.starts_with(root)) {
                Some(root) => Enforcement::Unavailable {
                    reason: format!(
                        "the agent directory {} is inside the writable root {}",
                        agent_dir.display(),
                        root.display()
                    ),
                    abi,
                },
                None if config.network => Enforcement::Landlock { abi },
                None => Enforcement::LandlockSeccomp { abi },
            },
        };
        Sandbox {
            config,
            roots,
            protected,
            enforcement,
            invalid: None,
            origin: Some((env.clone(), *hooks)),
        }
    }

    /// The same sandbox with another mode and network and added writable roots (for a
    /// connection that makes it stricter, docs/approvals.md#layers-and-precedence), probed again;
    /// `None` for a sandbox not built by [`Sandbox::new`].
    pub fn with_mode(&self, mode: Mode, network: bool, extra_roots: &[PathBuf]) -> Option<Sandbox> {
        let (env, hooks) = self.origin.as_ref()?;
        let mut config = SandboxConfig {
            mode,
            network,
            ..self.config.clone()
        };
        config.writable_roots.extend(extra_roots.iter().cloned());
        Some(Sandbox::new(config, env, hooks))
    }

    /// The `sandbox` object of the approvals state (docs/approvals.md#the-approvals-state): `mode`,
    /// `network`, `writableRoots`, `enforcement`, `landlockAbi`, and `unavailableReason` when
    /// unavailable.
    pub fn state(&self) -> Value {
        let mut state = json!({
            "mode": self.config.mode.as_str(),
            "network": self.network(),
            "writableRoots": self.roots.iter().map(|r| r.display().to_string()).collect::<Vec<_>>(),
            "enforcement": self.enforcement.as_str(),
            "landlockAbi": self.enforcement.abi(),
        });
        if let Some(reason) = self.enforcement.unavailable_reason() {
            state["unavailableReason"] = json!(reason);
        }
        state
    }

    /// The configured mode.
    pub fn mode(&self) -> Mode {
        self.config.mode
    }

    /// Whether a confined mode is configured (whatever its enforcement).
    pub fn is_confined_mode(&self) -> bool {
        self.config.mode != Mode::Full
    }

    /// Whether commands reach the network: always in `full`, else as configured.
    pub fn network(&self) -> bool {
        self.config.mode == Mode::Full || self.config.network
    }

    /// The configured `network` value, which a stricter mode derived from this one inherits
    /// (mode `full` reaches the network whatever it says).
    pub fn network_setting(&self) -> bool {
        self.config.network
    }

    /// What a command does when confinement is unavailable.
    pub fn on_unavailable(&self) -> OnUnavailable {
        self.config.on_unavailable
    }

    /// Whether commands run through the login shell (`-lc`): always in `full`, else only with
    /// `sandbox.loginShell: true` (docs/approvals.md#what-a-confined-command-gets).
    pub fn login_shell(&self) -> bool {
        self.config.mode == Mode::Full || self.config.login_shell
    }

    /// What confines commands, as the start-up probe found it.
    pub fn enforcement(&self) -> &Enforcement {
        &self.enforcement
    }

    /// The effective writable roots (canonical; `/dev/null` is always writable besides).
    pub fn writable_roots(&self) -> &[PathBuf] {
        &self.roots
    }

    /// The start-up warning (docs/approvals.md#start-up-probe-and-unavailability), without the
    /// `Warning: ` prefix.
    pub fn startup_warning(&self) -> Option<String> {
        self.enforcement.unavailable_reason().map(|reason| {
            format!(
                "(sandbox) {} is unavailable: {reason}",
                self.config.mode.as_str()
            )
        })
    }

    /// `details.sandbox` of a sandboxed result: `{"mode","network","enforcement"}`.
    pub fn details(&self) -> Value {
        json!({
            "mode": self.config.mode.as_str(),
            "network": self.network(),
            "enforcement": self.enforcement.as_str(),
        })
    }

    /// Builds the confinement of one spawn (only for an available confined mode).
    pub fn confine(&self) -> Result<Confinement, SandboxError> {
        let abi = match &self.enforcement {
            Enforcement::Landlock { abi } | Enforcement::LandlockSeccomp { abi } => *abi,
            Enforcement::Unavailable { reason, .. } => {
                return Err(SandboxError::Unavailable(reason.clone()));
            }
            Enforcement::None => return Err(SandboxError::Full),
        };
        Confinement::build(abi, &self.roots, self.config.network)
            .map_err(|error| SandboxError::Confine(Box::new(error)))
    }

    /// The check (docs/approvals.md#write-and-edit) of a `write`/`edit` target (absolute):
    /// `Ok(canonical)` when it may be written, else why it needs an escape. Mode `full` checks
    /// nothing.
    pub fn check_write(&self, path: &Path) -> Result<PathBuf, PathDenied> {
        let canonical = canonical_target(path);
        if self.config.mode == Mode::Full {
            return Ok(canonical);
        }
        if let Some(protected) = self.protected.iter().find(|p| canonical.starts_with(p)) {
            return Err(PathDenied::ProtectedPath {
                path: canonical,
                protected: protected.clone(),
            });
        }
        if canonical == Path::new("/dev/null")
            || self.roots.iter().any(|root| canonical.starts_with(root))
        {
            return Ok(canonical);
        }
        Err(PathDenied::OutsideWritableRoots { path: canonical })
    }

    /// The roots as results name them: comma-separated, `/dev/null` for `read-only`.
    pub fn roots_text(&self) -> String {
        if self.roots.is_empty() {
            return "/dev/null".to_string();
        }
        self.roots
            .iter()
            .map(|root| root.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The `sandbox_unavailable` result text (docs/approvals.md#what-the-model-sees).
    pub fn unavailable_text(&self, reason: &str) -> String {
        format!(
            "The {} sandbox is unavailable ({reason}). The command was not run.",
            self.config.mode.as_str()
        )
    }

    /// Appended when `onUnavailable` is `warn` and the command ran unsandboxed
    /// (docs/approvals.md#start-up-probe-and-unavailability).
    pub fn unavailable_notice(&self, reason: &str) -> String {
        format!(
            "[Warning: the {} sandbox is unavailable ({reason}); the command ran without it.]",
            self.config.mode.as_str()
        )
    }

    /// Appended to a likely sandbox-denied result that is not escalated
    /// (docs/approvals.md#what-a-confined-command-gets): what the command could write and whose
    /// metadata (mode, owner, times, extended attributes) it could change.
    pub fn denied_hint(&self) -> String {
        let metadata = if self.roots.is_empty() {
            "no metadata changes"
        } else {
            "metadata changes to files below them"
        };
        format!(
            "[The command ran in the {} sandbox (writes limited to {}, {metadata}, network {}); it may have failed because of the sandbox.]",
            self.config.mode.as_str(),
            self.roots_text(),
            if self.network() { "on" } else { "off" }
        )
    }

    /// The `sandbox_denied` text of a `write`/`edit` target
    /// (docs/approvals.md#what-the-model-sees).
    pub fn path_denied_text(&self, denied: &PathDenied) -> String {
        match denied {
            PathDenied::OutsideWritableRoots { path } => format!(
                "{} is outside the writable roots of the {} sandbox ({}). The file was not changed.",
                path.display(),
                self.config.mode.as_str(),
                self.roots_text()
            ),
            PathDenied::ProtectedPath { path, protected } => format!(
                "{} is under the protected path {} of the {} sandbox. The file was not changed.",
                path.display(),
                protected.display(),
                self.config.mode.as_str()
            ),
        }
    }
}

/// The sandbox shared by the tools of one session; a stricter one may replace it later (the
/// connection layer, docs/approvals.md#layers-and-precedence). Cheap to clone.
#[derive(Debug, Clone, Default)]
pub struct SandboxHandle {
    current: Arc<RwLock<Arc<Sandbox>>>,
}

impl SandboxHandle {
    /// A handle that starts with `sandbox`.
    pub fn new(sandbox: Sandbox) -> SandboxHandle {
        SandboxHandle {
            current: Arc::new(RwLock::new(Arc::new(sandbox))),
        }
    }

    /// The sandbox calls evaluated now run under.
    pub fn get(&self) -> Arc<Sandbox> {
        self.current
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Replaces the sandbox for calls evaluated from now on.
    pub fn replace(&self, sandbox: Sandbox) {
        *self.current.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(sandbox);
    }
}
