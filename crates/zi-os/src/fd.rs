//! File descriptors: pipes read without blocking (what `ctx.exec` needs to drain a command's
//! output while it watches for the command's exit and for cancellation), private copies of a
//! descriptor, and the standard streams pointed elsewhere (zi-cli's claim of stdin and stdout).

use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd};

/// One of the three standard streams of zi's own process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Standard {
    /// stdin (fd 0).
    Input,
    /// stdout (fd 1).
    Output,
    /// stderr (fd 2).
    Error,
}

impl Standard {
    fn fd(self) -> i32 {
        match self {
            Standard::Input => libc::STDIN_FILENO,
            Standard::Output => libc::STDOUT_FILENO,
            Standard::Error => libc::STDERR_FILENO,
        }
    }
}

/// A close-on-exec duplicate of `fd` numbered 3 or above, so no child inherits it and no
/// redirection of a standard stream replaces it.
pub fn private_copy(fd: BorrowedFd<'_>) -> io::Result<File> {
    // SAFETY: fcntl(F_DUPFD_CLOEXEC) takes no memory; on success the new descriptor is ours
    // alone and the File takes ownership of it.
    unsafe {
        let copy = libc::fcntl(fd.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 3);
        if copy < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(File::from_raw_fd(copy))
    }
}

/// Makes the standard stream `target` refer to what `source` refers to (inheritable, as a
/// standard stream must be).
pub fn redirect(source: BorrowedFd<'_>, target: Standard) -> io::Result<()> {
    // SAFETY: dup2 takes no memory; the target is a standard descriptor, which no Rust object
    // owns (std's handles only borrow it), so replacing it invalidates no owner.
    if unsafe { libc::dup2(source.as_raw_fd(), target.fd()) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Puts `fd` into non-blocking mode (reads return `WouldBlock` instead of waiting).
pub fn set_nonblocking(fd: BorrowedFd<'_>) {
    let fd = fd.as_raw_fd();
    // SAFETY: fcntl on a descriptor the caller keeps open for the call; no memory is passed.
    unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFL);
        libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK);
    }
}

/// Waits up to `timeout_ms` until one of `fds` is readable (or closed). Returns early on a
/// signal; the caller checks its conditions again either way.
pub fn wait_readable(fds: &[BorrowedFd<'_>], timeout_ms: i32) {
    let mut polls: Vec<libc::pollfd> = fds
        .iter()
        .map(|fd| libc::pollfd {
            fd: fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    let count = libc::nfds_t::try_from(polls.len()).unwrap_or(0);
    // SAFETY: `polls` is a live array of `count` pollfd entries for the duration of the call.
    unsafe {
        libc::poll(polls.as_mut_ptr(), count, timeout_ms);
    }
}
