//! Stdio servers: the child in its own process group (registered with zi's exit-path killer, so
//! no server or descendant outlives zi), a scrubbed copy of its stderr in zi's log, and a bound
//! on the length of each line it writes to stdout.

use std::collections::BTreeMap;
use std::path::Path;
use std::pin::Pin;
use std::process::Stdio;
use std::sync::Arc;
use std::task::{Context, Poll};

use tokio::io::{AsyncBufReadExt as _, AsyncRead, ReadBuf};
use tokio::process::{ChildStdin, ChildStdout};

use crate::bounds::MAX_MESSAGE_BYTES;
use crate::connection::Fault;

/// Variables a server gets from zi's environment without asking (`environmentFrom` adds more):
/// enough to find programs and a home, nothing secret.
const BASE_ENVIRONMENT: &[&str] = &[
    "PATH", "HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "LC_CTYPE", "TMPDIR", "SHELL", "TERM",
];

pub(crate) struct Spawned {
    pub(crate) stdout: ChildStdout,
    pub(crate) stdin: ChildStdin,
    pub(crate) group: zi_os::command::Group,
}

pub(crate) fn spawn_server(
    name: &str,
    command: &[String],
    cwd: &Path,
    environment: &BTreeMap<String, String>,
) -> Result<Spawned, String> {
    let mut child = tokio::process::Command::new(&command[0]);
    child
        .args(&command[1..])
        .current_dir(cwd)
        .env_clear()
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    zi_os::process::start_in_own_session(child.as_std_mut());
    for key in BASE_ENVIRONMENT {
        if let Some(value) = std::env::var_os(key) {
            child.env(key, value);
        }
    }
    child.envs(environment);
    let mut child = child
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", command[0]))?;
    let pgid = child.id().map_or(0, |id| id as i32);
    let group = zi_os::command::Group::register(pgid);
    let (Some(stdout), Some(stdin)) = (child.stdout.take(), child.stdin.take()) else {
        return Err("the server's pipes are missing".into());
    };
    if let Some(stderr) = child.stderr.take() {
        let name = name.to_string();
        tokio::spawn(async move {
            // Lines are logged at debug level only: a server may print what it was given.
            let mut lines = tokio::io::BufReader::new(stderr).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                tracing::debug!(server = %name, "mcp server stderr: {} bytes", line.len());
            }
        });
    }
    // The child is reaped by tokio when it exits; the group guard kills it and its
    // descendants when the connection is dropped.
    tokio::spawn(async move {
        let _ = child.wait().await;
    });
    Ok(Spawned {
        stdout,
        stdin,
        group,
    })
}

/// Fails the stream (and so the connection) when a line exceeds [`MAX_MESSAGE_BYTES`], instead
/// of buffering it, and records why.
pub(crate) struct BoundedReader {
    inner: ChildStdout,
    line_bytes: usize,
    fault: Arc<Fault>,
}

impl BoundedReader {
    pub(crate) fn new(inner: ChildStdout, fault: Arc<Fault>) -> Self {
        BoundedReader {
            inner,
            line_bytes: 0,
            fault,
        }
    }
}

impl AsyncRead for BoundedReader {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let polled = Pin::new(&mut this.inner).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = polled {
            for &byte in &buf.filled()[before..] {
                if byte == b'\n' {
                    this.line_bytes = 0;
                } else {
                    this.line_bytes += 1;
                }
            }
            if this.line_bytes > MAX_MESSAGE_BYTES {
                let message = format!(
                    "the server sent a message over {} MiB",
                    MAX_MESSAGE_BYTES / (1024 * 1024)
                );
                this.fault.raise(message.clone());
                return Poll::Ready(Err(std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    message,
                )));
            }
        }
        polled
    }
}
