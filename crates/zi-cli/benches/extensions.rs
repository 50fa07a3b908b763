//! Extension benchmark: spawn-to-ready with 20 Lua extensions loaded (against none), and the
//! round trip of one `command.invoke` (against `session.get_state`, which does no extension
//! work).
//!
//! Run with `cargo bench -p zi-cli --bench extensions` (release build). Figures are printed, not
//! asserted.

// A benchmark fails loudly: a panic with its reason is the right report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::Instant;

use serde_json::{Value, json};

const ZI: &str = env!("CARGO_BIN_EXE_zi");
const EXTENSIONS: usize = 20;

struct Zi {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Zi {
    fn spawn(agent_dir: &Path, extensions: &[PathBuf]) -> Zi {
        let mut command = Command::new(ZI);
        command
            .args(["--mode", "rpc", "--no-session", "--agent-dir"])
            .arg(agent_dir)
            .env_remove("ZI_MODE")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        for path in extensions {
            command.arg("--extension").arg(path);
        }
        let mut child = command.spawn().expect("spawn zi");
        let stdin = child.stdin.take().expect("stdin");
        let stdout = BufReader::new(child.stdout.take().expect("stdout"));
        Zi {
            child,
            stdin,
            stdout,
        }
    }

    fn line(&mut self) -> String {
        let mut line = String::new();
        self.stdout.read_line(&mut line).expect("read frame");
        assert!(!line.is_empty(), "zi closed stdout");
        line
    }

    fn request(&mut self, id: &str, method: &str, params: Option<Value>) -> Value {
        let mut request = json!({"version": 1, "id": id, "method": method});
        if let Some(params) = params {
            request["params"] = params;
        }
        let mut text = request.to_string();
        text.push('\n');
        self.stdin.write_all(text.as_bytes()).expect("write");
        let needle = format!("\"id\":\"{id}\"");
        loop {
            let line = self.line();
            if line.contains(&needle) {
                return serde_json::from_str(&line).expect("frame");
            }
        }
    }

    fn finish(mut self) {
        drop(self.stdin);
        let _ = self.child.wait();
    }
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn ready_ms(agent_dir: &Path, extensions: &[PathBuf], runs: usize) -> (f64, f64) {
    let times: Vec<f64> = (0..runs)
        .map(|_| {
            let started = Instant::now();
            let mut zi = Zi::spawn(agent_dir, extensions);
            let ready = zi.line();
            let elapsed = started.elapsed().as_secs_f64() * 1000.0;
            assert!(ready.contains("\"type\":\"ready\""));
            zi.finish();
            elapsed
        })
        .collect();
    let min = times.iter().copied().fold(f64::INFINITY, f64::min);
    (median(times), min)
}

fn round_trip_us(zi: &mut Zi, method: &str, params: Option<Value>, rounds: usize) -> f64 {
    let times: Vec<f64> = (0..rounds)
        .map(|n| {
            let started = Instant::now();
            let response = zi.request(&format!("r{n}"), method, params.clone());
            assert_eq!(response["ok"], true, "{response}");
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

    let mut zi = Zi::spawn(&agent_dir, &extensions);
    zi.line();
    let list = zi.request("l", "command.list", None);
    assert_eq!(
        list["result"]["commands"].as_array().map(Vec::len),
        Some(EXTENSIONS)
    );
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
