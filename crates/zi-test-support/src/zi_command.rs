//! One builder for starting the real `zi` binary in a test: arguments, environment, working
//! directory. [`ZiCommand::spawn_rpc`] connects a [`Harness`] to `zi --mode rpc`;
//! [`ZiCommand::run_to_end`] runs a one-shot mode (`-p`, `--mode json`, `--help`, …) to its end.
//!
//! The child's environment is the host's minus every variable for which [`is_withheld_env_var`]
//! is true (so host credentials, `ZI_*` defaults and proxies cannot leak in), plus the variables
//! added with [`ZiCommand::env`]. Unless `HOME` is set explicitly, it points at a fresh empty
//! temporary directory that lives as long as the process, so `~/.zi/agent`, `~/.agents/skills`
//! and the like of the host are never read. The child runs in its own process group.

use std::ffi::{OsStr, OsString};
use std::io;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWriteExt as _};
use tokio::process::{Child, ChildStdin, Command};
use tokio::task::JoinHandle;
use zi_os::sync::lock;

use crate::dirs::AgentDir;
use crate::harness::Harness;
use crate::preview::{TAIL_BYTES, preview, tail_text};
use crate::process::{kill_group, kill_group_if_populated};

/// How long a wait of a [`Harness`] lasts unless changed with [`ZiCommand::timeout`] or
/// [`Harness::set_timeout`]; also the deadline for `ready`.
pub const DEFAULT_WAIT_TIMEOUT: Duration = Duration::from_secs(30);

/// Host environment variables that are never passed to the child unless set explicitly with
/// [`ZiCommand::env`]: credentials, provider endpoints, proxies, and what would let zi open the
/// host's browser.
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
    // A sign-in opens a browser when one is available: never the host's during a test.
    "BROWSER",
    "DISPLAY",
    "WAYLAND_DISPLAY",
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

/// A child's sanitized environment, and the temporary `HOME` to keep alive while it runs.
pub(crate) struct Environment {
    pub(crate) vars: Vec<(OsString, OsString)>,
    pub(crate) home: Option<tempfile::TempDir>,
}

/// Builds a `zi` child process (see the module docs for its environment).
#[derive(Debug, Clone)]
pub struct ZiCommand {
    bin: PathBuf,
    args: Vec<OsString>,
    envs: Vec<(OsString, OsString)>,
    cwd: Option<PathBuf>,
    timeout: Duration,
    validate_schema: bool,
}

impl ZiCommand {
    /// A command for the binary at `bin` (in `zi-cli`'s tests: `env!("CARGO_BIN_EXE_zi")`)
    /// without arguments.
    pub fn new(bin: impl AsRef<Path>) -> Self {
        ZiCommand {
            bin: bin.as_ref().to_path_buf(),
            args: Vec::new(),
            envs: Vec::new(),
            cwd: None,
            timeout: DEFAULT_WAIT_TIMEOUT,
            validate_schema: true,
        }
    }

    /// `zi --mode rpc --agent-dir AGENT --cwd CWD`, run in `CWD`: the usual start of an RPC test.
    pub fn rpc(bin: impl AsRef<Path>, agent: &AgentDir, cwd: &Path) -> Self {
        ZiCommand::new(bin)
            .args(["--mode", "rpc"])
            .agent_dir(agent)
            .arg("--cwd")
            .arg(cwd)
            .current_dir(cwd)
    }

    /// [`rpc`](Self::rpc) with `--no-session --model mock/m1`: zi on the mock's model of
    /// [`AgentDir::with_m1`], writing no journal.
    pub fn rpc_m1(bin: impl AsRef<Path>, agent: &AgentDir, cwd: &Path) -> Self {
        Self::rpc(bin, agent, cwd).no_session().model("mock/m1")
    }

    /// `--agent-dir AGENT`.
    pub fn agent_dir(self, agent: &AgentDir) -> Self {
        self.arg("--agent-dir").arg(agent.path())
    }

    /// `--no-session`.
    pub fn no_session(self) -> Self {
        self.arg("--no-session")
    }

    /// `--model PROVIDER/ID`.
    pub fn model(self, model: &str) -> Self {
        self.arg("--model").arg(model)
    }

    /// Appends one argument.
    pub fn arg(mut self, a: impl AsRef<OsStr>) -> Self {
        self.args.push(a.as_ref().to_os_string());
        self
    }

    /// Appends arguments.
    pub fn args<I, S>(mut self, i: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.args
            .extend(i.into_iter().map(|s| s.as_ref().to_os_string()));
        self
    }

    /// Adds an environment variable (applied after the host environment has been sanitized, so
    /// it may also set a withheld name such as `ZI_MODE` or `OPENAI_API_KEY`).
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

    /// The deadline for `ready` and the default timeout of the [`Harness`]'s waits.
    pub fn timeout(mut self, t: Duration) -> Self {
        self.timeout = t;
        self
    }

    /// Whether every frame is validated against the RPC JSON Schema (default true). Only tests
    /// of the harness itself, which script fake servers, turn it off.
    pub fn validate_schema(mut self, on: bool) -> Self {
        self.validate_schema = on;
        self
    }

    /// The command line, for messages.
    pub(crate) fn describe(&self) -> String {
        let mut s = self.bin.display().to_string();
        for a in &self.args {
            s.push(' ');
            s.push_str(&a.to_string_lossy());
        }
        s
    }

    pub(crate) fn wait_timeout(&self) -> Duration {
        self.timeout
    }

    pub(crate) fn validates_schema(&self) -> bool {
        self.validate_schema
    }

    /// The sanitized environment: the host's minus withheld variables, `HOME` (a fresh temporary
    /// directory, returned to be kept alive, unless set explicitly), then the explicit variables.
    pub(crate) fn environment(&self) -> io::Result<Environment> {
        let mut vars: Vec<(OsString, OsString)> = std::env::vars_os()
            .filter(|(name, _)| !is_withheld_env_var(name))
            .collect();
        let home = if self.envs.iter().any(|(k, _)| k == "HOME") {
            None
        } else {
            let home = tempfile::Builder::new().prefix("zi-home-").tempdir()?;
            vars.push(("HOME".into(), home.path().into()));
            Some(home)
        };
        vars.extend(self.envs.iter().cloned());
        Ok(Environment { vars, home })
    }

    pub(crate) fn program(&self) -> &Path {
        &self.bin
    }

    pub(crate) fn arguments(&self) -> &[OsString] {
        &self.args
    }

    pub(crate) fn working_dir(&self) -> Option<&Path> {
        self.cwd.as_deref()
    }

    pub(crate) fn command(&self) -> io::Result<(Command, Option<tempfile::TempDir>)> {
        let Environment { vars, home } = self.environment()?;
        let mut cmd = Command::new(&self.bin);
        cmd.args(&self.args).env_clear().envs(vars);
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

    /// Spawns `zi --mode rpc` (pass the mode yourself, or start from [`ZiCommand::rpc`]) and
    /// waits for `ready`; panics with the child's stderr when that fails.
    pub async fn spawn_rpc(self) -> Harness {
        Harness::spawn(self).await
    }

    /// Spawns a one-shot mode (`-p`, `--mode json`) without waiting for it, for tests that act
    /// on it while it runs (close stdin, signal it); [`OneShot::wait`] collects the result.
    pub fn spawn_one_shot(self) -> OneShot {
        let (mut cmd, home) = self
            .command()
            .unwrap_or_else(|e| panic!("prepare `{}`: {e}", self.describe()));
        let mut child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("spawn `{}`: {e}", self.describe()));
        let pid = child
            .id()
            .unwrap_or_else(|| panic!("`{}` has no pid", self.describe()));
        let stdin = child.stdin.take();
        let mut out_pipe = child.stdout.take();
        let mut err_pipe = child.stderr.take();
        let live = LiveOutput::default();
        let sink = live.clone();
        let stdout = tokio::spawn(async move {
            if let Some(pipe) = out_pipe.as_mut() {
                let mut chunk = vec![0u8; 64 * 1024];
                while let Ok(n) = pipe.read(&mut chunk).await {
                    if n == 0 {
                        break;
                    }
                    sink.push(&chunk[..n]);
                }
            }
            sink.take()
        });
        let stderr = tokio::spawn(async move {
            let mut buf = Vec::new();
            if let Some(pipe) = err_pipe.as_mut() {
                let _ = read_all(pipe, &mut buf).await;
            }
            buf
        });
        OneShot {
            command_line: self.describe(),
            child,
            pid,
            stdin,
            live,
            stdout,
            stderr,
            reaped: false,
            _home: home,
        }
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
                        tail_text(&stdout, TAIL_BYTES),
                        tail_text(&stderr, TAIL_BYTES),
                    ),
                ))
            }
        }
    }
}

/// A running one-shot invocation (see [`ZiCommand::spawn_one_shot`]). Dropping it kills the
/// child's process group.
pub struct OneShot {
    command_line: String,
    child: Child,
    pid: u32,
    stdin: Option<ChildStdin>,
    /// stdout as it arrives (the interactive subcommands print while they wait).
    live: LiveOutput,
    stdout: JoinHandle<Vec<u8>>,
    stderr: JoinHandle<Vec<u8>>,
    reaped: bool,
    _home: Option<tempfile::TempDir>,
}

impl OneShot {
    /// The child's process id.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Closes the child's stdin (EOF).
    pub fn close_stdin(&mut self) {
        self.stdin = None;
    }

    /// Writes `text` to the child's stdin (a line the person types).
    pub async fn write_stdin(&mut self, text: &str) {
        let stdin = self
            .stdin
            .as_mut()
            .unwrap_or_else(|| panic!("stdin of `{}` is closed", self.command_line));
        stdin
            .write_all(text.as_bytes())
            .await
            .unwrap_or_else(|e| panic!("write to `{}`: {e}", self.command_line));
        let _ = stdin.flush().await;
    }

    /// stdout so far.
    pub fn stdout_so_far(&self) -> String {
        self.live.text()
    }

    /// Waits until a line of stdout satisfies `wanted` and returns it; panics after `timeout`
    /// (or when stdout ends first) with what was printed.
    pub async fn stdout_line(&self, timeout: Duration, wanted: impl Fn(&str) -> bool) -> String {
        let mut changes = self.live.changes.subscribe();
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let text = self.live.text();
            if let Some(line) = text.lines().find(|line| wanted(line)) {
                return line.to_string();
            }
            match tokio::time::timeout_at(deadline, changes.changed()).await {
                Ok(Ok(())) => {}
                _ => panic!(
                    "`{}` printed no wanted line within {timeout:?}; stdout:\n{text}",
                    self.command_line
                ),
            }
        }
    }

    /// Sends `sig` to the child (not to its descendants).
    pub fn signal(&self, sig: i32) {
        if !self.reaped {
            // The child is not reaped, so the pid cannot have been reused.
            zi_os::process::kill_process(self.pid as i32, sig);
        }
    }

    /// Waits for the child to exit and its stdout and stderr to close; panics after `timeout`.
    pub async fn wait(&mut self, timeout: Duration) -> Finished {
        let run = async {
            let status = self.child.wait().await;
            self.reaped = true;
            let stdout = (&mut self.stdout).await.unwrap_or_default();
            let stderr = (&mut self.stderr).await.unwrap_or_default();
            (status, stdout, stderr)
        };
        match tokio::time::timeout(timeout, run).await {
            Ok((Ok(status), stdout, stderr)) => Finished {
                status,
                code: status.code(),
                stdout,
                stderr,
            },
            Ok((Err(e), _, _)) => panic!("waiting for `{}` failed: {e}", self.command_line),
            Err(_) => panic!(
                "`{}` did not finish within {timeout:?} (or a descendant kept its output open)",
                self.command_line
            ),
        }
    }
}

impl Drop for OneShot {
    fn drop(&mut self) {
        if self.reaped {
            kill_group_if_populated(self.pid);
        } else {
            // Not reaped, so the pid (= process group id) cannot have been reused.
            kill_group(self.pid);
        }
        self.stdout.abort();
        self.stderr.abort();
    }
}

/// A child's stdout, shared between the task that reads it and the test that watches it.
#[derive(Clone, Default)]
struct LiveOutput {
    bytes: std::sync::Arc<std::sync::Mutex<Vec<u8>>>,
    changes: std::sync::Arc<tokio::sync::watch::Sender<()>>,
}

impl LiveOutput {
    fn push(&self, chunk: &[u8]) {
        lock(&self.bytes).extend_from_slice(chunk);
        self.changes.send_replace(());
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&lock(&self.bytes)).into_owned()
    }

    fn take(&self) -> Vec<u8> {
        let bytes = std::mem::take(&mut *lock(&self.bytes));
        // Dropping the sender would end every waiter; notify instead.
        self.changes.send_replace(());
        bytes
    }
}

/// The result of [`ZiCommand::run_to_end`] and [`OneShot::wait`].
#[derive(Debug, Clone)]
pub struct Finished {
    /// The exit status.
    pub status: ExitStatus,
    /// The exit code, when it exited.
    pub code: Option<i32>,
    /// Everything it wrote to stdout.
    pub stdout: Vec<u8>,
    /// Everything it wrote to stderr.
    pub stderr: Vec<u8>,
}

impl Finished {
    /// stdout as text (invalid UTF-8 replaced).
    pub fn stdout_text(&self) -> String {
        String::from_utf8_lossy(&self.stdout).into_owned()
    }

    /// stderr as text (invalid UTF-8 replaced).
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
            tail_text(&self.stdout, crate::preview::FRAME_PREVIEW_BYTES),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn run_to_end_and_environment() {
        let finished = ZiCommand::new("/bin/sh")
            .args(["-c", "cat; echo err >&2; exit 4"])
            .run_to_end(b"hello\n", Duration::from_secs(10))
            .await
            .unwrap();
        assert_eq!(finished.code, Some(4));
        assert_eq!(finished.stdout, b"hello\n");
        assert_eq!(finished.stderr_text(), "err\n");

        let dir = tempfile::tempdir().unwrap();
        let finished = ZiCommand::new("/bin/sh")
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

        let err = ZiCommand::new("/bin/sh")
            .args(["-c", "echo started >&2; exec sleep 60"])
            .run_to_end(b"", Duration::from_millis(300))
            .await
            .unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::TimedOut);
        assert!(err.to_string().contains("started"), "{err}");
    }

    #[test]
    fn withheld_env_vars() {
        for name in [
            "ZI_MODE",
            "ZI_AGENT_DIR",
            "OPENAI_API_KEY",
            "ANTHROPIC_API_KEY",
            "GH_TOKEN",
            "https_proxy",
            "DISPLAY",
            "BROWSER",
        ] {
            assert!(is_withheld_env_var(OsStr::new(name)), "{name}");
        }
        for name in ["PATH", "HOME", "SHELL", "LANG", "TERM", "RUST_BACKTRACE"] {
            assert!(!is_withheld_env_var(OsStr::new(name)), "{name}");
        }
    }
}
