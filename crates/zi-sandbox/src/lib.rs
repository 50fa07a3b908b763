//! The Linux sandbox of `bash` (docs/approvals.md#the-sandbox): modes, the start-up probe,
//! per-spawn Landlock rulesets and the seccomp filter applied in the child before exec, the
//! `write`/`edit` path checks, and the likely-sandbox-denied heuristic; and the strictest profile,
//! which the Code Mode worker applies to itself (`worker.rs`).
//!
//! Everything a session needs is one [`Sandbox`] value: the mode `full` is zi v1 exactly (no
//! confinement, no path checks); the confined modes carry their writable roots, protected paths
//! and the probe's [`Enforcement`]. [`SandboxHandle`] shares the current value between the tools
//! of a session so a stricter one can replace it later.

mod config;
mod error;
#[cfg(target_os = "linux")]
mod filter;
mod heuristic;
mod install;
mod paths;
mod probe;
mod sandbox;

#[cfg(target_os = "linux")]
mod confine;
#[cfg(not(target_os = "linux"))]
#[path = "confine_other.rs"]
mod confine;
#[cfg(target_os = "linux")]
mod supervise;
#[cfg(target_os = "linux")]
mod worker;
#[cfg(not(target_os = "linux"))]
#[path = "worker_other.rs"]
mod worker;

pub use config::{Mode, OnUnavailable, SandboxConfig};
pub use confine::Confinement;
pub use error::WorkerConfineError;
pub use heuristic::likely_sandbox_denied;
pub use paths::{PathDenied, canonical_target};
pub use probe::WorkerEnforcement;
pub use probe::{Enforcement, ForcedUnavailable, MIN_LANDLOCK_ABI, TestHooks, kernel_landlock_abi};
pub use sandbox::{InvalidSettings, Sandbox, SandboxEnv, SandboxError, SandboxHandle};
pub use worker::{code_worker_support, confine_code_worker, harden_code_worker};
