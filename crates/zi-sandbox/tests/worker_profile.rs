//! The Code Mode worker's profile (docs/code-mode.md#the-sandbox) applied to a real process on
//! this machine's kernel: this test binary runs itself again as the confined child
//! (`confined_child`, selected by `ZI_WORKER_PROBE`), which confines itself exactly as the worker
//! does and then tries one forbidden thing with a raw system call. Every attempt must kill the
//! child with SIGSYS; the allowed control must not.
use std::os::unix::process::ExitStatusExt as _;
use std::process::Command;

use zi_sandbox::{TestHooks, code_worker_support, confine_code_worker, harden_code_worker};

const PROBE: &str = "ZI_WORKER_PROBE";

/// Runs the child with one probe; its exit status and stderr.
fn probe(what: &str) -> Option<(std::process::ExitStatus, String)> {
    if let Err(reason) = code_worker_support(&TestHooks::default()) {
        println!("SKIP: {reason}");
        return None;
    }
    let output = Command::new(std::env::current_exe().unwrap())
        .args([
            "worker_profile::confined_child",
            "--exact",
            "--ignored",
            "--nocapture",
        ])
        .args(["--test-threads", "1"])
        .env(PROBE, what)
        .output()
        .unwrap();
    Some((
        output.status,
        String::from_utf8_lossy(&output.stderr).into_owned(),
    ))
}

fn assert_killed(what: &str) {
    let Some((status, stderr)) = probe(what) else {
        return;
    };
    assert_eq!(
        status.signal(),
        Some(libc::SIGSYS),
        "{what}: {status}; stderr: {stderr}"
    );
}

#[test]
fn opening_a_file_kills_the_worker() {
    assert_killed("open");
}

#[test]
fn creating_a_file_kills_the_worker() {
    assert_killed("create");
}

#[test]
fn sockets_kill_the_worker() {
    assert_killed("inet");
    assert_killed("unix");
}

#[test]
fn new_processes_kill_the_worker() {
    assert_killed("fork");
    assert_killed("exec");
}

#[test]
fn signals_and_executable_memory_kill_the_worker() {
    assert_killed("kill");
    assert_killed("mmap-exec");
    assert_killed("ptrace");
}

#[test]
fn what_the_engine_needs_still_works() {
    let Some((status, stderr)) = probe("allowed") else {
        return;
    };
    assert_eq!(status.code(), Some(0), "{status}; stderr: {stderr}");
    assert!(
        stderr.contains("allowed: ok landlock+seccomp") || stderr.contains("allowed: ok seccomp"),
        "{stderr}"
    );
}

/// The confined child: only runs when the parent selected a probe.
#[test]
#[ignore = "the confined child of the tests above; runs only when they start it"]
fn confined_child() {
    let Ok(what) = std::env::var(PROBE) else {
        return;
    };
    let path = c"/etc/passwd";
    let created = c"/tmp/zi-worker-probe";
    harden_code_worker(1 << 30);
    let enforcement = confine_code_worker().unwrap();
    // SAFETY: raw system calls with valid arguments; the process exits right after.
    let rc: i64 = unsafe {
        match what.as_str() {
            "open" => libc::syscall(
                libc::SYS_openat,
                libc::AT_FDCWD,
                path.as_ptr(),
                libc::O_RDONLY,
            ),
            "create" => libc::syscall(
                libc::SYS_openat,
                libc::AT_FDCWD,
                created.as_ptr(),
                libc::O_CREAT | libc::O_WRONLY,
                0o600,
            ),
            "inet" => libc::syscall(libc::SYS_socket, libc::AF_INET, libc::SOCK_STREAM, 0),
            "unix" => libc::syscall(libc::SYS_socket, libc::AF_UNIX, libc::SOCK_STREAM, 0),
            "fork" => libc::syscall(libc::SYS_clone, libc::SIGCHLD, 0, 0, 0, 0),
            "exec" => {
                let argv = [path.as_ptr(), std::ptr::null()];
                libc::syscall(
                    libc::SYS_execve,
                    c"/bin/true".as_ptr(),
                    argv.as_ptr(),
                    std::ptr::null::<*const libc::c_char>(),
                )
            }
            "kill" => libc::syscall(libc::SYS_kill, 1, 0),
            "ptrace" => libc::syscall(libc::SYS_ptrace, libc::PTRACE_TRACEME, 0, 0, 0),
            "mmap-exec" => libc::mmap(
                std::ptr::null_mut(),
                4096,
                libc::PROT_READ | libc::PROT_EXEC,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            ) as i64,
            _ => {
                // The control: memory, random bytes, a clock and writes to stderr.
                let mut bytes = [0u8; 16];
                libc::getrandom(bytes.as_mut_ptr().cast(), bytes.len(), 0) as i64
            }
        }
    };
    if what == "fork" && rc == 0 {
        // SAFETY: the forked child leaves at once.
        unsafe { libc::_exit(0) };
    }
    let line = if what == "allowed" {
        let boxed = vec![1u8; 1 << 20];
        format!("allowed: ok {} {}\n", enforcement.name(), boxed.len())
    } else {
        format!("{what}: rc={rc} ALLOWED\n")
    };
    // SAFETY: write(2) to stderr from a live buffer, then exit without unwinding.
    unsafe {
        libc::write(2, line.as_ptr().cast(), line.len());
        libc::_exit(0)
    }
}
