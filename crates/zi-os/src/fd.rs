//! Pipes read without blocking: what `ctx.exec` needs to drain a command's output while it
//! watches for the command's exit and for cancellation.

use std::os::fd::{AsRawFd, BorrowedFd};

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
