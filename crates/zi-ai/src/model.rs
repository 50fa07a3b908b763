//! The internal model descriptor and thinking-level support (docs/providers.md#built-in-catalog,
//! docs/providers.md#thinking-levels).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use zi_protocol::ThinkingLevel;
use zi_protocol::state::{InputKind, RpcModel};

/// The wire API a model is reached through.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Api {
    /// OpenAI's Chat Completions, which most OpenAI-compatible servers speak.
    #[serde(rename = "openai-completions")]
    OpenAiCompletions,
    /// OpenAI's Responses API.
    #[serde(rename = "openai-responses")]
    OpenAiResponses,
    /// The Responses API as ChatGPT's Codex backend serves it (`<base>/codex/responses`).
    #[serde(rename = "openai-codex-responses")]
    OpenAiCodexResponses,
    /// Anthropic's Messages API.
    #[serde(rename = "anthropic-messages")]
    AnthropicMessages,
    /// Google's Generative Language API (Gemini).
    #[serde(rename = "google-generative-ai")]
    GoogleGenerativeAi,
}

impl Api {
    /// Every API, in the order error texts list them.
    pub const ALL: [Api; 5] = [
        Api::AnthropicMessages,
        Api::OpenAiResponses,
        Api::OpenAiCodexResponses,
        Api::OpenAiCompletions,
        Api::GoogleGenerativeAi,
    ];

    /// The name models.json and the wire use.
    pub fn as_str(self) -> &'static str {
        match self {
            Api::OpenAiCompletions => "openai-completions",
            Api::OpenAiResponses => "openai-responses",
            Api::OpenAiCodexResponses => "openai-codex-responses",
            Api::AnthropicMessages => "anthropic-messages",
            Api::GoogleGenerativeAi => "google-generative-ai",
        }
    }

    /// The API a models.json `api` value names; `None` for anything else.
    pub fn parse(text: &str) -> Option<Api> {
        Api::ALL.into_iter().find(|api| api.as_str() == text)
    }
}

/// Prices in dollars per million tokens.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ModelCost {
    /// Input tokens that were not read from a cache.
    pub input: f64,
    /// Output tokens, thinking included.
    pub output: f64,
    /// Input tokens read from the provider's prompt cache.
    pub cache_read: f64,
    /// Input tokens written to the provider's prompt cache.
    pub cache_write: f64,
}

/// Per-endpoint quirks of OpenAI-compatible servers (the `compat` object of models.json).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Compat {
    /// Send the system prompt with role `developer` (reasoning models on OpenAI) instead of
    /// `system`.
    pub supports_developer_role: bool,
    /// Send `reasoning_effort` for reasoning models.
    pub supports_reasoning_effort: bool,
    /// Ask for a final usage chunk with `stream_options.include_usage`.
    pub supports_usage_in_streaming: bool,
    /// `max_tokens` or `max_completion_tokens`.
    pub max_tokens_field: MaxTokensField,
    /// How an OpenAI-compatible server is asked to think: `openai` (`reasoning_effort`),
    /// `openrouter` (`reasoning: {effort}`), `qwen` (`enable_thinking`), `zai`
    /// (`thinking: {type}`).
    pub thinking_format: ThinkingFormat,
    /// Tool result messages carry the tool's `name` (Mistral).
    pub requires_tool_result_name: bool,
    /// Tool call ids must be exactly 9 letters or digits (Mistral); zi maps them consistently.
    pub requires_mistral_tool_ids: bool,
    /// A user message may not directly follow tool results; zi inserts a short assistant
    /// message between them (Mistral).
    pub requires_assistant_after_tool_result: bool,
    /// Anthropic: the model takes adaptive thinking (`thinking: {type: "adaptive"}` with an
    /// effort) instead of a token budget.
    pub adaptive_thinking: bool,
}

impl Default for Compat {
    fn default() -> Self {
        Compat {
            supports_developer_role: false,
            supports_reasoning_effort: true,
            supports_usage_in_streaming: true,
            max_tokens_field: MaxTokensField::MaxCompletionTokens,
            thinking_format: ThinkingFormat::OpenAi,
            requires_tool_result_name: false,
            requires_mistral_tool_ids: false,
            requires_assistant_after_tool_result: false,
            adaptive_thinking: false,
        }
    }
}

/// How an OpenAI-compatible server is asked to think ([`Compat::thinking_format`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ThinkingFormat {
    /// `reasoning_effort`.
    #[serde(rename = "openai")]
    OpenAi,
    /// `reasoning: {effort}`.
    #[serde(rename = "openrouter")]
    OpenRouter,
    /// `enable_thinking`.
    Qwen,
    /// `thinking: {type}`.
    Zai,
}

/// The request field that bounds the output ([`Compat::max_tokens_field`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum MaxTokensField {
    /// `max_tokens`, which older servers take.
    #[serde(rename = "max_tokens")]
    MaxTokens,
    /// `max_completion_tokens`, which OpenAI asks for.
    #[serde(rename = "max_completion_tokens")]
    MaxCompletionTokens,
}

/// Everything zi knows about one model. Only [`Model::public`] may cross RPC.
#[derive(Debug, Clone, PartialEq)]
pub struct Model {
    /// The provider id; with `id` it names the model (`provider/id`).
    pub provider: String,
    /// The model id the provider's API takes.
    pub id: String,
    /// What people call it.
    pub name: String,
    /// The wire API its requests use.
    pub api: Api,
    /// Where its API is served.
    pub base_url: String,
    /// Whether it thinks: only then are thinking levels other than `off` offered.
    pub reasoning: bool,
    /// Maps zi levels to provider effort strings; `None` marks a level as unsupported.
    pub thinking_level_map: BTreeMap<ThinkingLevel, Option<String>>,
    /// What it accepts besides text (images).
    pub input: Vec<InputKind>,
    /// Its prices, for the cost of each response.
    pub cost: ModelCost,
    /// Tokens of context it holds; compaction and context usage are measured against it.
    pub context_window: u64,
    /// The most output tokens one response may have.
    pub max_tokens: u64,
    /// Header values as configured (env var name, literal or `!command`), resolved per request.
    pub headers: BTreeMap<String, String>,
    /// Quirks of its server.
    pub compat: Compat,
    /// The provider's configured key source (env var name, literal or `!command`).
    pub api_key: Option<String>,
}

impl Model {
    /// `provider/id`.
    pub fn reference(&self) -> String {
        format!("{}/{}", self.provider, self.id)
    }

    /// The public descriptor (docs/rpc.md#modellist).
    pub fn public(&self) -> RpcModel {
        RpcModel {
            provider: self.provider.clone(),
            id: self.id.clone(),
            name: self.name.clone(),
            reasoning: self.reasoning,
            input: self.input.clone(),
            context_window: self.context_window,
            max_tokens: self.max_tokens,
        }
    }

    /// Whether the model takes images as input.
    pub(crate) fn accepts_images(&self) -> bool {
        self.input.contains(&InputKind::Image)
    }

    /// Levels this model supports, in order (docs/providers.md#thinking-levels).
    pub fn supported_thinking_levels(&self) -> Vec<ThinkingLevel> {
        if !self.reasoning {
            return vec![ThinkingLevel::Off];
        }
        ThinkingLevel::ALL
            .into_iter()
            .filter(|level| match self.thinking_level_map.get(level) {
                Some(mapped) => mapped.is_some(),
                None => !matches!(level, ThinkingLevel::Xhigh | ThinkingLevel::Max),
            })
            .collect()
    }

    /// The provider's effort string for a level: the mapped value, or the level's own name.
    pub(crate) fn effort_for(&self, level: ThinkingLevel) -> Option<String> {
        match self.thinking_level_map.get(&level) {
            Some(mapped) => mapped.clone(),
            None => Some(level.as_str().to_string()),
        }
    }

    /// The effort a reasoning model is asked for at `level`; `off` sends the map's `off` value
    /// when it has one. `None` for models without reasoning.
    pub(crate) fn request_effort(&self, level: ThinkingLevel) -> Option<String> {
        if !self.reasoning {
            None
        } else if level == ThinkingLevel::Off {
            self.thinking_level_map
                .get(&ThinkingLevel::Off)
                .cloned()
                .flatten()
        } else {
            self.effort_for(level)
        }
    }
}

/// Clamps a requested level to what `supported` offers: the level itself, else the next
/// supported level above it, else the nearest below, else the first supported, else `off`.
pub fn clamp_thinking(supported: &[ThinkingLevel], requested: ThinkingLevel) -> ThinkingLevel {
    if supported.contains(&requested) {
        return requested;
    }
    let upward = ThinkingLevel::ALL[requested.index()..]
        .iter()
        .find(|level| supported.contains(level));
    if let Some(level) = upward {
        return *level;
    }
    let downward = ThinkingLevel::ALL[..requested.index()]
        .iter()
        .rev()
        .find(|level| supported.contains(level));
    downward
        .or_else(|| supported.first())
        .copied()
        .unwrap_or(ThinkingLevel::Off)
}

/// Supported levels for an optional model (`["off"]` when none is selected).
pub fn supported_levels(model: Option<&Model>) -> Vec<ThinkingLevel> {
    model.map_or_else(
        || vec![ThinkingLevel::Off],
        Model::supported_thinking_levels,
    )
}

#[cfg(test)]
pub(crate) fn test_model() -> Model {
    Model {
        provider: "p".into(),
        id: "m".into(),
        name: "M".into(),
        api: Api::OpenAiCompletions,
        base_url: "http://127.0.0.1:1/v1".into(),
        reasoning: true,
        thinking_level_map: BTreeMap::new(),
        input: vec![InputKind::Text],
        cost: ModelCost::default(),
        context_window: 1000,
        max_tokens: 100,
        headers: BTreeMap::new(),
        compat: Compat::default(),
        api_key: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ThinkingLevel::*;

    #[test]
    fn reasoning_model_supports_all_but_unmapped_xhigh_and_max() {
        let model = test_model();
        assert_eq!(
            model.supported_thinking_levels(),
            vec![Off, Minimal, Low, Medium, High]
        );
        let mut mapped = test_model();
        mapped.thinking_level_map.insert(Max, Some("max".into()));
        mapped.thinking_level_map.insert(Off, None);
        assert_eq!(
            mapped.supported_thinking_levels(),
            vec![Minimal, Low, Medium, High, Max]
        );
        let mut plain = test_model();
        plain.reasoning = false;
        assert_eq!(plain.supported_thinking_levels(), vec![Off]);
    }

    #[test]
    fn clamp_walks_up_then_down() {
        assert_eq!(clamp_thinking(&[Off, Low, High], Minimal), Low);
        assert_eq!(clamp_thinking(&[Off, Low, High], Max), High);
        assert_eq!(clamp_thinking(&[Off], High), Off);
        assert_eq!(clamp_thinking(&[Minimal, Low], Off), Minimal);
        assert_eq!(clamp_thinking(&[], High), Off);
    }

    #[test]
    fn public_descriptor_has_no_secrets() {
        let mut model = test_model();
        model.api_key = Some("sk-secret".into());
        model.headers.insert("x-key".into(), "hidden".into());
        let json = serde_json::to_string(&model.public()).unwrap_or_default();
        assert!(
            !json.contains("secret") && !json.contains("hidden") && !json.contains("127.0.0.1")
        );
    }
}
