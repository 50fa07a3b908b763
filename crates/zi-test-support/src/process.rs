//! Process inspection and clean-up for black-box tests: which processes a zi child left behind
//! (`/proc` on Linux) and how to kill its process group without hitting a reused id.

use std::io;
use std::time::Duration;

use tokio::time::Instant;
use zi_os::process::tree;

/// SIGKILLs the process group `pgid`, which callers establish cannot have been reused. Only
/// [`kill_group_if_populated`] may be used once the group leader has been reaped.
pub(crate) fn kill_group(pgid: u32) {
    zi_os::process::kill_group(pgid as i32, libc::SIGKILL);
}

/// SIGKILLs the process group `pgid` if some process still belongs to it (its members keep the
/// number reserved, so it cannot name a newer, unrelated group).
pub(crate) fn kill_group_if_populated(pgid: u32) {
    if !process_group_members(pgid).is_empty() {
        kill_group(pgid);
    }
}

/// Whether a process with this pid exists and is not a zombie.
pub fn process_exists(pid: u32) -> bool {
    let Ok(pid_t) = libc::pid_t::try_from(pid) else {
        return false;
    };
    // SAFETY: kill(2) with signal 0 only checks for existence and permission.
    let alive = unsafe { libc::kill(pid_t, 0) } == 0
        || io::Error::last_os_error().raw_os_error() == Some(libc::EPERM);
    alive && !tree::stat(pid_t).is_some_and(|stat| stat.is_zombie())
}

/// All live (non-zombie) descendants of `pid` (children, grandchildren, …), found by following the
/// parent links in `/proc/*/stat` — not the `children` lists zi's own sweep follows, so the tests
/// do not judge zi by zi's method.
pub fn descendants(pid: u32) -> Vec<u32> {
    let Ok(pid) = i32::try_from(pid) else {
        return Vec::new();
    };
    tree::descendants_in_snapshot(pid)
        .into_iter()
        .filter(|process| !process.is_zombie())
        .map(|process| process.pid as u32)
        .collect()
}

/// All live (non-zombie) members of the process group `pgid`. The zi child runs in its own group
/// (id = its pid) and its descendants stay in it unless they move themselves, so after the child
/// has exited this lists what it left behind.
pub fn process_group_members(pgid: u32) -> Vec<u32> {
    tree::processes()
        .into_iter()
        .filter(|process| process.group as u32 == pgid && !process.is_zombie())
        .map(|process| process.pid as u32)
        .collect()
}

/// The pids `pgrep FLAG PATTERN` finds: `-f` matches `pattern` anywhere in a command line, `-fx`
/// only a whole command line (not the shell that runs it). None when pgrep fails.
pub fn pgrep(flag: &str, pattern: &str) -> Vec<u32> {
    std::process::Command::new("pgrep")
        .arg(flag)
        .arg(pattern)
        .output()
        .map(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .filter_map(|l| l.trim().parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// Waits until none of `pids` exists any more; returns the ones still alive after `timeout`.
pub async fn wait_until_gone(pids: &[u32], timeout: Duration) -> Vec<u32> {
    let deadline = Instant::now() + timeout;
    loop {
        let alive: Vec<u32> = pids
            .iter()
            .copied()
            .filter(|&p| process_exists(p))
            .collect();
        if alive.is_empty() || Instant::now() >= deadline {
            return alive;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn process_inspection_of_missing_and_own_processes() {
        assert!(descendants(u32::MAX).is_empty());
        assert!(!process_exists(u32::MAX));
        assert!(process_exists(std::process::id()));
    }
}
