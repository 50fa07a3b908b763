//! Result payloads of the RPC methods (docs/rpc.md#method-summary).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::ThinkingLevel;
use crate::message::{AgentMessage, StopReason, Usage};
use crate::request::{Delivery, EventMode, SettingsScope};
use crate::state::{CatalogModel, RpcModel};

/// `session.get_messages`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct MessagePage {
    /// The index of the first message on the page.
    pub start: u64,
    /// The length of the whole message list.
    pub total: u64,
    /// Where the next page starts; `null` on the last page.
    pub next_start: Option<u64>,
    /// The page.
    pub messages: Vec<AgentMessage>,
}

/// `session.get_outcomes`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct OutcomePage {
    /// The index of the first outcome on the page.
    pub start: u64,
    /// The number of outcomes in the session.
    pub total: u64,
    /// Where the next page starts; `null` on the last page.
    pub next_start: Option<u64>,
    /// `operation_outcome` entries, exactly as the live `operation_outcome` event carries them.
    pub outcomes: Vec<crate::event::SessionEntry>,
}

/// `session.prompt`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct PromptResult {
    /// The delivery, echoed.
    pub delivery: Delivery,
    /// The watch revision this input belongs to, when it armed or joined a completion watch.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub completion_revision: Option<u64>,
}

/// The bounded completion evidence of `session.await_idle` with a `completionId`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct Completion {
    /// The final assistant text, clipped at a UTF-8 boundary.
    pub text: String,
    /// How the final assistant message stopped.
    pub stop_reason: StopReason,
    /// The text's length before clipping, in bytes.
    pub original_bytes: u64,
    /// How many bytes the clipping omitted.
    pub omitted_bytes: u64,
    /// The error message, when the message stopped with an error.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub error: Option<String>,
}

/// `session.await_idle` with a `completionId`: the watch's settled observation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct CompletionResult {
    /// The watch revision observed.
    pub completion_revision: u64,
    /// The message count when the observation settled.
    pub message_count: u64,
    /// The completion evidence; `null` when the cycle produced no assistant message.
    pub completion: Option<Completion>,
    /// What the cycle's assistant messages reported (an extension of v1): the sum of their
    /// `usage`, costs included, over every assistant `message_end` since the watch was armed or
    /// last settled. All zero when the cycle produced no assistant message.
    #[serde(default)]
    pub usage: Usage,
}

/// `connection.set_events`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct EventModeResult {
    /// The mode now in effect.
    pub mode: EventMode,
}

/// `command.list` item.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct CommandDescriptor {
    /// The command name (lowercase kebab-case).
    pub name: String,
    /// What it does.
    pub description: String,
    /// A hint for its arguments, if the extension gives one.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub argument_hint: Option<String>,
    /// The extension that registered it.
    pub extension_id: String,
}

/// `command.list`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct CommandList {
    /// Every extension command.
    pub commands: Vec<CommandDescriptor>,
}

/// `model.list`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ModelList {
    /// The catalog, with whether each model's credentials resolve.
    pub models: Vec<CatalogModel>,
}

/// `model.select`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ModelSelection {
    /// The selected model's public descriptor.
    pub model: RpcModel,
}

/// `thinking.list`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ThinkingLevels {
    /// The levels the selected model supports.
    pub levels: Vec<ThinkingLevel>,
}

/// `thinking.select`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ThinkingSelection {
    /// The settings file that recorded the level.
    pub scope: SettingsScope,
    /// The level asked for.
    pub requested: ThinkingLevel,
    /// The level in effect (clamped to what the model supports).
    pub effective: ThinkingLevel,
}

/// The empty result `{}` (`session.interrupt`, and `session.await_idle` without params).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(feature = "schema", schemars(deny_unknown_fields))]
pub struct EmptyResult {}

/// `session.await_idle`: `{}` without params, the watch's settled observation with a
/// completion id.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(untagged)]
pub enum AwaitIdleResult {
    /// With a completion id: the watch's bounded evidence.
    Completion(CompletionResult),
    /// Without params: the session is idle.
    Idle(EmptyResult),
}

/// `command.invoke`: the command's feedback message, if it returned one.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(feature = "schema", schemars(deny_unknown_fields))]
pub struct CommandInvokeResult {
    /// The feedback message; the key is absent when there is none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(with = "String"))]
    pub message: Option<String>,
}

/// `session.list` item: one journal, read from its header and a scan summary.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct SessionSummary {
    /// The header's session id.
    pub session_id: String,
    /// The journal's absolute path (what `zi -r` takes).
    pub path: String,
    /// The header's working directory.
    pub cwd: String,
    /// The header's timestamp (ISO-8601).
    pub created_at: String,
    /// The file's modification time (ISO-8601 UTC with milliseconds).
    pub modified_at: String,
    /// The number of `message` entries in the journal (every role, compacted ones included).
    pub message_count: u64,
    /// The text of the first user message, clipped to 256 bytes at a UTF-8 boundary (empty
    /// when there is none).
    pub first_user_text: String,
    /// The model recorded last (a model change or an assistant message), if any.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub model: Option<SessionModel>,
}

/// A model named by a journal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct SessionModel {
    /// The provider.
    pub provider: String,
    /// The model id.
    pub id: String,
}

/// `session.list`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct SessionListPage {
    /// The index of the first session on the page.
    pub start: u64,
    /// The number of sessions listed in the scope.
    pub total: u64,
    /// Where the next page starts; `null` on the last page.
    pub next_start: Option<u64>,
    /// The page, newest first.
    pub sessions: Vec<SessionSummary>,
    /// `.jsonl` files in the scope's directories that could not be read or are not zi journals.
    pub skipped: u64,
}

/// `session.get_entries`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct EntryPage {
    /// The index of the first entry on the page.
    pub start: u64,
    /// The number of entries in the whole journal.
    pub total: u64,
    /// Where the next page starts; `null` on the last page.
    pub next_start: Option<u64>,
    /// Journal entries in journal order, as `entry_appended` carries them.
    pub entries: Vec<crate::event::SessionEntry>,
}

/// `session.fork`: the new journal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ForkResult {
    /// The fork's session id.
    pub session_id: String,
    /// The fork's journal path.
    pub path: String,
}

/// `session.compact` (an extension of v1): the committed compaction entry's figures.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct CompactResult {
    /// Estimated tokens of the active context before the compaction.
    pub tokens_before: u64,
    /// Estimated tokens after it (summary, file lists and the retained messages).
    pub estimated_tokens_after: u64,
    /// The first journal entry kept verbatim after the summary.
    pub first_kept_entry_id: String,
}

/// `session.get_stats` (an extension of v1): usage and activity counts of the whole journal,
/// compacted history included.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct SessionStats {
    /// Every model together; `usage.cost` is the sum of the models' costs.
    pub total: UsageStats,
    /// One item per model that answered or was in effect, in order of first appearance.
    pub models: Vec<ModelStats>,
}

/// Usage and counts of a part of a session.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct UsageStats {
    /// Token counts summed over the assistant messages; `cost` priced as `pricing` says.
    pub usage: Usage,
    /// Assistant messages (one per provider call), error and aborted ones included.
    pub turns: u64,
    /// Tool calls the assistant messages requested.
    pub tool_calls: ToolCallCounts,
    /// `retry` entries (automatic retries of a failed provider call).
    pub retries: u64,
    /// `compaction` entries (manual, threshold and overflow).
    pub compactions: u64,
}

/// Tool calls in total and by tool name.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ToolCallCounts {
    /// All tool calls.
    pub total: u64,
    /// Tool calls per tool name, keys in byte order.
    pub by_name: BTreeMap<String, u64>,
}

/// How a model's cost in [`SessionStats`] was priced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum Pricing {
    /// The model's token totals times the catalog's current prices per million tokens.
    Catalog,
    /// The model is no longer in the catalog: the sum of the costs its messages recorded.
    Journal,
}

/// One model's part of [`SessionStats`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ModelStats {
    /// The provider.
    pub provider: String,
    /// The model id.
    pub id: String,
    /// Where the prices of `usage.cost` came from.
    pub pricing: Pricing,
    /// The model's usage and counts (flattened into the item).
    #[serde(flatten)]
    pub stats: UsageStats,
}

/// Clips a string to at most `max` bytes at a UTF-8 boundary (docs/rpc.md#completion-watches).
/// Returns the clipped text and the number of bytes omitted.
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
