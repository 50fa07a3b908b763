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

/// Every descendant of `root` (children, grandchildren, …, zombies included), nearest first.
///
/// Follows each process's `/proc/<pid>/task/<tid>/children` lists (every thread's: a child
/// belongs to the thread that started it, an orphan to the thread of its subreaper the kernel
/// picked), so the cost follows the size of the tree — at zi's exit, usually nothing but its own
/// threads — not the number of processes on the machine. A kernel without those lists
/// (`CONFIG_PROC_CHILDREN` unset) gets [`descendants_in_snapshot`]. Like one snapshot of `/proc`,
/// a walk can miss a process that forks or is re-parented while it runs: callers that kill
/// look again ([`super::lifetime::sweep`]).
pub fn descendants(root: i32) -> Vec<ProcessStat> {
    let mut found = Vec::new();
    let mut seen = HashSet::from([root]);
    let mut queue = VecDeque::from([root]);
    while let Some(parent) = queue.pop_front() {
        let Some(children) = children(parent) else {
            return descendants_in_snapshot(root);
        };
        for child in children {
            if seen.insert(child)
                && let Some(process) = stat(child)
            {
                queue.push_back(child);
                found.push(process);
            }
        }
    }
    found
}

/// The children of every thread of `pid`: `Some(empty)` when the process is gone, `None` when
/// the kernel has no `children` lists.
pub(crate) fn children(pid: i32) -> Option<Vec<i32>> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        // Gone (or never there): no children to follow. Without `/proc` at all, `stat` finds
        // nothing either, so the walk ends where a snapshot would.
        return Some(Vec::new());
    };
    let mut found = Vec::new();
    for task in tasks.flatten() {
        match std::fs::read_to_string(task.path().join("children")) {
            Ok(text) => found.extend(
                text.split_whitespace()
                    .filter_map(|pid| pid.parse::<i32>().ok()),
            ),
            // The thread ended meanwhile; its children went to another thread or process.
            Err(error) if error.kind() == std::io::ErrorKind::NotFound && task.path().exists() => {
                return None;
            }
            Err(_) => {}
        }
    }
    Some(found)
}

/// [`descendants`] found by following the parent links of one snapshot of every process in
/// `/proc` (a `stat` read per process of the machine).
pub fn descendants_in_snapshot(root: i32) -> Vec<ProcessStat> {
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
        let in_snapshot = descendants_in_snapshot(child.id() as i32);
        kill_tree(child.id() as i32);
        let _ = child.wait();
        for found in [found, in_snapshot] {
            assert!(
                found.iter().any(|process| process.pid == grandchild),
                "{grandchild} in {found:?}"
            );
        }
    }

    /// A child belongs to the thread that started it: the walk reads every thread's list.
    #[test]
    fn a_child_of_another_thread_is_a_descendant() {
        let (started, child) = std::sync::mpsc::channel();
        let (done, finish) = std::sync::mpsc::channel::<()>();
        let thread = std::thread::spawn(move || {
            let mut sleeper = std::process::Command::new("sleep")
                .arg("30")
                .spawn()
                .expect("sleep runs");
            let _ = started.send(sleeper.id() as i32);
            let _ = finish.recv();
            let _ = sleeper.kill();
            let _ = sleeper.wait();
        });
        let pid = child.recv().expect("the thread started a child");
        let own = std::process::id() as i32;
        let found = descendants(own);
        let in_snapshot = descendants_in_snapshot(own);
        let _ = done.send(());
        let _ = thread.join();
        assert!(found.iter().any(|p| p.pid == pid), "{pid} in {found:?}");
        assert!(
            in_snapshot.iter().any(|p| p.pid == pid),
            "{pid} in {in_snapshot:?}"
        );
    }
}
