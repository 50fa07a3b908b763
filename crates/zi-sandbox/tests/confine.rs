//! The confinement applied to a real child on this machine's kernel (skipped where the probe
//! says unavailable): writes and network, and the metadata rule
//! (docs/approvals.md#what-a-confined-command-gets) — changes strictly below a writable root in
//! `workspace-write`, none elsewhere, none at all in `read-only`, however the object is named. The
//! whole matrix of metadata system calls runs through the real binary in zi-cli's
//! `tests/sandbox.rs`; these are the naming edge cases.
use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use zi_sandbox::{
    Confinement, ForcedUnavailable, Mode, Sandbox, SandboxConfig, SandboxEnv, SandboxError,
    TestHooks,
};
use zi_test_support::dirs::{TempCwd, outside_writable_roots};

fn sandbox_with(mode: Mode, network: bool, cwd: &Path, agent: &Path, hooks: &TestHooks) -> Sandbox {
    Sandbox::new(
        SandboxConfig {
            mode,
            network,
            ..SandboxConfig::default()
        },
        &SandboxEnv {
            cwd: cwd.to_path_buf(),
            agent_dir: agent.to_path_buf(),
            tmpdir: None,
        },
        hooks,
    )
}

fn sandbox(mode: Mode, network: bool, cwd: &Path, agent: &Path) -> Option<Sandbox> {
    let sandbox = sandbox_with(mode, network, cwd, agent, &TestHooks::default());
    if let Some(reason) = sandbox.enforcement().unavailable_reason() {
        println!("SKIP: {reason}");
        return None;
    }
    Some(sandbox)
}

fn run(sandbox: &Sandbox, cwd: &Path, script: &str) -> (i32, String) {
    let confinement = Arc::new(sandbox.confine().unwrap());
    let inside = confinement.clone();
    let mut command = Command::new("/bin/sh");
    command.arg("-c").arg(script).current_dir(cwd);
    // SAFETY: the hook makes only raw system calls.
    unsafe {
        command.pre_exec(move || inside.apply_in_child());
    }
    let output = command.output().unwrap();
    assert!(confinement.child_failure().is_none());
    let text = String::from_utf8_lossy(&output.stdout).to_string()
        + &String::from_utf8_lossy(&output.stderr);
    (output.status.code().unwrap_or(-1), text)
}

/// A directory outside `/tmp` and `$TMPDIR` (writable roots of `workspace-write`) wherever the
/// checkout lives, and its canonical path; removed when the first is dropped.
fn scratch(name: &str) -> (TempCwd, PathBuf) {
    let dir = outside_writable_roots(
        &format!("zi-sandbox-{name}-"),
        Path::new(env!("CARGO_TARGET_TMPDIR")),
    );
    let path = dir.path.clone();
    (dir, path)
}

/// Why a spawn cannot be confined is a typed error whose text is what zi always said: mode
/// `full` confines nothing, and an unavailable sandbox gives its probe's reason (the error used
/// to be a string only).
#[test]
fn a_spawn_that_cannot_be_confined_says_why() {
    let full = Sandbox::full().confine().unwrap_err();
    assert!(matches!(full, SandboxError::Full), "{full:?}");
    assert_eq!(full.to_string(), "mode full has no confinement");
    let (cwd, path) = scratch("refused");
    let forced = TestHooks {
        abi: None,
        unavailable: Some(ForcedUnavailable::DisabledAtBoot),
    };
    let unavailable = sandbox_with(
        Mode::WorkspaceWrite,
        false,
        &path,
        &path.join("agent"),
        &forced,
    );
    let reason = unavailable
        .enforcement()
        .unavailable_reason()
        .unwrap()
        .to_string();
    match unavailable.confine() {
        Err(SandboxError::Unavailable(given)) => assert_eq!(given, reason),
        other => panic!("{other:?}"),
    }
    drop(cwd);
}

#[test]
fn workspace_write_confines_writes_and_network() {
    let (_cwd, cwd) = scratch("cwd");
    let (_outside, outside) = scratch("outside");
    let (_agent, agent) = scratch("agent");
    let Some(sb) = sandbox(Mode::WorkspaceWrite, false, &cwd, &agent) else {
        return;
    };
    let (code, _) = run(
        &sb,
        &cwd,
        "echo hi > inside.txt && echo t > /tmp/zi-sandbox-probe-$$",
    );
    assert_eq!(code, 0);
    let (code, text) = run(
        &sb,
        &cwd,
        &format!("echo x > {}/denied.txt", outside.display()),
    );
    assert_ne!(code, 0, "{text}");
    assert!(!outside.join("denied.txt").exists());
    let (code, text) = run(&sb, &cwd, "grep NoNewPrivs /proc/self/status");
    assert_eq!(code, 0);
    assert!(text.contains("NoNewPrivs:\t1"), "{text}");
    let (code, _) = run(&sb, &cwd, "echo x > /dev/null");
    assert_eq!(code, 0);
    let (_, text) = run(
        &sb,
        &cwd,
        "python3 -c 'import socket; socket.socket(socket.AF_INET, socket.SOCK_DGRAM)' 2>&1 || echo denied",
    );
    assert!(
        text.contains("denied") || text.contains("not found"),
        "{text}"
    );
}

/// Device nodes are refused inside the roots too (Landlock's `EACCES` comes before the
/// kernel's capability check, so the text is the same for root and other users); FIFOs and
/// sockets are still made.
#[test]
fn workspace_write_makes_no_device_node_but_fifos() {
    let (_cwd, cwd) = scratch("mknod");
    let (_agent, agent) = scratch("mknod-agent");
    let Some(sb) = sandbox(Mode::WorkspaceWrite, false, &cwd, &agent) else {
        return;
    };
    for (node, args) in [("disk", "b 8 0"), ("null", "c 1 3")] {
        let (code, text) = run(&sb, &cwd, &format!("mknod {node} {args} 2>&1"));
        assert_ne!(code, 0, "{node}: {text}");
        assert!(text.contains("Permission denied"), "{node}: {text}");
        assert!(std::fs::symlink_metadata(cwd.join(node)).is_err(), "{node}");
    }
    let (code, text) = run(&sb, &cwd, "mkfifo pipe && test -p pipe && echo fifo");
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("fifo"), "{text}");
}

#[test]
fn read_only_denies_the_cwd() {
    let (_cwd, cwd) = scratch("ro");
    let (_agent, agent) = scratch("ro-agent");
    let Some(sb) = sandbox(Mode::ReadOnly, false, &cwd, &agent) else {
        return;
    };
    let (code, _) = run(&sb, &cwd, "echo hi > inside.txt");
    assert_ne!(code, 0);
    let (code, text) = run(&sb, &cwd, "cat /proc/self/status > /dev/null && echo read");
    assert_eq!(code, 0, "{text}");
}

/// Runs Python `code` confined by every confinement in `layers` (applied in order) and returns
/// its stdout, stderr included on failure.
fn python(layers: &[Arc<Confinement>], cwd: &Path, code: &str) -> String {
    let mut command = Command::new("python3");
    command.arg("-c").arg(code).current_dir(cwd);
    let inside: Vec<_> = layers.to_vec();
    // SAFETY: the hook makes only raw system calls.
    unsafe {
        command.pre_exec(move || inside.iter().try_for_each(|c| c.apply_in_child()));
    }
    let output = command.output().unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).trim().to_string()
}

/// `raw(nr, *args)`: a system call by number, raising `OSError` like the `os` functions.
const RAW: &str = "libc = ctypes.CDLL(None, use_errno=True)
def raw(nr, *args):
    if libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) if isinstance(a, int) else a for a in args]) < 0:
        raise OSError(ctypes.get_errno(), 'raw')
";

/// A Python expression's outcome: `ok` or the errno name.
fn attempt(expression: &str) -> String {
    format!(
        "import ctypes, errno, os\n{RAW}try:\n    {expression}\n    print('ok')\nexcept OSError as e:\n    print(errno.errorcode[e.errno])"
    )
}

fn mode(path: &Path) -> u32 {
    std::fs::symlink_metadata(path).unwrap().mode() & 0o7777
}

fn file(path: &Path) -> PathBuf {
    std::fs::write(path, "x").unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o644)).unwrap();
    path.to_path_buf()
}

#[test]
fn workspace_write_changes_metadata_only_strictly_below_a_root_however_it_is_named() {
    let (_base, base) = scratch("meta-names");
    let (cwd, outside, agent) = (base.join("cwd"), base.join("outside"), base.join("agent"));
    for dir in [&cwd, &outside, &agent] {
        std::fs::create_dir_all(dir).unwrap();
    }
    let Some(sb) = sandbox(Mode::WorkspaceWrite, false, &cwd, &agent) else {
        return;
    };
    let c = || vec![Arc::new(sb.confine().unwrap())];
    let secret = file(&outside.join("secret"));
    let mine = file(&cwd.join("mine"));
    std::os::unix::fs::symlink(&secret, cwd.join("link")).unwrap();

    // Through a symlink inside the workspace: the target outside is refused…
    assert_eq!(
        python(&c(), &cwd, &attempt("os.chmod('link', 0o600)")),
        "EPERM"
    );
    assert_eq!(mode(&secret), 0o644);
    // …the symlink itself (inside) may change owner, and chmod of a symlink is the kernel's
    // EOPNOTSUPP as without the sandbox.
    let uid = std::fs::metadata(&secret).unwrap().uid();
    let own = format!("os.lchown('link', {uid}, -1)");
    assert_eq!(python(&c(), &cwd, &attempt(&own)), "ok");
    let lchmod = "raw(452, -100, b'link', 0o600, 0x100)"; // fchmodat2(AT_SYMLINK_NOFOLLOW)
    assert_eq!(python(&c(), &cwd, &attempt(lchmod)), "ENOTSUP");

    // `..` out of the workspace, relative to a directory fd.
    let dotdot = "os.chmod('../outside/secret', 0o600, dir_fd=os.open('.', os.O_RDONLY))";
    assert_eq!(python(&c(), &cwd, &attempt(dotdot)), "EPERM");
    assert_eq!(mode(&secret), 0o644);

    // /proc/self names the command, not zi: its own fd of a workspace file may change.
    let proc_self = "os.chmod(f\"/proc/self/fd/{os.open('mine', os.O_RDONLY)}\", 0o600)";
    assert_eq!(python(&c(), &cwd, &attempt(proc_self)), "ok");
    assert_eq!(mode(&mine), 0o600);
    let proc_outside = format!(
        "os.chmod(f\"/proc/self/fd/{{os.open('{}', os.O_RDONLY)}}\", 0o600)",
        secret.display()
    );
    assert_eq!(python(&c(), &cwd, &attempt(&proc_outside)), "EPERM");
    assert_eq!(mode(&secret), 0o644);

    // A root keeps its own metadata; below it everything may change.
    let before = mode(&cwd);
    assert_eq!(
        python(&c(), &cwd, &attempt("os.chmod('.', 0o700)")),
        "EPERM"
    );
    assert_eq!(mode(&cwd), before);
    std::fs::create_dir(cwd.join("sub")).unwrap();
    assert_eq!(python(&c(), &cwd, &attempt("os.chmod('sub', 0o700)")), "ok");
    assert_eq!(mode(&cwd.join("sub")), 0o700);

    // A file deleted while open is no path inside the roots.
    let deleted = "fd = os.open('gone', os.O_CREAT | os.O_RDWR, 0o644); os.unlink('gone'); os.fchmod(fd, 0o600)";
    assert_eq!(python(&c(), &cwd, &attempt(deleted)), "EPERM");

    // A missing file is the kernel's ENOENT, not a refusal.
    assert_eq!(
        python(&c(), &cwd, &attempt("os.chmod('missing', 0o600)")),
        "ENOENT"
    );
}

#[test]
fn read_only_refuses_every_metadata_change_and_a_second_supervisor_refuses_too() {
    let (_base, base) = scratch("meta-ro");
    let (cwd, agent) = (base.join("cwd"), base.join("agent"));
    for dir in [&cwd, &agent] {
        std::fs::create_dir_all(dir).unwrap();
    }
    let Some(ro) = sandbox(Mode::ReadOnly, false, &cwd, &agent) else {
        return;
    };
    let Some(ww) = sandbox(Mode::WorkspaceWrite, false, &cwd, &agent) else {
        return;
    };
    let mine = file(&cwd.join("mine"));
    let layers = vec![Arc::new(ro.confine().unwrap())];
    assert_eq!(
        python(&layers, &cwd, &attempt("os.chmod('mine', 0o600)")),
        "EPERM"
    );
    assert_eq!(mode(&mine), 0o644);

    // A command confined twice (zi inside a zi sandbox): the kernel allows one listener per
    // filter chain, so the inner confinement refuses metadata changes everywhere instead.
    let nested = vec![
        Arc::new(ww.confine().unwrap()),
        Arc::new(ww.confine().unwrap()),
    ];
    assert_eq!(
        python(&nested, &cwd, &attempt("os.chmod('mine', 0o600)")),
        "EPERM"
    );
    assert_eq!(mode(&mine), 0o644);
    let single = vec![Arc::new(ww.confine().unwrap())];
    assert_eq!(
        python(&single, &cwd, &attempt("os.chmod('mine', 0o600)")),
        "ok"
    );
    assert_eq!(mode(&mine), 0o600);
}
