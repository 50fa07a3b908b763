//! Black-box tests of the bash sandbox (docs/approvals.md#the-sandbox) on this machine's real
//! kernel: writes inside and outside the roots, TCP, UDP, Unix sockets, no-new-privs, signals to
//! zi, background tasks and descendants, the start-up probe and forced unavailability, the
//! `write`/`edit` path checks, configuration layers, and the v1 shape without configuration.
//!
//! Every directory lives outside `/tmp` and `$TMPDIR` (writable roots of `workspace-write`),
//! wherever the checkout lives ([`outside_writable_roots`]), so "outside the roots" really is
//! outside. Tests print `SKIP: REASON` and
//! pass when the kernel offers no usable Landlock.

use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};
use zi_sandbox::{MIN_LANDLOCK_ABI, kernel_landlock_abi};
use zi_test_support::dirs::{AgentDir, TempCwd, outside_writable_roots};
use zi_test_support::harness::Harness;
use zi_test_support::mock_llm::{MockLlm, Step, start_mock};
use zi_test_support::zi_command::ZiCommand;

const ZI: &str = env!("CARGO_BIN_EXE_zi");
const WAIT: Duration = Duration::from_secs(60);
const KEY: &str = "test-key-sandbox";

/// The kernel's Landlock ABI, or `None` after printing why the sandbox tests are skipped.
fn landlock_abi() -> Option<u32> {
    match kernel_landlock_abi() {
        Ok(abi) if abi >= MIN_LANDLOCK_ABI => Some(abi),
        Ok(abi) => {
            println!("SKIP: Landlock ABI {abi} is older than {MIN_LANDLOCK_ABI}");
            None
        }
        Err(reason) => {
            println!("SKIP: {reason}");
            None
        }
    }
}

/// A cwd, a HOME and an agent directory, all outside `/tmp`.
struct Scene {
    _root: TempCwd,
    mock: MockLlm,
    agent: AgentDir,
    cwd: PathBuf,
    home: PathBuf,
}

async fn scene() -> Scene {
    let root = outside_writable_roots("zi-sandbox-", Path::new(env!("CARGO_TARGET_TMPDIR")));
    let base = root.path.clone();
    let cwd = base.join("project");
    let home = base.join("home");
    std::fs::create_dir_all(&cwd).unwrap();
    std::fs::create_dir_all(&home).unwrap();
    let mock = start_mock().await;
    let agent = AgentDir::new_in(&base).models(&mock, KEY, &[json!({"id": "m1"})]);
    Scene {
        _root: root,
        mock,
        agent,
        cwd,
        home,
    }
}

impl Scene {
    fn command(&self, args: &[&str]) -> ZiCommand {
        ZiCommand::rpc(ZI, &self.agent, &self.cwd)
            .no_session()
            .model("mock/m1")
            .env("HOME", &self.home)
            .args(args)
            .timeout(WAIT)
    }

    async fn spawn(&self, args: &[&str]) -> Harness {
        self.command(args).spawn_rpc().await
    }

    /// Runs one tool call in its own prompt and returns its `tool_execution_end` event.
    async fn call(&self, p: &mut Harness, tool: &str, args: Value) -> Value {
        self.mock.push(Step::tool_call("c", tool, args));
        self.mock.push(Step::text("done"));
        let after = p.last_sequence();
        let id = format!("p{after}");
        p.request_ok(
            &id,
            "session.prompt",
            Some(json!({"delivery": "direct", "text": "go"})),
        )
        .await;
        let end = p.event_after("tool_execution_end", after).await;
        p.event_after("agent_settled", after).await;
        end["event"].clone()
    }

    /// The `workspace-write` roots as results name them: the cwd, `/tmp`, then `$TMPDIR`.
    fn roots_text(&self) -> String {
        let mut roots = vec![self.cwd.clone(), PathBuf::from("/tmp")];
        if let Some(tmpdir) =
            std::env::var_os("TMPDIR").and_then(|t| Path::new(&t).canonicalize().ok())
            && !roots.contains(&tmpdir)
        {
            roots.push(tmpdir);
        }
        roots
            .iter()
            .map(|r| r.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    }

    async fn bash(&self, p: &mut Harness, command: &str) -> Value {
        self.call(p, "bash", json!({"command": command})).await
    }
}

fn text(end: &Value) -> String {
    end["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

#[tokio::test]
async fn workspace_write_confines_writes_network_and_signals_but_keeps_unix_sockets() {
    let Some(_abi) = landlock_abi() else { return };
    let s = scene().await;
    let mut p = s.spawn(&["--sandbox", "workspace-write"]).await;

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
    assert!(text(&end).contains("Permission denied"), "{end}");
    assert!(
        text(&end).ends_with(&format!(
            "[The command ran in the workspace-write sandbox (writes limited to {}, metadata changes to files below them, network off); it may have failed because of the sandbox.]",
            s.roots_text()
        )),
        "{end}"
    );

    let end = s.bash(&mut p, "grep NoNewPrivs /proc/self/status").await;
    assert!(text(&end).contains("NoNewPrivs:\t1"), "{end}");

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
    assert!(!text(&end).contains("connected"), "{end}");
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
        assert!(text(&end).contains("status=1"), "{end}");
        assert!(text(&end).contains("Operation not permitted"), "{end}");
    }
    // zi is still serving.
    p.request_ok("s", "session.get_state", None).await;
}

#[tokio::test]
async fn background_tasks_and_their_descendants_are_confined() {
    let Some(_abi) = landlock_abi() else { return };
    let s = scene().await;
    let mut p = s.spawn(&["--sandbox", "workspace-write"]).await;
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
    assert!(text(&end).contains("Permission denied"), "{end}");
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
    serde_json::from_str(text(&end).trim()).unwrap_or_else(|_| panic!("{end}"))
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
    std::fs::write(&helper, include_str!("fixtures/metadata_ops.py")).unwrap();
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
            assert!(text(&end).contains(tool), "{mode}: {tool} {end}");
        }
        let metadata = if mode == "read-only" {
            "no metadata changes".to_string()
        } else {
            "metadata changes to files below them".to_string()
        };
        assert!(text(&end).contains(&metadata), "{end}");
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
    let Some(_abi) = landlock_abi() else { return };
    let s = scene().await;
    let mut p = s.spawn(&["--sandbox", "workspace-write"]).await;
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
        assert!(text(&end).contains("Permission denied"), "{end}");
        assert!(std::fs::symlink_metadata(&target).is_err(), "{target:?}");
    }
    let end = s
        .bash(&mut p, "mkfifo pipe && test -p pipe && echo fifo")
        .await;
    assert_eq!(end["isError"], false, "{end}");
    assert!(text(&end).starts_with("fifo"), "{end}");
}

#[tokio::test]
async fn read_only_denies_cwd_writes_and_network_on_allows_loopback_tcp() {
    let Some(_abi) = landlock_abi() else { return };
    let s = scene().await;
    let mut p = s.spawn(&["--sandbox", "read-only"]).await;
    let end = s.bash(&mut p, "echo a > inside.txt").await;
    assert_eq!(end["isError"], true, "{end}");
    assert!(!s.cwd.join("inside.txt").exists());
    assert!(
        text(&end).contains("[The command ran in the read-only sandbox (writes limited to /dev/null, no metadata changes, network off); it may have failed because of the sandbox.]"),
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
    assert!(text(&end).contains("connected"), "{end}");
    assert_eq!(
        end["result"]["details"]["sandbox"],
        json!({"mode": "workspace-write", "network": true, "enforcement": "landlock"})
    );
}

#[tokio::test]
async fn confined_modes_use_a_non_login_shell_unless_login_shell_is_set() {
    let Some(_abi) = landlock_abi() else { return };
    let s = scene().await;
    let probe = "shopt -q login_shell && echo login || echo non-login";
    let mut p = s.spawn(&["--sandbox", "workspace-write"]).await;
    let end = s.bash(&mut p, probe).await;
    assert!(text(&end).starts_with("non-login"), "{end}");
    drop(p);
    s.agent.write(
        "settings.json",
        r#"{"sandbox": {"mode": "workspace-write", "loginShell": true}}"#,
    );
    let mut p = s.spawn(&[]).await;
    let end = s.bash(&mut p, probe).await;
    assert!(text(&end).starts_with("login"), "{end}");
    assert_eq!(
        end["result"]["details"]["sandbox"]["mode"],
        "workspace-write"
    );
}

#[tokio::test]
async fn an_unavailable_sandbox_fails_the_call_or_warns_once() {
    let s = scene().await;
    let mut p = s
        .command(&["--sandbox", "workspace-write"])
        .env("ZI_TEST_SANDBOX_ABI", "2")
        .spawn_rpc()
        .await;
    let end = s.bash(&mut p, "echo ran > marker.txt").await;
    assert_eq!(end["isError"], true, "{end}");
    assert_eq!(
        text(&end),
        "The workspace-write sandbox is unavailable (Landlock ABI 2 is older than the required 3). The command was not run."
    );
    assert_eq!(end["result"]["details"]["code"], "sandbox_unavailable");
    assert_eq!(
        end["result"]["details"]["sandbox"]["enforcement"],
        "unavailable"
    );
    assert!(!s.cwd.join("marker.txt").exists(), "the command never ran");
    let warning = "Warning: (sandbox) workspace-write is unavailable: Landlock ABI 2 is older than the required 3";
    assert_eq!(
        p.stderr_text().matches(warning).count(),
        1,
        "{}",
        p.stderr_text()
    );
    drop(p);

    s.agent.write(
        "settings.json",
        r#"{"sandbox": {"mode": "read-only", "onUnavailable": "warn"}}"#,
    );
    let mut p = s
        .command(&[])
        .env("ZI_TEST_SANDBOX_UNAVAILABLE", "disabled")
        .spawn_rpc()
        .await;
    let end = s.bash(&mut p, "echo ran > marker.txt && echo fine").await;
    assert_eq!(end["isError"], false, "{end}");
    assert_eq!(
        text(&end),
        "fine\n\n[Warning: the read-only sandbox is unavailable (Landlock is disabled at boot); the command ran without it.]",
        "{end}"
    );
    assert!(end["result"]["details"].get("sandbox").is_none(), "{end}");
    assert!(s.cwd.join("marker.txt").exists());
    let warning = "Warning: (sandbox) read-only is unavailable: Landlock is disabled at boot";
    assert_eq!(
        p.stderr_text().matches(warning).count(),
        1,
        "{}",
        p.stderr_text()
    );
}

#[tokio::test]
async fn an_agent_directory_inside_a_writable_root_makes_the_sandbox_unavailable() {
    let Some(_abi) = landlock_abi() else { return };
    let s = scene().await;
    let agent = s.cwd.join("agent");
    std::fs::create_dir_all(&agent).unwrap();
    std::fs::copy(
        s.agent.path().join("models.json"),
        agent.join("models.json"),
    )
    .unwrap();
    let mut p = ZiCommand::new(ZI)
        .args(["--mode", "rpc", "--no-session", "--model", "mock/m1"])
        .arg("--agent-dir")
        .arg(&agent)
        .args(["--sandbox", "workspace-write"])
        .current_dir(&s.cwd)
        .env("HOME", &s.home)
        .timeout(WAIT)
        .spawn_rpc()
        .await;
    let end = s.bash(&mut p, "true").await;
    assert_eq!(
        end["result"]["details"]["code"], "sandbox_unavailable",
        "{end}"
    );
    assert!(
        text(&end).contains(&format!(
            "(the agent directory {} is inside the writable root {})",
            agent.display(),
            s.cwd.display()
        )),
        "{end}"
    );
}

#[tokio::test]
async fn write_and_edit_check_writable_roots_and_protected_paths() {
    let s = scene().await;
    std::fs::create_dir_all(s.cwd.join(".git")).unwrap();
    std::fs::write(s.cwd.join(".git/config"), "[core]\n").unwrap();
    std::fs::create_dir_all(s.cwd.join(".zi")).unwrap();
    std::fs::write(s.cwd.join(".zi/settings.json"), "{}\n").unwrap();
    std::fs::create_dir_all(s.cwd.join("src")).unwrap();
    std::os::unix::fs::symlink(&s.home, s.cwd.join("src/link")).unwrap();
    // Path checks need no kernel support: they run in zi itself.
    let mut p = s
        .command(&["--sandbox", "workspace-write"])
        .env("ZI_TEST_SANDBOX_UNAVAILABLE", "not-supported")
        .spawn_rpc()
        .await;

    let end = s
        .call(
            &mut p,
            "write",
            json!({"path": "src/ok.txt", "content": "fine"}),
        )
        .await;
    assert_eq!(end["isError"], false, "{end}");
    assert_eq!(
        std::fs::read_to_string(s.cwd.join("src/ok.txt")).unwrap(),
        "fine"
    );

    let outside = s.home.join("x.txt");
    let end = s
        .call(
            &mut p,
            "write",
            json!({"path": outside.display().to_string(), "content": "no"}),
        )
        .await;
    assert_eq!(end["isError"], true, "{end}");
    assert_eq!(end["result"]["details"]["code"], "sandbox_denied");
    assert_eq!(
        text(&end),
        format!(
            "{} is outside the writable roots of the workspace-write sandbox ({}). The file was not changed.",
            outside.display(),
            s.roots_text()
        )
    );
    assert!(!outside.exists());

    // A symlink inside the cwd pointing outside does not make its target writable.
    let end = s
        .call(
            &mut p,
            "write",
            json!({"path": "src/link/y.txt", "content": "no"}),
        )
        .await;
    assert_eq!(end["result"]["details"]["code"], "sandbox_denied", "{end}");
    assert_eq!(
        end["result"]["details"]["path"],
        s.home.join("y.txt").display().to_string()
    );
    assert!(!s.home.join("y.txt").exists());

    for (tool, path) in [("write", ".git/config"), ("edit", ".zi/settings.json")] {
        let args = if tool == "write" {
            json!({"path": path, "content": "changed"})
        } else {
            json!({"path": path, "edits": [{"oldText": "{}", "newText": "{\"x\":1}"}]})
        };
        let end = s.call(&mut p, tool, args).await;
        assert_eq!(end["result"]["details"]["code"], "sandbox_denied", "{end}");
        let protected = s.cwd.join(path).parent().unwrap().to_path_buf();
        assert_eq!(
            text(&end),
            format!(
                "{} is under the protected path {} of the workspace-write sandbox. The file was not changed.",
                s.cwd.join(path).display(),
                protected.display()
            )
        );
    }
    assert_eq!(
        std::fs::read_to_string(s.cwd.join(".git/config")).unwrap(),
        "[core]\n"
    );
    assert_eq!(
        std::fs::read_to_string(s.cwd.join(".zi/settings.json")).unwrap(),
        "{}\n"
    );

    // read-only: no file change anywhere.
    drop(p);
    let mut p = s
        .command(&["--sandbox", "read-only"])
        .env("ZI_TEST_SANDBOX_UNAVAILABLE", "not-supported")
        .spawn_rpc()
        .await;
    let end = s
        .call(
            &mut p,
            "edit",
            json!({"path": "src/ok.txt", "edits": [{"oldText": "fine", "newText": "edited"}]}),
        )
        .await;
    assert_eq!(end["result"]["details"]["code"], "sandbox_denied", "{end}");
    assert_eq!(
        std::fs::read_to_string(s.cwd.join("src/ok.txt")).unwrap(),
        "fine"
    );
}

#[tokio::test]
async fn sandbox_configuration_layers_fail_closed_and_flags_win() {
    let s = scene().await;
    // An invalid sandbox value rejects the file with a warning and fails closed.
    s.agent
        .write("settings.json", r#"{"sandbox": {"mode": "loose"}}"#);
    let mut p = s.spawn(&[]).await;
    let settings = s.agent.path().join("settings.json");
    assert!(
        p.stderr_text().contains(&format!(
            "Warning: (global settings) {}: sandbox.mode must be read-only, workspace-write, or full",
            settings.display()
        )),
        "{}",
        p.stderr_text()
    );
    let end = s.bash(&mut p, "echo ran > marker.txt").await;
    assert_eq!(
        end["result"]["details"]["code"], "approval_config_invalid",
        "{end}"
    );
    assert_eq!(
        text(&end),
        format!(
            "Approval settings are invalid ({}: sandbox.mode must be read-only, workspace-write, or full). The tool call was not run.",
            settings.display()
        )
    );
    assert!(!s.cwd.join("marker.txt").exists());
    std::fs::write(s.cwd.join("r.txt"), "readable").unwrap();
    let end = s.call(&mut p, "read", json!({"path": "r.txt"})).await;
    assert_eq!(end["isError"], false, "read still works: {end}");
    drop(p);

    // A higher layer that sets the mode explicitly restores service: ZI_SANDBOX, then the flag.
    let mut p = s.command(&[]).env("ZI_SANDBOX", "full").spawn_rpc().await;
    let end = s.bash(&mut p, "echo ran").await;
    assert_eq!(end["isError"], false, "{end}");
    assert!(end["result"]["details"].get("sandbox").is_none(), "{end}");
    drop(p);

    // Invalid flag and environment values stop zi before ready.
    let finished = s
        .command(&["--sandbox", "loose"])
        .run_to_end(b"", WAIT)
        .await
        .unwrap();
    assert_eq!(finished.code, Some(1));
    assert!(
        finished
            .stderr_text()
            .contains("--sandbox must be read-only, workspace-write, or full"),
        "{}",
        finished.stderr_text()
    );
    let finished = s
        .command(&[])
        .env("ZI_SANDBOX", "loose")
        .run_to_end(b"", WAIT)
        .await
        .unwrap();
    assert_eq!(finished.code, Some(1));
    assert!(
        finished
            .stderr_text()
            .contains("ZI_SANDBOX must be read-only, workspace-write, or full"),
        "{}",
        finished.stderr_text()
    );

    // Valid layers: the trusted project's key wins over the global one, the flag over both.
    if landlock_abi().is_none() {
        return;
    }
    s.agent
        .write("settings.json", r#"{"sandbox": {"mode": "read-only"}}"#);
    let mut p = s
        .command(&["--sandbox", "workspace-write"])
        .spawn_rpc()
        .await;
    let end = s.bash(&mut p, "echo a > inside.txt").await;
    assert_eq!(end["isError"], false, "{end}");
    assert_eq!(
        end["result"]["details"]["sandbox"]["mode"],
        "workspace-write"
    );
    drop(p);
    let mut p = s.spawn(&[]).await;
    let end = s.bash(&mut p, "echo a > inside2.txt").await;
    assert_eq!(end["isError"], true, "{end}");
    assert_eq!(end["result"]["details"]["sandbox"]["mode"], "read-only");
}

#[tokio::test]
async fn without_configuration_bash_write_and_edit_are_v1() {
    let s = scene().await;
    let mut p = s.spawn(&[]).await;
    let end = s
        .bash(
            &mut p,
            "shopt -q login_shell && echo login; echo x > \"$HOME/free.txt\" && echo wrote",
        )
        .await;
    assert_eq!(text(&end), "login\nwrote");
    let details = end["result"]["details"].as_object().unwrap();
    let keys: Vec<&str> = details.keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        [
            "outcome",
            "status",
            "exitCode",
            "signal",
            "truncated",
            "fullOutputPath",
            "outputBytes",
            "durationMs"
        ]
    );
    assert!(s.home.join("free.txt").exists());
    let end = s
        .call(
            &mut p,
            "write",
            json!({"path": s.home.join("w.txt").display().to_string(), "content": "v1"}),
        )
        .await;
    assert_eq!(end["isError"], false, "{end}");
    let end = s
        .call(
            &mut p,
            "bash",
            json!({"command": "true", "background": true}),
        )
        .await;
    assert_eq!(
        end["result"]["details"],
        json!({"outcome": "success", "taskId": "task-1", "status": "running"})
    );
    assert!(!p.stderr_text().contains("sandbox"), "{}", p.stderr_text());
}

const EXEC_EXTENSION: &str = r#"
zi.register_command{ name = "touch", description = "writes a file through ctx.exec", execute = function(args, ctx)
  local r = ctx.exec{ "sh", "-c", "echo lua > " .. args .. " && echo wrote" }
  return "code=" .. tostring(r.code) .. " " .. r.stdout .. r.stderr
end }
"#;

#[tokio::test]
async fn lua_ctx_exec_runs_inside_the_session_sandbox() {
    let Some(_abi) = landlock_abi() else { return };
    let s = scene().await;
    s.agent.write("extensions/touch.lua", EXEC_EXTENSION);
    let mut p = s.spawn(&["--sandbox", "workspace-write"]).await;
    let inside = s.cwd.join("lua.txt");
    let outside = s.home.join("lua.txt");
    for (id, target) in [("i1", &inside), ("i2", &outside)] {
        let response = p
            .request_ok(
                id,
                "command.invoke",
                Some(json!({"name": "touch", "arguments": target.display().to_string()})),
            )
            .await;
        let message = response["message"].as_str().unwrap_or_default().to_string();
        if target == &inside {
            assert!(message.starts_with("code=0 wrote"), "{response}");
        } else {
            assert!(message.contains("Permission denied"), "{response}");
        }
    }
    assert!(inside.exists());
    assert!(
        !outside.exists(),
        "ctx.exec could not write outside the roots"
    );
    drop(p);

    // Required and unavailable: the command never runs.
    let mut p = s
        .command(&["--sandbox", "workspace-write"])
        .env("ZI_TEST_SANDBOX_UNAVAILABLE", "not-supported")
        .spawn_rpc()
        .await;
    let response = p
        .request(
            "i3",
            "command.invoke",
            Some(json!({"name": "touch", "arguments": outside.display().to_string()})),
        )
        .await;
    assert!(
        response.to_string().contains(
            "The workspace-write sandbox is unavailable (Landlock is not supported by this kernel). The command was not run."
        ),
        "{response}"
    );
    assert!(!outside.exists());
}

/// Prompts one `bash` call, waits for its `approval_request` (after `after`) and answers it;
/// returns the request and the call's `tool_execution_end`.
async fn escalate(
    s: &Scene,
    p: &mut Harness,
    call_id: &str,
    command: &str,
    answer: Value,
) -> (Value, Value) {
    s.mock.push(Step::tool_call(
        call_id,
        "bash",
        json!({"command": command}),
    ));
    s.mock.push(Step::text("done"));
    let after = p.last_sequence();
    p.request_ok(
        &format!("p-{call_id}"),
        "session.prompt",
        Some(json!({"delivery": "direct", "text": "go"})),
    )
    .await;
    let asked = p
        .wait_for("an approval_request", |f| {
            f["type"] == "approval_request" && f["sequence"].as_u64().unwrap() > after
        })
        .await["approval"]
        .clone();
    let mut params = answer;
    params["approvalId"] = asked["approvalId"].clone();
    p.request_ok(&format!("r-{call_id}"), "approval.respond", Some(params))
        .await;
    let end = p.event_after("tool_execution_end", after).await["event"].clone();
    p.event_after("agent_settled", after).await;
    (asked, end)
}

#[tokio::test]
async fn a_sandbox_denied_command_escalates_and_allow_once_reruns_it_outside() {
    let Some(abi) = landlock_abi() else { return };
    let s = scene().await;
    let mut p = s
        .spawn(&["--sandbox", "workspace-write", "--approvals", "on-failure"])
        .await;
    let state = p
        .request_ok(
            "ap",
            "connection.set_approvals",
            Some(json!({"enabled": true})),
        )
        .await;
    assert_eq!(state["policy"], "on-failure");
    assert_eq!(
        state["sandbox"],
        json!({
            "mode": "workspace-write",
            "network": false,
            "writableRoots": s.roots_text().split(", ").collect::<Vec<_>>(),
            "enforcement": "landlock+seccomp",
            "landlockAbi": abi,
        })
    );

    let command = format!("echo escaped > {}/out.txt", s.home.display());
    let (asked, end) = escalate(
        &s,
        &mut p,
        "e1",
        &command,
        json!({"decision": "allow_once"}),
    )
    .await;
    assert_eq!(asked["kind"], "escalation", "{asked}");
    assert_eq!(
        asked["reason"],
        json!({"type": "sandbox_denied", "exitCode": 1, "signal": null})
    );
    assert_eq!(
        asked["summary"],
        format!("Run outside the sandbox: {command}")
    );
    assert_eq!(
        asked["sandbox"],
        json!({"mode": "workspace-write", "network": false})
    );
    assert_eq!(asked["preview"]["type"], "output");
    assert_eq!(asked["preview"]["exitCode"], 1);
    assert!(
        asked["preview"]["text"]
            .as_str()
            .unwrap()
            .contains("Permission denied"),
        "{asked}"
    );
    assert!(asked.get("suggestedRule").is_none(), "{asked}");
    assert_eq!(
        asked["decisions"],
        json!(["allow_once", "allow_session", "deny", "cancel_turn"])
    );
    assert_eq!(end["isError"], false, "{end}");
    assert_eq!(
        text(&end),
        "[The first attempt failed in the workspace-write sandbox (exit 1); re-ran without the sandbox after approval.]\n\n(no output)",
        "{end}"
    );
    assert_eq!(
        end["result"]["details"]["sandbox"],
        json!({"mode": "none", "escalatedFrom": "workspace-write", "approvalId": asked["approvalId"]})
    );
    assert_eq!(
        std::fs::read_to_string(s.home.join("out.txt")).unwrap(),
        "escaped\n"
    );
    let outcome = p
        .frames()
        .iter()
        .find(|f| {
            f["type"] == "session_event"
                && f["event"]["type"] == "operation_outcome"
                && f["event"]["outcome"]["operationId"]
                    == format!("approval/{}", asked["approvalId"].as_str().unwrap())
        })
        .cloned()
        .expect("the escalation's outcome");
    assert_eq!(outcome["event"]["outcome"]["operation"], "escalation");
    assert_eq!(outcome["event"]["outcome"]["result"], "succeeded");

    // `deny` keeps the sandboxed result, with the hint.
    let command = format!("echo kept > {}/denied.txt", s.home.display());
    let (_, end) = escalate(&s, &mut p, "e2", &command, json!({"decision": "deny"})).await;
    assert_eq!(end["isError"], true, "{end}");
    assert!(
        text(&end).ends_with(&format!(
            "[The command ran in the workspace-write sandbox (writes limited to {}, metadata changes to files below them, network off); it may have failed because of the sandbox.]",
            s.roots_text()
        )),
        "{end}"
    );
    assert_eq!(
        end["result"]["details"]["sandbox"]["mode"],
        "workspace-write"
    );
    assert!(!s.home.join("denied.txt").exists());

    // `allow_session` on an escalation: that exact command runs outside from then on.
    let command = format!("echo again >> {}/granted.txt", s.home.display());
    let (_, end) = escalate(
        &s,
        &mut p,
        "e3",
        &command,
        json!({"decision": "allow_session"}),
    )
    .await;
    assert_eq!(end["isError"], false, "{end}");
    let before = p
        .frames()
        .iter()
        .filter(|f| f["type"] == "approval_request")
        .count();
    let end = s.bash(&mut p, &command).await;
    assert_eq!(end["isError"], false, "{end}");
    assert_eq!(
        end["result"]["details"]["sandbox"],
        json!({"mode": "none", "escalatedFrom": "workspace-write"})
    );
    assert_eq!(
        p.frames()
            .iter()
            .filter(|f| f["type"] == "approval_request")
            .count(),
        before,
        "the granted command was not asked again"
    );
    assert_eq!(
        std::fs::read_to_string(s.home.join("granted.txt")).unwrap(),
        "again\nagain\n"
    );
}

#[tokio::test]
async fn an_approved_escalation_ends_with_its_call_and_a_reused_call_id_is_asked_again() {
    let Some(_abi) = landlock_abi() else { return };
    let s = scene().await;
    let mut p = s
        .spawn(&["--sandbox", "workspace-write", "--approvals", "on-failure"])
        .await;
    p.request_ok(
        "ap",
        "connection.set_approvals",
        Some(json!({"enabled": true})),
    )
    .await;
    let command = format!("echo once > {}/once.txt", s.home.display());
    let (_, end) = escalate(
        &s,
        &mut p,
        "same",
        &command,
        json!({"decision": "allow_once"}),
    )
    .await;
    assert_eq!(end["isError"], false, "{end}");
    assert!(s.home.join("once.txt").exists());

    // Call ids come from the model: a later call with the same id is a new call, confined
    // again and asked again, never let out by the earlier approval (which ran it unasked).
    let command = format!("echo stale > {}/stale.txt", s.home.display());
    let (asked, end) = escalate(&s, &mut p, "same", &command, json!({"decision": "deny"})).await;
    assert_eq!(asked["kind"], "escalation", "{asked}");
    assert_eq!(end["isError"], true, "{end}");
    assert_eq!(
        end["result"]["details"]["sandbox"]["mode"],
        "workspace-write"
    );
    assert!(!s.home.join("stale.txt").exists());
}

#[tokio::test]
async fn without_an_opted_in_client_a_sandbox_denial_gets_the_hint() {
    let Some(_abi) = landlock_abi() else { return };
    let s = scene().await;
    let mut p = s
        .spawn(&["--sandbox", "workspace-write", "--approvals", "untrusted"])
        .await;
    s.mock.push(Step::tool_call(
        "c",
        "bash",
        json!({"command": format!("echo no > {}/x.txt", s.home.display())}),
    ));
    s.mock.push(Step::text("done"));
    // Untrusted asks before running: unattended, so approval_required, never an escalation.
    p.request_ok(
        "p1",
        "session.prompt",
        Some(json!({"delivery": "direct", "text": "go"})),
    )
    .await;
    let end = p.event("tool_execution_end").await;
    p.event("agent_settled").await;
    assert_eq!(
        end["result"]["details"]["code"], "approval_required",
        "{end}"
    );
    drop(p);

    let mut p = s
        .spawn(&["--sandbox", "workspace-write", "--approvals", "on-failure"])
        .await;
    let end = s
        .bash(&mut p, &format!("echo no > {}/x.txt", s.home.display()))
        .await;
    assert_eq!(end["isError"], true, "{end}");
    assert!(
        text(&end).contains("it may have failed because of the sandbox."),
        "{end}"
    );
    assert!(
        p.frames().iter().all(|f| f["type"] != "approval_request"),
        "no frame without opt-in"
    );
    assert!(!s.home.join("x.txt").exists());
}

#[tokio::test]
async fn a_connection_tightens_the_sandbox_and_its_state_is_reported() {
    let Some(abi) = landlock_abi() else { return };
    let s = scene().await;
    let mut p = s.spawn(&[]).await;
    let state = p
        .request_ok(
            "ap",
            "connection.set_approvals",
            Some(json!({"enabled": true, "sandbox": {"mode": "read-only"}})),
        )
        .await;
    assert_eq!(
        state["sandbox"],
        json!({
            "mode": "read-only",
            "network": false,
            "writableRoots": [],
            "enforcement": "landlock+seccomp",
            "landlockAbi": abi,
        })
    );
    let snapshot = p.request_ok("s1", "session.get_state", None).await;
    assert_eq!(snapshot["approvals"]["sandbox"], state["sandbox"]);
    let end = s.bash(&mut p, "touch inside.txt").await;
    assert_eq!(end["isError"], true, "{end}");
    assert_eq!(end["result"]["details"]["sandbox"]["mode"], "read-only");
    assert!(
        !s.cwd.join("inside.txt").exists(),
        "read-only applied to bash"
    );
    drop(p);

    // The operator's workspace-write is a floor: a connection cannot loosen it.
    let mut p = s.spawn(&["--sandbox", "workspace-write"]).await;
    for (params, message) in [
        (
            json!({"enabled": true, "sandbox": {"mode": "full"}}),
            "Sandbox cannot be looser than workspace-write set by --sandbox",
        ),
        (
            json!({"enabled": true, "sandbox": {"network": true}}),
            "Sandbox cannot be looser than workspace-write set by --sandbox",
        ),
        (
            json!({"enabled": true, "sandbox": {"writableRoots": [s.home.display().to_string()]}}),
            "Sandbox cannot be looser than workspace-write set by --sandbox",
        ),
    ] {
        let response = p
            .request("bad", "connection.set_approvals", Some(params))
            .await;
        assert_eq!(response["error"]["code"], "operation_failed", "{response}");
        assert_eq!(response["error"]["message"], message);
    }
    // Under `full` a connection may add roots (and they must exist).
    drop(p);
    let mut p = s.spawn(&[]).await;
    let missing = s.home.join("missing");
    let response = p
        .request(
            "bad",
            "connection.set_approvals",
            Some(json!({"enabled": true, "sandbox": {"mode": "workspace-write", "writableRoots": [missing.display().to_string()]}})),
        )
        .await;
    assert_eq!(
        response["error"]["message"],
        format!(
            "Sandbox writable root does not exist: {}",
            missing.display()
        )
    );
    let state = p
        .request_ok(
            "ap",
            "connection.set_approvals",
            Some(json!({"enabled": true, "sandbox": {"mode": "workspace-write", "writableRoots": [s.home.display().to_string()]}})),
        )
        .await;
    assert!(
        state["sandbox"]["writableRoots"]
            .as_array()
            .unwrap()
            .contains(&json!(s.home.display().to_string())),
        "{state}"
    );
    let end = s
        .bash(&mut p, &format!("echo ok > {}/added.txt", s.home.display()))
        .await;
    assert_eq!(end["isError"], false, "{end}");
    assert!(s.home.join("added.txt").exists());
}

#[tokio::test]
async fn write_outside_the_roots_and_to_protected_paths_asks_through_the_evaluator() {
    let s = scene().await;
    std::fs::create_dir_all(s.cwd.join(".git")).unwrap();
    std::fs::write(s.cwd.join(".git/config"), "[core]\n").unwrap();
    // Path checks need no kernel support; a forced unavailability keeps bash out of the way.
    let mut p = s
        .command(&["--sandbox", "workspace-write", "--approvals", "on-failure"])
        .env("ZI_TEST_SANDBOX_UNAVAILABLE", "not-supported")
        .spawn_rpc()
        .await;
    p.request_ok(
        "ap",
        "connection.set_approvals",
        Some(json!({"enabled": true})),
    )
    .await;
    let outside = s.home.join("x.txt");
    for (call_id, tool, args, reason, answer) in [
        (
            "w1",
            "write",
            json!({"path": outside.display().to_string(), "content": "approved"}),
            json!({"type": "outside_writable_roots", "path": outside.display().to_string()}),
            "allow_once",
        ),
        (
            "w2",
            "edit",
            json!({"path": ".git/config", "edits": [{"oldText": "[core]", "newText": "[core]\n\thooksPath = x"}]}),
            json!({"type": "protected_path", "path": s.cwd.join(".git/config").display().to_string()}),
            "deny",
        ),
    ] {
        s.mock.push(Step::tool_call(call_id, tool, args));
        s.mock.push(Step::text("done"));
        let after = p.last_sequence();
        p.request_ok(
            &format!("p-{call_id}"),
            "session.prompt",
            Some(json!({"delivery": "direct", "text": "go"})),
        )
        .await;
        let asked = p
            .wait_for("an approval_request", |f| {
                f["type"] == "approval_request" && f["sequence"].as_u64().unwrap() > after
            })
            .await["approval"]
            .clone();
        assert_eq!(asked["kind"], "file_change", "{asked}");
        assert_eq!(asked["reason"], reason, "{asked}");
        p.request_ok(
            &format!("r-{call_id}"),
            "approval.respond",
            Some(json!({"approvalId": asked["approvalId"], "decision": answer})),
        )
        .await;
        let end = p.event_after("tool_execution_end", after).await["event"].clone();
        p.event_after("agent_settled", after).await;
        match answer {
            "allow_once" => assert_eq!(end["isError"], false, "{end}"),
            _ => assert_eq!(end["result"]["details"]["code"], "approval_denied", "{end}"),
        }
    }
    assert_eq!(std::fs::read_to_string(&outside).unwrap(), "approved");
    assert_eq!(
        std::fs::read_to_string(s.cwd.join(".git/config")).unwrap(),
        "[core]\n"
    );

    // A sandbox that cannot be applied asks for an escalation before running.
    s.mock.push(Step::tool_call(
        "b1",
        "bash",
        json!({"command": "echo ran > ran.txt"}),
    ));
    s.mock.push(Step::text("done"));
    let after = p.last_sequence();
    p.request_ok(
        "p-b1",
        "session.prompt",
        Some(json!({"delivery": "direct", "text": "go"})),
    )
    .await;
    let asked = p
        .wait_for("an approval_request", |f| {
            f["type"] == "approval_request" && f["sequence"].as_u64().unwrap() > after
        })
        .await["approval"]
        .clone();
    assert_eq!(asked["kind"], "escalation", "{asked}");
    assert_eq!(
        asked["reason"],
        json!({"type": "sandbox_unavailable", "message": "Landlock is not supported by this kernel"})
    );
    p.request_ok(
        "r-b1",
        "approval.respond",
        Some(json!({"approvalId": asked["approvalId"], "decision": "allow_once"})),
    )
    .await;
    let end = p.event_after("tool_execution_end", after).await["event"].clone();
    assert_eq!(end["isError"], false, "{end}");
    assert_eq!(
        end["result"]["details"]["sandbox"],
        json!({"mode": "none", "escalatedFrom": "workspace-write"})
    );
    assert!(s.cwd.join("ran.txt").exists());
}
