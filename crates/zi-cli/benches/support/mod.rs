//! What the zi-cli benchmarks share: the binary under test, its RPC command line, clean
//! directories, one zi child driven synchronously over its pipes, and the statistics.
//!
//! Each bench is its own crate (`mod support;`) and uses a part of this module, so the parts it
//! does not use are not dead code.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::Instant;

use serde_json::{Value, json};
use zi_test_support::mock_llm::MockLlm;

/// The zi under test: `ZI_UNDER_TEST` (to compare builds back to back), else this build's.
pub fn zi_binary() -> String {
    std::env::var("ZI_UNDER_TEST").unwrap_or_else(|_| env!("CARGO_BIN_EXE_zi").to_string())
}

/// `zi --mode rpc --agent-dir <agent>`, with the variables that would change the mode, the
/// sandbox or the approval policy withheld (the bench decides those by its arguments).
pub fn rpc_command(agent: &Path) -> Command {
    let mut command = Command::new(zi_binary());
    command
        .args(["--mode", "rpc", "--agent-dir"])
        .arg(agent)
        .env_remove("ZI_MODE")
        .env_remove("ZI_SANDBOX")
        .env_remove("ZI_APPROVALS");
    command
}

/// A mock provider server on a one-worker runtime (kept alive by the caller).
pub fn mock_server() -> (tokio::runtime::Runtime, MockLlm) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime");
    let mock = runtime.block_on(MockLlm::start()).expect("mock server");
    (runtime, mock)
}

/// One spawn of `command` until its `ready` frame, then EOF and exit: milliseconds to `ready`.
pub fn spawn_to_ready_ms(command: Command) -> f64 {
    let start = Instant::now();
    let mut zi = Zi::start(command);
    let line = zi.line();
    let elapsed = ms(start);
    assert!(
        contains(&line, b"\"type\":\"ready\""),
        "{}",
        String::from_utf8_lossy(&line)
    );
    zi.finish();
    elapsed
}

/// A clean agent directory (its `models.json` naming the mock's `m1`), working directory and
/// `HOME`, under the target directory outside `/tmp` (docs/performance.md#sandbox: a real `HOME`'s
/// login profile would dominate a spawn).
pub struct Dirs {
    _root: tempfile::TempDir,
    pub agent: PathBuf,
    pub cwd: PathBuf,
    pub home: PathBuf,
}

impl Dirs {
    pub fn new(prefix: &str, mock: &MockLlm) -> Dirs {
        let root = tempfile::Builder::new()
            .prefix(prefix)
            .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
            .expect("bench directory");
        let base = root
            .path()
            .canonicalize()
            .expect("canonical bench directory");
        let (agent, cwd, home) = (base.join("agent"), base.join("cwd"), base.join("home"));
        for dir in [&agent, &cwd, &home] {
            std::fs::create_dir_all(dir).expect("create bench directory");
        }
        std::fs::write(
            agent.join("models.json"),
            mock.models_json("bench-key", &[json!({"id": "m1"})]),
        )
        .expect("models.json");
        Dirs {
            _root: root,
            agent,
            cwd,
            home,
        }
    }

    /// An ephemeral session on `mock/m1` in `cwd`, with this `HOME` and `bash` as the shell,
    /// then `extra`.
    pub fn command(&self, extra: &[&str]) -> Command {
        let mut command = rpc_command(&self.agent);
        command
            .args(["--no-session", "--model", "mock/m1"])
            .args(extra)
            .current_dir(&self.cwd)
            .env("HOME", &self.home)
            .env("SHELL", "/bin/bash");
        command
    }

    /// The median over 30 spawns of `command(extra)` to its `ready` frame, in milliseconds.
    pub fn ready_median_ms(&self, extra: &[&str]) -> f64 {
        median(
            (0..30)
                .map(|_| spawn_to_ready_ms(self.command(extra)))
                .collect(),
        )
    }
}

/// One zi child over its pipes; counts the frames and bytes it read.
pub struct Zi {
    pub child: Child,
    pub stdin: ChildStdin,
    pub stdout: BufReader<ChildStdout>,
    pub frames: u64,
    pub bytes: u64,
}

impl Zi {
    /// Spawns `command` with piped stdin and stdout (stderr as the command says).
    pub fn start(mut command: Command) -> Zi {
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawn zi");
        let stdin = child.stdin.take().expect("stdin");
        let stdout = BufReader::with_capacity(1 << 20, child.stdout.take().expect("stdout"));
        Zi {
            child,
            stdin,
            stdout,
            frames: 0,
            bytes: 0,
        }
    }

    /// Reads one frame (newline included) into `line`, replacing what it held.
    pub fn read_line_into(&mut self, line: &mut Vec<u8>) {
        line.clear();
        self.stdout.read_until(b'\n', line).expect("read frame");
        assert!(!line.is_empty(), "zi closed stdout");
        self.frames += 1;
        self.bytes += line.len() as u64;
    }

    pub fn line(&mut self) -> Vec<u8> {
        let mut line = Vec::new();
        self.read_line_into(&mut line);
        line
    }

    /// One frame and its size in bytes (newline included).
    pub fn frame_sized(&mut self) -> (Value, usize) {
        let line = self.line();
        (
            serde_json::from_slice(&line).expect("frame is JSON"),
            line.len(),
        )
    }

    pub fn frame(&mut self) -> Value {
        self.frame_sized().0
    }

    pub fn send(&mut self, request: Value) {
        let mut text = request.to_string();
        text.push('\n');
        self.stdin
            .write_all(text.as_bytes())
            .expect("write request");
        self.stdin.flush().expect("flush request");
    }

    /// Reads frames until the response with `id`; returns it.
    pub fn response(&mut self, id: &str) -> Value {
        let needle = format!("\"id\":\"{id}\"");
        loop {
            let line = self.line();
            // Cheap pre-filter: only parse frames that can be the response.
            if contains(&line, b"\"type\":\"response\"") && contains(&line, needle.as_bytes()) {
                let frame: Value = serde_json::from_slice(&line).expect("response JSON");
                if frame["type"] == "response" && frame["id"] == id {
                    return frame;
                }
            }
        }
    }

    /// One request (`params` left out when `None`) and its successful response.
    pub fn call(&mut self, id: &str, method: &str, params: Option<Value>) -> Value {
        let mut request = json!({"version": 1, "id": id, "method": method});
        if let Some(params) = params {
            request["params"] = params;
        }
        self.send(request);
        let response = self.response(id);
        assert_eq!(response["ok"], true, "{response}");
        response
    }

    /// The value in KiB of a `/proc/<pid>/status` line such as `VmRSS:` or `VmHWM:` (0 if
    /// absent).
    pub fn status_kib(&self, key: &str) -> u64 {
        std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .unwrap_or_default()
            .lines()
            .find(|l| l.starts_with(key))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    }

    /// User plus system CPU time the child has used so far.
    pub fn cpu_seconds(&self) -> f64 {
        let stat =
            std::fs::read_to_string(format!("/proc/{}/stat", self.child.id())).unwrap_or_default();
        let fields: Vec<&str> = stat
            .rsplit(')')
            .next()
            .unwrap_or("")
            .split_whitespace()
            .collect();
        let ticks = |i: usize| {
            fields
                .get(i)
                .and_then(|f| f.parse::<f64>().ok())
                .unwrap_or(0.0)
        };
        // Fields after ")" start at state (index 0): utime is 11, stime is 12.
        (ticks(11) + ticks(12)) / clock_ticks()
    }

    /// Closes stdin (zi exits at EOF), drains stdout and waits for the exit.
    pub fn finish(mut self) {
        drop(self.stdin);
        let mut rest = Vec::new();
        let _ = self.stdout.read_to_end(&mut rest);
        let _ = self.child.wait();
    }
}

fn clock_ticks() -> f64 {
    // SAFETY: sysconf has no preconditions.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if ticks > 0 { ticks as f64 } else { 100.0 }
}

pub fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

pub fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

pub fn p95(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[(values.len() * 95 / 100).min(values.len() - 1)]
}

/// Milliseconds since `since`.
pub fn ms(since: Instant) -> f64 {
    since.elapsed().as_secs_f64() * 1000.0
}

pub const MESSAGES: usize = 100_000;

/// Writes a linear journal of alternating user and assistant messages; returns its size. With
/// `compact_at`, a compaction marker follows that many messages, keeping the last 1,000 before
/// it (the shape of a long session that compacted).
pub fn build_journal(path: &Path, cwd: &Path, compact_at: Option<usize>) -> u64 {
    let file = std::fs::File::create(path).expect("create journal");
    let mut out = BufWriter::new(file);
    let header = json!({"type":"session","version":2,"id":"bench-session","timestamp":"2026-11-30T00:00:00.000Z","cwd":cwd.display().to_string()});
    writeln!(out, "{header}").expect("write");
    let mut parent: Option<String> = None;
    let mut write_entry = |out: &mut BufWriter<std::fs::File>, mut entry: Value, n: usize| {
        let id = format!("00000000-0000-4000-8000-{n:012}");
        entry["id"] = json!(id);
        entry["parentId"] = json!(parent);
        entry["timestamp"] = json!("2026-11-30T00:00:00.000Z");
        writeln!(out, "{entry}").expect("write");
        parent = Some(id);
    };
    write_entry(
        &mut out,
        json!({"type":"model_change","provider":"mock","modelId":"m1"}),
        0,
    );
    write_entry(
        &mut out,
        json!({"type":"thinking_level_change","thinkingLevel":"off"}),
        1,
    );
    let text = "lorem ipsum dolor sit amet ".repeat(10);
    for i in 0..MESSAGES {
        let message = if i % 2 == 0 {
            json!({"role":"user","content":[{"type":"text","text":format!("{i} {text}")}],"timestamp":1_790_000_000_000u64 + i as u64})
        } else {
            json!({"role":"assistant","content":[{"type":"text","text":format!("{i} {text}")}],"api":"openai-completions","provider":"mock","model":"m1","usage":{"input":100,"output":100,"cacheRead":0,"cacheWrite":0,"totalTokens":200,"cost":{"input":0.0,"output":0.0,"cacheRead":0.0,"cacheWrite":0.0,"total":0.0}},"stopReason":"stop","timestamp":1_790_000_000_000u64 + i as u64})
        };
        write_entry(&mut out, json!({"type":"message","message":message}), i + 2);
        if compact_at == Some(i + 1) {
            let first_kept = format!("00000000-0000-4000-8000-{:012}", i + 2 - 1000);
            let marker = json!({"type":"compaction","reason":"threshold","summary":"## Goal\nBenchmark.","firstKeptEntryId":first_kept,"tokensBefore":1_000_000,"estimatedTokensAfter":100_000,"details":{"readFiles":[],"modifiedFiles":[],"omittedReadFiles":0,"omittedModifiedFiles":0}});
            write_entry(&mut out, marker, MESSAGES + 10);
        }
    }
    out.flush().expect("flush");
    std::fs::metadata(path).expect("metadata").len()
}
