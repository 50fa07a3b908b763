//! Result payloads of the RPC methods (rpc-reference §4).

use serde::{Deserialize, Serialize};

use crate::ThinkingLevel;
use crate::message::{AgentMessage, StopReason};
use crate::request::{Delivery, EventMode, SettingsScope};
use crate::state::{CatalogModel, RpcModel};

/// `session.get_messages`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct MessagePage {
    pub start: u64,
    pub total: u64,
    pub next_start: Option<u64>,
    pub messages: Vec<AgentMessage>,
}

/// `session.get_outcomes`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct OutcomePage {
    pub start: u64,
    pub total: u64,
    pub next_start: Option<u64>,
    /// `operation_outcome` entries, exactly as the live `operation_outcome` event carries them.
    pub outcomes: Vec<crate::event::SessionEntry>,
}

/// `session.prompt`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct PromptResult {
    pub delivery: Delivery,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub completion_revision: Option<u64>,
}

/// The bounded completion evidence of `session.await_idle` with a `completionId`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct Completion {
    pub text: String,
    pub stop_reason: StopReason,
    pub original_bytes: u64,
    pub omitted_bytes: u64,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub error: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct CompletionResult {
    pub completion_revision: u64,
    pub message_count: u64,
    pub completion: Option<Completion>,
}

/// `connection.set_events`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct EventModeResult {
    pub mode: EventMode,
}

/// `command.list` item.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct CommandDescriptor {
    pub name: String,
    pub description: String,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub argument_hint: Option<String>,
    pub extension_id: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct CommandList {
    pub commands: Vec<CommandDescriptor>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ModelList {
    pub models: Vec<CatalogModel>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ModelSelection {
    pub model: RpcModel,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ThinkingLevels {
    pub levels: Vec<ThinkingLevel>,
}

/// `thinking.select`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ThinkingSelection {
    pub scope: SettingsScope,
    pub requested: ThinkingLevel,
    pub effective: ThinkingLevel,
}

/// Clips a string to at most `max` bytes at a UTF-8 boundary (rpc-reference §8). Returns the
/// clipped text and the number of bytes omitted.
pub fn clip_utf8(text: &str, max: usize) -> (&str, usize) {
    if text.len() <= max {
        return (text, 0);
    }
    let mut end = max;
    while end > 0 && !text.is_char_boundary(end) {
        end -= 1;
    }
    (&text[..end], text.len() - end)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clipping_respects_char_boundaries() {
        assert_eq!(clip_utf8("abc", 3), ("abc", 0));
        assert_eq!(clip_utf8("abcd", 3), ("abc", 1));
        // "é" is two bytes; cutting inside it backs off to the boundary.
        assert_eq!(clip_utf8("aé", 2), ("a", 2));
        assert_eq!(clip_utf8("€€", 4), ("€", 3));
    }
}
