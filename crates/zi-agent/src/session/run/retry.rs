//! Automatic retry of retryable provider errors (docs/providers.md#automatic-retry).

use zi_ai::classify;
use zi_os::clock::now_millis;
use zi_protocol::event::{AgentSessionEvent, EntryData};
use zi_protocol::message::{AssistantMessage, StopReason};
use zi_protocol::state::{RetryStatus, RetryWait};

use super::Run;

/// `auto_retry_end.finalError` when an interruption cancels a scheduled retry.
pub const RETRY_CANCELLED: &str = "Retry cancelled";

/// Longest `errorMessage` carried by `auto_retry_start` and the retry state.
pub(super) const MAX_RETRY_ERROR_BYTES: usize = 2_000;

/// What follows a loop pass that ended with a failed assistant message.
pub(super) struct RetryPlan {
    pub(super) attempt: u32,
    max_attempts: u32,
    delay_ms: u64,
    failed_entry_id: String,
    error_message: String,
}

impl Run {
    /// Waits `delay_ms` unless the run is interrupted first; true when the wait completed.
    pub(super) async fn sleep_unless_cancelled(&self, delay_ms: u64) -> bool {
        tokio::select! {
            biased;
            () = self.cancel.cancelled() => false,
            () = tokio::time::sleep(std::time::Duration::from_millis(delay_ms)) => true,
        }
    }

    /// Decides whether the failure that stopped the loop is retried
    /// (docs/providers.md#automatic-retry): an `error` from the selected model, not a context
    /// overflow, classified retryable, with retries enabled and attempts left.
    pub(super) fn plan_retry(&self, attempts: u32) -> Option<RetryPlan> {
        if self.cancel.is_cancelled() || self.journal_failed {
            return None;
        }
        let failed = self.last_assistant.as_ref()?;
        if failed.stop_reason != StopReason::Error {
            return None;
        }
        let error_message = failed.error_message.clone().unwrap_or_default();
        if classify::is_context_overflow(&error_message) || !classify::is_retryable(&error_message)
        {
            return None;
        }
        let state = self.session.lock();
        let from_selected = state
            .model
            .as_ref()
            .is_some_and(|m| m.provider == failed.provider && m.id == failed.model);
        let retry = state.settings.effective().retry;
        if !from_selected || !retry.enabled || attempts >= retry.max_retries {
            return None;
        }
        let failed_entry_id = state.journal.last_failed_assistant()?.id.clone();
        let attempt = attempts + 1;
        Some(RetryPlan {
            attempt,
            max_attempts: retry.max_retries,
            delay_ms: retry.delay_ms(attempt),
            failed_entry_id,
            error_message: zi_protocol::results::clip_utf8(&error_message, MAX_RETRY_ERROR_BYTES)
                .0
                .to_string(),
        })
    }

    /// Journals the retry, announces it, waits (cancellably) and returns whether to run again.
    pub(super) async fn wait_for_retry(&mut self, plan: RetryPlan) -> bool {
        let retry_at = now_millis().saturating_add(plan.delay_ms as i64);
        {
            let mut state = self.session.lock();
            if let Err(error) = state.append_announced(EntryData::Retry {
                failed_entry_id: plan.failed_entry_id.clone(),
                attempt: plan.attempt,
            }) {
                tracing::error!("not retrying: {error}");
                state.emit(AgentSessionEvent::AutoRetryEnd {
                    success: false,
                    attempt: plan.attempt,
                    final_error: Some(error.to_string()),
                });
                return false;
            }
            state.progress.retry = RetryStatus::Waiting(RetryWait::Agent {
                attempt: plan.attempt,
                max_attempts: plan.max_attempts,
                delay_ms: plan.delay_ms,
                retry_at,
                error_message: plan.error_message.clone(),
            });
            state.emit(AgentSessionEvent::AutoRetryStart {
                attempt: plan.attempt,
                max_attempts: plan.max_attempts,
                delay_ms: plan.delay_ms,
                retry_at,
                error_message: plan.error_message,
            });
        }
        self.retry_attempt = Some(plan.attempt);
        let cancelled = !self.sleep_unless_cancelled(plan.delay_ms).await;
        let mut state = self.session.lock();
        state.progress.retry = RetryStatus::Idle;
        if cancelled {
            self.retry_attempt = None;
            state.emit(AgentSessionEvent::AutoRetryEnd {
                success: false,
                attempt: plan.attempt,
                final_error: Some(RETRY_CANCELLED.to_string()),
            });
        }
        !cancelled
    }

    /// Ends a retry in flight whose attempt failed and will not be retried again.
    pub(super) fn end_retry_after_failure(&mut self) {
        let Some(attempt) = self.retry_attempt.take() else {
            return;
        };
        let final_error = self
            .last_assistant
            .as_ref()
            .and_then(|m| m.error_message.clone())
            .unwrap_or_else(|| "Run stopped".to_string());
        self.emit(AgentSessionEvent::AutoRetryEnd {
            success: false,
            attempt,
            final_error: Some(final_error),
        });
    }

    /// `auto_retry_end` at the first assistant message after a retry that is not an error.
    pub(super) fn note_assistant(
        &mut self,
        state: &crate::session::State,
        message: &AssistantMessage,
    ) {
        self.last_assistant = Some(message.clone());
        if message.stop_reason == StopReason::Error {
            return;
        }
        if let Some(attempt) = self.retry_attempt.take() {
            state.emit(AgentSessionEvent::AutoRetryEnd {
                success: message.stop_reason != StopReason::Aborted,
                attempt,
                final_error: None,
            });
        }
    }
}
