//! Runs the copyable clients `examples/rpc/client.ts` (Node through tsx) and
//! `examples/rpc/client.py` (python3) against the real `zi` binary and the mock provider, and
//! against fake servers that break the protocol. A missing interpreter (or a missing tsx, which
//! `.ci/run` installs with `npm ci --prefix examples/rpc`) skips with a message.

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use serde_json::json;
use zi_test_support::dirs::AgentDir;
use zi_test_support::mock_llm::{MockLlm, Step};

fn examples() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/rpc")
}

/// The interpreter command for a client, or `None` (after printing why) to skip.
fn runner(client: &str) -> Option<Vec<String>> {
    let has = |bin: &str| {
        Command::new(bin)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    };
    match client {
        "ts" => {
            if !has("node") {
                eprintln!("SKIP: node is not installed; the TypeScript client was not run");
                return None;
            }
            let tsx = examples().join("node_modules/tsx/dist/cli.mjs");
            if !tsx.exists() {
                eprintln!(
                    "SKIP: tsx is not installed; run `npm ci --prefix examples/rpc` (as .ci/run does)"
                );
                return None;
            }
            Some(vec![
                "node".into(),
                tsx.display().to_string(),
                examples().join("client.ts").display().to_string(),
            ])
        }
        _ => {
            if !has("python3") {
                eprintln!("SKIP: python3 is not installed; the Python client was not run");
                return None;
            }
            Some(vec![
                "python3".into(),
                examples().join("client.py").display().to_string(),
            ])
        }
    }
}

fn run(runner: &[String], args: &[&str], home: &Path) -> Output {
    Command::new(&runner[0])
        .args(&runner[1..])
        .args(args)
        .env_clear()
        .env("HOME", home)
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .output()
        .unwrap_or_else(|e| panic!("run {runner:?}: {e}"))
}

/// Runs a client off the async runtime, so the mock provider keeps serving.
async fn run_async(runner: &[String], args: &[&str], home: &Path) -> Output {
    let runner = runner.to_vec();
    let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    let home = home.to_path_buf();
    tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        run(&runner, &args, &home)
    })
    .await
    .unwrap_or_else(|e| panic!("join: {e}"))
}

/// The client options that run the real zi in `cwd` with the agent directory and model.
fn client_args<'a>(cwd: &'a str, agent: &'a str, model: &'a str) -> Vec<&'a str> {
    let zi = env!("CARGO_BIN_EXE_zi");
    let zi_args = ["--agent-dir", agent, "--model", model];
    let mut args = vec!["--zi", zi, "--cwd", cwd];
    args.extend(zi_args.iter().flat_map(|arg| ["--arg", *arg]));
    args
}

async fn against_zi(client: &str) {
    let Some(runner) = runner(client) else { return };
    let mock = MockLlm::start()
        .await
        .unwrap_or_else(|e| panic!("mock: {e}"));
    mock.push(Step::Text(vec!["Hello from ".into(), client.into()]));
    let agent = AgentDir::new().models(
        &mock,
        "k",
        &[
            json!({"id": "m1"}),
            json!({"id": "vision", "input": ["text", "image"]}),
        ],
    );
    let home = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let cwd = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let agent_path = agent.path().display().to_string();
    let cwd_path = cwd.path().display().to_string();
    let base = client_args(&cwd_path, &agent_path, "mock/m1");
    let mut args = base.to_vec();
    args.push("Say hello");
    let out = run_async(&runner, &args, home.path()).await;
    assert!(
        out.status.success(),
        "{client} prompt failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!("Hello from {client}\n")
    );
    let sent = &mock.requests()[0].body;
    assert!(sent.to_string().contains("Say hello"), "{sent}");
    assert!(!sent.to_string().contains("image"), "{sent}");

    // `--image FILE` attaches the file; the model must accept images.
    let png = cwd.path().join("shot.png");
    std::fs::write(&png, b"\x89PNG\r\n\x1a\nfake").unwrap_or_else(|e| panic!("{e}"));
    let png_path = png.display().to_string();
    mock.push(Step::text("I see it"));
    let mut args: Vec<&str> = base
        .iter()
        .map(|arg| {
            if *arg == "mock/m1" {
                "mock/vision"
            } else {
                arg
            }
        })
        .collect();
    args.extend(["--image", &png_path]);
    args.push("What is this?");
    let out = run_async(&runner, &args, home.path()).await;
    assert!(
        out.status.success(),
        "{client} image prompt failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), "I see it\n");
    let sent = &mock.requests()[1].body;
    let user = &sent["messages"][1]["content"];
    assert_eq!(
        user[1],
        json!({"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgpmYWtl"}}),
        "{sent}"
    );
    // A text-only model refuses images: the client reports the error.
    let out = run_async(
        &runner,
        &{
            let mut args = base.to_vec();
            args.extend(["--image", &png_path, "Look"]);
            args
        },
        home.path(),
    )
    .await;
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("Model mock/m1 does not accept images"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let mut args = base.to_vec();
    args.extend(["--command", "missing"]);
    let out = run_async(&runner, &args, home.path()).await;
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("Command not found: missing"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[tokio::test]
async fn typescript_client_against_zi() {
    against_zi("ts").await;
}

#[tokio::test]
async fn python_client_against_zi() {
    against_zi("py").await;
}

/// Writes an executable fake server script.
fn fake_server(dir: &Path, body: &str) -> String {
    let path = dir.join("fake-zi");
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap_or_else(|e| panic!("{e}"));
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))
        .unwrap_or_else(|e| panic!("{e}"));
    path.display().to_string()
}

const READY: &str = r#"{"version":1,"sequence":1,"type":"ready","state":{"sessionId":"fake"}}"#;

fn fake_cases(client: &str) {
    let Some(runner) = runner(client) else { return };
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let cases = [
        (
            format!(
                "echo '{READY}'; read l; echo '{}'; sleep 30",
                r#"{"version":1,"sequence":3,"type":"response","id":"1","method":"session.prompt","ok":true,"result":{}}"#
            ),
            "RPC server sequence gap: expected 2, received 3",
        ),
        (
            format!(
                "echo '{READY}'; read l; echo '{}'; sleep 30",
                r#"{"version":1,"sequence":2,"type":"peer_request"}"#
            ),
            "Zi RPC emitted an unknown frame type: peer_request",
        ),
        (
            format!(
                "echo '{READY}'; read l; echo '{}'; sleep 30",
                r#"{"version":1,"sequence":2,"type":"protocol_error","code":"invalid_request","message":"nope","id":"1"}"#
            ),
            "Zi RPC rejected the reference client request: nope",
        ),
    ];
    for (script, expected) in cases {
        let zi = fake_server(dir.path(), &script);
        let started = Instant::now();
        let out = run(&runner, &["--zi", &zi, "hello"], dir.path());
        assert_eq!(out.status.code(), Some(1), "{client}: {out:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(expected), "{client}: {stderr}");
        assert!(started.elapsed() < Duration::from_secs(20), "{client} hung");
    }
    // A server that ignores EOF and SIGTERM but answers: killed after the grace, answer kept.
    let page = r#"{"version":1,"sequence":4,"type":"response","id":"3","method":"session.get_messages","ok":true,"result":{"start":0,"total":1,"nextStart":null,"messages":[{"role":"assistant","content":[{"type":"text","text":"done"}],"stopReason":"stop"}]}}"#;
    let zi = fake_server(
        dir.path(),
        &format!(
            "trap '' TERM HUP; echo '{READY}'; read l; echo '{}'; read l; echo '{}'; read l; echo '{page}'; exec sleep 60 < /dev/null",
            r#"{"version":1,"sequence":2,"type":"response","id":"1","method":"session.prompt","ok":true,"result":{"delivery":"direct"}}"#,
            r#"{"version":1,"sequence":3,"type":"response","id":"2","method":"session.await_idle","ok":true,"result":{}}"#
        ),
    );
    let started = Instant::now();
    let out = run(&runner, &["--zi", &zi, "hello"], dir.path());
    assert!(out.status.success(), "{client}: {out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "done\n");
    assert!(started.elapsed() < Duration::from_secs(20));
}

#[test]
fn typescript_client_rejects_protocol_violations() {
    fake_cases("ts");
}

#[test]
fn python_client_rejects_protocol_violations() {
    fake_cases("py");
}

/// `-h`/`--help` print the usage on stdout and exit 0 without starting zi; after `--` the same
/// word is an ordinary prompt.
fn help_cases(client: &str) {
    let Some(runner) = runner(client) else { return };
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let started = dir.path().join("started");
    let zi = fake_server(
        dir.path(),
        &format!("echo \"$@\" >> '{}'; exit 3", started.display()),
    );
    for flag in ["-h", "--help"] {
        let out = run(&runner, &["--zi", &zi, flag], dir.path());
        assert_eq!(out.status.code(), Some(0), "{client} {flag}: {out:?}");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            stdout.starts_with(&format!("usage: client.{client} ")),
            "{client} {flag}: {stdout}"
        );
        assert!(stdout.contains("--command NAME"), "{stdout}");
        assert!(!started.exists(), "{client} {flag} started zi");
    }
    let out = run(&runner, &["--zi", &zi, "--", "--help"], dir.path());
    assert_eq!(out.status.code(), Some(1), "{client}: {out:?}");
    assert!(started.exists(), "{client} -- --help did not start zi");
}

#[test]
fn typescript_client_prints_usage_for_help() {
    help_cases("ts");
}

#[test]
fn python_client_prints_usage_for_help() {
    help_cases("py");
}

/// The catalog helpers (`session.list`, `session.get_entries`, `session.fork`, zi extensions)
/// of a client against zi and a journal on disk.
fn catalog_cases(client: &str) {
    let Some(runner) = runner(client) else { return };
    let agent = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let home = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let cwd = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let text = cwd.path().display().to_string();
    let encoded = format!(
        "--{}--",
        text.strip_prefix('/')
            .unwrap_or(&text)
            .replace(['/', '\\', ':'], "-")
    );
    let dir = agent.path().join("sessions").join(encoded);
    std::fs::create_dir_all(&dir).unwrap();
    let journal = dir.join("parent.jsonl");
    let mut lines = vec![json!({"type": "session", "version": 2, "id": "parent-id",
        "timestamp": "2026-01-01T00:00:00.000Z", "cwd": text})];
    let ids = [
        "00000000-0000-4000-8000-000000000001",
        "00000000-0000-4000-8000-000000000002",
    ];
    lines.push(
        json!({"type": "thinking_level_change", "thinkingLevel": "off", "id": ids[0],
        "parentId": null, "timestamp": "2026-01-01T00:00:00.001Z"}),
    );
    lines.push(json!({"type": "message", "message": {"role": "user", "content": "catalog me",
        "timestamp": 2}, "id": ids[1], "parentId": ids[0], "timestamp": "2026-01-01T00:00:00.002Z"}));
    let body: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(&journal, body).unwrap();

    let agent_path = agent.path().display().to_string();
    let journal_path = journal.display().to_string();
    let base = [
        "--zi",
        env!("CARGO_BIN_EXE_zi"),
        "--cwd",
        &text,
        "--arg",
        "--agent-dir",
        "--arg",
        &agent_path,
    ];
    let resumed = [&base[..], &["--arg", "-r", "--arg", &journal_path]].concat();
    let stdout = |args: &[&str]| -> serde_json::Value {
        let out = run(&runner, args, home.path());
        assert!(
            out.status.success(),
            "{client} {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{client} output: {e}"))
    };

    let listed = stdout(&[&base[..], &["--list-sessions", "cwd"]].concat());
    assert_eq!(listed[0]["sessionId"], "parent-id", "{client}: {listed}");
    assert_eq!(listed[0]["firstUserText"], "catalog me");
    assert_eq!(listed.as_array().map(Vec::len), Some(1));
    let entries = stdout(&[&resumed[..], &["--entries"]].concat());
    assert_eq!(
        entries.as_array().map(Vec::len),
        Some(2),
        "{client}: {entries}"
    );
    assert_eq!(entries[1]["id"], ids[1]);
    let fork = stdout(&[&resumed[..], &["--fork", ids[0]]].concat());
    let path = PathBuf::from(fork["path"].as_str().unwrap_or_default());
    let forked = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{client}: {e}"));
    let header: serde_json::Value =
        serde_json::from_str(forked.lines().next().unwrap_or_default()).unwrap();
    assert_eq!(header["id"], fork["sessionId"]);
    assert_eq!(header["parentSession"], journal_path.as_str());
    assert_eq!(forked.lines().count(), 2, "{client}: {forked}");
    let missing = run(
        &runner,
        &[&resumed[..], &["--fork", "nope"]].concat(),
        home.path(),
    );
    assert_eq!(missing.status.code(), Some(1), "{client}");
    assert!(
        String::from_utf8_lossy(&missing.stderr).contains("Entry not found: nope"),
        "{client}: {}",
        String::from_utf8_lossy(&missing.stderr)
    );
}

#[test]
fn typescript_client_catalog_helpers() {
    catalog_cases("ts");
}

#[test]
fn python_client_catalog_helpers() {
    catalog_cases("py");
}

/// A journal of four exchanges of ~500 estimated tokens each (model `mock/small`, window 4000):
/// enough for a manual compaction, whose retained tail is the last 1500 tokens.
fn write_long_journal(path: &Path, cwd: &Path) {
    let mut text = json!({"type": "session", "version": 2, "id": "long-id",
        "timestamp": "2026-01-01T00:00:00.000Z", "cwd": cwd.display().to_string()})
    .to_string();
    text.push('\n');
    let mut parent = serde_json::Value::Null;
    for n in 0..8u64 {
        let message = if n % 2 == 0 {
            json!({"role": "user", "content": [{"type": "text", "text": format!("question {n}")}],
                   "timestamp": 1_000 + n})
        } else {
            json!({"role": "assistant", "content": [{"type": "text", "text": "y".repeat(2000)}],
                   "api": "openai-completions", "provider": "mock", "model": "small",
                   "usage": {"input": 100, "output": 500, "cacheRead": 0, "cacheWrite": 0,
                             "totalTokens": 600, "cost": {"input": 0.0, "output": 0.0,
                             "cacheRead": 0.0, "cacheWrite": 0.0, "total": 0.0}},
                   "stopReason": "stop", "timestamp": 1_000 + n})
        };
        let id = format!("00000000-0000-4000-8000-{n:012}");
        text.push_str(
            &json!({"type": "message", "message": message, "id": id, "parentId": parent,
                    "timestamp": "2026-01-01T00:00:01.000Z"})
            .to_string(),
        );
        text.push('\n');
        parent = json!(id);
    }
    std::fs::write(path, text).unwrap();
}

/// The `session.get_stats` and `session.compact` helpers (zi extensions) of a client against zi
/// resuming a journal on disk.
async fn compact_stats_cases(client: &str) {
    let Some(runner) = runner(client) else { return };
    let mock = MockLlm::start()
        .await
        .unwrap_or_else(|e| panic!("mock: {e}"));
    let agent = AgentDir::new().models(
        &mock,
        "k",
        &[
            json!({"id": "small", "contextWindow": 4000, "maxTokens": 500,
                 "cost": {"input": 3.0, "output": 15.0}}),
        ],
    );
    let home = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let cwd = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let journal = cwd.path().join("long.jsonl");
    write_long_journal(&journal, cwd.path());
    let agent_path = agent.path().display().to_string();
    let cwd_path = cwd.path().display().to_string();
    let journal_path = journal.display().to_string();
    let fresh_args = client_args(&cwd_path, &agent_path, "mock/small");
    let base = [&fresh_args[..], &["--arg", "-r", "--arg", &journal_path]].concat();
    let stdout = async |args: &[&str]| -> serde_json::Value {
        let out = run_async(&runner, args, home.path()).await;
        assert!(
            out.status.success(),
            "{client} {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{client} output: {e}"))
    };

    let stats = stdout(&[&base[..], &["--stats"]].concat()).await;
    assert_eq!(stats["total"]["turns"], 4, "{client}: {stats}");
    assert_eq!(stats["total"]["usage"]["input"], 400, "{client}: {stats}");
    assert_eq!(stats["total"]["usage"]["output"], 2000, "{client}: {stats}");
    assert_eq!(stats["models"][0]["id"], "small", "{client}: {stats}");

    mock.push(Step::text(
        "## Goal\nKeep going.\n## Progress\n### Done\nEarlier work.",
    ));
    let compacted = stdout(&[&base[..], &["--compact", "Keep", "the", "goal"]].concat()).await;
    assert!(
        compacted["tokensBefore"].as_u64().unwrap_or_default()
            > compacted["estimatedTokensAfter"]
                .as_u64()
                .unwrap_or(u64::MAX),
        "{client}: {compacted}"
    );
    assert!(
        compacted["firstKeptEntryId"]
            .as_str()
            .is_some_and(|id| id.starts_with("00000000-0000-4000-8000-")),
        "{client}: {compacted}"
    );
    let sent = mock.requests()[0].body.to_string();
    assert!(sent.contains("Keep the goal"), "{client}: {sent}");

    // Nothing left to compact in a fresh session: the client reports zi's error.
    let fresh = run_async(
        &runner,
        &[&fresh_args[..], &["--compact"]].concat(),
        home.path(),
    )
    .await;
    assert_eq!(fresh.status.code(), Some(1), "{client}: {fresh:?}");
    assert!(
        String::from_utf8_lossy(&fresh.stderr).contains("Nothing to compact"),
        "{client}: {}",
        String::from_utf8_lossy(&fresh.stderr)
    );
}

#[tokio::test]
async fn typescript_client_compact_and_stats_helpers() {
    compact_stats_cases("ts").await;
}

#[tokio::test]
async fn python_client_compact_and_stats_helpers() {
    compact_stats_cases("py").await;
}
