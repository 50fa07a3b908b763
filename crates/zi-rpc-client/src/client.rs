//! The connection: requests, subscriptions, raw access, and closing the server.

use std::process::ExitStatus;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::AsyncWriteExt as _;
use tokio::process::{Child, ChildStdin};
use tokio::sync::{Semaphore, mpsc, oneshot};
use zi_os::sync::lock;

use crate::connection::{PendingRequest, Shared, TappedFrame};
use crate::error::{Error, Result, decode};
use crate::events::EventStream;
use crate::{RpcMethod, SessionState};

/// A connection to a spawned Zi RPC server. Share it between tasks with `Arc<Client>`.
pub struct Client {
    pub(crate) shared: Arc<Shared>,
    pub(crate) stdin: tokio::sync::Mutex<Option<ChildStdin>>,
    pub(crate) child: tokio::sync::Mutex<Option<Child>>,
    pub(crate) reader: Mutex<Option<tokio::task::JoinHandle<()>>>,
    pub(crate) stderr_reader: Mutex<Option<tokio::task::JoinHandle<()>>>,
    pub(crate) next_id: AtomicU64,
    pub(crate) ordinary: Arc<Semaphore>,
    pub(crate) interrupt: Arc<Semaphore>,
    pub(crate) close_grace: Duration,
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

    /// Resolves with the fatal error once the connection has ended (the server exited or
    /// closed stdout, broke the framing, or the client closed it): a supervisor's exit watch.
    pub async fn ended(&self) -> Error {
        let mut failed = self.shared.failed.subscribe();
        let _ = failed.wait_for(|failed| *failed).await;
        self.shared
            .fatal()
            .unwrap_or_else(|| self.shared.closed("the connection ended"))
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
            Some(pid) => {
                i32::try_from(pid).is_ok_and(|pid| zi_os::process::kill_process(pid, signal))
            }
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

#[cfg(test)]
#[path = "client_tests.rs"]
mod tests;
