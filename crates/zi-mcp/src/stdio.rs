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
use crate::depth::DepthGuard;

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

/// Why a stdio server's process did not start.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SpawnError {
    #[error("cannot start {program}: {source}")]
    Start {
        program: String,
        source: std::io::Error,
    },
    #[error("the server's pipes are missing")]
    Pipes,
}

pub(crate) fn spawn_server(
    name: &str,
    command: &[String],
    cwd: &Path,
    environment: &BTreeMap<String, String>,
) -> Result<Spawned, SpawnError> {
    let mut child = tokio::process::Command::new(&command[0]);
    child
        .args(&command[1..])
        .current_dir(cwd)
        .env_clear()
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    for key in BASE_ENVIRONMENT {
        if let Some(value) = std::env::var_os(key) {
            child.env(key, value);
        }
    }
    child.envs(environment);
    // Its own session, SIGKILLed if zi dies, its descendants marked for the sentinel
    // (docs/cli.md#processes-zi-starts).
    zi_os::process::lifetime::tool_process(child.as_std_mut());
    let mut child =
        zi_os::process::lifetime::spawn_owned(|| child.spawn(), tokio::process::Child::id)
            .map_err(|source| SpawnError::Start {
                program: command[0].clone(),
                source,
            })?;
    let pgid = child.id().map_or(0, |id| id as i32);
    let group = zi_os::command::Group::register(pgid);
    let (Some(stdout), Some(stdin)) = (child.stdout.take(), child.stdin.take()) else {
        return Err(SpawnError::Pipes);
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

/// A stdio server's stdout as the SDK reads it: each line (message) at most
/// [`MAX_MESSAGE_BYTES`] — a longer one fails the stream (and so the connection) instead of
/// being buffered, and records why — and nested no deeper than the message bound
/// ([`crate::depth`]).
pub(crate) struct BoundedReader {
    inner: ChildStdout,
    line_bytes: usize,
    fault: Arc<Fault>,
    guard: DepthGuard,
    /// Bytes read and rewritten that the SDK has not taken yet, from `taken` on.
    ready: Vec<u8>,
    taken: usize,
}

impl BoundedReader {
    pub(crate) fn new(inner: ChildStdout, fault: Arc<Fault>) -> Self {
        BoundedReader {
            inner,
            line_bytes: 0,
            fault,
            guard: DepthGuard::lines(),
            ready: Vec::new(),
            taken: 0,
        }
    }

    /// Counts `bytes` against the line bound; the violation, when there is one.
    fn measure(&mut self, bytes: &[u8]) -> Option<std::io::Error> {
        for &byte in bytes {
            if byte == b'\n' {
                self.line_bytes = 0;
            } else {
                self.line_bytes += 1;
            }
        }
        if self.line_bytes <= MAX_MESSAGE_BYTES {
            return None;
        }
        let message = format!(
            "the server sent a message over {} MiB",
            MAX_MESSAGE_BYTES / (1024 * 1024)
        );
        self.fault.raise(message.clone());
        Some(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            message,
        ))
    }
}

impl AsyncRead for BoundedReader {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        // Read until something is ready: a chunk whose bytes were all cut yields nothing, and
        // returning nothing would read as the end of the stream.
        while this.taken == this.ready.len() {
            this.ready.clear();
            this.taken = 0;
            let mut chunk = [0u8; 16 * 1024];
            let mut read = ReadBuf::new(&mut chunk);
            match Pin::new(&mut this.inner).poll_read(cx, &mut read) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Err(error)) => return Poll::Ready(Err(error)),
                Poll::Ready(Ok(())) => {}
            }
            let bytes = read.filled();
            if bytes.is_empty() {
                return Poll::Ready(Ok(()));
            }
            if let Some(violation) = this.measure(bytes) {
                return Poll::Ready(Err(violation));
            }
            this.guard.feed(bytes, &mut this.ready);
        }
        let count = buf.remaining().min(this.ready.len() - this.taken);
        buf.put_slice(&this.ready[this.taken..this.taken + count]);
        this.taken += count;
        Poll::Ready(Ok(()))
    }
}
