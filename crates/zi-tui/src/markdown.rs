//! Assistant text as markdown: paragraphs, headings, emphasis, inline code, fenced and indented
//! code blocks, lists (nested, numbered, task lists), block quotes, rules, links and tables,
//! turned into logical lines for [`crate::wrap`]. Incomplete markdown (a stream cut mid-block)
//! renders as far as it goes.

use pulldown_cmark::{CodeBlockKind, Event, Options, Parser, Tag, TagEnd};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};

use crate::highlight::{self, Highlighter};
use crate::table::{Cell, Table};
use crate::theme::Theme;
use crate::wrap::{Logical, text_width};

/// Renders `text` as markdown lines for a transcript `width` cells wide (tables are laid out
/// to it; everything else is wrapped later).
pub fn render(text: &str, theme: &Theme, width: usize) -> Vec<Logical> {
    let mut writer = Writer::new(*theme, width);
    let options =
        Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TABLES | Options::ENABLE_TASKLISTS;
    for event in Parser::new_ext(text, options) {
        writer.event(event);
    }
    writer.finish()
}

struct ListLevel {
    next_number: Option<u64>,
}

struct Writer {
    theme: Theme,
    width: usize,
    /// The table being read, and the row whose cells are being read.
    table: Option<(Table, Vec<Cell>)>,
    lines: Vec<Logical>,
    spans: Vec<Span<'static>>,
    styles: Vec<Style>,
    lists: Vec<ListLevel>,
    quote_depth: usize,
    code_block: bool,
    /// The open code block's highlighter (a fence naming a highlighted language).
    highlighter: Option<Highlighter>,
    /// The bullet of the list item whose first line is not written yet.
    pending_bullet: Option<String>,
    /// The width of the current item's bullet (hanging indent of its later lines).
    item_indent: Vec<usize>,
    /// The open link's destination and where its text starts in `spans`: the destination is
    /// written after the text unless the text is the destination (an autolink).
    link: Option<(String, usize)>,
    /// The last line written is a blank one (a quote's blank rows keep its bar).
    at_blank: bool,
    /// The first line of the current block has been started (its prefix carries the bullet).
    line_open: bool,
    first_prefix: Vec<Span<'static>>,
}

impl Writer {
    fn new(theme: Theme, width: usize) -> Writer {
        Writer {
            theme,
            width,
            table: None,
            lines: Vec::new(),
            spans: Vec::new(),
            styles: Vec::new(),
            lists: Vec::new(),
            quote_depth: 0,
            code_block: false,
            highlighter: None,
            pending_bullet: None,
            item_indent: Vec::new(),
            link: None,
            at_blank: false,
            line_open: false,
            first_prefix: Vec::new(),
        }
    }

    fn style(&self) -> Style {
        self.styles
            .iter()
            .fold(Style::default(), |acc, style| acc.patch(*style))
    }

    fn quote_bars(&self) -> Span<'static> {
        Span::styled("│ ".repeat(self.quote_depth), self.theme.dim())
    }

    /// The prefix of rows after the first: quote bars and the hanging indent of list items.
    fn continuation_prefix(&self) -> Vec<Span<'static>> {
        let mut prefix = Vec::new();
        if self.quote_depth > 0 {
            prefix.push(self.quote_bars());
        }
        let indent: usize = self.item_indent.iter().sum();
        if indent > 0 {
            prefix.push(Span::raw(" ".repeat(indent)));
        }
        prefix
    }

    fn open_line(&mut self) {
        if self.line_open {
            return;
        }
        self.line_open = true;
        let mut prefix = Vec::new();
        if self.quote_depth > 0 {
            prefix.push(self.quote_bars());
        }
        let outer: usize = self.item_indent.iter().rev().skip(1).sum();
        match self.pending_bullet.take() {
            Some(bullet) => {
                if outer > 0 {
                    prefix.push(Span::raw(" ".repeat(outer)));
                }
                prefix.push(Span::styled(bullet, self.theme.dim()));
            }
            None => {
                let indent: usize = self.item_indent.iter().sum();
                if indent > 0 {
                    prefix.push(Span::raw(" ".repeat(indent)));
                }
            }
        }
        self.first_prefix = prefix;
    }

    fn push_text(&mut self, text: &str, style: Style) {
        if text.is_empty() {
            return;
        }
        self.open_line();
        self.spans.push(Span::styled(text.to_string(), style));
    }

    /// Ends the current line (if any was started).
    fn end_line(&mut self) {
        if !self.line_open {
            return;
        }
        let mut spans = std::mem::take(&mut self.first_prefix);
        spans.append(&mut self.spans);
        let indent = self.continuation_prefix();
        self.push(Logical::indented(Line::from(spans), indent));
        self.line_open = false;
    }

    fn push(&mut self, line: Logical) {
        self.lines.push(line);
        self.at_blank = false;
    }

    /// One blank row between blocks (inside a quote it keeps the quote's bar).
    fn blank(&mut self) {
        self.end_line();
        if self.at_blank || self.lines.is_empty() {
            return;
        }
        let row = if self.quote_depth > 0 {
            let bars = "│ ".repeat(self.quote_depth);
            Line::styled(bars.trim_end().to_string(), self.theme.dim())
        } else {
            Line::default()
        };
        self.lines.push(Logical::new(row));
        self.at_blank = true;
    }

    /// The table's rows at the width left inside the quote bars and list indents.
    fn write_table(&mut self, table: &Table) {
        self.end_line();
        let prefix: usize = self
            .continuation_prefix()
            .iter()
            .map(|s| text_width(&s.content))
            .sum();
        for line in table.lines(self.width.saturating_sub(prefix), &self.theme) {
            self.open_line();
            self.spans.extend(line.spans);
            self.end_line();
        }
        self.blank();
    }

    fn event(&mut self, event: Event<'_>) {
        match event {
            Event::Start(tag) => self.start(tag),
            Event::End(tag) => self.end(tag),
            Event::Text(text) => {
                if self.code_block {
                    self.code_text(&text);
                } else {
                    let style = self.style();
                    self.push_text(&text, style);
                }
            }
            Event::Code(code) => {
                let style = self.style().patch(self.theme.code());
                self.push_text(&code, style);
            }
            Event::SoftBreak => {
                let style = self.style();
                self.push_text(" ", style);
            }
            Event::HardBreak => self.end_line(),
            Event::Rule => {
                self.end_line();
                self.push(Logical::new(Line::styled("─".repeat(24), self.theme.dim())));
                self.blank();
            }
            Event::TaskListMarker(done) => {
                let mark = if done { "[x] " } else { "[ ] " };
                if self.pending_bullet.is_some() {
                    // The checkbox stands where the item's bullet would.
                    if let Some(indent) = self.item_indent.last_mut() {
                        *indent = text_width(mark);
                    }
                    self.pending_bullet = Some(mark.to_string());
                } else {
                    let style = self.theme.dim();
                    self.push_text(mark, style);
                }
            }
            Event::Html(html) | Event::InlineHtml(html) => {
                let style = self.theme.dim();
                for (i, part) in html.split('\n').enumerate() {
                    if i > 0 {
                        self.end_line();
                    }
                    self.push_text(part, style);
                }
            }
            Event::FootnoteReference(name) => {
                let style = self.theme.dim();
                self.push_text(&format!("[^{name}]"), style);
            }
            Event::InlineMath(text) | Event::DisplayMath(text) => {
                let style = self.theme.code();
                self.push_text(&text, style);
            }
        }
    }

    fn code_text(&mut self, text: &str) {
        let style = self.theme.code();
        let mut parts = text.split('\n').peekable();
        while let Some(part) = parts.next() {
            // The text of a code block ends with a newline: no empty row after the last line.
            if part.is_empty() && parts.peek().is_none() {
                break;
            }
            self.open_line();
            self.spans.push(Span::raw("  "));
            match self.highlighter.as_mut() {
                Some(highlighter) => self.spans.extend(highlighter.line(part, &self.theme)),
                None => self.spans.push(Span::styled(part.to_string(), style)),
            }
            self.end_line();
        }
    }

    fn start(&mut self, tag: Tag<'_>) {
        match tag {
            // A later paragraph of a list item (a loose list) is set off by a blank row.
            Tag::Paragraph => {
                if !self.item_indent.is_empty() && self.pending_bullet.is_none() {
                    self.blank();
                }
            }
            Tag::Heading { level, .. } => {
                self.end_line();
                self.styles.push(self.theme.heading());
                let hashes = "#".repeat(level as usize);
                let style = self.theme.heading();
                self.push_text(&format!("{hashes} "), style);
            }
            Tag::BlockQuote(_) => {
                self.end_line();
                self.quote_depth += 1;
            }
            Tag::CodeBlock(kind) => {
                self.end_line();
                self.code_block = true;
                self.highlighter = match kind {
                    CodeBlockKind::Fenced(info) => highlight::language(&info).map(Highlighter::new),
                    CodeBlockKind::Indented => None,
                };
            }
            Tag::List(start) => {
                self.end_line();
                self.lists.push(ListLevel { next_number: start });
            }
            Tag::Item => {
                self.end_line();
                let bullet = match self.lists.last_mut() {
                    Some(ListLevel {
                        next_number: Some(n),
                    }) => {
                        let bullet = format!("{n}. ");
                        *n += 1;
                        bullet
                    }
                    _ => "• ".to_string(),
                };
                self.item_indent.push(text_width(&bullet));
                self.pending_bullet = Some(bullet);
            }
            Tag::Emphasis => self
                .styles
                .push(Style::default().add_modifier(Modifier::ITALIC)),
            Tag::Strong => self
                .styles
                .push(Style::default().add_modifier(Modifier::BOLD)),
            Tag::Strikethrough => self
                .styles
                .push(Style::default().add_modifier(Modifier::CROSSED_OUT)),
            Tag::Link { dest_url, .. } => {
                self.styles.push(self.theme.link());
                self.link = Some((dest_url.to_string(), self.spans.len()));
            }
            Tag::Image { dest_url, .. } => {
                let style = self.theme.dim();
                self.push_text(&format!("[image {dest_url}] "), style);
                self.styles.push(self.theme.dim());
            }
            Tag::Table(alignments) => {
                self.end_line();
                let table = Table {
                    alignments,
                    ..Table::default()
                };
                self.table = Some((table, Vec::new()));
            }
            Tag::TableHead | Tag::TableRow => {}
            // A cell's text gathers in `spans` like a line's; its end takes it.
            Tag::TableCell => self.end_line(),
            Tag::FootnoteDefinition(_)
            | Tag::HtmlBlock
            | Tag::MetadataBlock(_)
            | Tag::DefinitionList
            | Tag::DefinitionListTitle
            | Tag::DefinitionListDefinition => self.end_line(),
        }
    }

    fn end(&mut self, tag: TagEnd) {
        match tag {
            TagEnd::Paragraph => {
                if self.item_indent.is_empty() {
                    self.blank();
                } else {
                    self.end_line();
                }
            }
            TagEnd::Heading(_) => {
                self.styles.pop();
                self.blank();
            }
            TagEnd::BlockQuote(_) => {
                self.end_line();
                // The quote's last blank row is not the quote's: it goes outside it.
                if self.at_blank {
                    self.lines.pop();
                    self.at_blank = false;
                }
                self.quote_depth = self.quote_depth.saturating_sub(1);
                self.blank();
            }
            TagEnd::CodeBlock => {
                self.code_block = false;
                self.highlighter = None;
                self.blank();
            }
            TagEnd::List(_) => {
                self.end_line();
                self.lists.pop();
                if self.lists.is_empty() {
                    self.blank();
                }
            }
            TagEnd::Item => {
                self.end_line();
                self.item_indent.pop();
                self.pending_bullet = None;
            }
            TagEnd::Emphasis | TagEnd::Strong | TagEnd::Strikethrough => {
                self.styles.pop();
            }
            TagEnd::Link => {
                self.styles.pop();
                if let Some((url, start)) = self.link.take() {
                    let text: String = self
                        .spans
                        .get(start..)
                        .unwrap_or_default()
                        .iter()
                        .map(|s| s.content.as_ref())
                        .collect();
                    let bare = url.strip_prefix("mailto:").unwrap_or(&url);
                    if text != url && text != bare {
                        let style = self.theme.dim();
                        self.push_text(&format!(" ({url})"), style);
                    }
                }
            }
            TagEnd::Image => {
                self.styles.pop();
            }
            TagEnd::TableCell => {
                let cell: Cell = std::mem::take(&mut self.spans);
                self.line_open = false;
                self.first_prefix.clear();
                if let Some((_, row)) = self.table.as_mut() {
                    row.push(cell);
                }
            }
            TagEnd::TableHead | TagEnd::TableRow => {
                if let Some((table, row)) = self.table.as_mut() {
                    let row = std::mem::take(row);
                    if tag == TagEnd::TableHead {
                        table.header = row;
                    } else {
                        table.rows.push(row);
                    }
                }
            }
            TagEnd::Table => {
                if let Some((table, _)) = self.table.take() {
                    self.write_table(&table);
                }
            }
            _ => self.end_line(),
        }
    }

    fn finish(mut self) -> Vec<Logical> {
        if let Some((table, _)) = self.table.take() {
            self.write_table(&table);
        }
        self.end_line();
        while self
            .lines
            .last()
            .is_some_and(|l| l.line.to_string().trim().is_empty())
        {
            self.lines.pop();
        }
        self.lines
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows(text: &str) -> Vec<String> {
        render(text, &Theme::new(true), 80)
            .iter()
            .map(|l| l.line.to_string())
            .collect()
    }

    #[test]
    fn paragraphs_are_separated_by_one_blank_row() {
        assert_eq!(rows("one\ntwo\n\nthree"), ["one two", "", "three"]);
    }

    #[test]
    fn lists_get_bullets_and_numbers() {
        assert_eq!(
            rows("- a\n- b\n\n1. x\n2. y"),
            ["• a", "• b", "", "1. x", "2. y"]
        );
    }

    #[test]
    fn nested_lists_are_indented() {
        assert_eq!(rows("- a\n  - b\n- c"), ["• a", "  • b", "• c"]);
    }

    #[test]
    fn code_blocks_keep_their_lines() {
        assert_eq!(
            rows("text\n\n```rust\nfn main() {\n    x();\n}\n```\nafter"),
            [
                "text",
                "",
                "  fn main() {",
                "      x();",
                "  }",
                "",
                "after"
            ]
        );
    }

    #[test]
    fn an_unclosed_code_block_renders_what_arrived() {
        assert_eq!(rows("```\nlet a = 1;\nlet b"), ["  let a = 1;", "  let b"]);
    }

    #[test]
    fn headings_quotes_and_links() {
        assert_eq!(
            rows("# Title\n\n> quoted\n\nsee [docs](https://x.y)"),
            ["# Title", "", "│ quoted", "", "see docs (https://x.y)"]
        );
    }

    #[test]
    fn fenced_code_in_a_known_language_is_highlighted() {
        use crate::highlight::Token;
        let theme = Theme::new(false);
        let lines = render("```rust\nfn main() { \"hi\" }\n```", &theme, 80);
        let style_of = |text: &str| {
            lines[0]
                .line
                .spans
                .iter()
                .find(|s| s.content == text)
                .map(|s| s.style)
        };
        assert_eq!(lines[0].line.to_string(), "  fn main() { \"hi\" }");
        assert_eq!(style_of("fn"), Some(theme.token(Token::Keyword)));
        assert_eq!(style_of("\"hi\""), Some(theme.token(Token::String)));
        assert_ne!(theme.token(Token::Keyword).fg, None);
        // An unknown language keeps the plain code style.
        let plain = render("```brainfuck\n+[-]\n```", &theme, 80);
        assert_eq!(plain[0].line.spans[1].style, theme.code());
    }

    #[test]
    fn highlighting_without_colour_keeps_only_weights() {
        let theme = Theme::new(true);
        let lines = render("```python\ndef f(): return 1  # one\n```", &theme, 80);
        for span in &lines[0].line.spans {
            assert_eq!(span.style.fg, None, "{span:?}");
        }
        let def = lines[0].line.spans.iter().find(|s| s.content == "def");
        assert!(def.is_some_and(|s| s.style.add_modifier.contains(Modifier::BOLD)));
    }

    #[test]
    fn inline_code_is_styled() {
        let lines = render("use `cargo`", &Theme::new(true), 80);
        let code = lines[0]
            .line
            .spans
            .iter()
            .find(|s| s.content == "cargo")
            .map(|s| s.style);
        assert_eq!(code, Some(Theme::new(true).code()));
    }

    #[test]
    fn tables_are_laid_out_to_the_width_inside_quotes_and_lists() {
        let text = "| a | b |\n|---|--:|\n| x | 10 |\n\n> | q | r |\n> |---|---|\n> | 1 | 2 |\n\n- item\n\n  | k | v |\n  |---|---|\n  | long value here | z |\n";
        assert_eq!(
            rows_at(text, 16),
            [
                "a │  b",
                "──┼───",
                "x │ 10",
                "",
                "│ q │ r",
                "│ ──┼──",
                "│ 1 │ 2",
                "",
                "• item",
                "  k          │ v",
                "  ───────────┼──",
                "  long value │ z",
                "  here       │",
            ]
        );
    }

    fn rows_at(text: &str, width: usize) -> Vec<String> {
        render(text, &Theme::new(true), width)
            .iter()
            .map(|l| l.line.to_string())
            .collect()
    }

    #[test]
    fn task_items_put_the_checkbox_where_the_bullet_was() {
        assert_eq!(
            rows("- [x] done\n- [ ] todo\n  - nested\n- plain"),
            ["[x] done", "[ ] todo", "    • nested", "• plain"]
        );
    }

    #[test]
    fn a_quote_keeps_its_bar_through_blank_rows_and_code() {
        assert_eq!(
            rows("> Run this:\n>\n> ```sh\n> cargo test\n> ```\n> after\n\nout"),
            [
                "│ Run this:",
                "│",
                "│   cargo test",
                "│",
                "│ after",
                "",
                "out"
            ]
        );
        assert_eq!(rows("> a\n>\n> > b\n\nc"), ["│ a", "│", "│ │ b", "", "c"]);
    }

    #[test]
    fn autolinks_are_written_once_and_strikethrough_is_crossed_out() {
        assert_eq!(
            rows("<https://x.y/z> [x](https://x.y) <me@x.y> [https://a.b](https://a.b)"),
            ["https://x.y/z x (https://x.y) me@x.y https://a.b"]
        );
        let lines = render("~~old~~ new", &Theme::new(true), 80);
        assert!(
            lines[0].line.spans[0]
                .style
                .add_modifier
                .contains(Modifier::CROSSED_OUT)
        );
    }

    #[test]
    fn later_paragraphs_of_an_item_are_set_off() {
        assert_eq!(
            rows("1. first\n2. second\n\n   more of it\n3. third"),
            ["1. first", "2. second", "", "   more of it", "3. third"]
        );
    }
}
