//! The sentinel: a small process, started with zi's first marked child, that ends every marked
//! process once zi is gone — also when zi was SIGKILLed or crashed and ran no code of its own.
//!
//! It is zi's own executable (`zi __sentinel ROOT`) with the read end of a pipe as stdin; zi
//! keeps the write end, so the read returns EOF exactly when zi's process ends. The sentinel
//! then SIGKILLs every process whose environment carries a marker below zi's, round after round
//! until none is left, and exits.
//!
//! It must not be zi's descendant: zi's sweep would end it first, and a child of zi would show
//! up in every look at zi's process tree. So it forks once at start and its first process
//! exits, while zi is briefly not a subreaper: the sentinel is re-parented to init (or to a
//! subreaper above zi) and lives beside zi, not under it.

use std::io;
use std::os::fd::{FromRawFd as _, OwnedFd};
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Mutex;

use super::{
    Marker, Markers, TREE_VARIABLE, kill_rounds, root, set_subreaper, spawn_owned, valid_marker,
};
use crate::process::{start_in_own_session, tree};
use crate::sync::lock;

/// The first argument that makes zi's `main` run [`sentinel_main`].
pub const SENTINEL_SUBCOMMAND: &str = "__sentinel";

enum State {
    /// No executable to run (libraries, tests): no sentinel.
    Disabled,
    /// Started with the first marked child.
    Ready(PathBuf),
    /// Running; zi holds the pipe's write end until it exits.
    Running { _write_end: OwnedFd },
    /// Could not start: not tried again.
    Failed,
}

static STATE: Mutex<State> = Mutex::new(State::Disabled);

pub(super) fn configure(program: Option<PathBuf>) {
    *lock(&STATE) = program.map_or(State::Disabled, State::Ready);
}

/// Starts the sentinel unless it runs (or cannot).
pub(super) fn ensure_running() {
    let mut state = lock(&STATE);
    let State::Ready(program) = &*state else {
        return;
    };
    *state = match start(program) {
        Ok(write_end) => State::Running {
            _write_end: write_end,
        },
        Err(_) => State::Failed,
    };
}

/// A pipe whose ends are closed on exec (the read end becomes the sentinel's stdin, which
/// clears the flag on that copy only).
fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: pipe2 writes two new descriptors into `fds`, which we then own.
    unsafe {
        if libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok((OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])))
    }
}

fn start(program: &PathBuf) -> io::Result<OwnedFd> {
    let (read, write) = pipe()?;
    let mut command = std::process::Command::new(program);
    command
        .arg(SENTINEL_SUBCOMMAND)
        .arg(root())
        .env_remove(TREE_VARIABLE)
        .stdin(Stdio::from(read))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .current_dir("/");
    start_in_own_session(&mut command);
    // While the sentinel's first process exits, the sentinel must be re-parented past zi.
    set_subreaper(false)?;
    let started = spawn_owned(|| command.spawn(), |child| Some(child.id()))
        .and_then(|mut child| child.wait());
    let restored = set_subreaper(true);
    let status = started?;
    restored?;
    if !status.success() {
        return Err(io::Error::other("the sentinel did not start"));
    }
    Ok(write)
}

/// The sentinel's whole life (`zi __sentinel ROOT`): call from `main` before any thread starts.
pub fn sentinel_main(root: &str) -> ! {
    if !valid_marker(root) {
        std::process::exit(2);
    }
    // SAFETY: the process is single-threaded here (the caller's contract), so fork is safe and
    // the child may run ordinary code; the parent only exits.
    match unsafe { libc::fork() } {
        0 => {}
        -1 => std::process::exit(1),
        _ => std::process::exit(0),
    }
    let mut buffer = [0u8; 64];
    loop {
        // SAFETY: reads into a buffer we own, at most its length.
        let read = unsafe { libc::read(0, buffer.as_mut_ptr().cast(), buffer.len()) };
        if read > 0 || (read < 0 && io::Error::last_os_error().kind() == io::ErrorKind::Interrupted)
        {
            continue;
        }
        break;
    }
    // Only what zi started: a zi whose marker it inherited (a subagent child, a zi run by a
    // tool) shares it with the command that started it, which is not this zi's to end.
    let marker = Marker(root.to_string());
    let markers = Markers::new();
    kill_rounds(tree::processes, |process| {
        markers
            .of(process.pid)
            .is_some_and(|value| marker.is_below(&value))
    });
    std::process::exit(0)
}
