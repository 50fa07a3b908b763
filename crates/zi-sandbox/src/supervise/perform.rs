//! Reads what a call asks for from the task (once) and makes the change on the object the
//! supervisor opened and checked, with zi's credentials (the task's, as [`super::task::Task::acts_as`]
//! established). The kernel's own validation and errors apply: each change is the same system
//! call, made on `/proc/self/fd/N` or with `AT_EMPTY_PATH`.

use std::ffi::CString;
use std::os::fd::{AsRawFd as _, OwnedFd};

use super::request::{Change, Errno, Times};
use super::task::{Task, open_at};
use crate::filter::{FS_IOC_FSSETXATTR, SYS_FILE_SETATTR};

/// `XATTR_NAME_MAX` and `XATTR_SIZE_MAX`.
const XATTR_NAME_MAX: usize = 255;
const XATTR_SIZE_MAX: u64 = 65_536;
/// `struct xattr_args` (version 0) and `struct file_attr` (version 0) sizes.
const XATTR_ARGS_SIZE: u64 = 16;
const FILE_ATTR_SIZE: u64 = 24;
/// Extensible structs larger than a page are refused by the kernel.
const PAGE: u64 = 4096;

/// A change with everything it points to copied out of the task.
pub(crate) enum Owned {
    Mode(u32),
    Owner {
        uid: u32,
        gid: u32,
    },
    Times(Option<[libc::timespec; 2]>),
    SetXattr {
        name: CString,
        value: Vec<u8>,
        flags: i32,
    },
    RemoveXattr {
        name: CString,
    },
    Ioctl {
        cmd: u32,
        arg: Vec<u8>,
    },
    FileAttr(Vec<u8>),
}

fn last_errno() -> Errno {
    std::io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EPERM)
}

fn xattr_name(task: &mut Task, address: u64) -> Result<CString, Errno> {
    let name = task
        .read_string(address, XATTR_NAME_MAX)
        .map_err(|e| e.unwrap_or(libc::ERANGE))?;
    if name.is_empty() {
        return Err(libc::ERANGE);
    }
    CString::new(name).map_err(|_| libc::ERANGE)
}

fn xattr_value(task: &mut Task, address: u64, size: u64) -> Result<Vec<u8>, Errno> {
    if size > XATTR_SIZE_MAX {
        return Err(libc::E2BIG);
    }
    task.read(address, size as usize)
}

/// An extensible struct of `size` bytes (at least `min`): bytes past what zi knows must be zero,
/// as `copy_struct_from_user` requires.
fn extensible(task: &mut Task, address: u64, size: u64, min: u64) -> Result<Vec<u8>, Errno> {
    if size < min {
        return Err(libc::EINVAL);
    }
    if size > PAGE {
        return Err(libc::E2BIG);
    }
    task.read(address, size as usize)
}

fn timespecs(task: &mut Task, how: Times) -> Result<Option<[libc::timespec; 2]>, Errno> {
    let at = |sec: i64, nsec: i64| libc::timespec {
        tv_sec: sec,
        tv_nsec: nsec,
    };
    let words = |task: &mut Task, address: u64| -> Result<[i64; 4], Errno> {
        let bytes = task.read(address, 32)?;
        let mut words = [0i64; 4];
        for (word, chunk) in words.iter_mut().zip(bytes.chunks_exact(8)) {
            let mut raw = [0u8; 8];
            raw.copy_from_slice(chunk);
            *word = i64::from_ne_bytes(raw);
        }
        Ok(words)
    };
    Ok(Some(match how {
        Times::Now => return Ok(None),
        Times::Utimbuf(address) => {
            let w = words(task, address)?;
            // `struct utimbuf` is two `time_t`: only the first two words.
            [at(w[0], 0), at(w[1], 0)]
        }
        Times::Timevals(address) => {
            let w = words(task, address)?;
            if [w[1], w[3]]
                .iter()
                .any(|usec| !(0..1_000_000).contains(usec))
            {
                return Err(libc::EINVAL);
            }
            [at(w[0], w[1] * 1000), at(w[2], w[3] * 1000)]
        }
        Times::Timespecs(address) => {
            let w = words(task, address)?;
            [at(w[0], w[1]), at(w[2], w[3])]
        }
    }))
}

/// Copies what `change` points to out of the task.
pub(crate) fn read_change(task: &mut Task, change: Change) -> Result<Owned, Errno> {
    Ok(match change {
        Change::Mode(mode) => Owned::Mode(mode),
        Change::Owner { uid, gid } => Owned::Owner { uid, gid },
        Change::Times(how) => Owned::Times(timespecs(task, how)?),
        Change::SetXattr {
            name,
            value,
            size,
            flags,
        } => Owned::SetXattr {
            name: xattr_name(task, name)?,
            value: xattr_value(task, value, size)?,
            flags: flags as i32,
        },
        Change::SetXattrArgs { name, args, size } => {
            let args = extensible(task, args, size, XATTR_ARGS_SIZE)?;
            if args[16..].iter().any(|b| *b != 0) {
                return Err(libc::E2BIG);
            }
            let word = |range: std::ops::Range<usize>| {
                args[range]
                    .iter()
                    .rev()
                    .fold(0u64, |acc, b| (acc << 8) | u64::from(*b))
            };
            let (value, value_size, flags) = (word(0..8), word(8..12), word(12..16) as u32);
            if flags & !((libc::XATTR_CREATE | libc::XATTR_REPLACE) as u32) != 0 {
                return Err(libc::EINVAL);
            }
            Owned::SetXattr {
                name: xattr_name(task, name)?,
                value: xattr_value(task, value, value_size)?,
                flags: flags as i32,
            }
        }
        Change::RemoveXattr { name } => Owned::RemoveXattr {
            name: xattr_name(task, name)?,
        },
        Change::Ioctl { cmd, arg } => {
            // The flag and version ioctls read an `int`; FSSETXATTR a 28-byte `struct fsxattr`.
            let len = if cmd == FS_IOC_FSSETXATTR { 28 } else { 4 };
            Owned::Ioctl {
                cmd,
                arg: task.read(arg, len)?,
            }
        }
        Change::FileAttr { attr, size } => {
            Owned::FileAttr(extensible(task, attr, size, FILE_ATTR_SIZE)?)
        }
    })
}

/// A system call's result (`c_long` is `i64` on every architecture zi confines).
fn result(code: i64) -> Result<i64, Errno> {
    if code < 0 {
        Err(last_errno())
    } else {
        Ok(code)
    }
}

/// Makes `change` on `object` (opened `O_PATH`); the call's return value or its errno.
pub(crate) fn apply(object: &OwnedFd, change: &Owned) -> Result<i64, Errno> {
    let fd = object.as_raw_fd();
    let proc_path = CString::new(format!("/proc/self/fd/{fd}")).map_err(|_| libc::EINVAL)?;
    let empty = c"";
    // SAFETY: each call gets NUL-terminated paths and buffers that live across the call; `fd`
    // is owned by `object`.
    let code = unsafe {
        match change {
            // chmod on a symlink itself fails with EOPNOTSUPP, as the kernel's own fchmodat2.
            Owned::Mode(mode) => libc::c_long::from(libc::chmod(proc_path.as_ptr(), *mode)),
            Owned::Owner { uid, gid } => libc::c_long::from(libc::fchownat(
                fd,
                empty.as_ptr(),
                *uid,
                *gid,
                libc::AT_EMPTY_PATH,
            )),
            Owned::Times(times) => libc::c_long::from(libc::utimensat(
                fd,
                empty.as_ptr(),
                times.as_ref().map_or(std::ptr::null(), |t| t.as_ptr()),
                libc::AT_EMPTY_PATH,
            )),
            // `/proc/self/fd/N` of an `O_PATH | O_NOFOLLOW` fd is the symlink itself.
            Owned::SetXattr { name, value, flags } => libc::c_long::from(libc::setxattr(
                proc_path.as_ptr(),
                name.as_ptr(),
                value.as_ptr().cast(),
                value.len(),
                *flags,
            )),
            Owned::RemoveXattr { name } => {
                libc::c_long::from(libc::removexattr(proc_path.as_ptr(), name.as_ptr()))
            }
            // file_setattr takes no O_PATH fd with AT_EMPTY_PATH (EBADF): the /proc name.
            Owned::FileAttr(attr) => libc::syscall(
                SYS_FILE_SETATTR,
                libc::AT_FDCWD,
                proc_path.as_ptr(),
                attr.as_ptr(),
                attr.len(),
                0u32,
            ),
            Owned::Ioctl { cmd, arg } => return ioctl(object, *cmd, arg),
        }
    };
    result(code)
}

/// The `chattr` ioctls need a file opened for real: regular files and directories are opened
/// again read-only through the checked object (never a device, FIFO or socket).
fn ioctl(object: &OwnedFd, cmd: u32, arg: &[u8]) -> Result<i64, Errno> {
    // SAFETY: a zeroed `stat` filled by the kernel.
    let mode = unsafe {
        let mut stat: libc::stat = std::mem::zeroed();
        if libc::fstat(object.as_raw_fd(), &mut stat) != 0 {
            return Err(last_errno());
        }
        stat.st_mode & libc::S_IFMT
    };
    if mode != libc::S_IFREG && mode != libc::S_IFDIR {
        return Err(libc::ENOTTY);
    }
    let file = open_at(
        libc::AT_FDCWD,
        format!("/proc/self/fd/{}", object.as_raw_fd()).as_bytes(),
        libc::O_RDONLY | libc::O_NONBLOCK | libc::O_NOCTTY,
    )?;
    let mut arg = arg.to_vec();
    // SAFETY: `arg` holds the argument the command reads, copied from the task.
    let code = unsafe { libc::ioctl(file.as_raw_fd(), cmd as _, arg.as_mut_ptr()) };
    result(i64::from(code))
}
