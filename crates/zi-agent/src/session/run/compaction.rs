//! Automatic compaction inside a run: threshold and overflow recovery
//! (docs/configuration.md#when-zi-compacts).

use std::sync::Arc;

use zi_ai::Model;
use zi_ai::classify;
use zi_os::clock::now_millis;
use zi_protocol::event::{AgentSessionEvent, CompactionOutcome, CompactionResult};
use zi_protocol::message::AgentMessage;
use zi_protocol::state::{CompactionReason, RetryStatus, RetryWait};

use super::retry::MAX_RETRY_ERROR_BYTES;
use super::{Pending, Run, RunStopped};
use crate::compaction::{self, Limits, STALE, SummaryError};
use crate::compaction_backoff;
use crate::context_usage::{context_usage, estimate_message};
use crate::errors::SessionError;

/// Automatic compactions allowed per run.
const MAX_AUTO_COMPACTIONS: u32 = 4;

/// How a compaction that was not cancelled ended (its `compaction_end` outcome).
enum CompactionEnded {
    Completed(CompactionResult),
    Failed(String),
}

/// Runs the manual compaction `session.compact` admitted as `operation_id`
/// (docs/rpc.md#images-manual-compaction-and-usage-statistics): the planner, summary, events and
/// commit of automatic compaction, with reason `manual` and the client's focus. Outside any run:
/// no `agent_*` events.
pub(in crate::session) async fn manual(
    session: crate::session::AgentSession,
    operation_id: u64,
    cancel: tokio_util::sync::CancellationToken,
    focus: Option<String>,
) -> Result<CompactionResult, SessionError> {
    let mut run = Run::new(session, cancel);
    match run
        .compact_once(
            operation_id,
            CompactionReason::Manual,
            None,
            focus.as_deref(),
        )
        .await
    {
        Err(RunStopped) => Err(SessionError::CompactionCancelled),
        Ok(CompactionEnded::Failed(message)) => Err(SessionError::CompactionFailed(message)),
        Ok(CompactionEnded::Completed(result)) => Ok(result),
    }
}

pub(super) fn estimate_pending(pending: &[Pending]) -> u64 {
    pending
        .iter()
        .map(|item| match item {
            Pending::Message(message) => estimate_message(message),
            Pending::Custom(message) => message.content_bytes().div_ceil(4),
        })
        .sum()
}

impl Run {
    /// Compaction limits and current context tokens, when compaction applies.
    pub(super) fn compaction_budget(&self) -> Option<(Limits, u64)> {
        let state = self.session.lock();
        let settings = state.settings.effective().compaction;
        let model = state.model.as_deref()?;
        if !settings.enabled || model.context_window == 0 {
            return None;
        }
        let (messages, anchor) = state.journal.context_view();
        let tokens = match context_usage(Some(model), &messages, anchor) {
            zi_protocol::state::ContextUsage::Measured { tokens, .. }
            | zi_protocol::state::ContextUsage::Estimated { tokens, .. } => tokens,
            zi_protocol::state::ContextUsage::Unavailable { .. } => return None,
        };
        Some((Limits::new(model, &settings), tokens))
    }

    pub(super) async fn pre_run_compaction(&mut self, input: &[Pending]) -> Result<(), RunStopped> {
        self.recover_previous_overflow().await?;
        self.maybe_threshold_compact(estimate_pending(input)).await
    }

    /// Threshold compaction when the context plus `extra` tokens exceeds the trigger.
    pub(super) async fn maybe_threshold_compact(&mut self, extra: u64) -> Result<(), RunStopped> {
        if self.threshold_suppressed || self.auto_compactions >= MAX_AUTO_COMPACTIONS {
            return Ok(());
        }
        let Some((limits, tokens)) = self.compaction_budget() else {
            return Ok(());
        };
        if tokens + extra <= limits.trigger || self.backing_off(&limits, tokens + extra) {
            return Ok(());
        }
        if !self.compact(CompactionReason::Threshold, None).await? {
            self.threshold_suppressed = true;
        }
        Ok(())
    }

    /// Whether threshold compaction holds back at `tokens` (over the trigger) because the latest
    /// compaction could not help ([`crate::compaction_backoff`]); announces the backoff the
    /// first time it holds one back.
    fn backing_off(&self, limits: &Limits, tokens: u64) -> bool {
        let mut state = self.session.lock();
        let Some(model) = state.model.clone() else {
            return false;
        };
        let backoff = {
            let (messages, anchor) = state.journal.context_view();
            compaction_backoff::backoff(&messages, anchor, &model, limits)
        };
        let Some(backoff) = backoff.filter(|b| tokens <= b.resume_above) else {
            return false;
        };
        if state.progress.backoff_announced != Some(backoff.reported_at) {
            state.progress.backoff_announced = Some(backoff.reported_at);
            state.emit(AgentSessionEvent::CompactionBackoff {
                tokens,
                trigger: limits.trigger,
                tokens_after_compaction: backoff.tokens_after_compaction,
                resume_above: backoff.resume_above,
            });
        }
        true
    }

    /// A run that starts right after an overflowed one compacts first (no retry).
    pub(super) async fn recover_previous_overflow(&mut self) -> Result<(), RunStopped> {
        let failed = {
            let state = self.session.lock();
            state
                .journal
                .last_failed_assistant()
                .and_then(|entry| match &entry.data {
                    zi_protocol::event::EntryData::Message {
                        message: AgentMessage::Assistant(a),
                    } if a
                        .error_message
                        .as_deref()
                        .is_some_and(classify::is_context_overflow) =>
                    {
                        Some(entry.id.clone())
                    }
                    _ => None,
                })
        };
        if let Some(id) = failed
            && self.compaction_budget().is_some()
        {
            self.compact(CompactionReason::Overflow, Some(id)).await?;
        }
        Ok(())
    }

    /// Overflow recovery inside a run: exclude the failed message, compact, and let the turn
    /// loop continue. Once per run; true when the loop should continue.
    pub(super) async fn recover_overflow(&mut self) -> Result<bool, RunStopped> {
        if self.compaction_budget().is_none() {
            return Ok(false);
        }
        if self.overflow_recoveries >= 1 {
            tracing::warn!("{}", compaction::SECOND_OVERFLOW);
            return Ok(false);
        }
        if self.auto_compactions >= MAX_AUTO_COMPACTIONS {
            return Ok(false);
        }
        self.overflow_recoveries += 1;
        let failed = self
            .session
            .lock()
            .journal
            .last_failed_assistant()
            .map(|entry| entry.id.clone());
        self.compact(CompactionReason::Overflow, failed).await
    }

    /// Samples the summary, retrying transient failures with the run's retry policy and the
    /// `summarization_retry_*` events (docs/configuration.md#compaction).
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn summarize_with_retry(
        &self,
        operation_id: u64,
        reason: CompactionReason,
        model: &Arc<Model>,
        plan: &compaction::Plan,
        limits: &Limits,
        thinking: zi_protocol::ThinkingLevel,
        auth: zi_ai::credentials::RequestAuth,
        focus: Option<&str>,
    ) -> Result<String, SummaryError> {
        let idle_timeout = self.session.inner.idle_timeout;
        let fast_mode = self.session.lock().settings.codex_fast_mode();
        let mut attempt = 0u32;
        loop {
            let result = compaction::summarize(
                model,
                plan,
                limits,
                thinking,
                compaction::SummaryRequest {
                    auth: auth.clone(),
                    fast_mode,
                    focus,
                    idle_timeout,
                },
                &self.cancel,
            )
            .await;
            let retry = self.session.lock().settings.effective().retry;
            let error = match result {
                Err(SummaryError::Failed(error))
                    if classify::is_retryable(&error)
                        && retry.enabled
                        && attempt < retry.max_retries =>
                {
                    error
                }
                other => {
                    if attempt > 0 {
                        self.emit(AgentSessionEvent::SummarizationRetryFinished {
                            operation_id,
                            reason,
                        });
                    }
                    return other;
                }
            };
            attempt += 1;
            let delay_ms = retry.delay_ms(attempt);
            let retry_at = now_millis().saturating_add(delay_ms as i64);
            let error_message = zi_protocol::results::clip_utf8(&error, MAX_RETRY_ERROR_BYTES)
                .0
                .to_string();
            {
                let mut state = self.session.lock();
                state.progress.retry = RetryStatus::Waiting(RetryWait::Compaction {
                    operation_id,
                    reason,
                    attempt,
                    max_attempts: retry.max_retries,
                    delay_ms,
                    retry_at,
                    error_message: error_message.clone(),
                });
                state.emit(AgentSessionEvent::SummarizationRetryScheduled {
                    operation_id,
                    reason,
                    attempt,
                    max_attempts: retry.max_retries,
                    delay_ms,
                    retry_at,
                    error_message,
                });
            }
            let cancelled = !self.sleep_unless_cancelled(delay_ms).await;
            self.session.lock().progress.retry = RetryStatus::Idle;
            if cancelled {
                return Err(SummaryError::Cancelled);
            }
            self.emit(AgentSessionEvent::SummarizationRetryAttemptStart {
                operation_id,
                reason,
            });
        }
    }

    /// Runs one automatic compaction. `Ok(true)` when it committed, `Ok(false)` when it failed,
    /// `Err` when the run was interrupted.
    pub(super) async fn compact(
        &mut self,
        reason: CompactionReason,
        excluded: Option<String>,
    ) -> Result<bool, RunStopped> {
        self.auto_compactions += 1;
        let operation_id = self.session.lock().next_operation_id();
        let ended = self
            .compact_once(operation_id, reason, excluded, None)
            .await?;
        Ok(matches!(ended, CompactionEnded::Completed(_)))
    }

    /// Runs one compaction under `operation_id`, from `compaction_start` to `compaction_end`.
    /// `Err` when it was cancelled.
    // Long on purpose: start, plan, sample and commit share one operation id and one
    // `compaction_start` … `compaction_end` bracket, which reads best as one sequence.
    async fn compact_once(
        &mut self,
        operation_id: u64,
        reason: CompactionReason,
        excluded: Option<String>,
        focus: Option<&str>,
    ) -> Result<CompactionEnded, RunStopped> {
        let session = self.session.clone();
        let prepared = {
            let mut state = session.lock();
            state.progress.compacting = Some((operation_id, reason));
            state.emit(AgentSessionEvent::CompactionStart {
                operation_id,
                reason,
            });
            state
                .model
                .clone()
                .ok_or_else(|| SessionError::NoModel.to_string())
                .and_then(|model| {
                    let limits = Limits::new(&model, &state.settings.effective().compaction);
                    compaction::plan(&state.journal, limits.keep_recent, excluded.as_deref())
                        .map(|plan| (model, limits, plan, state.thinking))
                        .map_err(|error| error.to_string())
                })
        };
        let outcome = match prepared {
            Err(message) => Err(SummaryError::Failed(message)),
            Ok((model, limits, plan, thinking)) => {
                let summary = match self.resolve_auth(&model).await {
                    Err(error) => Err(SummaryError::Failed(error.to_string())),
                    Ok(auth) => {
                        self.summarize_with_retry(
                            operation_id,
                            reason,
                            &model,
                            &plan,
                            &limits,
                            thinking,
                            auth,
                            focus,
                        )
                        .await
                    }
                };
                summary.and_then(|summary| {
                    compaction::entry_for(&plan, summary, reason, excluded.clone())
                        .map(|entry| (model, plan, entry))
                        .map_err(|error| SummaryError::Failed(error.to_string()))
                })
            }
        };
        // A summary that failed after the run was cancelled failed because of it (the dropped
        // request surfaces as a stream error): it is a cancellation.
        let outcome = match outcome {
            Err(SummaryError::Failed(_)) if self.cancel.is_cancelled() => {
                Err(SummaryError::Cancelled)
            }
            other => other,
        };
        let mut state = session.lock();
        state.progress.compacting = None;
        let end = |state: &crate::session::State, outcome: CompactionOutcome| {
            state.emit(AgentSessionEvent::CompactionEnd {
                operation_id,
                reason,
                outcome,
            });
        };
        match outcome {
            Err(SummaryError::Cancelled) => {
                end(&state, CompactionOutcome::Cancelled);
                Err(RunStopped)
            }
            Err(SummaryError::Failed(message)) => {
                let (message, _) = zi_protocol::results::clip_utf8(&message, 2000);
                end(
                    &state,
                    CompactionOutcome::Failed {
                        message: message.to_string(),
                    },
                );
                Ok(CompactionEnded::Failed(message.to_string()))
            }
            Ok((model, plan, entry)) => {
                if self.cancel.is_cancelled() {
                    end(&state, CompactionOutcome::Cancelled);
                    return Err(RunStopped);
                }
                let stale = state.journal.leaf_id() != plan.leaf_id.as_deref()
                    || state.model.as_ref().map(|m| m.reference()) != Some(model.reference());
                if stale {
                    end(
                        &state,
                        CompactionOutcome::Failed {
                            message: STALE.to_string(),
                        },
                    );
                    return Ok(CompactionEnded::Failed(STALE.to_string()));
                }
                let result = CompactionResult {
                    reason,
                    summary: entry.summary.clone(),
                    first_kept_entry_id: entry.first_kept_entry_id.clone(),
                    tokens_before: entry.tokens_before,
                    estimated_tokens_after: entry.estimated_tokens_after,
                    compacted_entries: plan.compacted_entries,
                    details: entry.details.clone(),
                };
                match state.append_announced(zi_protocol::event::EntryData::Compaction(entry)) {
                    Ok(_) => {
                        end(
                            &state,
                            CompactionOutcome::Completed {
                                result: result.clone(),
                            },
                        );
                        Ok(CompactionEnded::Completed(result))
                    }
                    Err(error) => {
                        end(
                            &state,
                            CompactionOutcome::Failed {
                                message: error.to_string(),
                            },
                        );
                        Ok(CompactionEnded::Failed(error.to_string()))
                    }
                }
            }
        }
    }
}
