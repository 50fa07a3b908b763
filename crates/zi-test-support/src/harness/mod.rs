//! The black-box test harness: a running `zi --mode rpc` driven through `zi-rpc-client`.
//!
//! A [`Harness`] is started by [`ZiCommand::spawn_rpc`](crate::zi_command::ZiCommand::spawn_rpc).
//! Underneath is a [`zi_rpc_client::Client`], which owns the child's pipes, checks the framing of
//! every frame (one JSON object per LF-terminated line, `version` 1, `sequence` 1, 2, 3, …, `ready`
//! first and only first, known frame types) and serves typed requests ([`Harness::client`]). The
//! client runs with [`raw_requests`](zi_rpc_client::ClientBuilder::raw_requests), so a test can
//! also write anything at all ([`Harness::send_raw`]: malformed JSON, split records, invalid
//! UTF-8) and pick its own request ids ([`Harness::request`]); the answers reach the harness
//! instead of ending the connection.
//!
//! On top, the harness taps every frame in order and checks what the client tolerates: each frame
//! must match the RPC JSON Schema and end with LF alone (no CR). A violation found by either is
//! recorded and makes the next wait panic with a description of it. Frames that arrive while a
//! wait looks for something else are kept in a backlog, so a later wait finds them.
//!
//! Every wait has a timeout (30 s by default) and panics with a helpful message that includes the
//! most recent frames and the tail of the child's stderr.

use std::collections::VecDeque;
use std::fmt::Write as _;
use std::io;
use std::os::unix::process::ExitStatusExt as _;
use std::process::ExitStatus;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio::time::Instant;
use zi_rpc_client::{Client, ClientBuilder, TappedFrame};

mod received;

use crate::frame_schema::schema_violation;
use crate::preview::{TAIL_BYTES, preview, preview_value, tail_text};
use crate::process::{descendants, kill_group, kill_group_if_populated, process_exists};
use crate::zi_command::{Environment, ZiCommand};

/// How many recent frames a panic message shows.
const CONTEXT_FRAMES: usize = 8;
/// How long `Drop` waits for the killed child to be gone.
const DROP_REAP_TIMEOUT: Duration = Duration::from_secs(5);

enum Pulled {
    Frame(usize),
    Eof,
    Timeout,
}

/// How a `zi --mode rpc` child ended.
#[derive(Debug, Clone)]
pub struct Exited {
    /// The exit code, when it exited.
    pub code: Option<i32>,
    /// The signal that killed it, when one did.
    pub signal: Option<i32>,
    /// Everything it wrote to stderr.
    pub stderr: String,
}

/// A running `zi --mode rpc` child. Dropping it kills the child (SIGKILL, also to its process
/// group and known descendants).
pub struct Harness {
    client: Client,
    command_line: String,
    pid: u32,
    tap: mpsc::UnboundedReceiver<TappedFrame>,
    validate_schema: bool,
    stdout_eof: bool,
    /// Every frame pulled from the tap, in order.
    frames: Vec<Value>,
    /// Indices into `frames` of frames no wait has consumed yet, in order.
    backlog: VecDeque<usize>,
    violation: Option<String>,
    exit: Option<ExitStatus>,
    timeout: Duration,
    _home: Option<tempfile::TempDir>,
}

impl Harness {
    pub(crate) async fn spawn(command: ZiCommand) -> Harness {
        let command_line = command.describe();
        let Environment { vars, home } = command
            .environment()
            .unwrap_or_else(|e| panic!("prepare the environment of `{command_line}`: {e}"));
        let (tap_tx, tap) = mpsc::unbounded_channel();
        let mut builder = ClientBuilder::new(command.program())
            .args(command.arguments())
            .env_clear()
            .process_group(0)
            .stderr_tail_bytes(usize::MAX)
            .raw_requests(true)
            .ready_timeout(command.wait_timeout())
            .tap(tap_tx);
        for (k, v) in vars {
            builder = builder.env(k, v);
        }
        if let Some(dir) = command.working_dir() {
            builder = builder.current_dir(dir);
        }
        let client = builder
            .spawn()
            .await
            .unwrap_or_else(|e| panic!("spawn `{command_line}`: {e}"));
        let pid = client
            .pid()
            .await
            .unwrap_or_else(|| panic!("`{command_line}` has no pid right after ready"));
        let mut harness = Harness {
            client,
            command_line,
            pid,
            tap,
            validate_schema: command.validates_schema(),
            stdout_eof: false,
            frames: Vec::new(),
            backlog: VecDeque::new(),
            violation: None,
            exit: None,
            timeout: command.wait_timeout(),
            _home: home,
        };
        // The client returned after reading `ready`, so the tap holds it already.
        harness.drain_available();
        harness.check_violation("the ready frame");
        if harness.backlog.front() != Some(&0) {
            harness.fail("the ready frame did not reach the tap".to_string());
        }
        harness.backlog.pop_front();
        harness
    }

    /// The typed client, for typed requests (`harness.client().get_state().await`). Its frames
    /// are tapped like all others, so they also appear in [`frames`](Self::frames).
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// The child's process id.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Changes the timeout of subsequent waits.
    pub fn set_timeout(&mut self, t: Duration) {
        self.timeout = t;
    }

    /// The `state` of the ready frame (frame 1, checked by the client).
    pub fn ready(&self) -> Value {
        self.frames[0]["state"].clone()
    }

    /// Writes raw bytes to stdin (for framing tests). A failed write (the child closed its
    /// stdin or exited) is ignored; use [`try_send_raw`](Self::try_send_raw) to observe it.
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
    /// after [`close_stdin`](Self::close_stdin) and with `BrokenPipe` when the write fails.
    pub async fn try_send_raw(&mut self, bytes: &[u8]) -> io::Result<()> {
        let timeout = self.timeout;
        match tokio::time::timeout(timeout, self.client.send_raw(bytes)).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(zi_rpc_client::Error::Usage(_))) => Err(io::Error::new(
                io::ErrorKind::NotConnected,
                "stdin was already closed",
            )),
            Ok(Err(e)) => Err(io::Error::new(io::ErrorKind::BrokenPipe, e.to_string())),
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
        self.request_ok_frame(id, method, params).await["result"].take()
    }

    /// [`request`](Self::request), then asserts `ok: true` and returns the whole response.
    async fn request_ok_frame(&mut self, id: &str, method: &str, params: Option<Value>) -> Value {
        let frame = self.request(id, method, params).await;
        if frame["type"] != "response" || frame["ok"] != true {
            let msg = format!(
                "request {id:?} ({method}) did not succeed: {}",
                preview_value(&frame)
            );
            self.fail(msg);
        }
        frame
    }

    /// Sends `text` as a direct `session.prompt` (request `id`) and asserts it was accepted; the
    /// run goes on. Returns the response's sequence: the run's events come after it.
    pub async fn prompt(&mut self, id: &str, text: &str) -> u64 {
        let params = json!({"delivery": "direct", "text": text});
        let response = self
            .request_ok_frame(id, "session.prompt", Some(params))
            .await;
        response["sequence"].as_u64().unwrap_or(0)
    }

    /// [`prompt`](Self::prompt), then waits for that run's `agent_settled`.
    pub async fn prompt_and_settle(&mut self, id: &str, text: &str) {
        let sent = self.prompt(id, text).await;
        self.event_after("agent_settled", sent).await;
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

    /// Waits for a `session_event` of type `ty` whose frame sequence is greater than `after`
    /// and returns the frame (for "the next X after this point" when earlier ones are unconsumed).
    pub async fn event_after(&mut self, ty: &str, after: u64) -> Value {
        let what = format!("a session_event {ty:?} after sequence {after}");
        self.wait_matching(&what, 0, |f| {
            f["type"] == "session_event"
                && f["event"]["type"] == ty
                && f["sequence"].as_u64().unwrap_or(0) > after
        })
        .await
    }

    /// The sequence number of the last frame received so far.
    pub fn last_sequence(&self) -> u64 {
        self.frames
            .last()
            .and_then(|f| f["sequence"].as_u64())
            .unwrap_or(0)
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

    /// Whether the child's stdout has reached EOF (as observed by the waits).
    pub fn stdout_closed(&self) -> bool {
        self.stdout_eof
    }

    /// Closes the child's stdin (the client disconnects).
    pub async fn close_stdin(&mut self) {
        self.client.close_stdin().await;
    }

    /// Sends `sig` to the child (not to its descendants). Does nothing once the exit was observed.
    pub fn signal(&self, sig: i32) {
        if self.exit.is_none() {
            zi_os::process::kill_process(self.pid as i32, sig);
        }
    }

    /// Closes stdin and expects zi to exit with code 0 within the wait timeout; returns how it
    /// exited (stderr for further checks).
    pub async fn exit_by_eof(&mut self) -> Exited {
        self.close_stdin().await;
        let exited = self.wait_exit(self.timeout).await;
        assert_eq!(exited.code, Some(0), "stderr: {}", exited.stderr);
        exited
    }

    /// Waits for the child to exit, then reads the remaining stdout frames (into the backlog) and
    /// all of stderr. Panics if that does not happen within `timeout` or on a protocol violation.
    pub async fn wait_exit(&mut self, timeout: Duration) -> Exited {
        let deadline = Instant::now() + timeout;
        let status = match self.exit {
            Some(status) => status,
            None => match self.client.wait_exit(timeout).await {
                Some(status) => status,
                None => self.fail(format!("zi did not exit within {timeout:?}")),
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
        if !self.client.stderr_closed() {
            self.fail(format!(
                "zi exited ({status}) but its stderr stayed open (inherited by a descendant?)"
            ));
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
        self.client.stderr_tail()
    }

    // -- internals --------------------------------------------------------------------------

    /// Moves every frame already tapped into `frames` and the backlog.
    fn drain_available(&mut self) {
        while !self.stdout_eof {
            match self.tap.try_recv() {
                Ok(tapped) => {
                    let i = self.record(tapped);
                    self.backlog.push_back(i);
                }
                Err(mpsc::error::TryRecvError::Empty) => break,
                Err(mpsc::error::TryRecvError::Disconnected) => self.end_of_stdout(),
            }
        }
    }

    /// Receives the next frame from the tap; a violation panics.
    async fn pull(&mut self, deadline: Instant, what: &str) -> Pulled {
        if self.stdout_eof {
            return Pulled::Eof;
        }
        let pulled = match tokio::time::timeout_at(deadline, self.tap.recv()).await {
            Err(_) => Pulled::Timeout,
            Ok(None) => {
                self.end_of_stdout();
                Pulled::Eof
            }
            Ok(Some(tapped)) => Pulled::Frame(self.record(tapped)),
        };
        self.check_violation(what);
        pulled
    }

    /// Appends a tapped frame to `frames` after the checks the client leaves to the harness.
    fn record(&mut self, tapped: TappedFrame) -> usize {
        if tapped.line.last() == Some(&b'\r') {
            self.violation.get_or_insert(format!(
                "frame line ends with CRLF instead of LF: {}",
                preview(&tapped.line)
            ));
        } else if self.validate_schema
            && let Some(error) = schema_violation(&tapped.frame)
        {
            self.violation.get_or_insert(format!(
                "frame does not match docs/rpc-schema.json ({error}): {}",
                preview(&tapped.line)
            ));
        }
        self.frames.push(tapped.frame);
        self.frames.len() - 1
    }

    /// The tap ended: stdout reached EOF, or the client found a framing violation.
    fn end_of_stdout(&mut self) {
        self.stdout_eof = true;
        match self.client.failure() {
            None | Some(zi_rpc_client::Error::Closed { .. }) => {}
            Some(error) => {
                self.violation.get_or_insert(error.to_string());
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
        match self.exit {
            Some(status) => {
                let _ = write!(s, " ({status})");
            }
            None if process_exists(self.pid) => s.push_str(" (running)"),
            None => s.push_str(" (exited)"),
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
            tail_text(self.stderr_text().as_bytes(), TAIL_BYTES)
        );
        panic!("{s}");
    }
}

impl Drop for Harness {
    fn drop(&mut self) {
        if self.exit.is_none() {
            // Not reaped yet (the client reaps only in `wait_exit`, `close` and `kill`), so
            // neither its pid nor its process group id (the same number) can have been reused.
            let descendants = descendants(self.pid);
            kill_group(self.pid);
            for pid in descendants {
                zi_os::process::kill_process(pid as i32, libc::SIGKILL);
            }
            let deadline = std::time::Instant::now() + DROP_REAP_TIMEOUT;
            while process_exists(self.pid) && std::time::Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(2));
            }
        } else {
            kill_group_if_populated(self.pid);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::process::{process_group_members, wait_until_gone};

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

    fn sh(script: &str) -> ZiCommand {
        ZiCommand::new("/bin/sh")
            .arg("-c")
            .arg(script)
            .env("READY", READY)
            .validate_schema(false)
    }

    /// Runs `f` in a task and returns its panic message.
    async fn panic_message<Fut>(f: Fut) -> String
    where
        Fut: Future<Output = ()> + Send + 'static,
    {
        let err = tokio::spawn(f).await.expect_err("the wait should panic");
        let payload = err.into_panic();
        payload
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default()
    }

    #[tokio::test]
    async fn harness_requests_and_backlog() {
        let mut p = sh(ECHO_SERVER).spawn_rpc().await;
        assert_eq!(p.ready()["sessionId"], "fake");

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

        // A typed request of the client is correlated by the client; its frames are tapped too.
        let typed = p.client().request("x.z", None).await.unwrap();
        assert_eq!(typed, json!({"echo": "1"}));
        let tapped = p.response("1").await;
        assert_eq!(tapped["method"], "x.z");
        assert_eq!(
            p.event_types(),
            ["first", "second"].repeat(7),
            "every event so far, in order"
        );
        let sequences: Vec<u64> = p
            .frames()
            .iter()
            .map(|f| f["sequence"].as_u64().unwrap())
            .collect();
        assert_eq!(sequences, (1..=22).collect::<Vec<_>>());

        p.close_stdin().await;
        let exited = p.wait_exit(Duration::from_secs(10)).await;
        assert_eq!(exited.code, Some(3));
        assert_eq!(exited.signal, None);
        assert_eq!(exited.stderr, "bye\n");
        assert_eq!(p.stderr_text(), "bye\n");
        // Frames after the exit: the unconsumed events of r3 and x.z are still there.
        assert_eq!(p.event("first").await["type"], "first");
        for _ in 0..3 {
            assert!(
                p.next_frame_within(Duration::from_millis(10))
                    .await
                    .is_some()
            );
        }
        assert!(
            p.next_frame_within(Duration::from_millis(10))
                .await
                .is_none()
        );
    }

    #[tokio::test]
    async fn harness_keeps_serving_after_protocol_errors_without_id() {
        // Answers every line with an id-less recoverable protocol error, as zi answers invalid
        // JSON, then a response: the connection must survive both.
        let script = r#"printf '%s\n' "$READY"
seq=2
while IFS= read -r line; do
  printf '{"version":1,"sequence":%d,"type":"protocol_error","code":"invalid_json","message":"m"}\n' "$seq"
  seq=$((seq+1))
  printf '{"version":1,"sequence":%d,"type":"response","id":"x","method":"m","ok":true,"result":{}}\n' "$seq"
  seq=$((seq+1))
done"#;
        let mut p = sh(script).spawn_rpc().await;
        p.send_raw(b"not json\n").await;
        assert_eq!(p.protocol_error(None).await["code"], "invalid_json");
        assert_eq!(p.response("x").await["ok"], true);
        p.send_raw(b"again\n").await;
        assert_eq!(p.protocol_error(None).await["sequence"], 4);
        p.close_stdin().await;
        assert_eq!(p.wait_exit(Duration::from_secs(10)).await.code, Some(0));
    }

    #[tokio::test]
    async fn harness_detects_sequence_gap() {
        let script = r#"printf '%s\n' "$READY"
printf '%s\n' '{"version":1,"sequence":3,"type":"session_event","event":{"type":"x"}}'
while read -r _; do :; done"#;
        let command = sh(script);
        // Found while spawning (the gap follows ready at once) or by the first wait.
        let msg = panic_message(async move {
            let mut p = command.spawn_rpc().await;
            p.next_frame().await;
        })
        .await;
        assert!(
            msg.contains("sequence gap: expected 2, received 3"),
            "{msg}"
        );
    }

    #[tokio::test]
    async fn harness_detects_bad_lines() {
        let cases = [
            ("printf '%s\\nhello\\n' \"$READY\"", "invalid frame"),
            (
                "printf '%s\\n%s' \"$READY\" '{\"version\":1,\"sequence\":2,\"type\":\"session_event\",\"event\":{}}'",
                "stdout ended inside a frame",
            ),
            (
                "printf '%s\\n%s\\n' \"$READY\" '{\"version\":2,\"sequence\":2,\"type\":\"session_event\",\"event\":{}}'",
                "not a version 1 object",
            ),
            ("printf '%s\\r\\n' \"$READY\"", "CRLF"),
            (
                "printf '%s\\n%s\\n' \"$READY\" '{\"version\":1,\"sequence\":2,\"type\":\"bogus\"}'",
                "unknown frame type",
            ),
            (
                "printf '%s\\n' '{\"version\":1,\"sequence\":1,\"type\":\"response\"}'",
                "ready must be exactly the first frame",
            ),
        ];
        for (script, expected) in cases {
            // Stay alive (stdout open) except for the unterminated line, which needs EOF.
            let script = if expected == "stdout ended inside a frame" {
                script.to_string()
            } else {
                format!("{script}\nwhile read -r _; do :; done")
            };
            let command = sh(&script).timeout(Duration::from_secs(5));
            let msg = panic_message(async move {
                let mut p = command.spawn_rpc().await;
                p.event("never").await;
            })
            .await;
            assert!(msg.contains(expected), "{script}: {msg}");
        }
    }

    #[tokio::test]
    async fn harness_checks_frames_against_the_schema() {
        // Well framed, but a session_event without an event object is not a Zi RPC v1 frame.
        let script = r#"printf '%s\n' '{"version":1,"sequence":1,"type":"ready","state":{}}'
while read -r _; do :; done"#;
        let command = ZiCommand::new("/bin/sh").arg("-c").arg(script);
        let msg = panic_message(async move {
            command.spawn_rpc().await;
        })
        .await;
        assert!(msg.contains("does not match docs/rpc-schema.json"), "{msg}");
    }

    #[tokio::test]
    async fn harness_timeout_shows_stderr() {
        let script =
            r#"printf '%s\n' "$READY"; echo diagnostic-line >&2; while read -r _; do :; done"#;
        let mut p = sh(script)
            .timeout(Duration::from_millis(300))
            .spawn_rpc()
            .await;
        // The stderr line is written before the wait starts timing.
        p.set_timeout(Duration::from_secs(5));
        while !p.stderr_text().contains("diagnostic-line") {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        p.set_timeout(Duration::from_millis(300));
        let msg = panic_message(async move {
            p.response("missing").await;
        })
        .await;
        assert!(msg.contains("timed out"), "{msg}");
        assert!(msg.contains("the response with id \"missing\""), "{msg}");
        assert!(msg.contains("diagnostic-line"), "{msg}");
    }

    #[tokio::test]
    async fn harness_signal_and_large_lines() {
        // A 15 MiB frame (the client takes frames up to 16 MiB) followed by a small one, then
        // the process waits to be signalled.
        let script = r#"printf '%s\n' "$READY"
printf '{"version":1,"sequence":2,"type":"session_event","event":{"type":"big","pad":"'
head -c 15728640 /dev/zero | tr '\0' 'a'
printf '"}}\n{"version":1,"sequence":3,"type":"session_event","event":{"type":"small"}}\n'
exec sleep 60"#;
        let mut p = sh(script).spawn_rpc().await;
        assert_eq!(p.event("small").await["type"], "small");
        let big = p.event("big").await;
        assert_eq!(big["pad"].as_str().unwrap().len(), 15 * 1024 * 1024);
        p.signal(libc::SIGTERM);
        let exited = p.wait_exit(Duration::from_secs(10)).await;
        assert_eq!(exited.code, None);
        assert_eq!(exited.signal, Some(libc::SIGTERM));
    }

    #[tokio::test]
    async fn harness_drop_leaves_no_process_behind() {
        let script = r#"sleep 60 & sleep 60 & printf '%s\n' "$READY"; wait"#;
        let p = sh(script).spawn_rpc().await;
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
        assert!(!process_exists(pid), "the child is gone");
        assert_eq!(
            wait_until_gone(&kids, Duration::from_secs(5)).await,
            Vec::<u32>::new()
        );
    }

    #[tokio::test]
    async fn harness_leftovers_after_exit_are_visible_then_killed() {
        let script = r#"sleep 60 </dev/null >/dev/null 2>&1 & printf '%s\n' "$READY""#;
        let mut p = sh(script).spawn_rpc().await;
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
    async fn harness_send_after_exit_is_ignored() {
        let mut p = sh(r#"printf '%s\n' "$READY""#).spawn_rpc().await;
        let exited = p.wait_exit(Duration::from_secs(10)).await;
        assert_eq!(exited.code, Some(0));
        // The child is gone: a large write hits a broken pipe, which send_raw ignores.
        p.send_raw(&vec![b'x'; 1 << 20]).await;
        p.close_stdin().await;
        let err = p.try_send_raw(b"{}\n").await.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::NotConnected);
    }
}
