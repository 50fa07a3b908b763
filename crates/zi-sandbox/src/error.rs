//! Why a confinement, the metadata supervisor or the code worker's confinement could not be
//! set up. The Display becomes the sandbox's unavailable reason (docs/approvals.md), so the
//! wording is what users read after `Sandbox unavailable:`.

use std::sync::Arc;

/// A system call or thread start of the metadata supervisor that failed. Cloned: the first
/// start's result is kept for the whole process.
#[derive(Debug, Clone, thiserror::Error)]
pub(crate) enum SuperviseError {
    /// `/proc/thread-self` could not be read.
    #[error("the metadata supervisor cannot read /proc/thread-self: {0}")]
    Identity(Arc<std::io::Error>),
    /// `call` (`epoll_create1`, `epoll_ctl`, `socketpair`) failed.
    #[error("{call}: {source}")]
    Os {
        call: &'static str,
        source: Arc<std::io::Error>,
    },
    /// The supervisor's thread did not start.
    #[error("the metadata supervisor thread did not start: {0}")]
    Thread(Arc<std::io::Error>),
}

impl SuperviseError {
    /// `call` failed with the thread's `errno`.
    pub(crate) fn last_os(call: &'static str) -> SuperviseError {
        SuperviseError::Os {
            call,
            source: Arc::new(std::io::Error::last_os_error()),
        }
    }
}

/// A seccomp program that does not assemble (a bug in the program's text, kept as an error
/// rather than a panic). Cloned: each program is built once per process.
#[derive(Debug, Clone, thiserror::Error)]
pub(crate) enum FilterError {
    #[error("seccomp program: no label {0}")]
    NoLabel(String),
    #[error("seccomp program: {0} is out of jump range")]
    OutOfRange(String),
}

/// Why one confinement could not be built.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ConfineError {
    #[cfg(target_os = "linux")]
    #[error(transparent)]
    Ruleset(#[from] landlock::RulesetError),
    #[cfg(target_os = "linux")]
    #[error(transparent)]
    PathFd(#[from] landlock::PathFdError),
    #[error("Landlock created no ruleset")]
    NoRuleset,
    #[error(transparent)]
    Filter(#[from] FilterError),
    #[error(transparent)]
    Supervise(#[from] SuperviseError),
    /// The pipe a failed child reports its step on.
    #[error("{0}")]
    Pipe(std::io::Error),
    #[cfg(not(target_os = "linux"))]
    #[error("not Linux")]
    NotLinux,
}

/// Why the code-mode worker cannot be confined (docs/code-mode.md): reported by the worker in
/// its `ready` frame, or by the host at start-up.
#[derive(Debug, thiserror::Error)]
pub enum WorkerConfineError {
    /// Not a Linux system.
    #[error("not Linux")]
    NotLinux,
    /// seccomp has no filter for this architecture.
    #[error("seccomp is not available on this architecture")]
    NoSeccompArch,
    /// The worker's seccomp program could not be built here.
    #[cfg(target_os = "linux")]
    #[error("seccomp is not available on this architecture ({0})")]
    Allowlist(seccompiler::BackendError),
    /// Landlock refused the empty ruleset.
    #[cfg(target_os = "linux")]
    #[error("landlock: {0}")]
    Landlock(landlock::RulesetError),
    /// The kernel refused the seccomp program.
    #[cfg(target_os = "linux")]
    #[error("seccomp: {0}")]
    Seccomp(seccompiler::Error),
}
