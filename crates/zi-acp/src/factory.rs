//! How the ACP host gets its sessions: the binary builds each one exactly as a `zi` started in
//! that directory would (settings, trust without prompting, extensions, subagent profiles,
//! skills, MCP), through this seam, so this crate never reads argv, the environment or the
//! configuration files itself.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{Map, Value};
use zi_agent::AgentSession;
use zi_agent::file_io::FileIo;
use zi_protocol::approval::{ApprovalPolicy, SandboxMode};

/// What `session/new`, `session/load` and `session/resume` ask for.
pub struct OpenRequest {
    /// Absolute; the session's working directory (a resumed journal's header must agree).
    pub cwd: PathBuf,
    /// Absolute, existing directories: more roots for the file tools and the sandbox.
    pub additional_dirs: Vec<PathBuf>,
    /// The client's MCP servers as zi `mcpServers` definitions, merged over the settings'
    /// servers by name (docs/mcp.md).
    pub mcp_servers: Map<String, Value>,
    /// The journal to open, or `None` for a new session.
    pub resume: Option<PathBuf>,
    /// The client's file system, when it offers one (docs/acp.md#edits-the-editor-can-review);
    /// `None` means the disk.
    pub file_io: Option<Arc<dyn FileIo>>,
}

/// The floor the operator set with flags, `ZI_APPROVALS`/`ZI_SANDBOX` or settings: a mode may
/// only be as strict or stricter (docs/acp.md#modes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OperatorFloor {
    /// The approval policy the operator set; no mode asks less.
    pub policy: ApprovalPolicy,
    /// The operator chose the policy (else it is the default `never`).
    pub policy_chosen: bool,
    /// The sandbox the operator set; no mode confines less.
    pub sandbox: SandboxMode,
}

/// A session the factory built.
pub struct OpenedSession {
    /// The session, built and not yet prompted.
    pub session: AgentSession,
    /// Starts the session's MCP servers; run once the creating response is written.
    pub start_mcp: Option<Box<dyn FnOnce() + Send>>,
    /// The operator's floor for this session's modes.
    pub floor: OperatorFloor,
}

/// Builds sessions for the ACP host (implemented by the `zi` binary).
pub trait SessionFactory: Send + Sync + 'static {
    /// Builds a session (blocking file I/O); the error is the text the client sees.
    fn open(&self, request: OpenRequest) -> Result<OpenedSession, String>;

    /// The agent directory (`<agent-dir>/sessions/` holds the journals).
    fn agent_dir(&self) -> &Path;

    /// `--session-dir`, when journals go elsewhere.
    fn session_dir(&self) -> Option<&Path>;

    /// Sessions are ephemeral (`--no-session`): nothing to list or load.
    fn ephemeral(&self) -> bool;
}
