//! Idle density benchmark: how many idle agents fit in a GiB. Starts 50
//! `zi --mode rpc --no-session` processes side by side, waits for every `ready`, lets them settle,
//! then reads each one's `/proc/<pid>/smaps_rollup`: the proportional set size (PSS: private pages
//! plus each shared page divided by the processes that map it) is what one more agent costs the
//! machine, and 1 GiB over the mean PSS is the number of idle agents per GiB.
//!
//! Run with `cargo bench -p zi-cli --bench idle` (release build; `ZI_UNDER_TEST` for another
//! build, `-- --agents N` for another count). Figures are printed, not asserted.

// A benchmark fails loudly: a panic with its reason is the right report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::json;

mod support;
use support::{Zi, contains, median, mock_server, rpc_command};

/// The `smaps_rollup` fields reported, in KiB.
const FIELDS: [&str; 7] = [
    "Rss",
    "Pss",
    "Pss_Anon",
    "Pss_File",
    "Private_Dirty",
    "Private_Clean",
    "Shared_Clean",
];

/// The KiB values of `/proc/<pid>/smaps_rollup`, by field name.
fn rollup(pid: u32) -> BTreeMap<String, u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).expect("smaps_rollup");
    text.lines()
        .filter_map(|line| {
            let (name, rest) = line.split_once(':')?;
            let kib = rest.split_whitespace().next()?.parse().ok()?;
            Some((name.to_string(), kib))
        })
        .collect()
}

fn agents_argument() -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == "--agents")
        .and_then(|i| args.get(i + 1))
        .and_then(|n| n.parse().ok())
        .unwrap_or(50)
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let agents = agents_argument();
    let (_runtime, mock) = mock_server();
    let agent_dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        agent_dir.path().join("models.json"),
        mock.models_json("bench-key", &[json!({"id": "m1"})]),
    )
    .expect("models.json");

    let mut children: Vec<Zi> = (0..agents)
        .map(|_| {
            let mut command = rpc_command(agent_dir.path());
            command.args(["--model", "mock/m1", "--no-session"]);
            Zi::start(command)
        })
        .collect();
    for zi in &mut children {
        let line = zi.line();
        assert!(contains(&line, b"\"type\":\"ready\""));
    }
    // Idle: whatever start-up left behind (threads parking, lazy work) has settled.
    std::thread::sleep(Duration::from_secs(2));

    let rollups: Vec<BTreeMap<String, u64>> =
        children.iter().map(|zi| rollup(zi.child.id())).collect();
    let field = |name: &str| -> Vec<f64> {
        rollups
            .iter()
            .map(|r| r.get(name).copied().unwrap_or(0) as f64)
            .collect()
    };
    let total_pss: f64 = field("Pss").iter().sum();
    let mean_pss = total_pss / agents as f64;
    println!(
        "{agents} idle agents: total PSS {:.1} MiB, mean {:.0} KiB per agent: {:.0} idle agents per GiB",
        total_pss / 1024.0,
        mean_pss,
        1024.0 * 1024.0 / mean_pss
    );
    for name in FIELDS {
        println!("  {name}: median {:.0} KiB per agent", median(field(name)));
    }
    for zi in children {
        zi.finish();
    }
    drop(mock);
}
