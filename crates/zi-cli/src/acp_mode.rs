//! `zi acp` / `--mode acp`: serve the Agent Client Protocol on stdin/stdout (docs/acp.md) until
//! EOF, a signal or a failure. Each session is built by the same start-up as `zi` in its
//! directory (settings, trust without prompting, extensions, subagent profiles, skills, MCP),
//! with the invocation's other flags.

use std::path::Path;
use std::sync::Arc;

use tokio_util::sync::CancellationToken;
use zi_acp::factory::{OpenRequest, OpenedSession, SessionFactory};

use crate::runtime::{self, Embedding};
use crate::signals::SignalState;
use crate::startup::{SessionChoice, SessionOptions};
use crate::stdio::Streams;

/// Builds ACP sessions from the invocation's options.
struct Factory {
    /// The invocation's options, `--session-dir` made absolute.
    options: SessionOptions,
    runtime: tokio::runtime::Handle,
}

impl Factory {
    /// The options of a session in the client's directory: a new journal (none under
    /// `--no-session`), or the one `session/load` names.
    fn options_for(&self, request: &OpenRequest) -> SessionOptions {
        let mut options = self.options.clone();
        options.cwd = Some(options.absolute(&request.cwd));
        options.choice = match &request.resume {
            Some(path) => SessionChoice::Resume(options.absolute(path)),
            None if options.choice == SessionChoice::Ephemeral => SessionChoice::Ephemeral,
            None => SessionChoice::New,
        };
        // The client's additional directories are writable roots of every confined mode.
        let roots: Vec<_> = (request.additional_dirs.iter())
            .map(|dir| options.absolute(dir))
            .collect();
        options.sandbox.writable_roots.extend(roots);
        options
    }
}

impl SessionFactory for Factory {
    fn open(&self, request: OpenRequest) -> Result<OpenedSession, String> {
        let reason = if request.resume.is_some() {
            "resume"
        } else {
            "startup"
        };
        let options = self.options_for(&request);
        let embedding = Embedding {
            file_io: request.file_io,
            mcp_servers: request.mcp_servers,
        };
        let built = runtime::build_with(&options, None, reason, &embedding)
            .map_err(|error| format!("{error:#}"))?;
        // A required server is waited for here (it fails the session); the others connect
        // once the creating response is written.
        if let Some(mcp) = &built.mcp
            && let Err(error) = self.runtime.block_on(mcp.wait_required())
        {
            let session = built.session.clone();
            self.runtime.spawn(async move { session.dispose().await });
            return Err(error.to_string());
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
        &self.options.agent_dir
    }

    fn session_dir(&self) -> Option<&Path> {
        self.options.session_dir.as_deref()
    }

    fn ephemeral(&self) -> bool {
        self.options.choice == SessionChoice::Ephemeral
    }
}

/// Checks what every session would fail on (an unknown `--model`), so a bad invocation exits 1
/// at once instead of failing each `session/new` (the other flags were checked by
/// crate::startup::resolve).
fn check(options: &SessionOptions) -> Result<(), zi_ai::catalog::ModelLookupError> {
    if let Some(reference) = &options.model {
        let catalog = zi_ai::catalog::Catalog::load(&options.agent_dir);
        catalog.resolve(reference)?;
    }
    Ok(())
}

pub async fn run(
    mut options: SessionOptions,
    streams: Streams,
    cancel: CancellationToken,
    signals: SignalState,
) -> i32 {
    if let Err(message) = check(&options) {
        eprintln!("{message}");
        return 1;
    }
    // One journal directory for every session, relative to zi's directory rather than to
    // each session's cwd.
    let session_dir = options.session_dir.take().map(|dir| options.absolute(&dir));
    options.session_dir = session_dir;
    let factory = Arc::new(Factory {
        options,
        runtime: tokio::runtime::Handle::current(),
    });
    let result = zi_acp::serve(factory, streams.input, streams.output, cancel).await;
    if let Some(code) = signals.exit_code() {
        return code;
    }
    match result.failure() {
        Some(message) => {
            eprintln!("{message}");
            1
        }
        None => 0,
    }
}
