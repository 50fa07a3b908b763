//! The notified task as the supervisor sees it, through `/proc/<tid>` opened once per
//! notification (an fd on the task itself, so a recycled id cannot swap it): its memory (the
//! strings and structs the call points to, read once), whether it may be acted for (same
//! credentials, user namespace and root as zi), and the object its call names, opened `O_PATH`.

use std::ffi::{CString, OsStr};
use std::fs::File;
use std::os::fd::{AsRawFd as _, FromRawFd as _, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt as _;
use std::os::unix::fs::FileExt as _;
use std::path::PathBuf;

use super::request::{Errno, Target};

/// `PATH_MAX`, the terminating NUL included.
const PATH_MAX: usize = 4096;

/// What the kernel returns for an errno-less failure of ours: never run a change unchecked.
fn errno() -> Errno {
    std::io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EPERM)
}

/// `openat` with `O_CLOEXEC`, as an owned fd.
pub(crate) fn open_at(dir: RawFd, path: &[u8], flags: i32) -> Result<OwnedFd, Errno> {
    let path = CString::new(path).map_err(|_| libc::EINVAL)?;
    // SAFETY: a NUL-terminated path; the returned fd is new and owned by nobody else.
    let fd = unsafe { libc::openat(dir, path.as_ptr(), flags | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(errno());
    }
    // SAFETY: `fd` was just opened.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `readlinkat` of `path` under `dir` (the raw bytes).
pub(crate) fn read_link_at(dir: RawFd, path: &[u8]) -> Result<Vec<u8>, Errno> {
    let path = CString::new(path).map_err(|_| libc::EINVAL)?;
    let mut buffer = vec![0u8; PATH_MAX + 64];
    // SAFETY: the buffer is writable for its length; the path is NUL-terminated.
    let n =
        unsafe { libc::readlinkat(dir, path.as_ptr(), buffer.as_mut_ptr().cast(), buffer.len()) };
    if n < 0 {
        return Err(errno());
    }
    buffer.truncate(n as usize);
    Ok(buffer)
}

fn read_at(dir: RawFd, path: &[u8]) -> Result<Vec<u8>, Errno> {
    let file = File::from(open_at(dir, path, libc::O_RDONLY)?);
    let mut out = Vec::new();
    std::io::Read::read_to_end(&mut &file, &mut out)
        .map_err(|e| e.raw_os_error().unwrap_or(libc::EIO))?;
    Ok(out)
}

/// What must match between zi and a task zi changes metadata for: the `Uid`, `Gid`, `Groups`
/// and `CapEff` lines of `status`, the user namespace and the root directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Identity {
    status: Vec<Vec<u8>>,
    user_ns: Vec<u8>,
    root: Vec<u8>,
}

impl Identity {
    fn of(proc_dir: RawFd) -> Result<Identity, Errno> {
        let status = read_at(proc_dir, b"status")?;
        let status = status
            .split(|b| *b == b'\n')
            .filter(|line| {
                [&b"Uid:"[..], b"Gid:", b"Groups:", b"CapEff:"]
                    .iter()
                    .any(|key| line.starts_with(key))
            })
            .map(<[u8]>::to_vec)
            .collect();
        Ok(Identity {
            status,
            user_ns: read_link_at(proc_dir, b"ns/user")?,
            root: read_link_at(proc_dir, b"root")?,
        })
    }

    /// The supervisor thread's own identity (zi's).
    pub(crate) fn current() -> Result<Identity, Errno> {
        let dir = open_at(
            libc::AT_FDCWD,
            b"/proc/thread-self",
            libc::O_PATH | libc::O_DIRECTORY,
        )?;
        Identity::of(dir.as_raw_fd())
    }
}

/// One notified task.
pub(crate) struct Task {
    tid: u32,
    dir: OwnedFd,
    mem: Option<File>,
}

impl Task {
    /// Opens `/proc/<tid>`; `valid` then confirms the id still names the notifying task.
    pub(crate) fn open(tid: u32, valid: impl Fn() -> bool) -> Result<Task, Errno> {
        let dir = open_at(
            libc::AT_FDCWD,
            format!("/proc/{tid}").as_bytes(),
            libc::O_PATH | libc::O_DIRECTORY,
        )?;
        if !valid() {
            return Err(libc::ENOENT);
        }
        Ok(Task {
            tid,
            dir,
            mem: None,
        })
    }

    /// Whether zi may act for this task: a task that changed its credentials, entered another
    /// user namespace or `chroot`ed would get zi's rights instead of its own.
    pub(crate) fn acts_as(&self, identity: &Identity) -> bool {
        Identity::of(self.dir.as_raw_fd()).is_ok_and(|own| own == *identity && own.root == b"/")
    }

    fn mem(&mut self) -> Result<&File, Errno> {
        if self.mem.is_none() {
            let fd = open_at(self.dir.as_raw_fd(), b"mem", libc::O_RDONLY)?;
            self.mem = Some(File::from(fd));
        }
        self.mem.as_ref().ok_or(libc::EFAULT)
    }

    /// `len` bytes at `address` in the task (`EFAULT` when not all are mapped).
    pub(crate) fn read(&mut self, address: u64, len: usize) -> Result<Vec<u8>, Errno> {
        let mut out = vec![0u8; len];
        if len == 0 {
            return Ok(out);
        }
        let mem = self.mem()?;
        mem.read_exact_at(&mut out, address)
            .map_err(|_| libc::EFAULT)?;
        Ok(out)
    }

    /// The NUL-terminated string at `address`, at most `max` bytes before the NUL (`Err(None)`
    /// when longer, for the caller's own errno).
    pub(crate) fn read_string(
        &mut self,
        address: u64,
        max: usize,
    ) -> Result<Vec<u8>, Option<Errno>> {
        if address == 0 {
            return Err(Some(libc::EFAULT));
        }
        const PAGE: u64 = 4096;
        let mut out = Vec::new();
        let mut at = address;
        loop {
            // Up to the page end: the next page may be unmapped although the string ends here.
            let chunk = (PAGE - at % PAGE) as usize;
            let bytes = self.read(at, chunk).map_err(Some)?;
            if let Some(end) = bytes.iter().position(|b| *b == 0) {
                out.extend_from_slice(&bytes[..end]);
                return if out.len() > max { Err(None) } else { Ok(out) };
            }
            out.extend_from_slice(&bytes);
            if out.len() > max {
                return Err(None);
            }
            at = at.checked_add(chunk as u64).ok_or(Some(libc::EFAULT))?;
        }
    }

    /// The directory `dirfd` names for the task (`AT_FDCWD`: its cwd), opened `O_PATH`.
    fn directory(&self, dirfd: i32) -> Result<OwnedFd, Errno> {
        if dirfd == libc::AT_FDCWD {
            return open_at(self.dir.as_raw_fd(), b"cwd", libc::O_PATH);
        }
        self.open_fd(dirfd)
    }

    /// The task's open file `fd`, opened again `O_PATH` through its `/proc` link.
    fn open_fd(&self, fd: i32) -> Result<OwnedFd, Errno> {
        if fd < 0 {
            return Err(libc::EBADF);
        }
        open_at(
            self.dir.as_raw_fd(),
            format!("fd/{fd}").as_bytes(),
            libc::O_PATH,
        )
        .map_err(|e| if e == libc::ENOENT { libc::EBADF } else { e })
    }

    /// Opens (`O_PATH`) the object `target` names for the task: the supervisor then checks and
    /// changes exactly this object, so a path or symlink swapped meanwhile changes nothing.
    pub(crate) fn resolve(&mut self, target: Target) -> Result<OwnedFd, Errno> {
        let (dirfd, address, follow, empty_path) = match target {
            Target::Fd(fd) => return self.open_fd(fd),
            Target::Path {
                dirfd,
                path,
                follow,
                empty_path,
            } => (dirfd, path, follow, empty_path),
        };
        let path = if address == 0 && empty_path {
            Vec::new()
        } else {
            self.read_string(address, PATH_MAX - 1)
                .map_err(|e| e.unwrap_or(libc::ENAMETOOLONG))?
        };
        if path.is_empty() {
            return if empty_path {
                self.directory(dirfd)
            } else {
                Err(libc::ENOENT)
            };
        }
        let path = self.own_proc_path(path);
        let flags = libc::O_PATH | if follow { 0 } else { libc::O_NOFOLLOW };
        if path.starts_with(b"/") {
            // Same root as zi (checked by `acts_as`): absolute paths resolve alike.
            return open_at(libc::AT_FDCWD, &path, flags);
        }
        let dir = self.directory(dirfd)?;
        open_at(dir.as_raw_fd(), &path, flags)
    }

    /// `/proc/self` and `/proc/thread-self` written out mean the task, not zi. (A symlink to
    /// them, such as `/dev/stdin`, still resolves in zi: only an object inside the roots can
    /// be changed that way, so this is about naming the right file, not about the boundary.)
    fn own_proc_path(&self, path: Vec<u8>) -> Vec<u8> {
        for prefix in [&b"/proc/thread-self"[..], b"/proc/self"] {
            if let Some(rest) = path.strip_prefix(prefix)
                && (rest.is_empty() || rest.starts_with(b"/"))
            {
                let mut own = format!("/proc/{}", self.tid).into_bytes();
                own.extend_from_slice(rest);
                return own;
            }
        }
        path
    }
}

/// The path an open object is reachable at now, if it is one: `/proc/self/fd/N` names it, and a
/// fresh `lstat` of that name finds the same inode (so a deleted, disconnected or pseudo file —
/// pipe, socket, memfd — never passes for a path inside the roots).
pub(crate) fn reachable_path(object: &OwnedFd) -> Option<PathBuf> {
    let link = read_link_at(
        libc::AT_FDCWD,
        format!("/proc/self/fd/{}", object.as_raw_fd()).as_bytes(),
    )
    .ok()?;
    if !link.starts_with(b"/") {
        return None;
    }
    let named = CString::new(link.clone()).ok()?;
    // SAFETY: zeroed `stat` buffers filled by the kernel; a NUL-terminated path.
    let same = unsafe {
        let mut opened: libc::stat = std::mem::zeroed();
        let mut found: libc::stat = std::mem::zeroed();
        libc::fstat(object.as_raw_fd(), &mut opened) == 0
            && libc::fstatat(
                libc::AT_FDCWD,
                named.as_ptr(),
                &mut found,
                libc::AT_SYMLINK_NOFOLLOW,
            ) == 0
            && opened.st_dev == found.st_dev
            && opened.st_ino == found.st_ino
    };
    same.then(|| PathBuf::from(OsStr::from_bytes(&link)))
}
