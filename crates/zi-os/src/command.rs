//! `!command` configuration values (a models.json `apiKey` or header value, an auth.json `key`):
//! `sh -c command`, whose trimmed stdout is the value.
//!
//! A command is bounded and cancellable: it runs in its own process group, which is killed
//! (SIGKILL) when the command finishes, exceeds [`COMMAND_TIMEOUT`] or prints more than
//! [`MAX_COMMAND_OUTPUT_BYTES`], when its future is dropped (an interrupt, EOF or a signal drops the
//! request that waits for it), and by [`kill_all`] when zi exits. Its stderr is discarded and its
//! stdout never logged: the value is a secret.

use std::process::Stdio;
use std::sync::Mutex;
use std::time::Duration;

use tokio::io::AsyncReadExt as _;

use crate::process::kill_group;
use crate::sync::lock;

/// Longest a command may run (Zi documents no bound).
pub const COMMAND_TIMEOUT: Duration = Duration::from_secs(10);

/// Most bytes of stdout a command may print.
pub const MAX_COMMAND_OUTPUT_BYTES: usize = 64 * 1024;

/// Process groups of the commands running now.
static LIVE_GROUPS: Mutex<Vec<i32>> = Mutex::new(Vec::new());

/// Why a command yielded no value. The texts never contain its output.
#[derive(Debug, thiserror::Error)]
pub enum CommandError {
    /// The shell could not be started.
    #[error("could not start: {0}")]
    Spawn(std::io::Error),
    /// It ran longer than [`COMMAND_TIMEOUT`] and was killed.
    #[error("timed out after {}s", COMMAND_TIMEOUT.as_secs())]
    TimedOut,
    /// It exited unsuccessfully.
    #[error("exited with {0}")]
    Failed(std::process::ExitStatus),
    /// Its output was longer than [`MAX_COMMAND_OUTPUT_BYTES`].
    #[error("printed more than {MAX_COMMAND_OUTPUT_BYTES} bytes")]
    TooLong,
    /// Its output was not UTF-8.
    #[error("printed invalid UTF-8")]
    NotUtf8,
    /// Its output could not be read.
    #[error("could not read its output: {0}")]
    Read(std::io::Error),
}

/// Kills every running command's process group (for exit paths that skip the futures' drops).
pub fn kill_all() {
    let groups = lock(&LIVE_GROUPS).clone();
    for pgid in groups {
        kill_group(pgid, libc::SIGKILL);
    }
}

/// Registers a running group; dropping it kills the group and forgets it. Other child processes
/// zi must never leave behind (MCP stdio servers) register theirs too, so [`kill_all`] covers them.
pub struct Group(i32);

impl Group {
    /// Registers the process group `pgid`.
    pub fn register(pgid: i32) -> Group {
        lock(&LIVE_GROUPS).push(pgid);
        Group(pgid)
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        // Also after a normal exit: background children left in the group must not outlive the
        // command (the group id stays reserved while any member lives).
        kill_group(self.0, libc::SIGKILL);
        lock(&LIVE_GROUPS).retain(|&g| g != self.0);
    }
}

/// Runs `command` and returns its trimmed stdout. Cancel by dropping the future.
pub async fn run(command: &str) -> Result<String, CommandError> {
    let mut child = tokio::process::Command::new("sh")
        .arg("-c")
        .arg(command)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .process_group(0)
        .kill_on_drop(true)
        .spawn()
        .map_err(CommandError::Spawn)?;
    let pgid = child.id().map_or(0, |id| id as i32);
    let group = Group::register(pgid);
    let stdout = child.stdout.take();
    let read = async {
        let mut output = Vec::new();
        if let Some(stdout) = stdout {
            // One byte past the bound tells an oversized output from one that fits exactly.
            stdout
                .take(MAX_COMMAND_OUTPUT_BYTES as u64 + 1)
                .read_to_end(&mut output)
                .await
                .map_err(CommandError::Read)?;
        }
        if output.len() > MAX_COMMAND_OUTPUT_BYTES {
            return Err(CommandError::TooLong);
        }
        Ok(output)
    };
    let wait = async {
        let status = child.wait().await.map_err(CommandError::Read)?;
        // Background children still holding stdout would keep the read open: end them with
        // the command.
        kill_group(pgid, libc::SIGKILL);
        Ok(status)
    };
    let (output, status) =
        tokio::time::timeout(COMMAND_TIMEOUT, async { tokio::try_join!(read, wait) })
            .await
            .map_err(|_| CommandError::TimedOut)??;
    drop(group);
    if !status.success() {
        return Err(CommandError::Failed(status));
    }
    let text = String::from_utf8(output).map_err(|_| CommandError::NotUtf8)?;
    Ok(text.trim().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn output_status_and_bounds() {
        assert_eq!(run("printf ' abc \\n'").await.ok().as_deref(), Some("abc"));
        assert!(matches!(run("exit 3").await, Err(CommandError::Failed(_))));
        assert!(matches!(run("yes").await, Err(CommandError::TooLong)));
        assert!(matches!(
            run("printf '\\377'").await,
            Err(CommandError::NotUtf8)
        ));
        // A background child holding stdout does not hold the value back until the timeout.
        assert_eq!(
            run("printf key; sleep 30 &").await.ok().as_deref(),
            Some("key")
        );
    }
}
