//! `session/prompt` and `session/cancel` (docs/acp.md#prompt-turns, docs/acp.md#cancellation), and
//! the prompts that are commands (`/compact`, an extension command).

use std::sync::Arc;
use std::time::Duration;

use agent_client_protocol_schema::v1::{ContentBlock, SessionUpdate, StopReason};
use serde_json::Value;
use zi_agent::errors::SessionError;
use zi_protocol::request::Delivery;

use super::AcpSession;
use crate::jsonrpc::RpcError;
use crate::lock;
use crate::prompt::{self, Input};

/// A cancelled turn answers within this bound, even when a tool ignores the cancellation
/// (zi abandons such a tool after 5 s; its late events are dropped).
pub const CANCEL_BOUND: Duration = Duration::from_secs(1);

/// Why an admission did not happen now.
enum Refused {
    /// The session is busy finishing something (a cancelled turn, an extension command):
    /// the prompt waits for it, then is admitted.
    Busy,
    Error(RpcError),
}

/// A prompt refused for a busy session waits (`continue` during a run is queued, so only an
/// abort, an extension command or a compaction refuses it); any other refusal is answered.
fn refusal(error: SessionError) -> Refused {
    match error {
        SessionError::Busy { .. } => Refused::Busy,
        error => Refused::Error(error.into()),
    }
}

impl AcpSession {
    /// Admits a prompt; its response comes when its work settles. An `Err` is answered at
    /// once.
    pub fn prompt(self: &Arc<Self>, id: Value, blocks: &[ContentBlock]) -> Result<(), RpcError> {
        let input = prompt::convert(blocks)?;
        if let Some(slash) = prompt::slash(&input.text) {
            if slash.name == "compact" {
                return self.compact(id, slash.arguments.to_string());
            }
            if self
                .session
                .extension_commands()
                .iter()
                .any(|c| c.name == slash.name)
            {
                return self.command(id, slash.name.to_string(), slash.arguments.to_string());
            }
        }
        match self.admit(&id, input.clone()) {
            Ok(()) => Ok(()),
            Err(Refused::Error(error)) => Err(error),
            Err(Refused::Busy) => {
                // Admitted once the session is idle again (order among waiting prompts is
                // the order they become admissible).
                let me = self.clone();
                self.link.runtime.spawn(async move {
                    loop {
                        me.session.wait_idle().await;
                        match me.admit(&id, input.clone()) {
                            Ok(()) => return,
                            Err(Refused::Busy) => tokio::task::yield_now().await,
                            Err(Refused::Error(error)) => {
                                me.send_answer(&id, Err(error));
                                return;
                            }
                        }
                    }
                });
                Ok(())
            }
        }
    }

    fn admit(&self, id: &Value, input: Input) -> Result<(), Refused> {
        if self.closed() {
            return Err(Refused::Error(RpcError::session_not_found(&self.id)));
        }
        let (_, admitted) =
            self.session
                .prompt_with(Delivery::Continue, input.text, input.images, |_| {
                    lock(&self.inner).turns.admitting(id.clone());
                });
        match admitted {
            Ok(admission) => {
                lock(&self.inner).turns.admitted(id);
                // The run starts once this is dropped, after the bookkeeping above.
                drop(admission);
                Ok(())
            }
            Err(error) => {
                lock(&self.inner).turns.refused(id);
                Err(refusal(error))
            }
        }
    }

    /// `session/cancel`: stops the model request and the tools as `session.interrupt` does;
    /// the open prompts answer `cancelled` when the run settles, within [`CANCEL_BOUND`].
    /// Nothing to cancel is a no-op.
    pub fn cancel(self: &Arc<Self>) {
        let generation = {
            let mut inner = lock(&self.inner);
            if !inner.turns.busy() {
                return;
            }
            inner.turns.cancel();
            inner.settles
        };
        let session = self.session.clone();
        self.link
            .runtime
            .spawn(async move { session.abort_and_discard().await });
        let me = self.clone();
        self.link.runtime.spawn(async move {
            tokio::time::sleep(CANCEL_BOUND).await;
            if lock(&me.inner).settles == generation {
                me.answer_all_cancelled();
            }
        });
    }

    /// `$/cancel_request` for an open prompt: cancels its turn as `session/cancel` does.
    pub fn cancel_prompt(self: &Arc<Self>, id: &Value) {
        let open = lock(&self.inner).turns.has(id);
        if open {
            self.cancel();
        }
    }

    /// `/compact [instructions]`: a manual compaction; its outcome as an agent message.
    fn compact(&self, id: Value, instructions: String) -> Result<(), RpcError> {
        let focus = (!instructions.is_empty()).then_some(instructions);
        let started = match self.session.compact(focus) {
            Ok(started) => started,
            Err(error) => {
                self.say(&format!("Nothing was compacted: {error}"));
                self.send_answer(&id, Ok(StopReason::EndTurn));
                return Ok(());
            }
        };
        let me = self.me.clone();
        started.answer_with(move |outcome| {
            let Some(acp) = me.upgrade() else { return };
            let text = match outcome {
                Ok(result) => format!(
                    "Compacted: about {} tokens before, {} after.",
                    result.tokens_before, result.estimated_tokens_after
                ),
                Err(error) => format!("Nothing was compacted: {error}"),
            };
            acp.say(&text);
            acp.send_answer(&id, Ok(StopReason::EndTurn));
        });
        Ok(())
    }

    /// An extension command: its feedback as an agent message; no model request.
    fn command(
        self: &Arc<Self>,
        id: Value,
        name: String,
        arguments: String,
    ) -> Result<(), RpcError> {
        let running = self.session.invoke_command(&name, arguments)?;
        let me = self.clone();
        self.link.runtime.spawn(async move {
            match running.await {
                Ok(Some(message)) => me.say(&message),
                Ok(None) => {}
                Err(error) => me.say(&error.to_string()),
            }
            me.send_answer(&id, Ok(StopReason::EndTurn));
        });
        Ok(())
    }

    /// An agent message that is not the model's (command feedback).
    fn say(&self, text: &str) {
        let message_id = uuid::Uuid::new_v4().to_string();
        let update: SessionUpdate = crate::mapper::agent_text(text, &message_id);
        self.send_update(update);
    }
}
