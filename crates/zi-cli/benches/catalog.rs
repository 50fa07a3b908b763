//! Session catalog benchmark (issue 14.4): 1,000 journals of ~1 MiB each in one session
//! directory, listed with `session.list` through the real binary. Reports the first listing
//! (every header read, the page's journals scanned, the catalog cache written), the first
//! listing of each other page, listings with the cache, and a
//! listing after one journal grew (only its appended bytes are scanned). Target: under 100 ms
//! for a listing. The files sit in the page cache (just written), as on a machine in use.
//!
//! Run with `cargo bench -p zi-cli --bench catalog`. Figures are printed, not asserted.

// A benchmark fails loudly: a panic with its reason is the right report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufWriter, Write};
use std::path::Path;
use std::time::Instant;

use serde_json::{Value, json};

mod support;
use support::{Zi, ms, rpc_command};

const JOURNALS: usize = 1_000;
const JOURNAL_BYTES: usize = 1 << 20;

/// `<agentDir>/sessions/--<cwd>--`.
fn session_dir(agent: &Path, cwd: &Path) -> std::path::PathBuf {
    let text = cwd.display().to_string();
    let trimmed = text.strip_prefix('/').unwrap_or(&text);
    agent
        .join("sessions")
        .join(format!("--{}--", trimmed.replace(['/', '\\', ':'], "-")))
}

/// A journal of alternating user and assistant messages, about [`JOURNAL_BYTES`] long.
fn write_journal(path: &Path, n: usize, cwd: &Path) {
    let mut out = BufWriter::new(std::fs::File::create(path).expect("create journal"));
    let header = json!({"type":"session","version":2,"id":format!("00000000-0000-4000-8000-{n:012}"),"timestamp":"2026-11-30T00:00:00.000Z","cwd":cwd.display().to_string()});
    writeln!(out, "{header}").expect("write");
    let text = "lorem ipsum dolor sit amet ".repeat(10);
    let mut written = 0;
    let mut parent: Option<String> = None;
    let mut i = 0;
    while written < JOURNAL_BYTES {
        let message = if i % 2 == 0 {
            json!({"role":"user","content":[{"type":"text","text":format!("{i} {text}")}],"timestamp":1_790_000_000_000u64 + i as u64})
        } else {
            json!({"role":"assistant","content":[{"type":"text","text":format!("{i} {text}")}],"api":"openai-completions","provider":"mock","model":"m1","usage":{"input":100,"output":100,"cacheRead":0,"cacheWrite":0,"totalTokens":200,"cost":{"input":0.0,"output":0.0,"cacheRead":0.0,"cacheWrite":0.0,"total":0.0}},"stopReason":"stop","timestamp":1_790_000_000_000u64 + i as u64})
        };
        let id = format!("{n:08x}-0000-4000-8000-{i:012}");
        let line = json!({"type":"message","message":message,"id":id,"parentId":parent,"timestamp":"2026-11-30T00:00:00.000Z"}).to_string();
        writeln!(out, "{line}").expect("write");
        written += line.len() + 1;
        parent = Some(id);
        i += 1;
    }
    out.flush().expect("flush");
}

/// zi listing the sessions of `cwd`, past its `ready`.
fn spawn(agent: &Path, cwd: &Path) -> Zi {
    let mut command = rpc_command(agent);
    command.arg("--no-session").arg("--cwd").arg(cwd);
    let mut zi = Zi::start(command);
    zi.line();
    zi
}

/// One `session.list` round trip for the page of 100 from `start`: milliseconds and the result.
fn list_from(zi: &mut Zi, id: &str, start: usize) -> (f64, Value) {
    let started = Instant::now();
    let response = zi.call(
        id,
        "session.list",
        Some(json!({"start": start, "limit": 100})),
    );
    (ms(started), response["result"].clone())
}

fn list(zi: &mut Zi, id: &str) -> (f64, Value) {
    list_from(zi, id, 0)
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let agent = dir.path().join("agent");
    let cwd = dir.path().join("project");
    std::fs::create_dir_all(&cwd).expect("cwd");
    let sessions = session_dir(&agent, &cwd);
    std::fs::create_dir_all(&sessions).expect("session dir");
    let started = Instant::now();
    for n in 0..JOURNALS {
        write_journal(&sessions.join(format!("{n}.jsonl")), n, &cwd);
    }
    let bytes: u64 = std::fs::read_dir(&sessions)
        .expect("read dir")
        .filter_map(|e| e.ok()?.metadata().ok())
        .map(|m| m.len())
        .sum();
    println!(
        "{JOURNALS} journals, {:.1} MiB in all (built in {:.1} s)",
        bytes as f64 / 1_048_576.0,
        started.elapsed().as_secs_f64()
    );

    let mut zi = spawn(&agent, &cwd);
    let (first, result) = list(&mut zi, "cold");
    assert_eq!(result["total"], JOURNALS, "{result}");
    println!(
        "first listing (reads every header, scans the 100 journals of the page, writes the cache): {first:.1} ms, total {}, {} messages in the newest",
        result["total"], result["sessions"][0]["messageCount"]
    );
    // The other nine pages, each seen for the first time: together one pass over every journal.
    let mut pages = Vec::new();
    for page in 1..JOURNALS / 100 {
        let (ms, result) = list_from(&mut zi, &format!("page{page}"), page * 100);
        assert_eq!(result["sessions"].as_array().map(Vec::len), Some(100));
        pages.push(ms);
    }
    pages.sort_by(f64::total_cmp);
    println!(
        "first listing of each other page (100 journals scanned each): median {:.1} ms, max {:.1} ms, {:.1} ms for all {}",
        pages[pages.len() / 2],
        pages[pages.len() - 1],
        pages.iter().sum::<f64>(),
        pages.len()
    );
    let mut warm = Vec::new();
    for run in 0..5 {
        let (ms, result) = list(&mut zi, &format!("warm{run}"));
        assert_eq!(result["total"], JOURNALS);
        warm.push(ms);
    }
    warm.sort_by(f64::total_cmp);
    println!(
        "cached listings: median {:.1} ms, min {:.1} ms, max {:.1} ms (5 runs)",
        warm[2], warm[0], warm[4]
    );

    // One journal grows by one entry: only its new line is scanned.
    let grown = sessions.join("7.jsonl");
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(&grown)
        .expect("open");
    writeln!(
        file,
        "{}",
        json!({"type":"model_change","provider":"mock","modelId":"m2","id":"grown","parentId":null,"timestamp":"2026-11-30T00:00:01.000Z"})
    )
    .expect("append");
    drop(file);
    let (ms, result) = list(&mut zi, "grown");
    assert_eq!(result["sessions"][0]["model"]["id"], "m2", "{result}");
    println!("listing after one journal grew: {ms:.1} ms");

    // A fresh process (the cache is on disk).
    zi.finish();
    let mut fresh = spawn(&agent, &cwd);
    let (ms, _) = list(&mut fresh, "fresh");
    println!("first listing of a new zi process (cache on disk): {ms:.1} ms");
    fresh.finish();
}
