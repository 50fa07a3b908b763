//! Forced cleanup of a child and everything it started (delegation-reference §8.9): the
//! child's own process group, plus the groups of descendants found in `/proc` before the kill
//! (a shell tool puts its background tasks into groups of their own).

use std::collections::BTreeSet;

/// `(pid, parent pid, process group)` of every process, from `/proc/<pid>/stat`.
fn process_table() -> Vec<(i32, i32, i32)> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|entry| {
        let pid: i32 = entry.ok()?.file_name().to_str()?.parse().ok()?;
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        // The command name may contain spaces and parentheses: fields follow the last ')'.
        let rest = &stat[stat.rfind(')')? + 2..];
        let mut fields = rest.split(' ');
        let _state = fields.next()?;
        let ppid = fields.next()?.parse().ok()?;
        let pgrp = fields.next()?.parse().ok()?;
        Some((pid, ppid, pgrp))
    })
    .collect()
}

/// Every descendant of `root` with its process group.
pub fn descendants(root: i32) -> Vec<(i32, i32)> {
    let table = process_table();
    let mut found: Vec<(i32, i32)> = Vec::new();
    let mut frontier = vec![root];
    while let Some(parent) = frontier.pop() {
        for &(pid, ppid, pgrp) in &table {
            if ppid == parent && !found.iter().any(|(p, _)| *p == pid) {
                found.push((pid, pgrp));
                frontier.push(pid);
            }
        }
    }
    found
}

fn kill_group(pgid: i32) {
    if pgid > 1 {
        // SAFETY: killpg only sends a signal; a stale group id yields ESRCH.
        unsafe {
            libc::killpg(pgid, libc::SIGKILL);
        }
    }
}

fn kill_pid(pid: i32) {
    if pid > 1 {
        // SAFETY: kill only sends a signal.
        unsafe {
            libc::kill(pid, libc::SIGKILL);
        }
    }
}

/// SIGKILLs the child's group (the child leads it), every descendant and its group.
pub fn kill_tree(root: i32) {
    let found = descendants(root);
    kill_group(root);
    kill_pid(root);
    let groups: BTreeSet<i32> = found.iter().map(|(_, g)| *g).collect();
    let own = std::process::id() as i32;
    // SAFETY: getpgrp has no preconditions.
    let own_group = unsafe { libc::getpgrp() };
    for group in groups {
        if group != own_group && group != own {
            kill_group(group);
        }
    }
    for (pid, _) in found {
        kill_pid(pid);
    }
}

/// Kills what is left of the child's group after the child itself exited.
pub fn kill_leftover_group(root: i32) {
    kill_group(root);
}
