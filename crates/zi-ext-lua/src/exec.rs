//! `ctx.exec`: runs one command in its own process group and ends the group with it.
//!
//! The call returns when the command itself exits, not when its output pipes reach EOF: a
//! background grandchild (`sleep 100 &`) keeps them open for as long as it lives. At that exit,
//! at the job's deadline and on cancellation the whole process group is killed, so nothing the
//! command started outlives the call (short of a process that leaves the group on purpose).

use std::fs::File;
use std::io::{ErrorKind, Read};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::CommandExt as _;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;

use zi_sandbox::{Confinement, OnUnavailable, Sandbox};

use crate::worker::Control;

/// Output kept from each stream; the rest is read and dropped so the command never blocks.
pub const OUTPUT_BYTES: usize = 1024 * 1024;
/// How long one wait for output lasts before the exit and stop conditions are checked again.
const POLL_MS: libc::c_int = 10;
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
            let fd = file.as_raw_fd();
            // SAFETY: fcntl on a descriptor this Stream owns; no memory is passed.
            unsafe {
                let flags = libc::fcntl(fd, libc::F_GETFL);
                libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK);
            }
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

    fn pollfd(&self) -> Option<libc::pollfd> {
        self.file.as_ref().map(|file| libc::pollfd {
            fd: file.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        })
    }
}

fn kill_group(pgid: libc::pid_t) {
    // SAFETY: signalling a process group this module created; a gone group yields ESRCH.
    unsafe {
        libc::killpg(pgid, libc::SIGKILL);
    }
}

/// Whether the command has exited, without reaping it: while its zombie stays, the process
/// group id cannot be reused, so killing the group afterwards cannot hit a stranger.
fn has_exited(child: &Child) -> std::io::Result<bool> {
    let pid = child.id();
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
            return Err(std::io::Error::last_os_error());
        }
        Ok(info.si_pid() != 0)
    }
}

/// Waits up to [`POLL_MS`] for output on the open streams.
fn wait_for_output(streams: &[Stream]) {
    let mut fds: Vec<libc::pollfd> = streams.iter().filter_map(Stream::pollfd).collect();
    let count = libc::nfds_t::try_from(fds.len()).unwrap_or(0);
    // SAFETY: `fds` is a live array of `count` pollfd entries for the duration of the call.
    unsafe {
        libc::poll(fds.as_mut_ptr(), count, POLL_MS);
    }
}

/// The confinement of one command under the session's `bash` sandbox: `None` for mode `full`
/// (and for an unavailable sandbox with `onUnavailable: warn`); an error when the sandbox is
/// required and cannot be applied, so the command never runs unconfined.
fn confinement(sandbox: &Sandbox) -> Result<Option<Arc<Confinement>>, String> {
    if let Some(text) = sandbox.invalid_text() {
        return Err(text);
    }
    if !sandbox.is_confined_mode() {
        return Ok(None);
    }
    let reason = match sandbox.enforcement().unavailable_reason() {
        Some(reason) => reason.to_string(),
        None => match sandbox.confine() {
            Ok(confinement) => return Ok(Some(Arc::new(confinement))),
            Err(error) => error.0,
        },
    };
    match sandbox.on_unavailable() {
        OnUnavailable::Warn => Ok(None),
        OnUnavailable::Error => Err(sandbox.unavailable_text(&reason)),
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
) -> Result<Finished, String> {
    let confinement = confinement(sandbox)?;
    let mut command = Command::new(program);
    command
        .args(args)
        .current_dir(cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    zi_os::process::start_in_own_session(&mut command);
    if let Some(confinement) = &confinement {
        let confinement = confinement.clone();
        // SAFETY: the hook makes only raw, async-signal-safe system calls (zi-sandbox).
        unsafe {
            command.pre_exec(move || confinement.apply_in_child());
        }
    }
    let mut child = command.spawn().map_err(|e| {
        match confinement.as_ref().and_then(|c| c.child_failure()) {
            Some(step) => sandbox.unavailable_text(&format!("{step} failed: {e}")),
            None => format!("Cannot run {program}: {e}"),
        }
    })?;
    let pgid = libc::pid_t::try_from(child.id()).unwrap_or(0);
    let mut streams = [
        Stream::new(child.stdout.take()),
        Stream::new(child.stderr.take()),
    ];
    loop {
        match has_exited(&child) {
            Ok(true) => break,
            Ok(false) => {}
            Err(error) => {
                kill_group(pgid);
                let _ = child.wait();
                return Err(format!("Cannot wait for {program}: {error}"));
            }
        }
        if let Some(reason) = control.and_then(Control::stop_reason) {
            kill_group(pgid);
            let _ = child.wait();
            return Err(reason);
        }
        wait_for_output(&streams);
        for stream in &mut streams {
            stream.read_available();
        }
    }
    kill_group(pgid);
    let status = child
        .wait()
        .map_err(|e| format!("Cannot wait for {program}: {e}"))?;
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
