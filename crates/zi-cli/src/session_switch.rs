//! The interactive mode's `/new` and `/resume` (zi-tui's [`SessionOpener`]): the replacement
//! is built by the same start-up as `zi` (a new journal, or none under `--no-session`) and
//! `zi -r FILE` (the journal opened and its model and thinking level restored), so it journals
//! exactly as those do. The opener owns the runtimes it built: the one it replaces is disposed
//! once the new one exists (its extensions get `session_shutdown` with the reason `new` or
//! `resume`, the new session's `session_start` the same), and the last one when the view ends
//! ([`Opener::finish`]).

use std::sync::{Arc, Mutex};

use tokio::task::JoinHandle;
use zi_agent::AgentSession;
use zi_os::sync::lock;
use zi_tui::{SessionOpener, SessionTarget};

use crate::runtime::{self, Runtime};
use crate::startup::{SessionChoice, SessionOptions};

pub struct Opener {
    /// The invocation's options; a replacement changes only the session choice.
    options: SessionOptions,
    current: Mutex<Runtime>,
    /// Disposals of replaced sessions still running.
    retired: Mutex<Vec<JoinHandle<bool>>>,
}

impl std::fmt::Debug for Opener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Opener").finish_non_exhaustive()
    }
}

impl Opener {
    pub fn new(options: SessionOptions, runtime: Runtime) -> Arc<Opener> {
        Arc::new(Opener {
            options,
            current: Mutex::new(runtime),
            retired: Mutex::new(Vec::new()),
        })
    }

    /// Waits for the replaced sessions' disposals, then disposes the current session; false if
    /// any disposal timed out.
    pub async fn finish(&self) -> bool {
        let retired: Vec<JoinHandle<bool>> = std::mem::take(&mut *lock(&self.retired));
        let mut disposed = true;
        for handle in retired {
            disposed &= handle.await.unwrap_or(false);
        }
        let session = lock(&self.current).session.clone();
        disposed & crate::dispose(&session).await
    }

    /// The options that start `target` the way the command line would: `/new` is a new
    /// journal (none under `--no-session`), `/resume` opens the chosen one.
    fn options_for(&self, target: &SessionTarget) -> SessionOptions {
        let mut options = self.options.clone();
        options.choice = match target {
            SessionTarget::New if options.choice == SessionChoice::Ephemeral => {
                SessionChoice::Ephemeral
            }
            SessionTarget::New => SessionChoice::New,
            SessionTarget::Resume(path) => SessionChoice::Resume(options.absolute(path)),
        };
        options
    }
}

impl SessionOpener for Opener {
    fn open(&self, target: SessionTarget) -> Result<AgentSession, String> {
        let reason = match target {
            SessionTarget::New => "new",
            SessionTarget::Resume(_) => "resume",
        };
        // No trust prompt: the start-up asked about this directory already (the picker offers
        // only its sessions).
        let built = runtime::build(&self.options_for(&target), None, reason)
            .map_err(|e| format!("{e:#}"))?;
        let session = built.session.clone();
        let old = std::mem::replace(&mut *lock(&self.current), built);
        let disposal = tokio::spawn(async move {
            let disposed = crate::dispose_for(&old.session, reason).await;
            drop(old);
            disposed
        });
        lock(&self.retired).push(disposal);
        Ok(session)
    }
}
