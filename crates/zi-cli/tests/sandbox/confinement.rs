//! What the sandbox confines: writes, network, signals, background tasks, metadata changes, device
//! nodes, read-only mode and the shell.

use super::*;

#[tokio::test]
async fn workspace_write_confines_writes_network_and_signals_but_keeps_unix_sockets() {
    let Some((s, mut p)) = sandboxed(&["--sandbox", "workspace-write"]).await else {
        return;
    };

    let end = s
        .bash(
            &mut p,
            "echo a > inside.txt && f=/tmp/zi-sandbox-$$ && echo b > $f && rm $f && cat inside.txt",
        )
        .await;
    assert_eq!(end["isError"], false, "{end}");
    assert_eq!(
        end["result"]["details"]["sandbox"],
        json!({"mode": "workspace-write", "network": false, "enforcement": "landlock+seccomp"})
    );
    assert_eq!(
        std::fs::read_to_string(s.cwd.join("inside.txt")).unwrap(),
        "a\n"
    );

    let end = s.bash(&mut p, "echo x > \"$HOME/outside.txt\"").await;
    assert_eq!(end["isError"], true, "{end}");
    assert!(!s.home.join("outside.txt").exists());
    assert!(result_text(&end).contains("Permission denied"), "{end}");
    assert!(
        result_text(&end).ends_with(&format!(
            "[The command ran in the workspace-write sandbox (writes limited to {}, metadata changes to files below them, network off); it may have failed because of the sandbox.]",
            s.roots_text()
        )),
        "{end}"
    );

    let end = s.bash(&mut p, "grep NoNewPrivs /proc/self/status").await;
    assert!(result_text(&end).contains("NoNewPrivs:\t1"), "{end}");

    // TCP to a loopback listener: refused, and the listener never sees a connection.
    let tcp = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    tcp.set_nonblocking(true).unwrap();
    let port = tcp.local_addr().unwrap().port();
    let end = s
        .bash(
            &mut p,
            &format!("exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected"),
        )
        .await;
    assert_eq!(end["isError"], true, "{end}");
    assert!(!result_text(&end).contains("connected"), "{end}");
    assert!(
        tcp.accept().is_err(),
        "no TCP connection reached the listener"
    );

    // UDP sendto: refused by the seccomp filter (Landlock before ABI 10 does not cover UDP).
    let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    udp.set_nonblocking(true).unwrap();
    let port = udp.local_addr().unwrap().port();
    let end = s
        .bash(
            &mut p,
            &format!("echo hi > /dev/udp/127.0.0.1/{port} && echo sent"),
        )
        .await;
    assert_eq!(end["isError"], true, "{end}");
    let mut buffer = [0u8; 16];
    assert!(udp.recv(&mut buffer).is_err(), "no datagram arrived");

    // Unix sockets keep working (docs/approvals.md#known-gaps).
    let socket = s.cwd.join("s.sock");
    let unix = std::os::unix::net::UnixListener::bind(&socket).unwrap();
    let end = s
        .bash(
            &mut p,
            &format!(
                "/usr/bin/python3 -c 'import socket; c = socket.socket(socket.AF_UNIX); c.connect(\"{}\"); c.sendall(b\"unix-ok\")'",
                socket.display()
            ),
        )
        .await;
    assert_eq!(end["isError"], false, "{end}");
    let (mut stream, _) = unix.accept().unwrap();
    let mut received = String::new();
    stream.read_to_string(&mut received).unwrap();
    assert_eq!(received, "unix-ok");

    // Signals to zi (outside the sandbox) are refused (Landlock scopes, ABI >= 6).
    if kernel_landlock_abi().unwrap_or(0) >= 6 {
        let zi = p.pid();
        let end = s
            .bash(&mut p, &format!("kill -TERM {zi}; echo status=$?"))
            .await;
        assert!(result_text(&end).contains("status=1"), "{end}");
        assert!(
            result_text(&end).contains("Operation not permitted"),
            "{end}"
        );
    }
    // zi is still serving.
    p.request_ok("s", "session.get_state", None).await;
}

#[tokio::test]
async fn background_tasks_and_their_descendants_are_confined() {
    let Some((s, mut p)) = sandboxed(&["--sandbox", "workspace-write"]).await else {
        return;
    };
    let end = s
        .call(
            &mut p,
            "bash",
            json!({"command": "sh -c 'sh -c \"echo deep > $HOME/deep.txt\"'; echo ok > bg.txt", "background": true}),
        )
        .await;
    assert_eq!(end["isError"], false, "{end}");
    assert_eq!(
        end["result"]["details"]["sandbox"]["enforcement"], "landlock+seccomp",
        "{end}"
    );
    let end = s
        .call(
            &mut p,
            "task_output",
            json!({"taskId": "task-1", "timeout": 30}),
        )
        .await;
    assert!(result_text(&end).contains("Permission denied"), "{end}");
    assert_eq!(
        std::fs::read_to_string(s.cwd.join("bg.txt")).unwrap(),
        "ok\n"
    );
    assert!(!s.home.join("deep.txt").exists());
}

/// The metadata helper (`fixtures/metadata_ops.py`) run outside any sandbox: `prepare` or `state`.
fn metadata_helper(helper: &Path, command: &str, file: &Path) -> String {
    let output = std::process::Command::new("python3")
        .arg(helper)
        .arg(command)
        .arg(file)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).trim().to_string()
}

/// Every metadata change the helper tries on `file` from a confined `bash`, with the outcomes.
async fn metadata_changes(s: &Scene, p: &mut Harness, file: &Path, owner: &str) -> Value {
    let command = format!("python3 metadata_ops.py change {} {owner}", file.display());
    let end = s.bash(p, &command).await;
    assert_eq!(end["isError"], false, "{end}");
    serde_json::from_str(result_text(&end).trim()).unwrap_or_else(|_| panic!("{end}"))
}

/// Issue 23 C3: `chmod`, `chown`, times, extended attributes and `chattr` flags change only
/// strictly below a writable root in `workspace-write`, nowhere in `read-only` — by path, by an
/// fd opened read-only, relative to a directory fd, through `/proc/self/fd`, and by the raw
/// system calls (`utime`, `utimes`, `futimesat`, `fchmodat2`, `setxattrat`, `removexattrat`,
/// `file_setattr`) — and a refused change leaves the file's metadata as it was.
#[tokio::test]
async fn metadata_changes_only_below_the_writable_roots() {
    let Some(_abi) = landlock_abi() else { return };
    let s = scene().await;
    let helper = s.cwd.join("metadata_ops.py");
    std::fs::write(&helper, include_str!("../fixtures/metadata_ops.py")).unwrap();
    let outside = s.home.join("outside.txt");
    let inside = s.cwd.join("inside.txt");
    // The test's own user, as the owner of what it just created.
    let created = std::fs::metadata(&helper).unwrap();
    let (uid, gid) = (
        std::os::unix::fs::MetadataExt::uid(&created),
        std::os::unix::fs::MetadataExt::gid(&created),
    );
    // As root, chown to another user changes the file; otherwise to oneself (still refused).
    let owner = if uid == 0 {
        "1:1".to_string()
    } else {
        format!("{uid}:{gid}")
    };
    for mode in ["workspace-write", "read-only"] {
        let mut p = s.spawn(&["--sandbox", mode]).await;
        metadata_helper(&helper, "prepare", &outside);
        metadata_helper(&helper, "prepare", &inside);
        let before = metadata_helper(&helper, "state", &outside);
        let before_inside = metadata_helper(&helper, "state", &inside);

        // The shell tools of the report: each refused, nothing changed.
        let o = outside.display();
        let end = s
            .bash(
                &mut p,
                &format!(
                    "chmod 600 {o}; chown {owner} {o}; touch -d 2001-01-01 {o}; chattr +d {o}; exit 1"
                ),
            )
            .await;
        // Each tool reports its failure (touch names the refused open, the rest EPERM).
        for tool in ["chmod:", "chown:", "touch:", "chattr:"] {
            assert!(result_text(&end).contains(tool), "{mode}: {tool} {end}");
        }
        let metadata = if mode == "read-only" {
            "no metadata changes".to_string()
        } else {
            "metadata changes to files below them".to_string()
        };
        assert!(result_text(&end).contains(&metadata), "{end}");
        assert_eq!(
            metadata_helper(&helper, "state", &outside),
            before,
            "{mode}"
        );

        let outcomes = metadata_changes(&s, &mut p, &outside, &owner).await;
        let outcomes = outcomes.as_object().unwrap();
        assert!(outcomes.len() >= 22, "{outcomes:?}");
        for (operation, outcome) in outcomes {
            assert_eq!(outcome, "EPERM", "{mode}: {operation} outside the roots");
        }
        assert_eq!(
            metadata_helper(&helper, "state", &outside),
            before,
            "{mode}"
        );

        let outcomes = metadata_changes(&s, &mut p, &inside, &owner).await;
        let expected = if mode == "workspace-write" {
            "ok"
        } else {
            "EPERM"
        };
        for (operation, outcome) in outcomes.as_object().unwrap() {
            assert_eq!(
                outcome, expected,
                "{mode}: {operation} inside the workspace"
            );
        }
        let after_inside = metadata_helper(&helper, "state", &inside);
        if mode == "workspace-write" {
            let after: Value = serde_json::from_str(&after_inside).unwrap();
            let before: Value = serde_json::from_str(&before_inside).unwrap();
            for key in ["mode", "mtime_ns", "xattrs", "flags"] {
                assert_ne!(after[key], before[key], "{key} changed inside: {after}");
            }
        } else {
            assert_eq!(after_inside, before_inside, "read-only");
        }
        drop(p);
    }
}

/// A confined command makes no device node, inside the roots either (`mknod /tmp/disk b 8 0`
/// would give a command running as root the raw disk), but FIFOs still work.
#[tokio::test]
async fn workspace_write_refuses_device_nodes_and_keeps_fifos() {
    let Some((s, mut p)) = sandboxed(&["--sandbox", "workspace-write"]).await else {
        return;
    };
    let tmp = tempfile::Builder::new()
        .prefix("zi-mknod-")
        .tempdir_in("/tmp")
        .unwrap();
    for target in [
        s.cwd.join("disk"),
        tmp.path().join("disk"),
        s.cwd.join("console"),
    ] {
        let kind = if target.ends_with("console") {
            "c 5 1"
        } else {
            "b 8 0"
        };
        let end = s
            .bash(&mut p, &format!("mknod {} {kind}", target.display()))
            .await;
        assert_eq!(end["isError"], true, "{end}");
        assert!(result_text(&end).contains("Permission denied"), "{end}");
        assert!(std::fs::symlink_metadata(&target).is_err(), "{target:?}");
    }
    let end = s
        .bash(&mut p, "mkfifo pipe && test -p pipe && echo fifo")
        .await;
    assert_eq!(end["isError"], false, "{end}");
    assert!(result_text(&end).starts_with("fifo"), "{end}");
}

#[tokio::test]
async fn read_only_denies_cwd_writes_and_network_on_allows_loopback_tcp() {
    let Some((s, mut p)) = sandboxed(&["--sandbox", "read-only"]).await else {
        return;
    };
    let end = s.bash(&mut p, "echo a > inside.txt").await;
    assert_eq!(end["isError"], true, "{end}");
    assert!(!s.cwd.join("inside.txt").exists());
    assert!(
        result_text(&end).contains("[The command ran in the read-only sandbox (writes limited to /dev/null, no metadata changes, network off); it may have failed because of the sandbox.]"),
        "{end}"
    );
    let end = s
        .bash(&mut p, "cat /proc/self/status > /dev/null && echo read")
        .await;
    assert_eq!(end["isError"], false, "{end}");
    drop(p);

    let mut p = s
        .spawn(&["--sandbox", "workspace-write", "--sandbox-network"])
        .await;
    let tcp = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = tcp.local_addr().unwrap().port();
    let end = s
        .bash(
            &mut p,
            &format!("exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected"),
        )
        .await;
    assert_eq!(end["isError"], false, "{end}");
    assert!(result_text(&end).contains("connected"), "{end}");
    assert_eq!(
        end["result"]["details"]["sandbox"],
        json!({"mode": "workspace-write", "network": true, "enforcement": "landlock"})
    );
}

#[tokio::test]
async fn confined_modes_use_a_non_login_shell_unless_login_shell_is_set() {
    let Some((s, mut p)) = sandboxed(&["--sandbox", "workspace-write"]).await else {
        return;
    };
    let probe = "shopt -q login_shell && echo login || echo non-login";
    let end = s.bash(&mut p, probe).await;
    assert!(result_text(&end).starts_with("non-login"), "{end}");
    drop(p);
    s.agent.write(
        "settings.json",
        r#"{"sandbox": {"mode": "workspace-write", "loginShell": true}}"#,
    );
    let mut p = s.spawn(&[]).await;
    let end = s.bash(&mut p, probe).await;
    assert!(result_text(&end).starts_with("login"), "{end}");
    assert_eq!(
        end["result"]["details"]["sandbox"]["mode"],
        "workspace-write"
    );
}
