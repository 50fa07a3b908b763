//! A typed async harness that spawns the real `zi` binary and speaks Zi RPC v1 with it.
//!
//! [`ZiProcessBuilder`] starts the binary (whose path the caller passes in, usually
//! `env!("CARGO_BIN_EXE_zi")`) in a sanitized environment. [`ZiProcessBuilder::spawn_rpc`] returns an
//! [`RpcProcess`] for `--mode rpc`; [`ZiProcessBuilder::run_to_end`] runs one-shot modes to completion.
//!
//! The [`RpcProcess`] checks the server's framing as it reads (every stdout line is one compact JSON
//! object terminated by LF, `version` is `1`, `sequence` runs 1, 2, 3, … and the first frame is
//! `ready`). A violation is recorded and makes the next wait panic with a description of it. Frames
//! that arrive while a wait looks for something else are kept in a backlog, so a later wait finds them.
//!
//! Every wait has a timeout (30 s by default) and panics with a helpful message that includes the
//! most recent frames and the tail of the child's stderr.

use std::collections::{HashMap, VecDeque};
use std::ffi::{OsStr, OsString};
use std::fmt::Write as _;
use std::io;
use std::os::unix::process::ExitStatusExt as _;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{
    AsyncBufReadExt as _, AsyncRead, AsyncReadExt as _, AsyncWriteExt as _, BufReader,
};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// How long a wait on an [`RpcProcess`] lasts unless changed with [`RpcProcess::set_timeout`] or
/// [`ZiProcessBuilder::timeout`].
pub const DEFAULT_WAIT_TIMEOUT: Duration = Duration::from_secs(30);

/// Capacity of the buffered stdout reader (lines themselves may be arbitrarily long).
const STDOUT_BUFFER_BYTES: usize = 64 * 1024;
/// How much of stderr a panic message shows.
const STDERR_TAIL_BYTES: usize = 4 * 1024;
/// How many recent frames a panic message shows, and how much of each.
const CONTEXT_FRAMES: usize = 8;
const FRAME_PREVIEW_BYTES: usize = 400;
/// How long `Drop` waits for the killed child to be reaped.
const DROP_REAP_TIMEOUT: Duration = Duration::from_secs(5);

/// The four frame types a Zi RPC v1 server may send (rpc-reference §2).
const FRAME_TYPES: [&str; 4] = ["ready", "response", "protocol_error", "session_event"];

/// Host environment variables that are never passed to the child unless set explicitly with
/// [`ZiProcessBuilder::env`]: credentials, provider endpoints and proxies.
const LEAKY_ENV_VARS: &[&str] = &[
    "ANTHROPIC_OAUTH_TOKEN",
    "ANTHROPIC_AUTH_TOKEN",
    "ANTHROPIC_BASE_URL",
    "OPENAI_BASE_URL",
    "OPENAI_ORG_ID",
    "OPENAI_ORGANIZATION",
    "OPENAI_PROJECT",
    "COPILOT_GITHUB_TOKEN",
    "GH_TOKEN",
    "GITHUB_TOKEN",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_PROFILE",
    "AWS_REGION",
    "AWS_DEFAULT_REGION",
    "AWS_BEARER_TOKEN_BEDROCK",
    "GOOGLE_APPLICATION_CREDENTIALS",
    "GOOGLE_CLOUD_PROJECT",
    "GOOGLE_CLOUD_LOCATION",
    "GCLOUD_PROJECT",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "NO_PROXY",
    "http_proxy",
    "https_proxy",
    "all_proxy",
    "no_proxy",
];

/// Whether a host environment variable is withheld from the child: every `ZI_*` variable, every
/// `*_API_KEY` / `*_API_TOKEN` / `AZURE_OPENAI_*` variable, and a fixed list of other credential,
/// provider-endpoint and proxy variables (`GH_TOKEN`, `AWS_*` keys, `OPENAI_BASE_URL`,
/// `HTTP_PROXY`, …).
pub fn is_withheld_env_var(name: &OsStr) -> bool {
    let Some(name) = name.to_str() else {
        return false;
    };
    let upper = name.to_ascii_uppercase();
    upper.starts_with("ZI_")
        || upper.ends_with("_API_KEY")
        || upper.ends_with("_API_TOKEN")
        || upper.starts_with("AZURE_OPENAI_")
        || LEAKY_ENV_VARS.contains(&name)
}

// ---------------------------------------------------------------------------------------------
// Agent directory
// ---------------------------------------------------------------------------------------------

/// A fresh temporary agent directory (pass it with `--agent-dir`). Removed on drop.
pub struct AgentDir {
    pub dir: tempfile::TempDir,
}

impl AgentDir {
    /// Creates an empty temporary agent directory.
    pub fn new() -> AgentDir {
        let dir = tempfile::Builder::new()
            .prefix("zi-agent-")
            .tempdir()
            .expect("create a temporary agent dir");
        AgentDir { dir }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Writes `contents` to `relative` (e.g. `"models.json"`, `"extensions/x.js"`) below the agent
    /// dir, creating parent directories as needed.
    pub fn write(&self, relative: &str, contents: &str) {
        let path = self.dir.path().join(relative);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .unwrap_or_else(|e| panic!("create {}: {e}", parent.display()));
        }
        std::fs::write(&path, contents).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
    }
}

impl Default for AgentDir {
    fn default() -> Self {
        AgentDir::new()
    }
}

// ---------------------------------------------------------------------------------------------
// Builder
// ---------------------------------------------------------------------------------------------

/// Builds a `zi` child process: binary path, arguments, environment, working directory.
///
/// The child's environment is the host's minus every variable for which [`is_withheld_env_var`] is
/// true (so host credentials, `ZI_*` defaults and proxies cannot leak in), plus the variables added
/// with [`env`](Self::env). Unless `HOME` is set explicitly, it points at a fresh empty temporary
/// directory that lives as long as the process handle, so `~/.zi/agent`, `~/.agents/skills` and
/// the like of the host are never read. stdin, stdout and stderr are piped. The child runs in its
/// own process group.
#[derive(Debug, Clone)]
pub struct ZiProcessBuilder {
    bin: PathBuf,
    args: Vec<OsString>,
    envs: Vec<(OsString, OsString)>,
    cwd: Option<PathBuf>,
    timeout: Duration,
    validate_schema: bool,
}

impl ZiProcessBuilder {
    pub fn new(bin: impl AsRef<Path>) -> Self {
        ZiProcessBuilder {
            bin: bin.as_ref().to_path_buf(),
            args: Vec::new(),
            envs: Vec::new(),
            cwd: None,
            timeout: DEFAULT_WAIT_TIMEOUT,
            validate_schema: true,
        }
    }

    /// Whether every frame is validated against the RPC JSON Schema (default true). Only tests
    /// of the harness itself, which script fake servers, turn it off.
    pub fn validate_schema(mut self, on: bool) -> Self {
        self.validate_schema = on;
        self
    }

    pub fn arg(mut self, a: impl AsRef<OsStr>) -> Self {
        self.args.push(a.as_ref().to_os_string());
        self
    }

    pub fn args<I, S>(mut self, i: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.args
            .extend(i.into_iter().map(|s| s.as_ref().to_os_string()));
        self
    }

    /// Adds an environment variable (applied after the host environment has been sanitized, so it
    /// may also set a withheld name such as `ZI_MODE` or `OPENAI_API_KEY`).
    pub fn env(mut self, k: impl AsRef<OsStr>, v: impl AsRef<OsStr>) -> Self {
        self.envs
            .push((k.as_ref().to_os_string(), v.as_ref().to_os_string()));
        self
    }

    /// The child's working directory (the process cwd, not `--cwd`).
    pub fn current_dir(mut self, p: impl AsRef<Path>) -> Self {
        self.cwd = Some(p.as_ref().to_path_buf());
        self
    }

    /// The default timeout of the waits of the spawned [`RpcProcess`].
    pub fn timeout(mut self, t: Duration) -> Self {
        self.timeout = t;
        self
    }

    /// The command line, for messages.
    fn describe(&self) -> String {
        let mut s = self.bin.display().to_string();
        for a in &self.args {
            s.push(' ');
            s.push_str(&a.to_string_lossy());
        }
        s
    }

    fn command(&self) -> io::Result<(Command, Option<tempfile::TempDir>)> {
        let mut cmd = Command::new(&self.bin);
        cmd.args(&self.args);
        for (name, _) in std::env::vars_os() {
            if is_withheld_env_var(&name) {
                cmd.env_remove(&name);
            }
        }
        let home = if self.envs.iter().any(|(k, _)| k == "HOME") {
            None
        } else {
            let home = tempfile::Builder::new().prefix("zi-home-").tempdir()?;
            cmd.env("HOME", home.path());
            Some(home)
        };
        for (k, v) in &self.envs {
            cmd.env(k, v);
        }
        if let Some(cwd) = &self.cwd {
            cmd.current_dir(cwd);
        }
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .process_group(0);
        Ok((cmd, home))
    }

    /// Spawns the process for RPC. Appends nothing to the arguments: pass `--mode rpc` yourself.
    pub async fn spawn_rpc(self) -> io::Result<RpcProcess> {
        let (mut cmd, home) = self.command()?;
        let mut child = cmd.spawn()?;
        let pid = child.id().expect("a freshly spawned child has a pid");
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().expect("stdout is piped");
        let stderr_pipe = child.stderr.take().expect("stderr is piped");

        let (tx, rx) = mpsc::unbounded_channel();
        let stdout_task = tokio::spawn(read_stdout(stdout, tx, self.validate_schema));
        let stderr = Arc::new(Mutex::new(Vec::new()));
        let stderr_task = tokio::spawn(collect(stderr_pipe, Arc::clone(&stderr)));

        Ok(RpcProcess {
            command_line: self.describe(),
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
            timeout: self.timeout,
            _home: home,
        })
    }

    /// Runs a one-shot invocation: writes `stdin`, closes it, and collects stdout, stderr and the
    /// exit status. On timeout the process (group) is killed and an error of kind `TimedOut`
    /// carrying the output so far is returned.
    pub async fn run_to_end(self, stdin: &[u8], timeout: Duration) -> io::Result<Finished> {
        let (mut cmd, _home) = self.command()?;
        let mut child = cmd.spawn()?;
        let pid = child.id().expect("a freshly spawned child has a pid");
        let child_stdin = child.stdin.take();
        let mut out_pipe = child.stdout.take().expect("stdout is piped");
        let mut err_pipe = child.stderr.take().expect("stderr is piped");
        let mut stdout = Vec::new();
        let mut stderr = Vec::new();

        let run = async {
            let write = async move {
                if let Some(mut s) = child_stdin {
                    match s.write_all(stdin).await {
                        Ok(()) => {}
                        // The child may exit (or close stdin) without reading it all.
                        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => {}
                        Err(e) => return Err(e),
                    }
                    // Dropping `s` closes the pipe.
                }
                Ok(())
            };
            let (w, o, e, status) = tokio::join!(
                write,
                read_all(&mut out_pipe, &mut stdout),
                read_all(&mut err_pipe, &mut stderr),
                child.wait()
            );
            w?;
            o?;
            e?;
            status
        };
        match tokio::time::timeout(timeout, run).await {
            Ok(status) => {
                let status = status?;
                // The child is reaped: only signal its group while someone still holds the id.
                kill_group_if_populated(pid);
                Ok(Finished {
                    status,
                    code: status.code(),
                    stdout,
                    stderr,
                })
            }
            Err(_) => {
                // `try_wait` returns the status cached by the dropped `wait` or reaps now.
                let exited = child.try_wait().ok().flatten();
                if exited.is_some() {
                    kill_group_if_populated(pid);
                } else {
                    // Not reaped, so the pid (= process group id) cannot have been reused.
                    kill_group(pid);
                    let _ = child.start_kill();
                    let _ = child.wait().await;
                }
                let state = match exited {
                    Some(status) => format!(
                        "the process exited ({status}) but its stdout/stderr stayed open \
                         (inherited by a descendant?)"
                    ),
                    None => "the process did not exit".to_string(),
                };
                Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!(
                        "`{}` did not finish within {timeout:?}: {state}\n--- stdout tail ---\n{}\n--- stderr tail ---\n{}",
                        self.describe(),
                        tail_text(&stdout, STDERR_TAIL_BYTES),
                        tail_text(&stderr, STDERR_TAIL_BYTES),
                    ),
                ))
            }
        }
    }
}

/// The result of [`ZiProcessBuilder::run_to_end`].
#[derive(Debug, Clone)]
pub struct Finished {
    pub status: ExitStatus,
    pub code: Option<i32>,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
}

impl Finished {
    pub fn stdout_text(&self) -> String {
        String::from_utf8_lossy(&self.stdout).into_owned()
    }

    pub fn stderr_text(&self) -> String {
        String::from_utf8_lossy(&self.stderr).into_owned()
    }

    /// Parses stdout as JSON Lines (for `--mode json`). Panics on a line that is not JSON or on
    /// output that does not end with LF.
    pub fn json_lines(&self) -> Vec<Value> {
        if self.stdout.is_empty() {
            return Vec::new();
        }
        assert!(
            self.stdout.ends_with(b"\n"),
            "stdout does not end with LF: {}\n--- stderr ---\n{}",
            tail_text(&self.stdout, FRAME_PREVIEW_BYTES),
            self.stderr_text()
        );
        self.stdout[..self.stdout.len() - 1]
            .split(|&b| b == b'\n')
            .enumerate()
            .map(|(n, line)| {
                serde_json::from_slice(line).unwrap_or_else(|e| {
                    panic!(
                        "stdout line {} is not JSON ({e}): {}\n--- stderr ---\n{}",
                        n + 1,
                        preview(line),
                        self.stderr_text()
                    )
                })
            })
            .collect()
    }
}

// ---------------------------------------------------------------------------------------------
// RPC process
// ---------------------------------------------------------------------------------------------

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

/// How a `zi --mode rpc` child ended.
#[derive(Debug, Clone)]
pub struct Exited {
    pub code: Option<i32>,
    pub signal: Option<i32>,
    pub stderr: String,
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

/// SIGKILLs the process group `pgid`, which callers establish cannot have been reused. Only
/// [`kill_group_if_populated`] may be used once the group leader has been reaped.
fn kill_group(pgid: u32) {
    // SAFETY: kill(2) has no memory-safety preconditions.
    unsafe {
        libc::kill(-(pgid as libc::pid_t), libc::SIGKILL);
    }
}

/// SIGKILLs the process group `pgid` if some process still belongs to it (its members keep the
/// number reserved, so it cannot name a newer, unrelated group).
fn kill_group_if_populated(pgid: u32) {
    if !process_group_members(pgid).is_empty() {
        kill_group(pgid);
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

/// The validator of server frames, built once from `zi_protocol::schema` (the same document as
/// the checked-in `docs/rpc-schema.json`, which a test keeps in sync).
fn frame_validator() -> &'static jsonschema::Validator {
    static VALIDATOR: std::sync::OnceLock<jsonschema::Validator> = std::sync::OnceLock::new();
    VALIDATOR.get_or_init(|| {
        jsonschema::validator_for(&zi_protocol::schema::server_frame_schema())
            .unwrap_or_else(|e| panic!("the RPC frame schema does not compile: {e}"))
    })
}

/// Why `frame` does not match the server-frame schema, if it does not.
pub fn schema_violation(frame: &Value) -> Option<String> {
    let validator = frame_validator();
    if validator.is_valid(frame) {
        return None;
    }
    let errors: Vec<String> = validator
        .iter_errors(frame)
        .take(3)
        .map(|e| format!("{e} at {}", e.instance_path))
        .collect();
    Some(errors.join("; "))
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

/// Appends everything from `pipe` to `buf` until EOF; data read so far stays in `buf` if the
/// future is dropped.
async fn read_all(pipe: &mut (impl AsyncRead + Unpin), buf: &mut Vec<u8>) -> io::Result<()> {
    let mut chunk = vec![0u8; 64 * 1024];
    loop {
        match pipe.read(&mut chunk).await? {
            0 => return Ok(()),
            n => buf.extend_from_slice(&chunk[..n]),
        }
    }
}

fn lock(m: &Mutex<Vec<u8>>) -> std::sync::MutexGuard<'_, Vec<u8>> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The last `max` bytes of `bytes` as (lossy) text.
fn tail_text(bytes: &[u8], max: usize) -> String {
    let start = bytes.len().saturating_sub(max);
    let mut s = String::new();
    if start > 0 {
        let _ = write!(s, "[… {start} bytes omitted …]");
    }
    s.push_str(&String::from_utf8_lossy(&bytes[start..]));
    s
}

/// The first bytes of a line, for messages.
fn preview(line: &[u8]) -> String {
    if line.len() <= FRAME_PREVIEW_BYTES {
        format!("{:?}", String::from_utf8_lossy(line))
    } else {
        format!(
            "{:?}… ({} bytes)",
            String::from_utf8_lossy(&line[..FRAME_PREVIEW_BYTES]),
            line.len()
        )
    }
}

fn preview_value(v: &Value) -> String {
    let text = v.to_string();
    if text.len() <= FRAME_PREVIEW_BYTES {
        return text;
    }
    let mut end = FRAME_PREVIEW_BYTES;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… ({} bytes)", &text[..end], text.len())
}

// ---------------------------------------------------------------------------------------------
// Process inspection
// ---------------------------------------------------------------------------------------------

/// The fields of `/proc/<pid>/stat` the helpers need.
struct ProcStat {
    state: char,
    ppid: u32,
    pgrp: u32,
}

fn proc_stat(pid: u32) -> Option<ProcStat> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // "pid (comm) S ppid pgrp …"; comm may contain spaces and parentheses.
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    let state = fields.next()?.chars().next()?;
    let ppid = fields.next()?.parse().ok()?;
    let pgrp = fields.next()?.parse().ok()?;
    Some(ProcStat { state, ppid, pgrp })
}

/// Every process listed in `/proc` with its stat.
fn all_processes() -> Vec<(u32, ProcStat)> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|pid| Some((pid, proc_stat(pid)?)))
        .collect()
}

/// Whether a process with this pid exists and is not a zombie.
pub fn process_exists(pid: u32) -> bool {
    let Ok(pid_t) = libc::pid_t::try_from(pid) else {
        return false;
    };
    // SAFETY: kill(2) with signal 0 only checks for existence and permission.
    let alive = unsafe { libc::kill(pid_t, 0) } == 0
        || io::Error::last_os_error().raw_os_error() == Some(libc::EPERM);
    alive && !matches!(proc_stat(pid), Some(ProcStat { state: 'Z', .. }))
}

/// All live (non-zombie) descendants of `pid` (children, grandchildren, …), found by following the
/// parent links in `/proc/*/stat`.
pub fn descendants(pid: u32) -> Vec<u32> {
    let mut children: HashMap<u32, Vec<(u32, char)>> = HashMap::new();
    for (child, stat) in all_processes() {
        children
            .entry(stat.ppid)
            .or_default()
            .push((child, stat.state));
    }
    let mut found = Vec::new();
    let mut queue = VecDeque::from([pid]);
    while let Some(parent) = queue.pop_front() {
        for &(child, state) in children.get(&parent).into_iter().flatten() {
            queue.push_back(child);
            if state != 'Z' {
                found.push(child);
            }
        }
    }
    found
}

/// All live (non-zombie) members of the process group `pgid`. The zi child runs in its own group
/// (id = its pid) and its descendants stay in it unless they move themselves, so after the child
/// has exited this lists what it left behind.
pub fn process_group_members(pgid: u32) -> Vec<u32> {
    all_processes()
        .into_iter()
        .filter(|(_, stat)| stat.pgrp == pgid && stat.state != 'Z')
        .map(|(pid, _)| pid)
        .collect()
}

/// Waits until none of `pids` exists any more; returns the ones still alive after `timeout`.
pub async fn wait_until_gone(pids: &[u32], timeout: Duration) -> Vec<u32> {
    let deadline = Instant::now() + timeout;
    loop {
        let alive: Vec<u32> = pids
            .iter()
            .copied()
            .filter(|&p| process_exists(p))
            .collect();
        if alive.is_empty() || Instant::now() >= deadline {
            return alive;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

// ---------------------------------------------------------------------------------------------
// Self-tests against fake servers written in sh
// ---------------------------------------------------------------------------------------------

/// A temporary working directory, canonicalized as zi canonicalizes its cwd; removed on drop.
pub struct TempCwd {
    _dir: tempfile::TempDir,
    pub path: PathBuf,
}

/// Creates a [`TempCwd`].
pub fn temp_cwd() -> TempCwd {
    let dir = tempfile::Builder::new()
        .prefix("zi-cwd-")
        .tempdir()
        .unwrap_or_else(|e| panic!("create a temporary cwd: {e}"));
    let path = dir
        .path()
        .canonicalize()
        .unwrap_or_else(|e| panic!("canonicalize the cwd: {e}"));
    TempCwd { _dir: dir, path }
}

#[cfg(test)]
mod tests {
    use super::*;

    const READY: &str = r#"{"version":1,"sequence":1,"type":"ready","state":{"sessionId":"fake"}}"#;

    /// A fake server: ready, then for every input line two session events and a response echoing
    /// the request's id and method; on EOF it writes "bye" to stderr and exits 3.
    const ECHO_SERVER: &str = r#"
printf '%s\n' "$READY"
seq=2
while IFS= read -r line; do
  id=$(printf '%s' "$line" | sed -n 's/.*"id":"\([^"]*\)".*/\1/p')
  method=$(printf '%s' "$line" | sed -n 's/.*"method":"\([^"]*\)".*/\1/p')
  printf '{"version":1,"sequence":%d,"type":"session_event","event":{"type":"first"}}\n' "$seq"
  seq=$((seq+1))
  printf '{"version":1,"sequence":%d,"type":"session_event","event":{"type":"second"}}\n' "$seq"
  seq=$((seq+1))
  printf '{"version":1,"sequence":%d,"type":"response","id":"%s","method":"%s","ok":true,"result":{"echo":"%s"}}\n' "$seq" "$id" "$method" "$id"
  seq=$((seq+1))
done
echo bye >&2
exit 3
"#;

    fn sh(script: &str) -> ZiProcessBuilder {
        ZiProcessBuilder::new("/bin/sh")
            .arg("-c")
            .arg(script)
            .env("READY", READY)
            .validate_schema(false)
    }

    /// Runs `f` on the process in a task and returns its panic message.
    async fn panic_message<F, Fut>(p: RpcProcess, f: F) -> String
    where
        F: FnOnce(RpcProcess) -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send,
    {
        let err = tokio::spawn(async move { f(p).await })
            .await
            .expect_err("the wait should panic");
        let payload = err.into_panic();
        payload
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default()
    }

    #[tokio::test]
    async fn zi_process_requests_and_backlog() {
        let mut p = sh(ECHO_SERVER).spawn_rpc().await.unwrap();
        assert_eq!(p.ready().await["sessionId"], "fake");
        // ready() is idempotent and does not leave the ready frame for next_frame().
        assert_eq!(p.ready().await["sessionId"], "fake");

        let r = p.request("r1", "session.get_state", None).await;
        assert_eq!(r["type"], "response");
        assert_eq!(r["result"]["echo"], "r1");
        assert_eq!(r["sequence"], 4);
        // The events received while waiting are in the backlog, found in any order.
        assert_eq!(p.event("second").await, json!({"type": "second"}));
        assert_eq!(p.event("first").await, json!({"type": "first"}));

        // A response that arrives before anyone asks for it is found later.
        p.send("r2", "model.list", Some(json!({"x": 1}))).await;
        assert_eq!(p.event("second").await["type"], "second");
        let r2 = p.response("r2").await;
        assert_eq!(r2["method"], "model.list");
        assert_eq!(p.next_frame().await["event"]["type"], "first");

        // request() ignores an unconsumed older response with the same id.
        p.send("dup", "session.get_state", None).await;
        p.request("other", "session.get_state", None).await;
        let second_dup = p.request("dup", "session.get_state", None).await;
        let first_dup = p.response("dup").await;
        assert!(second_dup["sequence"].as_u64() > first_dup["sequence"].as_u64());
        for _ in 0..3 {
            p.event("first").await;
            p.event("second").await;
        }

        assert_eq!(p.request_ok("r3", "x.y", None).await, json!({"echo": "r3"}));
        assert_eq!(
            p.event_types(),
            ["first", "second"].repeat(6),
            "every event so far, in order"
        );
        let sequences: Vec<u64> = p
            .frames()
            .iter()
            .map(|f| f["sequence"].as_u64().unwrap())
            .collect();
        assert_eq!(sequences, (1..=19).collect::<Vec<_>>());

        p.close_stdin();
        let exited = p.wait_exit(Duration::from_secs(10)).await;
        assert_eq!(exited.code, Some(3));
        assert_eq!(exited.signal, None);
        assert_eq!(exited.stderr, "bye\n");
        assert_eq!(p.stderr_text(), "bye\n");
        // Frames after the exit: the unconsumed events of r3 are still there.
        assert_eq!(p.event("first").await["type"], "first");
        assert!(
            p.next_frame_within(Duration::from_millis(10))
                .await
                .is_some()
        );
        assert!(
            p.next_frame_within(Duration::from_millis(10))
                .await
                .is_none()
        );
    }

    #[tokio::test]
    async fn zi_process_detects_sequence_gap() {
        let script = r#"printf '%s\n' "$READY"
printf '%s\n' '{"version":1,"sequence":3,"type":"session_event","event":{"type":"x"}}'
while read -r _; do :; done"#;
        let mut p = sh(script).spawn_rpc().await.unwrap();
        p.ready().await;
        let msg = panic_message(p, |mut p| async move {
            p.next_frame().await;
        })
        .await;
        assert!(msg.contains("sequence gap: expected 2, got 3"), "{msg}");
    }

    #[tokio::test]
    async fn zi_process_detects_bad_lines() {
        let cases = [
            ("printf '%s\\nhello\\n' \"$READY\"", "not valid JSON"),
            (
                "printf '%s\\n%s' \"$READY\" '{\"version\":1,\"sequence\":2,\"type\":\"session_event\",\"event\":{}}'",
                "no trailing LF",
            ),
            (
                "printf '%s\\n%s\\n' \"$READY\" '{\"version\":2,\"sequence\":2,\"type\":\"session_event\",\"event\":{}}'",
                "version is not 1",
            ),
            ("printf '%s\\r\\n' \"$READY\"", "CRLF"),
            (
                "printf '%s\\n' '{\"version\":1,\"sequence\":1,\"type\":\"response\"}'",
                "first frame is not ready",
            ),
        ];
        for (script, expected) in cases {
            // Stay alive (stdout open) except for the unterminated line, which needs EOF.
            let script = if expected == "no trailing LF" {
                script.to_string()
            } else {
                format!("{script}\nwhile read -r _; do :; done")
            };
            let p = sh(&script)
                .timeout(Duration::from_secs(5))
                .spawn_rpc()
                .await
                .unwrap();
            let msg = panic_message(p, |mut p| async move {
                p.ready().await;
                p.event("never").await;
            })
            .await;
            assert!(msg.contains(expected), "{script}: {msg}");
        }
    }

    #[tokio::test]
    async fn zi_process_timeout_shows_stderr() {
        let script =
            r#"printf '%s\n' "$READY"; echo diagnostic-line >&2; while read -r _; do :; done"#;
        let mut p = sh(script)
            .timeout(Duration::from_millis(300))
            .spawn_rpc()
            .await
            .unwrap();
        p.ready().await;
        let msg = panic_message(p, |mut p| async move {
            p.response("missing").await;
        })
        .await;
        assert!(msg.contains("timed out"), "{msg}");
        assert!(msg.contains("the response with id \"missing\""), "{msg}");
        assert!(msg.contains("diagnostic-line"), "{msg}");
    }

    #[tokio::test]
    async fn zi_process_signal_and_large_lines() {
        // A 17 MiB frame followed by a small one, then the process waits to be signalled.
        let script = r#"printf '%s\n' "$READY"
printf '{"version":1,"sequence":2,"type":"session_event","event":{"type":"big","pad":"'
head -c 17825792 /dev/zero | tr '\0' 'a'
printf '"}}\n{"version":1,"sequence":3,"type":"session_event","event":{"type":"small"}}\n'
exec sleep 60"#;
        let mut p = sh(script).spawn_rpc().await.unwrap();
        p.ready().await;
        assert_eq!(p.event("small").await["type"], "small");
        let big = p.event("big").await;
        assert_eq!(big["pad"].as_str().unwrap().len(), 17 * 1024 * 1024);
        p.signal(libc::SIGTERM);
        let exited = p.wait_exit(Duration::from_secs(10)).await;
        assert_eq!(exited.code, None);
        assert_eq!(exited.signal, Some(libc::SIGTERM));
    }

    #[tokio::test]
    async fn zi_process_drop_leaves_no_process_behind() {
        let script = r#"sleep 60 & sleep 60 & printf '%s\n' "$READY"; wait"#;
        let mut p = sh(script).spawn_rpc().await.unwrap();
        p.ready().await;
        let pid = p.pid();
        assert!(process_exists(pid));
        let mut kids = descendants(pid);
        for _ in 0..200 {
            if kids.len() >= 2 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
            kids = descendants(pid);
        }
        assert_eq!(kids.len(), 2, "{kids:?}");
        drop(p);
        assert!(!process_exists(pid), "the child was reaped");
        assert_eq!(
            wait_until_gone(&kids, Duration::from_secs(5)).await,
            Vec::<u32>::new()
        );
    }

    #[tokio::test]
    async fn zi_process_leftovers_after_exit_are_visible_then_killed() {
        let script = r#"sleep 60 </dev/null >/dev/null 2>&1 & printf '%s\n' "$READY""#;
        let mut p = sh(script).spawn_rpc().await.unwrap();
        p.ready().await;
        let pid = p.pid();
        assert_eq!(p.wait_exit(Duration::from_secs(10)).await.code, Some(0));
        assert!(!process_exists(pid));
        let leftovers = process_group_members(pid);
        assert_eq!(leftovers.len(), 1, "the background sleep is left behind");
        drop(p);
        assert_eq!(
            wait_until_gone(&leftovers, Duration::from_secs(5)).await,
            Vec::<u32>::new()
        );
        assert!(process_group_members(pid).is_empty());
    }

    #[tokio::test]
    async fn zi_process_send_after_exit_is_ignored() {
        let mut p = sh(r#"printf '%s\n' "$READY""#).spawn_rpc().await.unwrap();
        p.ready().await;
        let exited = p.wait_exit(Duration::from_secs(10)).await;
        assert_eq!(exited.code, Some(0));
        // The child is gone: a large write hits a broken pipe, which send_raw ignores.
        p.send_raw(&vec![b'x'; 1 << 20]).await;
        p.close_stdin();
        let err = p.try_send_raw(b"{}\n").await.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::NotConnected);
    }

    #[tokio::test]
    async fn zi_process_run_to_end_and_environment() {
        let finished = ZiProcessBuilder::new("/bin/sh")
            .args(["-c", "cat; echo err >&2; exit 4"])
            .run_to_end(b"hello\n", Duration::from_secs(10))
            .await
            .unwrap();
        assert_eq!(finished.code, Some(4));
        assert_eq!(finished.stdout, b"hello\n");
        assert_eq!(finished.stderr_text(), "err\n");

        let dir = tempfile::tempdir().unwrap();
        let finished = ZiProcessBuilder::new("/bin/sh")
            .args([
                "-c",
                "printf '{\"home\":\"%s\",\"cwd\":\"%s\"}\\n' \"$HOME\" \"$PWD\"; env",
            ])
            .env("ZI_MODE", "json")
            .current_dir(dir.path())
            .run_to_end(b"", Duration::from_secs(10))
            .await
            .unwrap();
        assert_eq!(finished.code, Some(0));
        let text = finished.stdout_text();
        let first: Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
        assert_ne!(
            first["home"].as_str(),
            std::env::var("HOME").ok().as_deref()
        );
        assert_eq!(
            Path::new(first["cwd"].as_str().unwrap())
                .canonicalize()
                .unwrap(),
            dir.path().canonicalize().unwrap()
        );
        for line in text.lines().skip(1) {
            let Some((name, _)) = line.split_once('=') else {
                continue;
            };
            assert!(
                name == "ZI_MODE" || !is_withheld_env_var(OsStr::new(name)),
                "{name} leaked into the child"
            );
        }
        assert!(text.contains("\nZI_MODE=json\n"));

        let err = ZiProcessBuilder::new("/bin/sh")
            .args(["-c", "echo started >&2; exec sleep 60"])
            .run_to_end(b"", Duration::from_millis(300))
            .await
            .unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::TimedOut);
        assert!(err.to_string().contains("started"), "{err}");
    }

    #[test]
    fn zi_process_withheld_env_vars() {
        for name in [
            "ZI_MODE",
            "ZI_AGENT_DIR",
            "OPENAI_API_KEY",
            "ANTHROPIC_API_KEY",
            "GH_TOKEN",
            "https_proxy",
        ] {
            assert!(is_withheld_env_var(OsStr::new(name)), "{name}");
        }
        for name in ["PATH", "HOME", "SHELL", "LANG", "TERM", "RUST_BACKTRACE"] {
            assert!(!is_withheld_env_var(OsStr::new(name)), "{name}");
        }
        assert!(descendants(u32::MAX).is_empty());
        assert!(!process_exists(u32::MAX));
        assert!(process_exists(std::process::id()));
    }

    #[test]
    fn zi_process_agent_dir_writes_nested_files() {
        let dir = AgentDir::new();
        dir.write("extensions/a/b.txt", "hi");
        assert_eq!(
            std::fs::read_to_string(dir.path().join("extensions/a/b.txt")).unwrap(),
            "hi"
        );
    }
}
