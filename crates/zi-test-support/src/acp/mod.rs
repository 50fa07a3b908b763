//! The black-box harness of `zi acp`: the real binary over stdio, every message it sends
//! checked against the ACP JSON Schema ([`validate`]), waits by predicate with deadlines, and
//! the clients nobody here wrote ([`clients`]: acpx and the Python SDK).
//!
//! [`AcpHarness`] speaks raw JSON-RPC lines, so a test states exactly what a client sends
//! (bad JSON, unknown methods, a 16 MiB record) and what it answers to zi's own requests
//! (`session/request_permission`, `fs/*`). Messages that arrive while a wait looks for
//! something else stay in a backlog for later waits.

pub mod clients;
pub mod validate;

use std::collections::VecDeque;
use std::os::unix::process::ExitStatusExt as _;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt as _, AsyncReadExt as _, AsyncWriteExt as _, BufReader};
use tokio::process::{Child, ChildStdin};
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::preview::{TAIL_BYTES, preview_value, tail_text};
use crate::process::kill_group;
use crate::zi_command::ZiCommand;

/// How a `zi acp` child ended.
#[derive(Debug, Clone)]
pub struct AcpExit {
    /// The exit code, when it exited.
    pub code: Option<i32>,
    /// The signal that killed it, when one did.
    pub signal: Option<i32>,
    /// Everything it wrote to stderr.
    pub stderr: String,
}

/// A line of zi's stdout that breaks ACP's framing (docs/acp.md).
#[derive(Debug, thiserror::Error)]
enum LineViolation {
    /// The output ended inside a line.
    #[error("a line without LF: {0}")]
    NoLf(String),
    /// A line ends with CR LF.
    #[error("a line ends with CR LF")]
    CrLf,
    /// A line that is not JSON.
    #[error("not JSON ({error}): {line}")]
    NotJson {
        error: serde_json::Error,
        line: String,
    },
}

/// A running `zi acp`. Dropping it kills the child's process group.
pub struct AcpHarness {
    child: Child,
    pid: u32,
    stdin: Option<ChildStdin>,
    lines: mpsc::UnboundedReceiver<Result<Value, LineViolation>>,
    /// Every message zi sent, in order.
    received: Vec<Value>,
    /// Indices into `received` no wait has consumed yet.
    backlog: VecDeque<usize>,
    validator: validate::Validator,
    violations: Vec<String>,
    stderr: Arc<Mutex<Vec<u8>>>,
    next_id: i64,
    timeout: Duration,
    _home: Option<tempfile::TempDir>,
}

impl ZiCommand {
    /// `zi acp --agent-dir AGENT` in `cwd`.
    pub fn acp(
        bin: impl AsRef<std::path::Path>,
        agent: &crate::dirs::AgentDir,
        cwd: &std::path::Path,
    ) -> Self {
        ZiCommand::new(bin)
            .arg("acp")
            .agent_dir(agent)
            .current_dir(cwd)
    }

    /// Spawns the command (an ACP agent) and returns its harness.
    pub fn spawn_acp(self) -> AcpHarness {
        AcpHarness::spawn(self)
    }
}

impl AcpHarness {
    fn spawn(command: ZiCommand) -> AcpHarness {
        let described = command.describe();
        let timeout = command.wait_timeout();
        let (mut cmd, home) = command
            .command()
            .unwrap_or_else(|e| panic!("prepare `{described}`: {e}"));
        let mut child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("spawn `{described}`: {e}"));
        let pid = child.id().expect("a pid");
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().expect("stdout");
        let mut stderr_pipe = child.stderr.take().expect("stderr");
        let stderr = Arc::new(Mutex::new(Vec::new()));
        let sink = stderr.clone();
        tokio::spawn(async move {
            let mut buffer = vec![0u8; 16 * 1024];
            while let Ok(n) = stderr_pipe.read(&mut buffer).await {
                if n == 0 {
                    break;
                }
                sink.lock().unwrap().extend_from_slice(&buffer[..n]);
            }
        });
        let (tx, lines) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            let mut reader = BufReader::new(stdout);
            let mut line = Vec::new();
            loop {
                line.clear();
                match reader.read_until(b'\n', &mut line).await {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {}
                }
                let parsed = match line.strip_suffix(b"\n") {
                    None => Err(LineViolation::NoLf(
                        String::from_utf8_lossy(&line).into_owned(),
                    )),
                    Some(body) if body.ends_with(b"\r") => Err(LineViolation::CrLf),
                    Some(body) => serde_json::from_slice::<Value>(body).map_err(|error| {
                        LineViolation::NotJson {
                            error,
                            line: String::from_utf8_lossy(body).into_owned(),
                        }
                    }),
                };
                if tx.send(parsed).is_err() {
                    break;
                }
            }
        });
        AcpHarness {
            child,
            pid,
            stdin,
            lines,
            received: Vec::new(),
            backlog: VecDeque::new(),
            validator: validate::Validator::default(),
            violations: Vec::new(),
            stderr,
            next_id: 1,
            timeout,
            _home: home,
        }
    }

    /// The child's process id.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Writes one message (and notes it for the validation of zi's answers).
    pub async fn send(&mut self, message: Value) {
        self.validator.client_sent(&message);
        let mut line = message.to_string().into_bytes();
        line.push(b'\n');
        self.send_raw(&line).await;
    }

    /// Writes bytes as they are.
    pub async fn send_raw(&mut self, bytes: &[u8]) {
        let stdin = self.stdin.as_mut().expect("stdin is open");
        stdin.write_all(bytes).await.expect("write to zi");
        stdin.flush().await.expect("flush to zi");
    }

    /// Sends a request; returns its id.
    pub async fn call(&mut self, method: &str, params: Value) -> i64 {
        let id = self.next_id;
        self.next_id += 1;
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
        id
    }

    /// Sends a request and waits for its response.
    pub async fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.call(method, params).await;
        self.response(id).await
    }

    /// Sends a notification.
    pub async fn notify(&mut self, method: &str, params: Value) {
        self.send(json!({"jsonrpc": "2.0", "method": method, "params": params}))
            .await;
    }

    /// Answers a request zi sent.
    pub async fn answer(&mut self, id: &Value, result: Value) {
        self.send(json!({"jsonrpc": "2.0", "id": id, "result": result}))
            .await;
    }

    /// `initialize` with the given client capabilities; returns the result.
    pub async fn initialize(&mut self, capabilities: Value) -> Value {
        let response = self
            .request(
                "initialize",
                json!({"protocolVersion": 1, "clientCapabilities": capabilities,
                       "clientInfo": {"name": "zi-test", "version": "0"}}),
            )
            .await;
        response["result"].clone()
    }

    /// `session/new` in `cwd`; returns the result.
    pub async fn new_session(&mut self, cwd: &std::path::Path) -> Value {
        let response = self
            .request("session/new", json!({"cwd": cwd, "mcpServers": []}))
            .await;
        assert!(
            response.get("result").is_some(),
            "session/new failed: {response}"
        );
        response["result"].clone()
    }

    /// The response to request `id`.
    pub async fn response(&mut self, id: i64) -> Value {
        self.wait_for(&format!("the response to request {id}"), |m| {
            m["id"] == json!(id) && m.get("method").is_none()
        })
        .await
    }

    /// The next message (oldest first) matching `predicate`, consumed.
    pub async fn wait_for(&mut self, what: &str, predicate: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + self.timeout;
        loop {
            self.check_violations();
            if let Some(at) = self
                .backlog
                .iter()
                .position(|&index| predicate(&self.received[index]))
            {
                let index = self.backlog.remove(at).expect("in the backlog");
                return self.received[index].clone();
            }
            let left = deadline.saturating_duration_since(Instant::now());
            match tokio::time::timeout(left, self.lines.recv()).await {
                Ok(Some(line)) => self.take(line),
                Ok(None) => panic!("zi ended before {what}\n{}", self.context()),
                Err(_) => panic!("timed out waiting for {what}\n{}", self.context()),
            }
        }
    }

    /// Every message that arrives within `duration` (kept in the backlog).
    pub async fn drain_for(&mut self, duration: Duration) {
        let deadline = Instant::now() + duration;
        while let Ok(Some(line)) = tokio::time::timeout_at(deadline, self.lines.recv()).await {
            self.take(line);
        }
        self.check_violations();
    }

    fn take(&mut self, line: Result<Value, LineViolation>) {
        match line {
            Ok(message) => {
                let problems = self.validator.agent_sent(&message);
                if !problems.is_empty() {
                    self.violations.push(format!(
                        "{}\n    in {}",
                        problems.join("\n    "),
                        preview_value(&message)
                    ));
                }
                self.received.push(message);
                self.backlog.push_back(self.received.len() - 1);
            }
            Err(problem) => self.violations.push(problem.to_string()),
        }
    }

    fn check_violations(&self) {
        if !self.violations.is_empty() {
            panic!(
                "zi sent messages that break the ACP schema or framing:\n{}\n{}",
                self.violations.join("\n"),
                self.context()
            );
        }
    }

    /// Every message zi sent so far.
    pub fn received(&self) -> &[Value] {
        &self.received
    }

    /// The `session/update` updates of `session_id` received so far, in order.
    pub fn updates(&self, session_id: &str) -> Vec<Value> {
        self.received
            .iter()
            .filter(|m| m["method"] == "session/update" && m["params"]["sessionId"] == session_id)
            .map(|m| m["params"]["update"].clone())
            .collect()
    }

    /// The text of the agent message chunks of `session_id`.
    pub fn agent_text(&self, session_id: &str) -> String {
        self.updates(session_id)
            .iter()
            .filter(|u| u["sessionUpdate"] == "agent_message_chunk")
            .filter_map(|u| u["content"]["text"].as_str().map(str::to_string))
            .collect()
    }

    /// The child's stderr so far.
    pub fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.stderr.lock().unwrap()).into_owned()
    }

    fn context(&self) -> String {
        let recent: Vec<String> = self
            .received
            .iter()
            .rev()
            .take(10)
            .rev()
            .map(preview_value)
            .collect();
        format!(
            "recent messages:\n  {}\nstderr:\n{}",
            recent.join("\n  "),
            tail_text(&self.stderr.lock().unwrap(), TAIL_BYTES)
        )
    }

    /// Sends `signal` to zi.
    pub fn signal(&self, signal: i32) {
        // SAFETY: kill(2) has no memory-safety preconditions; the child is not reaped yet.
        unsafe {
            libc::kill(self.pid as libc::pid_t, signal);
        }
    }

    /// Closes stdin (EOF).
    pub fn close_stdin(&mut self) {
        self.stdin = None;
    }

    /// Waits for zi to exit (within `timeout`), reading what it still sends.
    pub async fn exit(&mut self, timeout: Duration) -> AcpExit {
        let deadline = Instant::now() + timeout;
        let status = loop {
            tokio::select! {
                status = self.child.wait() => break status.expect("wait for zi"),
                line = self.lines.recv() => match line {
                    Some(line) => self.take(line),
                    None => {
                        let left = deadline.saturating_duration_since(Instant::now());
                        match tokio::time::timeout(left, self.child.wait()).await {
                            Ok(status) => break status.expect("wait for zi"),
                            Err(_) => panic!("zi did not exit within {timeout:?}\n{}", self.context()),
                        }
                    }
                },
                () = tokio::time::sleep_until(deadline) => {
                    panic!("zi did not exit within {timeout:?}\n{}", self.context())
                }
            }
        };
        while let Ok(Some(line)) =
            tokio::time::timeout(Duration::from_millis(200), self.lines.recv()).await
        {
            self.take(line);
        }
        self.check_violations();
        AcpExit {
            code: status.code(),
            signal: status.signal(),
            stderr: self.stderr(),
        }
    }
}

impl Drop for AcpHarness {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            kill_group(self.pid);
        }
    }
}
