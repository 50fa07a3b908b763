//! Journal benchmark: resume a ~60 MiB journal of ~100,000 messages, report the time and peak
//! RSS until `ready`, and the time to page its last 100 messages.
//!
//! Run with `cargo bench -p zi-cli --bench journal`. Figures are printed, not asserted.

// A benchmark fails loudly: a panic with its reason is the right report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::time::Instant;

use serde_json::{Value, json};

mod support;
use support::{MESSAGES, Zi, build_journal, ms, rpc_command};

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let agent = dir.path().join("agent");
    let cwd = dir.path().join("project");
    std::fs::create_dir_all(&agent).expect("agent dir");
    std::fs::create_dir_all(&cwd).expect("cwd");
    std::fs::write(
        agent.join("models.json"),
        r#"{"providers":{"mock":{"baseUrl":"http://127.0.0.1:9/v1","api":"openai-completions","apiKey":"k","models":[{"id":"m1","contextWindow":100000000}]}}}"#,
    )
    .expect("models.json");
    for (label, compact_at) in [
        ("no compaction", None),
        (
            "compacted, 1,000-message resident tail",
            Some(MESSAGES - 1000),
        ),
    ] {
        let journal = dir.path().join("bench.jsonl");
        let _ = std::fs::remove_file(&journal);
        let started = Instant::now();
        let size = build_journal(&journal, &cwd, compact_at);
        println!(
            "{label}: {:.1} MiB, {} messages (built in {:.2} s)",
            size as f64 / 1_048_576.0,
            MESSAGES,
            started.elapsed().as_secs_f64()
        );
        resume_runs(&agent, &journal);
    }
}

fn resume_runs(agent: &Path, journal: &Path) {
    for run in 0..3 {
        let start = Instant::now();
        let mut command = rpc_command(agent);
        command.arg("-r").arg(journal);
        let mut zi = Zi::start(command);
        let ready_line = zi.line();
        let ready = ms(start);
        let ready_frame: Value = serde_json::from_slice(&ready_line).expect("ready JSON");
        let total = ready_frame["state"]["messageCount"].as_u64().unwrap_or(0);
        let peak = zi.status_kib("VmHWM:");
        let page_start = Instant::now();
        let request = json!({"version":1,"id":"m","method":"session.get_messages","params":{"start": total.saturating_sub(100),"limit":100}});
        zi.send(request);
        let line = zi.line();
        let page = ms(page_start);
        let response: Value = serde_json::from_slice(&line).expect("page JSON");
        let count = response["result"]["messages"]
            .as_array()
            .map_or(0, Vec::len);
        zi.finish();
        println!(
            "run {run}: resume to ready {ready:.1} ms, peak RSS {:.1} MiB, last {count} of {total} messages paged in {page:.2} ms",
            peak as f64 / 1024.0
        );
    }
}
