//! The multi-line composer: a text buffer with a cursor, and its rows at a width (the cursor's
//! row and column included).

use crate::wrap::text_width;
use unicode_width::UnicodeWidthChar;

/// The text being typed, with its cursor.
#[derive(Debug, Default, Clone)]
pub struct Composer {
    text: String,
    /// A byte offset on a character boundary.
    cursor: usize,
}

/// The composer laid out at a width.
#[derive(Debug, PartialEq)]
pub struct Layout {
    /// The rows, wrapped to the width.
    pub rows: Vec<String>,
    /// The row of the cursor.
    pub cursor_row: usize,
    /// The column of the cursor, in display cells.
    pub cursor_col: usize,
}

impl Composer {
    /// The whole text.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Whether nothing is typed.
    pub fn is_empty(&self) -> bool {
        self.text.is_empty()
    }

    /// Replaces the text, with the cursor at its end.
    pub fn set(&mut self, text: String) {
        self.cursor = text.len();
        self.text = text;
    }

    /// Empties the composer and returns what it held.
    pub fn take(&mut self) -> String {
        self.cursor = 0;
        std::mem::take(&mut self.text)
    }

    /// Inserts `text` at the cursor.
    pub fn insert(&mut self, text: &str) {
        self.text.insert_str(self.cursor, text);
        self.cursor += text.len();
    }

    /// Inserts one character at the cursor.
    pub fn insert_char(&mut self, c: char) {
        self.text.insert(self.cursor, c);
        self.cursor += c.len_utf8();
    }

    fn prev_boundary(&self) -> Option<usize> {
        self.text[..self.cursor]
            .char_indices()
            .last()
            .map(|(i, _)| i)
    }

    fn next_boundary(&self) -> Option<usize> {
        self.text[self.cursor..]
            .chars()
            .next()
            .map(|c| self.cursor + c.len_utf8())
    }

    /// Deletes the character before the cursor.
    pub fn backspace(&mut self) {
        if let Some(prev) = self.prev_boundary() {
            self.text.replace_range(prev..self.cursor, "");
            self.cursor = prev;
        }
    }

    /// Deletes the character at the cursor.
    pub fn delete(&mut self) {
        if let Some(next) = self.next_boundary() {
            self.text.replace_range(self.cursor..next, "");
        }
    }

    /// Moves the cursor one character left.
    pub fn left(&mut self) {
        if let Some(prev) = self.prev_boundary() {
            self.cursor = prev;
        }
    }

    /// Moves the cursor one character right.
    pub fn right(&mut self) {
        if let Some(next) = self.next_boundary() {
            self.cursor = next;
        }
    }

    fn line_start(&self) -> usize {
        self.text[..self.cursor].rfind('\n').map_or(0, |i| i + 1)
    }

    fn line_end(&self) -> usize {
        self.text[self.cursor..]
            .find('\n')
            .map_or(self.text.len(), |i| self.cursor + i)
    }

    /// Moves the cursor to the start of its line.
    pub fn home(&mut self) {
        self.cursor = self.line_start();
    }

    /// Moves the cursor to the end of its line.
    pub fn end(&mut self) {
        self.cursor = self.line_end();
    }

    /// Deletes from the line start to the cursor (Ctrl+U).
    pub fn kill_to_start(&mut self) {
        let start = self.line_start();
        self.text.replace_range(start..self.cursor, "");
        self.cursor = start;
    }

    /// Deletes from the cursor to the line end (Ctrl+K).
    pub fn kill_to_end(&mut self) {
        let end = self.line_end();
        self.text.replace_range(self.cursor..end, "");
    }

    /// Deletes the word before the cursor (Ctrl+W).
    pub fn delete_word(&mut self) {
        let before = &self.text[..self.cursor];
        let trimmed = before.trim_end_matches([' ', '\t']);
        let start = trimmed.rfind([' ', '\t', '\n']).map_or(0, |i| i + 1);
        self.text.replace_range(start..self.cursor, "");
        self.cursor = start;
    }

    /// The text before the cursor (what completion looks at).
    pub fn before_cursor(&self) -> &str {
        &self.text[..self.cursor]
    }

    /// Replaces the `len` bytes before the cursor with `text` (a completed word). `len` ends
    /// on the cursor and starts on a character boundary.
    pub fn replace_before_cursor(&mut self, len: usize, text: &str) {
        let start = self.cursor.saturating_sub(len);
        self.text.replace_range(start..self.cursor, text);
        self.cursor = start + text.len();
    }

    /// Whether the cursor is on the first line.
    pub fn on_first_line(&self) -> bool {
        !self.text[..self.cursor].contains('\n')
    }

    /// Whether the cursor is on the last line.
    pub fn on_last_line(&self) -> bool {
        !self.text[self.cursor..].contains('\n')
    }

    /// Moves the cursor one line up (false on the first line).
    pub fn up(&mut self) -> bool {
        if self.on_first_line() {
            return false;
        }
        let start = self.line_start();
        let column = self.text[start..self.cursor].chars().count();
        let prev_start = self.text[..start - 1].rfind('\n').map_or(0, |i| i + 1);
        self.cursor = advance(&self.text, prev_start, start - 1, column);
        true
    }

    /// Moves the cursor one line down (false on the last line).
    pub fn down(&mut self) -> bool {
        if self.on_last_line() {
            return false;
        }
        let column = self.text[self.line_start()..self.cursor].chars().count();
        let next_start = self.line_end() + 1;
        let next_end = self.text[next_start..]
            .find('\n')
            .map_or(self.text.len(), |i| next_start + i);
        self.cursor = advance(&self.text, next_start, next_end, column);
        true
    }

    /// Rows at `width` cells (character wrapped), with the cursor position.
    pub fn layout(&self, width: usize) -> Layout {
        let width = width.max(2);
        let mut rows = vec![String::new()];
        let mut row_width = 0;
        let mut cursor = (0, 0);
        for (index, c) in self.text.char_indices() {
            if index == self.cursor {
                cursor = (rows.len() - 1, row_width);
            }
            if c == '\n' {
                rows.push(String::new());
                row_width = 0;
                continue;
            }
            let (c, w) = if c.is_control() {
                ('\u{fffd}', 1)
            } else {
                (c, c.width().unwrap_or(0))
            };
            if row_width + w > width {
                rows.push(String::new());
                row_width = 0;
            }
            if let Some(row) = rows.last_mut() {
                row.push(c);
            }
            row_width += w;
        }
        if self.cursor >= self.text.len() {
            let last = rows.last().map_or(0, |r| text_width(r));
            cursor = if last >= width {
                rows.push(String::new());
                (rows.len() - 1, 0)
            } else {
                (rows.len() - 1, last)
            };
        }
        Layout {
            rows,
            cursor_row: cursor.0,
            cursor_col: cursor.1,
        }
    }
}

/// The byte offset `column` characters into `text[start..end]` (clamped to `end`).
fn advance(text: &str, start: usize, end: usize, column: usize) -> usize {
    text[start..end]
        .char_indices()
        .nth(column)
        .map_or(end, |(i, _)| start + i)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn editing_and_cursor_moves() {
        let mut c = Composer::default();
        c.insert("héllo");
        c.left();
        c.left();
        c.backspace();
        assert_eq!(c.text(), "hélo");
        c.insert_char('\n');
        c.insert("x");
        assert!(!c.on_first_line());
        assert!(c.up());
        c.end();
        c.insert("!");
        assert_eq!(c.text(), "hé!\nxlo");
        assert!(c.down());
        c.kill_to_start();
        assert_eq!(c.text(), "hé!\n");
    }

    #[test]
    fn delete_word_removes_the_previous_word() {
        let mut c = Composer::default();
        c.insert("run the tests  ");
        c.delete_word();
        assert_eq!(c.text(), "run the ");
    }

    #[test]
    fn layout_wraps_and_places_the_cursor() {
        let mut c = Composer::default();
        c.insert("abcdef\ngh");
        let layout = c.layout(4);
        assert_eq!(layout.rows, ["abcd", "ef", "gh"]);
        assert_eq!((layout.cursor_row, layout.cursor_col), (2, 2));
        let mut c = Composer::default();
        c.insert("abcd");
        let layout = c.layout(4);
        assert_eq!((layout.cursor_row, layout.cursor_col), (1, 0));
    }
}
