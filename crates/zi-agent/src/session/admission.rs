//! Admission of prompts and the run lifecycle: start, interrupt, dispose, wait for idle
//! (docs/rpc.md#admission-while-busy, docs/rpc.md#sessioninterrupt).

use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;
use zi_protocol::image::ImageContent;
use zi_protocol::request::Delivery;
use zi_protocol::state::QueuedDelivery;

use super::{AgentSession, RunActivity, State, wait_for_settle};
use crate::errors::{Operation, SessionError};

/// Releases an admitted run. The run emits nothing until this is dropped, which lets the RPC
/// connection write the prompt's response before the run's first event.
pub struct RunStarter(Option<oneshot::Sender<()>>);

impl Drop for RunStarter {
    fn drop(&mut self) {
        if let Some(sender) = self.0.take() {
            let _ = sender.send(());
        }
    }
}

/// A user prompt: its expanded text and the images that follow it.
pub(super) struct UserInput {
    pub(super) text: String,
    pub(super) images: Vec<ImageContent>,
}

/// Images (of a prompt or a custom message) need a model whose `input` includes `image`. A
/// queue-only delivery with no model selected is admitted as in v1 (it needs no model); a
/// model selected later that lacks image input receives the providers' placeholder text
/// instead (docs/rpc.md).
pub(super) fn require_image_input(state: &State, has_images: bool) -> Result<(), SessionError> {
    match &state.model {
        Some(model)
            if has_images && !model.input.contains(&zi_protocol::state::InputKind::Image) =>
        {
            Err(SessionError::ModelRejectsImages(format!(
                "{}/{}",
                model.provider, model.id
            )))
        }
        _ => Ok(()),
    }
}

/// What a successful prompt admission did.
pub struct PromptAdmission {
    /// Present when the prompt started a run.
    pub starter: Option<RunStarter>,
}

impl AgentSession {
    /// Admits a text prompt (docs/rpc.md#admission-while-busy).
    pub fn prompt(
        &self,
        delivery: Delivery,
        text: String,
    ) -> Result<PromptAdmission, SessionError> {
        self.prompt_with(delivery, text, Vec::new(), |_| ()).1
    }

    /// Admits a prompt whose images follow its text. With images, the selected model must
    /// accept image input (else [`SessionError::ModelRejectsImages`], nothing queued).
    pub fn prompt_with_images(
        &self,
        delivery: Delivery,
        text: String,
        images: Vec<ImageContent>,
    ) -> Result<PromptAdmission, SessionError> {
        self.prompt_with(delivery, text, images, |_| ()).1
    }

    /// Admits a prompt after running `before` under the session lock with whether a run is
    /// active. Nothing is emitted between `before` and the admission decision, which is what
    /// completion-watch bookkeeping needs.
    pub fn prompt_with<R>(
        &self,
        delivery: Delivery,
        text: String,
        images: Vec<ImageContent>,
        before: impl FnOnce(bool) -> R,
    ) -> (R, Result<PromptAdmission, SessionError>) {
        let text = self.inner.expander.expand(&text);
        let mut state = self.lock();
        let observed = before(state.is_streaming());
        let result = self.admit(&mut state, delivery, UserInput { text, images });
        (observed, result)
    }

    fn admit(
        &self,
        state: &mut State,
        delivery: Delivery,
        input: UserInput,
    ) -> Result<PromptAdmission, SessionError> {
        let queue = match delivery {
            Delivery::Steer => Some(QueuedDelivery::Steer),
            Delivery::FollowUp => Some(QueuedDelivery::FollowUp),
            // `continue` during a run is a follow-up.
            Delivery::Continue
                if matches!(
                    state.activity,
                    RunActivity::Running {
                        aborting: false,
                        ..
                    }
                ) =>
            {
                Some(QueuedDelivery::FollowUp)
            }
            Delivery::Direct | Delivery::Continue => None,
        };
        if let Some(queue) = queue {
            state.require_queueable()?;
            require_image_input(state, !input.images.is_empty())?;
            return self.enqueue(state, queue, input);
        }
        state.require_idle(Operation::Prompt)?;
        if state.model.is_none() {
            return Err(SessionError::NoModel);
        }
        require_image_input(state, !input.images.is_empty())?;
        Ok(PromptAdmission {
            starter: Some(self.start_run(state, Some(input))),
        })
    }

    fn enqueue(
        &self,
        state: &mut State,
        delivery: QueuedDelivery,
        input: UserInput,
    ) -> Result<PromptAdmission, SessionError> {
        state
            .queues
            .push(delivery, input.text, input.images)
            .map_err(|_| SessionError::QueueCapacity)?;
        state.emit_queue_update();
        Ok(PromptAdmission { starter: None })
    }

    /// Starts a run with the first queued follow-up when the session is idle and that input
    /// is user input. A run that ends with an error leaves follow-ups queued (they wait for the
    /// next prompt's run); a client that owns each queued input (ACP, docs/acp.md) goes on with
    /// them at once instead. `None` when busy, without a model, or with nothing to deliver.
    pub fn run_queued_follow_up(&self) -> Option<RunStarter> {
        let mut state = self.lock();
        if state.require_idle(Operation::Prompt).is_err() || state.model.is_none() {
            return None;
        }
        let input = state.queues.pop_front_user(QueuedDelivery::FollowUp)?;
        state.emit_queue_update();
        let input = UserInput {
            text: input.text,
            images: input.images,
        };
        Some(self.start_run(&mut state, Some(input)))
    }

    pub(super) fn start_run(&self, state: &mut State, prompt: Option<UserInput>) -> RunStarter {
        let run_id = state.next_run_id();
        let cancel = CancellationToken::new();
        state.begin_busy(RunActivity::Running {
            run_id,
            cancel: cancel.clone(),
            aborting: false,
        });
        // `next_turn` custom messages precede the next prompt (not a continuation).
        let held = if prompt.is_some() {
            std::mem::take(&mut state.next_turn_custom)
        } else {
            Vec::new()
        };
        let (gate_tx, gate_rx) = oneshot::channel();
        let session = self.clone();
        tokio::spawn(async move {
            let _ = gate_rx.await;
            super::run::run(session, run_id, cancel, held, prompt).await;
        });
        RunStarter(Some(gate_tx))
    }

    /// Interrupts the active run, extension command or manual compaction and returns once it
    /// has settled (docs/rpc.md#sessioninterrupt).
    /// Queued user input is kept.
    pub async fn abort(&self) -> Result<(), SessionError> {
        let mut settled = self.inner.settled.subscribe();
        let target = {
            let mut state = self.lock();
            if !state.begin_abort()? {
                return Ok(());
            }
            state.settle_target()
        };
        wait_for_settle(&mut settled, target, || !self.lock().is_busy()).await;
        Ok(())
    }

    /// Drops every queued input, then aborts (shutdown, EOF and signals).
    pub async fn abort_and_discard(&self) {
        self.lock().discard_queued_input();
        let _ = self.abort().await;
    }

    /// Aborts, discards queued input and refuses every later operation.
    /// Tools are shut down (background tasks killed, their outcomes appended) before the session
    /// refuses operations.
    pub async fn dispose(&self) {
        self.dispose_for("quit").await;
    }

    /// [`AgentSession::dispose`], telling the extensions why (`session_shutdown{reason}`).
    pub async fn dispose_for(&self, reason: &str) {
        self.abort_and_discard().await;
        if let Some(host) = self.inner.extensions.get() {
            host.shutdown_for(reason).await;
        }
        self.inner.tools.shutdown().await;
        self.lock().activity = RunActivity::Disposed;
    }

    /// Returns once the session is idle: immediately if it is, else at the next settle.
    pub async fn wait_idle(&self) {
        let mut settled = self.inner.settled.subscribe();
        let target = {
            let state = self.lock();
            if !state.is_busy() {
                return;
            }
            state.settle_target()
        };
        wait_for_settle(&mut settled, target, || !self.lock().is_busy()).await;
    }
}
