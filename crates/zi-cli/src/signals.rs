//! SIGHUP, SIGINT and SIGTERM: the first one cancels the mode, and decides the exit code.
//! SIGXFSZ is caught and ignored: a write past the file-size limit (`ulimit -f`) then fails
//! with `EFBIG`, which the journal reports like a full disk, instead of killing zi.
//!
//! The handlers are installed before any configuration is read. Until a mode takes over
//! ([`SignalState::serving`]) nothing would observe the cancellation, so a signal during start-up
//! exits at once with its code instead of being ignored.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};

use tokio::signal::unix::{Signal, SignalKind, signal};
use tokio_util::sync::CancellationToken;
use zi_os::process::lifetime;

/// Records the first signal received (0 while none), and whether a mode is serving.
#[derive(Clone, Default)]
pub struct SignalState(Arc<AtomicI32>, Arc<AtomicBool>);

impl SignalState {
    /// The first of SIGHUP, SIGINT and SIGTERM decides the exit code. Before a mode serves,
    /// nothing would observe the cancellation: zi ends its `!command` processes and exits at
    /// once; afterwards every one cancels the mode.
    fn record(&self, number: i32, cancel: &CancellationToken) {
        let _ = self
            .0
            .compare_exchange(0, number, Ordering::SeqCst, Ordering::SeqCst);
        if !self.1.load(Ordering::SeqCst) {
            zi_os::command::kill_all();
            std::process::exit(128 + number);
        }
        cancel.cancel();
    }

    /// A mode now owns shutdown: later signals cancel it instead of exiting directly.
    pub fn serving(&self) {
        self.1.store(true, Ordering::SeqCst);
    }

    /// The exit code the received signal imposes (128 + signal number).
    pub fn exit_code(&self) -> Option<i32> {
        match self.0.load(Ordering::SeqCst) {
            0 => None,
            number => Some(128 + number),
        }
    }
}

/// Installs the handlers; `cancel` fires on the first signal.
pub fn install(cancel: CancellationToken) -> std::io::Result<SignalState> {
    install_with(cancel, false)
}

/// [`install`], and zi's orphans reaped on SIGCHLD: zi is a subreaper, so processes its
/// children left behind become its children, and each is reaped when it ends
/// (docs/cli.md#processes-zi-starts).
pub fn install_with_reaper(cancel: CancellationToken) -> std::io::Result<SignalState> {
    install_with(cancel, true)
}

fn install_with(cancel: CancellationToken, reap: bool) -> std::io::Result<SignalState> {
    let state = SignalState::default();
    // Without SIGCHLD (not expected on Linux) orphans wait as zombies for the sweep at exit.
    let mut children = reap.then(|| signal(SignalKind::child()).ok()).flatten();
    let mut hangup = signal(SignalKind::hangup())?;
    let mut interrupt = signal(SignalKind::interrupt())?;
    let mut terminate = signal(SignalKind::terminate())?;
    // Caught rather than ignored so children of tools get the default action back at exec.
    let mut file_size = signal(SignalKind::from_raw(libc::SIGXFSZ))?;
    let received = state.clone();
    // One task for them all: a task spawned before `ready` wakes a runtime worker, which then
    // competes with start-up for the cores (docs/performance.md#what-runs-before-ready-and-what-waits).
    tokio::spawn(async move {
        loop {
            let number = tokio::select! {
                Some(()) = hangup.recv() => libc::SIGHUP,
                Some(()) = interrupt.recv() => libc::SIGINT,
                Some(()) = terminate.recv() => libc::SIGTERM,
                Some(()) = file_size.recv() => {
                    tracing::debug!("SIGXFSZ: a write exceeded the file size limit");
                    continue;
                }
                Some(()) = child_exited(&mut children) => {
                    lifetime::reap_orphans();
                    continue;
                }
                else => return,
            };
            received.record(number, &cancel);
        }
    });
    Ok(state)
}

/// The next SIGCHLD; never, without a stream.
async fn child_exited(children: &mut Option<Signal>) -> Option<()> {
    match children {
        Some(stream) => stream.recv().await,
        None => std::future::pending().await,
    }
}
