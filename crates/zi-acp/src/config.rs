//! The session's config options (docs/acp.md#config-options): `mode`, `model` and
//! `thinking`, each a select with every current value. Every change — the client's or zi's own
//! (a model fallback, a clamped thinking level) — is pushed as the complete list.

use agent_client_protocol_schema::v1::{
    SessionConfigOption, SessionConfigOptionCategory, SessionConfigSelectOption,
};
use zi_agent::AgentSession;
use zi_protocol::ThinkingLevel;
use zi_protocol::request::SettingsScope;
use zi_protocol::state::ModelState;

use crate::factory::OperatorFloor;
use crate::jsonrpc::RpcError;
use crate::modes::{self, Mode};

/// What the options show, read from the session (outside its event delivery: it takes the
/// session lock and re-reads `models.json` as `model.list` does).
#[derive(Debug, Clone, PartialEq)]
pub struct Snapshot {
    pub mode: Mode,
    pub floor: OperatorFloor,
    /// `provider/id` and name, configured models first.
    pub models: Vec<(String, String)>,
    pub model: Option<String>,
    pub levels: Vec<ThinkingLevel>,
    pub thinking: ThinkingLevel,
}

impl Snapshot {
    pub fn read(session: &AgentSession, mode: Mode, floor: OperatorFloor) -> Snapshot {
        let state = session.state();
        let model = match &state.model {
            ModelState::Selected { model } => Some(format!("{}/{}", model.provider, model.id)),
            ModelState::Unselected => None,
        };
        let mut listed = session.model_list().unwrap_or_default();
        // Configured models first, each group in catalog order.
        listed.sort_by_key(|m| !m.configured);
        let mut models: Vec<(String, String)> = listed
            .into_iter()
            .map(|m| (format!("{}/{}", m.model.provider, m.model.id), m.model.name))
            .collect();
        if let Some(current) = &model
            && !models.iter().any(|(value, _)| value == current)
        {
            models.insert(0, (current.clone(), current.clone()));
        }
        Snapshot {
            mode,
            floor,
            models,
            model,
            levels: state.supported_thinking_levels,
            thinking: state.thinking_level,
        }
    }

    /// `mode`, `model` and `thinking`, in that order (`model` and `thinking` only once a model
    /// is selected).
    pub fn options(&self) -> Vec<SessionConfigOption> {
        let select = |value: &str, name: &str| {
            SessionConfigSelectOption::new(value.to_string(), name.to_string())
        };
        let modes = modes::available(&self.floor)
            .into_iter()
            .rev()
            .map(|m| select(m.id(), m.name()))
            .collect::<Vec<_>>();
        let mut options = vec![
            SessionConfigOption::select("mode", "Mode", self.mode.id(), modes)
                .category(SessionConfigOptionCategory::Mode),
        ];
        if let Some(model) = &self.model {
            let values = self
                .models
                .iter()
                .map(|(value, name)| select(value, name))
                .collect::<Vec<_>>();
            options.push(
                SessionConfigOption::select("model", "Model", model.clone(), values)
                    .category(SessionConfigOptionCategory::Model),
            );
            let levels = self
                .levels
                .iter()
                .map(|level| select(level.as_str(), &level_name(*level)))
                .collect::<Vec<_>>();
            options.push(
                SessionConfigOption::select(
                    "thinking",
                    "Thinking",
                    self.thinking.as_str().to_string(),
                    levels,
                )
                .category(SessionConfigOptionCategory::ThoughtLevel),
            );
        }
        options
    }
}

fn level_name(level: ThinkingLevel) -> String {
    let text = level.as_str();
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

/// Selects a model by its `provider/id` value.
pub fn select_model(session: &AgentSession, value: &str) -> Result<(), RpcError> {
    let Some((provider, id)) = value.split_once('/') else {
        return Err(RpcError::invalid_params(format!(
            "Model must be provider/id: {value}"
        )));
    };
    session
        .select_model(provider, id)
        .map(|_| ())
        // A configuration value the session refuses is `-32602`, whatever the reason.
        .map_err(|error| RpcError::invalid_params(error.to_string()))
}

/// Selects a thinking level (persisted as `thinking.select` does, to the global settings).
pub fn select_thinking(session: &AgentSession, value: &str) -> Result<(), RpcError> {
    let level = ThinkingLevel::parse(value).ok_or_else(|| {
        RpcError::invalid_params(format!(
            "Unknown thinking level: {value}. Use off, minimal, low, medium, high, xhigh or max."
        ))
    })?;
    session
        .select_thinking(level, SettingsScope::Global)
        .map(|_| ())
        .map_err(|error| RpcError::invalid_params(error.to_string()))
}
