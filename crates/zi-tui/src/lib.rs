//! zi's interactive terminal mode: a full-screen view of one `AgentSession`, subscribed to the
//! same events the RPC and one-shot modes see and driving the session through the same calls
//! (`prompt`, `abort`, `select_model`, …) — no second agent loop and no RPC hop.
//!
//! The event loop merges three sources into one channel: session events (from a subscriber that
//! only clones and sends, as subscribers must be quick), terminal input (a thread reading
//! crossterm events) and the results of background actions. Renders are coalesced: an event
//! marks the screen dirty and a frame is drawn at most every [`FRAME_INTERVAL`], so a stream of
//! tiny deltas costs one repaint per frame, not one per delta.

mod app;
mod approval_prompt;
mod command_view;
mod completion;
pub mod composer;
mod highlight;
mod history;
mod keys;
mod login;
mod markdown;
mod model_picker;
mod notices;
mod picker;
pub mod preview;
mod session_picker;
mod sessions;
mod slash;
mod status;
mod table;
mod task_pane;
mod terminal;
mod theme;
mod tool_row;
pub mod transcript;
pub mod trust_prompt;
pub mod view;
mod wrap;

use std::fs::File;
use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use ratatui::Terminal;
use ratatui::backend::{Backend, CrosstermBackend};
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};
use tokio_util::sync::CancellationToken;
use zi_agent::AgentSession;

pub use app::{App, Options, UiEvent};
pub use history::HISTORY_FILE;
pub use login::{LoginSetup, LoginUpdate};
pub use notices::NoticeFeed;
pub use sessions::{SessionOpener, SessionTarget};
pub use theme::Theme;
pub use wrap::Logical;

/// The shortest time between two frames (about 60 per second).
pub const FRAME_INTERVAL: Duration = Duration::from_millis(16);
/// While something runs, the spinner and retry countdown advance at this pace.
const ANIMATION_INTERVAL: Duration = Duration::from_millis(100);
/// Events applied between two looks at the clock, so a flood of deltas cannot starve frames.
const EVENT_BATCH: usize = 4096;

/// Why the interactive session ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// The user quit (Ctrl+C twice, Ctrl+D, `/quit`).
    Quit,
    /// The cancellation token fired (SIGTERM, SIGHUP, SIGINT from outside).
    Cancelled,
}

/// Why the interactive mode could not run.
#[derive(Debug, thiserror::Error)]
pub enum TuiError {
    /// Reading or drawing the terminal failed.
    #[error("terminal: {0}")]
    Io(#[from] std::io::Error),
}

/// Runs the interactive session on the terminal behind `output` until the user quits or
/// `cancel` fires. The terminal is restored before this returns, whatever happened (unless a
/// [`preview::Preview`] holds it: then when that drops).
pub async fn run(
    session: AgentSession,
    output: File,
    options: Options,
    cancel: CancellationToken,
) -> Result<Exit, TuiError> {
    let (sender, mut receiver) = unbounded_channel();
    if let Some(notices) = &options.notices {
        notices.attach(sender.clone());
    }
    let subscription = sessions::subscribe(&session, &sender);
    let guard = terminal::TerminalGuard::enter(&output);
    let result = match guard {
        Ok(guard) => {
            let stop = Arc::new(AtomicBool::new(false));
            read_input(sender.clone(), stop.clone());
            let result = serve(
                (&session, subscription),
                output,
                &options,
                sender,
                &mut receiver,
                &cancel,
            )
            .await;
            stop.store(true, Ordering::SeqCst);
            drop(guard);
            result
        }
        Err(error) => Err(error.into()),
    };
    session.unsubscribe(subscription);
    result
}

async fn serve(
    (session, subscription): (&AgentSession, u64),
    output: File,
    options: &Options,
    sender: UnboundedSender<UiEvent>,
    receiver: &mut UnboundedReceiver<UiEvent>,
    cancel: &CancellationToken,
) -> Result<Exit, TuiError> {
    let mut terminal = Terminal::new(CrosstermBackend::new(terminal::screen_writer(output)))?;
    terminal.clear()?;
    let mut app = App::new(session.clone(), options, sender);
    app.switch.follow(session, subscription);
    let exit = event_loop(&mut terminal, &mut app, receiver, cancel).await;
    if options.approvals {
        // As when an RPC client goes away: pending requests resolve `cancelled`, journaled.
        app.session.disconnect_approvals();
    }
    exit
}

/// Reads terminal input on its own thread (crossterm's reads block) until `stop`.
fn read_input(sender: UnboundedSender<UiEvent>, stop: Arc<AtomicBool>) {
    let spawned = std::thread::Builder::new()
        .name("zi-tui-input".to_string())
        .spawn(move || {
            while !stop.load(Ordering::SeqCst) {
                match crossterm::event::poll(Duration::from_millis(50)) {
                    Ok(false) => continue,
                    Ok(true) => match crossterm::event::read() {
                        Ok(event) => {
                            if sender.send(UiEvent::Terminal(event)).is_err() {
                                return;
                            }
                        }
                        Err(error) => {
                            tracing::warn!("terminal input: {error}");
                            return;
                        }
                    },
                    Err(error) => {
                        tracing::warn!("terminal input: {error}");
                        return;
                    }
                }
            }
        });
    if let Err(error) = spawned {
        tracing::error!("could not start the input thread: {error}");
    }
}

/// Applies events and draws coalesced frames until the app quits or `cancel` fires.
pub async fn event_loop<B: Backend + Write>(
    terminal: &mut Terminal<B>,
    app: &mut App,
    receiver: &mut UnboundedReceiver<UiEvent>,
    cancel: &CancellationToken,
) -> Result<Exit, TuiError> {
    let started = Instant::now();
    let mut last_frame: Option<Instant> = None;
    let mut dirty = true;
    loop {
        if app.quit {
            return Ok(Exit::Quit);
        }
        let now = Instant::now();
        if dirty {
            let due = last_frame.map_or(now, |at| at + FRAME_INTERVAL);
            if now >= due {
                app.refresh();
                app.frame = (started.elapsed().as_millis() / ANIMATION_INTERVAL.as_millis()) as u64;
                terminal.draw(|frame| view::draw(frame, app))?;
                if let Some(text) = app.clipboard.take() {
                    copy_to_clipboard(terminal.backend_mut(), &text)?;
                }
                last_frame = Some(now);
                dirty = false;
            }
        }
        let wake = if dirty {
            last_frame.map(|at| at + FRAME_INTERVAL)
        } else if app.animating() {
            Some(now + ANIMATION_INTERVAL)
        } else {
            None
        };
        tokio::select! {
            biased;
            () = cancel.cancelled() => return Ok(Exit::Cancelled),
            event = receiver.recv() => {
                let Some(event) = event else { return Ok(Exit::Quit) };
                app.handle(event);
                for _ in 0..EVENT_BATCH {
                    match receiver.try_recv() {
                        Ok(event) => app.handle(event),
                        Err(_) => break,
                    }
                }
                dirty = true;
            }
            () = sleep_until(wake), if wake.is_some() => {
                dirty = true;
            }
        }
    }
}

async fn sleep_until(at: Option<Instant>) {
    if let Some(at) = at {
        tokio::time::sleep_until(at.into()).await;
    }
}

/// OSC 52: the terminal puts the text on the system clipboard (also through ssh and tmux).
fn copy_to_clipboard<W: Write>(out: &mut W, text: &str) -> std::io::Result<()> {
    use base64::Engine as _;
    let encoded = base64::engine::general_purpose::STANDARD.encode(text);
    write!(out, "\x1b]52;c;{encoded}\x07")?;
    out.flush()
}
