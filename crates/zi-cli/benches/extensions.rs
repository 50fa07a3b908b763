//! Extension benchmark: spawn-to-ready with 20 Lua extensions loaded (against none), and the
//! round trip of one `command.invoke` (against `session.get_state`, which does no extension
//! work).
//!
//! Run with `cargo bench -p zi-cli --bench extensions` (release build). Figures are printed, not
//! asserted.

// A benchmark fails loudly: a panic with its reason is the right report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use serde_json::{Value, json};

mod support;
use support::{Zi, median, rpc_command, spawn_to_ready_ms};

const EXTENSIONS: usize = 20;

fn command(agent_dir: &Path, extensions: &[PathBuf]) -> Command {
    let mut command = rpc_command(agent_dir);
    command.arg("--no-session");
    for path in extensions {
        command.arg("--extension").arg(path);
    }
    command
}

fn ready_ms(agent_dir: &Path, extensions: &[PathBuf], runs: usize) -> (f64, f64) {
    let times: Vec<f64> = (0..runs)
        .map(|_| spawn_to_ready_ms(command(agent_dir, extensions)))
        .collect();
    let min = times.iter().copied().fold(f64::INFINITY, f64::min);
    (median(times), min)
}

fn round_trip_us(zi: &mut Zi, method: &str, params: Option<Value>, rounds: usize) -> f64 {
    let times: Vec<f64> = (0..rounds)
        .map(|n| {
            let started = Instant::now();
            zi.call(&format!("r{n}"), method, params.clone());
            started.elapsed().as_secs_f64() * 1e6
        })
        .collect();
    median(times)
}

fn main() {
    let dir = tempfile::tempdir().expect("temp dir");
    let agent_dir = dir.path().join("agent");
    std::fs::create_dir_all(&agent_dir).expect("agent dir");
    let extensions: Vec<PathBuf> = (0..EXTENSIONS)
        .map(|n| {
            let path = dir.path().join(format!("ext{n}.lua"));
            std::fs::write(
                &path,
                format!(
                    r#"
local count = 0
zi.on("agent_settled", function() end)
zi.register_command{{ name = "cmd{n}", description = "command {n}", argument_hint = "[N]",
  execute = function(args, ctx) count = count + 1; return "ok " .. count end }}
zi.register_tool{{ name = "tool{n}", description = "tool {n}",
  parameters = {{ type = "object", properties = {{ x = {{ type = "number" }} }} }},
  execute = function(p) return {{ x = p.x }} end }}
"#
                ),
            )
            .expect("write extension");
            path
        })
        .collect();

    let (none_median, none_min) = ready_ms(&agent_dir, &[], 20);
    let (with_median, with_min) = ready_ms(&agent_dir, &extensions, 20);
    println!("spawn to ready, no extensions:  median {none_median:.2} ms, min {none_min:.2} ms");
    println!(
        "spawn to ready, {EXTENSIONS} extensions: median {with_median:.2} ms, min {with_min:.2} ms"
    );

    let mut zi = Zi::start(command(&agent_dir, &extensions));
    zi.line();
    let list = zi.call("l", "command.list", None);
    // Each extension's command, beside zi's own (`reload`).
    let commands = list["result"]["commands"].as_array().expect("commands");
    let ours = commands
        .iter()
        .filter(|c| c["name"].as_str().is_some_and(|n| n.starts_with("cmd")))
        .count();
    assert_eq!(ours, EXTENSIONS, "{list}");
    // Warm up both paths.
    round_trip_us(&mut zi, "session.get_state", None, 50);
    let invoke = Some(json!({"name": "cmd7", "arguments": "1"}));
    round_trip_us(&mut zi, "command.invoke", invoke.clone(), 50);
    let state = round_trip_us(&mut zi, "session.get_state", None, 500);
    let command = round_trip_us(&mut zi, "command.invoke", invoke, 500);
    println!("session.get_state round trip: median {state:.1} µs");
    println!(
        "command.invoke round trip:    median {command:.1} µs (overhead {:.1} µs)",
        command - state
    );
    zi.finish();
}
