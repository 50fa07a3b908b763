//! The models of the subscription providers (docs/providers.md#subscriptions): ChatGPT's Codex
//! models (`openai-codex`, through the `openai-codex-responses` API) and the models a GitHub
//! Copilot plan offers (`github-copilot`, each through the API that serves it).
//!
//! Prices are 0: the plan pays, and usage still reports the tokens.

use zi_protocol::ThinkingLevel as L;

use super::Thinking::{self, Adaptive, AlwaysOn, Map, Plain, Standard};
use super::{Entry, e, model_of};
use crate::auth::{CODEX, COPILOT};
use crate::model::{Api, Compat, Model};

/// General GPT models on Codex: `off` is `none`, `minimal` is sent as `low`, `xhigh` exists.
const CODEX_GENERAL: Thinking = Map(&[
    (L::Off, Some("none")),
    (L::Minimal, Some("low")),
    (L::Xhigh, Some("xhigh")),
]);
/// `-codex-` models cannot turn reasoning off.
const CODEX_ONLY: Thinking = Map(&[
    (L::Off, None),
    (L::Minimal, Some("low")),
    (L::Xhigh, Some("xhigh")),
]);
const COPILOT_GPT5: Thinking = Map(&[
    (L::Off, None),
    (L::Minimal, Some("low")),
    (L::Xhigh, Some("xhigh")),
]);
const COPILOT_GPT5_MINI: Thinking = Map(&[(L::Off, None), (L::Minimal, Some("low"))]);

/// A subscription model: the common entry and the API that serves it.
struct Sub {
    api: Api,
    entry: Entry,
}

#[allow(clippy::too_many_arguments)]
const fn s(
    provider: &'static str,
    id: &'static str,
    name: &'static str,
    api: Api,
    thinking: Thinking,
    image: bool,
    context: u64,
    max_tokens: u64,
) -> Sub {
    Sub {
        api,
        // The plan pays: no per-token price.
        entry: e(
            provider, id, name, thinking, image, context, max_tokens, [0.0; 4],
        ),
    }
}

const CODEX_API: Api = Api::OpenAiCodexResponses;
const MESSAGES: Api = Api::AnthropicMessages;
const COMPLETIONS: Api = Api::OpenAiCompletions;
const RESPONSES: Api = Api::OpenAiResponses;

#[rustfmt::skip]
const MODELS: &[Sub] = &[
    s(CODEX, "gpt-5.5", "GPT-5.5 (ChatGPT)", CODEX_API, CODEX_GENERAL, true, 272_000, 128_000),
    s(CODEX, "gpt-5.4", "GPT-5.4 (ChatGPT)", CODEX_API, CODEX_GENERAL, true, 272_000, 128_000),
    s(CODEX, "gpt-5.4-mini", "GPT-5.4 mini (ChatGPT)", CODEX_API, CODEX_GENERAL, true, 272_000, 128_000),
    s(CODEX, "gpt-5.3-codex-spark", "GPT-5.3 Codex Spark (ChatGPT)", CODEX_API, CODEX_ONLY, false, 128_000, 128_000),
    s(COPILOT, "claude-sonnet-4.5", "Claude Sonnet 4.5 (Copilot)", MESSAGES, Standard, true, 200_000, 32_000),
    s(COPILOT, "claude-sonnet-4.6", "Claude Sonnet 4.6 (Copilot)", MESSAGES, Adaptive, true, 1_000_000, 32_000),
    s(COPILOT, "claude-sonnet-4", "Claude Sonnet 4 (Copilot)", MESSAGES, Standard, true, 216_000, 16_000),
    s(COPILOT, "claude-opus-4.8", "Claude Opus 4.8 (Copilot)", MESSAGES, Adaptive, true, 200_000, 64_000),
    s(COPILOT, "claude-opus-4.7", "Claude Opus 4.7 (Copilot)", MESSAGES, Adaptive, true, 200_000, 32_000),
    s(COPILOT, "claude-opus-4.6", "Claude Opus 4.6 (Copilot)", MESSAGES, Adaptive, true, 1_000_000, 32_000),
    s(COPILOT, "claude-opus-4.5", "Claude Opus 4.5 (Copilot)", MESSAGES, Standard, true, 200_000, 32_000),
    s(COPILOT, "claude-haiku-4.5", "Claude Haiku 4.5 (Copilot)", MESSAGES, Standard, true, 200_000, 64_000),
    s(COPILOT, "gpt-5.5", "GPT-5.5 (Copilot)", RESPONSES, COPILOT_GPT5, true, 400_000, 128_000),
    s(COPILOT, "gpt-5.4", "GPT-5.4 (Copilot)", RESPONSES, COPILOT_GPT5, true, 400_000, 128_000),
    s(COPILOT, "gpt-5.4-mini", "GPT-5.4 mini (Copilot)", RESPONSES, COPILOT_GPT5, true, 400_000, 128_000),
    s(COPILOT, "gpt-5.4-nano", "GPT-5.4 nano (Copilot)", RESPONSES, COPILOT_GPT5, true, 400_000, 128_000),
    s(COPILOT, "gpt-5.3-codex", "GPT-5.3 Codex (Copilot)", RESPONSES, COPILOT_GPT5, true, 400_000, 128_000),
    s(COPILOT, "gpt-5.2-codex", "GPT-5.2 Codex (Copilot)", RESPONSES, COPILOT_GPT5, true, 400_000, 128_000),
    s(COPILOT, "gpt-5.2", "GPT-5.2 (Copilot)", RESPONSES, COPILOT_GPT5, true, 400_000, 128_000),
    s(COPILOT, "gpt-5-mini", "GPT-5 mini (Copilot)", RESPONSES, COPILOT_GPT5_MINI, true, 264_000, 64_000),
    s(COPILOT, "gpt-4.1", "GPT-4.1 (Copilot)", COMPLETIONS, Plain, true, 128_000, 16_384),
    s(COPILOT, "gemini-3.1-pro-preview", "Gemini 3.1 Pro Preview (Copilot)", COMPLETIONS, AlwaysOn, true, 200_000, 64_000),
    s(COPILOT, "gemini-3-flash-preview", "Gemini 3 Flash Preview (Copilot)", COMPLETIONS, AlwaysOn, true, 128_000, 64_000),
    s(COPILOT, "gemini-2.5-pro", "Gemini 2.5 Pro (Copilot)", COMPLETIONS, AlwaysOn, true, 128_000, 64_000),
];

/// The subscription providers' models, in catalog order.
pub(super) fn models() -> Vec<Model> {
    MODELS
        .iter()
        .map(|sub| model_of(&sub.entry, sub.api, compat(sub)))
        .collect()
}

/// Copilot's chat-completions endpoint takes neither a `developer` role nor an effort.
fn compat(sub: &Sub) -> Compat {
    let completions = sub.api == Api::OpenAiCompletions;
    Compat {
        adaptive_thinking: matches!(sub.entry.thinking, Adaptive),
        supports_developer_role: false,
        supports_reasoning_effort: !completions && !matches!(sub.entry.thinking, AlwaysOn),
        ..Compat::default()
    }
}

/// The ids of a provider's built-in models (the Copilot models enabled after sign-in).
pub fn model_ids(provider: &str) -> Vec<&'static str> {
    MODELS
        .iter()
        .filter(|sub| sub.entry.provider == provider)
        .map(|sub| sub.entry.id)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subscription_models_think_as_their_family() {
        let models = models();
        let find = |provider: &str, id: &str| {
            models
                .iter()
                .find(|m| m.provider == provider && m.id == id)
                .unwrap_or_else(|| panic!("{provider}/{id}"))
        };
        let codex = find(CODEX, "gpt-5.5");
        assert_eq!(codex.api, Api::OpenAiCodexResponses);
        assert_eq!(codex.request_effort(L::Off).as_deref(), Some("none"));
        assert_eq!(codex.request_effort(L::Minimal).as_deref(), Some("low"));
        assert!(codex.supported_thinking_levels().contains(&L::Xhigh));
        let spark = find(CODEX, "gpt-5.3-codex-spark");
        assert!(!spark.supported_thinking_levels().contains(&L::Off));
        assert_eq!(
            find(COPILOT, "claude-sonnet-4.5").api,
            Api::AnthropicMessages
        );
        let gemini = find(COPILOT, "gemini-2.5-pro");
        assert_eq!(gemini.supported_thinking_levels(), vec![L::High]);
        assert!(!gemini.compat.supports_reasoning_effort);
        assert!(model_ids(COPILOT).contains(&"gpt-4.1"));
        assert!(models.iter().all(|m| m.cost == Default::default()));
    }
}
