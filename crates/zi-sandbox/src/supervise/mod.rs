//! The metadata supervisor of `workspace-write` (docs/approvals.md#what-a-confined-command-gets).
//! Landlock has no right for `chmod`, `chown`, times or extended attributes, so the seccomp filter
//! sends those calls to zi (`SECCOMP_RET_USER_NOTIF`) and one supervisor thread answers them:
//!
//! 1. the notified task is opened through `/proc/<tid>` and must act with zi's own credentials,
//!    user namespace and root (else `EPERM`: zi would lend it rights it does not have);
//! 2. the call's pointers (path, name, value, times) are copied out of the task once;
//! 3. the object the call names is opened `O_PATH` — relative to the task's cwd or dirfd, or
//!    its open fd for `fchmod`-style calls — and its path must lie strictly below a writable
//!    root (the roots themselves keep their metadata: `/tmp`'s sticky bit stays);
//! 4. the supervisor then makes the change itself on that very object and returns the result.
//!
//! The supervisor never answers `SECCOMP_USER_NOTIF_FLAG_CONTINUE`: a continued call would read
//! its path again, after the check, so a swapped string or symlink could redirect it. Acting on
//! the object it checked leaves nothing to race.

pub(crate) mod fdpass;
mod perform;
mod request;
mod server;
mod task;

pub(crate) use server::connect;

use std::os::fd::OwnedFd;
use std::path::PathBuf;

use request::Errno;
use task::{Identity, Task};

/// Where metadata may change: strictly below one of `roots` (canonical).
#[derive(Debug)]
pub(crate) struct Policy {
    pub roots: Vec<PathBuf>,
}

/// The answer to one notification: the call's return value or its errno.
pub(crate) fn respond(
    notif: &libc::seccomp_notif,
    policy: &Policy,
    identity: &Identity,
    valid: impl Fn() -> bool,
) -> Result<i64, Errno> {
    let request = request::decode(i64::from(notif.data.nr), notif.data.args)?;
    let mut task = Task::open(notif.pid, valid)?;
    if !task.acts_as(identity) {
        return Err(libc::EPERM);
    }
    let change = perform::read_change(&mut task, request.change)?;
    let object: OwnedFd = task.resolve(request.target)?;
    let inside = task::reachable_path(&object)
        .is_some_and(|path| crate::paths::strictly_below_a_root(&path, &policy.roots));
    if !inside {
        return Err(libc::EPERM);
    }
    perform::apply(&object, &change)
}
