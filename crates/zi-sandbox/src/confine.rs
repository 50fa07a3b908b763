//! Per-spawn confinement (§6.2). The parent builds everything: the Landlock ruleset (an fd, with
//! its rules added) and the seccomp BPF program. The forked child then only makes raw,
//! async-signal-safe system calls in `pre_exec`: `prctl(PR_SET_NO_NEW_PRIVS)`,
//! `landlock_restrict_self`, `seccomp(SET_MODE_FILTER)`. If one fails the child writes the step
//! to a report pipe and fails the spawn, so the command never runs unconfined.

use std::os::fd::{AsRawFd as _, FromRawFd as _, OwnedFd};
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use landlock::{
    ABI, Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible as _, PathBeneath, PathFd,
    Ruleset, RulesetAttr as _, RulesetCreatedAttr as _, Scope, path_beneath_rules,
};
use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};

/// Rights handled up to ABI 5 (§6.2: later file-system rights are not needed).
const MAX_FS_ABI: u32 = 5;

/// What one confined spawn applies in its child.
#[derive(Debug)]
pub struct Confinement {
    ruleset: OwnedFd,
    seccomp: Option<Arc<BpfProgram>>,
    report_read: OwnedFd,
    report_write: OwnedFd,
}

const STEP_NO_NEW_PRIVS: u8 = 1;
const STEP_LANDLOCK: u8 = 2;
const STEP_SECCOMP: u8 = 3;

impl Confinement {
    /// Builds the ruleset for `roots` (written freely) under Landlock `abi`, and the network
    /// restrictions unless `network`.
    pub(crate) fn build(abi: u32, roots: &[PathBuf], network: bool) -> Result<Self, String> {
        let fs_abi = ABI::from(abi.min(MAX_FS_ABI) as i32);
        let all_fs = AccessFs::from_all(fs_abi);
        let mut ruleset = Ruleset::default()
            .set_compatibility(CompatLevel::HardRequirement)
            .handle_access(all_fs)
            .map_err(|e| e.to_string())?;
        if !network && abi >= 4 {
            ruleset = ruleset
                .handle_access(AccessNet::BindTcp | AccessNet::ConnectTcp)
                .map_err(|e| e.to_string())?;
        }
        if abi >= 6 {
            ruleset = ruleset
                .scope(Scope::Signal | Scope::AbstractUnixSocket)
                .map_err(|e| e.to_string())?;
        }
        let read: BitFlags<AccessFs> = AccessFs::Execute | AccessFs::ReadFile | AccessFs::ReadDir;
        let dev_null = PathFd::new("/dev/null").map_err(|e| e.to_string())?;
        let created = ruleset
            .create()
            .map_err(|e| e.to_string())?
            .add_rules(path_beneath_rules(["/"], read))
            .map_err(|e| e.to_string())?
            .add_rules(path_beneath_rules(roots, all_fs))
            .map_err(|e| e.to_string())?
            .add_rule(PathBeneath::new(
                dev_null,
                AccessFs::ReadFile | AccessFs::WriteFile | AccessFs::Truncate,
            ))
            .map_err(|e| e.to_string())?;
        let ruleset: Option<OwnedFd> = created.into();
        let ruleset = ruleset.ok_or_else(|| "Landlock created no ruleset".to_string())?;
        let seccomp = if network {
            None
        } else {
            Some(socket_filter()?)
        };
        let (report_read, report_write) = report_pipe()?;
        Ok(Confinement {
            ruleset,
            seccomp,
            report_read,
            report_write,
        })
    }

    /// Applies the confinement to the calling (forked, single-threaded) child. Only raw system
    /// calls: no allocation, no locks.
    pub fn apply_in_child(&self) -> std::io::Result<()> {
        // SAFETY: plain system calls on values owned by `self`; the program outlives the call.
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
            if let Some(program) = &self.seccomp {
                let prog = libc::sock_fprog {
                    len: program.len() as u16,
                    filter: program.as_ptr() as *mut libc::sock_filter,
                };
                if libc::syscall(
                    libc::SYS_seccomp,
                    libc::SECCOMP_SET_MODE_FILTER,
                    0u32,
                    &prog as *const libc::sock_fprog,
                ) != 0
                {
                    return Err(self.fail(STEP_SECCOMP));
                }
            }
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
            _ => "seccomp",
        })
    }
}

fn report_pipe() -> Result<(OwnedFd, OwnedFd), String> {
    let mut fds = [0i32; 2];
    // SAFETY: pipe2 fills the array with two new fds on success.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) } != 0 {
        return Err(std::io::Error::last_os_error().to_string());
    }
    // SAFETY: both fds were just created and are owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// The network-off filter (§6.2), built once: default allow; `EPERM` for `socket` and
/// `socketpair` outside `AF_UNIX` and for every `io_uring_*` call. Unix sockets keep working.
fn socket_filter() -> Result<Arc<BpfProgram>, String> {
    static FILTER: OnceLock<Result<Arc<BpfProgram>, String>> = OnceLock::new();
    FILTER
        .get_or_init(|| build_socket_filter().map(Arc::new))
        .clone()
}

fn build_socket_filter() -> Result<BpfProgram, String> {
    let arch = TargetArch::try_from(std::env::consts::ARCH).map_err(|e| e.to_string())?;
    let not_unix = || -> Result<Vec<SeccompRule>, String> {
        let condition = SeccompCondition::new(
            0,
            SeccompCmpArgLen::Dword,
            SeccompCmpOp::Ne,
            libc::AF_UNIX as u64,
        )
        .map_err(|e| e.to_string())?;
        Ok(vec![
            SeccompRule::new(vec![condition]).map_err(|e| e.to_string())?,
        ])
    };
    let mut rules = std::collections::BTreeMap::new();
    let mut numbers = vec![
        (libc::SYS_socket, true),
        (libc::SYS_socketpair, true),
        (libc::SYS_io_uring_setup, false),
        (libc::SYS_io_uring_enter, false),
        (libc::SYS_io_uring_register, false),
    ];
    // x32 system calls reach the same handlers with bit 30 set under the x86_64 audit arch.
    #[cfg(target_arch = "x86_64")]
    {
        let x32: Vec<_> = numbers.iter().map(|(n, c)| (n | 0x4000_0000, *c)).collect();
        numbers.extend(x32);
    }
    for (number, only_not_unix) in numbers {
        let chain = if only_not_unix {
            not_unix()?
        } else {
            Vec::new()
        };
        rules.insert(number, chain);
    }
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        arch,
    )
    .map_err(|e| e.to_string())?;
    BpfProgram::try_from(filter).map_err(|e| e.to_string())
}
