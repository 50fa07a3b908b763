//! Black-box tests of the output bounds (docs/rpc.md#backpressure-and-bounds): a client that reads,
//! however slowly, never loses its connection to them.
//!
//! These tests drive `zi --mode rpc` through plain pipes, so that the client decides how fast it
//! reads (the shared test harness reads stdout eagerly). `ZI_UNDER_TEST` runs them against
//! another zi binary.

use std::io::{Read, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use zi_test_support::dirs::AgentDir;
use zi_test_support::mock_llm::{MockLlm, Step};

const MIB: usize = 1024 * 1024;
/// Generous: the machine running the tests may be loaded.
const DEADLINE: Duration = Duration::from_secs(120);

fn zi_binary() -> String {
    std::env::var("ZI_UNDER_TEST").unwrap_or_else(|_| env!("CARGO_BIN_EXE_zi").to_string())
}

fn models_json(mock: &MockLlm) -> String {
    mock.models_json(
        "zi-test-key",
        &[json!({"id": "m1", "contextWindow": 1_000_000, "maxTokens": 1000})],
    )
}

/// How the client reads stdout.
#[derive(Clone, Copy)]
enum Reading {
    /// At most 64 KiB, then a pause, over and over.
    Slow { pause: Duration },
    /// Nothing until `start` is signalled, then as fast as it can.
    AfterSignal,
}

struct Client {
    child: Child,
    stdin: Option<ChildStdin>,
    /// Complete lines as the reader thread sees them.
    lines: mpsc::Receiver<Vec<u8>>,
    start_reading: Option<mpsc::Sender<()>>,
    reader: Option<JoinHandle<Vec<u8>>>,
    stderr: Option<JoinHandle<String>>,
    frames: Vec<Value>,
}

impl Client {
    fn spawn(agent: &Path, cwd: &Path, reading: Reading) -> Client {
        let mut child = Command::new(zi_binary())
            .args(["--mode", "rpc", "--no-session", "--model", "mock/m1"])
            .arg("--agent-dir")
            .arg(agent)
            .current_dir(cwd)
            .env_remove("ZI_MODE")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn zi");
        let mut stdout = child.stdout.take().expect("stdout");
        let mut stderr_pipe = child.stderr.take().expect("stderr");
        let (lines_tx, lines) = mpsc::channel();
        let (start_tx, start_rx) = mpsc::channel::<()>();
        let reader = std::thread::spawn(move || {
            if matches!(reading, Reading::AfterSignal) {
                let _ = start_rx.recv();
            }
            let mut all = Vec::new();
            let mut chunk = vec![0u8; 64 * 1024];
            let mut line_start = 0;
            loop {
                let read = match stdout.read(&mut chunk) {
                    Ok(0) | Err(_) => break,
                    Ok(read) => read,
                };
                all.extend_from_slice(&chunk[..read]);
                while let Some(end) = all[line_start..].iter().position(|&b| b == b'\n') {
                    let line = all[line_start..line_start + end].to_vec();
                    line_start += end + 1;
                    let _ = lines_tx.send(line);
                }
                if let Reading::Slow { pause } = reading {
                    std::thread::sleep(pause);
                }
            }
            all
        });
        let stderr = std::thread::spawn(move || {
            let mut text = String::new();
            let _ = stderr_pipe.read_to_string(&mut text);
            text
        });
        Client {
            stdin: child.stdin.take(),
            child,
            lines,
            start_reading: Some(start_tx),
            reader: Some(reader),
            stderr: Some(stderr),
            frames: Vec::new(),
        }
    }

    fn send(&mut self, request: Value) {
        let mut text = request.to_string();
        text.push('\n');
        self.stdin
            .as_mut()
            .expect("stdin open")
            .write_all(text.as_bytes())
            .expect("write a request");
    }

    fn start_reading(&mut self) {
        if let Some(start) = self.start_reading.take() {
            let _ = start.send(());
        }
    }

    /// The next frame; every line must be one whole JSON object.
    fn next_frame(&mut self) -> Value {
        let line = self
            .lines
            .recv_timeout(DEADLINE)
            .unwrap_or_else(|_| self.fail("no further frame"));
        let frame: Value = serde_json::from_slice(&line).unwrap_or_else(|error| {
            let start = String::from_utf8_lossy(&line[..line.len().min(200)]).into_owned();
            self.fail(&format!(
                "a line of {} bytes is not JSON ({error}): {start}",
                line.len()
            ))
        });
        self.frames.push(frame.clone());
        frame
    }

    fn response(&mut self, id: &str) -> Value {
        loop {
            let frame = self.next_frame();
            if frame["type"] == "response" && frame["id"] == id {
                return frame;
            }
        }
    }

    /// Closes stdin, reads the rest and waits for the exit.
    fn finish(&mut self) -> (ExitStatus, String) {
        self.start_reading();
        self.stdin.take();
        let rest = self
            .reader
            .take()
            .map(|r| r.join().expect("reader"))
            .unwrap_or_default();
        assert!(
            rest.is_empty() || rest.ends_with(b"\n"),
            "stdout ends inside a frame"
        );
        while let Ok(line) = self.lines.try_recv() {
            let frame: Value = serde_json::from_slice(&line).expect("a whole JSON frame");
            self.frames.push(frame);
        }
        let deadline = Instant::now() + DEADLINE;
        let status = loop {
            if let Some(status) = self.child.try_wait().expect("wait for zi") {
                break status;
            }
            assert!(Instant::now() < deadline, "zi did not exit");
            std::thread::sleep(Duration::from_millis(20));
        };
        let stderr = self
            .stderr
            .take()
            .map(|s| s.join().expect("stderr"))
            .unwrap_or_default();
        (status, stderr)
    }

    fn assert_sequences_gap_free(&self) {
        for (index, frame) in self.frames.iter().enumerate() {
            assert_eq!(
                frame["sequence"],
                json!(index as u64 + 1),
                "frame {index} is out of sequence"
            );
        }
    }

    fn fail(&mut self, what: &str) -> ! {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let stderr = self
            .stderr
            .take()
            .map(|s| s.join().unwrap_or_default())
            .unwrap_or_default();
        panic!(
            "{what}; {} frames read; stderr:\n{stderr}",
            self.frames.len()
        );
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs one prompt whose run produces very large frames while the client reads slowly, and
/// checks that every frame arrives whole and zi exits 0 at EOF.
fn run_large_output(mock: &MockLlm, step: Vec<Step>) -> (Client, Value) {
    let agent = AgentDir::new();
    let cwd = AgentDir::new();
    agent.write("models.json", &models_json(mock));
    for step in step {
        mock.push(step);
    }
    let pause = Duration::from_millis(20);
    let mut client = Client::spawn(agent.path(), cwd.path(), Reading::Slow { pause });
    assert_eq!(client.next_frame()["type"], "ready");
    client.send(json!({"version":1,"id":"p","method":"session.prompt","params":{"delivery":"direct","text":"go","completionId":"c"}}));
    client.send(
        json!({"version":1,"id":"w","method":"session.await_idle","params":{"completionId":"c"}}),
    );
    let prompt = client.response("p");
    assert_eq!(prompt["ok"], true, "{prompt}");
    let settled = client.response("w");
    assert_eq!(settled["ok"], true, "{settled}");
    let (status, stderr) = client.finish();
    assert!(
        status.success(),
        "zi exited with {status}; stderr:\n{stderr}"
    );
    assert!(!stderr.contains("RPC output"), "stderr:\n{stderr}");
    client.assert_sequences_gap_free();
    drop(cwd);
    (client, settled)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_six_mib_reply_in_all_mode_reaches_a_client_that_reads_slowly() {
    let mock = MockLlm::start().await.expect("mock");
    let total = 6 * MIB;
    let (client, settled) = tokio::task::block_in_place(|| {
        run_large_output(
            &mock,
            vec![Step::Bytes {
                total_bytes: total,
                delta_bytes: 64 * 1024,
            }],
        )
    });
    assert_eq!(
        settled["result"]["completion"]["originalBytes"],
        json!(total),
        "{settled}"
    );
    let types: Vec<&str> = client
        .frames
        .iter()
        .filter_map(|f| f["event"]["type"].as_str())
        .collect();
    for expected in ["message_end", "turn_end", "agent_end", "agent_settled"] {
        assert!(types.contains(&expected), "no {expected} in {types:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_eight_mib_write_call_in_all_mode_reaches_a_client_that_reads_slowly() {
    let mock = MockLlm::start().await.expect("mock");
    let content = "x".repeat(8 * MIB);
    let steps = vec![
        Step::tool_call(
            "call-1",
            "write",
            json!({"path": "big.txt", "content": content}),
        ),
        Step::text("written"),
    ];
    let (client, settled) = tokio::task::block_in_place(|| run_large_output(&mock, steps));
    assert_eq!(
        settled["result"]["completion"]["text"], "written",
        "{settled}"
    );
    let tool_end = client
        .frames
        .iter()
        .find(|f| f["event"]["type"] == "tool_execution_end")
        .expect("tool_execution_end");
    assert_eq!(tool_end["event"]["isError"], false, "{tool_end}");
}

/// Waits until the process has read and written nothing for a second (its I/O counters in
/// `/proc/<pid>/io` stand still) or has exited.
fn wait_until_quiescent(pid: u32) {
    let counters = || {
        std::fs::read_to_string(format!("/proc/{pid}/io"))
            .ok()
            .map(|io| {
                io.lines()
                    .filter(|l| l.starts_with("rchar:") || l.starts_with("wchar:"))
                    .map(str::to_string)
                    .collect::<Vec<_>>()
            })
    };
    let deadline = Instant::now() + DEADLINE;
    let mut last = counters();
    let mut still_since = Instant::now();
    while last.is_some() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
        let now = counters();
        if now != last {
            last = now;
            still_since = Instant::now();
        } else if still_since.elapsed() >= Duration::from_secs(1) {
            return;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twelve_hundred_requests_written_before_reading_are_all_answered() {
    let mock = MockLlm::start().await.expect("mock");
    let agent = AgentDir::new();
    let cwd = AgentDir::new();
    agent.write("models.json", &models_json(&mock));
    tokio::task::block_in_place(|| {
        let mut client = Client::spawn(agent.path(), cwd.path(), Reading::AfterSignal);
        let count = 1200;
        let mut records = String::new();
        for i in 0..count {
            records.push_str(
                &json!({"version":1,"id":format!("r{i}"),"method":"session.get_state"}).to_string(),
            );
            records.push('\n');
        }
        // The whole batch is written before anything is read; a writer thread lets the test
        // fail with a message (instead of hanging) if zi stopped reading its input for good.
        let mut stdin = client.stdin.take().expect("stdin");
        let (written_tx, written) = mpsc::channel();
        let writer = std::thread::spawn(move || {
            let result = stdin.write_all(records.as_bytes());
            let _ = written_tx.send(result.is_ok());
            stdin
        });
        match written.recv_timeout(DEADLINE) {
            Ok(true) => {}
            Ok(false) => client.fail("zi closed its input"),
            Err(_) => client.fail("zi never read the whole batch"),
        }
        client.stdin = Some(writer.join().expect("writer"));
        // Reading starts only once zi has done all it can without a reader.
        wait_until_quiescent(client.child.id());
        client.start_reading();

        assert_eq!(client.next_frame()["type"], "ready");
        let mut answered = std::collections::HashMap::new();
        while answered.len() < count {
            let frame = client.next_frame();
            assert_eq!(frame["type"], "response", "{frame}");
            let id = frame["id"].as_str().expect("id").to_string();
            let outcome = match (&frame["ok"], &frame["error"]["code"]) {
                (Value::Bool(true), _) => "ok",
                (_, code) if code == "capacity" => "capacity",
                _ => panic!("unexpected response {frame}"),
            };
            assert!(
                answered.insert(id.clone(), outcome).is_none(),
                "two responses for {id}"
            );
        }
        assert!(answered.values().any(|o| *o == "ok"));
        let (status, stderr) = client.finish();
        assert!(
            status.success(),
            "zi exited with {status}; stderr:\n{stderr}"
        );
        assert!(!stderr.contains("RPC output"), "stderr:\n{stderr}");
        assert_eq!(client.frames.len(), count + 1, "frames after the batch");
        client.assert_sequences_gap_free();
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_stops_reading_gets_output_error_after_the_stall_timeout() {
    let mock = MockLlm::start().await.expect("mock");
    let agent = AgentDir::new();
    let cwd = AgentDir::new();
    agent.write("models.json", &models_json(&mock));
    mock.push(Step::Bytes {
        total_bytes: 6 * MIB,
        delta_bytes: 64 * 1024,
    });
    tokio::task::block_in_place(|| {
        let mut client = Client::spawn(agent.path(), cwd.path(), Reading::AfterSignal);
        client.send(json!({"version":1,"id":"p","method":"session.prompt","params":{"delivery":"direct","text":"go"}}));
        // Nothing is read: zi pauses, then gives up on the client after the stall timeout.
        let started = Instant::now();
        let deadline = started + DEADLINE;
        let status = loop {
            if let Some(status) = client.child.try_wait().expect("wait for zi") {
                break status;
            }
            if Instant::now() > deadline {
                client.fail("zi never gave up on a client that stopped reading");
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        let stderr = client
            .stderr
            .take()
            .map(|s| s.join().expect("stderr"))
            .unwrap_or_default();
        assert_eq!(status.code(), Some(1), "stderr:\n{stderr}");
        assert!(
            stderr.contains("RPC output exceeded its pending-write bound"),
            "stderr:\n{stderr}"
        );
        // The stall timeout (10 s) had to pass first.
        assert!(started.elapsed() >= Duration::from_secs(10));
    });
}
