//! The start-up probe (docs/approvals.md#start-up-probe-and-unavailability): one
//! `landlock_create_ruleset(NULL, 0, VERSION)` call, never securityfs (often unmounted), plus the
//! architecture check of the seccomp filter.

/// Landlock ABI 3 (Linux 6.2) is the minimum: without `Truncate`, `O_TRUNC` on files outside
/// the writable roots would not be controlled.
pub const MIN_LANDLOCK_ABI: u32 = 3;

/// What confines a command, or why nothing can.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Enforcement {
    /// Mode `full`: nothing to enforce.
    None,
    /// Network on: Landlock, and seccomp for the metadata calls only (the wire name predates
    /// them and stays `landlock`).
    Landlock {
        /// The kernel's Landlock ABI.
        abi: u32,
    },
    /// Network off: Landlock, and seccomp for the metadata calls and sockets.
    LandlockSeccomp {
        /// The kernel's Landlock ABI.
        abi: u32,
    },
    /// A confined mode was asked for and cannot be applied.
    Unavailable {
        /// Why, in words the operator can act on.
        reason: String,
        /// The kernel's Landlock ABI (0 when there is none).
        abi: u32,
    },
}

impl Enforcement {
    /// The wire name (docs/approvals.md#the-approvals-state): `none`, `landlock`,
    /// `landlock+seccomp`, `unavailable`.
    pub fn as_str(&self) -> &'static str {
        match self {
            Enforcement::None => "none",
            Enforcement::Landlock { .. } => "landlock",
            Enforcement::LandlockSeccomp { .. } => "landlock+seccomp",
            Enforcement::Unavailable { .. } => "unavailable",
        }
    }

    /// The kernel's Landlock ABI as probed (0 when there is none or it was not probed).
    pub fn abi(&self) -> u32 {
        match self {
            Enforcement::None => 0,
            Enforcement::Landlock { abi }
            | Enforcement::LandlockSeccomp { abi }
            | Enforcement::Unavailable { abi, .. } => *abi,
        }
    }

    /// Why confinement is unavailable; `None` when it is not.
    pub fn unavailable_reason(&self) -> Option<&str> {
        match self {
            Enforcement::Unavailable { reason, .. } => Some(reason),
            _ => None,
        }
    }
}

/// What confines a running worker, as its `ready` frame reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WorkerEnforcement {
    /// The Landlock ABI enforced (0: none).
    pub landlock_abi: u32,
    /// Whether the seccomp allowlist is installed.
    pub seccomp: bool,
}

impl WorkerEnforcement {
    /// `landlock+seccomp`, `seccomp`, `landlock` or `none`.
    pub fn name(&self) -> &'static str {
        match (self.landlock_abi > 0, self.seccomp) {
            (true, true) => "landlock+seccomp",
            (false, true) => "seccomp",
            (true, false) => "landlock",
            (false, false) => "none",
        }
    }
}

/// Why the system offers no usable confinement: what the kernel probe finds, and what the
/// test-only hook `ZI_TEST_SANDBOX_UNAVAILABLE` forces (docs/approvals.md#test-only-hooks).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ForcedUnavailable {
    /// As on a system other than Linux.
    #[error("not Linux")]
    NotLinux,
    /// As on a kernel without Landlock.
    #[error("Landlock is not supported by this kernel")]
    NotSupported,
    /// As on a kernel whose Landlock is disabled at boot.
    #[error("Landlock is disabled at boot")]
    DisabledAtBoot,
    /// As on an architecture zi has no seccomp filter for.
    #[error("seccomp is not available on this architecture")]
    NoSeccompArch,
}

impl ForcedUnavailable {
    /// The value of `ZI_TEST_SANDBOX_UNAVAILABLE`; `None` for anything else.
    pub fn parse(text: &str) -> Option<ForcedUnavailable> {
        match text {
            "not-linux" => Some(ForcedUnavailable::NotLinux),
            "not-supported" => Some(ForcedUnavailable::NotSupported),
            "disabled" => Some(ForcedUnavailable::DisabledAtBoot),
            "no-seccomp-arch" => Some(ForcedUnavailable::NoSeccompArch),
            _ => None,
        }
    }
}

/// Test-only hooks (docs/approvals.md#test-only-hooks). They can only report unavailability, never
/// weaken enforcement: `abi` below the minimum makes the sandbox unavailable, and a value at or
/// above the real ABI changes nothing (zi always uses the kernel's own ABI to build rulesets).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TestHooks {
    /// `ZI_TEST_SANDBOX_ABI`: act as if the kernel's Landlock ABI were `min(real, N)`.
    pub abi: Option<u32>,
    /// `ZI_TEST_SANDBOX_UNAVAILABLE`: report this reason.
    pub unavailable: Option<ForcedUnavailable>,
}

/// Why the kernel offers no usable Landlock, or its ABI.
pub fn kernel_landlock_abi() -> Result<u32, ForcedUnavailable> {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: with a NULL attribute, size 0 and the VERSION flag the call only returns the
        // ABI version or an error; it touches no memory.
        let abi = unsafe {
            libc::syscall(
                libc::SYS_landlock_create_ruleset,
                std::ptr::null::<libc::c_void>(),
                0usize,
                1u32, // LANDLOCK_CREATE_RULESET_VERSION
            )
        };
        if abi >= 0 {
            return Ok(abi as u32);
        }
        match std::io::Error::last_os_error().raw_os_error() {
            Some(libc::EOPNOTSUPP) => Err(ForcedUnavailable::DisabledAtBoot),
            _ => Err(ForcedUnavailable::NotSupported),
        }
    }
    #[cfg(not(target_os = "linux"))]
    {
        Err(ForcedUnavailable::NotLinux)
    }
}

fn reason_text(reason: ForcedUnavailable) -> String {
    reason.to_string()
}

/// Whether the seccomp filter can be built for this architecture (`filter.rs` knows its
/// system call numbers and audit arch).
fn seccomp_arch_supported() -> bool {
    cfg!(any(
        target_arch = "x86_64",
        target_arch = "aarch64",
        target_arch = "riscv64"
    ))
}

/// Probes the kernel for a confined mode; `Ok(abi)` or the unavailability reason with the ABI
/// seen (0 when none).
pub(crate) fn probe(hooks: &TestHooks) -> Result<u32, (String, u32)> {
    if let Some(forced) = hooks.unavailable {
        let abi = kernel_landlock_abi().unwrap_or(0);
        return Err((reason_text(forced), abi));
    }
    let real = kernel_landlock_abi().map_err(|reason| (reason_text(reason), 0))?;
    let seen = hooks.abi.map_or(real, |forced| forced.min(real));
    if seen < MIN_LANDLOCK_ABI {
        return Err((
            format!("Landlock ABI {seen} is older than the required {MIN_LANDLOCK_ABI}"),
            seen,
        ));
    }
    // The seccomp filter is applied in every confined mode (the metadata calls), not only with
    // the network off.
    if !seccomp_arch_supported() {
        return Err((reason_text(ForcedUnavailable::NoSeccompArch), real));
    }
    Ok(real)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hooks_only_report_unavailability() {
        let Ok(real) = kernel_landlock_abi() else {
            return;
        };
        let high = TestHooks {
            abi: Some(99),
            unavailable: None,
        };
        assert_eq!(probe(&high).map_err(|e| e.0), Ok(real));
        let low = TestHooks {
            abi: Some(2),
            unavailable: None,
        };
        assert_eq!(
            probe(&low).map_err(|e| e.0),
            Err("Landlock ABI 2 is older than the required 3".to_string())
        );
        let forced = TestHooks {
            abi: None,
            unavailable: Some(ForcedUnavailable::DisabledAtBoot),
        };
        assert_eq!(
            probe(&forced).map_err(|e| e.0),
            Err("Landlock is disabled at boot".to_string())
        );
    }
}
