//! The confinement applied to a real child on this machine's kernel (skipped where the probe
//! says unavailable).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use zi_sandbox::{Mode, Sandbox, SandboxConfig, SandboxEnv, TestHooks};

fn sandbox(mode: Mode, network: bool, cwd: &Path, agent: &Path) -> Option<Sandbox> {
    let sandbox = Sandbox::new(
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
        &TestHooks::default(),
    );
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

fn scratch(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("zi-sandbox-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.canonicalize().unwrap()
}

#[test]
fn workspace_write_confines_writes_and_network() {
    let cwd = scratch("cwd");
    let outside = scratch("outside");
    let agent = scratch("agent");
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

#[test]
fn read_only_denies_the_cwd() {
    let cwd = scratch("ro");
    let agent = scratch("ro-agent");
    let Some(sb) = sandbox(Mode::ReadOnly, false, &cwd, &agent) else {
        return;
    };
    let (code, _) = run(&sb, &cwd, "echo hi > inside.txt");
    assert_ne!(code, 0);
    let (code, text) = run(&sb, &cwd, "cat /proc/self/status > /dev/null && echo read");
    assert_eq!(code, 0, "{text}");
}
