//! The supervisor thread: one per zi process, started by the first `workspace-write` spawn
//! (never before `ready`), waiting on an epoll set of
//!
//! - one socket per [`Confinement`](crate::Confinement): its forked child sends the seccomp
//!   listener fd over it (`SCM_RIGHTS`) before exec; the socket goes when the confinement and
//!   every forked copy of its other end are gone;
//! - the listeners: each notification is answered by [`super::respond`]; a listener goes when
//!   every task under its filter has exited (`EPOLLHUP`).

use std::collections::HashMap;
use std::os::fd::{AsRawFd as _, FromRawFd as _, OwnedFd, RawFd};
use std::sync::{Arc, Mutex, OnceLock};

use super::Policy;
use super::fdpass::{Received, receive_fd};
use super::task::Identity;
use crate::error::SuperviseError;

enum Kind {
    Socket,
    Listener,
}

struct Entry {
    fd: OwnedFd,
    kind: Kind,
    policy: Arc<Policy>,
}

struct Server {
    epoll: OwnedFd,
    entries: Mutex<(u64, HashMap<u64, Entry>)>,
}

impl Server {
    /// Adds `fd` to the epoll set (the key is a counter, so a reused fd number is never
    /// mistaken for the one it replaced).
    fn add(&self, fd: OwnedFd, kind: Kind, policy: Arc<Policy>) -> Result<(), SuperviseError> {
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        entries.0 += 1;
        let key = entries.0;
        let mut event = libc::epoll_event {
            events: libc::EPOLLIN as u32,
            u64: key,
        };
        // SAFETY: both fds are open; the event is read during the call only.
        if unsafe {
            libc::epoll_ctl(
                self.epoll.as_raw_fd(),
                libc::EPOLL_CTL_ADD,
                fd.as_raw_fd(),
                &mut event,
            )
        } != 0
        {
            return Err(SuperviseError::last_os("epoll_ctl"));
        }
        entries.1.insert(key, Entry { fd, kind, policy });
        Ok(())
    }

    fn remove(&self, key: u64) {
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(entry) = entries.1.remove(&key) {
            // SAFETY: the fd is still open (closed when `entry` drops below).
            unsafe {
                libc::epoll_ctl(
                    self.epoll.as_raw_fd(),
                    libc::EPOLL_CTL_DEL,
                    entry.fd.as_raw_fd(),
                    std::ptr::null_mut(),
                );
            }
        }
    }

    /// The raw fd, kind and policy of `key`, if it is still registered.
    fn lookup(&self, key: u64) -> Option<(RawFd, bool, Arc<Policy>)> {
        let entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        entries.1.get(&key).map(|entry| {
            (
                entry.fd.as_raw_fd(),
                matches!(entry.kind, Kind::Socket),
                entry.policy.clone(),
            )
        })
    }

    fn run(&self, identity: Identity) {
        let mut events = [libc::epoll_event { events: 0, u64: 0 }; 32];
        loop {
            // SAFETY: the buffer holds `events.len()` entries.
            let n = unsafe {
                libc::epoll_wait(
                    self.epoll.as_raw_fd(),
                    events.as_mut_ptr(),
                    events.len() as i32,
                    -1,
                )
            };
            if n < 0 {
                // EINTR; nothing else can fail on a valid epoll fd and buffer.
                continue;
            }
            for event in &events[..n as usize] {
                let (key, flags) = (event.u64, event.events);
                let Some((fd, socket, policy)) = self.lookup(key) else {
                    continue;
                };
                let readable = flags & libc::EPOLLIN as u32 != 0;
                if socket {
                    if !self.receive_listeners(fd, &policy) {
                        self.remove(key);
                    }
                } else if readable {
                    answer(fd, &policy, &identity);
                } else {
                    self.remove(key);
                }
            }
        }
    }

    /// Registers every listener waiting on `socket`; false once its other end is gone.
    fn receive_listeners(&self, socket: RawFd, policy: &Arc<Policy>) -> bool {
        loop {
            match receive_fd(socket) {
                Received::Fd(listener) => {
                    if self.add(listener, Kind::Listener, policy.clone()).is_err() {
                        // Dropping the listener makes the task's calls fail (ENOSYS), never pass.
                        continue;
                    }
                }
                Received::Nothing => return true,
                Received::Closed => return false,
            }
        }
    }
}

/// Receives one notification from `listener` and answers it.
fn answer(listener: RawFd, policy: &Policy, identity: &Identity) {
    // SAFETY: the kernel requires a zeroed struct and fills it.
    let mut notif: libc::seccomp_notif = unsafe { std::mem::zeroed() };
    // SAFETY: `notif` is the struct the ioctl number is sized for.
    if unsafe { libc::ioctl(listener, libc::SECCOMP_IOCTL_NOTIF_RECV as _, &mut notif) } != 0 {
        // ENOENT: the task died or was interrupted before this thread got to it.
        return;
    }
    let id = notif.id;
    let valid = || {
        let mut id = id;
        // SAFETY: reads the u64 id during the call.
        unsafe { libc::ioctl(listener, libc::SECCOMP_IOCTL_NOTIF_ID_VALID as _, &mut id) == 0 }
    };
    // A panic must not leave the task waiting for ever: it is refused instead.
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        super::respond(&notif, policy, identity, valid)
    }))
    .unwrap_or(Err(libc::EPERM));
    let (val, error) = match outcome {
        Ok(val) => (val, 0),
        Err(errno) => (0, -errno),
    };
    let mut response = libc::seccomp_notif_resp {
        id,
        val,
        error,
        flags: 0,
    };
    // SAFETY: the response struct of the ioctl; ENOENT (the task is gone) needs no handling.
    unsafe {
        libc::ioctl(listener, libc::SECCOMP_IOCTL_NOTIF_SEND as _, &mut response);
    }
}

/// The process's supervisor, started on first use.
fn server() -> Result<&'static Server, SuperviseError> {
    static SERVER: OnceLock<Result<&'static Server, SuperviseError>> = OnceLock::new();
    SERVER.get_or_init(start).clone()
}

fn start() -> Result<&'static Server, SuperviseError> {
    let identity = Identity::current().map_err(|errno| {
        SuperviseError::Identity(Arc::new(std::io::Error::from_raw_os_error(errno)))
    })?;
    // SAFETY: creates a new fd owned below.
    let epoll = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
    if epoll < 0 {
        return Err(SuperviseError::last_os("epoll_create1"));
    }
    let server: &'static Server = Box::leak(Box::new(Server {
        // SAFETY: `epoll` was just created.
        epoll: unsafe { OwnedFd::from_raw_fd(epoll) },
        entries: Mutex::new((0, HashMap::new())),
    }));
    std::thread::Builder::new()
        .name("zi-sandbox-supervisor".into())
        // Paths and values live on the heap; a small stack keeps an idle zi small.
        .stack_size(256 * 1024)
        .spawn(move || server.run(identity))
        .map_err(|e| SuperviseError::Thread(Arc::new(e)))?;
    Ok(server)
}

/// A socket to the supervisor for one confinement, whose changes are limited to `policy`: the
/// returned end goes to the forked child, which sends its listener over it.
pub(crate) fn connect(policy: Policy) -> Result<OwnedFd, SuperviseError> {
    let server = server()?;
    let mut fds = [0; 2];
    // SAFETY: socketpair fills the array with two new fds on success.
    if unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC,
            0,
            fds.as_mut_ptr(),
        )
    } != 0
    {
        return Err(SuperviseError::last_os("socketpair"));
    }
    // SAFETY: both fds were just created and are owned by nobody else.
    let (ours, theirs) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    server.add(ours, Kind::Socket, Arc::new(policy))?;
    Ok(theirs)
}
