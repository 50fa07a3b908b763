//! `/new` and `/resume`: replacing the session in place (docs/interactive.md#sessions). The binary
//! builds the replacement exactly as its start-up would (`zi`, `zi -r FILE`) through a
//! [`SessionOpener`]; the view then follows the new session and rebuilds its transcript from
//! the journal, as `-c`/`-r` do.
//!
//! The old session's events may still sit in the event channel when the new one takes over, so
//! the switch is two steps: unsubscribe the old session and post [`UiEvent::Switched`]; events
//! ahead of that marker belong to the old session and are dropped, and the new session is
//! subscribed when the marker is handled, so all of its events come after it.

use std::path::PathBuf;
use std::sync::Arc;

use tokio::sync::mpsc::UnboundedSender;
use zi_agent::AgentSession;

use crate::app::{App, UiEvent};
use crate::transcript::Item;

/// What replaces the session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SessionTarget {
    /// A fresh session (a new journal, or an ephemeral one under `--no-session`).
    New,
    /// The session journaled in this file.
    Resume(PathBuf),
}

/// Builds replacement sessions. The opener owns what it built: it disposes the session it
/// replaces (after the new one exists) and the last one when zi exits.
pub trait SessionOpener: Send + Sync + std::fmt::Debug {
    /// The new session, or why it could not be opened (the current one stays).
    fn open(&self, target: SessionTarget) -> Result<AgentSession, String>;
}

/// Subscribes the view to `session`'s events (the subscriber only clones and sends).
pub(crate) fn subscribe(session: &AgentSession, sender: &UnboundedSender<UiEvent>) -> u64 {
    let sender = sender.clone();
    session.subscribe(Arc::new(move |event, _| {
        let _ = sender.send(UiEvent::Session(Box::new(event.clone())));
    }))
}

/// The view's hold on its session: the subscription, and a replacement on its way in.
#[derive(Default)]
pub(crate) struct Switch {
    opener: Option<Arc<dyn SessionOpener>>,
    /// The current session and the view's subscription to it.
    subscription: Option<(AgentSession, u64)>,
    /// Set between unsubscribing the old session and handling the marker.
    incoming: Option<(AgentSession, SessionTarget)>,
}

impl Switch {
    pub(crate) fn new(opener: Option<Arc<dyn SessionOpener>>) -> Switch {
        Switch {
            opener,
            subscription: None,
            incoming: None,
        }
    }

    /// Takes over the subscription `run` made at start-up.
    pub(crate) fn follow(&mut self, session: &AgentSession, subscription: u64) {
        self.subscription = Some((session.clone(), subscription));
    }

    /// Whether the old session's events are still draining.
    pub(crate) fn draining(&self) -> bool {
        self.incoming.is_some()
    }
}

impl Drop for Switch {
    fn drop(&mut self) {
        if let Some((session, id)) = self.subscription.take() {
            session.unsubscribe(id);
        }
    }
}

/// `/new` and `/resume FILE`: opens the replacement and starts the switch.
pub(crate) fn replace(app: &mut App, target: SessionTarget) {
    let Some(opener) = app.switch.opener.clone() else {
        app.transcript.push(Item::Error(
            "Sessions cannot be replaced in this view".to_string(),
        ));
        return;
    };
    if app.busy() {
        app.transcript.push(Item::Error(
            "Wait for the run to finish (Esc interrupts) before switching sessions".to_string(),
        ));
        return;
    }
    if let Some((session, id)) = app.switch.subscription.take() {
        session.unsubscribe(id);
    }
    match opener.open(target.clone()) {
        Ok(session) => {
            app.switch.incoming = Some((session, target));
            let _ = app.tasks().send(UiEvent::Switched);
        }
        Err(message) => {
            // The old session stays: follow it again.
            let id = subscribe(&app.session, app.tasks());
            app.switch.subscription = Some((app.session.clone(), id));
            app.transcript.push(Item::Error(message));
        }
    }
}

/// The marker arrived: the old session's events are drained; the new session takes over.
pub(crate) fn switched(app: &mut App) {
    let Some((session, target)) = app.switch.incoming.take() else {
        return;
    };
    let id = subscribe(&session, app.tasks());
    app.switch.subscription = Some((session.clone(), id));
    app.adopt(session);
    let notice = match target {
        SessionTarget::New => "New session".to_string(),
        SessionTarget::Resume(path) => format!("Resumed {}", path.display()),
    };
    app.transcript.push(Item::Notice(notice));
}
