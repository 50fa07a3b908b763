//! SIGHUP, SIGINT and SIGTERM: the first one cancels the mode, and decides the exit code.
//! SIGXFSZ is caught and ignored: a write past the file-size limit (`ulimit -f`) then fails
//! with `EFBIG`, which the journal reports like a full disk, instead of killing zi.
//!
//! The handlers are installed before any configuration is read. Until a mode takes over
//! ([`SignalState::serving`]) nothing would observe the cancellation, so a signal during start-up
//! exits at once with its code instead of being ignored.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};

use tokio::signal::unix::{SignalKind, signal};
use tokio_util::sync::CancellationToken;

/// Records the first signal received (0 while none), and whether a mode is serving.
#[derive(Clone, Default)]
pub struct SignalState(Arc<AtomicI32>, Arc<AtomicBool>);

impl SignalState {
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
    let state = SignalState::default();
    for (kind, number) in [
        (SignalKind::hangup(), libc::SIGHUP),
        (SignalKind::interrupt(), libc::SIGINT),
        (SignalKind::terminate(), libc::SIGTERM),
    ] {
        let mut stream = signal(kind)?;
        let state = state.clone();
        let cancel = cancel.clone();
        tokio::spawn(async move {
            if stream.recv().await.is_some() {
                let _ = state
                    .0
                    .compare_exchange(0, number, Ordering::SeqCst, Ordering::SeqCst);
                if !state.1.load(Ordering::SeqCst) {
                    zi_os::command::kill_all();
                    std::process::exit(128 + number);
                }
                cancel.cancel();
            }
        });
    }
    // Caught rather than ignored so children of tools get the default action back at exec.
    let mut file_size = signal(SignalKind::from_raw(libc::SIGXFSZ))?;
    tokio::spawn(async move {
        while file_size.recv().await.is_some() {
            tracing::debug!("SIGXFSZ: a write exceeded the file size limit");
        }
    });
    Ok(state)
}
