//! FIFOs, devices and oversized files among configuration, extensions, skills and journals.

use super::*;

fn mkfifo(path: &Path) {
    let c_path = std::ffi::CString::new(path.as_os_str().as_encoded_bytes())
        .unwrap_or_else(|e| panic!("path: {e}"));
    // SAFETY: mkfifo reads a NUL-terminated path that outlives the call.
    let status = unsafe { libc::mkfifo(c_path.as_ptr(), 0o600) };
    assert_eq!(status, 0, "mkfifo {}", path.display());
}

fn link_to_dev_zero(path: &Path) {
    symlink("/dev/zero", path).unwrap_or_else(|e| panic!("symlink {}: {e}", path.display()));
}

// ---------------------------------------------------------------------------------------------
// Configuration files are regular files read with a bound (point 4)
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifo_and_device_configuration_files_are_refused_before_ready() {
    let agent = AgentDir::new();
    let cwd = temp_cwd();
    let refused: Vec<PathBuf> = vec![
        agent.path().join("models.json"),
        agent.path().join("settings.json"),
        agent.path().join("auth.json"),
        agent.path().join("trust.json"),
        agent.path().join("AGENTS.md"),
        cwd.path.join("AGENTS.md"),
    ];
    for (n, path) in refused.iter().enumerate() {
        if n % 2 == 0 {
            mkfifo(path);
        } else {
            link_to_dev_zero(path);
        }
    }
    let mut p = zi(&cwd.path)
        .args(["--mode", "rpc", "--no-session", "--agent-dir"])
        .arg(agent.path())
        .spawn_rpc()
        .await;
    p.request_ok("s", "session.get_state", None).await;
    p.request_ok("l", "model.list", None).await;
    let exited = p.exit_by_eof().await;
    let warnings = warning_lines(&exited.stderr);
    for path in &refused {
        let named = format!("{} is not a regular file", path.display());
        assert!(
            warnings.iter().any(|w| w.contains(&named)),
            "no warning names {}: {}",
            path.display(),
            exited.stderr
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fifo_extension_source_is_refused_before_ready() {
    let agent = AgentDir::new();
    let cwd = temp_cwd();
    let extensions = agent.path().join("extensions");
    std::fs::create_dir_all(&extensions).unwrap_or_else(|e| panic!("{e}"));
    let fifo = extensions.join("fifo.lua");
    mkfifo(&fifo);
    let mut p = zi(&cwd.path)
        .args(["--mode", "rpc", "--no-session", "--agent-dir"])
        .arg(agent.path())
        .spawn_rpc()
        .await;
    let exited = p.exit_by_eof().await;
    let named = format!("{} is not a regular file (a FIFO)", fifo.display());
    assert!(
        warning_lines(&exited.stderr)
            .iter()
            .any(|w| w.contains(&named)),
        "{}",
        exited.stderr
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oversized_skill_is_refused_with_a_warning() {
    let agent = AgentDir::new();
    let cwd = temp_cwd();
    let body = "x".repeat(1024 * 1024);
    agent.write(
        "skills/big/SKILL.md",
        &format!("---\ndescription: too big\n---\n{body}"),
    );
    let finished = run(
        zi(&cwd.path)
            .args(["--mode", "rpc", "--no-session", "--agent-dir"])
            .arg(agent.path()),
        b"",
    )
    .await;
    assert_eq!(finished.code, Some(0), "{}", finished.stderr_text());
    let stderr = finished.stderr_text();
    assert!(
        warning_lines(&stderr)
            .iter()
            .any(|w| w.starts_with("Warning: (skills)")
                && w.ends_with("SKILL.md exceeds 1048576 bytes")),
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resume_refuses_fifo_and_device_journals_at_once() {
    let agent = AgentDir::new();
    let cwd = temp_cwd();
    let fifo = cwd.path.join("fifo.jsonl");
    mkfifo(&fifo);
    let zero = cwd.path.join("zero.jsonl");
    link_to_dev_zero(&zero);
    for journal in [&fifo, &zero] {
        let finished = run(
            zi(&cwd.path)
                .args(["--mode", "rpc", "--agent-dir"])
                .arg(agent.path())
                .arg("-r")
                .arg(journal),
            b"",
        )
        .await;
        assert_eq!(finished.code, Some(1), "{}", finished.stderr_text());
        assert!(finished.stdout.is_empty(), "no frame before the failure");
        let stderr = finished.stderr_text();
        assert!(
            stderr.contains(&format!("{} is not a regular file", journal.display())),
            "{stderr}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn continue_skips_a_fifo_in_the_session_directory() {
    let agent = AgentDir::new();
    let cwd = temp_cwd();
    let sessions = temp_cwd();
    mkfifo(&sessions.path.join("newest.jsonl"));
    let mut p = zi(&cwd.path)
        .args(["--mode", "rpc", "-c", "--agent-dir"])
        .arg(agent.path())
        .arg("--session-dir")
        .arg(&sessions.path)
        .spawn_rpc()
        .await;
    let state = p.ready();
    assert_eq!(state["messageCount"], 0, "a new session: {state}");
    p.exit_by_eof().await;
}
