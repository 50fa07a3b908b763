//! Passing the seccomp listener fd from the forked child to zi: one `SCM_RIGHTS` message with a
//! one-byte body over the confinement's socket. The sending side runs in `pre_exec`, so both
//! sides use the stack only (no allocation, no locks).

use std::os::fd::{FromRawFd as _, OwnedFd, RawFd};

/// The byte sent with the fd and room for one control message holding one fd (`CMSG_SPACE(4)`
/// is 24 bytes), 8-byte aligned.
struct Buffers {
    byte: u8,
    control: [u64; 8],
}

/// A message over `buffers` with `control_len` bytes of control data. The pointers stay valid
/// while `buffers` and `iov` do.
fn message(buffers: &mut Buffers, iov: &mut libc::iovec, control_len: usize) -> libc::msghdr {
    iov.iov_base = (&mut buffers.byte as *mut u8).cast();
    iov.iov_len = 1;
    // SAFETY: an all-zero msghdr is valid; the fields set below point at live values.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = iov;
    msg.msg_iovlen = 1;
    msg.msg_control = buffers.control.as_mut_ptr().cast();
    msg.msg_controllen = control_len as _;
    msg
}

fn empty_iov() -> libc::iovec {
    libc::iovec {
        iov_base: std::ptr::null_mut(),
        iov_len: 0,
    }
}

/// Sends `fd` over `socket`; whether it went.
pub(crate) fn send_fd(socket: RawFd, fd: RawFd) -> bool {
    let mut buffers = Buffers {
        byte: 0,
        control: [0; 8],
    };
    let mut iov = empty_iov();
    // SAFETY: CMSG_SPACE/CMSG_LEN are arithmetic; CMSG_FIRSTHDR and CMSG_DATA stay within
    // `control`, which `message` sized to one header and one fd.
    unsafe {
        let msg = message(&mut buffers, &mut iov, libc::CMSG_SPACE(4) as usize);
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        (*cmsg).cmsg_level = libc::SOL_SOCKET;
        (*cmsg).cmsg_type = libc::SCM_RIGHTS;
        (*cmsg).cmsg_len = libc::CMSG_LEN(4) as _;
        std::ptr::write_unaligned(libc::CMSG_DATA(cmsg).cast::<RawFd>(), fd);
        libc::sendmsg(socket, &msg, libc::MSG_NOSIGNAL) == 1
    }
}

pub(crate) enum Received {
    Fd(OwnedFd),
    Nothing,
    Closed,
}

/// One message from `socket`, without waiting (the fd arrives close-on-exec).
pub(crate) fn receive_fd(socket: RawFd) -> Received {
    let mut buffers = Buffers {
        byte: 0,
        control: [0; 8],
    };
    let mut iov = empty_iov();
    let mut msg = message(&mut buffers, &mut iov, std::mem::size_of::<[u64; 8]>());
    // SAFETY: `msg` points at live buffers; CMSG_* walk the control data the kernel filled,
    // within `msg_controllen`.
    unsafe {
        let n = libc::recvmsg(
            socket,
            &mut msg,
            libc::MSG_DONTWAIT | libc::MSG_CMSG_CLOEXEC,
        );
        if n == 0 {
            return Received::Closed;
        }
        if n < 0 {
            let error = std::io::Error::last_os_error().raw_os_error();
            return if matches!(error, Some(libc::EAGAIN) | Some(libc::EINTR)) {
                Received::Nothing
            } else {
                Received::Closed
            };
        }
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        if cmsg.is_null()
            || (*cmsg).cmsg_level != libc::SOL_SOCKET
            || (*cmsg).cmsg_type != libc::SCM_RIGHTS
        {
            return Received::Nothing;
        }
        let fd = std::ptr::read_unaligned(libc::CMSG_DATA(cmsg).cast::<RawFd>());
        Received::Fd(OwnedFd::from_raw_fd(fd))
    }
}
