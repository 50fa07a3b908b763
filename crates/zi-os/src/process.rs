//! How zi starts the processes that act for a model: tools, extension commands, MCP servers,
//! subagent children.

use std::io;
use std::os::unix::process::CommandExt;

/// Starts `command`'s child as the leader of a new session (and of a new process group whose
/// id is its pid), without a controlling terminal.
///
/// A process that keeps zi's controlling terminal can open `/dev/tty` and type into it
/// (`TIOCSTI`) or draw on it (title, clipboard escapes), answering the person's approval prompt
/// on its own. A new session has no controlling terminal, so `/dev/tty` cannot be opened
/// (docs/approvals.md, "Tool processes and the terminal"). The child's pid is its process
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
