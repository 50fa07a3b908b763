//! Transitional: the older frame reader that the test files not yet moved to
//! [`crate::harness`] still use. It goes once the last of them has moved; new tests use
//! [`crate::zi_command::ZiCommand`] and [`crate::harness::Harness`].

use std::collections::VecDeque;
use std::ffi::OsStr;
use std::fmt::Write as _;
use std::io;
use std::os::unix::process::ExitStatusExt as _;
use std::path::Path;
use std::process::ExitStatus;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{
    AsyncBufReadExt as _, AsyncRead, AsyncReadExt as _, AsyncWriteExt as _, BufReader,
};
use tokio::process::{Child, ChildStdin, ChildStdout};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio::time::Instant;

pub use crate::dirs::{AgentDir, TempCwd, temp_cwd};
pub use crate::frame_schema::schema_violation;
pub use crate::harness::Exited;
use crate::preview::{TAIL_BYTES as STDERR_TAIL_BYTES, preview, preview_value, tail_text};
pub use crate::process::{descendants, process_exists, process_group_members, wait_until_gone};
use crate::process::{kill_group, kill_group_if_populated};
use crate::zi_command::ZiCommand;
pub use crate::zi_command::{DEFAULT_WAIT_TIMEOUT, Finished, is_withheld_env_var};

/// Capacity of the buffered stdout reader (lines themselves may be arbitrarily long).
const STDOUT_BUFFER_BYTES: usize = 64 * 1024;
/// How many recent frames a panic message shows.
const CONTEXT_FRAMES: usize = 8;
/// How long `Drop` waits for the killed child to be reaped.
const DROP_REAP_TIMEOUT: Duration = Duration::from_secs(5);

/// The four frame types a Zi RPC v1 server may send (rpc-reference §2).
const FRAME_TYPES: [&str; 4] = ["ready", "response", "protocol_error", "session_event"];

/// A [`ZiCommand`] whose `spawn_rpc` starts the older [`RpcProcess`].
#[derive(Debug, Clone)]
pub struct ZiProcessBuilder {
    inner: ZiCommand,
}

impl ZiProcessBuilder {
    pub fn new(bin: impl AsRef<Path>) -> Self {
        ZiProcessBuilder {
            inner: ZiCommand::new(bin),
        }
    }

    pub fn validate_schema(self, on: bool) -> Self {
        ZiProcessBuilder {
            inner: self.inner.validate_schema(on),
        }
    }

    pub fn arg(self, a: impl AsRef<OsStr>) -> Self {
        ZiProcessBuilder {
            inner: self.inner.arg(a),
        }
    }

    pub fn args<I, S>(self, i: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        ZiProcessBuilder {
            inner: self.inner.args(i),
        }
    }

    pub fn env(self, k: impl AsRef<OsStr>, v: impl AsRef<OsStr>) -> Self {
        ZiProcessBuilder {
            inner: self.inner.env(k, v),
        }
    }

    pub fn current_dir(self, p: impl AsRef<Path>) -> Self {
        ZiProcessBuilder {
            inner: self.inner.current_dir(p),
        }
    }

    pub fn timeout(self, t: Duration) -> Self {
        ZiProcessBuilder {
            inner: self.inner.timeout(t),
        }
    }

    /// Spawns the process for RPC. Appends nothing to the arguments: pass `--mode rpc` yourself.
    pub async fn spawn_rpc(self) -> io::Result<RpcProcess> {
        let (mut cmd, home) = self.inner.command()?;
        let mut child = cmd.spawn()?;
        let pid = child.id().expect("a freshly spawned child has a pid");
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().expect("stdout is piped");
        let stderr_pipe = child.stderr.take().expect("stderr is piped");

        let (tx, rx) = mpsc::unbounded_channel();
        let stdout_task = tokio::spawn(read_stdout(stdout, tx, self.inner.validates_schema()));
        let stderr = Arc::new(Mutex::new(Vec::new()));
        let stderr_task = tokio::spawn(collect(stderr_pipe, Arc::clone(&stderr)));

        Ok(RpcProcess {
            command_line: self.inner.describe(),
            child,
            pid,
            stdin,
            rx,
            stdout_eof: false,
            frames: Vec::new(),
            backlog: VecDeque::new(),
            violation: None,
            stderr,
            stdout_task,
            stderr_task: Some(stderr_task),
            exit: None,
            timeout: self.inner.wait_timeout(),
            _home: home,
        })
    }

    /// See [`ZiCommand::run_to_end`].
    pub async fn run_to_end(self, stdin: &[u8], timeout: Duration) -> io::Result<Finished> {
        self.inner.run_to_end(stdin, timeout).await
    }
}

/// What the stdout reader forwards.
enum Incoming {
    Frame(Value),
    Violation(String),
}

enum Pulled {
    Frame(usize),
    Eof,
    Timeout,
}

/// A running `zi --mode rpc` child. Dropping it kills the child (SIGKILL, also to its process
/// group and known descendants) and reaps it.
pub struct RpcProcess {
    command_line: String,
    child: Child,
    pid: u32,
    stdin: Option<ChildStdin>,
    rx: mpsc::UnboundedReceiver<Incoming>,
    stdout_eof: bool,
    /// Every frame pulled from the reader, in order.
    frames: Vec<Value>,
    /// Indices into `frames` of frames no wait has consumed yet, in order.
    backlog: VecDeque<usize>,
    violation: Option<String>,
    stderr: Arc<Mutex<Vec<u8>>>,
    stdout_task: JoinHandle<()>,
    stderr_task: Option<JoinHandle<()>>,
    exit: Option<ExitStatus>,
    timeout: Duration,
    _home: Option<tempfile::TempDir>,
}

impl RpcProcess {
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Changes the timeout of subsequent waits.
    pub fn set_timeout(&mut self, t: Duration) {
        self.timeout = t;
    }

    /// Waits for the ready frame (the first frame; it must have sequence 1) and returns its
    /// `state`. May be called again later; it then returns the same state.
    pub async fn ready(&mut self) -> Value {
        let what = "the ready frame";
        self.check_violation(what);
        if self.frames.is_empty() {
            let deadline = Instant::now() + self.timeout;
            match self.pull(deadline, what).await {
                Pulled::Frame(i) => self.backlog.push_back(i),
                Pulled::Eof => self.fail(format!("zi closed stdout before sending {what}")),
                Pulled::Timeout => self.fail(self.timeout_message(what)),
            }
        }
        let first = &self.frames[0];
        if first["type"] != "ready" || first["sequence"] != 1 {
            let msg = format!(
                "the first frame is not ready with sequence 1: {}",
                preview_value(first)
            );
            self.fail(msg);
        }
        let state = first["state"].clone();
        self.backlog.retain(|&i| i != 0);
        state
    }

    /// Writes raw bytes to stdin (for framing tests). A broken pipe (the child closed its stdin or
    /// exited) is ignored; use [`try_send_raw`](Self::try_send_raw) to observe it.
    pub async fn send_raw(&mut self, bytes: &[u8]) {
        if let Err(e) = self.try_send_raw(bytes).await
            && e.kind() != io::ErrorKind::BrokenPipe
        {
            self.fail(format!(
                "writing {} bytes to zi stdin failed: {e}",
                bytes.len()
            ));
        }
    }

    /// Writes raw bytes to stdin and flushes, within the wait timeout. Fails with `NotConnected`
    /// after [`close_stdin`](Self::close_stdin).
    pub async fn try_send_raw(&mut self, bytes: &[u8]) -> io::Result<()> {
        let timeout = self.timeout;
        let Some(stdin) = self.stdin.as_mut() else {
            return Err(io::Error::new(
                io::ErrorKind::NotConnected,
                "stdin was already closed",
            ));
        };
        let write = async {
            stdin.write_all(bytes).await?;
            stdin.flush().await
        };
        match tokio::time::timeout(timeout, write).await {
            Ok(result) => result,
            Err(_) => Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("zi did not read its stdin within {timeout:?}"),
            )),
        }
    }

    /// Writes one JSON request line `{"version":1,"id":id,"method":method[,"params":params]}`.
    pub async fn send(&mut self, id: &str, method: &str, params: Option<Value>) {
        let mut request = json!({ "version": 1, "id": id, "method": method });
        if let Some(params) = params {
            request["params"] = params;
        }
        let mut line = serde_json::to_vec(&request).expect("serialize a request");
        line.push(b'\n');
        self.send_raw(&line).await;
    }

    /// Sends a request and waits for its correlated frame: the `response` with this id, or a
    /// `protocol_error` with this id (the request was rejected before admission). Other frames are
    /// kept in the backlog. Only frames received after the request was sent are considered, so an
    /// unconsumed older response with a reused id is not mistaken for this one. (To provoke a
    /// duplicate in-flight id, prefer [`send`](Self::send) + [`protocol_error`](Self::protocol_error):
    /// if the earlier operation settles first, this would return its response.)
    pub async fn request(&mut self, id: &str, method: &str, params: Option<Value>) -> Value {
        self.drain_available();
        let mark = self.frames.len();
        self.send(id, method, params).await;
        let what = format!("the response to request {id:?} ({method})");
        self.wait_matching(&what, mark, |f| {
            (f["type"] == "response" || f["type"] == "protocol_error") && f["id"] == id
        })
        .await
    }

    /// [`request`](Self::request), then asserts `ok: true` and returns `result`.
    pub async fn request_ok(&mut self, id: &str, method: &str, params: Option<Value>) -> Value {
        let frame = self.request(id, method, params).await;
        if frame["type"] != "response" || frame["ok"] != true {
            let msg = format!(
                "request {id:?} ({method}) did not succeed: {}",
                preview_value(&frame)
            );
            self.fail(msg);
        }
        frame["result"].clone()
    }

    /// The next frame of any type: the oldest unconsumed backlog frame, else the next new frame.
    /// Panics after the wait timeout (30 s by default) or when stdout closes.
    pub async fn next_frame(&mut self) -> Value {
        let what = "the next frame";
        self.check_violation(what);
        if let Some(i) = self.backlog.pop_front() {
            return self.frames[i].clone();
        }
        let deadline = Instant::now() + self.timeout;
        match self.pull(deadline, what).await {
            Pulled::Frame(i) => self.frames[i].clone(),
            Pulled::Eof => self.fail(format!("zi closed stdout while waiting for {what}")),
            Pulled::Timeout => self.fail(self.timeout_message(what)),
        }
    }

    /// Like [`next_frame`](Self::next_frame) but with its own timeout, returning `None` on timeout
    /// or when stdout is closed (for asserting that nothing more arrives).
    pub async fn next_frame_within(&mut self, timeout: Duration) -> Option<Value> {
        let what = "the next frame";
        self.check_violation(what);
        if let Some(i) = self.backlog.pop_front() {
            return Some(self.frames[i].clone());
        }
        match self.pull(Instant::now() + timeout, what).await {
            Pulled::Frame(i) => Some(self.frames[i].clone()),
            Pulled::Eof | Pulled::Timeout => None,
        }
    }

    /// Waits for the `response` frame with this id (backlog first, then new frames).
    pub async fn response(&mut self, id: &str) -> Value {
        let what = format!("the response with id {id:?}");
        self.wait_matching(&what, 0, |f| f["type"] == "response" && f["id"] == id)
            .await
    }

    /// Waits for a `protocol_error` frame with this id (`None`: one without an `id` key).
    pub async fn protocol_error(&mut self, id: Option<&str>) -> Value {
        let what = match id {
            Some(id) => format!("a protocol_error with id {id:?}"),
            None => "a protocol_error without id".to_string(),
        };
        self.wait_matching(&what, 0, |f| {
            f["type"] == "protocol_error"
                && match id {
                    Some(id) => f["id"] == id,
                    None => f.get("id").is_none(),
                }
        })
        .await
    }

    /// Waits for a `session_event` whose `event.type == ty` and returns the event object.
    pub async fn event(&mut self, ty: &str) -> Value {
        let what = format!("a session_event of type {ty:?}");
        let mut frame = self
            .wait_matching(&what, 0, |f| {
                f["type"] == "session_event" && f["event"]["type"] == ty
            })
            .await;
        frame["event"].take()
    }

    /// Waits for any frame satisfying `pred` (backlog first, then new frames); `what` describes it
    /// for the timeout message.
    pub async fn wait_for(&mut self, what: &str, pred: impl FnMut(&Value) -> bool) -> Value {
        self.wait_matching(what, 0, pred).await
    }

    /// Every frame received so far (including ones consumed by the waits), in order. "Received"
    /// means taken in by one of the waits (or by [`wait_exit`](Self::wait_exit), which takes in all).
    pub fn frames(&self) -> &[Value] {
        &self.frames
    }

    /// Event types (`event.type` of `session_event` frames) received so far, in order.
    pub fn event_types(&self) -> Vec<String> {
        self.frames
            .iter()
            .filter(|f| f["type"] == "session_event")
            .map(|f| f["event"]["type"].as_str().unwrap_or_default().to_string())
            .collect()
    }

    /// Whether the child's stdout has reached EOF (as observed by the waits).
    pub fn stdout_closed(&self) -> bool {
        self.stdout_eof
    }

    /// Closes the child's stdin (the client disconnects).
    pub fn close_stdin(&mut self) {
        self.stdin = None;
    }

    /// Sends `sig` to the child (not to its descendants). Does nothing once the exit was observed.
    pub fn signal(&self, sig: i32) {
        if self.exit.is_none() {
            // SAFETY: kill(2) has no memory-safety preconditions.
            unsafe {
                libc::kill(self.pid as libc::pid_t, sig);
            }
        }
    }

    /// Waits for the child to exit, then reads the remaining stdout frames (into the backlog) and
    /// all of stderr. Panics if that does not happen within `timeout` or on a protocol violation.
    pub async fn wait_exit(&mut self, timeout: Duration) -> Exited {
        let deadline = Instant::now() + timeout;
        let status = match self.exit {
            Some(status) => status,
            None => match tokio::time::timeout_at(deadline, self.child.wait()).await {
                Ok(Ok(status)) => status,
                Ok(Err(e)) => self.fail(format!("waiting for zi to exit failed: {e}")),
                Err(_) => self.fail(format!("zi did not exit within {timeout:?}")),
            },
        };
        self.exit = Some(status);
        loop {
            match self.pull(deadline, "the end of stdout").await {
                Pulled::Frame(i) => self.backlog.push_back(i),
                Pulled::Eof => break,
                Pulled::Timeout => self.fail(format!(
                    "zi exited ({status}) but its stdout stayed open for {timeout:?} \
                     (inherited by a descendant?)"
                )),
            }
        }
        if let Some(task) = self.stderr_task.as_mut() {
            if tokio::time::timeout_at(deadline, task).await.is_err() {
                self.fail(format!(
                    "zi exited ({status}) but its stderr stayed open for {timeout:?} \
                     (inherited by a descendant?)"
                ));
            }
            self.stderr_task = None;
        }
        self.check_violation("the end of stdout");
        Exited {
            code: status.code(),
            signal: status.signal(),
            stderr: self.stderr_text(),
        }
    }

    /// Everything the child wrote to stderr so far.
    pub fn stderr_text(&self) -> String {
        String::from_utf8_lossy(&lock(&self.stderr)).into_owned()
    }

    // -- internals --------------------------------------------------------------------------

    /// Moves every frame already forwarded by the reader into `frames` and the backlog.
    fn drain_available(&mut self) {
        while !self.stdout_eof {
            match self.rx.try_recv() {
                Ok(Incoming::Frame(v)) => {
                    self.frames.push(v);
                    self.backlog.push_back(self.frames.len() - 1);
                }
                Ok(Incoming::Violation(msg)) => {
                    self.violation.get_or_insert(msg);
                }
                Err(mpsc::error::TryRecvError::Empty) => break,
                Err(mpsc::error::TryRecvError::Disconnected) => self.stdout_eof = true,
            }
        }
    }

    /// Receives the next item from the reader; a violation panics.
    async fn pull(&mut self, deadline: Instant, what: &str) -> Pulled {
        if self.stdout_eof {
            return Pulled::Eof;
        }
        match tokio::time::timeout_at(deadline, self.rx.recv()).await {
            Err(_) => Pulled::Timeout,
            Ok(None) => {
                self.stdout_eof = true;
                Pulled::Eof
            }
            Ok(Some(Incoming::Frame(v))) => {
                self.frames.push(v);
                Pulled::Frame(self.frames.len() - 1)
            }
            Ok(Some(Incoming::Violation(msg))) => {
                self.violation.get_or_insert(msg);
                self.check_violation(what);
                unreachable!("check_violation panics when a violation is recorded")
            }
        }
    }

    async fn wait_matching(
        &mut self,
        what: &str,
        min_index: usize,
        mut pred: impl FnMut(&Value) -> bool,
    ) -> Value {
        self.check_violation(what);
        if let Some(pos) = self
            .backlog
            .iter()
            .position(|&i| i >= min_index && pred(&self.frames[i]))
        {
            let i = self.backlog.remove(pos).expect("position is in range");
            return self.frames[i].clone();
        }
        let deadline = Instant::now() + self.timeout;
        loop {
            match self.pull(deadline, what).await {
                Pulled::Frame(i) if i >= min_index && pred(&self.frames[i]) => {
                    return self.frames[i].clone();
                }
                Pulled::Frame(i) => self.backlog.push_back(i),
                Pulled::Eof => self.fail(format!("zi closed stdout while waiting for {what}")),
                Pulled::Timeout => self.fail(self.timeout_message(what)),
            }
        }
    }

    fn check_violation(&mut self, what: &str) {
        if let Some(v) = self.violation.clone() {
            self.fail(format!(
                "zi protocol violation (noticed while waiting for {what}): {v}"
            ));
        }
    }

    fn timeout_message(&self, what: &str) -> String {
        format!("timed out after {:?} waiting for {what}", self.timeout)
    }

    /// Panics with `msg` and context: the command, exit status, recent frames, stderr tail.
    fn fail(&mut self, msg: String) -> ! {
        let mut s = msg;
        let _ = write!(s, "\n--- process: pid {} `{}`", self.pid, self.command_line);
        if self.exit.is_none() {
            self.exit = self.child.try_wait().ok().flatten();
        }
        match self.exit {
            Some(status) => {
                let _ = write!(s, " ({status})");
            }
            None => s.push_str(" (running)"),
        }
        let _ = write!(
            s,
            "\n--- {} frames received, {} unconsumed; the last ones:",
            self.frames.len(),
            self.backlog.len()
        );
        for f in self
            .frames
            .iter()
            .skip(self.frames.len().saturating_sub(CONTEXT_FRAMES))
        {
            let _ = write!(s, "\n{}", preview_value(f));
        }
        let _ = write!(
            s,
            "\n--- stderr tail ---\n{}",
            tail_text(&lock(&self.stderr), STDERR_TAIL_BYTES)
        );
        panic!("{s}");
    }
}

impl Drop for RpcProcess {
    fn drop(&mut self) {
        if self.exit.is_none() {
            // Not reaped yet (at most a zombie), so neither its pid nor its process group id (the
            // same number) can have been reused.
            let descendants = descendants(self.pid);
            kill_group(self.pid);
            let _ = self.child.start_kill();
            for pid in descendants {
                // SAFETY: kill(2) has no memory-safety preconditions.
                unsafe {
                    libc::kill(pid as libc::pid_t, libc::SIGKILL);
                }
            }
            let deadline = std::time::Instant::now() + DROP_REAP_TIMEOUT;
            while matches!(self.child.try_wait(), Ok(None)) && std::time::Instant::now() < deadline
            {
                std::thread::sleep(Duration::from_millis(2));
            }
        } else {
            kill_group_if_populated(self.pid);
        }
        self.stdout_task.abort();
        if let Some(task) = &self.stderr_task {
            task.abort();
        }
    }
}

/// Reads stdout line by line, checks framing, version and sequence, and forwards frames and
/// violations in order.
async fn read_stdout(
    stdout: ChildStdout,
    tx: mpsc::UnboundedSender<Incoming>,
    validate_schema: bool,
) {
    let mut reader = BufReader::with_capacity(STDOUT_BUFFER_BYTES, stdout);
    let mut expected: u64 = 1;
    let mut line = Vec::new();
    loop {
        line.clear();
        match reader.read_until(b'\n', &mut line).await {
            Ok(0) => return,
            Ok(_) => {}
            Err(e) => {
                let _ = tx.send(Incoming::Violation(format!(
                    "reading zi stdout failed: {e}"
                )));
                return;
            }
        }
        if line.last() != Some(&b'\n') {
            let _ = tx.send(Incoming::Violation(format!(
                "stdout ended with an unterminated line (no trailing LF): {}",
                preview(&line)
            )));
            return;
        }
        line.pop();
        let (violation, frame) = check_frame(&line, &mut expected, validate_schema);
        if let Some(v) = violation
            && tx.send(Incoming::Violation(v)).is_err()
        {
            return;
        }
        if let Some(frame) = frame
            && tx.send(Incoming::Frame(frame)).is_err()
        {
            return;
        }
    }
}

/// Checks one stdout line (without its LF). Returns a violation, if any, and the frame, if the line
/// parsed as a JSON object.
fn check_frame(
    line: &[u8],
    expected: &mut u64,
    validate_schema: bool,
) -> (Option<String>, Option<Value>) {
    if line.last() == Some(&b'\r') {
        return (
            Some(format!(
                "frame line ends with CRLF instead of LF: {}",
                preview(line)
            )),
            None,
        );
    }
    let frame: Value = match serde_json::from_slice(line) {
        Ok(v) => v,
        Err(e) => {
            return (
                Some(format!(
                    "stdout line is not valid JSON ({e}): {}",
                    preview(line)
                )),
                None,
            );
        }
    };
    if !frame.is_object() {
        return (
            Some(format!("frame is not a JSON object: {}", preview(line))),
            None,
        );
    }
    if frame["version"] != 1 {
        return (
            Some(format!("frame version is not 1: {}", preview(line))),
            Some(frame),
        );
    }
    let Some(sequence) = frame["sequence"].as_u64() else {
        return (
            Some(format!("frame has no integer sequence: {}", preview(line))),
            Some(frame),
        );
    };
    if sequence != *expected {
        let v = format!("sequence gap: expected {expected}, got {sequence}");
        *expected = sequence.saturating_add(1);
        return (Some(v), Some(frame));
    }
    *expected += 1;
    let ty = frame["type"].as_str().unwrap_or_default();
    let violation = if !FRAME_TYPES.contains(&ty) {
        Some(format!("unknown frame type: {}", preview(line)))
    } else if let Some(error) = validate_schema.then(|| schema_violation(&frame)).flatten() {
        Some(format!(
            "frame does not match docs/rpc-schema.json ({error}): {}",
            preview(line)
        ))
    } else if !FRAME_TYPES.contains(&ty) {
        Some(format!("unknown frame type: {}", preview(line)))
    } else if sequence == 1 && ty != "ready" {
        Some(format!("the first frame is not ready: {}", preview(line)))
    } else if sequence != 1 && ty == "ready" {
        Some(format!(
            "ready frame after the first frame: {}",
            preview(line)
        ))
    } else {
        None
    };
    (violation, Some(frame))
}

/// Appends everything from `pipe` to the shared buffer until EOF.
async fn collect(mut pipe: impl AsyncRead + Unpin, buf: Arc<Mutex<Vec<u8>>>) {
    let mut chunk = vec![0u8; 64 * 1024];
    loop {
        match pipe.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(n) => lock(&buf).extend_from_slice(&chunk[..n]),
        }
    }
}

fn lock(m: &Mutex<Vec<u8>>) -> std::sync::MutexGuard<'_, Vec<u8>> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
