//! When compaction cannot help (docs/configuration.md#compaction). A compaction after which the
//! first usage the provider reported is still over the trigger — a system prompt and tool
//! definitions that fill a small window, or a provider that over-reports — would be followed by
//! another one before every prompt and between turns, each paying for a summary that changes
//! nothing. Threshold compaction then waits until the context has grown past that usage by the
//! keep-recent budget (so the next compaction has that much new history to summarise), or the
//! model changes. Overflow recovery still compacts.
//!
//! The rule reads only the context, so it holds the same after `--continue`.

use std::borrow::Borrow;

use zi_ai::Model;
use zi_protocol::message::{AgentMessage, StopReason};

use crate::compaction::Limits;

/// A backoff in force: the latest compaction did not bring the reported usage under the
/// trigger.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    /// The first usage the provider reported after the latest compaction.
    pub tokens_after_compaction: u64,
    /// Threshold compaction waits until the context (with the input about to be sent) exceeds
    /// this.
    pub resume_above: u64,
    /// When that usage was reported (its assistant message's timestamp): which backoff this is,
    /// so it is announced once.
    pub reported_at: i64,
}

/// The backoff the context is under, if any: `messages` and `anchor` as
/// [`crate::journal::Journal::context_view`] gives them (the compaction summary first, usage
/// counted from `anchor`), for the selected `model`.
pub fn backoff<M: Borrow<AgentMessage>>(
    messages: &[M],
    anchor: usize,
    model: &Model,
    limits: &Limits,
) -> Option<Backoff> {
    backoff_for(messages, anchor, (&model.provider, &model.id), limits)
}

fn backoff_for<M: Borrow<AgentMessage>>(
    messages: &[M],
    anchor: usize,
    (provider, id): (&str, &str),
    limits: &Limits,
) -> Option<Backoff> {
    let compacted = matches!(
        messages.first().map(Borrow::borrow),
        Some(AgentMessage::CompactionSummary(_))
    );
    if !compacted {
        return None;
    }
    let first = messages.iter().skip(anchor).find_map(|message| {
        message.borrow().as_assistant().filter(|assistant| {
            !matches!(
                assistant.stop_reason,
                StopReason::Error | StopReason::Aborted
            ) && assistant.usage.tokens() > 0
        })
    })?;
    // Another model's usage says nothing about this one's window.
    if first.provider != provider || first.model != id {
        return None;
    }
    let tokens = first.usage.tokens();
    (tokens > limits.trigger).then(|| Backoff {
        tokens_after_compaction: tokens,
        resume_above: tokens.saturating_add(limits.keep_recent),
        reported_at: first.timestamp,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use zi_protocol::message::{
        AssistantMessage, CompactionSummaryMessage, MessageContent, Usage, UserMessage,
    };

    fn backoff<M: Borrow<AgentMessage>>(
        messages: &[M],
        anchor: usize,
        model: &str,
        limits: &Limits,
    ) -> Option<Backoff> {
        backoff_for(messages, anchor, ("mock", model), limits)
    }

    fn limits() -> Limits {
        Limits {
            reserve: 1000,
            trigger: 3000,
            keep_recent: 1500,
            summary_max_tokens: 500,
        }
    }

    fn summary() -> AgentMessage {
        AgentMessage::CompactionSummary(CompactionSummaryMessage {
            summary: "s".into(),
            tokens_before: 5000,
            estimated_tokens_after: 100,
            timestamp: 1,
        })
    }

    fn user() -> AgentMessage {
        AgentMessage::User(UserMessage {
            content: MessageContent::Text("u".into()),
            timestamp: 2,
        })
    }

    fn reply(model: &str, tokens: u64, stop: StopReason, at: i64) -> AgentMessage {
        AgentMessage::Assistant(AssistantMessage {
            content: Vec::new(),
            api: "openai-completions".into(),
            provider: "mock".into(),
            model: model.into(),
            usage: Usage {
                total_tokens: tokens,
                ..Usage::default()
            },
            stop_reason: stop,
            error_message: None,
            response_id: None,
            timestamp: at,
        })
    }

    #[test]
    fn the_first_report_after_a_compaction_decides() {
        let m1 = "m1";
        // Summary, one kept exchange (before the anchor), then what came after.
        let kept = reply("m1", 9000, StopReason::Stop, 3);
        let over = vec![
            summary(),
            user(),
            kept.clone(),
            user(),
            reply("m1", 0, StopReason::Stop, 4),
            reply("m1", 3500, StopReason::Error, 5),
            reply("m1", 5000, StopReason::Stop, 6),
            reply("m1", 1000, StopReason::Stop, 7),
        ];
        assert_eq!(
            backoff(&over, 3, m1, &limits()),
            Some(Backoff {
                tokens_after_compaction: 5000,
                resume_above: 6500,
                reported_at: 6,
            })
        );
        // Under the trigger: the compaction helped.
        let under = vec![summary(), user(), reply("m1", 2000, StopReason::Stop, 6)];
        assert_eq!(backoff(&under, 1, m1, &limits()), None);
        // Nothing reported since: nothing known yet.
        let pending = vec![summary(), user(), kept];
        assert_eq!(backoff(&pending, 3, m1, &limits()), None);
    }

    #[test]
    fn no_compaction_or_another_model_means_no_backoff() {
        let m1 = "m1";
        let never = vec![user(), reply("m1", 9000, StopReason::Stop, 2)];
        assert_eq!(backoff(&never, 0, m1, &limits()), None);
        let other = vec![summary(), user(), reply("m2", 9000, StopReason::Stop, 2)];
        assert_eq!(backoff(&other, 1, m1, &limits()), None);
        assert!(backoff(&other, 1, "m2", &limits()).is_some());
    }
}
