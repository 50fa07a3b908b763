//! Memory soak: 10,000 direct prompts against one persistent session whose small context
//! window makes it compact every few dozen prompts. Reports zi's RSS every 1,000 prompts, so
//! growth that does not level off after compactions shows (issue 10.9: memory follows the
//! resident tail).
//!
//! Run with `cargo bench -p zi-cli --bench soak` (release build); `-- --prompts N` changes the
//! count. Figures are printed, not asserted.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Write;
use std::path::Path;
use std::time::Instant;

use serde_json::json;
use zi_test_support::mock_llm::Step;

mod support;
use support::{Zi, contains, mock_server, rpc_command};

const DEFAULT_PROMPTS: usize = 10_000;
const REPORT_EVERY: usize = 1_000;

/// The zi child on a persistent session, and the compactions it reported.
struct Soak {
    zi: Zi,
    line: Vec<u8>,
    compactions: u64,
}

impl Soak {
    fn spawn(agent_dir: &Path, cwd: &Path) -> Soak {
        let mut command = rpc_command(agent_dir);
        command
            .args(["--model", "mock/small"])
            .arg("--cwd")
            .arg(cwd);
        let mut soak = Soak {
            zi: Zi::start(command),
            line: Vec::new(),
            compactions: 0,
        };
        soak.read_line();
        soak
    }

    fn read_line(&mut self) {
        self.zi.read_line_into(&mut self.line);
    }

    /// One prompt to settlement (all events read and counted).
    fn prompt(&mut self, n: usize) {
        let prompt = json!({"version":1,"id":format!("p{n}"),"method":"session.prompt","params":{"delivery":"direct","text":format!("prompt {n}: please continue the work")}});
        let idle = json!({"version":1,"id":format!("w{n}"),"method":"session.await_idle"});
        let requests = format!("{prompt}\n{idle}\n");
        self.zi
            .stdin
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
    let (_runtime, mock) = mock_server();
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
    let mut soak = Soak::spawn(&agent_dir, &cwd);
    let ready_rss = soak.zi.status_kib("VmRSS:");
    println!("soak: {prompts} prompts, persistent journal, 16,000-token window");
    println!("after ready: RSS {:.1} MiB", ready_rss as f64 / 1024.0);
    let started = Instant::now();
    let mut samples = Vec::new();
    for n in 1..=prompts {
        // Every request (reply or summary) takes one step; keep a few ready.
        while mock.pending_steps() < 4 {
            mock.push(Step::text(&reply));
        }
        soak.prompt(n);
        if n % REPORT_EVERY == 0 || n == prompts {
            let rss = soak.zi.status_kib("VmRSS:");
            samples.push((n, rss));
            println!(
                "prompt {n:>6}: RSS {:>7.1} MiB, {} compactions, {:.1} s",
                rss as f64 / 1024.0,
                soak.compactions,
                started.elapsed().as_secs_f64()
            );
        }
    }
    let peak = soak.zi.status_kib("VmHWM:");
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
    soak.zi.finish();
    drop(mock);
}
