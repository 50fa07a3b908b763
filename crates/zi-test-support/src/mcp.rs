//! Real MCP servers for the black-box tests: the official Python SDK in a virtual environment
//! that `scripts/mcp-test-venv.sh` provisions on first use (shared by parallel tests through a
//! file lock; `.ci/run` pre-provisions it), and the test server `tests/fixtures/mcp/server.py`.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::OnceLock;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt as _, BufReader};

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("workspace root")
}

/// The virtual environment's interpreter (provisioned once per test process).
pub fn python() -> PathBuf {
    static PYTHON: OnceLock<PathBuf> = OnceLock::new();
    PYTHON
        .get_or_init(|| {
            let script = workspace_root().join("scripts/mcp-test-venv.sh");
            let output = std::process::Command::new("bash")
                .arg(&script)
                .stderr(Stdio::inherit())
                .output()
                .expect("run scripts/mcp-test-venv.sh");
            assert!(
                output.status.success(),
                "scripts/mcp-test-venv.sh failed (python3 with venv and access to PyPI are needed)"
            );
            PathBuf::from(String::from_utf8(output.stdout).expect("path").trim())
        })
        .clone()
}

/// The test server script.
pub fn server_script() -> PathBuf {
    workspace_root().join("crates/zi-cli/tests/fixtures/mcp/server.py")
}

/// The `command` array of a stdio server definition.
pub fn stdio_command(marker_dir: &Path) -> Vec<String> {
    vec![
        python().display().to_string(),
        server_script().display().to_string(),
        "stdio".to_string(),
        marker_dir.display().to_string(),
    ]
}

/// A Streamable HTTP test server on a loopback port, killed when dropped.
pub struct HttpServer {
    child: tokio::process::Child,
    /// The server's MCP endpoint (`http://127.0.0.1:PORT/mcp`).
    pub url: String,
}

impl HttpServer {
    /// Starts the server; its `whoami` tool accepts exactly `authorization`.
    pub async fn start(marker_dir: &Path, authorization: &str) -> HttpServer {
        let mut child = tokio::process::Command::new(python())
            .arg(server_script())
            .arg("http")
            .arg(marker_dir)
            .arg(authorization)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("start the HTTP MCP server");
        let stdout = child.stdout.take().expect("stdout");
        let mut lines = BufReader::new(stdout).lines();
        let port = tokio::time::timeout(Duration::from_secs(120), async {
            while let Some(line) = lines.next_line().await.expect("read the server's stdout") {
                if let Some(port) = line.strip_prefix("port ") {
                    return port.trim().to_string();
                }
            }
            panic!("the HTTP MCP server exited before listening");
        })
        .await
        .expect("the HTTP MCP server listens within 120 s");
        // Keep draining stdout so a later log line never meets a closed pipe.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        HttpServer {
            child,
            url: format!("http://127.0.0.1:{port}/mcp"),
        }
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
    }
}
