//! Interactive start-up: `zi` on a pseudo-terminal (80×24), from spawn to its first painted
//! frame (the status line's `ready` on the screen), median and p95 over 30 starts; each start
//! then quits with Ctrl+D and is waited for. An ephemeral session on the mock's model; no
//! request is made. Compare `--mode rpc`'s spawn-to-`ready` in the `rpc` bench.
//!
//! Then `zi -r FILE` at 120×40 on the `journal` bench's 61 MiB / 100,000-message journal, never
//! compacted and compacted: spawn → the last message on the screen, and spawn → `ready` (the
//! session open and the view live), five starts each.
//!
//! Run with `cargo bench -p zi-cli --bench interactive_startup` (release build). Figures are
//! printed, not asserted.

// A benchmark fails loudly: a panic with its reason is the right report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::ffi::OsStr;
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::Instant;

mod support;
use support::{Dirs, MESSAGES, build_journal, contains, median, mock_server, ms, p95, zi_binary};

const STARTS: usize = 30;
/// What the first frame paints on the status line.
const FIRST_FRAME: &[u8] = b"ready";

/// Starts of each journal in the resume measure.
const RESUMES: usize = 5;

/// A pseudo-terminal pair of `columns`×`rows`: (master, slave).
fn pty(columns: u16, rows: u16) -> (File, OwnedFd) {
    let (mut master, mut slave) = (0, 0);
    let size = libc::winsize {
        ws_row: rows,
        ws_col: columns,
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

/// One start of `zi --mode interactive ARGS` on a `columns`×`rows` terminal: milliseconds
/// from spawn until each of `screens` (in order) has been written to the terminal.
fn start_until(
    dirs: &Dirs,
    args: &[&OsStr],
    (columns, rows): (u16, u16),
    screens: &[&[u8]],
) -> Vec<f64> {
    let (mut master, slave) = pty(columns, rows);
    let mut command = Command::new(zi_binary());
    command
        .args(["--mode", "interactive", "--agent-dir"])
        .arg(&dirs.agent)
        .args(args)
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
    let mut buffer = [0u8; 64 * 1024];
    let mut times = Vec::new();
    for wanted in screens {
        while !contains(&screen, wanted) {
            let n = master.read(&mut buffer).unwrap_or(0);
            assert!(
                n > 0,
                "zi ended before {}: {}",
                String::from_utf8_lossy(wanted),
                String::from_utf8_lossy(&screen)
            );
            screen.extend_from_slice(&buffer[..n]);
        }
        times.push(ms(start));
    }
    master.write_all(b"\x04").expect("Ctrl+D");
    // Drain until zi closes the terminal, so its exit never blocks on a full pty.
    while master.read(&mut buffer).unwrap_or(0) > 0 {}
    let status = child.wait().expect("wait for zi");
    assert!(status.success(), "zi exited with {status}");
    times
}

/// Spawn → first frame of an ephemeral session.
fn start_to_first_frame_ms(dirs: &Dirs) -> f64 {
    let args = ["--no-session", "--model", "mock/m1"].map(OsStr::new);
    start_until(dirs, &args, (80, 24), &[FIRST_FRAME])[0]
}

/// `zi -r` on a 61 MiB journal: spawn → its last message on the screen, and → `ready`.
fn resume_runs(dirs: &Dirs, label: &str, compact_at: Option<usize>) {
    let journal = dirs.cwd.join("resume-bench.jsonl");
    let size = build_journal(&journal, &dirs.cwd, compact_at);
    // The last message's number: the screen's diff moves the cursor over blanks, so words are
    // apart in the bytes written.
    let last = (MESSAGES - 1).to_string();
    let args = [OsStr::new("-r"), journal.as_os_str()];
    let screens = [last.as_bytes(), FIRST_FRAME];
    // One start to warm the page cache.
    start_until(dirs, &args, (120, 40), &screens);
    let runs: Vec<Vec<f64>> = (0..RESUMES)
        .map(|_| start_until(dirs, &args, (120, 40), &screens))
        .collect();
    let column = |i: usize| runs.iter().map(|r| r[i]).collect::<Vec<f64>>();
    println!(
        "resume {label} ({:.1} MiB, {MESSAGES} messages, 120x40, {RESUMES} starts): last screen median {:.1} ms (max {:.1}), ready median {:.1} ms (max {:.1})",
        size as f64 / 1_048_576.0,
        median(column(0)),
        column(0).into_iter().fold(0.0, f64::max),
        median(column(1)),
        column(1).into_iter().fold(0.0, f64::max),
    );
    std::fs::remove_file(&journal).expect("remove the journal");
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
    resume_runs(&dirs, "never compacted", None);
    resume_runs(&dirs, "compacted", Some(MESSAGES - 1000));
}
