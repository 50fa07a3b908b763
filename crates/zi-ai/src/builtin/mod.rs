//! The built-in model catalog: current models of anthropic, openai, google and the common
//! OpenAI-compatible vendors, with their API, endpoint, reasoning support, thinking-level map,
//! input kinds, limits and prices (dollars per million tokens).
//!
//! `models.json` can override any field of these models and add providers and models
//! ([`crate::catalog`]). The subscription providers' models (`openai-codex`, `github-copilot`)
//! are listed in [`subscriptions`].

use std::collections::BTreeMap;

use zi_protocol::ThinkingLevel;
use zi_protocol::state::InputKind;

use crate::model::{Api, Compat, MaxTokensField, Model, ModelCost, ThinkingFormat};

mod subscriptions;
pub use subscriptions::model_ids;

/// A built-in provider.
pub struct Provider {
    /// The provider id models name (`anthropic`, `openai`, …).
    pub id: &'static str,
    /// The API of its models (a subscription provider's models may each name their own).
    pub api: Api,
    /// Where its API is served, unless models.json overrides it.
    pub base_url: &'static str,
    /// The environment variable holding its API key (none for a subscription, which signs in).
    pub env_var: Option<&'static str>,
}

/// Every built-in provider: its defaults, and where its key is found.
pub const PROVIDERS: &[Provider] = &[
    Provider {
        id: "anthropic",
        api: Api::AnthropicMessages,
        base_url: "https://api.anthropic.com/v1",
        env_var: Some("ANTHROPIC_API_KEY"),
    },
    Provider {
        id: "openai",
        api: Api::OpenAiResponses,
        base_url: "https://api.openai.com/v1",
        env_var: Some("OPENAI_API_KEY"),
    },
    Provider {
        id: "google",
        api: Api::GoogleGenerativeAi,
        base_url: "https://generativelanguage.googleapis.com/v1beta",
        env_var: Some("GEMINI_API_KEY"),
    },
    Provider {
        id: "openrouter",
        api: Api::OpenAiCompletions,
        base_url: "https://openrouter.ai/api/v1",
        env_var: Some("OPENROUTER_API_KEY"),
    },
    Provider {
        id: "groq",
        api: Api::OpenAiCompletions,
        base_url: "https://api.groq.com/openai/v1",
        env_var: Some("GROQ_API_KEY"),
    },
    Provider {
        id: "xai",
        api: Api::OpenAiCompletions,
        base_url: "https://api.x.ai/v1",
        env_var: Some("XAI_API_KEY"),
    },
    Provider {
        id: "deepseek",
        api: Api::OpenAiCompletions,
        base_url: "https://api.deepseek.com/v1",
        env_var: Some("DEEPSEEK_API_KEY"),
    },
    Provider {
        id: "mistral",
        api: Api::OpenAiCompletions,
        base_url: "https://api.mistral.ai/v1",
        env_var: Some("MISTRAL_API_KEY"),
    },
    Provider {
        id: "cerebras",
        api: Api::OpenAiCompletions,
        base_url: "https://api.cerebras.ai/v1",
        env_var: Some("CEREBRAS_API_KEY"),
    },
    Provider {
        id: crate::auth::CODEX,
        api: Api::OpenAiCodexResponses,
        base_url: "https://chatgpt.com/backend-api",
        env_var: None,
    },
    Provider {
        id: crate::auth::COPILOT,
        api: Api::OpenAiResponses,
        base_url: crate::auth::copilot::DEFAULT_API_BASE,
        env_var: None,
    },
];

/// Models tried, in order, when neither a flag nor the settings name one
/// (docs/providers.md#initial-model).
pub const PREFERRED_MODELS: &[&str] = &[
    "anthropic/claude-opus-4-8",
    "openai/gpt-5.5",
    "google/gemini-3.1-pro-preview",
    "openrouter/moonshotai/kimi-k2.6",
    "openai-codex/gpt-5.5",
    "github-copilot/claude-sonnet-4.5",
];

/// The built-in provider `id` names, if any.
pub fn provider(id: &str) -> Option<&'static Provider> {
    PROVIDERS.iter().find(|p| p.id == id)
}

/// The environment variable of a built-in provider's key.
pub fn env_var(provider_id: &str) -> Option<&'static str> {
    provider(provider_id).and_then(|p| p.env_var)
}

/// How a model thinks, as a compact description for the tables.
#[derive(Clone, Copy)]
pub(super) enum Thinking {
    Plain,
    /// Every level up to `high` under its own name.
    Standard,
    /// Standard, with `off` sent as the given effort (OpenAI `none`) and `xhigh` mapped.
    OpenAi {
        off: Option<&'static str>,
        xhigh: bool,
    },
    /// Anthropic adaptive effort (`low`…`max`).
    Adaptive,
    /// Gemini 3 `thinkingLevel` (`low`, `high`).
    GeminiLevels,
    /// A model that always reasons and takes no effort parameter.
    AlwaysOn,
    /// An explicit map: each level to its effort, `None` for an unsupported level.
    Map(&'static [(ThinkingLevel, Option<&'static str>)]),
}

pub(super) struct Entry {
    provider: &'static str,
    id: &'static str,
    name: &'static str,
    thinking: Thinking,
    image: bool,
    context: u64,
    max_tokens: u64,
    /// input, output, cache read, cache write.
    cost: [f64; 4],
}

#[allow(clippy::too_many_arguments)]
pub(super) const fn e(
    provider: &'static str,
    id: &'static str,
    name: &'static str,
    thinking: Thinking,
    image: bool,
    context: u64,
    max_tokens: u64,
    cost: [f64; 4],
) -> Entry {
    Entry {
        provider,
        id,
        name,
        thinking,
        image,
        context,
        max_tokens,
        cost,
    }
}

use Thinking::*;

const NONE_XHIGH: Thinking = OpenAi {
    off: Some("none"),
    xhigh: true,
};
const MINIMAL: Thinking = OpenAi {
    off: None,
    xhigh: false,
};

#[rustfmt::skip]
const MODELS: &[Entry] = &[
    e("anthropic", "claude-opus-4-8", "Claude Opus 4.8", Adaptive, true, 200_000, 128_000, [5.0, 25.0, 0.5, 6.25]),
    e("anthropic", "claude-opus-4-6", "Claude Opus 4.6", Adaptive, true, 200_000, 128_000, [5.0, 25.0, 0.5, 6.25]),
    e("anthropic", "claude-opus-4-5", "Claude Opus 4.5", Standard, true, 200_000, 64_000, [5.0, 25.0, 0.5, 6.25]),
    e("anthropic", "claude-sonnet-4-5", "Claude Sonnet 4.5", Standard, true, 200_000, 64_000, [3.0, 15.0, 0.3, 3.75]),
    e("anthropic", "claude-haiku-4-5", "Claude Haiku 4.5", Standard, true, 200_000, 64_000, [1.0, 5.0, 0.1, 1.25]),
    e("anthropic", "claude-opus-4-1", "Claude Opus 4.1", Standard, true, 200_000, 32_000, [15.0, 75.0, 1.5, 18.75]),
    e("anthropic", "claude-sonnet-4-0", "Claude Sonnet 4", Standard, true, 200_000, 64_000, [3.0, 15.0, 0.3, 3.75]),
    e("openai", "gpt-5.5", "GPT-5.5", NONE_XHIGH, true, 400_000, 128_000, [1.25, 10.0, 0.125, 0.0]),
    e("openai", "gpt-5.2", "GPT-5.2", NONE_XHIGH, true, 400_000, 128_000, [1.75, 14.0, 0.175, 0.0]),
    e("openai", "gpt-5.1", "GPT-5.1", OpenAi { off: Some("none"), xhigh: false }, true, 400_000, 128_000, [1.25, 10.0, 0.125, 0.0]),
    e("openai", "gpt-5", "GPT-5", MINIMAL, true, 400_000, 128_000, [1.25, 10.0, 0.125, 0.0]),
    e("openai", "gpt-5-mini", "GPT-5 mini", MINIMAL, true, 400_000, 128_000, [0.25, 2.0, 0.025, 0.0]),
    e("openai", "gpt-5-nano", "GPT-5 nano", MINIMAL, true, 400_000, 128_000, [0.05, 0.4, 0.005, 0.0]),
    e("openai", "gpt-4.1", "GPT-4.1", Plain, true, 1_047_576, 32_768, [2.0, 8.0, 0.5, 0.0]),
    e("openai", "gpt-4.1-mini", "GPT-4.1 mini", Plain, true, 1_047_576, 32_768, [0.4, 1.6, 0.1, 0.0]),
    e("openai", "gpt-4o", "GPT-4o", Plain, true, 128_000, 16_384, [2.5, 10.0, 1.25, 0.0]),
    e("openai", "o3", "o3", Standard, true, 200_000, 100_000, [2.0, 8.0, 0.5, 0.0]),
    e("openai", "o4-mini", "o4-mini", Standard, true, 200_000, 100_000, [1.1, 4.4, 0.275, 0.0]),
    e("google", "gemini-3.1-pro-preview", "Gemini 3.1 Pro Preview", GeminiLevels, true, 1_048_576, 65_536, [2.0, 12.0, 0.2, 0.0]),
    e("google", "gemini-3-pro-preview", "Gemini 3 Pro Preview", GeminiLevels, true, 1_048_576, 65_536, [2.0, 12.0, 0.2, 0.0]),
    e("google", "gemini-3-flash-preview", "Gemini 3 Flash Preview", GeminiLevels, true, 1_048_576, 65_536, [0.5, 3.0, 0.05, 0.0]),
    e("google", "gemini-2.5-pro", "Gemini 2.5 Pro", Standard, true, 1_048_576, 65_536, [1.25, 10.0, 0.31, 0.0]),
    e("google", "gemini-2.5-flash", "Gemini 2.5 Flash", Standard, true, 1_048_576, 65_536, [0.3, 2.5, 0.075, 0.0]),
    e("google", "gemini-2.5-flash-lite", "Gemini 2.5 Flash-Lite", Standard, true, 1_048_576, 65_536, [0.1, 0.4, 0.025, 0.0]),
    e("openrouter", "moonshotai/kimi-k2.6", "Kimi K2.6", Standard, false, 262_144, 65_536, [0.6, 2.5, 0.15, 0.0]),
    e("openrouter", "anthropic/claude-sonnet-4.5", "Claude Sonnet 4.5 (OpenRouter)", Standard, true, 1_000_000, 64_000, [3.0, 15.0, 0.3, 3.75]),
    e("openrouter", "openai/gpt-5", "GPT-5 (OpenRouter)", Standard, true, 400_000, 128_000, [1.25, 10.0, 0.125, 0.0]),
    e("openrouter", "google/gemini-2.5-pro", "Gemini 2.5 Pro (OpenRouter)", Standard, true, 1_048_576, 65_536, [1.25, 10.0, 0.31, 0.0]),
    e("openrouter", "deepseek/deepseek-chat-v3.1", "DeepSeek V3.1 (OpenRouter)", Standard, false, 163_840, 65_536, [0.2, 0.8, 0.0, 0.0]),
    e("openrouter", "qwen/qwen3-coder", "Qwen3 Coder (OpenRouter)", Plain, false, 262_144, 65_536, [0.22, 0.95, 0.0, 0.0]),
    e("groq", "openai/gpt-oss-120b", "GPT OSS 120B (Groq)", Standard, false, 131_072, 65_536, [0.15, 0.75, 0.0, 0.0]),
    e("groq", "openai/gpt-oss-20b", "GPT OSS 20B (Groq)", Standard, false, 131_072, 65_536, [0.1, 0.5, 0.0, 0.0]),
    e("groq", "moonshotai/kimi-k2-instruct-0905", "Kimi K2 (Groq)", Plain, false, 262_144, 16_384, [1.0, 3.0, 0.0, 0.0]),
    e("groq", "llama-3.3-70b-versatile", "Llama 3.3 70B (Groq)", Plain, false, 131_072, 32_768, [0.59, 0.79, 0.0, 0.0]),
    e("xai", "grok-4", "Grok 4", AlwaysOn, true, 256_000, 64_000, [3.0, 15.0, 0.75, 0.0]),
    e("xai", "grok-4-fast", "Grok 4 Fast", AlwaysOn, true, 2_000_000, 30_000, [0.2, 0.5, 0.05, 0.0]),
    e("xai", "grok-code-fast-1", "Grok Code Fast 1", AlwaysOn, false, 256_000, 10_000, [0.2, 1.5, 0.02, 0.0]),
    e("xai", "grok-3-mini", "Grok 3 Mini", OpenAi { off: None, xhigh: false }, false, 131_072, 8_192, [0.3, 0.5, 0.075, 0.0]),
    e("deepseek", "deepseek-chat", "DeepSeek V3.2 (chat)", Plain, false, 128_000, 8_192, [0.28, 0.42, 0.028, 0.0]),
    e("deepseek", "deepseek-reasoner", "DeepSeek V3.2 (reasoner)", AlwaysOn, false, 128_000, 64_000, [0.28, 0.42, 0.028, 0.0]),
    e("mistral", "mistral-large-latest", "Mistral Large", Plain, true, 262_144, 32_768, [0.5, 1.5, 0.0, 0.0]),
    e("mistral", "mistral-medium-latest", "Mistral Medium", Plain, true, 131_072, 32_768, [0.4, 2.0, 0.0, 0.0]),
    e("mistral", "devstral-medium-latest", "Devstral Medium", Plain, false, 131_072, 32_768, [0.4, 2.0, 0.0, 0.0]),
    e("mistral", "codestral-latest", "Codestral", Plain, false, 256_000, 32_768, [0.3, 0.9, 0.0, 0.0]),
    e("mistral", "magistral-medium-latest", "Magistral Medium", AlwaysOn, false, 131_072, 40_000, [2.0, 5.0, 0.0, 0.0]),
    e("cerebras", "gpt-oss-120b", "GPT OSS 120B (Cerebras)", Standard, false, 131_072, 32_768, [0.35, 0.75, 0.0, 0.0]),
    e("cerebras", "qwen-3-235b-a22b-instruct-2507", "Qwen 3 235B Instruct (Cerebras)", Plain, false, 131_072, 32_768, [0.6, 1.2, 0.0, 0.0]),
    e("cerebras", "zai-glm-4.6", "GLM 4.6 (Cerebras)", Plain, false, 131_072, 40_000, [2.25, 2.75, 0.0, 0.0]),
];

fn level_map(thinking: Thinking) -> BTreeMap<ThinkingLevel, Option<String>> {
    use ThinkingLevel as L;
    let mut map = BTreeMap::new();
    let mut set = |level: L, value: Option<&str>| {
        map.insert(level, value.map(str::to_string));
    };
    match thinking {
        Plain | Standard => {}
        OpenAi { off, xhigh } => {
            if let Some(off) = off {
                set(L::Off, Some(off));
            }
            if xhigh {
                set(L::Xhigh, Some("xhigh"));
            }
        }
        Adaptive => {
            set(L::Minimal, Some("low"));
            set(L::Max, Some("max"));
        }
        GeminiLevels => {
            set(L::Minimal, Some("low"));
            set(L::Low, Some("low"));
            set(L::Medium, Some("high"));
            set(L::High, Some("high"));
        }
        AlwaysOn => {
            // The model reasons whatever is asked; only one level describes it.
            set(L::Off, Option::None);
            set(L::Minimal, Option::None);
            set(L::Low, Option::None);
            set(L::Medium, Option::None);
        }
        Map(levels) => {
            for (level, value) in levels {
                set(*level, *value);
            }
        }
    }
    map
}

fn compat_for(provider: &str, entry: &Entry) -> Compat {
    let mut compat = Compat {
        adaptive_thinking: matches!(entry.thinking, Adaptive),
        ..Compat::default()
    };
    match provider {
        "openrouter" => {
            compat.thinking_format = ThinkingFormat::OpenRouter;
            compat.max_tokens_field = MaxTokensField::MaxTokens;
        }
        "xai" => {
            compat.supports_reasoning_effort = matches!(entry.thinking, OpenAi { .. });
        }
        "deepseek" | "mistral" => {
            compat.supports_reasoning_effort = false;
            compat.max_tokens_field = MaxTokensField::MaxTokens;
            compat.supports_usage_in_streaming = provider == "deepseek";
            if provider == "mistral" {
                compat.requires_tool_result_name = true;
                compat.requires_mistral_tool_ids = true;
                compat.requires_assistant_after_tool_result = true;
            }
        }
        "groq" | "cerebras" => {}
        _ => {}
    }
    if matches!(entry.thinking, AlwaysOn) {
        compat.supports_reasoning_effort = false;
    }
    compat
}

/// Every built-in model, in catalog order.
pub fn models() -> Vec<Model> {
    let mut models = api_key_models();
    models.extend(subscriptions::models());
    models
}

fn api_key_models() -> Vec<Model> {
    MODELS
        .iter()
        .filter_map(|entry| {
            let provider = provider(entry.provider)?;
            Some(model_of(
                entry,
                provider.api,
                compat_for(provider.id, entry),
            ))
        })
        .collect()
}

/// The model an entry describes, reached through `api` at its provider's base URL.
pub(super) fn model_of(entry: &Entry, api: Api, compat: Compat) -> Model {
    let mut input = vec![InputKind::Text];
    if entry.image {
        input.push(InputKind::Image);
    }
    Model {
        provider: entry.provider.to_string(),
        id: entry.id.to_string(),
        name: entry.name.to_string(),
        api,
        base_url: provider(entry.provider)
            .map(|p| p.base_url.to_string())
            .unwrap_or_default(),
        reasoning: !matches!(entry.thinking, Plain),
        thinking_level_map: level_map(entry.thinking),
        input,
        cost: ModelCost {
            input: entry.cost[0],
            output: entry.cost[1],
            cache_read: entry.cost[2],
            cache_write: entry.cost[3],
        },
        context_window: entry.context,
        max_tokens: entry.max_tokens,
        headers: BTreeMap::new(),
        compat,
        api_key: Option::None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ThinkingLevel as L;

    #[test]
    fn every_model_has_a_known_provider_and_sane_limits() {
        let models = models();
        assert_eq!(models.len(), MODELS.len() + subscriptions::models().len());
        for model in &models {
            assert!(
                model.max_tokens <= model.context_window,
                "{}",
                model.reference()
            );
            assert!(!model.supported_thinking_levels().is_empty());
        }
        for preferred in PREFERRED_MODELS {
            assert!(
                models.iter().any(|m| m.reference() == *preferred),
                "{preferred}"
            );
        }
        for provider in PROVIDERS {
            assert!(models.iter().any(|m| m.provider == provider.id));
        }
    }

    #[test]
    fn thinking_maps_describe_each_family() {
        let models = models();
        let find = |r: &str| {
            models
                .iter()
                .find(|m| m.reference() == r)
                .unwrap_or_else(|| panic!("{r}"))
        };
        assert_eq!(
            find("anthropic/claude-opus-4-8").supported_thinking_levels(),
            vec![L::Off, L::Minimal, L::Low, L::Medium, L::High, L::Max]
        );
        assert_eq!(
            find("anthropic/claude-opus-4-8")
                .effort_for(L::Minimal)
                .as_deref(),
            Some("low")
        );
        assert_eq!(
            find("openai/gpt-5.5").supported_thinking_levels(),
            vec![L::Off, L::Minimal, L::Low, L::Medium, L::High, L::Xhigh]
        );
        assert_eq!(
            find("openai/gpt-5.5").effort_for(L::Off).as_deref(),
            Some("none")
        );
        assert_eq!(
            find("xai/grok-4").supported_thinking_levels(),
            vec![L::High]
        );
        assert_eq!(
            find("openai/gpt-4o").supported_thinking_levels(),
            vec![L::Off]
        );
    }
}
