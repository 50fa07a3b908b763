//! The transcript: what the session said and did, as items built from session events (live) or
//! from the presentation messages (a resumed session), each rendered and wrapped once per width
//! and cached, so a frame only re-renders what changed.

use ratatui::text::{Line, Span};
use serde_json::Value;
use zi_protocol::event::{AgentSessionEvent, AssistantMessageEvent, CompactionOutcome};
use zi_protocol::message::{AgentMessage, AssistantMessage, ContentBlock, StopReason};

use crate::markdown;
use crate::theme::Theme;
use crate::tool_row::{ToolCallView, ToolOutcome};
use crate::wrap::{Logical, text_width, wrap_all};

/// One block of an assistant message.
#[derive(Debug, Clone, PartialEq)]
pub enum AssistantBlock {
    /// Answer text (Markdown).
    Text(String),
    /// Thinking text.
    Thinking(String),
}

/// What the transcript shows.
#[derive(Debug, Clone, PartialEq)]
pub enum Item {
    /// A prompt the person sent.
    User(String),
    /// An assistant message.
    Assistant {
        /// Its text and thinking, in order.
        blocks: Vec<AssistantBlock>,
        /// Whether it is still streaming.
        streaming: bool,
        /// Its error message, when it failed.
        error: Option<String>,
    },
    /// A tool call and its result.
    Tool(Box<ToolCallView>),
    /// A notice of zi (a warning, a command's feedback).
    Notice(String),
    /// An error to show.
    Error(String),
}

/// How items are drawn, as far as it changes their rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RenderOptions {
    /// The width in cells.
    pub width: usize,
    /// Whether thinking is shown in full (else as one line counting its words).
    pub show_thinking: bool,
    /// The styles.
    pub theme: Theme,
}

struct Entry {
    item: Item,
    rows: Option<(RenderOptions, Vec<Line<'static>>)>,
}

impl Entry {
    fn rows(&mut self, options: RenderOptions) -> &[Line<'static>] {
        let fresh = matches!(&self.rows, Some((o, _)) if *o == options);
        if !fresh {
            let logical = render_item(&self.item, &options);
            self.rows = Some((options, wrap_all(&logical, options.width)));
        }
        self.rows.as_ref().map_or(&[], |(_, rows)| rows.as_slice())
    }
}

/// The visible window: rows to draw, and the scroll offset actually applied.
pub struct Window {
    /// The rows to draw.
    pub rows: Vec<Line<'static>>,
    /// The offset from the bottom actually applied.
    pub scroll: usize,
}

/// Every item shown, with its rows cached per render options.
#[derive(Default)]
pub struct Transcript {
    entries: Vec<Entry>,
}

impl Transcript {
    /// Appends an item.
    pub fn push(&mut self, item: Item) {
        self.entries.push(Entry { item, rows: None });
    }

    /// Changes an item in place and drops its cached rows.
    fn edit(&mut self, index: usize, change: impl FnOnce(&mut Item)) {
        if let Some(entry) = self.entries.get_mut(index) {
            change(&mut entry.item);
            entry.rows = None;
        }
    }

    fn streaming_assistant(&self) -> Option<usize> {
        self.entries.iter().rposition(|e| {
            matches!(
                e.item,
                Item::Assistant {
                    streaming: true,
                    ..
                }
            )
        })
    }

    fn tool(&self, id: &str) -> Option<usize> {
        self.entries
            .iter()
            .rposition(|e| matches!(&e.item, Item::Tool(t) if t.id == id))
    }

    /// The arguments of the tool call `id`, as its start event carried them.
    pub fn tool_args(&self, id: &str) -> Option<Value> {
        let index = self.tool(id)?;
        match &self.entries[index].item {
            Item::Tool(tool) => Some(tool.args.clone()),
            _ => None,
        }
    }

    /// Toggles the expansion of the last tool row; false when there is none.
    pub fn toggle_last_tool(&mut self) -> bool {
        let Some(index) = self
            .entries
            .iter()
            .rposition(|e| matches!(e.item, Item::Tool(_)))
        else {
            return false;
        };
        self.edit(index, |item| {
            if let Item::Tool(tool) = item {
                tool.expanded = !tool.expanded;
            }
        });
        true
    }

    /// The text of the last assistant message (for `/copy`).
    pub fn last_answer(&self) -> Option<String> {
        self.entries.iter().rev().find_map(|e| match &e.item {
            Item::Assistant { blocks, .. } => {
                let text: Vec<&str> = blocks
                    .iter()
                    .filter_map(|b| match b {
                        AssistantBlock::Text(t) => Some(t.as_str()),
                        AssistantBlock::Thinking(_) => None,
                    })
                    .collect();
                (!text.is_empty()).then(|| text.join("\n"))
            }
            _ => None,
        })
    }

    /// Rebuilds items from presentation messages (a resumed session).
    pub fn load_messages(&mut self, messages: &[AgentMessage]) {
        for message in messages {
            match message {
                AgentMessage::User(user) => self.push(Item::User(user.content.text())),
                AgentMessage::Assistant(assistant) => {
                    self.push(assistant_item(assistant, false));
                    for block in &assistant.content {
                        if let ContentBlock::ToolCall(call) = block {
                            self.push(Item::Tool(Box::new(ToolCallView::new(
                                call.id.clone(),
                                call.name.clone(),
                                call.arguments.clone(),
                            ))));
                        }
                    }
                }
                AgentMessage::ToolResult(result) => {
                    let outcome = ToolOutcome {
                        text: concat_text(&result.content),
                        details: result.details.clone(),
                        is_error: result.is_error,
                    };
                    match self.tool(&result.tool_call_id) {
                        Some(index) => self.edit(index, |item| {
                            if let Item::Tool(tool) = item {
                                tool.result = Some(outcome);
                            }
                        }),
                        None => {
                            let mut view = ToolCallView::new(
                                result.tool_call_id.clone(),
                                result.tool_name.clone(),
                                Value::Null,
                            );
                            view.result = Some(outcome);
                            self.push(Item::Tool(Box::new(view)));
                        }
                    }
                }
                AgentMessage::Custom(custom) => self.push(Item::Notice(custom.content.text())),
                AgentMessage::CompactionSummary(_) => {
                    self.push(Item::Notice("Earlier context was compacted".to_string()))
                }
            }
        }
    }

    /// Applies one live session event.
    pub fn apply(&mut self, event: &AgentSessionEvent) {
        match event {
            AgentSessionEvent::MessageStart { message } => match message {
                AgentMessage::User(user) => self.push(Item::User(user.content.text())),
                AgentMessage::Assistant(assistant) => self.push(assistant_item(assistant, true)),
                AgentMessage::Custom(custom) => self.push(Item::Notice(custom.content.text())),
                AgentMessage::ToolResult(_) | AgentMessage::CompactionSummary(_) => {}
            },
            AgentSessionEvent::MessageUpdate {
                assistant_message_event,
            } => self.stream(assistant_message_event),
            AgentSessionEvent::MessageEnd {
                message: AgentMessage::Assistant(assistant),
            } => {
                let finished = assistant_item(assistant, false);
                match self.streaming_assistant() {
                    Some(index) => self.edit(index, |item| *item = finished),
                    None => self.push(finished),
                }
            }
            AgentSessionEvent::ToolExecutionStart {
                tool_call_id,
                tool_name,
                args,
            } => self.push(Item::Tool(Box::new(ToolCallView::new(
                tool_call_id.clone(),
                tool_name.clone(),
                args.clone(),
            )))),
            AgentSessionEvent::ToolExecutionUpdate {
                tool_call_id,
                partial_result,
                ..
            } => {
                if let Some(index) = self.tool(tool_call_id) {
                    let text = partial_text(partial_result);
                    self.edit(index, |item| {
                        if let Item::Tool(tool) = item {
                            tool.partial = Some(text);
                        }
                    });
                }
            }
            AgentSessionEvent::ToolExecutionEnd {
                tool_call_id,
                result,
                is_error,
                ..
            } => {
                if let Some(index) = self.tool(tool_call_id) {
                    let outcome = ToolOutcome {
                        text: concat_text(&result.content),
                        details: result.details.clone(),
                        is_error: *is_error,
                    };
                    self.edit(index, |item| {
                        if let Item::Tool(tool) = item {
                            tool.partial = None;
                            tool.result = Some(outcome);
                        }
                    });
                }
            }
            AgentSessionEvent::CompactionEnd { outcome, .. } => match outcome {
                CompactionOutcome::Completed { .. } => {
                    self.push(Item::Notice("Context compacted".to_string()))
                }
                CompactionOutcome::Cancelled => {
                    self.push(Item::Notice("Compaction cancelled".to_string()))
                }
                CompactionOutcome::Failed { message } => {
                    self.push(Item::Error(format!("Compaction failed: {message}")))
                }
            },
            AgentSessionEvent::CompactionBackoff {
                tokens_after_compaction,
                trigger,
                resume_above,
                ..
            } => self.push(Item::Notice(format!(
                "Compaction cannot bring the context under its threshold ({tokens_after_compaction} tokens after the last one, threshold {trigger}); not compacting again until the context exceeds {resume_above} tokens"
            ))),
            AgentSessionEvent::AutoRetryEnd {
                success: false,
                final_error: Some(error),
                ..
            } => self.push(Item::Error(format!("Retries exhausted: {error}"))),
            AgentSessionEvent::ModelChanged { model } => self.push(Item::Notice(format!(
                "Model: {}/{}",
                model.provider, model.id
            ))),
            AgentSessionEvent::ThinkingLevelChanged { level } => {
                self.push(Item::Notice(format!("Thinking: {}", level.as_str())))
            }
            _ => {}
        }
    }

    fn stream(&mut self, event: &AssistantMessageEvent) {
        let Some(index) = self.streaming_assistant() else {
            return;
        };
        let (content_index, delta, thinking) = match event {
            AssistantMessageEvent::TextStart { content_index } => (*content_index, "", false),
            AssistantMessageEvent::TextDelta {
                content_index,
                delta,
            } => (*content_index, delta.as_str(), false),
            AssistantMessageEvent::ThinkingStart { content_index } => (*content_index, "", true),
            AssistantMessageEvent::ThinkingDelta {
                content_index,
                delta,
            } => (*content_index, delta.as_str(), true),
            _ => return,
        };
        self.edit(index, |item| {
            if let Item::Assistant { blocks, .. } = item {
                append_block(blocks, content_index, delta, thinking);
            }
        });
    }

    /// The rows to draw in a viewport of `height` rows scrolled `scroll` rows up from the
    /// bottom. Only the items that reach into the window are rendered.
    pub fn window(&mut self, options: RenderOptions, height: usize, scroll: usize) -> Window {
        let wanted = height + scroll;
        let mut collected: Vec<Line<'static>> = Vec::new();
        let count = self.entries.len();
        for (n, entry) in self.entries.iter_mut().rev().enumerate() {
            let rows = entry.rows(options);
            // Items are separated by one blank row.
            if n > 0 {
                collected.push(Line::default());
            }
            collected.extend(rows.iter().rev().cloned());
            if collected.len() >= wanted && n + 1 < count {
                break;
            }
        }
        let total = collected.len();
        let scroll = scroll.min(total.saturating_sub(height));
        // `collected` runs bottom-up: the window is `scroll` rows from its start.
        let end = (scroll + height).min(total);
        let mut rows: Vec<Line<'static>> = collected[scroll..end].to_vec();
        rows.reverse();
        Window { rows, scroll }
    }
}

/// Content blocks are indexed by the provider's content index; text and thinking are kept in
/// arrival order (tool-call blocks have their own rows).
fn append_block(blocks: &mut Vec<AssistantBlock>, _index: usize, delta: &str, thinking: bool) {
    match blocks.last_mut() {
        Some(AssistantBlock::Text(text)) if !thinking => text.push_str(delta),
        Some(AssistantBlock::Thinking(text)) if thinking => text.push_str(delta),
        _ if thinking => blocks.push(AssistantBlock::Thinking(delta.to_string())),
        _ => blocks.push(AssistantBlock::Text(delta.to_string())),
    }
}

fn assistant_item(message: &AssistantMessage, streaming: bool) -> Item {
    let blocks = message
        .content
        .iter()
        .filter_map(|block| match block {
            ContentBlock::Text { text, .. } => Some(AssistantBlock::Text(text.clone())),
            ContentBlock::Thinking { thinking, .. } => {
                Some(AssistantBlock::Thinking(thinking.clone()))
            }
            _ => None,
        })
        .collect();
    let error = match message.stop_reason {
        StopReason::Error => Some(
            message
                .error_message
                .clone()
                .unwrap_or_else(|| "The provider reported an error".to_string()),
        ),
        StopReason::Aborted => Some("Interrupted".to_string()),
        _ => None,
    };
    Item::Assistant {
        blocks,
        streaming,
        error,
    }
}

fn concat_text(blocks: &[ContentBlock]) -> String {
    let texts: Vec<&str> = blocks
        .iter()
        .filter_map(|b| match b {
            ContentBlock::Text { text, .. } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    texts.join("\n")
}

fn partial_text(partial: &Value) -> String {
    partial
        .get("content")
        .and_then(Value::as_array)
        .map(|parts| {
            parts
                .iter()
                .filter_map(|p| p.get("text").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default()
}

fn prefixed(text: &str, mark: &str, style: ratatui::style::Style) -> Vec<Logical> {
    let pad = " ".repeat(text_width(mark));
    text.split('\n')
        .enumerate()
        .map(|(i, line)| {
            let lead = if i == 0 {
                mark.to_string()
            } else {
                pad.clone()
            };
            Logical::indented(
                Line::from(vec![
                    Span::styled(lead, style),
                    Span::styled(line.to_string(), style),
                ]),
                vec![Span::raw(pad.clone())],
            )
        })
        .collect()
}

fn render_item(item: &Item, options: &RenderOptions) -> Vec<Logical> {
    let theme = &options.theme;
    match item {
        Item::User(text) => prefixed(text, "› ", theme.user()),
        Item::Notice(text) => prefixed(text, "· ", theme.dim()),
        Item::Error(text) => prefixed(text, "✗ ", theme.error()),
        Item::Tool(tool) => tool.render(theme),
        Item::Assistant {
            blocks,
            streaming,
            error,
        } => {
            let mut out = Vec::new();
            for block in blocks {
                match block {
                    AssistantBlock::Thinking(text) if options.show_thinking => {
                        out.extend(prefixed(text.trim(), "∴ ", theme.thinking()));
                    }
                    AssistantBlock::Thinking(text) => {
                        let words = text.split_whitespace().count();
                        out.push(Logical::new(Line::styled(
                            format!("∴ Thinking… ({words} words, Ctrl+T shows)"),
                            theme.thinking(),
                        )));
                    }
                    AssistantBlock::Text(text) => {
                        out.extend(markdown::render(text, theme, options.width))
                    }
                }
            }
            if *streaming && out.is_empty() {
                out.push(Logical::new(Line::styled("…", theme.dim())));
            }
            if let Some(error) = error {
                out.extend(prefixed(error, "✗ ", theme.error()));
            }
            out
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(width: usize) -> RenderOptions {
        RenderOptions {
            width,
            show_thinking: false,
            theme: Theme::new(true),
        }
    }

    fn text_rows(window: &Window) -> Vec<String> {
        window.rows.iter().map(|l| l.to_string()).collect()
    }

    #[test]
    fn the_window_is_the_bottom_and_scrolls_up() {
        let mut transcript = Transcript::default();
        for n in 0..10 {
            transcript.push(Item::User(format!("m{n}")));
        }
        let window = transcript.window(options(20), 3, 0);
        assert_eq!(text_rows(&window), ["› m8", "", "› m9"]);
        let window = transcript.window(options(20), 3, 2);
        assert_eq!(text_rows(&window), ["› m7", "", "› m8"]);
        // Scrolling past the top stops at the first row.
        let window = transcript.window(options(20), 3, 1000);
        assert_eq!(text_rows(&window), ["› m0", "", "› m1"]);
        assert_eq!(window.scroll, 19 - 3);
    }

    #[test]
    fn streamed_deltas_append_and_message_end_replaces() {
        let mut transcript = Transcript::default();
        transcript.push(Item::Assistant {
            blocks: Vec::new(),
            streaming: true,
            error: None,
        });
        for delta in ["Hel", "lo"] {
            transcript.apply(&AgentSessionEvent::MessageUpdate {
                assistant_message_event: AssistantMessageEvent::TextDelta {
                    content_index: 0,
                    delta: delta.to_string(),
                },
            });
        }
        assert_eq!(transcript.last_answer().as_deref(), Some("Hello"));
        let window = transcript.window(options(20), 5, 0);
        assert_eq!(text_rows(&window), ["Hello"]);
    }

    #[test]
    fn a_compaction_backoff_is_a_notice() {
        let mut transcript = Transcript::default();
        transcript.apply(&AgentSessionEvent::CompactionBackoff {
            tokens: 5012,
            trigger: 3000,
            tokens_after_compaction: 5000,
            resume_above: 6500,
        });
        let window = transcript.window(options(400), 5, 0);
        assert_eq!(
            text_rows(&window).join(" "),
            "· Compaction cannot bring the context under its threshold (5000 tokens after the last one, threshold 3000); not compacting again until the context exceeds 6500 tokens"
        );
    }
}
