//! Interactive start-up: `zi` on a pseudo-terminal (80×24), from spawn to its first painted
//! frame (the status line's `ready` on the screen), median and p95 over 30 starts; each start
//! then quits with Ctrl+D and is waited for. An ephemeral session on the mock's model; no
//! request is made. Compare `--mode rpc`'s spawn-to-`ready` in the `rpc` bench.
//!
//! Run with `cargo bench -p zi-cli --bench interactive_startup` (release build). Figures are
//! printed, not asserted.

// A benchmark fails loudly: a panic with its reason is the right report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::Instant;

mod support;
use support::{Dirs, contains, median, mock_server, ms, p95, zi_binary};

const STARTS: usize = 30;
/// What the first frame paints on the status line.
const FIRST_FRAME: &[u8] = b"ready";

/// A pseudo-terminal pair of 80×24: (master, slave).
fn pty() -> (File, OwnedFd) {
    let (mut master, mut slave) = (0, 0);
    let size = libc::winsize {
        ws_row: 24,
        ws_col: 80,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: openpty writes the two descriptors it opens; the pointers are valid.
    let result = unsafe {
        libc::openpty(
            &mut master,
            &mut slave,
            std::ptr::null_mut(),
            std::ptr::null(),
            &size,
        )
    };
    assert_eq!(result, 0, "openpty: {}", std::io::Error::last_os_error());
    // SAFETY: both descriptors were just opened and are owned here alone.
    unsafe { (File::from_raw_fd(master), OwnedFd::from_raw_fd(slave)) }
}

/// One start: milliseconds from spawn to the first frame.
fn start_to_first_frame_ms(dirs: &Dirs) -> f64 {
    let (mut master, slave) = pty();
    let mut command = Command::new(zi_binary());
    command
        .args(["--mode", "interactive", "--agent-dir"])
        .arg(&dirs.agent)
        .args(["--no-session", "--model", "mock/m1"])
        .current_dir(&dirs.cwd)
        .env("HOME", &dirs.home)
        .env("SHELL", "/bin/bash")
        .env("TERM", "xterm-256color")
        .env_remove("ZI_MODE")
        .env_remove("ZI_SANDBOX")
        .env_remove("ZI_APPROVALS")
        .stdin(Stdio::from(slave.try_clone().expect("dup pty")))
        .stdout(Stdio::from(slave.try_clone().expect("dup pty")))
        .stderr(Stdio::from(slave));
    // SAFETY: setsid and ioctl are async-signal-safe. The child leaves the bench's terminal
    // session and takes the pty as its controlling terminal (crossterm opens /dev/tty).
    unsafe {
        command.pre_exec(|| {
            libc::setsid();
            libc::ioctl(0, libc::TIOCSCTTY, 0);
            Ok(())
        });
    }
    let start = Instant::now();
    let mut child = command.spawn().expect("spawn zi");
    // The command (holding the slave's copies) is dropped, so only the child has the slave.
    drop(command);
    let mut screen = Vec::new();
    let mut buffer = [0u8; 16 * 1024];
    while !contains(&screen, FIRST_FRAME) {
        let n = master.read(&mut buffer).unwrap_or(0);
        assert!(
            n > 0,
            "zi ended before its first frame: {}",
            String::from_utf8_lossy(&screen)
        );
        screen.extend_from_slice(&buffer[..n]);
    }
    let elapsed = ms(start);
    master.write_all(b"\x04").expect("Ctrl+D");
    // Drain until zi closes the terminal, so its exit never blocks on a full pty.
    while master.read(&mut buffer).unwrap_or(0) > 0 {}
    let status = child.wait().expect("wait for zi");
    assert!(status.success(), "zi exited with {status}");
    elapsed
}

fn main() {
    let (_runtime, mock) = mock_server();
    let dirs = Dirs::new("zi-bench-interactive-", &mock);
    // One start to warm the page cache.
    start_to_first_frame_ms(&dirs);
    let times: Vec<f64> = (0..STARTS)
        .map(|_| start_to_first_frame_ms(&dirs))
        .collect();
    println!(
        "interactive start to first painted frame ({STARTS} starts, 80x24 pty): median {:.1} ms, p95 {:.1} ms",
        median(times.clone()),
        p95(times)
    );
}
