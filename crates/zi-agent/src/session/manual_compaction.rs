//! `session.compact`: manual compaction as an idle-only operation (the `compacting` activity of
//! docs/rpc.md#the-state-snapshot, docs/rpc.md#images-manual-compaction-and-usage-statistics).
//! Admission is synchronous; the compaction itself runs in its own task through the run's
//! compaction code, and the session is idle again when it ends, whatever happened.

use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;
use zi_protocol::results::CompactResult;

use super::{AgentSession, RunActivity};
use crate::compaction::{self, Limits};
use crate::errors::{Operation, SessionError};

/// How a manual compaction ended, as its caller is told.
pub type CompactOutcome = Result<CompactResult, SessionError>;

type Answer = Box<dyn FnOnce(CompactOutcome) + Send>;

/// An admitted manual compaction, waiting for whoever answers its outcome.
#[must_use = "an admitted compaction is answered through answer_with"]
pub struct CompactionStarted(oneshot::Sender<Answer>);

impl CompactionStarted {
    /// `answer` receives the outcome before the session counts as settled again, so the answer
    /// to the compaction precedes the answer to an interrupt that cancelled it.
    pub fn answer_with(self, answer: impl FnOnce(CompactOutcome) + Send + 'static) {
        let _ = self.0.send(Box::new(answer));
    }
}

impl AgentSession {
    /// Admits a manual compaction (idle only, no queued input, a selected model, something to
    /// compact) and starts it. Nothing is emitted when admission fails.
    pub fn compact(&self, focus: Option<String>) -> Result<CompactionStarted, SessionError> {
        let mut state = self.lock();
        state.require_idle(Operation::Compact)?;
        state.require_empty_queues(Operation::Compact)?;
        let model = state.model.clone().ok_or(SessionError::NoModel)?;
        // Planned here as well, so that nothing to compact is refused before any event.
        let limits = Limits::new(&model, &state.settings.effective().compaction);
        compaction::plan(&state.journal, limits.keep_recent, None)
            .map_err(|error| SessionError::CompactionFailed(error.to_string()))?;
        let operation_id = state.next_operation_id();
        let cancel = CancellationToken::new();
        state.begin_busy(RunActivity::Compacting {
            operation_id,
            cancel: cancel.clone(),
            aborting: false,
        });
        drop(state);
        let (answer, answered) = oneshot::channel::<Answer>();
        let session = self.clone();
        tokio::spawn(async move {
            let outcome =
                super::run::manual_compaction(session.clone(), operation_id, cancel, focus).await;
            session
                .finish_compaction(operation_id, outcome, answered)
                .await;
        });
        Ok(CompactionStarted(answer))
    }

    /// Syncs the journal, returns to idle, answers, then wakes the idle waiters.
    async fn finish_compaction(
        &self,
        operation_id: u64,
        outcome: Result<zi_protocol::event::CompactionResult, SessionError>,
        answered: oneshot::Receiver<Answer>,
    ) {
        {
            let mut state = self.lock();
            if let Err(error) = state.journal.sync() {
                tracing::error!("{error}");
            }
            if matches!(state.activity, RunActivity::Compacting { operation_id: current, .. } if current == operation_id)
            {
                state.activity = RunActivity::Idle;
            }
        }
        // The answer was given at admission, synchronously; a dropped starter answers nobody.
        if let Ok(answer) = answered.await {
            answer(outcome.map(|result| CompactResult {
                tokens_before: result.tokens_before,
                estimated_tokens_after: result.estimated_tokens_after,
                first_kept_entry_id: result.first_kept_entry_id,
            }));
        }
        self.inner
            .settled
            .send_modify(|generation| *generation += 1);
    }
}
