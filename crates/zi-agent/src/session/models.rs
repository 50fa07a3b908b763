//! The model catalog, model selection and thinking levels (docs/rpc.md#modellist,
//! docs/rpc.md#modelselect, docs/providers.md#thinking-levels).

use std::sync::Arc;

use serde_json::{Map, Value};
use zi_ai::catalog::Catalog;
use zi_ai::credentials::Credentials;
use zi_ai::model::clamp_thinking;
use zi_os::sync::lock;
use zi_protocol::ThinkingLevel;
use zi_protocol::event::{AgentSessionEvent, EntryData};
use zi_protocol::request::SettingsScope;
use zi_protocol::results::ThinkingSelection;
use zi_protocol::state::{CatalogModel, RpcModel};

use super::{AgentSession, RunActivity};
use crate::errors::{self, Operation, SessionError};

/// Why `model.select` failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectModelError {
    /// The catalog has no such model (RPC `not_found`); the text names it.
    #[error("{0}")]
    NotFound(String),
    /// The session refused the change (RPC `operation_failed`).
    #[error(transparent)]
    Failed(SessionError),
}

impl AgentSession {
    /// Re-reads models.json and lists every model with whether it is configured.
    pub fn model_list(&self) -> Result<Vec<CatalogModel>, SessionError> {
        let catalog = self.reload_catalog();
        let credentials = self.refreshed_credentials();
        let mut state = self.lock();
        if matches!(state.activity, RunActivity::Disposed) {
            return Err(SessionError::Disposed);
        }
        let models = catalog
            .models
            .iter()
            .map(|model| CatalogModel {
                model: model.public(),
                configured: credentials.is_configured(model),
            })
            .collect();
        state.catalog = catalog;
        Ok(models)
    }

    /// The credentials with auth.json re-read. Its problems were reported as `Warning:` lines at
    /// start-up; later ones only reach the debug log, so listing models never floods stderr.
    pub(super) fn refreshed_credentials(&self) -> Credentials {
        let mut credentials = lock(&self.inner.credentials);
        for problem in credentials.reload_stored(&self.inner.agent_dir) {
            tracing::debug!("{problem}");
        }
        credentials.clone()
    }

    fn reload_catalog(&self) -> Arc<Catalog> {
        let catalog = Catalog::load(&self.inner.agent_dir);
        for warning in &catalog.warnings {
            tracing::warn!("{warning}");
        }
        Arc::new(catalog)
    }

    /// `model.select` (docs/rpc.md#modelselect).
    pub fn select_model(&self, provider: &str, id: &str) -> Result<RpcModel, SelectModelError> {
        let catalog = self.reload_catalog();
        let mut state = self.lock();
        state.catalog = catalog;
        let Some(model) = state.catalog.find(provider, id).cloned().map(Arc::new) else {
            return Err(SelectModelError::NotFound(errors::model_not_found(
                provider, id,
            )));
        };
        state
            .require_idle(Operation::SelectModel)
            .map_err(SelectModelError::Failed)?;
        if !self.refreshed_credentials().is_configured(&model) {
            return Err(SelectModelError::Failed(
                SessionError::ModelNotAuthenticated(model.reference()),
            ));
        }
        let previous_reasoned = state.model.as_ref().is_some_and(|m| m.reasoning);
        let preferred = if previous_reasoned {
            state.thinking
        } else {
            state
                .settings
                .effective()
                .default_thinking_level
                .unwrap_or(ThinkingLevel::Medium)
        };
        let level = clamp_thinking(&model.supported_thinking_levels(), preferred);
        let changed = level != state.thinking;
        let journal = state
            .journal
            .append(EntryData::ModelChange {
                provider: model.provider.clone(),
                model_id: model.id.clone(),
            })
            .and_then(|_| {
                if changed {
                    state
                        .journal
                        .append(EntryData::ThinkingLevelChange {
                            thinking_level: level,
                        })
                        .map(|_| ())
                } else {
                    Ok(())
                }
            });
        if let Err(error) = journal {
            return Err(SelectModelError::Failed(error.into()));
        }
        state.model = Some(model.clone());
        state.thinking = level;
        let mut patch = Map::new();
        patch.insert(
            "defaultProvider".into(),
            Value::from(model.provider.clone()),
        );
        patch.insert("defaultModel".into(), Value::from(model.id.clone()));
        if changed && (model.reasoning || level != ThinkingLevel::Off) {
            patch.insert("defaultThinkingLevel".into(), Value::from(level.as_str()));
        }
        let write = state.settings.write(SettingsScope::Global, patch);
        if changed {
            state.emit(AgentSessionEvent::ThinkingLevelChanged { level });
        }
        state.emit(AgentSessionEvent::ModelChanged {
            model: model.public(),
        });
        if let Err(error) = write {
            tracing::warn!("model selected but not saved as the default: {error}");
        }
        Ok(model.public())
    }

    /// `thinking.select` (docs/providers.md#thinking-levels).
    pub fn select_thinking(
        &self,
        requested: ThinkingLevel,
        scope: SettingsScope,
    ) -> Result<ThinkingSelection, SessionError> {
        let mut state = self.lock();
        state.require_idle(Operation::SelectThinking)?;
        let Some(model) = state.model.clone() else {
            return Err(SessionError::NoModel);
        };
        let supported = model.supported_thinking_levels();
        let persisted = clamp_thinking(&supported, requested);
        if model.reasoning || persisted != ThinkingLevel::Off {
            let mut patch = Map::new();
            patch.insert(
                "defaultThinkingLevel".into(),
                Value::from(persisted.as_str()),
            );
            state.settings.write(scope, patch)?;
        }
        let merged = state
            .settings
            .effective()
            .default_thinking_level
            .unwrap_or(ThinkingLevel::Medium);
        let effective = clamp_thinking(&supported, merged);
        if effective != state.thinking {
            state.journal.append(EntryData::ThinkingLevelChange {
                thinking_level: effective,
            })?;
            state.thinking = effective;
            state.emit(AgentSessionEvent::ThinkingLevelChanged { level: effective });
        }
        Ok(ThinkingSelection {
            scope,
            requested,
            effective,
        })
    }
}
