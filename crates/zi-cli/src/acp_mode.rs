//! `zi acp` / `--mode acp`: serve the Agent Client Protocol on stdin/stdout (docs/acp.md) until
//! EOF, a signal or a failure. Each session is built by the same start-up as `zi` in its
//! directory (settings, trust without prompting, extensions, subagent profiles, skills, MCP),
//! with the invocation's other flags.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio_util::sync::CancellationToken;
use zi_acp::ConnectionResult;
use zi_acp::factory::{OpenRequest, OpenedSession, SessionFactory};

use crate::args::Args;
use crate::runtime::{self, Embedding};
use crate::signals::SignalState;
use crate::stdio::Streams;

/// Builds ACP sessions from the invocation's arguments.
struct Factory {
    args: Args,
    agent_dir: PathBuf,
    session_dir: Option<PathBuf>,
    runtime: tokio::runtime::Handle,
}

impl Factory {
    fn args_for(&self, request: &OpenRequest) -> Args {
        let mut args = self.args.clone();
        args.prompts.clear();
        args.cwd = Some(request.cwd.clone());
        args.continue_session = false;
        args.new_session = false;
        args.resume = request.resume.clone();
        // The client's additional directories are writable roots of every confined mode.
        args.sandbox_writable_root
            .extend(request.additional_dirs.iter().cloned());
        args
    }
}

impl SessionFactory for Factory {
    fn open(&self, request: OpenRequest) -> Result<OpenedSession, String> {
        let reason = if request.resume.is_some() {
            "resume"
        } else {
            "startup"
        };
        let args = self.args_for(&request);
        let embedding = Embedding {
            file_io: request.file_io,
            mcp_servers: request.mcp_servers,
        };
        let built = runtime::build_with(&args, None, reason, &embedding)
            .map_err(|error| format!("{error:#}"))?;
        // A required server is waited for here (it fails the session); the others connect
        // once the creating response is written.
        if let Some(mcp) = &built.mcp
            && let Err(error) = self.runtime.block_on(mcp.wait_required())
        {
            let session = built.session.clone();
            self.runtime.spawn(async move { session.dispose().await });
            return Err(error);
        }
        let handle = self.runtime.clone();
        let start_mcp = built.mcp.map(|mcp| {
            Box::new(move || {
                let _runtime = handle.enter();
                mcp.start();
            }) as Box<dyn FnOnce() + Send>
        });
        Ok(OpenedSession {
            session: built.session,
            start_mcp,
            floor: built.floor,
        })
    }

    fn agent_dir(&self) -> &Path {
        &self.agent_dir
    }

    fn session_dir(&self) -> Option<&Path> {
        self.session_dir.as_deref()
    }

    fn ephemeral(&self) -> bool {
        self.args.no_session
    }
}

/// `zi acp [FLAGS] login PROVIDER` (or `logout PROVIDER`): the `zi login` of an ACP client's
/// terminal sign-in, with the invocation's agent directory; the exit code.
pub fn login(args: &Args) -> Option<i32> {
    let first = args.prompts.first()?;
    if first != "login" && first != "logout" {
        return None;
    }
    let mut argv: Vec<std::ffi::OsString> = vec!["zi".into()];
    argv.extend(args.prompts.iter().map(Into::into));
    if let Some(dir) = &args.agent_dir {
        argv.push("--agent-dir".into());
        argv.push(dir.into());
    }
    crate::login_cmd::run(&argv)
}

/// Checks what every session would fail on (an unknown `--model`, no agent directory), so a
/// bad invocation exits 1 at once instead of failing each `session/new`.
fn check(args: &Args, process_cwd: &Path) -> Result<PathBuf, String> {
    let agent_dir = runtime::agent_dir(args, process_cwd).map_err(|e| format!("{e:#}"))?;
    if let Some(reference) = &args.model {
        let catalog = zi_ai::catalog::Catalog::load(&agent_dir);
        catalog.resolve(reference).map_err(|e| e.to_string())?;
    }
    Ok(agent_dir)
}

pub async fn run(
    args: &Args,
    streams: Streams,
    cancel: CancellationToken,
    signals: SignalState,
) -> i32 {
    let process_cwd = match std::env::current_dir() {
        Ok(dir) => dir,
        Err(error) => {
            eprintln!("Cannot read the current directory: {error}");
            return 1;
        }
    };
    let agent_dir = match check(args, &process_cwd) {
        Ok(dir) => dir,
        Err(message) => {
            eprintln!("{message}");
            return 1;
        }
    };
    let session_dir = args.session_dir.as_ref().map(|dir| {
        if dir.is_absolute() {
            dir.clone()
        } else {
            process_cwd.join(dir)
        }
    });
    let mut args = args.clone();
    args.session_dir = session_dir.clone();
    let factory = Arc::new(Factory {
        args,
        agent_dir,
        session_dir,
        runtime: tokio::runtime::Handle::current(),
    });
    let result = zi_acp::serve(factory, streams.input, streams.output, cancel).await;
    if let Some(code) = signals.exit_code() {
        return code;
    }
    match result {
        ConnectionResult::Eof | ConnectionResult::Cancelled => 0,
        ConnectionResult::InputError(message)
        | ConnectionResult::OutputError(message)
        | ConnectionResult::SettlementError(message) => {
            eprintln!("{message}");
            1
        }
    }
}
