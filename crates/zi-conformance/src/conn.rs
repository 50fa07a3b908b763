//! A raw connection to a server under test: bytes in, frames out, and a wire transcript.

use std::collections::VecDeque;
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncBufReadExt as _, AsyncReadExt as _, AsyncWriteExt as _, BufReader};
use tokio::process::{Child, ChildStdin, Command};
use tokio::sync::mpsc;

/// Shared transcript of one check: `> ` client bytes, `< ` server lines, `# ` notes.
pub type Transcript = Arc<Mutex<Vec<String>>>;

const TRANSCRIPT_LINE_BYTES: usize = 600;

pub fn note(transcript: &Transcript, prefix: &str, bytes: &[u8]) {
    let text = String::from_utf8_lossy(&bytes[..bytes.len().min(TRANSCRIPT_LINE_BYTES)]);
    let more = if bytes.len() > TRANSCRIPT_LINE_BYTES {
        format!("… ({} bytes)", bytes.len())
    } else {
        String::new()
    };
    if let Ok(mut t) = transcript.lock() {
        t.push(format!("{prefix}{}{more}", text.trim_end_matches('\n')));
    }
}

/// A framing violation seen on stdout (checked by the framing and sequence checks).
#[derive(Debug, Clone)]
pub struct Violation(pub String);

/// Why talking to the server under test failed; the Display is the failure text of the check's
/// report.
#[derive(Debug, thiserror::Error)]
pub enum ConnError {
    /// The server command has no program.
    #[error("empty server command")]
    EmptyCommand,
    /// The server did not start.
    #[error("spawn {program}: {source}")]
    Spawn {
        /// The program.
        program: String,
        /// What the operating system reported.
        source: std::io::Error,
    },
    /// The child has no pipe for this stream.
    #[error("no {0}")]
    NoPipe(&'static str),
    /// Stdin was closed before this write.
    #[error("stdin closed")]
    StdinClosed,
    /// Writing to the server's stdin failed.
    #[error("write: {0}")]
    Write(std::io::Error),
    /// Flushing the server's stdin failed.
    #[error("flush: {0}")]
    Flush(std::io::Error),
    /// A request record could not be encoded.
    #[error(transparent)]
    Encode(#[from] serde_json::Error),
    /// A request the check needed to succeed failed; carries the response frame.
    #[error("{method} failed: {frame}")]
    Failed {
        /// The request's method.
        method: String,
        /// The response frame.
        frame: Value,
    },
    /// Stdout ended before the awaited frame.
    #[error("stdout closed while waiting for {0}")]
    Closed(String),
    /// The awaited frame did not come in time.
    #[error("timed out after {WAIT:?} waiting for {0}")]
    TimedOut(String),
    /// A frame the backlog matched vanished from it.
    #[error("{0}")]
    Lost(String),
    /// No frame came within the ready bound.
    #[error("no ready frame within 10 s")]
    NoReady,
    /// Stdout ended before `ready`; carries what the server wrote on stderr.
    #[error("stdout closed before ready; stderr: {0}")]
    ClosedBeforeReady(String),
    /// The first frame was not `ready` with sequence 1.
    #[error("the first frame is not ready with sequence 1: {0}")]
    NotReady(Value),
}

pub struct Conn {
    child: Option<Child>,
    stdin: Option<ChildStdin>,
    rx: mpsc::UnboundedReceiver<Value>,
    backlog: VecDeque<Value>,
    pub frames: Vec<Value>,
    pub violations: Arc<Mutex<Vec<Violation>>>,
    stderr: Arc<Mutex<Vec<u8>>>,
    /// The task reading stderr; awaited after exit so `stderr_text` is complete.
    stderr_reader: Option<tokio::task::JoinHandle<()>>,
    transcript: Transcript,
}

pub const WAIT: Duration = Duration::from_secs(15);

impl Conn {
    pub fn spawn(
        argv: &[String],
        cwd: &std::path::Path,
        home: &std::path::Path,
        transcript: Transcript,
        all_frames: Arc<Mutex<Vec<Value>>>,
    ) -> Result<Conn, ConnError> {
        let (program, args) = argv.split_first().ok_or(ConnError::EmptyCommand)?;
        note(&transcript, "# spawn: ", argv.join(" ").as_bytes());
        let mut child = Command::new(program)
            .args(args)
            .current_dir(cwd)
            .env_clear()
            .env("HOME", home)
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|source| ConnError::Spawn {
                program: program.clone(),
                source,
            })?;
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().ok_or(ConnError::NoPipe("stdout"))?;
        let stderr_pipe = child.stderr.take().ok_or(ConnError::NoPipe("stderr"))?;
        let stderr = Arc::new(Mutex::new(Vec::new()));
        let stderr_reader = tokio::spawn(read_stderr(stderr_pipe, stderr.clone()));
        let (tx, rx) = mpsc::unbounded_channel();
        let violations = Arc::new(Mutex::new(Vec::new()));
        tokio::spawn(read_frames(
            stdout,
            transcript.clone(),
            violations.clone(),
            all_frames.clone(),
            tx,
        ));
        Ok(Conn {
            child: Some(child),
            stdin,
            rx,
            backlog: VecDeque::new(),
            frames: Vec::new(),
            violations,
            stderr,
            stderr_reader: Some(stderr_reader),
            transcript,
        })
    }

    pub fn note(&self, text: &str) {
        note(&self.transcript, "# ", text.as_bytes());
    }

    pub async fn send_raw(&mut self, bytes: &[u8]) -> Result<(), ConnError> {
        note(&self.transcript, "> ", bytes);
        let stdin = self.stdin.as_mut().ok_or(ConnError::StdinClosed)?;
        stdin.write_all(bytes).await.map_err(ConnError::Write)?;
        stdin.flush().await.map_err(ConnError::Flush)
    }

    /// Sends a request record with LF.
    pub async fn send(&mut self, record: &Value) -> Result<(), ConnError> {
        let mut line = serde_json::to_vec(record)?;
        line.push(b'\n');
        self.send_raw(&line).await
    }

    pub async fn request(
        &mut self,
        id: &str,
        method: &str,
        params: Option<Value>,
    ) -> Result<(), ConnError> {
        let mut record = serde_json::json!({"version": 1, "id": id, "method": method});
        if let Some(params) = params {
            record["params"] = params;
        }
        self.send(&record).await
    }

    /// Sends a request and waits for its response frame.
    pub async fn call(
        &mut self,
        id: &str,
        method: &str,
        params: Option<Value>,
    ) -> Result<Value, ConnError> {
        self.request(id, method, params).await?;
        self.response(id).await
    }

    /// Sends `session.prompt` with `delivery` and `text` and returns its successful `result`.
    pub async fn prompt(
        &mut self,
        id: &str,
        delivery: &str,
        text: &str,
    ) -> Result<Value, ConnError> {
        let params = serde_json::json!({"delivery": delivery, "text": text});
        self.call_ok(id, "session.prompt", Some(params)).await
    }

    /// Sends a request and returns its successful `result`.
    pub async fn call_ok(
        &mut self,
        id: &str,
        method: &str,
        params: Option<Value>,
    ) -> Result<Value, ConnError> {
        let frame = self.call(id, method, params).await?;
        if frame["ok"] != true {
            return Err(ConnError::Failed {
                method: method.to_string(),
                frame,
            });
        }
        Ok(frame["result"].clone())
    }

    pub async fn next_frame(&mut self, timeout: Duration) -> Option<Value> {
        if let Some(frame) = self.backlog.pop_front() {
            return Some(frame);
        }
        let frame = tokio::time::timeout(timeout, self.rx.recv()).await.ok()??;
        self.frames.push(frame.clone());
        Some(frame)
    }

    /// Waits for the first frame matching `pred`; other frames stay in the backlog.
    pub async fn wait_for(
        &mut self,
        what: &str,
        mut pred: impl FnMut(&Value) -> bool,
    ) -> Result<Value, ConnError> {
        if let Some(i) = self.backlog.iter().position(&mut pred) {
            return self
                .backlog
                .remove(i)
                .ok_or_else(|| ConnError::Lost(what.to_string()));
        }
        let deadline = tokio::time::Instant::now() + WAIT;
        let mut skipped = Vec::new();
        let found = loop {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            match tokio::time::timeout(left, self.rx.recv()).await {
                Ok(Some(frame)) => {
                    self.frames.push(frame.clone());
                    if pred(&frame) {
                        break Ok(frame);
                    }
                    skipped.push(frame);
                }
                Ok(None) => break Err(ConnError::Closed(what.to_string())),
                Err(_) => break Err(ConnError::TimedOut(what.to_string())),
            }
        };
        self.backlog.extend(skipped);
        found
    }

    pub async fn ready(&mut self) -> Result<Value, ConnError> {
        let frame = tokio::time::timeout(Duration::from_secs(10), self.rx.recv())
            .await
            .map_err(|_| ConnError::NoReady)?
            .ok_or_else(|| ConnError::ClosedBeforeReady(self.stderr_text()))?;
        self.frames.push(frame.clone());
        if frame["type"] != "ready" || frame["sequence"] != 1 {
            return Err(ConnError::NotReady(frame));
        }
        Ok(frame)
    }

    pub async fn response(&mut self, id: &str) -> Result<Value, ConnError> {
        let want = id.to_string();
        self.wait_for(&format!("the response to {id:?}"), move |f| {
            f["type"] == "response" && f["id"] == want.as_str()
        })
        .await
    }

    pub async fn protocol_error(&mut self) -> Result<Value, ConnError> {
        self.wait_for("a protocol_error", |f| f["type"] == "protocol_error")
            .await
    }

    pub async fn event(&mut self, kind: &str) -> Result<Value, ConnError> {
        let want = kind.to_string();
        self.wait_for(&format!("a {kind} event"), move |f| {
            f["type"] == "session_event" && f["event"]["type"] == want.as_str()
        })
        .await
    }

    /// Frames received (and not consumed by a wait) within `window`.
    pub async fn drain(&mut self, window: Duration) -> Vec<Value> {
        let mut out: Vec<Value> = self.backlog.drain(..).collect();
        while let Some(frame) = self.next_frame(window).await {
            out.push(frame);
        }
        out
    }

    pub fn close_stdin(&mut self) {
        note(&self.transcript, "# ", b"close stdin (EOF)");
        self.stdin = None;
    }

    pub async fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let child = self.child.as_mut()?;
        let status = tokio::time::timeout(timeout, child.wait())
            .await
            .ok()?
            .ok()?;
        self.child = None;
        note(&self.transcript, "# exit: ", status.to_string().as_bytes());
        // The process is gone; let the reader drain what it wrote to stderr.
        if let Some(reader) = self.stderr_reader.take() {
            let _ = tokio::time::timeout(Duration::from_secs(2), reader).await;
        }
        Some(status)
    }

    pub fn signal(&self, signal: i32) {
        if let Some(pid) = self.child.as_ref().and_then(Child::id) {
            note(&self.transcript, "# signal ", signal.to_string().as_bytes());
            zi_os::process::kill_process(pid as i32, signal);
        }
    }

    pub fn stderr_text(&self) -> String {
        self.stderr
            .lock()
            .map(|s| String::from_utf8_lossy(&s).into_owned())
            .unwrap_or_default()
    }

    /// Closes stdin and reaps the server, noting its stderr in the transcript.
    pub async fn finish(&mut self) -> Option<ExitStatus> {
        self.close_stdin();
        let status = match self.wait_exit(Duration::from_secs(6)).await {
            Some(status) => Some(status),
            None => {
                if let Some(child) = self.child.as_mut() {
                    let _ = child.start_kill();
                    let _ = child.wait().await;
                }
                self.child = None;
                self.note("killed after 6 s without exit");
                None
            }
        };
        let stderr = self.stderr_text();
        if !stderr.is_empty() {
            note(&self.transcript, "# stderr: ", stderr.as_bytes());
        }
        status
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        if let Some(child) = self.child.as_mut() {
            let _ = child.start_kill();
        }
    }
}

/// Keeps the first MiB of the server's stderr for the report.
async fn read_stderr(mut pipe: tokio::process::ChildStderr, sink: Arc<Mutex<Vec<u8>>>) {
    let mut chunk = vec![0u8; 8192];
    while let Ok(n) = pipe.read(&mut chunk).await {
        if n == 0 {
            break;
        }
        if let Ok(mut s) = sink.lock()
            && s.len() < 1 << 20
        {
            s.extend_from_slice(&chunk[..n]);
        }
    }
}

/// Reads stdout frame by frame: records each in the transcript and in `all`, notes every
/// framing violation (LF, CRLF, compact JSON, version, sequence, type) and passes the frames
/// on to `tx`.
async fn read_frames(
    stdout: tokio::process::ChildStdout,
    t: Transcript,
    v: Arc<Mutex<Vec<Violation>>>,
    all: Arc<Mutex<Vec<Value>>>,
    tx: mpsc::UnboundedSender<Value>,
) {
    let mut reader = BufReader::new(stdout);
    let mut expected = 1u64;
    let mut line = Vec::new();
    let push = |text: String| {
        if let Ok(mut v) = v.lock() {
            v.push(Violation(text));
        }
    };
    loop {
        line.clear();
        match reader.read_until(b'\n', &mut line).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        note(&t, "< ", &line);
        if line.last() != Some(&b'\n') {
            push("stdout ended inside a line (no LF)".into());
            return;
        }
        line.pop();
        if line.last() == Some(&b'\r') {
            push("frame line ends with CRLF".into());
        }
        let Ok(frame) = serde_json::from_slice::<Value>(&line) else {
            push(format!(
                "stdout line is not JSON: {}",
                String::from_utf8_lossy(&line[..line.len().min(200)])
            ));
            continue;
        };
        if serde_json::to_vec(&frame).ok().as_deref() != Some(&line[..]) {
            push("frame is not compact JSON".into());
        }
        if frame["version"] != 1 {
            push("frame version is not 1".into());
        }
        match frame["sequence"].as_u64() {
            Some(s) if s == expected => expected += 1,
            Some(s) => {
                push(format!("sequence gap: expected {expected}, received {s}"));
                expected = s + 1;
            }
            None => push("frame without an integer sequence".into()),
        }
        let ty = frame["type"].as_str().unwrap_or_default();
        if !["ready", "response", "protocol_error", "session_event"].contains(&ty) {
            push(format!("unknown frame type {ty:?}"));
        }
        if let Ok(mut all) = all.lock() {
            all.push(frame.clone());
        }
        if tx.send(frame).is_err() {
            return;
        }
    }
}
