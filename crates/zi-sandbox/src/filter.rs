//! The seccomp BPF program of a confined spawn, assembled here because the metadata system calls
//! need the user-notification action, which seccompiler does not offer (docs/approvals.md,
//! "What a confined command gets").
//!
//! One program per spawn, decided in this order: a foreign architecture kills the process (as
//! seccompiler did: no `int 0x80` way around the table); the metadata calls (`chmod`, `chown`,
//! times, extended attributes, the `chattr` ioctls, `file_setattr`) get the [`Metadata`] action;
//! `fs-verity`, encryption-policy and label ioctls fail with `EPERM`;
//! every `io_uring_*` call fails with `EPERM` (its `SETXATTR` operations would pass unseen);
//! with the network off, `socket`/`socketpair` outside `AF_UNIX` fail with `EPERM`; the rest is
//! allowed. x32 calls (x86_64 only) get `EPERM` where a native call would be supervised.

use libc::sock_filter;

use crate::error::FilterError;

/// What the metadata calls get.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Metadata {
    /// `SECCOMP_RET_USER_NOTIF`: the supervisor decides by path (`workspace-write`).
    Supervise,
    /// `EPERM` everywhere (`read-only`, or when another supervisor already listens).
    Deny,
}

/// `fchmodat2`, `setxattrat`, `removexattrat` and `file_setattr` have the same number on every
/// architecture (the unified table); the libc crate does not name all of them yet.
const SYS_FCHMODAT2: i64 = 452;
const SYS_SETXATTRAT: i64 = 463;
const SYS_REMOVEXATTRAT: i64 = 466;
pub(crate) const SYS_FILE_SETATTR: i64 = 469;

/// The `chattr` family: inode flags (`+i`, `+a`, …), the generation, the XFS-style attributes.
pub(crate) const FS_IOC_SETFLAGS: u32 = libc::_IOW::<libc::c_long>(b'f' as u32, 2) as u32;
pub(crate) const FS_IOC32_SETFLAGS: u32 = libc::_IOW::<libc::c_int>(b'f' as u32, 2) as u32;
pub(crate) const FS_IOC_SETVERSION: u32 = libc::_IOW::<libc::c_long>(b'v' as u32, 2) as u32;
pub(crate) const FS_IOC32_SETVERSION: u32 = libc::_IOW::<libc::c_int>(b'v' as u32, 2) as u32;
/// `struct fsxattr` is 28 bytes.
pub(crate) const FS_IOC_FSSETXATTR: u32 = libc::_IOW::<[u8; 28]>(b'X' as u32, 32) as u32;
pub(crate) const METADATA_IOCTLS: [u32; 5] = [
    FS_IOC_SETFLAGS,
    FS_IOC32_SETFLAGS,
    FS_IOC_SETVERSION,
    FS_IOC32_SETVERSION,
    FS_IOC_FSSETXATTR,
];

/// Metadata ioctls refused in every confined mode, inside the roots too (nothing a command needs,
/// and each outlives the sandbox): `fs-verity` (the file becomes read-only for good, on a
/// read-only fd), setting an encryption policy, and the filesystem label.
pub(crate) const REFUSED_IOCTLS: [u32; 3] = [
    libc::_IOW::<[u8; 128]>(b'f' as u32, 133) as u32,
    libc::_IOR::<[u8; 12]>(b'f' as u32, 19) as u32,
    libc::_IOW::<[u8; 256]>(0x94, 50) as u32,
];

/// The metadata calls of this architecture (aarch64 and riscv64 only have the `*at` forms).
pub(crate) fn metadata_calls() -> Vec<i64> {
    let mut calls = vec![
        libc::SYS_fchmod,
        libc::SYS_fchmodat,
        libc::SYS_fchown,
        libc::SYS_fchownat,
        libc::SYS_utimensat,
        libc::SYS_setxattr,
        libc::SYS_lsetxattr,
        libc::SYS_fsetxattr,
        libc::SYS_removexattr,
        libc::SYS_lremovexattr,
        libc::SYS_fremovexattr,
        SYS_FCHMODAT2,
        SYS_SETXATTRAT,
        SYS_REMOVEXATTRAT,
        SYS_FILE_SETATTR,
    ];
    #[cfg(target_arch = "x86_64")]
    calls.extend([
        libc::SYS_chmod,
        libc::SYS_chown,
        libc::SYS_lchown,
        libc::SYS_utime,
        libc::SYS_utimes,
        libc::SYS_futimesat,
    ]);
    calls
}

#[cfg(target_arch = "x86_64")]
const AUDIT_ARCH: u32 = 0xC000_003E;
#[cfg(target_arch = "aarch64")]
const AUDIT_ARCH: u32 = 0xC000_00B7;
#[cfg(target_arch = "riscv64")]
const AUDIT_ARCH: u32 = 0xC000_00F3;

/// x32 system calls reach the same handlers with bit 30 set under the x86_64 audit arch.
#[cfg(target_arch = "x86_64")]
const X32_BIT: u32 = 0x4000_0000;
/// The x32 `ioctl` (its compat entry; 16 is 64-bit only).
#[cfg(target_arch = "x86_64")]
const X32_IOCTL: u32 = 514;

/// Offsets in `struct seccomp_data`: `nr`, `arch`, then `args[6]` from 16; the low 32 bits of
/// an argument come first on these little-endian architectures.
const NR: u32 = 0;
const ARCH: u32 = 4;
const fn arg_low(index: u32) -> u32 {
    16 + 8 * index
}

const RET_ALLOW: u32 = libc::SECCOMP_RET_ALLOW;
const RET_EPERM: u32 = libc::SECCOMP_RET_ERRNO | libc::EPERM as u32;
const RET_KILL: u32 = libc::SECCOMP_RET_KILL_PROCESS;
const RET_NOTIFY: u32 = libc::SECCOMP_RET_USER_NOTIF;

/// A jump target in the program being assembled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Label {
    NativeArch,
    #[cfg(target_arch = "x86_64")]
    X32,
    Ioctl,
    #[cfg(target_arch = "x86_64")]
    IoctlX32,
    Socket,
    Metadata,
    Eperm,
    Allow,
}

/// One instruction, with symbolic jump targets; labels take no space.
enum Op {
    Load(u32),
    #[cfg(target_arch = "x86_64")]
    And(u32),
    JeqTo(u32, Label),
    #[cfg(target_arch = "x86_64")]
    JsetTo(u32, Label),
    Ret(u32),
    Mark(Label),
}

/// The program for `network` (on: sockets unfiltered) and the metadata action.
pub(crate) fn program(network: bool, metadata: Metadata) -> Result<Vec<sock_filter>, FilterError> {
    let mut ops = vec![
        Op::Load(ARCH),
        Op::JeqTo(AUDIT_ARCH, Label::NativeArch),
        Op::Ret(RET_KILL),
        Op::Mark(Label::NativeArch),
        Op::Load(NR),
    ];
    #[cfg(target_arch = "x86_64")]
    ops.push(Op::JsetTo(X32_BIT, Label::X32));
    table(
        &mut ops,
        network,
        Label::Metadata,
        libc::SYS_ioctl as u32,
        Label::Ioctl,
    );
    #[cfg(target_arch = "x86_64")]
    {
        ops.extend([Op::Mark(Label::X32), Op::And(!X32_BIT)]);
        table(&mut ops, network, Label::Eperm, X32_IOCTL, Label::IoctlX32);
    }
    ioctl_check(&mut ops, Label::Ioctl, Label::Metadata);
    #[cfg(target_arch = "x86_64")]
    ioctl_check(&mut ops, Label::IoctlX32, Label::Eperm);
    ops.extend([
        Op::Mark(Label::Socket),
        Op::Load(arg_low(0)),
        Op::JeqTo(libc::AF_UNIX as u32, Label::Allow),
        Op::Ret(RET_EPERM),
        Op::Mark(Label::Metadata),
        Op::Ret(match metadata {
            Metadata::Supervise => RET_NOTIFY,
            Metadata::Deny => RET_EPERM,
        }),
        Op::Mark(Label::Eperm),
        Op::Ret(RET_EPERM),
        Op::Mark(Label::Allow),
        Op::Ret(RET_ALLOW),
    ]);
    assemble(&ops)
}

/// The per-number checks on the loaded `nr`, ending with "allow".
fn table(ops: &mut Vec<Op>, network: bool, metadata: Label, ioctl: u32, ioctl_label: Label) {
    for nr in metadata_calls() {
        ops.push(Op::JeqTo(nr as u32, metadata));
    }
    ops.push(Op::JeqTo(ioctl, ioctl_label));
    for nr in [
        libc::SYS_io_uring_setup,
        libc::SYS_io_uring_enter,
        libc::SYS_io_uring_register,
    ] {
        ops.push(Op::JeqTo(nr as u32, Label::Eperm));
    }
    if !network {
        ops.push(Op::JeqTo(libc::SYS_socket as u32, Label::Socket));
        ops.push(Op::JeqTo(libc::SYS_socketpair as u32, Label::Socket));
    }
    ops.push(Op::Ret(RET_ALLOW));
}

/// `ioctl` with one of the metadata commands (the kernel reads `cmd` as 32 bits) goes to
/// `metadata`, a refused one fails; any other command is allowed.
fn ioctl_check(ops: &mut Vec<Op>, at: Label, metadata: Label) {
    ops.extend([Op::Mark(at), Op::Load(arg_low(1))]);
    for cmd in METADATA_IOCTLS {
        ops.push(Op::JeqTo(cmd, metadata));
    }
    for cmd in REFUSED_IOCTLS {
        ops.push(Op::JeqTo(cmd, Label::Eperm));
    }
    ops.push(Op::Ret(RET_ALLOW));
}

/// Resolves the labels (forward jumps only, each within 255 instructions).
fn assemble(ops: &[Op]) -> Result<Vec<sock_filter>, FilterError> {
    let mut positions: Vec<(Label, usize)> = Vec::new();
    let mut count = 0usize;
    for op in ops {
        match op {
            Op::Mark(label) => positions.push((*label, count)),
            _ => count += 1,
        }
    }
    let target = |label: Label, at: usize| -> Result<u8, FilterError> {
        let (_, position) = positions
            .iter()
            .find(|(l, _)| *l == label)
            .ok_or_else(|| FilterError::NoLabel(format!("{label:?}")))?;
        position
            .checked_sub(at + 1)
            .and_then(|offset| u8::try_from(offset).ok())
            .ok_or_else(|| FilterError::OutOfRange(format!("{label:?}")))
    };
    let mut program = Vec::with_capacity(count);
    for op in ops {
        let at = program.len();
        let (code, jt, jf, k) = match *op {
            Op::Mark(_) => continue,
            Op::Load(offset) => (libc::BPF_LD | libc::BPF_W | libc::BPF_ABS, 0, 0, offset),
            #[cfg(target_arch = "x86_64")]
            Op::And(mask) => (libc::BPF_ALU | libc::BPF_AND | libc::BPF_K, 0, 0, mask),
            Op::JeqTo(k, label) => (
                libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K,
                target(label, at)?,
                0,
                k,
            ),
            #[cfg(target_arch = "x86_64")]
            Op::JsetTo(k, label) => (
                libc::BPF_JMP | libc::BPF_JSET | libc::BPF_K,
                target(label, at)?,
                0,
                k,
            ),
            Op::Ret(value) => (libc::BPF_RET | libc::BPF_K, 0, 0, value),
        };
        program.push(sock_filter {
            code: code as u16,
            jt,
            jf,
            k,
        });
    }
    Ok(program)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs `program` the way the kernel does for the subset of BPF it uses.
    fn run(program: &[sock_filter], arch: u32, nr: u32, args: [u64; 6]) -> u32 {
        let mut data = [0u8; 64];
        data[0..4].copy_from_slice(&nr.to_le_bytes());
        data[4..8].copy_from_slice(&arch.to_le_bytes());
        for (i, arg) in args.iter().enumerate() {
            data[16 + 8 * i..24 + 8 * i].copy_from_slice(&arg.to_le_bytes());
        }
        let mut a = 0u32;
        let mut pc = 0usize;
        loop {
            let insn = program[pc];
            let code = u32::from(insn.code);
            pc += 1;
            match code {
                c if c == libc::BPF_LD | libc::BPF_W | libc::BPF_ABS => {
                    let k = insn.k as usize;
                    a = u32::from_le_bytes(data[k..k + 4].try_into().unwrap());
                }
                c if c == libc::BPF_ALU | libc::BPF_AND | libc::BPF_K => a &= insn.k,
                c if c == libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K => {
                    pc += usize::from(if a == insn.k { insn.jt } else { insn.jf });
                }
                c if c == libc::BPF_JMP | libc::BPF_JSET | libc::BPF_K => {
                    pc += usize::from(if a & insn.k != 0 { insn.jt } else { insn.jf });
                }
                c if c == libc::BPF_RET | libc::BPF_K => return insn.k,
                other => panic!("unexpected BPF code {other:#x}"),
            }
        }
    }

    fn native(program: &[sock_filter], nr: i64, args: [u64; 6]) -> u32 {
        run(program, AUDIT_ARCH, nr as u32, args)
    }

    #[test]
    fn metadata_calls_get_the_metadata_action_and_the_rest_is_allowed() {
        let supervised = program(false, Metadata::Supervise).unwrap();
        let denied = program(false, Metadata::Deny).unwrap();
        for nr in metadata_calls() {
            assert_eq!(native(&supervised, nr, [0; 6]), RET_NOTIFY, "{nr}");
            assert_eq!(native(&denied, nr, [0; 6]), RET_EPERM, "{nr}");
        }
        for cmd in METADATA_IOCTLS {
            let args = [3, u64::from(cmd) | 0xffff_ffff_0000_0000, 0, 0, 0, 0];
            assert_eq!(native(&supervised, libc::SYS_ioctl, args), RET_NOTIFY);
            assert_eq!(native(&denied, libc::SYS_ioctl, args), RET_EPERM);
        }
        for cmd in REFUSED_IOCTLS {
            let args = [3, u64::from(cmd), 0, 0, 0, 0];
            assert_eq!(native(&supervised, libc::SYS_ioctl, args), RET_EPERM);
        }
        let tcgets = [0, u64::from(libc::TCGETS as u32), 0, 0, 0, 0];
        assert_eq!(native(&supervised, libc::SYS_ioctl, tcgets), RET_ALLOW);
        for nr in [
            libc::SYS_openat,
            libc::SYS_read,
            libc::SYS_execve,
            libc::SYS_fstat,
        ] {
            assert_eq!(native(&supervised, nr, [0; 6]), RET_ALLOW, "{nr}");
        }
        assert_eq!(
            native(&supervised, libc::SYS_io_uring_setup, [0; 6]),
            RET_EPERM
        );
    }

    #[test]
    fn sockets_outside_af_unix_fail_only_with_the_network_off() {
        let off = program(false, Metadata::Supervise).unwrap();
        let on = program(true, Metadata::Supervise).unwrap();
        let inet = [libc::AF_INET as u64, 0, 0, 0, 0, 0];
        let unix = [libc::AF_UNIX as u64, 0, 0, 0, 0, 0];
        for nr in [libc::SYS_socket, libc::SYS_socketpair] {
            assert_eq!(native(&off, nr, inet), RET_EPERM);
            assert_eq!(native(&off, nr, unix), RET_ALLOW);
            assert_eq!(native(&on, nr, inet), RET_ALLOW);
        }
        // io_uring could set extended attributes unseen: refused whatever the network.
        assert_eq!(native(&on, libc::SYS_io_uring_enter, [0; 6]), RET_EPERM);
    }

    #[test]
    fn foreign_architectures_are_killed() {
        let program = program(true, Metadata::Supervise).unwrap();
        assert_eq!(run(&program, 0x4000_0003, 15, [0; 6]), RET_KILL);
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn x32_metadata_calls_fail_instead_of_being_supervised() {
        let program = program(false, Metadata::Supervise).unwrap();
        let x32 = |nr: i64, args| run(&program, AUDIT_ARCH, nr as u32 | X32_BIT, args);
        assert_eq!(x32(libc::SYS_chmod, [0; 6]), RET_EPERM);
        let setflags = [3, u64::from(FS_IOC_SETFLAGS), 0, 0, 0, 0];
        assert_eq!(x32(i64::from(X32_IOCTL), setflags), RET_EPERM);
        assert_eq!(
            x32(libc::SYS_socket, [libc::AF_INET as u64, 0, 0, 0, 0, 0]),
            RET_EPERM
        );
        assert_eq!(x32(libc::SYS_read, [0; 6]), RET_ALLOW);
    }

    #[test]
    fn the_ioctl_numbers_are_the_kernel_headers() {
        assert_eq!(FS_IOC_SETFLAGS, 0x4008_6602);
        assert_eq!(FS_IOC32_SETFLAGS, 0x4004_6602);
        assert_eq!(FS_IOC_SETVERSION, 0x4008_7602);
        assert_eq!(FS_IOC32_SETVERSION, 0x4004_7602);
        assert_eq!(FS_IOC_FSSETXATTR, 0x401c_5820);
        assert_eq!(REFUSED_IOCTLS, [0x4080_6685, 0x800c_6613, 0x4100_9432]);
    }
}
