//! zi's `Warning:` lines (a broken settings file, an ignored MCP server, a bad auth.json entry,
//! …). Every one goes to stderr; in the interactive mode stderr is `interactive.log` while the
//! screen is up (docs/interactive.md#the-terminal), so the lines are also kept for the view,
//! which shows each once as a notice. A start-up that fails before the view exists prints them
//! again on the restored terminal, with the error.

use std::sync::{Mutex, MutexGuard};

use zi_os::sync::lock;
use zi_tui::NoticeFeed;

/// Where warnings go besides stderr.
enum Sink {
    /// Nowhere else: stderr is the terminal (or the mode's own stderr).
    Stderr,
    /// Kept until the view starts (stderr is the log).
    Kept(Vec<String>),
    /// The view's notices.
    View(NoticeFeed),
}

static SINK: Mutex<Sink> = Mutex::new(Sink::Stderr);

fn sink() -> MutexGuard<'static, Sink> {
    lock(&SINK)
}

/// Writes `Warning: {message}` to stderr (and keeps it for the view, see the module comment).
pub fn warn(message: &str) {
    let line = format!("Warning: {message}");
    eprintln!("{line}");
    match &mut *sink() {
        Sink::Stderr => {}
        Sink::Kept(lines) => lines.push(line),
        Sink::View(feed) => feed.push(line),
    }
}

/// stderr is the log from now on: keep the warnings for the view.
pub fn keep() {
    *sink() = Sink::Kept(Vec::new());
}

/// The view is about to start: what was kept, and what comes next, goes to `feed`.
pub fn show_in(feed: &NoticeFeed) {
    let mut sink = sink();
    if let Sink::Kept(lines) = &mut *sink {
        for line in lines.drain(..) {
            feed.push(line);
        }
    }
    *sink = Sink::View(feed.clone());
}

/// stderr is the terminal again: warnings kept for a view that never came are printed there
/// (the person saw them nowhere else); later ones go only to stderr.
pub fn to_stderr() {
    let kept = std::mem::replace(&mut *sink(), Sink::Stderr);
    if let Sink::Kept(lines) = kept {
        for line in lines {
            eprintln!("{line}");
        }
    }
}
