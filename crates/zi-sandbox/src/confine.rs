//! Per-spawn confinement (docs/approvals.md#what-a-confined-command-gets). The parent builds
//! everything: the Landlock ruleset (an fd, with its rules added), the seccomp BPF program and,
//! in `workspace-write`, a socket to the metadata supervisor. The forked child then only makes
//! raw, async-signal-safe system calls in `pre_exec`: `prctl(PR_SET_NO_NEW_PRIVS)`,
//! `landlock_restrict_self`, `seccomp(SET_MODE_FILTER)` and, with a supervisor, `sendmsg` of the
//! new listener fd. If one fails the child writes the step to a report pipe and fails the spawn,
//! so the command never runs unconfined.

use std::os::fd::{AsRawFd as _, FromRawFd as _, OwnedFd};
use std::path::PathBuf;
use std::sync::OnceLock;

use landlock::{
    ABI, Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible as _, PathBeneath, PathFd,
    Ruleset, RulesetAttr as _, RulesetCreatedAttr as _, Scope, path_beneath_rules,
};
use libc::sock_filter;

use crate::error::{ConfineError, FilterError};
use crate::filter::{Metadata, program};
use crate::supervise::fdpass::send_fd;
use crate::supervise::{Policy, connect};

/// Rights handled up to ABI 5 (later file-system rights are not needed).
const MAX_FS_ABI: u32 = 5;

/// What one confined spawn applies in its child.
#[derive(Debug)]
pub struct Confinement {
    ruleset: OwnedFd,
    /// The filter to install: metadata calls supervised (with `supervisor`) or refused.
    filter: &'static [sock_filter],
    /// The refusing filter, for a child that already has a listener (`EBUSY`: zi runs inside
    /// another supervised sandbox, and the kernel allows one listener per filter chain).
    fallback: &'static [sock_filter],
    /// `workspace-write`: the child's end of the socket to the metadata supervisor.
    supervisor: Option<OwnedFd>,
    report_read: OwnedFd,
    report_write: OwnedFd,
}

const STEP_NO_NEW_PRIVS: u8 = 1;
const STEP_LANDLOCK: u8 = 2;
const STEP_SECCOMP: u8 = 3;
const STEP_SUPERVISOR: u8 = 4;

impl Confinement {
    /// Builds the ruleset for `roots` (written freely) under Landlock `abi`, the network
    /// restrictions unless `network`, and the metadata rule: changes supervised below `roots`,
    /// or refused everywhere when there are none (`read-only`).
    pub(crate) fn build(abi: u32, roots: &[PathBuf], network: bool) -> Result<Self, ConfineError> {
        let fs_abi = ABI::from(abi.min(MAX_FS_ABI) as i32);
        let all_fs = AccessFs::from_all(fs_abi);
        let mut ruleset = Ruleset::default()
            .set_compatibility(CompatLevel::HardRequirement)
            .handle_access(all_fs)?;
        if !network && abi >= 4 {
            ruleset = ruleset.handle_access(AccessNet::BindTcp | AccessNet::ConnectTcp)?;
        }
        if abi >= 6 {
            ruleset = ruleset.scope(Scope::Signal | Scope::AbstractUnixSocket)?;
        }
        let read: BitFlags<AccessFs> = AccessFs::Execute | AccessFs::ReadFile | AccessFs::ReadDir;
        // The roots get every right but creating device nodes: a command running as root
        // could otherwise `mknod /tmp/disk b 8 0` and write the raw disk below a root. FIFOs
        // and sockets stay (`mkfifo` is common in scripts); docs/approvals.md.
        let writable = all_fs & !(AccessFs::MakeChar | AccessFs::MakeBlock);
        let dev_null = PathFd::new("/dev/null")?;
        let created = ruleset
            .create()?
            .add_rules(path_beneath_rules(["/"], read))?
            .add_rules(path_beneath_rules(roots, writable))?
            .add_rule(PathBeneath::new(
                dev_null,
                AccessFs::ReadFile | AccessFs::WriteFile | AccessFs::Truncate,
            ))?;
        let ruleset: Option<OwnedFd> = created.into();
        let ruleset = ruleset.ok_or(ConfineError::NoRuleset)?;
        let fallback = filter(network, Metadata::Deny)?;
        let (filter, supervisor) = if roots.is_empty() {
            (fallback, None)
        } else {
            let policy = Policy {
                roots: roots.to_vec(),
            };
            (
                filter(network, Metadata::Supervise)?,
                Some(connect(policy)?),
            )
        };
        let (report_read, report_write) = report_pipe()?;
        Ok(Confinement {
            ruleset,
            filter,
            fallback,
            supervisor,
            report_read,
            report_write,
        })
    }

    /// Applies the confinement to the calling (forked, single-threaded) child. Only raw system
    /// calls: no allocation, no locks.
    pub fn apply_in_child(&self) -> std::io::Result<()> {
        // SAFETY: plain system calls on values owned by `self`.
        unsafe {
            if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
                return Err(self.fail(STEP_NO_NEW_PRIVS));
            }
            if libc::syscall(
                libc::SYS_landlock_restrict_self,
                self.ruleset.as_raw_fd(),
                0u32,
            ) != 0
            {
                return Err(self.fail(STEP_LANDLOCK));
            }
        }
        let Some(supervisor) = &self.supervisor else {
            return install(self.filter, 0)
                .map(drop)
                .map_err(|_| self.fail(STEP_SECCOMP));
        };
        let flags =
            libc::SECCOMP_FILTER_FLAG_NEW_LISTENER | libc::SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV;
        let listener = match install(self.filter, flags) {
            Ok(listener) => listener,
            Err(libc::EBUSY) => {
                return install(self.fallback, 0)
                    .map(drop)
                    .map_err(|_| self.fail(STEP_SECCOMP));
            }
            Err(_) => return Err(self.fail(STEP_SECCOMP)),
        };
        let sent = send_fd(supervisor.as_raw_fd(), listener as i32);
        // SAFETY: the listener fd was just returned to this child; the supervisor has its copy.
        unsafe {
            libc::close(listener as i32);
        }
        if !sent {
            return Err(self.fail(STEP_SUPERVISOR));
        }
        Ok(())
    }

    /// Reports the failed step to the parent and returns the errno as the spawn error.
    fn fail(&self, step: u8) -> std::io::Error {
        let errno = std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
        // SAFETY: write(2) of one byte from the stack to an fd owned by `self`.
        unsafe {
            libc::write(
                self.report_write.as_raw_fd(),
                (&step as *const u8).cast(),
                1,
            );
        }
        std::io::Error::from_raw_os_error(errno)
    }

    /// After a failed spawn: the confinement step that failed in the child, if one did.
    pub fn child_failure(&self) -> Option<&'static str> {
        let mut step = 0u8;
        // SAFETY: a non-blocking one-byte read into the stack.
        let n = unsafe {
            libc::read(
                self.report_read.as_raw_fd(),
                (&mut step as *mut u8).cast(),
                1,
            )
        };
        (n == 1).then_some(match step {
            STEP_NO_NEW_PRIVS => "prctl(PR_SET_NO_NEW_PRIVS)",
            STEP_LANDLOCK => "landlock_restrict_self",
            STEP_SUPERVISOR => "sendmsg to the sandbox supervisor",
            _ => "seccomp",
        })
    }
}

/// `seccomp(SET_MODE_FILTER, flags, program)`: the listener fd (with `NEW_LISTENER`) or 0, or
/// the errno (left in `errno` for [`Confinement::fail`]).
fn install(program: &[sock_filter], flags: libc::c_ulong) -> Result<libc::c_long, i32> {
    let prog = libc::sock_fprog {
        len: program.len() as u16,
        filter: program.as_ptr() as *mut sock_filter,
    };
    // SAFETY: the program outlives the call; the kernel copies it.
    let result = unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_SET_MODE_FILTER,
            flags,
            &prog as *const libc::sock_fprog,
        )
    };
    if result < 0 {
        // SAFETY: reads this thread's errno.
        return Err(unsafe { *libc::__errno_location() });
    }
    Ok(result)
}

fn report_pipe() -> Result<(OwnedFd, OwnedFd), ConfineError> {
    let mut fds = [0i32; 2];
    // SAFETY: pipe2 fills the array with two new fds on success.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) } != 0 {
        return Err(ConfineError::Pipe(std::io::Error::last_os_error()));
    }
    // SAFETY: both fds were just created and are owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// The program for `network` and `metadata`, built once per process for each pair.
fn filter(network: bool, metadata: Metadata) -> Result<&'static [sock_filter], FilterError> {
    type Built = OnceLock<Result<Vec<sock_filter>, FilterError>>;
    static FILTERS: [Built; 4] = [const { OnceLock::new() }; 4];
    let index = usize::from(network) * 2 + usize::from(metadata == Metadata::Supervise);
    match FILTERS[index].get_or_init(|| program(network, metadata)) {
        Ok(program) => Ok(program.as_slice()),
        Err(error) => Err(error.clone()),
    }
}
