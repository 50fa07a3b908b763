//! Who may write stdout and read stdin: in the non-interactive modes only zi's writer and reader.
//!
//! Stdout carries the protocol frames (rpc), the JSON lines (json) or the answer (text), and
//! stdin the client's requests. [`claim`] moves both to private close-on-exec descriptors before
//! anything else runs, then points fd 0 at `/dev/null` and fd 1 at stderr. So whatever else writes
//! to fd 1 — a Lua extension's `os.execute` or `io.popen` child, a script opening `/dev/stdout`
//! or `/proc/self/fd/1`, a stray `println!` — lands on stderr, and no child can read (and so
//! steal) the client's input.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, RawFd};

/// The streams zi owns.
pub struct Streams {
    /// What fd 0 was: the client's input.
    pub input: File,
    /// What fd 1 was: the protocol (or JSON, or answer) output.
    pub output: File,
}

/// Takes stdin and stdout over (see the module comment). Call it once, before any thread that
/// could start a child process exists.
pub fn claim() -> io::Result<Streams> {
    let input = private_copy(libc::STDIN_FILENO)?;
    let output = private_copy(libc::STDOUT_FILENO)?;
    let null = File::open("/dev/null")?;
    redirect(null.as_raw_fd(), libc::STDIN_FILENO)?;
    if redirect(libc::STDERR_FILENO, libc::STDOUT_FILENO).is_err() {
        // No stderr to share: what others write to fd 1 is dropped.
        let null = OpenOptions::new().write(true).open("/dev/null")?;
        redirect(null.as_raw_fd(), libc::STDOUT_FILENO)?;
    }
    Ok(Streams { input, output })
}

/// A close-on-exec duplicate of `fd` above the standard three, so children never inherit it.
fn private_copy(fd: RawFd) -> io::Result<File> {
    // SAFETY: fcntl(F_DUPFD_CLOEXEC) takes no memory; on success the new descriptor is ours alone
    // and the File takes ownership of it.
    unsafe {
        let copy = libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 3);
        if copy < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(File::from_raw_fd(copy))
    }
}

/// Makes `target` refer to what `source` refers to (inheritable, as a standard stream must be).
fn redirect(source: RawFd, target: RawFd) -> io::Result<()> {
    // SAFETY: dup2 takes no memory; `target` is a standard descriptor no Rust object owns.
    if unsafe { libc::dup2(source, target) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Where diagnostics went before [`divert_diagnostics`]: put back by [`Diverted::restore`].
pub struct Diverted {
    stderr: File,
}

/// Points fd 1 and fd 2 at `log` (created, appended to) so that nothing but the interactive
/// screen writes to the terminal: tracing, warnings, panic messages and whatever a child or an
/// extension prints land in the log instead.
pub fn divert_diagnostics(log: &std::path::Path) -> io::Result<Diverted> {
    let file = OpenOptions::new().create(true).append(true).open(log)?;
    let stderr = private_copy(libc::STDERR_FILENO)?;
    redirect(file.as_raw_fd(), libc::STDERR_FILENO)?;
    redirect(file.as_raw_fd(), libc::STDOUT_FILENO)?;
    Ok(Diverted { stderr })
}

impl Diverted {
    /// Gives fd 2 (and fd 1, as [`claim`] left it) back to the original stderr.
    pub fn restore(self) {
        let _ = redirect(self.stderr.as_raw_fd(), libc::STDERR_FILENO);
        let _ = redirect(self.stderr.as_raw_fd(), libc::STDOUT_FILENO);
    }
}
