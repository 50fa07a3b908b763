//! Spawning a server: command line, environment, limits, and the wait for `ready`.

use std::collections::{HashMap, VecDeque};
use std::ffi::{OsStr, OsString};
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::client::Client;
use crate::connection::{Shared, TappedFrame, collect_stderr, read_frames};
use crate::error::{Error, Result};
use crate::{DEFAULT_CLOSE_GRACE, DEFAULT_READY_TIMEOUT, MAX_IN_FLIGHT, STDERR_TAIL_BYTES};
use tokio::process::Command;
use tokio::sync::{Semaphore, mpsc, watch};

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
    own_session: bool,
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
            own_session: false,
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

    /// Appends one argument to the server command.
    pub fn arg(mut self, arg: impl AsRef<OsStr>) -> Self {
        self.args.push(arg.as_ref().to_owned());
        self
    }

    /// Appends arguments to the server command.
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

    /// Starts the server as the leader of a new session without a controlling terminal (and of
    /// a new process group whose id is its pid), so neither it nor its children can open
    /// `/dev/tty`. Takes precedence over [`ClientBuilder::process_group`].
    pub fn own_session(mut self) -> Self {
        self.own_session = true;
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
        if self.own_session {
            zi_os::process::start_in_own_session(command.as_std_mut());
        } else if let Some(pgid) = self.process_group {
            command.process_group(pgid);
        }
        if self.env_clear {
            command.env_clear();
        }
        for (k, v) in &self.env {
            command.env(k, v);
        }
        if self.own_session {
            // After the environment is set: the marker is one of its variables.
            zi_os::process::lifetime::die_with_zi(command.as_std_mut(), zi_os::process::SIGKILL);
            zi_os::process::lifetime::mark(command.as_std_mut());
        }
        let mut child =
            zi_os::process::lifetime::spawn_owned(|| command.spawn(), tokio::process::Child::id)
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
            failed: watch::Sender::new(false),
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
