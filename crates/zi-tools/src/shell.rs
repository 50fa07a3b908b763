//! Running one shell command in its own process group with bounded output capture.
//!
//! Output (stdout and stderr, interleaved as it arrives) is kept in memory only while it fits
//! the 2,000-line / 50 KiB result limits. Beyond that the whole output goes to a temporary file
//! (at most [`MAX_SPILL_BYTES`]) and memory keeps a bounded tail, so a command that prints
//! gigabytes costs the same memory as one that prints 100 KiB. Timeout, cancellation and the
//! output limit kill the whole process group: SIGTERM, then SIGKILL after a 1 s grace.

use std::io::Write as _;
use std::os::unix::process::ExitStatusExt as _;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use zi_os::process::lifetime::{self, Marker};

use tokio::io::AsyncReadExt as _;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use zi_os::process::{SIGKILL, SIGTERM, kill_group};
use zi_os::sync::lock;

use crate::truncate::{MAX_BYTES, MAX_LINES, tail};

/// The spill file holds at most this much; more output stops the command (64 MiB).
pub const MAX_SPILL_BYTES: u64 = 64 * 1024 * 1024;
/// Time between SIGTERM and SIGKILL.
pub const KILL_GRACE: Duration = Duration::from_secs(1);
/// Once the shell has exited, how long to keep reading output that descendants still write.
const DRAIN_AFTER_EXIT: Duration = Duration::from_millis(250);
/// In spill mode memory keeps at least this much of the tail (more than [`MAX_BYTES`]).
const TAIL_KEEP: usize = 64 * 1024;
const READ_CHUNK: usize = 64 * 1024;
/// Longest command passed as an argument; longer ones go through a script file.
const MAX_INLINE_COMMAND: usize = 96 * 1024;

/// How a command ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Termination {
    Exited(i32),
    Signaled(i32),
    TimedOut,
    /// The caller's token fired; the caller knows why.
    Cancelled,
    OutputLimit,
    SpawnFailed(String),
    /// The sandbox could not be applied in the child; the command did not run.
    SandboxFailed(String),
}

/// Output captured so far; shared with progress reporters and `task_output`.
#[derive(Debug, Default)]
pub struct Capture {
    /// All output until spilling starts; afterwards a bounded tail.
    buffer: Vec<u8>,
    total_bytes: u64,
    newlines: u64,
    last_byte: Option<u8>,
    spill: Option<(std::fs::File, PathBuf)>,
    spilled_bytes: u64,
    spill_failed: bool,
}

/// A rendering of the capture: the visible tail, whether it was cut, the spill file.
#[derive(Debug, Clone, PartialEq)]
pub struct OutputView {
    pub text: String,
    pub truncated: bool,
    pub full_output_path: Option<PathBuf>,
    pub total_bytes: u64,
}

impl Capture {
    fn body_exceeds_limits(&self) -> bool {
        let trailing = u64::from(self.last_byte == Some(b'\n'));
        let body_bytes = self.total_bytes - trailing;
        let body_lines = if body_bytes == 0 {
            0
        } else {
            self.newlines - trailing + 1
        };
        body_bytes > MAX_BYTES as u64 || body_lines > MAX_LINES as u64
    }

    /// Adds a chunk; returns false once the output limit is passed.
    pub fn push(&mut self, chunk: &[u8]) -> bool {
        if chunk.is_empty() {
            return true;
        }
        self.total_bytes += chunk.len() as u64;
        self.newlines += chunk.iter().filter(|&&b| b == b'\n').count() as u64;
        self.last_byte = chunk.last().copied();
        self.buffer.extend_from_slice(chunk);
        if self.spill.is_none() && !self.spill_failed && self.body_exceeds_limits() {
            match tempfile::Builder::new()
                .prefix("zi-bash-")
                .suffix(".log")
                .tempfile()
                .and_then(|file| file.keep().map_err(|e| e.error))
            {
                Ok((file, path)) => {
                    self.spill = Some((file, path));
                    let pending = std::mem::take(&mut self.buffer);
                    self.write_spill(&pending);
                    self.buffer = pending;
                }
                Err(error) => {
                    tracing::warn!("cannot create the bash output file: {error}");
                    self.spill_failed = true;
                }
            }
        } else if self.spill.is_some() {
            self.write_spill(chunk);
        }
        if (self.spill.is_some() || self.spill_failed) && self.buffer.len() > 2 * TAIL_KEEP {
            let cut = self.buffer.len() - TAIL_KEEP;
            self.buffer.drain(..cut);
        }
        self.total_bytes <= MAX_SPILL_BYTES
    }

    fn write_spill(&mut self, bytes: &[u8]) {
        let room = MAX_SPILL_BYTES.saturating_sub(self.spilled_bytes);
        let take = bytes.len().min(usize::try_from(room).unwrap_or(usize::MAX));
        if let Some((file, _)) = &mut self.spill
            && take > 0
        {
            if let Err(error) = file.write_all(&bytes[..take]) {
                tracing::warn!("cannot write the bash output file: {error}");
            }
            self.spilled_bytes += take as u64;
        }
    }

    pub fn total_bytes(&self) -> u64 {
        self.total_bytes
    }

    /// The last 2,000 lines / 50 KiB of the output.
    pub fn view(&self) -> OutputView {
        let text = String::from_utf8_lossy(&self.buffer);
        let (kept, cut) = tail(&text, MAX_LINES, MAX_BYTES);
        OutputView {
            text: kept.to_string(),
            truncated: cut || self.body_exceeds_limits(),
            full_output_path: self.spill.as_ref().map(|(_, path)| path.clone()),
            total_bytes: self.total_bytes,
        }
    }
}

/// What to run.
#[derive(Debug, Clone)]
pub struct ShellRequest {
    pub shell: PathBuf,
    pub cwd: PathBuf,
    pub command: String,
    pub timeout: Duration,
    /// `$SHELL -lc` (v1) or, in a confined mode, `$SHELL -c`
    /// (docs/approvals.md#what-a-confined-command-gets).
    pub login: bool,
    /// Applied in the child before exec; `None` runs the command unconfined (v1).
    pub confinement: Option<Arc<zi_sandbox::Confinement>>,
}

/// Calls `progress` with the capture at most every `every` while output arrives.
pub struct Progress {
    pub every: Duration,
    pub report: Box<dyn Fn(&Capture) + Send>,
}

/// The child's stdout and stderr, interleaved in arrival order; the channel closes when both end.
fn read_output(child: &mut tokio::process::Child) -> mpsc::Receiver<Vec<u8>> {
    let (sender, chunks) = mpsc::channel::<Vec<u8>>(8);
    if let Some(stdout) = child.stdout.take() {
        tokio::spawn(read_into(stdout, sender.clone()));
    }
    if let Some(stderr) = child.stderr.take() {
        tokio::spawn(read_into(stderr, sender));
    }
    chunks
}

async fn read_into(mut pipe: impl tokio::io::AsyncRead + Unpin, sender: mpsc::Sender<Vec<u8>>) {
    let mut buffer = vec![0u8; READ_CHUNK];
    loop {
        match pipe.read(&mut buffer).await {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                if sender.send(buffer[..n].to_vec()).await.is_err() {
                    return;
                }
            }
        }
    }
}

/// The shell command for `request`, the marker of its processes, and the script file that must
/// outlive it when the command is too long for an argument.
type ShellCommand = (
    tokio::process::Command,
    Marker,
    Option<tempfile::NamedTempFile>,
);

fn shell_command(request: &ShellRequest) -> Result<ShellCommand, Termination> {
    let mut command = tokio::process::Command::new(&request.shell);
    // Linux refuses a single argument over 128 KiB, so long commands run from a script file
    // (`$SHELL -l FILE`, or `$SHELL FILE`), which is removed when the command ends.
    let mut script = None;
    if request.command.len() > MAX_INLINE_COMMAND {
        let written = tempfile::Builder::new()
            .prefix("zi-bash-command-")
            .suffix(".sh")
            .tempfile()
            .and_then(|mut file| {
                file.write_all(request.command.as_bytes())?;
                file.flush()?;
                Ok(file)
            });
        match written {
            Ok(file) => {
                if request.login {
                    command.arg("-l");
                }
                command.arg(file.path());
                script = Some(file);
            }
            Err(error) => return Err(Termination::SpawnFailed(error.to_string())),
        }
    } else {
        command
            .arg(if request.login { "-lc" } else { "-c" })
            .arg(&request.command);
    }
    command
        .current_dir(&request.cwd)
        .env("NO_COLOR", "1")
        .env("TERM", "dumb")
        .env("PAGER", "cat")
        .env("GIT_PAGER", "cat")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    zi_os::process::secrets::withhold_from(command.as_std_mut());
    // Its own session, SIGKILLed if zi dies, marked so whatever it leaves behind can be found
    // (docs/cli.md#processes-zi-starts).
    let marker = lifetime::tool_process(command.as_std_mut());
    if let Some(confinement) = &request.confinement {
        confinement.install(command.as_std_mut());
    }
    Ok((command, marker, script))
}

/// SIGTERM to the group, SIGKILL after the grace, then SIGKILL again for descendants that
/// ignored SIGTERM (or outlived the shell): they get no grace.
async fn terminate(pgid: i32, child: &mut tokio::process::Child) {
    kill_group(pgid, SIGTERM);
    if tokio::time::timeout(KILL_GRACE, child.wait())
        .await
        .is_err()
    {
        kill_group(pgid, SIGKILL);
        let _ = child.wait().await;
    }
    kill_group(pgid, SIGKILL);
}

/// Collects what descendants still write for a moment after the shell exited, without waiting
/// on them. Returns whether anything arrived.
async fn drain_after_exit(chunks: &mut mpsc::Receiver<Vec<u8>>, capture: &Mutex<Capture>) -> bool {
    let mut dirty = false;
    let drain = tokio::time::sleep(DRAIN_AFTER_EXIT);
    tokio::pin!(drain);
    loop {
        tokio::select! {
            chunk = chunks.recv() => match chunk {
                Some(chunk) => {
                    lock(capture).push(&chunk);
                    dirty = true;
                }
                None => return dirty,
            },
            () = &mut drain => return dirty,
        }
    }
}

/// Runs `$SHELL -lc command` (`-c` when not a login shell) and returns how it ended; output
/// lands in `capture`.
pub async fn run(
    request: ShellRequest,
    capture: Arc<Mutex<Capture>>,
    cancel: CancellationToken,
    progress: Option<Progress>,
) -> Termination {
    let (mut command, marker, _script) = match shell_command(&request) {
        Ok(built) => built,
        Err(termination) => return termination,
    };
    let mut child = match lifetime::spawn_owned(|| command.spawn(), tokio::process::Child::id) {
        Ok(child) => child,
        Err(error) => {
            return match request.confinement.as_ref().and_then(|c| c.child_failure()) {
                Some(step) => Termination::SandboxFailed(format!("{step} failed: {error}")),
                None => Termination::SpawnFailed(error.to_string()),
            };
        }
    };
    let pgid = child.id().map_or(0, |id| id as i32);
    let mut chunks = read_output(&mut child);

    let deadline = tokio::time::sleep(request.timeout);
    tokio::pin!(deadline);
    // Output not reported yet is reported when the interval since the last report is over,
    // whether or not more output comes (docs/tools.md#bash): at most one report per interval.
    let mut last_report = Instant::now();
    let report_due = tokio::time::sleep(Duration::ZERO);
    tokio::pin!(report_due);
    let mut dirty = false;
    let mut open = true;
    let mut stop: Option<Termination> = None;
    let status = loop {
        tokio::select! {
            chunk = chunks.recv(), if open => match chunk {
                Some(chunk) => {
                    let within = lock(&capture).push(&chunk);
                    if !dirty && let Some(progress) = &progress {
                        // The first output since the last report: due once the interval is over.
                        report_due
                            .as_mut()
                            .reset((last_report + progress.every).into());
                    }
                    dirty = true;
                    if !within {
                        stop = Some(Termination::OutputLimit);
                        break None;
                    }
                }
                None => open = false,
            },
            () = &mut report_due, if dirty && progress.is_some() => {
                if let Some(progress) = &progress {
                    (progress.report)(&lock(&capture));
                }
                last_report = Instant::now();
                dirty = false;
            }
            status = child.wait() => break Some(status),
            () = &mut deadline => {
                stop = Some(Termination::TimedOut);
                break None;
            }
            () = cancel.cancelled() => {
                stop = Some(Termination::Cancelled);
                break None;
            }
        }
    };
    let termination = match (stop, status) {
        (Some(reason), _) => {
            terminate(pgid, &mut child).await;
            // What left the group (`setsid`, a double fork) ends with it too.
            let _ = tokio::task::spawn_blocking(move || lifetime::kill_marked(&marker)).await;
            reason
        }
        (None, Some(Ok(status))) => {
            if open {
                dirty |= drain_after_exit(&mut chunks, &capture).await;
            }
            match (status.code(), status.signal()) {
                (Some(code), _) => Termination::Exited(code),
                (None, Some(signal)) => Termination::Signaled(signal),
                (None, None) => Termination::Exited(-1),
            }
        }
        (None, Some(Err(error))) => {
            kill_group(pgid, SIGKILL);
            Termination::SpawnFailed(error.to_string())
        }
        (None, None) => Termination::Cancelled,
    };
    if dirty && let Some(progress) = &progress {
        (progress.report)(&lock(&capture));
    }
    termination
}
