//! `spawn_subagent` (docs/delegation.md#tools) and the child's command line and environment
//! (docs/delegation.md#children).

use std::ffi::OsString;
use std::sync::{Arc, OnceLock};

use serde_json::json;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use zi_config::subagent_profiles::SubagentProfile;
use zi_protocol::event::{OutcomeResult, SubagentEntry};
use zi_protocol::state::ModelState;
use zi_rpc_client::Delivery;

use super::{ChildHandle, ChildState, ExitedChild, Lifecycle, LiveChild, Supervisor};
use crate::child::{ChildCommand, ChildProcess};
use crate::error::SubagentError;
use crate::evidence::{ControlOperation, append_best_effort, append_required, listed_task};
use crate::limits::{
    API_KEY_MAX_BYTES, MAX_LIVE_CHILDREN, MODEL_MAX_BYTES, SHUTDOWN_FORCED, SHUTDOWN_GRACE,
    check_name, check_text,
};

/// The variables a child never inherits from the parent.
const CHILD_ONLY_VARIABLES: [&str; 4] = [
    "ZI_SUBAGENT_EXECUTABLE",
    "ZI_INTERNAL_SUBAGENT_API_KEY",
    "ZI_AGENT_DIR",
    "ZI_SUBAGENT_DEPTH",
];
pub const API_KEY_VARIABLE: &str = "ZI_INTERNAL_SUBAGENT_API_KEY";

/// Why a spawn did not admit its first cycle, for the control outcome.
enum SpawnFailure {
    Failed(SubagentError),
    Cancelled(SubagentError),
}

impl SpawnFailure {
    fn error(self) -> SubagentError {
        match self {
            SpawnFailure::Failed(error) | SpawnFailure::Cancelled(error) => error,
        }
    }
}

/// Model, thinking level and whether the child uses the parent's own selection.
struct Selection {
    model: String,
    thinking: String,
    parent_model: bool,
}

impl Supervisor {
    /// Starts a child under `name` and admits the composed task as its cycle 1.
    pub async fn spawn(
        self: &Arc<Self>,
        profile: &str,
        name: &str,
        prompt: &str,
        cancel: &CancellationToken,
    ) -> Result<super::Snapshot, SubagentError> {
        let control = ControlOperation::start("spawn");
        let result = self.spawn_admitted(profile, name, prompt, cancel).await;
        let mut evidence = json!({"source": "host", "name": name});
        if self.catalog().get(profile).is_some() {
            evidence["profile"] = json!(profile);
        }
        evidence["promptBytes"] = json!(prompt.len().max(1));
        let host = self.host();
        match result {
            Ok(snapshot) => {
                control.finish(&host, OutcomeResult::Succeeded, evidence);
                Ok(snapshot)
            }
            Err(SpawnFailure::Failed(error)) => {
                evidence["errorCode"] = json!("spawn_failed");
                control.finish(&host, OutcomeResult::Failed, evidence);
                Err(error)
            }
            Err(failure @ SpawnFailure::Cancelled(_)) => {
                evidence["cancellationCode"] = json!("cancelled");
                control.finish(&host, OutcomeResult::Cancelled, evidence);
                Err(failure.error())
            }
        }
    }

    fn resolve_selection(&self, profile: &SubagentProfile) -> Result<Selection, SubagentError> {
        let session = self.host().session().ok_or(SubagentError::Closed)?;
        let state = session.state();
        let parent = match &state.model {
            ModelState::Selected { model } => Some(format!("{}/{}", model.provider, model.id)),
            ModelState::Unselected => None,
        };
        let model = match &profile.model {
            Some(requested) => (self.config.resolve_model)(requested).ok_or_else(|| {
                SubagentError::UnavailableModel {
                    profile: profile.name.clone(),
                    source_path: profile.source.path().to_path_buf(),
                    model: requested.clone(),
                }
            })?,
            None => parent.clone().ok_or(SubagentError::NoModel)?,
        };
        let thinking = profile.thinking.unwrap_or(state.thinking_level);
        Ok(Selection {
            parent_model: parent.as_deref() == Some(model.as_str()),
            model,
            thinking: thinking.as_str().to_string(),
        })
    }

    fn command(&self, selection: &Selection) -> ChildCommand {
        let cwd = self.config.cwd.to_string_lossy().into_owned();
        let mut args: Vec<String> = [
            "--mode",
            "rpc",
            "--no-session",
            "--cwd",
            &cwd,
            "--model",
            &selection.model,
            "--thinking",
            &selection.thinking,
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        args.extend(self.config.extra_args.iter().cloned());
        let mut env: Vec<(OsString, OsString)> = self
            .config
            .environment
            .iter()
            .filter(|(key, _)| !CHILD_ONLY_VARIABLES.iter().any(|v| key == v))
            .cloned()
            .collect();
        env.push(("ZI_AGENT_DIR".into(), self.config.agent_dir.clone().into()));
        env.push(("ZI_SUBAGENT_DEPTH".into(), "1".into()));
        // The key crosses only the environment, and only to a child on the parent's model.
        if let Some(key) = &self.config.api_key
            && selection.parent_model
        {
            env.push((API_KEY_VARIABLE.into(), key.into()));
        }
        ChildCommand {
            program: self.config.program.clone(),
            args,
            cwd: self.config.cwd.clone(),
            env,
        }
    }

    /// The admission steps of a spawn: every check, the ledger reservation, `starting` and the
    /// name.
    fn admit_spawn(
        &self,
        profile: &SubagentProfile,
        name: &str,
        prompt: &str,
    ) -> Result<(Arc<ChildHandle>, ChildCommand), SubagentError> {
        let selection = {
            let state = self.lock();
            Supervisor::check_open(&state)?;
            check_name(name)?;
            check_text(prompt, "prompt")?;
            if state.live.len() >= MAX_LIVE_CHILDREN {
                return Err(SubagentError::Capacity);
            }
            if state.names.contains(name) {
                return Err(SubagentError::NameInUse(name.to_string()));
            }
            drop(state);
            self.resolve_selection(profile)?
        };
        if selection.model.is_empty()
            || selection.model.len() > MODEL_MAX_BYTES
            || selection.model.contains('\0')
        {
            return Err(SubagentError::ModelLength);
        }
        if let Some(key) = &self.config.api_key
            && (key.is_empty() || key.len() > API_KEY_MAX_BYTES || key.contains('\0'))
        {
            return Err(SubagentError::ApiKeyLength);
        }
        let mut state = self.lock();
        // Re-checked under the same lock as the reservation: two spawns may race.
        Supervisor::check_open(&state)?;
        if state.live.len() >= MAX_LIVE_CHILDREN {
            return Err(SubagentError::Capacity);
        }
        if state.names.contains(name) {
            return Err(SubagentError::NameInUse(name.to_string()));
        }
        state.ledger.reserve(name, 1, Some(profile.name.clone()))?;
        if let Err(error) = append_required(
            &self.host(),
            SubagentEntry::Starting {
                name: name.to_string(),
            },
        ) {
            state.ledger.cancel_reservation(name, 1);
            return Err(error);
        }
        state.names.insert(name.to_string());
        let handle = Arc::new(ChildHandle {
            name: name.to_string(),
            profile: profile.name.clone(),
            serial: tokio::sync::Mutex::new(()),
            process: OnceLock::new(),
            wake: Notify::new(),
        });
        let mut child_state = ChildState::new();
        child_state.task = listed_task(prompt);
        state.live.push(LiveChild {
            handle: handle.clone(),
            state: child_state,
        });
        drop(state);
        self.changed(name);
        Ok((handle, self.command(&selection)))
    }

    async fn spawn_admitted(
        self: &Arc<Self>,
        profile_name: &str,
        name: &str,
        prompt: &str,
        cancel: &CancellationToken,
    ) -> Result<super::Snapshot, SpawnFailure> {
        let profile = self.catalog().get(profile_name).cloned().ok_or_else(|| {
            SpawnFailure::Failed(SubagentError::UnknownProfile(profile_name.to_string()))
        })?;
        let (handle, command) = self
            .admit_spawn(&profile, name, prompt)
            .map_err(SpawnFailure::Failed)?;
        let process = match ChildProcess::start(name, &command).await {
            Ok(process) => Arc::new(process),
            Err(error) => {
                self.never_started(name, &error.to_string());
                return Err(SpawnFailure::Failed(error));
            }
        };
        let _ = handle.process.set(process.clone());
        self.watch_exit(handle.clone(), process.clone());
        let task = format!("{}\n\nTask:\n{prompt}", profile.instructions.trim_end());
        let started = tokio::select! {
            biased;
            () = cancel.cancelled() => Err(SpawnFailure::Cancelled(SubagentError::SpawnCancelled(name.to_string()))),
            started = self.start_first_cycle(&handle, &process, prompt, &task, cancel) => started,
        };
        match started {
            Ok(()) => Ok(self
                .snapshot(name)
                .unwrap_or_else(|| super::Snapshot::unknown(name))),
            Err(failure) => {
                let reason = match failure {
                    SpawnFailure::Cancelled(_) => "startup_cancelled",
                    SpawnFailure::Failed(_) => "startup_failed",
                };
                let cycle_started = self.lock().child(name).is_some_and(|c| c.state.cycle > 0);
                if !cycle_started {
                    self.lock().ledger.cancel_reservation(name, 1);
                }
                self.close_child(&handle, reason, SHUTDOWN_GRACE, SHUTDOWN_FORCED)
                    .await;
                Err(failure)
            }
        }
    }

    /// The OS did not start the process: no cycle, an exited snapshot, `exited{error}`.
    fn never_started(&self, name: &str, message: &str) {
        {
            let mut state = self.lock();
            state.ledger.cancel_reservation(name, 1);
            let task = state.child(name).and_then(|c| c.state.task.clone());
            state.live.retain(|c| c.handle.name != name);
            state.retain_exited(ExitedChild {
                name: name.to_string(),
                cycle: 0,
                task,
            });
        }
        append_best_effort(
            &self.host(),
            SubagentEntry::Exited {
                name: name.to_string(),
                outcome: crate::limits::clip(message, crate::limits::ERROR_MAX_BYTES).to_string(),
            },
        );
        self.changed(name);
    }

    /// Steps 7–9: the RPC handshake, `ready` and `work_cycle_started`, the `direct` prompt.
    async fn start_first_cycle(
        self: &Arc<Self>,
        handle: &Arc<ChildHandle>,
        process: &Arc<ChildProcess>,
        prompt: &str,
        task: &str,
        cancel: &CancellationToken,
    ) -> Result<(), SpawnFailure> {
        let name = handle.name.as_str();
        let session_id = process
            .handshake()
            .await
            .map_err(|e| SpawnFailure::Failed(SubagentError::connection(name, e)))?;
        let admission_cancelled =
            || SpawnFailure::Cancelled(SubagentError::AdmissionCancelled(name.to_string()));
        {
            let mut state = self.lock();
            let current = state
                .child(name)
                .is_some_and(|c| c.state.lifecycle == Lifecycle::Starting);
            if Supervisor::check_open(&state).is_err() || cancel.is_cancelled() || !current {
                return Err(admission_cancelled());
            }
            let host = self.host();
            append_required(
                &host,
                SubagentEntry::Ready {
                    name: name.to_string(),
                    session_id: Some(crate::limits::clip(&session_id, 256).to_string())
                        .filter(|s| !s.is_empty()),
                },
            )
            .map_err(SpawnFailure::Failed)?;
            append_required(
                &host,
                SubagentEntry::WorkCycleStarted {
                    name: name.to_string(),
                    work_cycle: 1,
                    task: listed_task(prompt),
                },
            )
            .map_err(SpawnFailure::Failed)?;
            if let Some(child) = state.child_mut(name) {
                child.state.cycle = 1;
                child.state.cycle_open = true;
                child.state.set(Lifecycle::SpawnAdmitting);
                child.state.admissions += 1;
                child.state.in_flight += 1;
            }
        }
        self.changed(name);
        let admitted = process.prompt(Delivery::Direct, task, Some("1")).await;
        let revision = {
            let mut state = self.lock();
            let Some(child) = state.child_mut(name) else {
                return Err(admission_cancelled());
            };
            child.state.in_flight = child.state.in_flight.saturating_sub(1);
            let result =
                admitted.map_err(|e| SpawnFailure::Failed(SubagentError::connection(name, e)))?;
            let revision = result
                .completion_revision
                .ok_or(SpawnFailure::Failed(SubagentError::InvalidAdmission))?;
            if revision <= child.state.revision {
                return Err(SpawnFailure::Failed(SubagentError::RevisionStale));
            }
            child.state.revision = revision;
            child.state.cycle_started = std::time::Instant::now();
            if child.state.lifecycle == Lifecycle::SpawnAdmitting {
                child.state.set(Lifecycle::Running);
            }
            revision
        };
        let _ = revision;
        self.changed(name);
        self.drive_cycle(handle.clone(), process.clone(), 1);
        Ok(())
    }
}
