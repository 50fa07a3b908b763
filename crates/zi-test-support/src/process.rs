//! Process inspection and clean-up for black-box tests: which processes a zi child left behind
//! (`/proc` on Linux) and how to kill its process group without hitting a reused id.

use std::collections::{HashMap, VecDeque};
use std::io;
use std::time::Duration;

use tokio::time::Instant;

/// SIGKILLs the process group `pgid`, which callers establish cannot have been reused. Only
/// [`kill_group_if_populated`] may be used once the group leader has been reaped.
pub(crate) fn kill_group(pgid: u32) {
    // SAFETY: kill(2) has no memory-safety preconditions.
    unsafe {
        libc::kill(-(pgid as libc::pid_t), libc::SIGKILL);
    }
}

/// SIGKILLs the process group `pgid` if some process still belongs to it (its members keep the
/// number reserved, so it cannot name a newer, unrelated group).
pub(crate) fn kill_group_if_populated(pgid: u32) {
    if !process_group_members(pgid).is_empty() {
        kill_group(pgid);
    }
}

/// The fields of `/proc/<pid>/stat` the helpers need.
struct ProcStat {
    state: char,
    ppid: u32,
    pgrp: u32,
}

fn proc_stat(pid: u32) -> Option<ProcStat> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // "pid (comm) S ppid pgrp …"; comm may contain spaces and parentheses.
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    let state = fields.next()?.chars().next()?;
    let ppid = fields.next()?.parse().ok()?;
    let pgrp = fields.next()?.parse().ok()?;
    Some(ProcStat { state, ppid, pgrp })
}

/// Every process listed in `/proc` with its stat.
fn all_processes() -> Vec<(u32, ProcStat)> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|pid| Some((pid, proc_stat(pid)?)))
        .collect()
}

/// Whether a process with this pid exists and is not a zombie.
pub fn process_exists(pid: u32) -> bool {
    let Ok(pid_t) = libc::pid_t::try_from(pid) else {
        return false;
    };
    // SAFETY: kill(2) with signal 0 only checks for existence and permission.
    let alive = unsafe { libc::kill(pid_t, 0) } == 0
        || io::Error::last_os_error().raw_os_error() == Some(libc::EPERM);
    alive && !matches!(proc_stat(pid), Some(ProcStat { state: 'Z', .. }))
}

/// All live (non-zombie) descendants of `pid` (children, grandchildren, …), found by following the
/// parent links in `/proc/*/stat`.
pub fn descendants(pid: u32) -> Vec<u32> {
    let mut children: HashMap<u32, Vec<(u32, char)>> = HashMap::new();
    for (child, stat) in all_processes() {
        children
            .entry(stat.ppid)
            .or_default()
            .push((child, stat.state));
    }
    let mut found = Vec::new();
    let mut queue = VecDeque::from([pid]);
    while let Some(parent) = queue.pop_front() {
        for &(child, state) in children.get(&parent).into_iter().flatten() {
            queue.push_back(child);
            if state != 'Z' {
                found.push(child);
            }
        }
    }
    found
}

/// All live (non-zombie) members of the process group `pgid`. The zi child runs in its own group
/// (id = its pid) and its descendants stay in it unless they move themselves, so after the child
/// has exited this lists what it left behind.
pub fn process_group_members(pgid: u32) -> Vec<u32> {
    all_processes()
        .into_iter()
        .filter(|(_, stat)| stat.pgrp == pgid && stat.state != 'Z')
        .map(|(pid, _)| pid)
        .collect()
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
