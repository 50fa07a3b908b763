//! A typed async client for Zi RPC v1 (`zi --mode rpc`).
//!
//! [`ClientBuilder`] spawns a server command with its working directory and environment, waits
//! for `ready` under a deadline, and returns a [`Client`]. The client
//!
//! - sends typed requests and awaits their correlated responses; any number of tasks may have
//!   requests in flight, and the client itself keeps at most 32 ordinary requests (plus one
//!   `session.interrupt`) outstanding, the server's capacity, queueing the rest;
//! - delivers `session_event` frames in sequence order to every [`EventStream`] subscriber;
//! - treats a sequence gap, an unknown frame type, a malformed frame and an `invalid_framing`
//!   error as fatal [`Error`]s that fail every pending request; a recoverable `protocol_error`
//!   fails the request whose id it carries (or, without an id, the connection);
//! - pages messages and outcomes to the end, runs completion watches, interrupts;
//! - closes cleanly: EOF on stdin, a bounded wait, then `SIGKILL`, and reports a non-zero exit
//!   together with the tail of the server's stderr.
//!
//! One-shot helpers mirror the copyable clients: [`run_prompt`] and [`run_command`].
//!
//! ```no_run
//! # async fn demo() -> Result<(), zi_rpc_client::Error> {
//! use zi_rpc_client::{ClientBuilder, Delivery};
//!
//! let client = ClientBuilder::new("zi")
//!     .args(["--mode", "rpc", "--no-session"])
//!     .current_dir("/tmp")
//!     .spawn()
//!     .await?;
//! let mut events = client.subscribe();
//! client.prompt(Delivery::Direct, "Say hi", Some("cycle-1")).await?;
//! let done = client.await_idle(Some("cycle-1")).await?;
//! println!("{:?}", done.and_then(|r| r.completion).map(|c| c.text));
//! while let Ok(event) = events.try_next() {
//!     println!("{} {}", event.sequence, event.event["type"]);
//! }
//! let status = client.close().await?;
//! assert!(status.success());
//! # Ok(()) }
//! ```

use std::collections::{HashMap, VecDeque};
use std::ffi::{OsStr, OsString};
use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt as _, AsyncReadExt as _, AsyncWriteExt as _, BufReader};
use tokio::process::{Child, ChildStdin, Command};
use tokio::sync::{Semaphore, mpsc, oneshot, watch};

pub use zi_protocol::ThinkingLevel;
pub use zi_protocol::errors::ProtocolErrorCode;
pub use zi_protocol::frame::ResponseErrorCode;
pub use zi_protocol::message::AgentMessage;
pub use zi_protocol::method_table::{Method, RpcMethod};
pub use zi_protocol::methods;
pub use zi_protocol::params::{
    AwaitIdleParams, CommandInvokeParams, MessagesParams, ModelSelectParams, OutcomesParams,
    PromptParams, SetEventsParams, ThinkingSelectParams,
};
pub use zi_protocol::request::{Delivery, EventMode, SettingsScope};
pub use zi_protocol::results::{
    AwaitIdleResult, CommandDescriptor, CommandInvokeResult, CommandList, Completion,
    CompletionResult, EmptyResult, EventModeResult, MessagePage, ModelList, ModelSelection,
    OutcomePage, PromptResult, ThinkingLevels, ThinkingSelection,
};
pub use zi_protocol::state::SessionState;

/// The server's ordinary in-flight capacity (rpc-reference §7.3).
pub const MAX_IN_FLIGHT: usize = 32;
/// Default deadline for `ready`.
pub const DEFAULT_READY_TIMEOUT: Duration = Duration::from_secs(10);
/// Default grace period between EOF and `SIGKILL` on close.
pub const DEFAULT_CLOSE_GRACE: Duration = Duration::from_secs(5);
/// How much of the server's stderr the client keeps (the tail).
pub const STDERR_TAIL_BYTES: usize = 64 * 1024;
/// The largest frame line the client accepts.
pub const MAX_FRAME_BYTES: usize = 16 * 1024 * 1024;
/// The largest number of pages [`Client::all_messages`] and [`Client::all_outcomes`] follow.
pub const MAX_PAGES: usize = 1024;

const FRAME_TYPES: [&str; 4] = ["ready", "response", "protocol_error", "session_event"];

/// Everything that can go wrong. Connection-level variants carry the server's stderr tail.
#[derive(Debug, Clone, thiserror::Error)]
pub enum Error {
    #[error("could not spawn the RPC server: {0}")]
    Spawn(String),
    #[error("the RPC server did not send ready within {timeout:?}; stderr: {stderr}")]
    ReadyTimeout { timeout: Duration, stderr: String },
    #[error("RPC server sequence gap: expected {expected}, received {received}")]
    SequenceGap { expected: u64, received: u64 },
    #[error("the RPC server emitted an unknown frame type: {0}")]
    UnknownFrameType(String),
    #[error("the RPC server emitted an invalid frame: {0}")]
    InvalidFrame(String),
    #[error("the RPC server rejected a request ({code}): {message}")]
    Protocol {
        code: ProtocolErrorCode,
        message: String,
        id: Option<String>,
    },
    #[error("{method} failed ({code:?}): {message}")]
    Response {
        method: String,
        code: ResponseErrorCode,
        message: String,
    },
    #[error("the RPC connection closed: {reason}; stderr: {stderr}")]
    Closed { reason: String, stderr: String },
    #[error("the RPC server exited with {status}; stderr: {stderr}")]
    Exit { status: String, stderr: String },
    #[error("could not decode the {what}: {message}")]
    Decode { what: String, message: String },
    #[error("{0}")]
    Usage(String),
}

impl Error {
    /// The response error code, for `ok: false` responses.
    pub fn response_code(&self) -> Option<ResponseErrorCode> {
        match self {
            Error::Response { code, .. } => Some(*code),
            _ => None,
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// One `session_event` frame.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionEvent {
    pub sequence: u64,
    /// The `event` object; `event["type"]` names it. Decode with [`SessionEvent::typed`].
    pub event: Value,
}

impl SessionEvent {
    /// The event type (`agent_start`, `message_end`, …).
    pub fn kind(&self) -> &str {
        self.event["type"].as_str().unwrap_or_default()
    }

    /// The event decoded into zi's typed event enum.
    pub fn typed(&self) -> Result<zi_protocol::event::AgentSessionEvent> {
        decode("session event", self.event.clone())
    }
}

/// An ordered stream of session events, from subscription on.
pub struct EventStream {
    rx: mpsc::UnboundedReceiver<SessionEvent>,
}

impl EventStream {
    /// The next event; `None` once the connection has ended and every event was delivered.
    pub async fn next(&mut self) -> Option<SessionEvent> {
        self.rx.recv().await
    }

    /// The next event if one is already buffered.
    pub fn try_next(&mut self) -> Result<SessionEvent, mpsc::error::TryRecvError> {
        self.rx.try_recv()
    }

    /// Waits for the first event of type `kind`, skipping others; `None` when the stream ends.
    pub async fn next_of(&mut self, kind: &str) -> Option<SessionEvent> {
        while let Some(event) = self.next().await {
            if event.kind() == kind {
                return Some(event);
            }
        }
        None
    }
}

/// Spawns a Zi RPC server and connects to it.
#[derive(Debug, Clone)]
pub struct ClientBuilder {
    program: OsString,
    args: Vec<OsString>,
    cwd: Option<PathBuf>,
    env_clear: bool,
    env: Vec<(OsString, OsString)>,
    ready_timeout: Duration,
    close_grace: Duration,
    max_in_flight: usize,
    process_group: Option<i32>,
    stderr_tail_bytes: usize,
    raw_requests: bool,
    taps: Vec<mpsc::UnboundedSender<TappedFrame>>,
}

impl ClientBuilder {
    /// A builder for `program` (arguments are given verbatim: add `--mode rpc` yourself).
    pub fn new(program: impl AsRef<OsStr>) -> Self {
        ClientBuilder {
            program: program.as_ref().to_owned(),
            args: Vec::new(),
            cwd: None,
            env_clear: false,
            env: Vec::new(),
            ready_timeout: DEFAULT_READY_TIMEOUT,
            close_grace: DEFAULT_CLOSE_GRACE,
            max_in_flight: MAX_IN_FLIGHT,
            process_group: None,
            stderr_tail_bytes: STDERR_TAIL_BYTES,
            raw_requests: false,
            taps: Vec::new(),
        }
    }

    /// A builder from a command line split on whitespace (`"zi --mode rpc --no-session"`).
    pub fn from_command_line(line: &str) -> Result<Self> {
        let mut words = line.split_whitespace();
        let program = words
            .next()
            .ok_or_else(|| Error::Usage("the server command is empty".into()))?;
        Ok(ClientBuilder::new(program).args(words))
    }

    pub fn arg(mut self, arg: impl AsRef<OsStr>) -> Self {
        self.args.push(arg.as_ref().to_owned());
        self
    }

    pub fn args<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.args
            .extend(args.into_iter().map(|a| a.as_ref().to_owned()));
        self
    }

    /// The server's working directory.
    pub fn current_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.cwd = Some(dir.into());
        self
    }

    /// Sets one environment variable for the server.
    pub fn env(mut self, key: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> Self {
        self.env
            .push((key.as_ref().to_owned(), value.as_ref().to_owned()));
        self
    }

    /// Starts the server with only the variables set through [`ClientBuilder::env`].
    pub fn env_clear(mut self) -> Self {
        self.env_clear = true;
        self
    }

    /// The deadline for `ready` (default 10 s).
    pub fn ready_timeout(mut self, timeout: Duration) -> Self {
        self.ready_timeout = timeout;
        self
    }

    /// The wait between EOF and `SIGKILL` on close (default 5 s).
    pub fn close_grace(mut self, grace: Duration) -> Self {
        self.close_grace = grace;
        self
    }

    /// How many ordinary requests the client keeps in flight (default and maximum 32).
    pub fn max_in_flight(mut self, n: usize) -> Self {
        self.max_in_flight = n.clamp(1, MAX_IN_FLIGHT);
        self
    }

    /// Starts the server in process group `pgid` (`0`: a new group led by the server), as
    /// `std::os::unix::process::CommandExt::process_group` does, so a signal to the group also
    /// reaches the server's children.
    pub fn process_group(mut self, pgid: i32) -> Self {
        self.process_group = Some(pgid);
        self
    }

    /// How much of the server's stderr [`Client::stderr_tail`] keeps (default 64 KiB).
    pub fn stderr_tail_bytes(mut self, bytes: usize) -> Self {
        self.stderr_tail_bytes = bytes;
        self
    }

    /// Lets the application write requests of its own with [`Client::send_raw`] (a test driver
    /// probing a server with malformed input, a proxy forwarding another client's requests).
    /// Frames the client cannot attribute to one of its own pending requests — responses with
    /// an id it did not issue, protocol errors without an id or with such an id, `invalid_framing`
    /// included — then reach the frame taps only, instead of ending the connection. The server's
    /// own framing violations (sequence gaps, malformed or unknown frames) stay fatal.
    pub fn raw_requests(mut self, on: bool) -> Self {
        self.raw_requests = on;
        self
    }

    /// Delivers every frame, from `ready` on, to `tap` (see [`Client::tap_frames`] for a tap
    /// attached later).
    pub fn tap(mut self, tap: mpsc::UnboundedSender<TappedFrame>) -> Self {
        self.taps.push(tap);
        self
    }

    /// Spawns the server and waits for `ready`.
    pub async fn spawn(self) -> Result<Client> {
        let mut command = Command::new(&self.program);
        command
            .args(&self.args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        if let Some(cwd) = &self.cwd {
            command.current_dir(cwd);
        }
        if let Some(pgid) = self.process_group {
            command.process_group(pgid);
        }
        if self.env_clear {
            command.env_clear();
        }
        for (k, v) in &self.env {
            command.env(k, v);
        }
        let mut child = command
            .spawn()
            .map_err(|e| Error::Spawn(format!("{}: {e}", self.program.to_string_lossy())))?;
        let stdin = child.stdin.take();
        let stdout = child.stdout.take();
        let stderr = child.stderr.take();
        let shared = Arc::new(Shared {
            pending: Mutex::new(HashMap::new()),
            subscribers: Mutex::new(Vec::new()),
            frame_taps: Mutex::new(self.taps),
            fatal: Mutex::new(None),
            stderr: Mutex::new(VecDeque::new()),
            stderr_tail_bytes: self.stderr_tail_bytes,
            raw_requests: self.raw_requests,
            ready: Mutex::new(None),
        });
        let (ready_tx, mut ready_rx) = watch::channel(false);
        let stderr_reader =
            stderr.map(|stderr| tokio::spawn(collect_stderr(stderr, shared.clone())));
        let reader =
            stdout.map(|stdout| tokio::spawn(read_frames(stdout, shared.clone(), ready_tx)));
        let client = Client {
            shared: shared.clone(),
            stdin: tokio::sync::Mutex::new(stdin),
            child: tokio::sync::Mutex::new(Some(child)),
            reader: Mutex::new(reader),
            stderr_reader: Mutex::new(stderr_reader),
            next_id: AtomicU64::new(1),
            ordinary: Arc::new(Semaphore::new(self.max_in_flight)),
            interrupt: Arc::new(Semaphore::new(1)),
            close_grace: self.close_grace,
        };
        let wait = async {
            loop {
                if *ready_rx.borrow_and_update() {
                    return Ok(());
                }
                if let Some(error) = shared.fatal() {
                    return Err(error);
                }
                if ready_rx.changed().await.is_err() {
                    return Err(shared
                        .fatal()
                        .unwrap_or_else(|| shared.closed("stdout closed before ready")));
                }
            }
        };
        match tokio::time::timeout(self.ready_timeout, wait).await {
            Ok(Ok(())) => Ok(client),
            Ok(Err(error)) => {
                client.kill().await;
                Err(error)
            }
            Err(_) => {
                client.kill().await;
                Err(Error::ReadyTimeout {
                    timeout: self.ready_timeout,
                    stderr: shared.stderr_tail(),
                })
            }
        }
    }
}

type Reply = oneshot::Sender<Result<Value>>;

struct PendingRequest {
    method: String,
    reply: Reply,
    /// The in-flight slot, released when the response arrives (not when a caller gives up
    /// waiting), so the server never sees more than the client's limit.
    _slot: tokio::sync::OwnedSemaphorePermit,
}

struct Shared {
    pending: Mutex<HashMap<String, PendingRequest>>,
    subscribers: Mutex<Vec<mpsc::UnboundedSender<SessionEvent>>>,
    frame_taps: Mutex<Vec<mpsc::UnboundedSender<TappedFrame>>>,
    fatal: Mutex<Option<Error>>,
    stderr: Mutex<VecDeque<u8>>,
    stderr_tail_bytes: usize,
    raw_requests: bool,
    ready: Mutex<Option<Value>>,
}

/// One frame as a tap sees it: the exact line the server wrote and its parsed value.
#[derive(Debug, Clone, PartialEq)]
pub struct TappedFrame {
    /// The line as received, without its terminating LF (a CR before it is kept).
    pub line: Vec<u8>,
    pub frame: Value,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Shared {
    fn fatal(&self) -> Option<Error> {
        lock(&self.fatal).clone()
    }

    fn stderr_tail(&self) -> String {
        let buf = lock(&self.stderr);
        let bytes: Vec<u8> = buf.iter().copied().collect();
        String::from_utf8_lossy(&bytes).into_owned()
    }

    fn closed(&self, reason: &str) -> Error {
        Error::Closed {
            reason: reason.to_string(),
            stderr: self.stderr_tail(),
        }
    }

    /// Records the first fatal error and fails every pending request with it.
    fn fail(&self, error: Error) {
        {
            let mut fatal = lock(&self.fatal);
            if fatal.is_none() {
                *fatal = Some(error);
            }
        }
        let error = self.fatal().unwrap_or_else(|| self.closed("failed"));
        let pending: Vec<PendingRequest> = lock(&self.pending).drain().map(|(_, p)| p).collect();
        for p in pending {
            let _ = p.reply.send(Err(error.clone()));
        }
        lock(&self.subscribers).clear();
        lock(&self.frame_taps).clear();
    }
}

async fn collect_stderr(mut stderr: tokio::process::ChildStderr, shared: Arc<Shared>) {
    let mut chunk = vec![0u8; 8192];
    loop {
        match stderr.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                let mut buf = lock(&shared.stderr);
                buf.extend(&chunk[..n]);
                let excess = buf.len().saturating_sub(shared.stderr_tail_bytes);
                buf.drain(..excess);
            }
        }
    }
}

async fn read_frames(
    stdout: tokio::process::ChildStdout,
    shared: Arc<Shared>,
    ready: watch::Sender<bool>,
) {
    let mut reader = BufReader::with_capacity(64 * 1024, stdout);
    let mut expected = 1u64;
    let mut line = Vec::new();
    loop {
        line.clear();
        let read = (&mut reader)
            .take(MAX_FRAME_BYTES as u64 + 1)
            .read_until(b'\n', &mut line)
            .await;
        match read {
            Ok(0) => {
                shared.fail(shared.closed("stdout closed"));
                return;
            }
            Err(e) => {
                shared.fail(shared.closed(&format!("stdout read failed: {e}")));
                return;
            }
            Ok(_) => {}
        }
        if line.last() != Some(&b'\n') {
            let what = if line.len() > MAX_FRAME_BYTES {
                "a frame exceeds 16 MiB"
            } else {
                "stdout ended inside a frame"
            };
            shared.fail(Error::InvalidFrame(what.into()));
            return;
        }
        line.pop();
        let content = line.strip_suffix(b"\r").unwrap_or(&line);
        match handle_frame(content, &line, &mut expected, &shared) {
            Ok(is_ready) => {
                if is_ready {
                    let _ = ready.send(true);
                }
            }
            Err(error) => {
                shared.fail(error);
                return;
            }
        }
    }
}

fn preview(line: &[u8]) -> String {
    let text = String::from_utf8_lossy(&line[..line.len().min(300)]).into_owned();
    if line.len() > 300 { text + "…" } else { text }
}

/// Processes one frame (`line` without its LF and CR; `raw` as received, without the LF);
/// `Ok(true)` for `ready`.
fn handle_frame(line: &[u8], raw: &[u8], expected: &mut u64, shared: &Shared) -> Result<bool> {
    let frame: Value = serde_json::from_slice(line)
        .map_err(|e| Error::InvalidFrame(format!("{e}: {}", preview(line))))?;
    if !frame.is_object() || frame["version"] != 1 {
        return Err(Error::InvalidFrame(format!(
            "not a version 1 object: {}",
            preview(line)
        )));
    }
    let sequence = frame["sequence"]
        .as_u64()
        .ok_or_else(|| Error::InvalidFrame(format!("no integer sequence: {}", preview(line))))?;
    if sequence != *expected {
        return Err(Error::SequenceGap {
            expected: *expected,
            received: sequence,
        });
    }
    *expected += 1;
    let ty = frame["type"].as_str().unwrap_or_default().to_string();
    if !FRAME_TYPES.contains(&ty.as_str()) {
        return Err(Error::UnknownFrameType(preview(line)));
    }
    if (sequence == 1) != (ty == "ready") {
        return Err(Error::InvalidFrame(format!(
            "ready must be exactly the first frame: {}",
            preview(line)
        )));
    }
    {
        let mut taps = lock(&shared.frame_taps);
        if !taps.is_empty() {
            let tapped = TappedFrame {
                line: raw.to_vec(),
                frame: frame.clone(),
            };
            taps.retain(|tap| tap.send(tapped.clone()).is_ok());
        }
    }
    match ty.as_str() {
        "ready" => {
            if !frame["state"].is_object() {
                return Err(Error::InvalidFrame("ready without a state object".into()));
            }
            *lock(&shared.ready) = Some(frame["state"].clone());
            Ok(true)
        }
        "session_event" => {
            if !frame["event"].is_object() {
                return Err(Error::InvalidFrame(format!(
                    "session_event without an event object: {}",
                    preview(line)
                )));
            }
            let event = SessionEvent {
                sequence,
                event: frame["event"].clone(),
            };
            let mut subscribers = lock(&shared.subscribers);
            subscribers.retain(|s| s.send(event.clone()).is_ok());
            Ok(false)
        }
        "response" => {
            let (Some(id), Some(method), Some(ok)) = (
                frame["id"].as_str(),
                frame["method"].as_str(),
                frame["ok"].as_bool(),
            ) else {
                return Err(Error::InvalidFrame(format!(
                    "response without id, method or ok: {}",
                    preview(line)
                )));
            };
            let Some(pending) = lock(&shared.pending).remove(id) else {
                if shared.raw_requests {
                    return Ok(false);
                }
                return Err(Error::InvalidFrame(format!(
                    "response to an unknown request id: {}",
                    preview(line)
                )));
            };
            if pending.method != method {
                return Err(Error::InvalidFrame(format!(
                    "response echoes {method} for a {} request",
                    pending.method
                )));
            }
            let outcome = if ok {
                Ok(frame["result"].clone())
            } else {
                let code: ResponseErrorCode =
                    decode("response error code", frame["error"]["code"].clone())?;
                let message = frame["error"]["message"]
                    .as_str()
                    .ok_or_else(|| Error::InvalidFrame("error without a message".into()))?;
                Err(Error::Response {
                    method: method.to_string(),
                    code,
                    message: message.to_string(),
                })
            };
            let _ = pending.reply.send(outcome);
            Ok(false)
        }
        _ => {
            let code: ProtocolErrorCode = decode("protocol error code", frame["code"].clone())?;
            let error = Error::Protocol {
                code,
                message: frame["message"].as_str().unwrap_or_default().to_string(),
                id: frame["id"].as_str().map(str::to_string),
            };
            let target = frame["id"]
                .as_str()
                .filter(|_| code.is_recoverable())
                .and_then(|id| lock(&shared.pending).remove(id));
            match target {
                Some(pending) => {
                    let _ = pending.reply.send(Err(error));
                    Ok(false)
                }
                None if shared.raw_requests => Ok(false),
                None => Err(error),
            }
        }
    }
}

fn decode<T: DeserializeOwned>(what: &str, value: Value) -> Result<T> {
    serde_json::from_value(value).map_err(|e| Error::Decode {
        what: what.to_string(),
        message: e.to_string(),
    })
}

/// A connection to a spawned Zi RPC server. Share it between tasks with `Arc<Client>`.
pub struct Client {
    shared: Arc<Shared>,
    stdin: tokio::sync::Mutex<Option<ChildStdin>>,
    child: tokio::sync::Mutex<Option<Child>>,
    reader: Mutex<Option<tokio::task::JoinHandle<()>>>,
    stderr_reader: Mutex<Option<tokio::task::JoinHandle<()>>>,
    next_id: AtomicU64,
    ordinary: Arc<Semaphore>,
    interrupt: Arc<Semaphore>,
    close_grace: Duration,
}

impl Client {
    /// The `state` of the `ready` frame.
    pub fn ready_state(&self) -> Result<SessionState> {
        decode(
            "ready state",
            lock(&self.shared.ready).clone().unwrap_or(Value::Null),
        )
    }

    /// The tail (at most 64 KiB) of what the server wrote to stderr so far.
    pub fn stderr_tail(&self) -> String {
        self.shared.stderr_tail()
    }

    /// How many requests await their response (for leak checks).
    pub fn pending_requests(&self) -> usize {
        lock(&self.shared.pending).len()
    }

    /// How many event subscribers are attached.
    pub fn subscribers(&self) -> usize {
        let mut subscribers = lock(&self.shared.subscribers);
        subscribers.retain(|s| !s.is_closed());
        subscribers.len()
    }

    /// The fatal error that ended the connection, if any.
    pub fn failure(&self) -> Option<Error> {
        self.shared.fatal()
    }

    /// Subscribes to session events from now on, in sequence order.
    pub fn subscribe(&self) -> EventStream {
        let (tx, rx) = mpsc::unbounded_channel();
        if self.shared.fatal().is_none() {
            let mut subscribers = lock(&self.shared.subscribers);
            subscribers.retain(|s| !s.is_closed());
            subscribers.push(tx);
        }
        EventStream { rx }
    }

    /// Whether the server's stderr has reached EOF (after an exit, `false` means a descendant
    /// still holds it open).
    pub fn stderr_closed(&self) -> bool {
        lock(&self.stderr_reader)
            .as_ref()
            .is_none_or(|task| task.is_finished())
    }

    /// Every frame from now on, raw, in sequence order (for transcripts and conformance checks).
    pub fn tap_frames(&self) -> mpsc::UnboundedReceiver<TappedFrame> {
        let (tx, rx) = mpsc::unbounded_channel();
        if self.shared.fatal().is_none() {
            lock(&self.shared.frame_taps).push(tx);
        }
        rx
    }

    /// Writes raw bytes to the server's stdin (they should end with `\n`).
    pub async fn send_raw(&self, bytes: &[u8]) -> Result<()> {
        let mut stdin = self.stdin.lock().await;
        let pipe = stdin
            .as_mut()
            .ok_or_else(|| Error::Usage("stdin is closed".into()))?;
        let written = async {
            pipe.write_all(bytes).await?;
            pipe.flush().await
        }
        .await;
        written.map_err(|e| self.shared.closed(&format!("stdin write failed: {e}")))
    }

    /// Sends a request and awaits its correlated `result`. `params: None` omits the key.
    pub async fn request(&self, method: &str, params: Option<Value>) -> Result<Value> {
        let slots = if method == "session.interrupt" {
            &self.interrupt
        } else {
            &self.ordinary
        };
        let permit = slots
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| self.shared.closed("client closed"))?;
        if let Some(error) = self.shared.fatal() {
            return Err(error);
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed).to_string();
        let mut record = json!({ "version": 1, "id": id, "method": method });
        if let Some(params) = params {
            record["params"] = params;
        }
        let mut line = serde_json::to_vec(&record).map_err(|e| Error::Usage(e.to_string()))?;
        line.push(b'\n');
        let (tx, rx) = oneshot::channel();
        lock(&self.shared.pending).insert(
            id.clone(),
            PendingRequest {
                method: method.to_string(),
                reply: tx,
                _slot: permit,
            },
        );
        if let Some(error) = self.shared.fatal() {
            lock(&self.shared.pending).remove(&id);
            return Err(error);
        }
        if let Err(error) = self.send_raw(&line).await {
            lock(&self.shared.pending).remove(&id);
            return Err(error);
        }
        match rx.await {
            Ok(outcome) => outcome,
            Err(_) => Err(self
                .shared
                .fatal()
                .unwrap_or_else(|| self.shared.closed("the connection ended"))),
        }
    }

    /// Sends a request of method `M` (a marker of [`methods`]) with its typed params and
    /// decodes its typed result. The params and result types come from the method table.
    pub async fn call<M: RpcMethod>(&self, params: M::Params) -> Result<M::Result> {
        let name = M::METHOD.name();
        let params = M::encode_params(&params).map_err(|e| Error::Usage(e.to_string()))?;
        let result = self.request(name, params).await?;
        decode(name, result)
    }

    pub async fn get_state(&self) -> Result<SessionState> {
        self.call::<methods::GetState>(()).await
    }

    pub async fn get_messages(&self, start: u64, limit: u64) -> Result<MessagePage> {
        self.call::<methods::GetMessages>(Some(MessagesParams { start, limit }))
            .await
    }

    /// Pages `session.get_messages` from 0 until `nextStart` is null (at most 1,024 pages).
    pub async fn all_messages(&self) -> Result<Vec<AgentMessage>> {
        let mut out = Vec::new();
        let mut start = 0;
        for _ in 0..MAX_PAGES {
            let page = self.get_messages(start, 100).await?;
            out.extend(page.messages);
            match page.next_start {
                Some(next) if next > start => start = next,
                Some(next) => {
                    return Err(Error::InvalidFrame(format!(
                        "message page nextStart {next} does not advance past {start}"
                    )));
                }
                None => return Ok(out),
            }
        }
        Err(Error::Usage("more than 1024 message pages".into()))
    }

    pub async fn get_outcomes(&self, start: u64, limit: u64) -> Result<OutcomePage> {
        self.call::<methods::GetOutcomes>(Some(OutcomesParams { start, limit }))
            .await
    }

    /// Pages `session.get_outcomes` from 0 until `nextStart` is null (at most 1,024 pages).
    pub async fn all_outcomes(&self) -> Result<Vec<zi_protocol::event::SessionEntry>> {
        let mut out = Vec::new();
        let mut start = 0;
        for _ in 0..MAX_PAGES {
            let page = self.get_outcomes(start, 100).await?;
            out.extend(page.outcomes);
            match page.next_start {
                Some(next) if next > start => start = next,
                Some(next) => {
                    return Err(Error::InvalidFrame(format!(
                        "outcome page nextStart {next} does not advance past {start}"
                    )));
                }
                None => return Ok(out),
            }
        }
        Err(Error::Usage("more than 1024 outcome pages".into()))
    }

    /// `session.prompt`: the input was admitted (not completed).
    pub async fn prompt(
        &self,
        delivery: Delivery,
        text: &str,
        completion_id: Option<&str>,
    ) -> Result<PromptResult> {
        self.call::<methods::Prompt>(PromptParams {
            delivery,
            text: text.to_string(),
            completion_id: completion_id.map(str::to_string),
        })
        .await
    }

    /// `session.interrupt` (the reserved slot): resolves once the interrupted activity settles.
    pub async fn interrupt(&self) -> Result<()> {
        self.call::<methods::Interrupt>(()).await.map(|_| ())
    }

    /// `session.await_idle`; with a completion id, the watch's settled observation.
    pub async fn await_idle(
        &self,
        completion_id: Option<&str>,
    ) -> Result<Option<CompletionResult>> {
        let params = completion_id.map(|id| AwaitIdleParams {
            completion_id: id.to_string(),
        });
        let watched = params.is_some();
        match self.call::<methods::AwaitIdle>(params).await? {
            AwaitIdleResult::Completion(result) if watched => Ok(Some(result)),
            AwaitIdleResult::Idle(_) if !watched => Ok(None),
            other => Err(Error::Decode {
                what: "session.await_idle".into(),
                message: format!("unexpected result {other:?}"),
            }),
        }
    }

    /// Follows a completion watch until its observed revision is at least `revision`, re-issuing
    /// the idle watch when input admitted after an observation advanced it.
    pub async fn await_completion(
        &self,
        completion_id: &str,
        revision: u64,
    ) -> Result<CompletionResult> {
        loop {
            let result = self
                .await_idle(Some(completion_id))
                .await?
                .ok_or_else(|| Error::Usage("await_idle returned no watch result".into()))?;
            if result.completion_revision >= revision {
                return Ok(result);
            }
        }
    }

    pub async fn set_events(&self, mode: EventMode) -> Result<EventMode> {
        let result = self
            .call::<methods::SetEvents>(SetEventsParams { mode })
            .await?;
        Ok(result.mode)
    }

    pub async fn command_list(&self) -> Result<Vec<CommandDescriptor>> {
        let list = self.call::<methods::CommandList>(()).await?;
        Ok(list.commands)
    }

    /// `command.invoke`: the command's feedback message, if any.
    pub async fn command_invoke(&self, name: &str, arguments: &str) -> Result<Option<String>> {
        let result = self
            .call::<methods::CommandInvoke>(CommandInvokeParams {
                name: name.to_string(),
                arguments: arguments.to_string(),
            })
            .await?;
        Ok(result.message)
    }

    pub async fn model_list(&self) -> Result<ModelList> {
        self.call::<methods::ModelList>(()).await
    }

    pub async fn model_select(&self, provider: &str, id: &str) -> Result<ModelSelection> {
        self.call::<methods::ModelSelect>(ModelSelectParams {
            provider: provider.to_string(),
            id: id.to_string(),
        })
        .await
    }

    pub async fn thinking_list(&self) -> Result<Vec<ThinkingLevel>> {
        let levels = self.call::<methods::ThinkingList>(()).await?;
        Ok(levels.levels)
    }

    pub async fn thinking_select(
        &self,
        level: ThinkingLevel,
        scope: SettingsScope,
    ) -> Result<ThinkingSelection> {
        self.call::<methods::ThinkingSelect>(ThinkingSelectParams { level, scope })
            .await
    }

    /// Runs one direct prompt to completion and returns the last assistant message's text (an
    /// error when it stopped with `error` or `aborted`).
    pub async fn run_prompt(&self, text: &str) -> Result<String> {
        self.prompt(Delivery::Direct, text, None).await?;
        self.await_idle(None).await?;
        let messages = self.all_messages().await?;
        let last = messages
            .iter()
            .rev()
            .find_map(AgentMessage::as_assistant)
            .ok_or_else(|| {
                Error::Usage("RPC session completed without an assistant message".into())
            })?;
        use zi_protocol::message::StopReason;
        match last.stop_reason {
            StopReason::Error | StopReason::Aborted => {
                Err(Error::Usage(last.error_message.clone().unwrap_or_else(
                    || format!("RPC assistant stopped with {}", last.stop_reason.as_str()),
                )))
            }
            _ => Ok(last.text()),
        }
    }

    /// Invokes an extension command after checking that `command.list` admits its exact name.
    pub async fn run_command(&self, name: &str, arguments: &str) -> Result<Option<String>> {
        let commands = self.command_list().await?;
        if !commands.iter().any(|c| c.name == name) {
            return Err(Error::Usage(format!("Command not found: {name}")));
        }
        self.command_invoke(name, arguments).await
    }

    /// Closes stdin (EOF) without waiting.
    pub async fn close_stdin(&self) {
        self.stdin.lock().await.take();
    }

    /// Closes the connection: EOF, a bounded wait for exit, then `SIGKILL`. Pending requests
    /// fail. A non-zero exit (unless the client killed the server) is an [`Error::Exit`].
    pub async fn close(&self) -> Result<ExitStatus> {
        self.close_stdin().await;
        let Some(mut child) = self.child.lock().await.take() else {
            return Err(Error::Usage("the client is already closed".into()));
        };
        let status = match tokio::time::timeout(self.close_grace, child.wait()).await {
            Ok(Ok(status)) => status,
            Ok(Err(e)) => return Err(self.shared.closed(&format!("wait failed: {e}"))),
            Err(_) => {
                let _ = child.start_kill();
                let status = child
                    .wait()
                    .await
                    .map_err(|e| self.shared.closed(&format!("wait failed: {e}")))?;
                self.finish_reader().await;
                self.shared.fail(
                    self.shared
                        .closed("the server was killed after the close grace"),
                );
                return Ok(status);
            }
        };
        self.finish_reader().await;
        self.shared.fail(self.shared.closed("closed by the client"));
        if status.success() {
            Ok(status)
        } else {
            Err(Error::Exit {
                status: status.to_string(),
                stderr: self.stderr_tail(),
            })
        }
    }

    /// Waits (boundedly) for the readers to drain stdout and stderr after exit.
    async fn finish_reader(&self) {
        let reader = lock(&self.reader).take();
        if let Some(reader) = reader {
            let _ = tokio::time::timeout(Duration::from_secs(5), reader).await;
        }
        let stderr_reader = lock(&self.stderr_reader).take();
        if let Some(mut stderr_reader) = stderr_reader
            && tokio::time::timeout(Duration::from_secs(5), &mut stderr_reader)
                .await
                .is_err()
        {
            // Still open (held by a descendant): keep collecting, and let `stderr_closed` tell.
            *lock(&self.stderr_reader) = Some(stderr_reader);
        }
    }

    /// Kills the server at once.
    pub async fn kill(&self) {
        self.stdin.lock().await.take();
        if let Some(mut child) = self.child.lock().await.take() {
            let _ = child.start_kill();
            let _ = child.wait().await;
        }
        self.shared.fail(self.shared.closed("killed by the client"));
    }

    /// The server's process id, while it runs.
    pub async fn pid(&self) -> Option<u32> {
        self.child.lock().await.as_ref().and_then(Child::id)
    }

    /// Sends a signal to the server (Unix).
    pub async fn signal(&self, signal: i32) -> bool {
        match self.pid().await {
            Some(pid) => std::process::Command::new("kill")
                .arg(format!("-{signal}"))
                .arg(pid.to_string())
                .status()
                .map(|s| s.success())
                .unwrap_or(false),
            None => false,
        }
    }

    /// Waits for the server to exit on its own (without closing stdin), up to `timeout`.
    pub async fn wait_exit(&self, timeout: Duration) -> Option<ExitStatus> {
        let mut guard = self.child.lock().await;
        let child = guard.as_mut()?;
        let status = tokio::time::timeout(timeout, child.wait())
            .await
            .ok()?
            .ok()?;
        guard.take();
        drop(guard);
        self.finish_reader().await;
        Some(status)
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        if let Some(reader) = lock(&self.reader).take() {
            reader.abort();
        }
        if let Some(reader) = lock(&self.stderr_reader).take() {
            reader.abort();
        }
        // The child is killed by `kill_on_drop`.
    }
}

/// Spawns the server, runs one prompt, closes, and returns the completion text.
///
/// ```no_run
/// # async fn demo() -> Result<(), zi_rpc_client::Error> {
/// let builder = zi_rpc_client::ClientBuilder::new("zi").args(["--mode", "rpc", "--no-session"]);
/// let text = zi_rpc_client::run_prompt(builder, "Summarize this repository").await?;
/// println!("{text}");
/// # Ok(()) }
/// ```
pub async fn run_prompt(builder: ClientBuilder, prompt: &str) -> Result<String> {
    let client = builder.spawn().await?;
    let outcome = client.run_prompt(prompt).await;
    let closed = client.close().await;
    let text = outcome?;
    closed?;
    Ok(text)
}

/// Spawns the server, checks `command.list`, invokes the command, closes, and returns its
/// feedback message.
///
/// ```no_run
/// # async fn demo() -> Result<(), zi_rpc_client::Error> {
/// let builder = zi_rpc_client::ClientBuilder::new("zi").args(["--mode", "rpc"]);
/// let message = zi_rpc_client::run_command(builder, "counter", "increment").await?;
/// println!("{message:?}");
/// # Ok(()) }
/// ```
pub async fn run_command(
    builder: ClientBuilder,
    name: &str,
    arguments: &str,
) -> Result<Option<String>> {
    let client = builder.spawn().await?;
    let outcome = client.run_command(name, arguments).await;
    let closed = client.close().await;
    let message = outcome?;
    closed?;
    Ok(message)
}
