//! `--mode interactive` (and `zi` with a terminal on both ends): the full-screen view of the
//! session (crates/zi-tui). Diagnostics go to `interactive.log` in the agent directory while the
//! screen is up; the terminal is restored on every way out (zi-tui's guard and panic hook; a
//! signal cancels the loop, which then restores it).

use std::fs::File;

use tokio_util::sync::CancellationToken;

use crate::args::Args;
use crate::runtime::Runtime;
use crate::session_switch::Opener;
use crate::signals::SignalState;
use crate::stdio;

/// The log file under the agent directory.
pub const LOG_FILE: &str = "interactive.log";
/// A log over this size is started afresh.
const LOG_LIMIT: u64 = 8 * 1024 * 1024;

/// The project trust prompt on the terminal (before the runtime loads the project); `None` when
/// the person quit, a signal arrived or the terminal failed (said on stderr).
pub fn ask_trust(
    output: &File,
    cwd: &std::path::Path,
    content: &[String],
    no_color: bool,
    cancel: &CancellationToken,
) -> Option<bool> {
    use zi_tui::trust_prompt::{TrustAnswer, ask};
    match ask(output, cwd, content, zi_tui::Theme::new(no_color), cancel) {
        Ok(TrustAnswer::Trust) => Some(true),
        Ok(TrustAnswer::DontTrust) => Some(false),
        Ok(TrustAnswer::Quit) => None,
        Err(error) => {
            eprintln!("{error}");
            None
        }
    }
}

pub async fn run(
    runtime: Runtime,
    args: &Args,
    prompts: Vec<String>,
    output: File,
    cancel: CancellationToken,
    signals: SignalState,
) -> i32 {
    let session = runtime.session.clone();
    let log = runtime.agent_dir.join(LOG_FILE);
    if std::fs::metadata(&log).is_ok_and(|m| m.len() > LOG_LIMIT) {
        let _ = std::fs::remove_file(&log);
    }
    let diverted = match stdio::divert_diagnostics(&log) {
        Ok(diverted) => Some(diverted),
        Err(error) => {
            eprintln!("Could not open {}: {error}", log.display());
            return 1;
        }
    };
    let agent_dir = runtime.agent_dir.clone();
    let asks_approvals = runtime.asks_approvals;
    // `/new` and `/resume` replace the session; the opener owns every runtime from here on.
    let opener = Opener::new(args, runtime);
    let options = zi_tui::Options {
        agent_dir: Some(agent_dir),
        no_color: zi_tui::Theme::no_color_requested(std::env::var_os("NO_COLOR").as_deref()),
        initial_prompts: prompts,
        sessions: Some(opener.clone()),
        approvals: asks_approvals,
    };
    let result = zi_tui::run(session, output, options, cancel).await;
    if let Some(diverted) = diverted {
        diverted.restore();
    }
    let disposed = opener.finish().await;
    if let Some(code) = signals.exit_code() {
        return code;
    }
    match result {
        Ok(_) if disposed => 0,
        Ok(_) => 1,
        Err(error) => {
            eprintln!("{error}");
            1
        }
    }
}
