//! Memory soak: 10,000 direct prompts against one persistent session whose small context
//! window makes it compact every few dozen prompts. Reports zi's RSS every 1,000 prompts, so
//! growth that does not level off after compactions shows (issue 10.9: memory follows the
//! resident tail).
//!
//! Run with `cargo bench -p zi-cli --bench soak` (release build); `-- --prompts N` changes the
//! count. Figures are printed, not asserted.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::Instant;

use serde_json::json;
use zi_test_support::mock_llm::{MockLlm, Step};

mod proc_status;
use proc_status::status_kib;

const ZI: &str = env!("CARGO_BIN_EXE_zi");
const DEFAULT_PROMPTS: usize = 10_000;
const REPORT_EVERY: usize = 1_000;

/// The zi child, driven synchronously over its pipes.
struct Zi {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    line: Vec<u8>,
    compactions: u64,
}

impl Zi {
    fn spawn(agent_dir: &Path, cwd: &Path) -> Zi {
        let mut child = Command::new(ZI)
            .args(["--mode", "rpc", "--model", "mock/small", "--agent-dir"])
            .arg(agent_dir)
            .arg("--cwd")
            .arg(cwd)
            .env_remove("ZI_MODE")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn zi");
        let stdin = child.stdin.take().expect("stdin");
        let stdout = BufReader::with_capacity(1 << 20, child.stdout.take().expect("stdout"));
        let mut zi = Zi {
            child,
            stdin,
            stdout,
            line: Vec::new(),
            compactions: 0,
        };
        zi.read_line();
        zi
    }

    fn read_line(&mut self) {
        self.line.clear();
        self.stdout
            .read_until(b'\n', &mut self.line)
            .expect("read frame");
        assert!(!self.line.is_empty(), "zi closed stdout");
    }

    /// One prompt to settlement (all events read and counted).
    fn prompt(&mut self, n: usize) {
        let prompt = json!({"version":1,"id":format!("p{n}"),"method":"session.prompt","params":{"delivery":"direct","text":format!("prompt {n}: please continue the work")}});
        let idle = json!({"version":1,"id":format!("w{n}"),"method":"session.await_idle"});
        let requests = format!("{prompt}\n{idle}\n");
        self.stdin
            .write_all(requests.as_bytes())
            .expect("write request");
        let needle = format!("\"id\":\"w{n}\"");
        loop {
            self.read_line();
            if contains(&self.line, b"\"type\":\"compaction_end\"") {
                self.compactions += 1;
                assert!(
                    contains(&self.line, b"\"completed\""),
                    "a compaction failed: {}",
                    String::from_utf8_lossy(&self.line)
                );
            }
            if contains(&self.line, b"\"type\":\"response\"")
                && contains(&self.line, needle.as_bytes())
            {
                assert!(
                    contains(&self.line, b"\"ok\":true"),
                    "{}",
                    String::from_utf8_lossy(&self.line)
                );
                return;
            }
        }
    }

    fn status_kib(&self, key: &str) -> u64 {
        status_kib(self.child.id(), key)
    }

    fn finish(mut self) {
        drop(self.stdin);
        let mut rest = Vec::new();
        let _ = self.stdout.read_to_end(&mut rest);
        let _ = self.child.wait();
    }
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

fn prompts_arg() -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == "--prompts")
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(DEFAULT_PROMPTS)
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let prompts = prompts_arg();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime");
    let mock = runtime.block_on(MockLlm::start()).expect("mock server");
    let dir = tempfile::tempdir().expect("tempdir");
    let agent_dir = dir.path().join("agent");
    let cwd = dir.path().join("project");
    std::fs::create_dir_all(&agent_dir).expect("agent dir");
    std::fs::create_dir_all(&cwd).expect("cwd");
    // Window 16,000: trigger 12,000 tokens, keep-recent 6,000; with ~600-byte exchanges a
    // compaction every few dozen prompts.
    std::fs::write(
        agent_dir.join("models.json"),
        mock.models_json(
            "soak-key",
            &[json!({"id": "small", "contextWindow": 16_000, "maxTokens": 1_000})],
        ),
    )
    .expect("models.json");
    std::fs::write(
        agent_dir.join("settings.json"),
        r#"{"retryEnabled": false}"#,
    )
    .expect("settings.json");

    let reply = "The work goes on; here is a paragraph of progress notes. ".repeat(8);
    let mut zi = Zi::spawn(&agent_dir, &cwd);
    let ready_rss = zi.status_kib("VmRSS:");
    println!("soak: {prompts} prompts, persistent journal, 16,000-token window");
    println!("after ready: RSS {:.1} MiB", ready_rss as f64 / 1024.0);
    let started = Instant::now();
    let mut samples = Vec::new();
    for n in 1..=prompts {
        // Every request (reply or summary) takes one step; keep a few ready.
        while mock.pending_steps() < 4 {
            mock.push(Step::text(&reply));
        }
        zi.prompt(n);
        if n % REPORT_EVERY == 0 || n == prompts {
            let rss = zi.status_kib("VmRSS:");
            samples.push((n, rss));
            println!(
                "prompt {n:>6}: RSS {:>7.1} MiB, {} compactions, {:.1} s",
                rss as f64 / 1024.0,
                zi.compactions,
                started.elapsed().as_secs_f64()
            );
        }
    }
    let peak = zi.status_kib("VmHWM:");
    if let (Some(&(first_n, first)), Some(&(last_n, last))) = (samples.first(), samples.last())
        && last_n > first_n
    {
        println!(
            "growth from prompt {first_n} to {last_n}: {:.2} KB per prompt; peak RSS {:.1} MiB; {:.0} prompts/s",
            (last as f64 - first as f64) * 1.024 / (last_n - first_n) as f64,
            peak as f64 / 1024.0,
            prompts as f64 / started.elapsed().as_secs_f64()
        );
    }
    zi.finish();
    drop(mock);
}
