use std::io::{BufRead as _, BufReader};
use std::process::{Command, Stdio};

use super::*;

#[test]
fn markers_cover_their_own_spawns_only() {
    let marker = Marker("1f-00aa.3".to_string());
    assert!(marker.covers("1f-00aa.3"));
    assert!(marker.covers("1f-00aa.3.7"));
    assert!(!marker.covers("1f-00aa.30"));
    assert!(!marker.covers("1f-00aa"));
    assert!(!marker.is_below("1f-00aa.3"));
    assert!(marker.is_below("1f-00aa.3.7"));
    assert!(valid_marker("1f-00aa.3.7"));
    for bad in ["", "a b", "x;rm", &"a".repeat(MAX_ROOT_BYTES + 1)] {
        assert!(!valid_marker(bad), "{bad}");
    }
    let root = new_root();
    assert!(valid_marker(&root), "{root}");
    assert_ne!(root, new_root(), "fresh randomness each time");
}

/// A marked shell that starts a `setsid` sleeper (its own session, still the shell's child) and
/// prints the sleeper's pid; an unmarked sleeper beside it.
#[test]
fn kill_marked_ends_a_spawns_processes_across_sessions_and_spares_others() {
    let mut marked = Command::new("sh");
    marked
        .args(["-c", "setsid sleep 30 & echo $!; wait"])
        .stdout(Stdio::piped());
    let marker = tool_process(&mut marked);
    let mut marked = spawn_owned(|| marked.spawn(), |child| Some(child.id())).unwrap();
    let mut line = String::new();
    BufReader::new(marked.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let sleeper: i32 = line.trim().parse().unwrap();
    let mut other = Command::new("sleep").arg("30").spawn().unwrap();
    // The shell's session is its own, the sleeper's another one.
    let shell = tree::stat(marked.id() as i32).unwrap();
    assert_eq!(shell.session, shell.pid);
    // The forked child calls setsid a moment after `$!` is known (and may still be inside
    // execve when the kill comes: kill_marked waits that out).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while tree::stat(sleeper).unwrap().session == shell.session {
        assert!(
            std::time::Instant::now() < deadline,
            "the sleeper leaves the session"
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }

    kill_marked(&marker);
    let _ = marked.wait();
    // SIGKILLed, it ends as soon as it is scheduled; orphaned, it is init's to reap.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !tree::stat(sleeper).is_none_or(|stat| stat.is_zombie()) {
        assert!(
            std::time::Instant::now() < deadline,
            "the setsid sleeper is gone"
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    assert_eq!(
        other.try_wait().unwrap(),
        None,
        "the unmarked sleeper lives"
    );
    let _ = other.kill();
    let _ = other.wait();
}

/// A marked process that execs itself in a loop with a large environment spends a good part of
/// its time inside execve, where its environment reads empty: kill_marked used to miss it there
/// (about one kill in six here) and leave it running. Thirty kills, one looper each, so no kill
/// round that finds another process gives a missed one a second look.
#[test]
fn kill_marked_ends_processes_caught_inside_execve() {
    const LOOP: &str = r#"exec sh -c "$0" "$0""#;
    // 960 KB: laying it out makes each exec slow; well under the usual 2 MiB limit.
    let bulk = "x".repeat(120_000);
    let mut missed = 0;
    for _ in 0..30 {
        let mut looper = Command::new("sh");
        looper.args(["-c", LOOP, LOOP]);
        for n in 0..8 {
            looper.env(format!("ZI_TEST_BULK_{n}"), &bulk);
        }
        let marker = mark(&mut looper);
        let mut looper = looper.spawn().unwrap();
        std::thread::sleep(std::time::Duration::from_millis(10));

        kill_marked(&marker);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while looper.try_wait().unwrap().is_none() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        if looper.try_wait().unwrap().is_none() {
            missed += 1;
            let _ = looper.kill();
            let _ = looper.wait();
        }
    }
    assert_eq!(missed, 0, "loopers kill_marked missed");
}

#[test]
fn a_child_dies_with_the_thread_that_started_it() {
    // Started from a thread that then ends: the parent-death signal follows the thread.
    let child = std::thread::spawn(|| {
        let mut command = Command::new("sleep");
        command.arg("30");
        die_with_zi(&mut command, libc::SIGKILL);
        command.spawn().unwrap()
    })
    .join()
    .unwrap();
    let mut child = child;
    let status = child.wait().unwrap();
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&status),
        Some(libc::SIGKILL)
    );
}
