//! zi's built-in tools (docs/tools.md): `read`, `write`, `edit`, `bash` with
//! background tasks, `task_output`, `kill_task` and `update_plan`.
//!
//! Every tool returns failures as results: the text says what went wrong and what to do, and
//! the details follow zi's one result convention ([`ToolOutput::failure`]: `outcome` `error`
//! and a `code` of docs/tools.md; [`ToolOutput::success`]: `outcome` `success` plus
//! tool-specific, bounded fields).

mod approval_subjects;
mod bash;
pub mod client_files;
mod edit;
mod files;
mod plan;
mod read;
mod sandboxing;
mod shell;
mod tasks;
mod truncate;
mod write;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use zi_agent::{Tool, ToolOutput};

pub use bash::{BashArgs, BashTool};
pub use edit::{EditArgs, EditTool, Replacement};
pub use plan::{PlanArgs, PlanItem, UpdatePlanTool};
pub use read::{ReadArgs, ReadTool};
pub use tasks::{KillTaskArgs, KillTaskTool, TaskOutputArgs, TaskOutputTool, TaskRegistry};
pub use write::{WriteArgs, WriteTool};

/// Longest accepted `path` argument, in bytes.
pub const MAX_PATH_BYTES: usize = 4096;

/// Shared configuration of the tools of one session.
#[derive(Debug, Clone)]
pub struct ToolEnv {
    /// The session working directory: relative paths resolve against it and commands run in it.
    pub cwd: PathBuf,
    /// The shell for `bash`: `$SHELL`, default `/bin/bash`.
    pub shell: PathBuf,
    /// The session's sandbox (docs/approvals.md#the-sandbox); mode `full` (v1) unless configured.
    pub sandbox: zi_sandbox::SandboxHandle,
    /// Where `read`, `write` and `edit` find text: the disk unless a client offers its files.
    pub files: client_files::ClientFiles,
}

impl ToolEnv {
    /// The environment of tools at `cwd`: the shell `bash` runs (`shell`, `/bin/bash` when it is
    /// unset or empty) and the sandbox of mode `full` until [`ToolEnv::with_sandbox`].
    pub fn new(cwd: PathBuf, shell: Option<PathBuf>) -> Self {
        ToolEnv {
            cwd,
            shell: shell
                .filter(|s| !s.as_os_str().is_empty())
                .unwrap_or_else(|| PathBuf::from("/bin/bash")),
            sandbox: zi_sandbox::SandboxHandle::default(),
            files: client_files::ClientFiles::default(),
        }
    }

    /// The same environment reading and writing through a client's file system (ACP).
    pub fn with_file_io(mut self, io: Option<Arc<dyn zi_agent::file_io::FileIo>>) -> Self {
        self.files = client_files::ClientFiles::new(io);
        self
    }

    /// The same environment with the session's sandbox.
    pub fn with_sandbox(mut self, sandbox: zi_sandbox::SandboxHandle) -> Self {
        self.sandbox = sandbox;
        self
    }

    /// Resolves a path argument: `~` is the home directory, relative paths are under the cwd.
    pub fn resolve(&self, path: &str) -> PathBuf {
        let home = std::env::var_os("HOME").map(PathBuf::from);
        if path == "~" {
            if let Some(home) = home {
                return home;
            }
        } else if let Some(rest) = path.strip_prefix("~/")
            && let Some(home) = home
        {
            return home.join(rest);
        }
        let path = Path::new(path);
        if path.is_absolute() {
            path.to_path_buf()
        } else {
            self.cwd.join(path)
        }
    }
}

/// The default tool set, in the order the system prompt lists it.
pub fn default_tools(env: ToolEnv) -> Vec<Arc<dyn Tool>> {
    let tasks = TaskRegistry::new();
    vec![
        Arc::new(ReadTool::new(env.clone())),
        Arc::new(BashTool::new(env.clone(), tasks.clone())),
        Arc::new(EditTool::new(env.clone())),
        Arc::new(WriteTool::new(env)),
        Arc::new(TaskOutputTool::new(tasks.clone())),
        Arc::new(KillTaskTool::new(tasks)),
        Arc::new(UpdatePlanTool),
    ]
}

/// Validates a path argument: non-empty, no NUL, at most [`MAX_PATH_BYTES`].
pub(crate) fn check_path(path: &str) -> Result<(), ToolOutput> {
    if path.is_empty() || path.contains('\0') || path.len() > MAX_PATH_BYTES {
        return Err(ToolOutput::failure(
            "invalid_path",
            format!("Invalid path: must be 1 to {MAX_PATH_BYTES} bytes without NUL characters"),
        ));
    }
    Ok(())
}
