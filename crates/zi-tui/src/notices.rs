//! Lines from outside the view for its transcript: zi's warnings (a broken settings file, an
//! ignored MCP server, a server that failed to start …), which in the interactive mode go to
//! `interactive.log` and nowhere else on the terminal (docs/interactive.md#the-terminal). The
//! feed keeps what arrives before the view exists and hands it over when the view starts; each
//! distinct line is shown once.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::mpsc::UnboundedSender;

use crate::app::UiEvent;
use crate::transcript::Item;

#[derive(Default)]
struct Feed {
    waiting: Vec<String>,
    view: Option<UnboundedSender<UiEvent>>,
    shown: HashSet<String>,
}

/// A cloneable handle: whoever has a line pushes it; the view takes them as notices.
#[derive(Clone, Default)]
pub struct NoticeFeed {
    feed: Arc<Mutex<Feed>>,
}

impl std::fmt::Debug for NoticeFeed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("NoticeFeed")
    }
}

impl NoticeFeed {
    fn lock(&self) -> MutexGuard<'_, Feed> {
        // A panic elsewhere while holding it leaves only a list of lines behind.
        self.feed
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Shows `line` in the view (once there is one); a line shown before is dropped.
    pub fn push(&self, line: String) {
        let mut feed = self.lock();
        if !feed.shown.insert(line.clone()) {
            return;
        }
        match &feed.view {
            Some(view) => {
                let _ = view.send(UiEvent::Notice(Item::Notice(line)));
            }
            None => feed.waiting.push(line),
        }
    }

    /// The view is up: what waited goes to it, in order, and so does what comes next.
    pub(crate) fn attach(&self, view: UnboundedSender<UiEvent>) {
        let mut feed = self.lock();
        for line in std::mem::take(&mut feed.waiting) {
            let _ = view.send(UiEvent::Notice(Item::Notice(line)));
        }
        feed.view = Some(view);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn notices(receiver: &mut tokio::sync::mpsc::UnboundedReceiver<UiEvent>) -> Vec<String> {
        let mut out = Vec::new();
        while let Ok(event) = receiver.try_recv() {
            if let UiEvent::Notice(Item::Notice(text)) = event {
                out.push(text);
            }
        }
        out
    }

    #[test]
    fn lines_wait_for_the_view_and_each_is_shown_once() {
        let feed = NoticeFeed::default();
        feed.push("Warning: one".into());
        feed.push("Warning: two".into());
        feed.push("Warning: one".into());
        let (sender, mut receiver) = tokio::sync::mpsc::unbounded_channel();
        feed.clone().attach(sender);
        assert_eq!(notices(&mut receiver), ["Warning: one", "Warning: two"]);
        feed.push("Warning: three".into());
        feed.push("Warning: two".into());
        assert_eq!(notices(&mut receiver), ["Warning: three"]);
    }
}
