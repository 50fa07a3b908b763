//! `ctx.exec`: runs one command in its own process group and ends the group with it.
//!
//! The call returns when the command itself exits, not when its output pipes reach EOF: a
//! background grandchild (`sleep 100 &`) keeps them open for as long as it lives. At that exit,
//! at the job's deadline and on cancellation the whole process group is killed, so nothing the
//! command started outlives the call (short of a process that leaves the group on purpose).

use std::fs::File;
use std::io::{ErrorKind, Read};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;

use zi_os::process::{SIGKILL, has_exited, kill_group};
use zi_sandbox::{Confinement, OnUnavailable, Sandbox};

use crate::error::ExecError;
use crate::worker::Control;

/// Output kept from each stream; the rest is read and dropped so the command never blocks.
pub const OUTPUT_BYTES: usize = 1024 * 1024;
/// How long one wait for output lasts before the exit and stop conditions are checked again.
const POLL_MS: i32 = 10;
/// Most bytes one read pass takes, so a writer that never pauses cannot hold the loop.
const PASS_BYTES: usize = 1024 * 1024;

/// How the command ended.
pub struct Finished {
    /// The exit code; `None` when a signal ended it.
    pub code: Option<i32>,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
}

/// One output pipe, read without blocking.
struct Stream {
    file: Option<File>,
    kept: Vec<u8>,
}

impl Stream {
    fn new(pipe: Option<impl Into<OwnedFd>>) -> Stream {
        let file = pipe.map(|pipe| File::from(pipe.into()));
        if let Some(file) = &file {
            zi_os::fd::set_nonblocking(file.as_fd());
        }
        Stream {
            file,
            kept: Vec::new(),
        }
    }

    /// Reads what the pipe holds now (up to [`PASS_BYTES`]); closes it at EOF or on an error.
    fn read_available(&mut self) {
        let Some(file) = self.file.as_mut() else {
            return;
        };
        let mut chunk = [0u8; 8192];
        let mut pass = 0;
        while pass < PASS_BYTES {
            match file.read(&mut chunk) {
                Ok(0) => break,
                Ok(read) => {
                    pass += read;
                    let room = OUTPUT_BYTES.saturating_sub(self.kept.len());
                    self.kept.extend_from_slice(&chunk[..read.min(room)]);
                }
                Err(error) if error.kind() == ErrorKind::WouldBlock => return,
                Err(error) if error.kind() == ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
        if pass < PASS_BYTES {
            self.file = None;
        }
    }

    fn fd(&self) -> Option<BorrowedFd<'_>> {
        self.file.as_ref().map(File::as_fd)
    }
}

/// Waits up to [`POLL_MS`] for output on the open streams.
fn wait_for_output(streams: &[Stream]) {
    let fds: Vec<BorrowedFd<'_>> = streams.iter().filter_map(Stream::fd).collect();
    zi_os::fd::wait_readable(&fds, POLL_MS);
}

/// The confinement of one command under the session's `bash` sandbox: `None` for mode `full`
/// (and for an unavailable sandbox with `onUnavailable: warn`); an error when the sandbox is
/// required and cannot be applied, so the command never runs unconfined.
fn confinement(sandbox: &Sandbox) -> Result<Option<Arc<Confinement>>, ExecError> {
    if let Some(text) = sandbox.invalid_text() {
        return Err(ExecError::Sandbox(text));
    }
    if !sandbox.is_confined_mode() {
        return Ok(None);
    }
    let reason = match sandbox.enforcement().unavailable_reason() {
        Some(reason) => reason.to_string(),
        None => match sandbox.confine() {
            Ok(confinement) => return Ok(Some(Arc::new(confinement))),
            Err(error) => error.to_string(),
        },
    };
    match sandbox.on_unavailable() {
        OnUnavailable::Warn => Ok(None),
        OnUnavailable::Error => Err(ExecError::Sandbox(sandbox.unavailable_text(&reason))),
    }
}

/// Runs `program args…` in `cwd`, inside `sandbox`, until it exits or `control` says stop (then
/// the error is the stop reason).
pub fn run(
    program: &str,
    args: &[String],
    cwd: &Path,
    sandbox: &Sandbox,
    control: Option<&Control>,
) -> Result<Finished, ExecError> {
    let confinement = confinement(sandbox)?;
    let mut command = Command::new(program);
    command
        .args(args)
        .current_dir(cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    zi_os::process::secrets::withhold_from(&mut command);
    // The extension's thread waits for it, so the parent-death signal holds while it runs.
    let marker = zi_os::process::lifetime::tool_process(&mut command);
    if let Some(confinement) = &confinement {
        confinement.install(&mut command);
    }
    let spawned = zi_os::process::lifetime::spawn_owned(|| command.spawn(), |c| Some(c.id()));
    let mut child =
        spawned.map_err(
            |source| match confinement.as_ref().and_then(|c| c.child_failure()) {
                Some(step) => ExecError::Sandbox(
                    sandbox.unavailable_text(&format!("{step} failed: {source}")),
                ),
                None => ExecError::Start {
                    program: program.to_string(),
                    source,
                },
            },
        )?;
    // The child leads its own group (start_in_own_session), so its pid is the group's id.
    let pgid = i32::try_from(child.id()).unwrap_or(0);
    let mut streams = [
        Stream::new(child.stdout.take()),
        Stream::new(child.stderr.take()),
    ];
    loop {
        match has_exited(child.id()) {
            Ok(true) => break,
            Ok(false) => {}
            Err(source) => {
                kill_group(pgid, SIGKILL);
                let _ = child.wait();
                return Err(ExecError::Wait {
                    program: program.to_string(),
                    source,
                });
            }
        }
        if let Some(reason) = control.and_then(Control::stop_reason) {
            kill_group(pgid, SIGKILL);
            zi_os::process::lifetime::kill_marked(&marker);
            let _ = child.wait();
            return Err(reason.into());
        }
        wait_for_output(&streams);
        for stream in &mut streams {
            stream.read_available();
        }
    }
    kill_group(pgid, SIGKILL);
    zi_os::process::lifetime::kill_marked(&marker);
    let status = child.wait().map_err(|source| ExecError::Wait {
        program: program.to_string(),
        source,
    })?;
    // Everything the command wrote before it exited is in the pipes now.
    for stream in &mut streams {
        stream.read_available();
    }
    let [stdout, stderr] = streams.map(|stream| stream.kept);
    Ok(Finished {
        code: status.code(),
        stdout,
        stderr,
    })
}
