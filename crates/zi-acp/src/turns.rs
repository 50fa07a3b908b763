//! Which `session/prompt` requests are open and when each is answered (docs/acp.md#prompt-turns).
//!
//! A prompt sent while the session is idle starts a run; one sent while a run is active joins
//! it as zi's follow-up queue does. Each gets its own response: when its follow-up is delivered
//! (the run goes on with it), the prompts before it are answered with how their work ended, and
//! the last ones when the run settles. A cancelled turn answers every open prompt `cancelled`,
//! exactly once.

use agent_client_protocol_schema::v1::StopReason;
use serde_json::Value;
use zi_protocol::message::{AssistantMessage, StopReason as ZiStop};

use crate::jsonrpc::RpcError;

#[derive(Debug, Clone, PartialEq)]
enum State {
    /// Being admitted right now (the admission may still fail).
    Admitting,
    /// Waiting in zi's follow-up queue under this queue id.
    Queued(u64),
    /// Its input was delivered: its work runs now.
    Active,
    /// Dropped from the queue by a cancel: answers `cancelled` when the run settles.
    Discarded,
}

#[derive(Debug, Clone)]
struct Open {
    id: Value,
    state: State,
    /// Its user message was journaled (and not echoed back to the client who sent it).
    seen: bool,
}

/// How a prompt ends.
pub type Answer = (Value, Result<StopReason, RpcError>);

/// The open prompts of one session.
#[derive(Debug, Default)]
pub struct Turns {
    open: Vec<Open>,
    /// How the last assistant message of the run stopped, with its error text.
    last: Option<(ZiStop, Option<String>)>,
    /// `session/cancel` (or `$/cancel_request`) asked for the running turn to stop.
    cancelling: bool,
}

fn refusal(error: &str) -> bool {
    zi_ai::classify::is_refusal(error)
}

impl Turns {
    /// A prompt is being admitted (called under the session lock, before the admission).
    pub fn admitting(&mut self, id: Value) {
        self.open.push(Open {
            id,
            state: State::Admitting,
            seen: false,
        });
    }

    /// The admission succeeded. A prompt that started a run works now; one that was queued
    /// learned its queue id from the queue update its admission emitted.
    pub fn admitted(&mut self, id: &Value) {
        if let Some(open) = self
            .open
            .iter_mut()
            .find(|o| o.id == *id && o.state == State::Admitting)
        {
            open.state = State::Active;
        }
    }

    /// The admission failed: the prompt is answered by its error instead.
    pub fn refused(&mut self, id: &Value) {
        self.open
            .retain(|o| !(o.id == *id && o.state == State::Admitting));
    }

    /// Whether the prompt `id` is open.
    pub fn has(&self, id: &Value) -> bool {
        self.open.iter().any(|o| o.id == *id)
    }

    /// Whether any prompt is open.
    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.open.is_empty()
    }

    /// Whether a prompt is working or waiting (not being admitted).
    pub fn busy(&self) -> bool {
        self.open.iter().any(|o| o.state != State::Admitting)
    }

    /// `session/cancel`: the running turn stops; its queued prompts are dropped by zi.
    pub fn cancel(&mut self) {
        if self.busy() {
            self.cancelling = true;
        }
    }

    #[cfg(test)]
    pub fn cancelling(&self) -> bool {
        self.cancelling
    }

    /// The follow-up queue now holds `follow_up` (queue ids): an admitting prompt learns its
    /// id; a queued prompt that left the queue was delivered (the prompts before it are done)
    /// or, while cancelling, dropped.
    pub fn queue_changed(&mut self, follow_up: &[u64]) -> Vec<Answer> {
        let owned: Vec<u64> = self
            .open
            .iter()
            .filter_map(|o| match o.state {
                State::Queued(q) => Some(q),
                _ => None,
            })
            .collect();
        if let Some(newest) = follow_up
            .iter()
            .copied()
            .filter(|q| !owned.contains(q))
            .max()
            && let Some(open) = self.open.iter_mut().find(|o| o.state == State::Admitting)
        {
            open.state = State::Queued(newest);
        }
        let mut answers = Vec::new();
        let left: Vec<usize> = (0..self.open.len())
            .filter(|&i| matches!(self.open[i].state, State::Queued(q) if !follow_up.contains(&q)))
            .collect();
        if left.is_empty() {
            return answers;
        }
        if self.cancelling {
            for i in left {
                self.open[i].state = State::Discarded;
            }
            return answers;
        }
        // The run goes on with the delivered input: the work before it is done.
        let done = self.stop_so_far();
        let (finished, rest): (Vec<Open>, Vec<Open>) = std::mem::take(&mut self.open)
            .into_iter()
            .partition(|o| o.state == State::Active);
        answers.extend(finished.into_iter().map(|o| (o.id, done.clone())));
        self.open = rest;
        for open in &mut self.open {
            if matches!(open.state, State::Queued(q) if !follow_up.contains(&q)) {
                open.state = State::Active;
            }
        }
        answers
    }

    /// A user message was journaled: true when it is an open prompt's own (not echoed).
    pub fn claim_user_message(&mut self) -> bool {
        match self
            .open
            .iter_mut()
            .find(|o| o.state == State::Active && !o.seen)
        {
            Some(open) => {
                open.seen = true;
                true
            }
            None => false,
        }
    }

    /// An assistant message ended.
    pub fn assistant_ended(&mut self, message: &AssistantMessage) {
        self.last = Some((message.stop_reason, message.error_message.clone()));
    }

    /// How the work so far ended, were it to end now.
    fn stop_so_far(&self) -> Result<StopReason, RpcError> {
        if self.cancelling {
            return Ok(StopReason::Cancelled);
        }
        match &self.last {
            None => Ok(StopReason::EndTurn),
            Some((stop, error)) => match stop {
                ZiStop::Stop | ZiStop::ToolUse => Ok(StopReason::EndTurn),
                ZiStop::Length => Ok(StopReason::MaxTokens),
                ZiStop::Aborted => Ok(StopReason::Cancelled),
                ZiStop::Error => {
                    let text = error
                        .clone()
                        .unwrap_or_else(|| "The model request failed".into());
                    if refusal(&text) {
                        Ok(StopReason::Refusal)
                    } else {
                        Err(RpcError::internal(text))
                    }
                }
            },
        }
    }

    /// The run settled: every working or dropped prompt is answered. Returns the answers and
    /// whether prompts are still queued (a run that failed left them: the caller starts the
    /// next run with them).
    pub fn settled(&mut self) -> (Vec<Answer>, bool) {
        let stop = self.stop_so_far();
        let mut answers = Vec::new();
        let mut kept = Vec::new();
        for open in std::mem::take(&mut self.open) {
            match open.state {
                State::Active => answers.push((open.id, stop.clone())),
                State::Discarded => answers.push((open.id, Ok(StopReason::Cancelled))),
                State::Admitting | State::Queued(_) => kept.push(open),
            }
        }
        self.open = kept;
        self.cancelling = false;
        self.last = None;
        let stranded = self
            .open
            .iter()
            .any(|o| matches!(o.state, State::Queued(_)));
        (answers, stranded)
    }

    /// Answers every open prompt `cancelled` now (a cancel that outlasted its bound, close,
    /// shutdown); later events of the run are the caller's to drop.
    pub fn cancel_all(&mut self) -> Vec<Answer> {
        let (admitting, open): (Vec<Open>, Vec<Open>) = std::mem::take(&mut self.open)
            .into_iter()
            .partition(|o| o.state == State::Admitting);
        self.open = admitting;
        self.cancelling = false;
        self.last = None;
        open.into_iter()
            .map(|o| (o.id, Ok(StopReason::Cancelled)))
            .collect()
    }
}

#[cfg(test)]
#[path = "turns_tests.rs"]
mod tests;
