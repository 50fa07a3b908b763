//! `--mode interactive` (and `zi` with a terminal on both ends): the full-screen view of the
//! session (crates/zi-tui). Diagnostics go to `interactive.log` in the agent directory from
//! before the runtime is built (so no start-up warning lands under the screen) until the view
//! ends; the warnings among them show in the view as notices (crate::warnings). The terminal is
//! restored on every way out (zi-tui's guard and panic hook; a signal cancels the loop, which
//! then restores it).

use std::fs::File;

use tokio_util::sync::CancellationToken;

use crate::runtime::Runtime;
use crate::session_switch::Opener;
use crate::signals::SignalState;
use crate::startup::SessionOptions;
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
            crate::warnings::warn(&format!(
                "the trust prompt could not use the terminal: {error}"
            ));
            None
        }
    }
}

/// Journals from this size on are previewed from their tail while they open; smaller ones
/// open in a few milliseconds.
const PREVIEW_FROM: u64 = 4 * 1024 * 1024;
/// How much of a previewed journal's end is read (a screen of messages, with room to spare).
const PREVIEW_BYTES: u64 = 256 * 1024;

/// The terminal before the session exists: diagnostics in the log, as while the view is up, and
/// for a large resumed journal its last messages on the screen (zi_tui::preview).
pub struct EarlyScreen {
    preview: Option<zi_tui::preview::Preview>,
    diverted: stdio::Diverted,
}

impl EarlyScreen {
    /// Gives the terminal and stderr back (start-up failed, or the person quit at the trust
    /// prompt): the warnings kept for the view, and what is printed next, are seen.
    pub fn end(self) {
        drop(self.preview);
        self.diverted.restore();
        crate::warnings::to_stderr();
    }
}

/// Points diagnostics at the log before anything of the runtime is built, and shows the last
/// screen of the journal this invocation resumes while it opens, when the journal is large
/// enough for the open to be felt. `None` when the log cannot be used (no agent directory:
/// start-up reports why); `run` then tries again.
pub fn early_screen(
    options: &SessionOptions,
    output: &File,
    no_color: bool,
) -> Option<EarlyScreen> {
    let diverted = divert_to_log(&options.agent_dir).ok()?;
    crate::warnings::keep();
    let preview = preview(options, output, no_color);
    Some(EarlyScreen { preview, diverted })
}

/// The preview of a large resumed journal; `None` when there is none to show (no journal, a
/// small one, or the terminal could not be used; the open then reports the rest).
fn preview(
    options: &SessionOptions,
    output: &File,
    no_color: bool,
) -> Option<zi_tui::preview::Preview> {
    let cwd = crate::runtime::working_dir(options).ok()?;
    let journal = crate::session_open::existing_journal(options, &cwd)?;
    if std::fs::metadata(&journal).ok()?.len() < PREVIEW_FROM {
        return None;
    }
    let messages = zi_journal::memory::Journal::tail_presentation(&journal, PREVIEW_BYTES);
    match zi_tui::preview::show(output, &messages, zi_tui::Theme::new(no_color)) {
        Ok(preview) => Some(preview),
        Err(error) => {
            tracing::warn!("no preview of {}: {error}", journal.display());
            None
        }
    }
}

/// Points diagnostics at the log under `agent_dir` (created if need be: the history lives
/// there too), started afresh when it grew too large.
fn divert_to_log(agent_dir: &std::path::Path) -> anyhow::Result<stdio::Diverted> {
    std::fs::create_dir_all(agent_dir)
        .map_err(|error| anyhow::anyhow!("Could not create {}: {error}", agent_dir.display()))?;
    let log = agent_dir.join(LOG_FILE);
    if std::fs::metadata(&log).is_ok_and(|m| m.len() > LOG_LIMIT) {
        let _ = std::fs::remove_file(&log);
    }
    stdio::divert_diagnostics(&log)
        .map_err(|error| anyhow::anyhow!("Could not open {}: {error}", log.display()))
}

pub async fn run(
    runtime: Runtime,
    options: SessionOptions,
    prompts: Vec<String>,
    (output, early): (File, Option<EarlyScreen>),
    cancel: CancellationToken,
    signals: SignalState,
) -> i32 {
    let session = runtime.session.clone();
    // The early diversion goes on; a preview stays up until the view has taken over.
    let (preview, diverted) = match early {
        Some(EarlyScreen { preview, diverted }) => (preview, diverted),
        None => match divert_to_log(&runtime.agent_dir) {
            Ok(diverted) => (None, diverted),
            Err(error) => {
                eprintln!("{error}");
                return 1;
            }
        },
    };
    let notices = zi_tui::NoticeFeed::default();
    crate::warnings::show_in(&notices);
    let agent_dir = runtime.agent_dir.clone();
    let asks_approvals = runtime.asks_approvals;
    // `/new` and `/resume` replace the session; the opener owns every runtime from here on.
    let opener = Opener::new(options, runtime);
    // The endpoints were checked when the runtime was built.
    let login = crate::runtime::auth_endpoints()
        .ok()
        .map(|endpoints| zi_tui::LoginSetup {
            agent_dir: agent_dir.clone(),
            endpoints,
            open_url: std::sync::Arc::new(crate::browser::open),
        });
    let options = zi_tui::Options {
        login,
        agent_dir: Some(agent_dir),
        no_color: zi_tui::Theme::no_color_requested(std::env::var_os("NO_COLOR").as_deref()),
        initial_prompts: prompts,
        sessions: Some(opener.clone()),
        approvals: asks_approvals,
        notices: Some(notices),
    };
    let result = zi_tui::run(session, output, options, cancel).await;
    drop(preview);
    crate::warnings::to_stderr();
    diverted.restore();
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
