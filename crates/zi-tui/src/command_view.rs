//! A command as the approval prompt shows it (docs/interactive.md#approvals): every character
//! visible, wrapped to the prompt's width, in a window that scrolls — and a record of how far
//! the person has read, so a command can be allowed only once all of it was on screen.
//!
//! Nothing is hidden or reordered: a newline starts a new row, and characters a terminal would
//! not draw as themselves (control characters, zero-width and bidirectional formatting
//! characters) are shown as escapes (`\t`, `\r`, `\u{202e}`) in the warning style.

use ratatui::style::Style;
use ratatui::text::{Line, Span};
use unicode_width::UnicodeWidthChar;

use crate::theme::Theme;

/// The narrowest row: the longest escape (`\u{10ffff}`) fits.
const MIN_WIDTH: usize = 10;

/// One display row of a command.
#[derive(Debug, Clone, PartialEq)]
pub struct CommandRow {
    pub line: Line<'static>,
    /// The byte offset in the command where the row starts.
    pub start: usize,
    /// The byte offset where the row ends (the next row's start).
    pub end: usize,
}

/// One unit of a row: a character drawn as itself, or the escape that stands for one.
struct Atom {
    text: String,
    width: usize,
    escaped: bool,
    space: bool,
    end: usize,
}

/// Characters drawn as an escape instead of themselves: controls, and anything a terminal
/// draws as nothing (zero-width, formatting and bidirectional characters, which can hide or
/// reorder the text around them).
fn escape(c: char) -> Option<String> {
    match c {
        '\t' => Some("\\t".to_string()),
        '\r' => Some("\\r".to_string()),
        c if c.is_control() => Some(format!("\\u{{{:x}}}", c as u32)),
        c if c.width().unwrap_or(0) == 0 || is_format(c) => Some(format!("\\u{{{:x}}}", c as u32)),
        _ => None,
    }
}

/// Formatting characters some width tables give a width to.
fn is_format(c: char) -> bool {
    matches!(
        c,
        '\u{00ad}'
            | '\u{061c}'
            | '\u{115f}'
            | '\u{1160}'
            | '\u{180e}'
            | '\u{200b}'..='\u{200f}'
            | '\u{2028}'..='\u{202e}'
            | '\u{2060}'..='\u{206f}'
            | '\u{3164}'
            | '\u{feff}'
            | '\u{ffa0}'
            | '\u{fff9}'..='\u{fffb}'
    )
}

fn atoms(line: &str, offset: usize) -> Vec<Atom> {
    line.char_indices()
        .map(|(i, c)| {
            let end = offset + i + c.len_utf8();
            match escape(c) {
                Some(text) => Atom {
                    width: text.len(),
                    text,
                    escaped: true,
                    space: false,
                    end,
                },
                None => Atom {
                    text: c.to_string(),
                    width: c.width().unwrap_or(1),
                    escaped: false,
                    space: c == ' ',
                    end,
                },
            }
        })
        .collect()
}

fn row_line(atoms: &[Atom], theme: &Theme) -> Line<'static> {
    let mut spans: Vec<Span<'static>> = Vec::new();
    for atom in atoms {
        let style = if atom.escaped {
            theme.warning()
        } else {
            Style::default()
        };
        match spans.last_mut() {
            Some(last) if last.style == style => last.content.to_mut().push_str(&atom.text),
            _ => spans.push(Span::styled(atom.text.clone(), style)),
        }
    }
    Line::from(spans)
}

/// The rows of `command` at `width` cells: one source line after another, each broken after
/// its last space that fits (or inside a word longer than a row). Every byte of the command
/// belongs to exactly one row, in order.
pub fn rows(command: &str, width: usize, theme: &Theme) -> Vec<CommandRow> {
    let width = width.max(MIN_WIDTH);
    let mut out = Vec::new();
    let mut offset = 0;
    for source in command.split_inclusive('\n') {
        let text = source.strip_suffix('\n').unwrap_or(source);
        let line_end = offset + source.len();
        let mut pending: Vec<Atom> = Vec::new();
        let mut used = 0;
        let mut start = offset;
        for atom in atoms(text, offset) {
            if used + atom.width > width && !pending.is_empty() {
                // Break after the row's last space when the rest is a word that moves down.
                let cut = pending
                    .iter()
                    .rposition(|a| a.space)
                    .map_or(pending.len(), |i| i + 1);
                let carry = pending.split_off(cut);
                let end = pending.last().map_or(start, |a| a.end);
                out.push(CommandRow {
                    line: row_line(&pending, theme),
                    start,
                    end,
                });
                start = end;
                pending = carry;
                used = pending.iter().map(|a| a.width).sum();
            }
            used += atom.width;
            pending.push(atom);
        }
        out.push(CommandRow {
            line: row_line(&pending, theme),
            start,
            end: line_end,
        });
        offset = line_end;
    }
    if out.is_empty() {
        out.push(CommandRow {
            line: Line::default(),
            start: 0,
            end: 0,
        });
    }
    out
}

/// Whether `command` reads the same on one row of the prompt's header as in [`rows`]: no
/// newline and nothing escaped.
pub fn is_plain(command: &str) -> bool {
    command.chars().all(|c| escape(c).is_none())
}

/// How far the person has read a command, and where its window is.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Reading {
    /// The first row of the window.
    pub scroll: usize,
    /// Every byte before this offset has been on screen.
    pub seen_to: usize,
    /// The window's height at the last frame (a page).
    pub page: usize,
    /// Ctrl+O: the window takes the screen.
    pub expanded: bool,
}

impl Reading {
    /// The rows of the window of `height` rows over `rows`; records them as read when they
    /// join what was read before (a window that jumped past unread rows does not count them).
    pub fn window<'a>(&mut self, rows: &'a [CommandRow], height: usize) -> &'a [CommandRow] {
        let height = height.max(1);
        self.page = height;
        self.scroll = self.scroll.min(rows.len().saturating_sub(height));
        let end = (self.scroll + height).min(rows.len());
        let shown = &rows[self.scroll..end];
        if let (Some(first), Some(last)) = (shown.first(), shown.last())
            && first.start <= self.seen_to
        {
            self.seen_to = self.seen_to.max(last.end);
        }
        shown
    }

    /// Whether every byte of a command of `len` bytes has been on screen.
    pub fn read_whole(&self, len: usize) -> bool {
        self.seen_to >= len
    }

    /// Moves the window by `rows` (negative: up); the next frame clamps it.
    pub fn scroll_by(&mut self, rows: isize) {
        self.scroll = self.scroll.saturating_add_signed(rows);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(rows: &[CommandRow]) -> Vec<String> {
        rows.iter().map(|r| r.line.to_string()).collect()
    }

    #[test]
    fn rows_break_after_spaces_and_inside_long_words() {
        let theme = Theme::new(true);
        assert_eq!(
            texts(&rows("echo one two three", 10, &theme)),
            ["echo one ", "two three"]
        );
        assert_eq!(
            texts(&rows("abcdefghijklmnopqrstuvwxy", 10, &theme)),
            ["abcdefghij", "klmnopqrst", "uvwxy"]
        );
    }

    #[test]
    fn every_byte_belongs_to_one_row_in_order() {
        let theme = Theme::new(true);
        let command = "echo a\n\nprintf 'x\\ty'\tdone; touch PWNED; écho 日本語";
        let rows = rows(command, 10, &theme);
        let mut at = 0;
        for row in &rows {
            assert_eq!(row.start, at, "{rows:?}");
            assert!(row.end >= row.start);
            at = row.end;
        }
        assert_eq!(at, command.len());
        // Newlines start rows (an empty line is an empty row) and the words stay whole.
        assert_eq!(texts(&rows)[..3], ["echo a", "", "printf "]);
        assert!(texts(&rows).iter().any(|r| r.contains("PWNED;")));
    }

    #[test]
    fn invisible_characters_are_shown_as_escapes() {
        let theme = Theme::new(false);
        let command = "echo safe\r\u{1b}[2K\u{202e}rm -rf ~\u{200b}";
        let rows = rows(command, 80, &theme);
        assert_eq!(
            texts(&rows),
            ["echo safe\\r\\u{1b}[2K\\u{202e}rm -rf ~\\u{200b}"]
        );
        let escape = rows[0]
            .line
            .spans
            .iter()
            .find(|s| s.content == "\\r\\u{1b}");
        assert_eq!(escape.map(|s| s.style), Some(theme.warning()));
        assert!(!is_plain(command));
        assert!(is_plain("echo fine | grep x"));
        assert!(!is_plain("echo a\nb"));
    }

    #[test]
    fn reading_counts_only_rows_joined_to_what_was_read() {
        let theme = Theme::new(true);
        let words: Vec<String> = "abcdef".chars().map(|c| c.to_string().repeat(9)).collect();
        let command = words.join(" ");
        let all = rows(&command, 10, &theme);
        assert_eq!(all.len(), 6);
        let mut reading = Reading::default();
        assert_eq!(texts(reading.window(&all, 2)), ["aaaaaaaaa ", "bbbbbbbbb "]);
        assert!(!reading.read_whole(command.len()));
        // A jump past unread rows (to the end) does not make them read.
        reading.scroll_by(100);
        assert_eq!(texts(reading.window(&all, 2)), ["eeeeeeeee ", "fffffffff"]);
        assert_eq!(reading.seen_to, all[1].end);
        assert!(!reading.read_whole(command.len()));
        // Page by page from the top reads everything.
        reading.scroll = 0;
        for _ in 0..3 {
            reading.window(&all, 2);
            reading.scroll_by(2);
        }
        assert!(reading.read_whole(command.len()));
        // The window is clamped to the rows.
        reading.window(&all, 2);
        assert_eq!(reading.scroll, 4);
    }
}
