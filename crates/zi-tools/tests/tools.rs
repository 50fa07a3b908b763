//! Every tool's error codes and limits, driven through the `Tool` trait as the agent loop
//! calls it (docs/tools.md).

// A test fails by panicking with its reason.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use zi_agent::{SessionHost, Tool, ToolCallContext, ToolOutput};
use zi_os::sync::lock;
use zi_protocol::message::ContentBlock;
use zi_tools::{
    BashTool, EditTool, KillTaskTool, ReadTool, TaskOutputTool, TaskRegistry, ToolEnv,
    UpdatePlanTool, WriteTool,
};

struct Fixture {
    _dir: tempfile::TempDir,
    root: PathBuf,
    env: ToolEnv,
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let root = dir.path().canonicalize().unwrap_or_else(|e| panic!("{e}"));
    let env = ToolEnv::new(root.clone(), Some(PathBuf::from("/bin/bash")));
    Fixture {
        _dir: dir,
        root,
        env,
    }
}

type Updates = Arc<Mutex<Vec<Value>>>;

async fn call_with(
    tool: &dyn Tool,
    args: Value,
    cancel: CancellationToken,
) -> (ToolOutput, Updates) {
    let updates: Updates = Arc::default();
    let sink = updates.clone();
    let output = tool
        .execute_json(ToolCallContext {
            call_id: "c1".into(),
            raw_arguments: args,
            cancel,
            progress: Arc::new(move |v| lock(&sink).push(v)),
            host: SessionHost::detached(),
        })
        .await;
    (output, updates)
}

async fn call(tool: &dyn Tool, args: Value) -> ToolOutput {
    call_with(tool, args, CancellationToken::new()).await.0
}

fn text(output: &ToolOutput) -> String {
    output
        .content
        .iter()
        .map(|block| match block {
            ContentBlock::Text { text, .. } => text.clone(),
            _ => String::new(),
        })
        .collect()
}

fn code(output: &ToolOutput) -> Option<String> {
    output
        .details
        .as_ref()?
        .get("code")?
        .as_str()
        .map(str::to_string)
}

fn detail(output: &ToolOutput, key: &str) -> Value {
    output
        .details
        .as_ref()
        .and_then(|d| d.get(key))
        .cloned()
        .unwrap_or(Value::Null)
}

#[track_caller]
fn assert_error(output: &ToolOutput, expected: &str) {
    assert!(output.is_error, "expected an error, got {:?}", text(output));
    assert_eq!(code(output).as_deref(), Some(expected), "{}", text(output));
    assert_eq!(detail(output, "outcome"), json!("error"));
}

fn write_file(path: &Path, content: impl AsRef<[u8]>) {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).unwrap_or_else(|e| panic!("{e}"));
    }
    std::fs::write(path, content).unwrap_or_else(|e| panic!("{e}"));
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc_geteuid() == 0 }
}

unsafe extern "C" {
    #[link_name = "geteuid"]
    fn libc_geteuid() -> u32;
}

// ---------------------------------------------------------------------------------------------
// read
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn read_error_codes() {
    let f = fixture();
    let read = ReadTool::new(f.env.clone());
    assert_error(
        &call(&read, json!({"path": "missing.txt"})).await,
        "not_found",
    );
    std::fs::create_dir(f.root.join("dir")).unwrap_or_else(|e| panic!("{e}"));
    assert_error(&call(&read, json!({"path": "dir"})).await, "not_file");
    let big = std::fs::File::create(f.root.join("big.bin")).unwrap_or_else(|e| panic!("{e}"));
    big.set_len(16 * 1024 * 1024 + 1)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_error(&call(&read, json!({"path": "big.bin"})).await, "too_large");
    write_file(&f.root.join("three.txt"), "a\nb\nc\n");
    assert_error(
        &call(&read, json!({"path": "three.txt", "offset": 4})).await,
        "invalid_offset",
    );
    write_file(&f.root.join("blob.bin"), b"\x89PNG\0\0\x01binary");
    assert_error(
        &call(&read, json!({"path": "blob.bin"})).await,
        "unreadable",
    );
    if !is_root() {
        let secret = f.root.join("secret.txt");
        write_file(&secret, "x");
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o000))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_error(
            &call(&read, json!({"path": "secret.txt"})).await,
            "permission_denied",
        );
    }
}

#[tokio::test]
async fn read_exactly_sixteen_mib_is_allowed() {
    let f = fixture();
    let file = std::fs::File::create(f.root.join("sixteen.txt")).unwrap_or_else(|e| panic!("{e}"));
    drop(file);
    write_file(&f.root.join("sixteen.txt"), "x\n".repeat(8 * 1024 * 1024));
    let out = call(
        &ReadTool::new(f.env.clone()),
        json!({"path": "sixteen.txt"}),
    )
    .await;
    assert!(!out.is_error, "{}", text(&out));
    assert!(
        text(&out).ends_with("\n\n[Showing lines 1-2000 of 8388608. Use offset=2001 to continue.]")
    );
}

#[tokio::test]
async fn read_offsets_limits_and_line_boundary() {
    let f = fixture();
    let read = ReadTool::new(f.env.clone());
    let lines: String = (1..=2000).map(|i| format!("line {i}\n")).collect();
    write_file(&f.root.join("2000.txt"), &lines);
    let out = call(&read, json!({"path": "2000.txt"})).await;
    assert!(!out.is_error);
    assert!(
        text(&out).ends_with("line 2000"),
        "exactly 2,000 lines are shown whole"
    );
    assert_eq!(detail(&out, "truncated"), json!(false));

    write_file(&f.root.join("2001.txt"), format!("{lines}line 2001\n"));
    let out = call(&read, json!({"path": "2001.txt"})).await;
    assert!(
        text(&out)
            .ends_with("line 2000\n\n[Showing lines 1-2000 of 2001. Use offset=2001 to continue.]")
    );
    assert_eq!(detail(&out, "truncatedBy"), json!("lines"));
    let out = call(&read, json!({"path": "2001.txt", "offset": 2001})).await;
    assert_eq!(text(&out), "line 2001");

    let out = call(&read, json!({"path": "2001.txt", "offset": 10, "limit": 2})).await;
    assert_eq!(
        text(&out),
        "line 10\nline 11\n\n[Showing lines 10-11 of 2001. Use offset=12 to continue.]"
    );
    // An empty file reads as empty text at offset 1.
    write_file(&f.root.join("empty.txt"), "");
    assert_eq!(text(&call(&read, json!({"path": "empty.txt"})).await), "");
}

#[tokio::test]
async fn read_byte_limit_exact_and_one_over() {
    let f = fixture();
    let read = ReadTool::new(f.env.clone());
    // Two lines joined by one newline: 25,599 + 1 + 25,600 = 51,200 bytes.
    let exact = format!("{}\n{}\n", "a".repeat(25_599), "b".repeat(25_600));
    write_file(&f.root.join("exact.txt"), &exact);
    let out = call(&read, json!({"path": "exact.txt"})).await;
    assert_eq!(text(&out).len(), 51_200);
    assert_eq!(detail(&out, "truncated"), json!(false));

    let over = format!("{}\n{}\n", "a".repeat(25_600), "b".repeat(25_600));
    write_file(&f.root.join("over.txt"), &over);
    let out = call(&read, json!({"path": "over.txt"})).await;
    assert_eq!(
        text(&out),
        format!(
            "{}\n\n[Showing lines 1-1 of 2. Use offset=2 to continue.]",
            "a".repeat(25_600)
        )
    );
    assert_eq!(detail(&out, "truncatedBy"), json!("bytes"));

    // A single line over the limit.
    write_file(
        &f.root.join("long.txt"),
        format!("short\n{}\n", "z".repeat(51_201)),
    );
    let out = call(&read, json!({"path": "long.txt", "offset": 2})).await;
    assert_eq!(
        text(&out),
        "[Line 2 exceeds the 51200 byte limit. Use bash to inspect a bounded byte range.]"
    );
    assert!(!out.is_error);
    // A line of exactly 51,200 bytes is shown.
    write_file(&f.root.join("fits.txt"), "y".repeat(51_200));
    assert_eq!(
        text(&call(&read, json!({"path": "fits.txt"})).await).len(),
        51_200
    );
}

// ---------------------------------------------------------------------------------------------
// write
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn write_creates_parents_and_reports_bytes() {
    let f = fixture();
    let write = WriteTool::new(f.env.clone());
    let out = call(&write, json!({"path": "a/b/c.txt", "content": "héllo"})).await;
    assert!(!out.is_error);
    assert_eq!(text(&out), "Successfully wrote 6 bytes to a/b/c.txt");
    assert_eq!(
        std::fs::read_to_string(f.root.join("a/b/c.txt")).unwrap_or_default(),
        "héllo"
    );
    let out = call(&write, json!({"path": "a/b/c.txt", "content": "new"})).await;
    assert!(!out.is_error);
    assert_eq!(
        std::fs::read_to_string(f.root.join("a/b/c.txt")).unwrap_or_default(),
        "new"
    );
}

#[tokio::test]
async fn write_error_codes_and_size_boundary() {
    let f = fixture();
    let write = WriteTool::new(f.env.clone());
    assert_error(
        &call(&write, json!({"path": "", "content": "x"})).await,
        "invalid_path",
    );
    assert_error(
        &call(&write, json!({"path": "a\u{0}b", "content": "x"})).await,
        "invalid_path",
    );
    std::fs::create_dir(f.root.join("dir")).unwrap_or_else(|e| panic!("{e}"));
    assert_error(
        &call(&write, json!({"path": "dir", "content": "x"})).await,
        "not_file",
    );
    let limit = 8 * 1024 * 1024;
    let out = call(
        &write,
        json!({"path": "max.txt", "content": "x".repeat(limit)}),
    )
    .await;
    assert!(!out.is_error, "{}", text(&out));
    assert_error(
        &call(
            &write,
            json!({"path": "over.txt", "content": "x".repeat(limit + 1)}),
        )
        .await,
        "too_large",
    );
    write_file(&f.root.join("file"), "x");
    assert_error(
        &call(&write, json!({"path": "file/child.txt", "content": "x"})).await,
        "unwritable",
    );
    if !is_root() {
        use std::os::unix::fs::PermissionsExt as _;
        let locked = f.root.join("locked");
        std::fs::create_dir(&locked).unwrap_or_else(|e| panic!("{e}"));
        std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o500))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_error(
            &call(&write, json!({"path": "locked/x.txt", "content": "x"})).await,
            "permission_denied",
        );
    }
}

#[tokio::test]
async fn concurrent_writes_and_edits_to_one_file_are_serialised() {
    let f = fixture();
    write_file(&f.root.join("shared.txt"), "counter: 0\n");
    let edit = Arc::new(EditTool::new(f.env.clone()));
    // Ten edits, each matching the value the previous one wrote: they only all succeed when
    // every edit sees the previous one's result.
    let mut outputs = Vec::new();
    for i in 0..10 {
        let edit = edit.clone();
        outputs.push(tokio::spawn(async move {
            loop {
                let out = call(
                    edit.as_ref(),
                    json!({"path": "shared.txt", "edits": [{"oldText": format!("counter: {i}\n"), "newText": format!("counter: {}\n", i + 1)}]}),
                )
                .await;
                if !out.is_error {
                    return out;
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }));
    }
    for output in outputs {
        let out = output.await.unwrap_or_else(|e| panic!("{e}"));
        assert!(!out.is_error);
    }
    assert_eq!(
        std::fs::read_to_string(f.root.join("shared.txt")).unwrap_or_default(),
        "counter: 10\n"
    );
}

// ---------------------------------------------------------------------------------------------
// edit
// ---------------------------------------------------------------------------------------------

fn edit_args(path: &str, edits: &[(&str, &str)]) -> Value {
    json!({"path": path, "edits": edits.iter().map(|(o, n)| json!({"oldText": o, "newText": n})).collect::<Vec<_>>()})
}

#[tokio::test]
async fn edit_replaces_and_reports_a_diff() {
    let f = fixture();
    let edit = EditTool::new(f.env.clone());
    write_file(&f.root.join("src.rs"), "fn a() {}\nfn b() {}\nfn c() {}\n");
    let out = call(
        &edit,
        edit_args(
            "src.rs",
            &[("fn a() {}", "fn a() { 1 }"), ("fn c() {}", "fn c() { 3 }")],
        ),
    )
    .await;
    assert!(!out.is_error, "{}", text(&out));
    assert_eq!(text(&out), "Successfully replaced 2 block(s) in src.rs");
    assert_eq!(
        std::fs::read_to_string(f.root.join("src.rs")).unwrap_or_default(),
        "fn a() { 1 }\nfn b() {}\nfn c() { 3 }\n"
    );
    assert_eq!(detail(&out, "additions"), json!(2));
    assert_eq!(detail(&out, "deletions"), json!(2));
    assert_eq!(detail(&out, "firstChangedLine"), json!(1));
    let diff = detail(&out, "diff");
    let diff = diff.as_str().unwrap_or_default();
    assert!(
        diff.starts_with("--- a/src.rs\n+++ b/src.rs\n@@ -1,3 +1,3 @@\n"),
        "{diff}"
    );
    assert!(diff.contains("-fn a() {}\n+fn a() { 1 }\n"), "{diff}");
}

#[tokio::test]
async fn edit_error_codes() {
    let f = fixture();
    let edit = EditTool::new(f.env.clone());
    write_file(&f.root.join("f.txt"), "one two one\nthree\n");
    assert_error(
        &call(&edit, edit_args("missing.txt", &[("a", "b")])).await,
        "not_found",
    );
    assert_error(
        &call(&edit, edit_args("f.txt", &[("four", "4")])).await,
        "match_missing",
    );
    let out = call(&edit, edit_args("f.txt", &[("one", "1")])).await;
    assert_error(&out, "match_ambiguous");
    // Overlapping occurrences of the same text are ambiguous too.
    write_file(&f.root.join("aaa.txt"), "aaa");
    assert_error(
        &call(&edit, edit_args("aaa.txt", &[("aa", "b")])).await,
        "match_ambiguous",
    );
    assert_error(
        &call(
            &edit,
            edit_args("f.txt", &[("one two", "x"), ("two one", "y")]),
        )
        .await,
        "overlap",
    );
    assert_error(
        &call(&edit, edit_args("f.txt", &[("three", "three")])).await,
        "no_change",
    );
    assert_error(
        &call(&edit, edit_args("f.txt", &[("", "x")])).await,
        "invalid_edit",
    );
    std::fs::create_dir(f.root.join("d")).unwrap_or_else(|e| panic!("{e}"));
    assert_error(
        &call(&edit, edit_args("d", &[("a", "b")])).await,
        "not_file",
    );
    // Nothing was written by the failures.
    assert_eq!(
        std::fs::read_to_string(f.root.join("f.txt")).unwrap_or_default(),
        "one two one\nthree\n"
    );
    // Adjacent (touching) edits do not overlap.
    let out = call(
        &edit,
        edit_args("f.txt", &[("one two ", "1 2 "), ("one\n", "1\n")]),
    )
    .await;
    assert!(!out.is_error, "{}", text(&out));
    assert_eq!(
        std::fs::read_to_string(f.root.join("f.txt")).unwrap_or_default(),
        "1 2 1\nthree\n"
    );
}

#[tokio::test]
async fn edit_limits() {
    let f = fixture();
    let edit = EditTool::new(f.env.clone());
    let body: String = (0..65).map(|i| format!("line {i:03}\n")).collect();
    write_file(&f.root.join("many.txt"), &body);
    let pairs: Vec<(String, String)> = (0..64)
        .map(|i| (format!("line {i:03}\n"), format!("L{i}\n")))
        .collect();
    let refs: Vec<(&str, &str)> = pairs
        .iter()
        .map(|(a, b)| (a.as_str(), b.as_str()))
        .collect();
    let out = call(&edit, edit_args("many.txt", &refs)).await;
    assert!(!out.is_error, "64 edits are allowed: {}", text(&out));
    let big = std::fs::File::create(f.root.join("big.txt")).unwrap_or_else(|e| panic!("{e}"));
    big.set_len(16 * 1024 * 1024 + 1)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_error(
        &call(&edit, edit_args("big.txt", &[("a", "b")])).await,
        "too_large",
    );
    let huge = "x".repeat(8 * 1024 * 1024);
    assert_error(
        &call(&edit, edit_args("many.txt", &[("L1", &huge)])).await,
        "too_large",
    );
}

#[tokio::test]
async fn edit_preserves_crlf_and_bom() {
    let f = fixture();
    let edit = EditTool::new(f.env.clone());
    write_file(
        &f.root.join("win.txt"),
        "\u{feff}first\r\nsecond\r\nthird\r\n",
    );
    let out = call(
        &edit,
        edit_args("win.txt", &[("first\nsecond", "1st\n2nd")]),
    )
    .await;
    assert!(!out.is_error, "{}", text(&out));
    assert_eq!(
        std::fs::read(f.root.join("win.txt")).unwrap_or_default(),
        "\u{feff}1st\r\n2nd\r\nthird\r\n".as_bytes()
    );
    // oldText written with CRLF matches too.
    let out = call(
        &edit,
        edit_args("win.txt", &[("2nd\r\nthird", "two\r\nthree")]),
    )
    .await;
    assert!(!out.is_error, "{}", text(&out));
    assert_eq!(
        std::fs::read(f.root.join("win.txt")).unwrap_or_default(),
        "\u{feff}1st\r\ntwo\r\nthree\r\n".as_bytes()
    );
    // LF files stay LF.
    write_file(&f.root.join("unix.txt"), "a\nb\n");
    let out = call(&edit, edit_args("unix.txt", &[("a\nb", "x\ny")])).await;
    assert!(!out.is_error);
    assert_eq!(
        std::fs::read(f.root.join("unix.txt")).unwrap_or_default(),
        b"x\ny\n"
    );
}

#[tokio::test]
async fn edit_diff_elides_long_lines() {
    let f = fixture();
    let edit = EditTool::new(f.env.clone());
    let long = "q".repeat(5000);
    write_file(&f.root.join("long.txt"), format!("{long}\nend\n"));
    let out = call(&edit, edit_args("long.txt", &[("end", "fin")])).await;
    let diff = detail(&out, "diff");
    let diff = diff.as_str().unwrap_or_default();
    assert!(diff.contains("bytes elided]"), "{diff}");
    assert!(diff.len() < 2000);
    assert_eq!(detail(&out, "firstChangedLine"), json!(2));
}

// ---------------------------------------------------------------------------------------------
// bash
// ---------------------------------------------------------------------------------------------

fn bash(f: &Fixture) -> (BashTool, TaskRegistry) {
    let tasks = TaskRegistry::new();
    (BashTool::new(f.env.clone(), tasks.clone()), tasks)
}

#[tokio::test]
async fn bash_runs_in_the_cwd_with_the_documented_environment() {
    let f = fixture();
    let (bash, _) = bash(&f);
    let out = call(
        &bash,
        json!({"command": "pwd; echo $NO_COLOR $TERM $PAGER $GIT_PAGER; echo err >&2"}),
    )
    .await;
    assert!(!out.is_error, "{}", text(&out));
    assert_eq!(
        text(&out),
        format!("{}\n1 dumb cat cat\nerr", f.root.display())
    );
    assert_eq!(detail(&out, "exitCode"), json!(0));
    let out = call(&bash, json!({"command": "true"})).await;
    assert_eq!(text(&out), "(no output)");
}

#[tokio::test]
async fn bash_nonzero_exit_is_an_error() {
    let f = fixture();
    let (bash, _) = bash(&f);
    let out = call(&bash, json!({"command": "echo out; exit 3"})).await;
    assert!(out.is_error);
    assert_eq!(text(&out), "out\n\nCommand exited with code 3");
    assert_eq!(detail(&out, "exitCode"), json!(3));
    assert_eq!(detail(&out, "outcome"), json!("error"));
    // A command of exactly 256 KiB runs (a comment pads it); one more byte is refused.
    let exact = format!("echo fits #{}", "x".repeat(256 * 1024 - 11));
    assert_eq!(exact.len(), 256 * 1024);
    let out = call(&bash, json!({ "command": exact })).await;
    assert_eq!(text(&out), "fits");
    let out = call(&bash, json!({"command": format!("{exact}x")})).await;
    assert_error(&out, "too_large");
    assert_error(
        &call(&bash, json!({"command": "  "})).await,
        "invalid_command",
    );
}

#[tokio::test]
async fn bash_tail_truncation_spills_the_full_output() {
    let f = fixture();
    let (bash, _) = bash(&f);
    let out = call(&bash, json!({"command": "seq 1 2000"})).await;
    assert_eq!(detail(&out, "truncated"), json!(false));
    assert!(text(&out).starts_with("1\n2\n"));
    assert_eq!(detail(&out, "fullOutputPath"), Value::Null);

    let out = call(&bash, json!({"command": "seq 1 2001"})).await;
    assert_eq!(detail(&out, "truncated"), json!(true));
    let path = detail(&out, "fullOutputPath");
    let path = path.as_str().unwrap_or_default().to_string();
    let t = text(&out);
    assert!(t.starts_with("2\n3\n"), "the first line is dropped");
    assert!(
        t.ends_with(&format!("2001\n\n[Output truncated. Full output: {path}]")),
        "{}",
        &t[t.len() - 200..]
    );
    let full = std::fs::read_to_string(&path).unwrap_or_default();
    assert_eq!(full.lines().count(), 2001);
    let _ = std::fs::remove_file(&path);

    // 51,200 bytes exactly fit; one more byte spills.
    let out = call(
        &bash,
        json!({"command": "head -c 51200 /dev/zero | tr '\\0' a"}),
    )
    .await;
    assert_eq!(detail(&out, "truncated"), json!(false));
    assert_eq!(text(&out).len(), 51_200);
    let out = call(
        &bash,
        json!({"command": "head -c 51201 /dev/zero | tr '\\0' a"}),
    )
    .await;
    assert_eq!(detail(&out, "truncated"), json!(true));
    let path = detail(&out, "fullOutputPath");
    let path = path.as_str().unwrap_or_default().to_string();
    assert!(text(&out).starts_with(&format!("{}\n\n[Output truncated.", "a".repeat(51_200))));
    assert_eq!(
        std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0),
        51_201
    );
    let _ = std::fs::remove_file(&path);
}

#[tokio::test]
async fn bash_streams_progress_updates() {
    let f = fixture();
    let (bash, _) = bash(&f);
    let (out, updates) = call_with(
        &bash,
        json!({"command": "echo one; sleep 0.6; echo two"}),
        CancellationToken::new(),
    )
    .await;
    assert_eq!(text(&out), "one\ntwo");
    let updates = lock(&updates).clone();
    assert!(!updates.is_empty());
    assert_eq!(
        updates
            .last()
            .and_then(|u| u["content"][0]["text"].as_str()),
        Some("one\ntwo")
    );
}

fn pids_of(pattern: &str) -> Vec<u32> {
    let output = std::process::Command::new("pgrep")
        .arg("-f")
        .arg(pattern)
        .output();
    output
        .map(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .filter_map(|l| l.trim().parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

async fn assert_gone(pattern: &str) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while !pids_of(pattern).is_empty() {
        assert!(
            Instant::now() < deadline,
            "processes matching {pattern} are still running"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn bash_timeout_kills_the_process_group() {
    let f = fixture();
    let (bash, _) = bash(&f);
    let marker = format!("sleep 31{}", std::process::id() % 1000);
    let started = Instant::now();
    // A 2 s timeout leaves a loaded machine time to start a login shell and print.
    let out = call(&bash, json!({"command": format!("echo started; ( {marker}; echo never ) & {marker}"), "timeout": 2})).await;
    assert!(started.elapsed() < Duration::from_secs(8));
    assert!(out.is_error);
    assert_eq!(text(&out), "started\n\nCommand timed out after 2 seconds");
    assert_eq!(detail(&out, "status"), json!("timed_out"));
    assert_gone(&marker).await;
}

#[tokio::test]
async fn bash_interrupt_kills_grandchildren() {
    let f = fixture();
    let (bash, _) = bash(&f);
    let marker = format!("sleep 32{}", std::process::id() % 1000);
    let cancel = CancellationToken::new();
    let trigger = cancel.clone();
    let probe = marker.clone();
    tokio::spawn(async move {
        let deadline = Instant::now() + Duration::from_secs(5);
        while pids_of(&probe).len() < 2 && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        trigger.cancel();
    });
    // A subshell whose `sleep` ignores SIGTERM must still be gone (SIGKILL after the grace).
    let command = format!("(trap '' TERM; {marker}) & {marker}; wait");
    let (out, _) = call_with(&bash, json!({"command": command}), cancel).await;
    assert!(out.is_error);
    assert!(text(&out).ends_with("Command aborted"), "{}", text(&out));
    assert_eq!(detail(&out, "status"), json!("aborted"));
    assert_gone(&marker).await;
}

#[tokio::test]
async fn one_foreground_command_at_a_time() {
    let f = fixture();
    let (bash, _) = bash(&f);
    let bash = Arc::new(bash);
    let stamp = f.root.join("stamps");
    let command = format!(
        "echo start >> {0}; sleep 0.3; echo end >> {0}",
        stamp.display()
    );
    let a = {
        let bash = bash.clone();
        let command = command.clone();
        tokio::spawn(async move { call(bash.as_ref(), json!({"command": command})).await })
    };
    let b = call(bash.as_ref(), json!({"command": command})).await;
    let a = a.await.unwrap_or_else(|e| panic!("{e}"));
    assert!(!a.is_error && !b.is_error);
    assert_eq!(
        std::fs::read_to_string(&stamp).unwrap_or_default(),
        "start\nend\nstart\nend\n"
    );
}

// ---------------------------------------------------------------------------------------------
// background tasks
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn background_task_lifecycle() {
    let f = fixture();
    let (bash, tasks) = bash(&f);
    let output = TaskOutputTool::new(tasks.clone());
    let kill = KillTaskTool::new(tasks.clone());
    let started = Instant::now();
    let out = call(
        &bash,
        json!({"command": "echo hi; sleep 0.3; echo bye", "background": true}),
    )
    .await;
    assert!(
        started.elapsed() < Duration::from_millis(250),
        "returns at once"
    );
    assert_eq!(
        text(&out),
        "Command running in background (task ID: task-1). Use task_output to read its output and kill_task to stop it."
    );
    assert_eq!(detail(&out, "taskId"), json!("task-1"));
    let polled = call(&output, json!({"taskId": "task-1", "timeout": 0})).await;
    assert_eq!(detail(&polled, "status"), json!("running"));
    let waited = call(&output, json!({"taskId": "task-1", "timeout": 10})).await;
    assert_eq!(text(&waited), "hi\nbye\n\n[Task task-1 finished]");
    assert_eq!(detail(&waited, "exitCode"), json!(0));
    let killed = call(&kill, json!({"taskId": "task-1"})).await;
    assert_eq!(detail(&killed, "result"), json!("already_completed"));
    assert_error(&call(&kill, json!({"taskId": "task-9"})).await, "not_found");
    assert_error(
        &call(&output, json!({"taskId": "task-9"})).await,
        "not_found",
    );

    let marker = format!("sleep 33{}", std::process::id() % 1000);
    call(
        &bash,
        json!({"command": format!("({marker}) & {marker}"), "background": true}),
    )
    .await;
    let killed = call(&kill, json!({"taskId": "task-2"})).await;
    assert_eq!(text(&killed), "Task task-2 is stopping.");
    let again = call(&kill, json!({"taskId": "task-2"})).await;
    assert!(matches!(
        detail(&again, "result").as_str(),
        Some("settling" | "already_completed")
    ));
    let done = call(&output, json!({"taskId": "task-2", "timeout": 5})).await;
    assert_eq!(detail(&done, "status"), json!("killed"));
    assert!(text(&done).contains("Command killed"));
    assert_gone(&marker).await;
}

#[tokio::test]
async fn at_most_eight_live_tasks_and_shutdown_kills_them() {
    let f = fixture();
    let (bash, tasks) = bash(&f);
    let marker = format!("sleep 34{}", std::process::id() % 1000);
    for i in 1..=8 {
        let out = call(&bash, json!({"command": marker, "background": true})).await;
        assert_eq!(detail(&out, "taskId"), json!(format!("task-{i}")));
    }
    let out = call(&bash, json!({"command": marker, "background": true})).await;
    assert_error(&out, "too_many_tasks");
    bash.shutdown().await;
    assert_gone(&marker).await;
    let output = TaskOutputTool::new(tasks);
    let out = call(&output, json!({"taskId": "task-3"})).await;
    assert_eq!(detail(&out, "status"), json!("disposed"));
    let out = call(&bash, json!({"command": "true", "background": true})).await;
    assert_error(&out, "unavailable");
}

// ---------------------------------------------------------------------------------------------
// update_plan
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn update_plan_validates_limits() {
    let plan = UpdatePlanTool;
    let step = |text: &str, status: &str| json!({"text": text, "status": status});
    let two_active = json!({"steps": [step("a", "in_progress"), step("b", "in_progress")]});
    assert_error(&call(&plan, two_active).await, "invalid_plan");
    let too_many: Vec<Value> = (0..33).map(|i| step(&format!("s{i}"), "pending")).collect();
    assert_error(
        &call(&plan, json!({"steps": too_many})).await,
        "invalid_plan",
    );
    assert_error(
        &call(&plan, json!({"steps": [step(&"x".repeat(513), "pending")]})).await,
        "invalid_plan",
    );
    assert_error(
        &call(&plan, json!({"steps": [], "explanation": "e".repeat(4097)})).await,
        "invalid_plan",
    );
    // 32 steps of 512 bytes (after trimming) are exactly the 32-step and 16 KiB limits, so
    // the plan reaches the session (detached here).
    let at_limit: Vec<Value> = (0..32)
        .map(|_| step(&format!("  {}  ", "x".repeat(512)), "pending"))
        .collect();
    assert_error(
        &call(
            &plan,
            json!({"steps": at_limit, "explanation": "e".repeat(4096)}),
        )
        .await,
        "unavailable",
    );
}
