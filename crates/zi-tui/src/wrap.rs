//! Word wrapping of styled lines to a width, so the transcript knows its height in rows and can
//! scroll by row (ratatui's own wrapping does not report the height).

use ratatui::style::Style;
use ratatui::text::{Line, Span};
use unicode_width::UnicodeWidthChar;

/// The display width of a character (control characters count as one cell: they are replaced
/// by `�` when wrapped).
fn char_width(c: char) -> usize {
    if c.is_control() {
        1
    } else {
        c.width().unwrap_or(0)
    }
}

/// The display width of a string.
pub fn text_width(text: &str) -> usize {
    text.chars().map(char_width).sum()
}

/// One row under construction.
struct Row {
    spans: Vec<Span<'static>>,
    width: usize,
}

impl Row {
    fn new(indent: &[Span<'static>], indent_width: usize) -> Row {
        Row {
            spans: indent.to_vec(),
            width: indent_width,
        }
    }

    fn push(&mut self, text: &str, style: Style) {
        if text.is_empty() {
            return;
        }
        self.width += text_width(text);
        match self.spans.last_mut() {
            Some(last) if last.style == style => last.content.to_mut().push_str(text),
            _ => self.spans.push(Span::styled(text.to_string(), style)),
        }
    }
}

/// The rows of one logical line being wrapped, and the word not placed yet.
struct Wrapper<'a> {
    width: usize,
    indent: &'a [Span<'static>],
    indent_width: usize,
    rows: Vec<Line<'static>>,
    row: Row,
    /// Words are split off with the style of the span they come from; a word may span spans.
    word: Vec<(String, Style)>,
    word_width: usize,
}

impl Wrapper<'_> {
    fn break_row(&mut self) {
        let full = std::mem::replace(&mut self.row, Row::new(self.indent, self.indent_width));
        self.rows.push(Line::from(full.spans));
    }

    fn flush_word(&mut self) {
        if self.word.is_empty() {
            return;
        }
        if self.row.width + self.word_width > self.width && self.row.width > self.indent_width {
            // Trailing spaces of the full row are dropped.
            trim_trailing_spaces(&mut self.row.spans);
            self.break_row();
        }
        for (text, style) in std::mem::take(&mut self.word) {
            for c in text.chars() {
                let w = char_width(c);
                if self.row.width + w > self.width && self.row.width > self.indent_width {
                    self.break_row();
                }
                let c = if c.is_control() { '\u{fffd}' } else { c };
                let mut buf = [0u8; 4];
                self.row.push(c.encode_utf8(&mut buf), style);
            }
        }
        self.word_width = 0;
    }
}

/// Wraps `line` to `width` cells, breaking at spaces where possible and inside a word only when
/// the word is wider than a row. Continuation rows start with `indent` (e.g. a list bullet's
/// hanging indent). Always returns at least one row.
pub fn wrap_line(line: &Line<'_>, width: usize, indent: &[Span<'static>]) -> Vec<Line<'static>> {
    let width = width.max(1);
    let indent_width: usize = indent.iter().map(|s| text_width(&s.content)).sum();
    let indent: &[Span<'static>] = if indent_width >= width { &[] } else { indent };
    let indent_width = if indent.is_empty() { 0 } else { indent_width };
    let mut w = Wrapper {
        width,
        indent,
        indent_width,
        rows: Vec::new(),
        row: Row::new(&[], 0),
        word: Vec::new(),
        word_width: 0,
    };
    for span in &line.spans {
        let style = line.style.patch(span.style);
        for c in span.content.chars() {
            if c == ' ' {
                w.flush_word();
                if w.row.width < width {
                    w.row.push(" ", style);
                }
                continue;
            }
            match w.word.last_mut() {
                Some((text, s)) if *s == style => text.push(c),
                _ => w.word.push((c.to_string(), style)),
            }
            w.word_width += char_width(c);
        }
    }
    w.flush_word();
    w.rows.push(Line::from(w.row.spans));
    w.rows
}

/// A line before wrapping, with the indent its continuation rows get.
#[derive(Debug, Clone, Default)]
pub struct Logical {
    /// The line.
    pub line: Line<'static>,
    /// What continuation rows start with.
    pub indent: Vec<Span<'static>>,
}

impl Logical {
    /// A line whose continuation rows are not indented.
    pub fn new(line: Line<'static>) -> Logical {
        Logical {
            line,
            indent: Vec::new(),
        }
    }

    /// A line whose continuation rows start with `indent`.
    pub fn indented(line: Line<'static>, indent: Vec<Span<'static>>) -> Logical {
        Logical { line, indent }
    }
}

/// Wraps every logical line to `width`.
pub fn wrap_all(lines: &[Logical], width: usize) -> Vec<Line<'static>> {
    let mut rows = Vec::with_capacity(lines.len());
    for logical in lines {
        rows.extend(wrap_line(&logical.line, width, &logical.indent));
    }
    rows
}

fn trim_trailing_spaces(spans: &mut Vec<Span<'static>>) {
    while let Some(last) = spans.last_mut() {
        let trimmed = last.content.trim_end_matches(' ').len();
        if trimmed == 0 {
            spans.pop();
        } else {
            last.content.to_mut().truncate(trimmed);
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(rows: &[Line<'_>]) -> Vec<String> {
        rows.iter().map(|l| l.to_string()).collect()
    }

    #[test]
    fn breaks_at_spaces() {
        let rows = wrap_line(&Line::from("the quick brown fox"), 10, &[]);
        assert_eq!(texts(&rows), ["the quick", "brown fox"]);
    }

    #[test]
    fn splits_words_wider_than_a_row() {
        let rows = wrap_line(&Line::from("abcdefghij"), 4, &[]);
        assert_eq!(texts(&rows), ["abcd", "efgh", "ij"]);
    }

    #[test]
    fn continuation_rows_get_the_indent() {
        let rows = wrap_line(&Line::from("- one two three"), 8, &[Span::raw("  ")]);
        assert_eq!(texts(&rows), ["- one", "  two", "  three"]);
    }

    #[test]
    fn wide_characters_count_two_cells() {
        let rows = wrap_line(&Line::from("日本語です"), 4, &[]);
        assert_eq!(texts(&rows), ["日本", "語で", "す"]);
    }

    #[test]
    fn an_empty_line_is_one_row() {
        assert_eq!(wrap_line(&Line::from(""), 10, &[]).len(), 1);
    }
}
