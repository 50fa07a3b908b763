//! Context compaction (docs/configuration.md#compaction): planning a safe boundary, summarising the
//! older part of the conversation with the session's model, and committing a `compaction` entry.
//!
//! The run driver ([`crate::run`]) decides when to compact (threshold before a run and between
//! turns, overflow recovery once per run); this module does the work of one compaction.

use std::sync::Arc;

use serde_json::Value;
use tokio_util::sync::CancellationToken;
use zi_ai::stream::stream_assistant;
use zi_ai::{AssistantMessageEvent, LlmContext, Model, StreamOptions};
use zi_config::settings::CompactionSettings;
use zi_journal::memory::Journal;
use zi_os::clock::now_millis;
use zi_protocol::ThinkingLevel;
use zi_protocol::event::{CompactionDetails, CompactionEntry, EntryData};
use zi_protocol::message::{AgentMessage, ContentBlock, MessageContent, StopReason, UserMessage};
use zi_protocol::state::CompactionReason;

use crate::context_usage::estimate_message;

/// Instruction given to the summarising model as its system prompt.
pub(crate) const SUMMARY_SYSTEM_PROMPT: &str = "You are a context summarization assistant. Summarize the supplied conversation instead of continuing it. Preserve exact paths, symbols, decisions, constraints, and error messages. Output only the structured checkpoint.";

const SUMMARY_SECTIONS: &str = "## Goal\n## Constraints & Preferences\n## Progress\n### Done\n### In Progress\n### Blocked\n## Key Decisions\n## Next Steps\n## Critical Context";

/// Most chunks one summary is built from.
const MAX_CHUNKS: usize = 8;
/// Tool arguments and results are clipped to this many characters in the transcript.
const CLIP_CHARS: usize = 2000;
/// Largest summary accepted.
pub(crate) const MAX_SUMMARY_BYTES: usize = 128 * 1024;
/// File lists keep at most this many paths of at most this many bytes.
const MAX_FILES: usize = 256;
const MAX_PATH_BYTES: usize = 4096;

/// There is no older conversation to summarise: everything is within the kept tail.
pub const NOTHING_TO_COMPACT: &str = "Nothing to compact";
/// The summary and the kept tail are no smaller than what they would replace.
pub const NOT_REDUCED: &str = "Compaction summary did not reduce the active context";
/// The summary model answered with no text.
pub const SUMMARY_EMPTY: &str = "Compaction summary is empty";
/// The summary stream ended without a final message.
pub const SUMMARY_ENDED: &str = "Summary stream ended unexpectedly";
/// The summary request failed and the provider gave no message.
pub const SUMMARY_FAILED: &str = "Summary request failed";
/// The session moved on (new entries, another model) while the summary was being written.
pub const STALE: &str = "Compaction is stale: the session changed while it ran";

/// The summary is over [`MAX_SUMMARY_BYTES`].
pub fn summary_too_large() -> String {
    format!("Compaction summary exceeds {MAX_SUMMARY_BYTES} bytes")
}

/// Why a compaction cannot be planned or committed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub(crate) enum PlanError {
    #[error("{NOTHING_TO_COMPACT}")]
    NothingToCompact,
    #[error("{NOT_REDUCED}")]
    NotReduced,
}
pub(crate) const SECOND_OVERFLOW: &str = "Context still exceeds the model window after one recovery; use /compact, select a larger-context model, or start a new session.";

/// Effective limits for one model (docs/configuration.md#when-zi-compacts).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Limits {
    pub(crate) reserve: u64,
    pub(crate) trigger: u64,
    pub(crate) keep_recent: u64,
    pub(crate) summary_max_tokens: u64,
}

impl Limits {
    pub(crate) fn new(model: &Model, settings: &CompactionSettings) -> Limits {
        let window = model.context_window;
        let reserve = settings.reserve_tokens.min(window / 4).max(1);
        let trigger = window.saturating_sub(reserve).max(1);
        let keep_recent = settings
            .keep_recent_tokens
            .min(window.saturating_sub(reserve) / 2)
            .max(1);
        let cap = if model.max_tokens == 0 {
            reserve
        } else {
            model.max_tokens
        };
        let summary_max_tokens = cap.min(reserve * 4 / 5).max(1);
        Limits {
            reserve,
            trigger,
            keep_recent,
            summary_max_tokens,
        }
    }
}

/// What one compaction will do.
#[derive(Debug, Clone)]
pub(crate) struct Plan {
    pub(crate) source: Vec<AgentMessage>,
    pub(crate) previous_summary: Option<String>,
    pub(crate) first_kept_entry_id: String,
    pub(crate) tokens_before: u64,
    pub(crate) retained_tokens: u64,
    pub(crate) compacted_entries: u64,
    pub(crate) details: CompactionDetails,
    /// The journal leaf when planned; a commit against another leaf is stale.
    pub(crate) leaf_id: Option<String>,
}

/// Plans a compaction of the active context (docs/configuration.md#what-is-kept).
pub(crate) fn plan(
    journal: &Journal,
    keep_recent: u64,
    excluded: Option<&str>,
) -> Result<Plan, PlanError> {
    let entries = journal.entries();
    let previous = journal.latest_compaction();
    let indices: Vec<usize> = journal
        .context_indices()
        .into_iter()
        .filter(|&i| !matches!(entries[i].data, EntryData::Compaction(_)))
        .filter(|&i| Some(entries[i].id.as_str()) != excluded)
        .collect();
    let messages: Vec<AgentMessage> = indices
        .iter()
        .filter_map(|&i| zi_journal::memory::entry_message(&entries[i]).map(|m| m.into_owned()))
        .collect();
    let tokens: Vec<u64> = messages.iter().map(estimate_message).collect();
    let summary_tokens = previous.map_or(0, |p| p.summary.len().div_ceil(4) as u64);
    let tokens_before = summary_tokens + tokens.iter().sum::<u64>();

    // Walk back until the retained tail holds at least `keep_recent` tokens.
    let mut boundary = messages.len();
    let mut retained = 0u64;
    while boundary > 0 && retained < keep_recent {
        boundary -= 1;
        retained += tokens[boundary];
    }
    // The retained tail never starts with a tool result: step back to the assistant message
    // that issued the calls.
    while boundary > 0 && matches!(messages[boundary], AgentMessage::ToolResult(_)) {
        boundary -= 1;
        retained += tokens[boundary];
    }
    if boundary < 2 || boundary >= messages.len() {
        return Err(PlanError::NothingToCompact);
    }
    let source = messages[..boundary].to_vec();
    let details = gather_details(previous.map(|p| &p.details), &source);
    Ok(Plan {
        first_kept_entry_id: entries[indices[boundary]].id.clone(),
        compacted_entries: boundary as u64,
        source,
        previous_summary: previous.map(|p| p.summary.clone()),
        tokens_before,
        retained_tokens: retained,
        details,
        leaf_id: journal.leaf_id().map(str::to_string),
    })
}

/// Paths from successful `read`, `write` and `edit` calls — the model's, and those a Code Mode
/// cell made (its result's `details.calls`) — carried forward from the previous marker; a
/// modified file leaves the read list.
fn gather_details(
    previous: Option<&CompactionDetails>,
    source: &[AgentMessage],
) -> CompactionDetails {
    let mut read: Vec<String> = previous.map(|p| p.read_files.clone()).unwrap_or_default();
    let mut modified: Vec<String> = previous
        .map(|p| p.modified_files.clone())
        .unwrap_or_default();
    let failed: Vec<&str> = source
        .iter()
        .filter_map(|m| match m {
            AgentMessage::ToolResult(r) if r.is_error => Some(r.tool_call_id.as_str()),
            _ => None,
        })
        .collect();
    for message in source {
        if let AgentMessage::ToolResult(result) = message {
            nested_file_calls(result.details.as_ref(), &mut read, &mut modified);
        }
        let Some(assistant) = message.as_assistant() else {
            continue;
        };
        for call in assistant.tool_calls() {
            if failed.contains(&call.id.as_str()) {
                continue;
            }
            let Some(path) = call.arguments.get("path").and_then(|p| p.as_str()) else {
                continue;
            };
            if path.len() > MAX_PATH_BYTES {
                continue;
            }
            match call.name.as_str() {
                "read" => read.push(path.to_string()),
                "write" | "edit" => modified.push(path.to_string()),
                _ => {}
            }
        }
    }
    modified.sort();
    modified.dedup();
    read.sort();
    read.dedup();
    read.retain(|p| !modified.contains(p));
    let omitted_read = read.len().saturating_sub(MAX_FILES) as u64;
    let omitted_modified = modified.len().saturating_sub(MAX_FILES) as u64;
    read.truncate(MAX_FILES);
    modified.truncate(MAX_FILES);
    CompactionDetails {
        read_files: read,
        modified_files: modified,
        omitted_read_files: omitted_read + previous.map_or(0, |p| p.omitted_read_files),
        omitted_modified_files: omitted_modified + previous.map_or(0, |p| p.omitted_modified_files),
    }
}

/// The files a Code Mode cell's successful `read`, `write` and `edit` calls named
/// (docs/code-mode.md#evidence), even when the cell itself failed afterwards. A path cut for the
/// details (`… [N bytes]`) is not a path and is skipped.
fn nested_file_calls(details: Option<&Value>, read: &mut Vec<String>, modified: &mut Vec<String>) {
    let Some(details) = details.filter(|d| d["type"] == "code_mode") else {
        return;
    };
    for call in details["calls"].as_array().into_iter().flatten() {
        let Some(path) = call["arguments"]["path"].as_str() else {
            continue;
        };
        if call["state"] != "ok" || path.len() > MAX_PATH_BYTES || path.contains("… [") {
            continue;
        }
        match call["name"].as_str() {
            Some("read") => read.push(path.to_string()),
            Some("write" | "edit") => modified.push(path.to_string()),
            _ => {}
        }
    }
}

fn clip(text: &str) -> String {
    match text.char_indices().nth(CLIP_CHARS) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text.to_string(),
    }
}

fn content_text(content: &MessageContent) -> String {
    match content {
        MessageContent::Text(text) => text.clone(),
        MessageContent::Parts(parts) => blocks_text(parts),
    }
}

fn blocks_text(parts: &[ContentBlock]) -> String {
    parts
        .iter()
        .filter_map(|p| match p {
            ContentBlock::Text { text, .. } => Some(text.clone()),
            ContentBlock::Image { mime_type, .. } => Some(format!("[image: {mime_type}]")),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Serialises messages into the labelled transcript blocks of
/// docs/configuration.md#the-summary-request.
pub(crate) fn transcript_blocks(messages: &[AgentMessage]) -> Vec<String> {
    let mut blocks = Vec::new();
    for message in messages {
        match message {
            AgentMessage::User(m) => blocks.push(format!("[User]\n{}", content_text(&m.content))),
            AgentMessage::Assistant(m) => {
                for part in &m.content {
                    match part {
                        ContentBlock::Text { text, .. } => {
                            blocks.push(format!("[Assistant]\n{text}"))
                        }
                        ContentBlock::Thinking { thinking, .. } => {
                            blocks.push(format!("[Assistant thinking]\n{thinking}"))
                        }
                        ContentBlock::ToolCall(call) => blocks.push(format!(
                            "[Assistant tool call] {}({})",
                            call.name,
                            clip(&call.arguments.to_string())
                        )),
                        ContentBlock::Image { mime_type, .. } => {
                            blocks.push(format!("[Assistant]\n[image: {mime_type}]"))
                        }
                    }
                }
                if m.stop_reason == StopReason::Error
                    && let Some(error) = &m.error_message
                {
                    blocks.push(format!("[Provider error]\n{error}"));
                }
            }
            AgentMessage::ToolResult(m) => {
                let label = if m.is_error {
                    format!("[Tool result: {}, error]", m.tool_name)
                } else {
                    format!("[Tool result: {}]", m.tool_name)
                };
                blocks.push(format!("{label}\n{}", clip(&blocks_text(&m.content))));
            }
            AgentMessage::Custom(m) => {
                blocks.push(format!("[{}]\n{}", m.custom_type, content_text(&m.content)))
            }
            AgentMessage::CompactionSummary(m) => {
                blocks.push(format!("[Previous compaction summary]\n{}", m.summary))
            }
        }
    }
    blocks
}

/// Splits blocks into chunks of at most `budget_bytes`, splitting oversized blocks at UTF-8
/// boundaries. Keeps the newest `MAX_CHUNKS` chunks.
pub(crate) fn chunk_blocks(blocks: &[String], budget_bytes: usize) -> Vec<String> {
    let budget = budget_bytes.max(256);
    let mut chunks: Vec<String> = Vec::new();
    let mut current = String::new();
    for block in blocks {
        let mut rest = block.as_str();
        while !rest.is_empty() {
            let room = budget.saturating_sub(current.len() + 2);
            if rest.len() <= room {
                if !current.is_empty() {
                    current.push_str("\n\n");
                }
                current.push_str(rest);
                rest = "";
            } else if current.is_empty() {
                let mut end = room.max(1).min(rest.len());
                while !rest.is_char_boundary(end) {
                    end -= 1;
                }
                current.push_str(&rest[..end]);
                rest = &rest[end..];
                chunks.push(std::mem::take(&mut current));
            } else {
                chunks.push(std::mem::take(&mut current));
            }
        }
    }
    if !current.is_empty() {
        chunks.push(current);
    }
    let skip = chunks.len().saturating_sub(MAX_CHUNKS);
    chunks.split_off(skip)
}

fn summary_prompt(conversation: &str, previous: Option<&str>, focus: Option<&str>) -> String {
    let mut prompt = format!("<conversation>\n{conversation}\n</conversation>\n\n");
    match previous {
        Some(previous) => {
            prompt.push_str(&format!("<previous-summary>\n{previous}\n</previous-summary>\n\n"));
            prompt.push_str(&format!(
                "Update the previous summary with the conversation above. Fold the previous summary in; keep what still matters. Use exactly these sections:\n{SUMMARY_SECTIONS}"
            ));
        }
        None => prompt.push_str(&format!(
            "Summarize the conversation above as a checkpoint another assistant can continue from. Use exactly these sections:\n{SUMMARY_SECTIONS}"
        )),
    }
    if let Some(focus) = focus.filter(|focus| !focus.is_empty()) {
        prompt.push_str(&format!("\n\nAdditional focus: {focus}"));
    }
    prompt
}

/// Why a summary could not be produced.
pub(crate) enum SummaryError {
    Cancelled,
    Failed(String),
}

/// How one summary is requested, besides the model and the plan.
pub(crate) struct SummaryRequest<'a> {
    /// The credentials of the session's model.
    pub(crate) auth: zi_ai::credentials::RequestAuth,
    /// `codexFastMode` (global settings).
    pub(crate) fast_mode: bool,
    /// A manual compaction's focus (`Additional focus: …`); empty adds nothing.
    pub(crate) focus: Option<&'a str>,
    pub(crate) idle_timeout: std::time::Duration,
}

/// Samples the summary chunk by chunk with the session's model
/// (docs/configuration.md#the-summary-request).
pub(crate) async fn summarize(
    model: &Arc<Model>,
    plan: &Plan,
    limits: &Limits,
    thinking: ThinkingLevel,
    request: SummaryRequest<'_>,
    cancel: &CancellationToken,
) -> Result<String, SummaryError> {
    let SummaryRequest {
        auth,
        fast_mode,
        focus,
        idle_timeout,
    } = request;
    let mut summary_model = (**model).clone();
    summary_model.max_tokens = limits.summary_max_tokens;
    let summary_model = Arc::new(summary_model);
    let input_budget = model
        .context_window
        .saturating_sub(limits.summary_max_tokens) as usize
        * 4;
    let blocks = transcript_blocks(&plan.source);
    let mut running = plan.previous_summary.clone();
    for chunk in chunk_blocks(&blocks, input_budget.saturating_sub(4096)) {
        let prompt = summary_prompt(&chunk, running.as_deref(), focus);
        let context = LlmContext {
            system_prompt: SUMMARY_SYSTEM_PROMPT.to_string(),
            messages: vec![AgentMessage::User(UserMessage {
                content: MessageContent::Parts(vec![ContentBlock::text(prompt)]),
                timestamp: now_millis(),
            })],
            tools: Vec::new(),
        };
        let options = StreamOptions {
            thinking: if model.reasoning {
                thinking
            } else {
                ThinkingLevel::Off
            },
            cancel: cancel.child_token(),
            idle_timeout,
            session_id: uuid::Uuid::new_v4().to_string(),
            fast_mode,
            ..StreamOptions::with_auth(auth.clone())
        };
        let mut stream = stream_assistant(summary_model.clone(), context, options);
        let mut partial = zi_ai::stream::empty_assistant(&summary_model);
        let mut finished = None;
        while let Some(event) = stream.next_event(&mut partial).await {
            match event {
                AssistantMessageEvent::Done { message, .. } => finished = Some(message),
                AssistantMessageEvent::Error { error, .. } => finished = Some(error),
                _ => {}
            }
        }
        if cancel.is_cancelled() {
            return Err(SummaryError::Cancelled);
        }
        let message = finished.ok_or_else(|| SummaryError::Failed(SUMMARY_ENDED.to_string()))?;
        match message.stop_reason {
            StopReason::Aborted => return Err(SummaryError::Cancelled),
            StopReason::Error => {
                return Err(SummaryError::Failed(
                    message
                        .error_message
                        .unwrap_or_else(|| SUMMARY_FAILED.to_string()),
                ));
            }
            _ => {}
        }
        let text = message.text().trim().to_string();
        if text.is_empty() {
            return Err(SummaryError::Failed(SUMMARY_EMPTY.to_string()));
        }
        running = Some(text);
    }
    let summary = running.ok_or_else(|| SummaryError::Failed(NOTHING_TO_COMPACT.to_string()))?;
    if summary.len() > MAX_SUMMARY_BYTES {
        return Err(SummaryError::Failed(summary_too_large()));
    }
    Ok(summary)
}

/// Builds the entry for a validated summary, or explains why it does not reduce the context.
pub(crate) fn entry_for(
    plan: &Plan,
    summary: String,
    reason: CompactionReason,
    excluded: Option<String>,
) -> Result<CompactionEntry, PlanError> {
    let mut entry = CompactionEntry {
        reason,
        summary,
        first_kept_entry_id: plan.first_kept_entry_id.clone(),
        tokens_before: plan.tokens_before,
        estimated_tokens_after: 0,
        details: plan.details.clone(),
        excluded_failure_entry_id: excluded.filter(|_| reason == CompactionReason::Overflow),
    };
    let summary_tokens = zi_journal::memory::format_compaction_summary(&entry)
        .len()
        .div_ceil(4) as u64;
    entry.estimated_tokens_after = summary_tokens + plan.retained_tokens;
    if entry.estimated_tokens_after >= plan.tokens_before {
        return Err(PlanError::NotReduced);
    }
    Ok(entry)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_follow_the_reference_formulas() {
        let mut catalog = zi_ai::catalog::Catalog::default();
        catalog.add_models_json(
            r#"{"providers":{"p":{"baseUrl":"http://x","api":"openai-completions","models":[{"id":"m","contextWindow":1000,"maxTokens":100}]}}}"#,
            "test",
        );
        let Some(model) = catalog.find("p", "m") else {
            panic!("model missing: {:?}", catalog.warnings)
        };
        let limits = Limits::new(model, &CompactionSettings::default());
        assert_eq!(limits.reserve, 250);
        assert_eq!(limits.trigger, 750);
        assert_eq!(limits.keep_recent, 375);
        assert_eq!(limits.summary_max_tokens, 100);
    }

    #[test]
    fn code_mode_calls_count_as_read_and_modified_files() {
        let result = |details: Value, is_error: bool| {
            AgentMessage::ToolResult(zi_protocol::message::ToolResultMessage {
                tool_call_id: "c1".into(),
                tool_name: "code".into(),
                content: Vec::new(),
                details: Some(details),
                is_error,
                timestamp: 0,
            })
        };
        let calls = serde_json::json!({"type": "code_mode", "outcome": "error", "calls": [
            {"id": 1, "name": "read", "arguments": {"path": "a.rs"}, "state": "ok"},
            {"id": 2, "name": "read", "arguments": {"path": "b.rs"}, "state": "ok"},
            {"id": 3, "name": "edit", "arguments": {"path": "b.rs", "edits": 1, "bytes": 3}, "state": "ok"},
            {"id": 4, "name": "write", "arguments": {"path": "c.rs", "bytes": 1}, "state": "error"},
            {"id": 5, "name": "read", "arguments": {"path": "x… [9000 bytes]"}, "state": "ok"}
        ]});
        let other = serde_json::json!({"calls": [{"name": "read", "arguments": {"path": "z"}, "state": "ok"}]});
        let details = gather_details(None, &[result(calls, true), result(other, false)]);
        assert_eq!(details.read_files, ["a.rs"]);
        assert_eq!(details.modified_files, ["b.rs"]);
    }

    #[test]
    fn chunks_respect_the_budget_and_keep_the_newest() {
        let blocks: Vec<String> = (0..100)
            .map(|i| format!("block {i} {}", "x".repeat(300)))
            .collect();
        let chunks = chunk_blocks(&blocks, 1000);
        assert_eq!(chunks.len(), MAX_CHUNKS);
        assert!(chunks.iter().all(|c| c.len() <= 1000));
        assert!(chunks.last().is_some_and(|c| c.contains("block 99")));
        let huge = vec!["é".repeat(2000)];
        let split = chunk_blocks(&huge, 700);
        assert!(split.iter().all(|c| c.len() <= 700 && !c.is_empty()));
    }
}
