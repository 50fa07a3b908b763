//! Journal benchmark: resume a ~60 MiB journal of ~100,000 messages, report the time and peak
//! RSS until `ready`, and the time to page its last 100 messages.
//!
//! Run with `cargo bench -p zi-cli --bench journal`. Figures are printed, not asserted.

// A benchmark fails loudly: a panic with its reason is the right report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufWriter, Write};
use std::path::Path;
use std::time::Instant;

use serde_json::{Value, json};

mod support;
use support::{Zi, ms, rpc_command};

const MESSAGES: usize = 100_000;

/// Writes a linear journal of alternating user and assistant messages; returns its size. With
/// `compact_at`, a compaction marker follows that many messages, keeping the last 1,000 before
/// it (the shape of a long session that compacted).
fn build_journal(path: &Path, cwd: &Path, compact_at: Option<usize>) -> u64 {
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
