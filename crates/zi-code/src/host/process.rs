//! The worker process seen from zi: spawn (`/proc/self/exe __code-worker`, empty environment,
//! cwd `/`, its own session without a terminal), a reader task that decodes frames as they
//! arrive, a writer task fed by a queue (a blocking write of a large `result` while the worker
//! blocks writing a `log` would deadlock otherwise), the first 4 KiB of stderr for crash
//! reports, and the kill.

use std::os::unix::process::ExitStatusExt as _;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::process::{Child, Command};
use tokio::sync::mpsc;
use zi_os::sync::lock;

use crate::protocol::{MAX_FRAME, WorkerFrame, frame};

/// Stderr kept for a crash report.
const STDERR_KEEP: usize = 4096;

/// Where the worker binary is: zi itself.
#[derive(Debug, Clone)]
pub struct WorkerProgram {
    /// The executable started as `<program> __code-worker`.
    pub program: PathBuf,
}

impl WorkerProgram {
    /// The running zi: `/proc/self/exe` still names it after a package upgrade replaced the
    /// file on disk.
    pub fn current() -> WorkerProgram {
        let proc_self = PathBuf::from("/proc/self/exe");
        let program = if proc_self.exists() {
            proc_self
        } else {
            std::env::current_exe().unwrap_or(proc_self)
        };
        WorkerProgram { program }
    }
}

/// What the reader saw.
pub(super) type Incoming = Result<WorkerFrame, FrameError>;

/// A frame from the worker that breaks the protocol.
#[derive(Debug, thiserror::Error)]
pub(super) enum FrameError {
    #[error("a frame of {0} bytes (the bound is {MAX_FRAME})")]
    TooLong(usize),
    #[error(transparent)]
    Decode(#[from] crate::protocol::ProtocolError),
}

pub(super) struct Worker {
    child: Child,
    writer: mpsc::UnboundedSender<Vec<u8>>,
    pub(super) frames: mpsc::Receiver<Incoming>,
    stderr: Arc<Mutex<Vec<u8>>>,
}

impl Worker {
    pub(super) fn spawn(program: &WorkerProgram) -> std::io::Result<Worker> {
        let mut command = std::process::Command::new(&program.program);
        command
            .arg(crate::WORKER_SUBCOMMAND)
            .env_clear()
            .current_dir("/")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        // Not in zi's process group (a terminal's SIGINT goes to zi, not the worker) and
        // without a controlling terminal.
        zi_os::process::start_in_own_session(&mut command);
        zi_os::process::lifetime::mark(&mut command);
        let mut command = Command::from(command);
        command.kill_on_drop(true);
        let mut child =
            zi_os::process::lifetime::spawn_owned(|| command.spawn(), tokio::process::Child::id)?;
        let (Some(mut stdout), Some(mut stdin), Some(mut stderr)) =
            (child.stdout.take(), child.stdin.take(), child.stderr.take())
        else {
            return Err(std::io::Error::other("the worker's pipes are missing"));
        };
        let (frames_tx, frames) = mpsc::channel::<Incoming>(64);
        tokio::spawn(async move {
            loop {
                let mut prefix = [0u8; 4];
                if stdout.read_exact(&mut prefix).await.is_err() {
                    return;
                }
                let length = u32::from_be_bytes(prefix) as usize;
                if length > MAX_FRAME {
                    let _ = frames_tx.send(Err(FrameError::TooLong(length))).await;
                    return;
                }
                let mut body = vec![0u8; length];
                if stdout.read_exact(&mut body).await.is_err() {
                    return;
                }
                let decoded = WorkerFrame::decode(&body).map_err(FrameError::from);
                if frames_tx.send(decoded).await.is_err() {
                    return;
                }
            }
        });
        let (writer, mut queue) = mpsc::unbounded_channel::<Vec<u8>>();
        tokio::spawn(async move {
            while let Some(bytes) = queue.recv().await {
                if stdin.write_all(&bytes).await.is_err() {
                    return;
                }
            }
        });
        let kept = Arc::new(Mutex::new(Vec::new()));
        let sink = kept.clone();
        tokio::spawn(async move {
            let mut chunk = [0u8; 1024];
            while let Ok(n) = stderr.read(&mut chunk).await {
                if n == 0 {
                    return;
                }
                let mut kept = lock(&sink);
                if kept.len() < STDERR_KEEP {
                    let room = STDERR_KEEP - kept.len();
                    kept.extend_from_slice(&chunk[..n.min(room)]);
                }
            }
        });
        Ok(Worker {
            child,
            writer,
            frames,
            stderr: kept,
        })
    }

    /// Queues one frame (a closed pipe is noticed by the reader).
    pub(super) fn send(&self, body: &[u8]) {
        let _ = self.writer.send(frame(body));
    }

    pub(super) fn kill(&mut self) {
        let _ = self.child.start_kill();
    }

    /// Waits for the process to end (killing it after `grace`) and says how it ended.
    pub(super) async fn reap(&mut self, grace: std::time::Duration) -> String {
        let status = match tokio::time::timeout(grace, self.child.wait()).await {
            Ok(status) => status,
            Err(_) => {
                self.kill();
                self.child.wait().await
            }
        };
        match status {
            Ok(status) => match status.signal() {
                Some(signal) => zi_os::process::signal_name(signal),
                None => format!("exit {}", status.code().unwrap_or(-1)),
            },
            Err(error) => error.to_string(),
        }
    }

    /// What the worker wrote on stderr (at most 4 KiB).
    pub(super) fn stderr(&self) -> String {
        String::from_utf8_lossy(&lock(&self.stderr))
            .trim()
            .to_string()
    }
}
