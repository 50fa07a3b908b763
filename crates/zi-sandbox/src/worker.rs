//! The strictest profile: the Code Mode worker's (docs/code-mode.md#the-sandbox).
//!
//! Unlike [`crate::Confinement`], which the parent builds and a forked child applies before
//! exec, the worker confines **itself**: `execve` needs `openat` and `mmap(PROT_EXEC)` for the
//! dynamic loader, so nothing this strict can be applied before exec. The worker calls
//! [`harden_code_worker`] first thing, initialises its engine, then [`confine_code_worker`]
//! before it reads any untrusted input:
//!
//! 1. Landlock with every right the kernel knows handled and none granted: no file can be
//!    opened, created, executed or listed, no TCP bind or connect, no signal or abstract-socket
//!    connection outside the domain (best effort: whatever the kernel supports).
//! 2. A seccomp **allowlist** whose default action kills the process: reading fd 0, writing fds
//!    1 and 2, memory without `PROT_EXEC`, futexes, clocks, random bytes, poll, exit. Every
//!    other system call (`openat`, `socket`, `clone`, `execve`, `kill`, `ptrace`, `io_uring_*`,
//!    `prctl`, …) ends the worker with `SIGSYS`.
//!
//! Seccomp is the boundary that matters; Landlock is defence in depth (it also covers a
//! mistake in the allowlist for files). The worker is one thread, so neither needs TSYNC.

use std::collections::BTreeMap;

use landlock::{
    ABI, Access, AccessFs, AccessNet, CompatLevel, Compatible as _, LandlockStatus, Ruleset,
    RulesetAttr as _, RulesetStatus, Scope,
};
use seccompiler::{
    BackendError, BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition,
    SeccompFilter, SeccompRule, TargetArch,
};

use crate::WorkerConfineError;
use crate::probe::{TestHooks, WorkerEnforcement, kernel_landlock_abi};

/// The newest Landlock ABI the `landlock` crate knows; best effort trims it to the kernel's.
const NEWEST_ABI: ABI = ABI::V10;

/// Process hardening before the engine exists: no core file (the kernel writes it without a
/// Landlock check), no file growth, an address-space backstop, not dumpable (no ptrace or
/// `/proc/PID/mem` by processes of the same user), and no inherited descriptor beyond 0–2.
pub fn harden_code_worker(address_space: u64) {
    let zero = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    let space = libc::rlimit {
        rlim_cur: address_space,
        rlim_max: address_space,
    };
    // SAFETY: plain system calls with values on the stack; failures leave the default limits,
    // which the later confinement does not depend on.
    unsafe {
        libc::setrlimit(libc::RLIMIT_CORE, &zero);
        libc::setrlimit(libc::RLIMIT_FSIZE, &zero);
        libc::setrlimit(libc::RLIMIT_AS, &space);
        libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0);
        libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, 0u32);
    }
}

/// Confines the calling (single-threaded) process: Landlock with no rights, then the seccomp
/// allowlist. `Err` only when a step the kernel supports fails; a kernel without Landlock or
/// seccomp gives a weaker [`WorkerEnforcement`], which the host judges.
pub fn confine_code_worker() -> Result<WorkerEnforcement, WorkerConfineError> {
    let landlock_abi = landlock_nothing()?;
    let seccomp = match allowlist() {
        Ok(program) => {
            seccompiler::apply_filter(&program).map_err(WorkerConfineError::Seccomp)?;
            true
        }
        // No filter for this architecture: the host decides whether that is enough.
        Err(_) => {
            // SAFETY: prctl with constant arguments.
            unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) };
            false
        }
    };
    Ok(WorkerEnforcement {
        landlock_abi,
        seccomp,
    })
}

/// Whether the worker can be confined here (host side, at start-up): `Ok` with the Landlock ABI
/// it will get (0: seccomp only), or why not. Honours `ZI_TEST_SANDBOX_UNAVAILABLE`
/// (`no-seccomp-arch` and `not-linux` make it unavailable; the Landlock reasons only lower the
/// ABI to 0), which can only report unavailability.
pub fn code_worker_support(hooks: &TestHooks) -> Result<u32, WorkerConfineError> {
    use crate::probe::ForcedUnavailable as Forced;
    match hooks.unavailable {
        Some(Forced::NotLinux) => return Err(WorkerConfineError::NotLinux),
        Some(Forced::NoSeccompArch) => return Err(WorkerConfineError::NoSeccompArch),
        Some(Forced::NotSupported | Forced::DisabledAtBoot) => return Ok(0),
        None => {}
    }
    if let Err(problem) = allowlist() {
        return Err(WorkerConfineError::Allowlist(problem));
    }
    let abi = kernel_landlock_abi().unwrap_or(0);
    Ok(hooks.abi.map_or(abi, |forced| forced.min(abi)))
}

/// A ruleset that handles every right the kernel knows and allows none. Returns the ABI
/// enforced (0 when the kernel has no Landlock).
fn landlock_nothing() -> Result<u32, WorkerConfineError> {
    let status = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(AccessFs::from_all(NEWEST_ABI))
        .and_then(|r| r.handle_access(AccessNet::from_all(NEWEST_ABI)))
        .and_then(|r| r.scope(Scope::from_all(NEWEST_ABI)))
        .and_then(|r| r.create())
        .and_then(|r| r.restrict_self())
        .map_err(WorkerConfineError::Landlock)?;
    if status.ruleset == RulesetStatus::NotEnforced {
        return Ok(0);
    }
    Ok(match status.landlock {
        LandlockStatus::Available { effective_abi, .. } => effective_abi as u32,
        _ => 0,
    })
}

/// The system calls a running worker makes (strace over the engine, GC, a memory bomb,
/// parallel calls, logs and interrupts saw `read write poll brk mmap munmap mremap
/// exit_group`; the rest is headroom for glibc paths: vDSO fallbacks, malloc trimming, lock
/// contention). `read` only on fd 0, `write` only on fds 1 and 2, `mmap`/`mprotect` never with
/// `PROT_EXEC`. x32 numbers (bit 30) match nothing, so they kill too.
fn allowlist() -> Result<BpfProgram, BackendError> {
    let arch = TargetArch::try_from(std::env::consts::ARCH)?;
    let cond = |arg: u8, op: SeccompCmpOp, value: u64| {
        SeccompCondition::new(arg, SeccompCmpArgLen::Qword, op, value)
    };
    let rule = |conds: Vec<SeccompCondition>| SeccompRule::new(conds);
    let no_exec = || -> Result<Vec<SeccompRule>, BackendError> {
        Ok(vec![rule(vec![cond(
            2,
            SeccompCmpOp::MaskedEq(libc::PROT_EXEC as u64),
            0,
        )?])?])
    };
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    rules.insert(
        libc::SYS_read,
        vec![rule(vec![cond(0, SeccompCmpOp::Eq, 0)?])?],
    );
    rules.insert(
        libc::SYS_write,
        vec![
            rule(vec![cond(0, SeccompCmpOp::Eq, 1)?])?,
            rule(vec![cond(0, SeccompCmpOp::Eq, 2)?])?,
        ],
    );
    rules.insert(libc::SYS_mmap, no_exec()?);
    rules.insert(libc::SYS_mprotect, no_exec()?);
    for number in [
        libc::SYS_ppoll,
        libc::SYS_munmap,
        libc::SYS_mremap,
        libc::SYS_brk,
        libc::SYS_madvise,
        libc::SYS_futex,
        libc::SYS_clock_gettime,
        libc::SYS_gettimeofday,
        libc::SYS_getrandom,
        libc::SYS_sched_yield,
        libc::SYS_rt_sigreturn,
        libc::SYS_rt_sigprocmask,
        libc::SYS_restart_syscall,
        libc::SYS_exit,
        libc::SYS_exit_group,
    ] {
        rules.insert(number, Vec::new());
    }
    #[cfg(target_arch = "x86_64")]
    rules.insert(libc::SYS_poll, Vec::new());
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::KillProcess,
        SeccompAction::Allow,
        arch,
    )?;
    BpfProgram::try_from(filter)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn enforcement_names() {
        let both = WorkerEnforcement {
            landlock_abi: 7,
            seccomp: true,
        };
        assert_eq!(both.name(), "landlock+seccomp");
        let seccomp = WorkerEnforcement {
            landlock_abi: 0,
            seccomp: true,
        };
        assert_eq!(seccomp.name(), "seccomp");
        let none = WorkerEnforcement {
            landlock_abi: 0,
            seccomp: false,
        };
        assert_eq!(none.name(), "none");
    }

    #[test]
    fn support_follows_the_test_hooks() {
        use crate::probe::ForcedUnavailable;
        let hooks = |unavailable| TestHooks {
            abi: None,
            unavailable: Some(unavailable),
        };
        assert!(code_worker_support(&hooks(ForcedUnavailable::NoSeccompArch)).is_err());
        assert!(code_worker_support(&hooks(ForcedUnavailable::NotLinux)).is_err());
        assert_eq!(
            code_worker_support(&hooks(ForcedUnavailable::DisabledAtBoot)).ok(),
            Some(0)
        );
        let low = TestHooks {
            abi: Some(0),
            unavailable: None,
        };
        assert_eq!(code_worker_support(&low).ok(), Some(0));
    }
}
