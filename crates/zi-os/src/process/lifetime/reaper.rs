//! Reaping the orphans re-parented to zi (a subreaper): nobody else waits for them, so each
//! would stay a zombie until zi exits.
//!
//! Only zombies that are certainly not someone's child to wait for are reaped: not a child zi
//! started and waits for itself ([`super::spawn_owned`]), and not in zi's own session — an
//! extension's `os.execute` and `io.popen`, and `!command` values, start their processes there
//! and wait for them by pid; every tool, server and subagent child starts a session of its
//! own, and so do its orphans.

use super::{OWNED, SPAWNING, is_owned};
use crate::process::tree;
use crate::sync::{lock, write};

/// The direct children of zi: `/proc/self/task/*/children`, or a scan of `/proc` where the
/// kernel has no such file.
fn children() -> Vec<i32> {
    let own = std::process::id() as i32;
    tree::children(own).unwrap_or_else(|| {
        tree::processes()
            .into_iter()
            .filter(|process| process.parent == own)
            .map(|process| process.pid)
            .collect()
    })
}

/// Reaps every zombie child of zi that is an orphan (see the module documentation), and
/// forgets owned children that their owner has reaped. Call on SIGCHLD.
pub fn reap_orphans() {
    let _no_spawn = write(&SPAWNING);
    let own = std::process::id() as i32;
    // SAFETY: getsid(0) has no preconditions.
    let own_session = unsafe { libc::getsid(0) };
    for pid in children() {
        let Some(stat) = tree::stat(pid) else {
            continue;
        };
        if !stat.is_zombie() || stat.session == own_session || is_owned(pid) {
            continue;
        }
        let mut status = 0;
        // SAFETY: waitpid on one child pid; `status` is a valid out-pointer.
        unsafe {
            libc::waitpid(pid, &mut status, libc::WNOHANG);
        }
    }
    if let Some(owned) = lock(&OWNED).as_mut() {
        owned.retain(|&pid| tree::stat(pid).is_some_and(|stat| stat.parent == own));
    }
}
