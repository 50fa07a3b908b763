//! What a notified metadata call asks for, decoded from its number and registers alone (the
//! pointers are read from the caller later, once, by [`super::task`]). Flag checks follow the
//! kernel's, so a call zi would refuse anyway gets the kernel's own error.

use crate::filter::{METADATA_IOCTLS, SYS_FILE_SETATTR};

/// An `errno` value.
pub(crate) type Errno = i32;

/// The object a call changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Target {
    /// `path` (an address in the caller) relative to `dirfd` (`AT_FDCWD`: the caller's cwd);
    /// `follow` a trailing symlink; `empty_path`: an empty path names `dirfd` itself.
    Path {
        dirfd: i32,
        path: u64,
        follow: bool,
        empty_path: bool,
    },
    /// The caller's open file `fd`.
    Fd(i32),
}

/// How a time argument is given (addresses in the caller).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Times {
    /// A null pointer: both times become now.
    Now,
    /// `struct utimbuf` (`utime`).
    Utimbuf(u64),
    /// `struct timeval[2]` (`utimes`, `futimesat`).
    Timevals(u64),
    /// `struct timespec[2]` (`utimensat`).
    Timespecs(u64),
}

/// The change (addresses in the caller).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Change {
    Mode(u32),
    Owner {
        uid: u32,
        gid: u32,
    },
    Times(Times),
    SetXattr {
        name: u64,
        value: u64,
        size: u64,
        flags: u32,
    },
    /// `setxattrat`: value, size and flags in a `struct xattr_args` of `size` bytes.
    SetXattrArgs {
        name: u64,
        args: u64,
        size: u64,
    },
    RemoveXattr {
        name: u64,
    },
    /// One of the `chattr` ioctls with its argument's address.
    Ioctl {
        cmd: u32,
        arg: u64,
    },
    /// `file_setattr`: a `struct file_attr` of `size` bytes.
    FileAttr {
        attr: u64,
        size: u64,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Request {
    pub target: Target,
    pub change: Change,
}

/// File descriptors are `int`s: the low 32 bits of the register.
fn fd(arg: u64) -> i32 {
    arg as u32 as i32
}

fn path(dirfd: i32, path: u64, follow: bool) -> Target {
    Target::Path {
        dirfd,
        path,
        follow,
        empty_path: false,
    }
}

/// An `*at` call's `AT_SYMLINK_NOFOLLOW` / `AT_EMPTY_PATH` flags (anything else is `EINVAL`).
fn at_path(dirfd: u64, address: u64, flags: u64) -> Result<Target, Errno> {
    let flags = flags as u32 as i32;
    if flags & !(libc::AT_SYMLINK_NOFOLLOW | libc::AT_EMPTY_PATH) != 0 {
        return Err(libc::EINVAL);
    }
    Ok(Target::Path {
        dirfd: fd(dirfd),
        path: address,
        follow: flags & libc::AT_SYMLINK_NOFOLLOW == 0,
        empty_path: flags & libc::AT_EMPTY_PATH != 0,
    })
}

/// `utimensat` and `futimesat`: a null path with a real `dirfd` changes that open file.
fn times_target(dirfd: u64, address: u64, flags: u64) -> Result<Target, Errno> {
    if address == 0 && fd(dirfd) != libc::AT_FDCWD {
        return if flags == 0 {
            Ok(Target::Fd(fd(dirfd)))
        } else {
            Err(libc::EINVAL)
        };
    }
    at_path(dirfd, address, flags)
}

fn times(address: u64, given: fn(u64) -> Times) -> Times {
    if address == 0 {
        Times::Now
    } else {
        given(address)
    }
}

/// Decodes a notified call; `Err` with the kernel's errno for malformed flags, `ENOSYS` for a
/// call the filter should not have sent.
pub(crate) fn decode(nr: i64, a: [u64; 6]) -> Result<Request, Errno> {
    let (target, change) = match nr {
        #[cfg(target_arch = "x86_64")]
        libc::SYS_chmod => (path(libc::AT_FDCWD, a[0], true), Change::Mode(a[1] as u32)),
        libc::SYS_fchmod => (Target::Fd(fd(a[0])), Change::Mode(a[1] as u32)),
        libc::SYS_fchmodat => (path(fd(a[0]), a[1], true), Change::Mode(a[2] as u32)),
        // fchmodat2
        452 => (at_path(a[0], a[1], a[3])?, Change::Mode(a[2] as u32)),
        #[cfg(target_arch = "x86_64")]
        libc::SYS_chown | libc::SYS_lchown => (
            path(libc::AT_FDCWD, a[0], nr == libc::SYS_chown),
            owner(a[1], a[2]),
        ),
        libc::SYS_fchown => (Target::Fd(fd(a[0])), owner(a[1], a[2])),
        libc::SYS_fchownat => (at_path(a[0], a[1], a[4])?, owner(a[2], a[3])),
        #[cfg(target_arch = "x86_64")]
        libc::SYS_utime => (
            path(libc::AT_FDCWD, a[0], true),
            Change::Times(times(a[1], Times::Utimbuf)),
        ),
        #[cfg(target_arch = "x86_64")]
        libc::SYS_utimes => (
            path(libc::AT_FDCWD, a[0], true),
            Change::Times(times(a[1], Times::Timevals)),
        ),
        #[cfg(target_arch = "x86_64")]
        libc::SYS_futimesat => (
            times_target(a[0], a[1], 0)?,
            Change::Times(times(a[2], Times::Timevals)),
        ),
        libc::SYS_utimensat => (
            times_target(a[0], a[1], a[3])?,
            Change::Times(times(a[2], Times::Timespecs)),
        ),
        libc::SYS_setxattr | libc::SYS_lsetxattr => (
            path(libc::AT_FDCWD, a[0], nr == libc::SYS_setxattr),
            set_xattr(a[1], a[2], a[3], a[4])?,
        ),
        libc::SYS_fsetxattr => (Target::Fd(fd(a[0])), set_xattr(a[1], a[2], a[3], a[4])?),
        // setxattrat
        463 => (
            at_path(a[0], a[1], a[2])?,
            Change::SetXattrArgs {
                name: a[3],
                args: a[4],
                size: a[5],
            },
        ),
        libc::SYS_removexattr | libc::SYS_lremovexattr => (
            path(libc::AT_FDCWD, a[0], nr == libc::SYS_removexattr),
            Change::RemoveXattr { name: a[1] },
        ),
        libc::SYS_fremovexattr => (Target::Fd(fd(a[0])), Change::RemoveXattr { name: a[1] }),
        // removexattrat
        466 => (
            at_path(a[0], a[1], a[2])?,
            Change::RemoveXattr { name: a[3] },
        ),
        SYS_FILE_SETATTR => (
            at_path(a[0], a[1], a[4])?,
            Change::FileAttr {
                attr: a[2],
                size: a[3],
            },
        ),
        libc::SYS_ioctl if METADATA_IOCTLS.contains(&(a[1] as u32)) => (
            Target::Fd(fd(a[0])),
            Change::Ioctl {
                cmd: a[1] as u32,
                arg: a[2],
            },
        ),
        _ => return Err(libc::ENOSYS),
    };
    Ok(Request { target, change })
}

fn owner(uid: u64, gid: u64) -> Change {
    Change::Owner {
        uid: uid as u32,
        gid: gid as u32,
    }
}

fn set_xattr(name: u64, value: u64, size: u64, flags: u64) -> Result<Change, Errno> {
    let flags = flags as u32;
    if flags & !((libc::XATTR_CREATE | libc::XATTR_REPLACE) as u32) != 0 {
        return Err(libc::EINVAL);
    }
    Ok(Change::SetXattr {
        name,
        value,
        size,
        flags,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const CWD: u64 = libc::AT_FDCWD as u32 as u64;
    const NOFOLLOW: u64 = libc::AT_SYMLINK_NOFOLLOW as u64;
    const EMPTY: u64 = libc::AT_EMPTY_PATH as u64;

    #[test]
    fn path_calls_name_their_directory_and_symlink_handling() {
        let request = decode(libc::SYS_fchownat, [5, 0x1000, 7, 8, NOFOLLOW, 0]).unwrap();
        assert_eq!(
            request,
            Request {
                target: Target::Path {
                    dirfd: 5,
                    path: 0x1000,
                    follow: false,
                    empty_path: false
                },
                change: Change::Owner { uid: 7, gid: 8 },
            }
        );
        let request = decode(452, [CWD, 0x2000, 0o644, EMPTY, 0, 0]).unwrap();
        assert_eq!(
            request.target,
            Target::Path {
                dirfd: libc::AT_FDCWD,
                path: 0x2000,
                follow: true,
                empty_path: true
            }
        );
        assert_eq!(request.change, Change::Mode(0o644));
        assert_eq!(
            decode(libc::SYS_fchownat, [CWD, 0x1000, 0, 0, 0x8000, 0]),
            Err(libc::EINVAL)
        );
        let request = decode(libc::SYS_lsetxattr, [0x1000, 0x2000, 0x3000, 4, 1, 0]).unwrap();
        assert_eq!(
            request.target,
            Target::Path {
                dirfd: libc::AT_FDCWD,
                path: 0x1000,
                follow: false,
                empty_path: false
            }
        );
        assert_eq!(
            decode(libc::SYS_setxattr, [0x1000, 0x2000, 0x3000, 4, 8, 0]),
            Err(libc::EINVAL)
        );
    }

    #[test]
    fn fd_calls_and_null_time_paths_name_the_open_file() {
        let fchmod = decode(libc::SYS_fchmod, [0xffff_ffff_0000_0003, 0o600, 0, 0, 0, 0]);
        assert_eq!(fchmod.unwrap().target, Target::Fd(3));
        // futimens(fd, NULL) is utimensat(fd, NULL, NULL, 0).
        let futimens = decode(libc::SYS_utimensat, [4, 0, 0, 0, 0, 0]).unwrap();
        assert_eq!(futimens.target, Target::Fd(4));
        assert_eq!(futimens.change, Change::Times(Times::Now));
        assert_eq!(
            decode(libc::SYS_utimensat, [4, 0, 0x10, NOFOLLOW, 0, 0]),
            Err(libc::EINVAL)
        );
        let setflags = crate::filter::FS_IOC_SETFLAGS as u64;
        let ioctl = decode(libc::SYS_ioctl, [6, setflags, 0x5000, 0, 0, 0]).unwrap();
        assert_eq!(ioctl.target, Target::Fd(6));
        assert_eq!(
            decode(
                libc::SYS_ioctl,
                [6, u64::from(libc::TCGETS as u32), 0, 0, 0, 0]
            ),
            Err(libc::ENOSYS)
        );
        assert_eq!(decode(libc::SYS_openat, [0; 6]), Err(libc::ENOSYS));
    }
}
