//! The model catalog: the built-in models ([`crate::builtin`]) overlaid with
//! `<agent-dir>/models.json` (the format pi's coding agent uses), which can override built-in
//! providers and models field by field and add providers and models. The file is re-read
//! whenever the catalog is loaded, so edits take effect at the next `model.list` without a
//! restart.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;
use zi_protocol::ThinkingLevel;
use zi_protocol::state::InputKind;

use crate::model::{Api, Compat, Model, ModelCost};

/// Largest models.json zi reads.
const MAX_MODELS_FILE_BYTES: u64 = 8 * 1024 * 1024;

const DEFAULT_CONTEXT_WINDOW: u64 = 128_000;
const DEFAULT_MAX_TOKENS: u64 = 16_384;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ModelsFile {
    #[serde(default)]
    providers: BTreeMap<String, ProviderConfig>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ProviderConfig {
    #[serde(default)]
    base_url: Option<String>,
    #[serde(default)]
    api: Option<String>,
    #[serde(default)]
    api_key: Option<String>,
    #[serde(default)]
    headers: BTreeMap<String, String>,
    #[serde(default)]
    compat: Option<Compat>,
    #[serde(default)]
    models: Vec<ModelConfig>,
    /// Partial overrides of existing models, by id.
    #[serde(default)]
    model_overrides: BTreeMap<String, ModelConfig>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ModelConfig {
    #[serde(default)]
    id: String,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    reasoning: Option<bool>,
    #[serde(default)]
    input: Option<Vec<InputKind>>,
    #[serde(default)]
    context_window: Option<u64>,
    #[serde(default)]
    max_tokens: Option<u64>,
    #[serde(default)]
    cost: Option<ModelCost>,
    #[serde(default)]
    thinking_level_map: Option<BTreeMap<ThinkingLevel, Option<String>>>,
    #[serde(default)]
    headers: BTreeMap<String, String>,
    #[serde(default)]
    compat: Option<Compat>,
}

/// The models zi can reach, in catalog order, plus problems found while loading.
#[derive(Debug, Default, Clone)]
pub struct Catalog {
    /// The built-in models as models.json overrides them, then the models it adds.
    pub models: Vec<Model>,
    /// Human-readable problems, each meant for one `Warning: …` line on stderr.
    pub warnings: Vec<String>,
}

impl Catalog {
    /// The built-in models only.
    pub fn builtin() -> Catalog {
        Catalog {
            models: crate::builtin::models(),
            warnings: Vec::new(),
        }
    }

    /// The built-in models overlaid with `<agent_dir>/models.json`. A missing file adds
    /// nothing; an invalid one is a warning and adds nothing.
    pub fn load(agent_dir: &Path) -> Catalog {
        let mut catalog = Catalog::builtin();
        let path = agent_dir.join("models.json");
        match zi_os::config_file::read_bounded_text(&path, MAX_MODELS_FILE_BYTES) {
            Ok(None) => {}
            Ok(Some(text)) => catalog.add_models_json(&text, &path.display().to_string()),
            Err(error) => catalog
                .warnings
                .push(format!("(models) {error}; ignoring it")),
        }
        catalog
    }

    /// Parses models.json text: overrides of existing providers and models, then new models.
    pub fn add_models_json(&mut self, text: &str, origin: &str) {
        let file: ModelsFile = match serde_json::from_str(text) {
            Ok(file) => file,
            Err(error) => {
                self.warnings
                    .push(format!("(models) invalid {origin}: {error}"));
                return;
            }
        };
        for (provider, config) in file.providers {
            self.add_provider(&provider, config, origin);
        }
    }

    fn add_provider(&mut self, provider: &str, mut config: ProviderConfig, origin: &str) {
        let api = match config.api.as_deref() {
            Some(text) => match Api::parse(text) {
                Some(api) => Some(api),
                None => {
                    self.warnings.push(format!(
                        "(models) provider {provider} in {origin} uses unsupported api {text:?}"
                    ));
                    return;
                }
            },
            None => None,
        };
        // Provider-level settings apply to every model the provider already has.
        for model in self.models.iter_mut().filter(|m| m.provider == provider) {
            apply_provider_settings(model, api, &config);
        }
        for (id, partial) in std::mem::take(&mut config.model_overrides) {
            match self
                .models
                .iter_mut()
                .find(|m| m.provider == provider && m.id == id)
            {
                Some(model) => apply_overrides(model, partial),
                None => self.warnings.push(format!(
                    "(models) modelOverrides names unknown model {provider}/{id}"
                )),
            }
        }
        let existing = self.models.iter().find(|m| m.provider == provider).cloned();
        for model in std::mem::take(&mut config.models) {
            if model.id.is_empty() {
                self.warnings.push(format!(
                    "(models) provider {provider} has a model without id"
                ));
                continue;
            }
            if let Some(current) = self
                .models
                .iter_mut()
                .find(|m| m.provider == provider && m.id == model.id)
            {
                apply_overrides(current, model);
                continue;
            }
            // A new model inherits the provider's endpoint: from the file, else from the
            // provider's built-in models.
            let (Some(api), Some(base_url)) = (
                api.or(existing.as_ref().map(|m| m.api)),
                config
                    .base_url
                    .clone()
                    .or_else(|| existing.as_ref().map(|m| m.base_url.clone())),
            ) else {
                self.warnings.push(format!(
                    "(models) provider {provider} in {origin} needs baseUrl and api"
                ));
                return;
            };
            let endpoint = (provider, api, base_url);
            self.models
                .push(new_model(endpoint, model, &config, existing.as_ref()));
        }
    }

    /// The model `provider/id`, if the catalog has it.
    pub fn find(&self, provider: &str, id: &str) -> Option<&Model> {
        self.models
            .iter()
            .find(|m| m.provider == provider && m.id == id)
    }

    /// Resolves `provider/id`, or a bare id that names exactly one model.
    pub fn resolve(&self, reference: &str) -> Result<&Model, ModelLookupError> {
        if let Some((provider, id)) = reference.split_once('/')
            && let Some(model) = self.find(provider, id)
        {
            return Ok(model);
        }
        let mut matches = self.models.iter().filter(|m| m.id == reference);
        match (matches.next(), matches.next()) {
            (Some(model), None) => Ok(model),
            (Some(_), Some(_)) => Err(ModelLookupError::Ambiguous(reference.to_string())),
            _ => Err(ModelLookupError::Unknown(reference.to_string())),
        }
    }
}

/// A model reference ([`ModelCatalog::resolve`]) that names no single model.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ModelLookupError {
    /// A bare id that several providers have.
    #[error("Ambiguous model: {0}. Use provider/model-id.")]
    Ambiguous(String),
    /// No model has this reference.
    #[error("Unknown model: {0}. Use provider/model-id.")]
    Unknown(String),
}

/// Provider-level settings of models.json applied to one of the provider's models.
fn apply_provider_settings(model: &mut Model, api: Option<Api>, config: &ProviderConfig) {
    if let Some(api) = api {
        model.api = api;
    }
    if let Some(base_url) = &config.base_url {
        model.base_url = base_url.clone();
    }
    if config.api_key.is_some() {
        model.api_key = config.api_key.clone();
    }
    model
        .headers
        .extend(config.headers.iter().map(|(k, v)| (k.clone(), v.clone())));
    if let Some(compat) = &config.compat {
        model.compat = compat.clone();
    }
}

/// A model models.json adds: `(provider, api, base URL)` as resolved by the caller; headers,
/// compat and the key fall back from the model to the provider's config to the provider's
/// built-in models (`existing`).
fn new_model(
    (provider, api, base_url): (&str, Api, String),
    model: ModelConfig,
    config: &ProviderConfig,
    existing: Option<&Model>,
) -> Model {
    let mut headers = existing.map(|m| m.headers.clone()).unwrap_or_default();
    headers.extend(config.headers.clone());
    headers.extend(model.headers);
    Model {
        provider: provider.to_string(),
        name: model.name.unwrap_or_else(|| model.id.clone()),
        id: model.id,
        api,
        base_url,
        reasoning: model.reasoning.unwrap_or(false),
        thinking_level_map: model.thinking_level_map.unwrap_or_default(),
        input: model.input.unwrap_or_else(|| vec![InputKind::Text]),
        cost: model.cost.unwrap_or_default(),
        context_window: model.context_window.unwrap_or(DEFAULT_CONTEXT_WINDOW),
        max_tokens: model.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS),
        headers,
        compat: model
            .compat
            .or_else(|| config.compat.clone())
            .or_else(|| existing.map(|m| m.compat.clone()))
            .unwrap_or_default(),
        api_key: config
            .api_key
            .clone()
            .or_else(|| existing.and_then(|m| m.api_key.clone())),
    }
}

/// Applies the fields a models.json entry sets to an existing model.
fn apply_overrides(model: &mut Model, config: ModelConfig) {
    if let Some(name) = config.name {
        model.name = name;
    }
    if let Some(reasoning) = config.reasoning {
        model.reasoning = reasoning;
    }
    if let Some(input) = config.input {
        model.input = input;
    }
    if let Some(context_window) = config.context_window {
        model.context_window = context_window;
    }
    if let Some(max_tokens) = config.max_tokens {
        model.max_tokens = max_tokens;
    }
    if let Some(cost) = config.cost {
        model.cost = cost;
    }
    if let Some(map) = config.thinking_level_map {
        model.thinking_level_map = map;
    }
    if let Some(compat) = config.compat {
        model.compat = compat;
    }
    model.headers.extend(config.headers);
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = r#"{"providers":{"local":{"baseUrl":"http://127.0.0.1:8088/v1","api":"openai-completions","apiKey":"none",
        "compat":{"supportsDeveloperRole":false,"supportsReasoningEffort":false},
        "models":[{"id":"smollm2-135m","contextWindow":8192,"maxTokens":1024},{"id":"r1","name":"R1","reasoning":true,"thinkingLevelMap":{"off":null,"max":"max"}}]},
        "other":{"baseUrl":"http://x","api":"openai-completions","models":[{"id":"r1"}]}}}"#;

    fn sample() -> Catalog {
        let mut catalog = Catalog::default();
        catalog.add_models_json(SAMPLE, "sample");
        catalog
    }

    #[test]
    fn reads_pi_models_json() {
        let catalog = sample();
        assert!(catalog.warnings.is_empty(), "{:?}", catalog.warnings);
        let small = catalog
            .find("local", "smollm2-135m")
            .unwrap_or_else(|| panic!("missing"));
        assert_eq!(small.name, "smollm2-135m");
        assert_eq!(small.context_window, 8192);
        assert!(!small.compat.supports_reasoning_effort);
        let r1 = catalog
            .find("local", "r1")
            .unwrap_or_else(|| panic!("missing"));
        assert_eq!(
            r1.supported_thinking_levels().first(),
            Some(&ThinkingLevel::Minimal)
        );
        assert_eq!(
            catalog.find("other", "r1").map(|m| m.max_tokens),
            Some(DEFAULT_MAX_TOKENS)
        );
    }

    #[test]
    fn resolves_references() {
        let catalog = sample();
        assert!(catalog.resolve("local/r1").is_ok());
        assert!(catalog.resolve("smollm2-135m").is_ok());
        assert_eq!(
            catalog.resolve("r1").err().map(|e| e.to_string()),
            Some("Ambiguous model: r1. Use provider/model-id.".to_string())
        );
        assert_eq!(
            catalog.resolve("nope/x").err().map(|e| e.to_string()),
            Some("Unknown model: nope/x. Use provider/model-id.".to_string())
        );
    }

    #[test]
    fn models_json_overrides_builtin_models_and_adds_to_builtin_providers() {
        let mut catalog = Catalog::builtin();
        let count = catalog.models.len();
        catalog.add_models_json(
            r#"{"providers":{
                "anthropic":{"baseUrl":"https://proxy.example/v1","headers":{"x-team":"T"},
                    "modelOverrides":{"claude-sonnet-4-5":{"maxTokens":1000,"name":"Sonnet (proxy)"}},
                    "models":[{"id":"claude-next","reasoning":true}]},
                "openai":{"models":[{"id":"gpt-5","contextWindow":5000}]}}}"#,
            "test",
        );
        assert!(catalog.warnings.is_empty(), "{:?}", catalog.warnings);
        assert_eq!(catalog.models.len(), count + 1);
        let sonnet = catalog
            .find("anthropic", "claude-sonnet-4-5")
            .unwrap_or_else(|| panic!("sonnet"));
        assert_eq!(sonnet.base_url, "https://proxy.example/v1");
        assert_eq!(sonnet.max_tokens, 1000);
        assert_eq!(sonnet.name, "Sonnet (proxy)");
        assert_eq!(sonnet.headers.get("x-team").map(String::as_str), Some("T"));
        assert_eq!(
            sonnet.cost.input, 3.0,
            "unset fields keep the built-in value"
        );
        let next = catalog
            .find("anthropic", "claude-next")
            .unwrap_or_else(|| panic!("next"));
        assert_eq!(next.api, Api::AnthropicMessages);
        assert_eq!(next.base_url, "https://proxy.example/v1");
        assert_eq!(
            catalog.find("openai", "gpt-5").map(|m| m.context_window),
            Some(5000)
        );
        assert!(catalog.resolve("claude-next").is_ok());
        assert!(catalog.resolve("openrouter/moonshotai/kimi-k2.6").is_ok());
    }

    #[test]
    fn invalid_file_is_a_warning() {
        let mut catalog = Catalog::default();
        catalog.add_models_json("{", "bad");
        assert!(catalog.models.is_empty());
        assert_eq!(catalog.warnings.len(), 1);
    }
}
