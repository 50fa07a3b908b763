//! How zi starts, signals and ends the processes that act for a model: tools, extension
//! commands, MCP servers, subagent children, `!command` values.
//!
//! Every `unsafe` that concerns processes is here, each with its SAFETY comment; the rest of the
//! workspace starts, signals and waits for child processes through these safe functions.

pub mod lifetime;
pub mod secrets;
pub mod tree;

use std::io;
use std::os::unix::process::CommandExt;

/// The signals zi sends: SIGTERM asks a process group to end, SIGKILL ends it.
pub use libc::{SIGKILL, SIGTERM};

/// Starts `command`'s child as the leader of a new session (and of a new process group whose
/// id is its pid), without a controlling terminal.
///
/// A process that keeps zi's controlling terminal can open `/dev/tty` and type into it
/// (`TIOCSTI`) or draw on it (title, clipboard escapes), answering the person's approval prompt
/// on its own. A new session has no controlling terminal, so `/dev/tty` cannot be opened
/// (docs/approvals.md#tool-processes-and-the-terminal). The child's pid is its process
/// group id, so killing the group ends it and every descendant that stayed in the group.
///
/// Replaces `process_group(0)`: a group leader cannot call `setsid`.
pub fn start_in_own_session(command: &mut std::process::Command) {
    // SAFETY: the hook runs in the forked child before exec and makes one async-signal-safe
    // system call; it allocates nothing and touches no lock.
    unsafe {
        command.pre_exec(|| {
            if libc::setsid() == -1 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// Sends `signal` ([`SIGTERM`], [`SIGKILL`], …) to every process of the group `pgid`.
///
/// Ids 0 and 1 are never signalled: 0 would mean zi's own group, 1 is init's. A group that is
/// gone yields ESRCH, which is ignored: the caller wanted it ended. Callers keep the group's
/// leader unreaped (or a member alive) while they may signal it, so the id cannot have been
/// reused by a stranger.
pub fn kill_group(pgid: i32, signal: i32) {
    if pgid > 1 {
        // SAFETY: killpg only sends a signal; it has no memory-safety preconditions.
        unsafe {
            libc::killpg(pgid, signal);
        }
    }
}

/// Sends `signal` to the one process `pid` (never to 0, 1 or a group: `pid` must be positive
/// and not init). Returns whether the signal was sent.
pub fn kill_process(pid: i32, signal: i32) -> bool {
    // SAFETY: kill only sends a signal; it has no memory-safety preconditions.
    pid > 1 && unsafe { libc::kill(pid, signal) } == 0
}

/// zi's own process group.
pub fn own_group() -> i32 {
    // SAFETY: getpgrp has no preconditions and cannot fail.
    unsafe { libc::getpgrp() }
}

/// Whether the child `pid` has exited, without reaping it: while its zombie stays, its process
/// group id cannot be reused, so killing the group afterwards cannot hit a stranger.
pub fn has_exited(pid: u32) -> io::Result<bool> {
    // SAFETY: siginfo_t is plain data; waitid fills it and WNOWAIT leaves the child waitable.
    unsafe {
        let mut info: libc::siginfo_t = std::mem::zeroed();
        let done = libc::waitid(
            libc::P_PID,
            pid,
            &mut info,
            libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
        );
        if done != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(info.si_pid() != 0)
    }
}

/// A signal's name (`SIGTERM`), or its number.
pub fn signal_name(signal: i32) -> String {
    let name = match signal {
        libc::SIGHUP => "SIGHUP",
        libc::SIGINT => "SIGINT",
        libc::SIGQUIT => "SIGQUIT",
        libc::SIGABRT => "SIGABRT",
        libc::SIGKILL => "SIGKILL",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGPIPE => "SIGPIPE",
        libc::SIGALRM => "SIGALRM",
        libc::SIGTERM => "SIGTERM",
        libc::SIGBUS => "SIGBUS",
        // What a seccomp filter that kills sends (the Code Mode worker's, docs/code-mode.md).
        libc::SIGSYS => "SIGSYS",
        _ => return format!("signal {signal}"),
    };
    name.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_child_started_in_its_own_session_leads_it() {
        let mut command = std::process::Command::new("sh");
        // Field 6 of /proc/PID/stat is the session id (after the parenthesised command name,
        // which is `sh` here and has no spaces).
        command.args(["-c", "echo $$ $(cut -d' ' -f6 /proc/$$/stat)"]);
        start_in_own_session(&mut command);
        let output = command.output().expect("sh runs");
        let stdout = String::from_utf8_lossy(&output.stdout);
        let fields: Vec<&str> = stdout.split_whitespace().collect();
        assert_eq!(fields.len(), 2, "{stdout}");
        assert_eq!(
            fields[0], fields[1],
            "the child's session id is its pid: {stdout}"
        );
    }
}
