//! ACP clients nobody here wrote, driving the real `zi acp`: acpx (npm) and a scenario script
//! on the official Python SDK (`agent-client-protocol`, PyPI), both pinned and provisioned by
//! `scripts/acp-test-clients.sh` on first use (`.ci/run` provisions them up front).
//!
//! zi runs behind a tap (`crates/zi-acp/tests/fixtures/acp_tap.py`, standard library only) that
//! copies both directions byte for byte and logs every message, so a test checks every message
//! zi sent against the ACP schema ([`Session::check_schema`]) whatever the client was.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::OnceLock;
use std::time::Duration;

use crate::dirs::AgentDir;
use crate::zi_command::is_withheld_env_var;

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("workspace root")
}

/// The installed clients.
pub struct Clients {
    /// The `acpx` command-line client.
    pub acpx: PathBuf,
    /// The Python interpreter with the ACP SDK installed.
    pub python: PathBuf,
}

/// acpx and the SDK's interpreter (provisioned once per test process).
pub fn clients() -> &'static Clients {
    static CLIENTS: OnceLock<Clients> = OnceLock::new();
    CLIENTS.get_or_init(|| {
        let script = workspace_root().join("scripts/acp-test-clients.sh");
        let output = std::process::Command::new("bash")
            .arg(&script)
            .stderr(Stdio::inherit())
            .output()
            .expect("run scripts/acp-test-clients.sh");
        assert!(
            output.status.success(),
            "scripts/acp-test-clients.sh failed (npm, python3 with venv and access to the npm \
             registry and PyPI are needed)"
        );
        let text = String::from_utf8(output.stdout).expect("paths");
        let mut lines = text.lines();
        Clients {
            acpx: PathBuf::from(lines.next().expect("the acpx path")),
            python: PathBuf::from(lines.next().expect("the python path")),
        }
    })
}

/// A file of `crates/zi-acp/tests/fixtures`.
pub fn fixture(name: &str) -> PathBuf {
    workspace_root()
        .join("crates/zi-acp/tests/fixtures")
        .join(name)
}

/// One scene for external clients: a HOME (acpx keeps its state in `~/.acpx`), a project
/// directory, the tap log, and the command line that starts zi behind the tap.
pub struct Session {
    root: tempfile::TempDir,
    /// The client's `HOME`.
    pub home: PathBuf,
    /// The project directory the client opens.
    pub cwd: PathBuf,
    /// The tap's log of every message between the client and zi.
    pub log: PathBuf,
    zi: Vec<String>,
}

/// What a client run left.
#[derive(Debug)]
pub struct Ran {
    /// The client's exit code, when it exited.
    pub code: Option<i32>,
    /// Everything it wrote to stdout.
    pub stdout: String,
    /// Everything it wrote to stderr.
    pub stderr: String,
}

impl Session {
    /// A scene for `zi acp --agent-dir AGENT` plus `flags`.
    pub fn new(zi: &Path, agent: &AgentDir, flags: &[&str]) -> Session {
        let root = tempfile::Builder::new()
            .prefix("zi-acp-clients-")
            .tempdir()
            .expect("a temporary directory");
        let base = root.path().canonicalize().expect("canonical");
        let home = base.join("home");
        let cwd = base.join("project");
        std::fs::create_dir_all(&home).expect("home");
        std::fs::create_dir_all(&cwd).expect("project");
        let mut command = vec![
            "python3".to_string(),
            fixture("acp_tap.py").display().to_string(),
            zi.display().to_string(),
            "acp".to_string(),
            "--agent-dir".to_string(),
            agent.path().display().to_string(),
        ];
        command.extend(flags.iter().map(|f| f.to_string()));
        Session {
            log: base.join("tap.jsonl"),
            root,
            home,
            cwd,
            zi: command,
        }
    }

    /// The agent command line as acpx's `--agent` takes it (quoted words).
    pub fn agent_line(&self) -> String {
        self.zi
            .iter()
            .map(|word| format!("'{word}'"))
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// The agent command as separate words.
    pub fn agent_words(&self) -> &[String] {
        &self.zi
    }

    /// The scene's root directory (HOME, project and log live below it).
    pub fn root(&self) -> &Path {
        self.root.path()
    }

    fn command(&self, program: &Path) -> tokio::process::Command {
        let mut command = tokio::process::Command::new(program);
        command
            .env_clear()
            .envs(std::env::vars_os().filter(|(name, _)| !is_withheld_env_var(name)))
            .env("HOME", &self.home)
            .env("ACP_TAP_LOG", &self.log)
            .current_dir(&self.cwd)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        command
    }

    /// Runs acpx with `--agent <zi behind the tap>` then `args`.
    pub async fn acpx(&self, args: &[&str], timeout: Duration) -> Ran {
        let mut command = self.command(&clients().acpx);
        command.arg("--agent").arg(self.agent_line()).args(args);
        run(command, timeout).await
    }

    /// Runs the SDK scenario script: `acp_client.py --cwd CWD [flags] SCENARIO -- <zi>`.
    pub async fn python(&self, scenario: &str, flags: &[&str], timeout: Duration) -> Ran {
        let mut command = self.command(&clients().python);
        command
            .arg(fixture("acp_client.py"))
            .arg("--cwd")
            .arg(&self.cwd)
            .args(flags)
            .arg(scenario)
            .arg("--")
            .args(&self.zi);
        run(command, timeout).await
    }

    /// Every message zi sent so far, checked against the ACP schema; returns how many.
    pub fn check_schema(&self) -> usize {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let (sent, problems) = super::validate::check_tap_log(&text);
        assert!(
            problems.is_empty(),
            "zi sent messages that break the ACP schema:\n{}",
            problems.join("\n")
        );
        assert!(sent > 0, "the tap logged no message from zi");
        sent
    }

    /// Every message of the tap log: `(zi sent it, message)`.
    pub fn messages(&self) -> Vec<(bool, serde_json::Value)> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
            .map(|record| (record["dir"] == "out", record["msg"].clone()))
            .collect()
    }
}

async fn run(mut command: tokio::process::Command, timeout: Duration) -> Ran {
    let child = command.spawn().expect("spawn the client");
    match tokio::time::timeout(timeout, child.wait_with_output()).await {
        Ok(Ok(output)) => Ran {
            code: output.status.code(),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        },
        Ok(Err(error)) => panic!("the client failed to run: {error}"),
        Err(_) => panic!("the client did not finish within {timeout:?}"),
    }
}
