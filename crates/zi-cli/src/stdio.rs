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
use std::os::fd::AsFd;

use zi_os::fd::{Standard, private_copy, redirect};

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
    let input = private_copy(io::stdin().as_fd())?;
    let output = private_copy(io::stdout().as_fd())?;
    let null = File::open("/dev/null")?;
    redirect(null.as_fd(), Standard::Input)?;
    if redirect(io::stderr().as_fd(), Standard::Output).is_err() {
        // No stderr to share: what others write to fd 1 is dropped.
        let null = OpenOptions::new().write(true).open("/dev/null")?;
        redirect(null.as_fd(), Standard::Output)?;
    }
    Ok(Streams { input, output })
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
    let stderr = private_copy(io::stderr().as_fd())?;
    redirect(file.as_fd(), Standard::Error)?;
    redirect(file.as_fd(), Standard::Output)?;
    Ok(Diverted { stderr })
}

impl Diverted {
    /// Gives fd 2 (and fd 1, as [`claim`] left it) back to the original stderr.
    pub fn restore(self) {
        let _ = redirect(self.stderr.as_fd(), Standard::Error);
        let _ = redirect(self.stderr.as_fd(), Standard::Output);
    }
}
