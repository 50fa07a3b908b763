//! Completion watches (docs/rpc.md#completion-watches): the connection's single watch, advanced by
//! prompts that carry a `completionId` and settled by the session's `agent_settled`.

use std::sync::Arc;

use zi_protocol::event::AgentSessionEvent;
use zi_protocol::message::{AgentMessage, AssistantMessage, Usage};
use zi_protocol::request::Delivery;
use zi_protocol::results::{Completion, CompletionResult, clip_utf8};

/// Completion text bound.
pub const MAX_COMPLETION_TEXT: usize = 51_200;
/// Provider error text bound.
pub const MAX_COMPLETION_ERROR: usize = 8_192;

#[derive(Debug, Clone)]
struct Settled {
    revision: u64,
    latest: Option<Arc<AssistantMessage>>,
    message_count: u64,
    usage: Usage,
}

#[derive(Debug, Clone)]
pub struct Watch {
    id: String,
    revision: u64,
    latest: Option<Arc<AssistantMessage>>,
    /// What the assistant messages since the watch was armed or last settled reported.
    usage: Usage,
    settled: Option<Settled>,
}

/// What an idle waiter finds.
pub enum WatchCheck {
    NotActive,
    Settled(CompletionResult),
    Unsettled,
}

#[derive(Debug, Default)]
pub struct CompletionWatches {
    watch: Option<Watch>,
}

impl CompletionWatches {
    /// Bookkeeping at prompt admission, before the delivery runs. Returns the previous watch
    /// so a rejected delivery can restore it.
    pub fn before_prompt(
        &mut self,
        delivery: Delivery,
        completion_id: Option<&str>,
        streaming: bool,
    ) -> Option<Watch> {
        let previous = self.watch.clone();
        let participates = matches!(delivery, Delivery::Direct | Delivery::Continue) || streaming;
        if !participates {
            return previous;
        }
        match completion_id {
            None => self.watch = None,
            Some(id) => {
                if self.watch.as_ref().is_none_or(|w| w.id != id) {
                    self.watch = Some(Watch {
                        id: id.to_string(),
                        revision: 0,
                        latest: None,
                        usage: Usage::default(),
                        settled: None,
                    });
                }
                if let Some(watch) = self.watch.as_mut() {
                    watch.revision += 1;
                    watch.settled = None;
                }
            }
        }
        previous
    }

    pub fn restore(&mut self, previous: Option<Watch>) {
        self.watch = previous;
    }

    /// The revision to report for a prompt that carried `completion_id`.
    pub fn revision_for(&self, completion_id: Option<&str>) -> Option<u64> {
        let id = completion_id?;
        self.watch
            .as_ref()
            .filter(|w| w.id == id)
            .map(|w| w.revision)
    }

    /// The event tap; runs for every event whatever the event mode.
    pub fn observe(&mut self, event: &AgentSessionEvent, message_count: u64) {
        let Some(watch) = self.watch.as_mut() else {
            return;
        };
        match event {
            AgentSessionEvent::MessageEnd {
                message: AgentMessage::Assistant(message),
            } => {
                watch.usage.add(&message.usage);
                watch.latest = Some(Arc::new(message.clone()));
            }
            AgentSessionEvent::AgentSettled => {
                watch.settled = Some(Settled {
                    revision: watch.revision,
                    latest: watch.latest.clone(),
                    message_count,
                    usage: std::mem::take(&mut watch.usage),
                });
            }
            _ => {}
        }
    }

    pub fn check(&self, completion_id: &str) -> WatchCheck {
        match &self.watch {
            Some(watch) if watch.id == completion_id => match &watch.settled {
                Some(settled) => WatchCheck::Settled(project(settled)),
                None => WatchCheck::Unsettled,
            },
            _ => WatchCheck::NotActive,
        }
    }
}

fn project(settled: &Settled) -> CompletionResult {
    CompletionResult {
        completion_revision: settled.revision,
        message_count: settled.message_count,
        completion: settled.latest.as_ref().map(|latest| {
            let text = latest.text();
            let (clipped, omitted) = clip_utf8(&text, MAX_COMPLETION_TEXT);
            Completion {
                text: clipped.to_string(),
                stop_reason: latest.stop_reason,
                original_bytes: text.len() as u64,
                omitted_bytes: omitted as u64,
                error: latest
                    .error_message
                    .as_deref()
                    .map(|e| clip_utf8(e, MAX_COMPLETION_ERROR).0.to_string()),
            }
        }),
        usage: settled.usage.clone(),
    }
}

pub fn not_active(id: &str) -> String {
    format!("Completion watch is not active: {id}")
}

pub fn no_settled_observation(id: &str) -> String {
    format!("Completion watch has no settled observation: {id}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn revisions_advance_only_when_participating() {
        let mut watches = CompletionWatches::default();
        watches.before_prompt(Delivery::Direct, Some("c"), false);
        assert_eq!(watches.revision_for(Some("c")), Some(1));
        // steer while idle does not participate
        watches.before_prompt(Delivery::Steer, Some("c"), false);
        assert_eq!(watches.revision_for(Some("c")), Some(1));
        // follow-up while streaming does
        watches.before_prompt(Delivery::FollowUp, Some("c"), true);
        assert_eq!(watches.revision_for(Some("c")), Some(2));
        // a no-id direct prompt invalidates
        watches.before_prompt(Delivery::Direct, None, false);
        assert!(matches!(watches.check("c"), WatchCheck::NotActive));
    }
}
