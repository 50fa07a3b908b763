//! The process tree as `/proc` shows it: who is whose child, in which process group, and the
//! forced end of a child with everything it started (docs/delegation.md#limits).

use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};

use super::{kill_group, kill_process, own_group};

/// What `/proc/<pid>/stat` tells about one process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcessStat {
    /// The process id.
    pub pid: i32,
    /// The state letter (`R`, `S`, `Z` for a zombie, …).
    pub state: char,
    /// The parent's process id.
    pub parent: i32,
    /// The process group id.
    pub group: i32,
    /// The session id (a process that called `setsid` leads its own).
    pub session: i32,
}

impl ProcessStat {
    /// Whether the process has exited and waits to be reaped.
    pub fn is_zombie(&self) -> bool {
        self.state == 'Z'
    }
}

/// The stat of `pid`, `None` when it does not exist (or `/proc` is not there).
pub fn stat(pid: i32) -> Option<ProcessStat> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // "pid (comm) S ppid pgrp …"; comm may contain spaces and parentheses: fields follow the
    // last ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    let state = fields.next()?.chars().next()?;
    let parent = fields.next()?.parse().ok()?;
    let group = fields.next()?.parse().ok()?;
    let session = fields.next()?.parse().ok()?;
    Some(ProcessStat {
        pid,
        state,
        parent,
        group,
        session,
    })
}

/// Every process listed in `/proc` with its stat.
pub fn processes() -> Vec<ProcessStat> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(stat)
        .collect()
}

/// Every descendant of `root` (children, grandchildren, …, zombies included), nearest first,
/// found by following the parent links of one snapshot of `/proc`.
pub fn descendants(root: i32) -> Vec<ProcessStat> {
    let mut children: HashMap<i32, Vec<ProcessStat>> = HashMap::new();
    for process in processes() {
        children.entry(process.parent).or_default().push(process);
    }
    let mut found = Vec::new();
    let mut seen = HashSet::from([root]);
    let mut queue = VecDeque::from([root]);
    while let Some(parent) = queue.pop_front() {
        for child in children.get(&parent).into_iter().flatten() {
            if seen.insert(child.pid) {
                queue.push_back(child.pid);
                found.push(*child);
            }
        }
    }
    found
}

/// SIGKILLs the child `root` and its group (the child leads it), then every descendant and the
/// groups they moved into (a shell tool puts its background tasks into groups of their own),
/// found in `/proc` before the kill. zi's own group is spared.
pub fn kill_tree(root: i32) {
    let found = descendants(root);
    kill_group(root, libc::SIGKILL);
    kill_process(root, libc::SIGKILL);
    let groups: BTreeSet<i32> = found.iter().map(|process| process.group).collect();
    let own = std::process::id() as i32;
    let own_group = own_group();
    for group in groups {
        if group != own_group && group != own {
            kill_group(group, libc::SIGKILL);
        }
    }
    for process in found {
        kill_process(process.pid, libc::SIGKILL);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_process_and_missing_ones() {
        let own = std::process::id() as i32;
        let me = stat(own).expect("this process is in /proc");
        assert_eq!(me.pid, own);
        assert_eq!(me.group, own_group());
        assert!(stat(i32::MAX).is_none());
        assert!(descendants(i32::MAX).is_empty());
    }

    #[test]
    fn a_grandchild_is_a_descendant() {
        let mut child = std::process::Command::new("sh")
            .args(["-c", "sleep 30 & echo $!; wait"])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("sh runs");
        let mut line = String::new();
        let stdout = child.stdout.take().expect("piped");
        std::io::BufRead::read_line(&mut std::io::BufReader::new(stdout), &mut line)
            .expect("sh prints the sleep's pid");
        let grandchild: i32 = line.trim().parse().expect("a pid");
        let found = descendants(child.id() as i32);
        kill_tree(child.id() as i32);
        let _ = child.wait();
        assert!(
            found.iter().any(|process| process.pid == grandchild),
            "{grandchild} in {found:?}"
        );
    }
}
