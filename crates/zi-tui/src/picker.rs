//! The picker the view opens for `/resume`, `/model`, `/thinking` and `/login` (docs/interactive.md): a
//! box over the lower part of the screen with a filter row and one row per entry (its text on
//! the left, facts on the right). Typing filters — fuzzy, ignoring case; muted entries after the
//! others, and within each, prefix matches first, then substrings, then scattered letters, each
//! in the caller's order — Up and Down move, PageUp and PageDown move a page, Enter picks, Esc
//! closes.

use std::path::PathBuf;

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph};

use zi_protocol::thinking::ThinkingLevel;

use crate::app::App;
use crate::keys::Action;
use crate::sessions::{self, SessionTarget};
use crate::status::clip;
use crate::theme::Theme;
use crate::wrap::text_width;

/// Rows of entries shown at once.
const VISIBLE: usize = 12;

/// One entry on offer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// What it is (left).
    pub text: String,
    /// Facts about it (right, dim).
    pub facts: String,
    /// What typing is matched against (besides `text`).
    pub search: String,
    /// Drawn dim and listed after the others (a model that is not configured).
    pub muted: bool,
}

impl Entry {
    pub fn new(text: impl Into<String>, facts: impl Into<String>) -> Entry {
        Entry {
            text: text.into(),
            facts: facts.into(),
            search: String::new(),
            muted: false,
        }
    }
}

/// How well `query` (lower case) matches `text` (lower case): a prefix, a substring, letters in
/// order; `None` when it does not.
fn rank(text: &str, query: &str) -> Option<u8> {
    if text.starts_with(query) {
        Some(0)
    } else if text.contains(query) {
        Some(1)
    } else {
        let mut letters = text.chars();
        query.chars().all(|q| letters.any(|c| c == q)).then_some(2)
    }
}

/// A filterable list of entries.
#[derive(Debug, Clone)]
pub struct Picker {
    title: String,
    /// Shown when nothing matches.
    empty: String,
    entries: Vec<Entry>,
    query: String,
    /// Index into the filtered list.
    selected: usize,
}

impl Picker {
    pub fn new(title: impl Into<String>, empty: impl Into<String>, entries: Vec<Entry>) -> Picker {
        Picker {
            title: title.into(),
            empty: empty.into(),
            entries,
            query: String::new(),
            selected: 0,
        }
    }

    /// Starts with `query` typed.
    pub fn with_query(mut self, query: &str) -> Picker {
        self.query = query.to_string();
        self
    }

    /// Selects entry `index` (of all entries) if the filter shows it.
    pub fn select(mut self, index: usize) -> Picker {
        if let Some(at) = self.filtered().iter().position(|i| *i == index) {
            self.selected = at;
        }
        self
    }

    /// The indices of the entries matching the query, best first.
    pub fn filtered(&self) -> Vec<usize> {
        let query = self.query.to_lowercase();
        let mut found: Vec<(bool, u8, usize)> = self
            .entries
            .iter()
            .enumerate()
            .filter_map(|(i, entry)| {
                if query.is_empty() {
                    return Some((entry.muted, 0, i));
                }
                let text = rank(&entry.text.to_lowercase(), &query);
                let search = rank(&entry.search.to_lowercase(), &query);
                let best = match (text, search) {
                    (Some(a), Some(b)) => a.min(b),
                    (a, b) => a.or(b)?,
                };
                Some((entry.muted, best, i))
            })
            .collect();
        found.sort();
        found.into_iter().map(|(_, _, i)| i).collect()
    }

    /// Applies a key; `Some` when the picker closes (with the index of the chosen entry).
    pub fn key(&mut self, action: Action) -> Option<Option<usize>> {
        let filtered = self.filtered();
        let last = filtered.len().saturating_sub(1);
        match action {
            Action::Escape | Action::CtrlC => return Some(None),
            Action::Submit => return Some(filtered.get(self.selected).copied()),
            Action::Up => self.selected = self.selected.saturating_sub(1),
            Action::Down => self.selected = (self.selected + 1).min(last),
            Action::PageUp => self.selected = self.selected.saturating_sub(VISIBLE),
            Action::PageDown => self.selected = (self.selected + VISIBLE).min(last),
            Action::Insert(c) => {
                self.query.push(c);
                self.selected = 0;
            }
            Action::Backspace => {
                self.query.pop();
                self.selected = 0;
            }
            _ => {}
        }
        None
    }

    /// The picker's rows at `width` cells: the filter, then the visible entries, each one's
    /// facts right-aligned.
    pub fn lines(&self, theme: &Theme, width: usize) -> Vec<Line<'static>> {
        let filtered = self.filtered();
        let mut lines = vec![Line::from(vec![
            Span::styled("filter: ", theme.dim()),
            Span::raw(self.query.clone()),
        ])];
        if filtered.is_empty() {
            lines.push(Line::styled(self.empty.clone(), theme.dim()));
        }
        let first = (self.selected + 1).saturating_sub(VISIBLE);
        for (n, index) in filtered.iter().enumerate().skip(first).take(VISIBLE) {
            let entry = &self.entries[*index];
            let facts = format!("  {}", entry.facts);
            let room = width.saturating_sub(text_width(&facts) + 2).max(8);
            let text = clip(&entry.text, room);
            let pad = room.saturating_sub(text_width(&text));
            let selected = n == self.selected;
            let mark = if selected { "› " } else { "  " };
            let style = match (selected, entry.muted) {
                (true, _) => theme.bold(),
                (false, true) => theme.dim(),
                (false, false) => theme.plain(),
            };
            lines.push(Line::from(vec![
                Span::styled(mark, theme.user()),
                Span::styled(text, style),
                Span::raw(" ".repeat(pad)),
                Span::styled(facts, theme.dim()),
            ]));
        }
        lines
    }

    /// Draws the picker over the lower part of `area`.
    pub fn draw(&self, frame: &mut Frame<'_>, theme: &Theme, area: Rect) {
        let width = area.width.saturating_sub(2);
        let lines = self.lines(theme, width.saturating_sub(2) as usize);
        let height = (lines.len() as u16 + 2).min(area.height);
        let rect = Rect::new(
            area.x + 1,
            area.bottom().saturating_sub(height + 2).max(area.y),
            width,
            height,
        );
        frame.render_widget(Clear, rect);
        frame.render_widget(
            Paragraph::new(lines).block(
                Block::default()
                    .borders(Borders::ALL)
                    .title(format!(" {} · ↑↓ Enter · Esc closes ", self.title)),
            ),
            rect,
        );
    }
}

/// What picking an entry does.
#[derive(Debug, Clone)]
pub enum Purpose {
    /// `/resume`: the journal of each entry.
    Resume(Vec<PathBuf>),
    /// `/model`: each entry's provider and id.
    Model(Vec<(String, String)>),
    /// `/thinking`: each entry's level.
    Thinking(Vec<ThinkingLevel>),
    /// `/login`: each entry's provider.
    Login(Vec<&'static str>),
}

/// The picker the view shows (it takes the keys while open).
#[derive(Debug, Clone)]
pub struct OpenPicker {
    pub picker: Picker,
    pub purpose: Purpose,
}

/// A key while a picker is open: it closes with the chosen entry acted on.
pub fn key(app: &mut App, action: Action) {
    let Some(open) = app.picker.as_mut() else {
        return;
    };
    let Some(chosen) = open.picker.key(action) else {
        return;
    };
    let Some(OpenPicker { purpose, .. }) = app.picker.take() else {
        return;
    };
    let Some(index) = chosen else {
        return;
    };
    match purpose {
        Purpose::Resume(paths) => {
            if let Some(path) = paths.into_iter().nth(index) {
                sessions::replace(app, SessionTarget::Resume(path));
            }
        }
        Purpose::Model(models) => {
            if let Some((provider, id)) = models.get(index) {
                crate::model_picker::select_model(app, provider, id);
            }
        }
        Purpose::Thinking(levels) => {
            if let Some(level) = levels.get(index) {
                crate::model_picker::select_thinking(app, *level);
            }
        }
        Purpose::Login(providers) => {
            if let Some(provider) = providers.get(index) {
                crate::login::picked(app, provider);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn picker(texts: &[&str]) -> Picker {
        let entries = texts.iter().map(|t| Entry::new(*t, "")).collect();
        Picker::new("Pick", "nothing matches", entries)
    }

    fn typed(picker: &mut Picker, text: &str) {
        for c in text.chars() {
            assert_eq!(picker.key(Action::Insert(c)), None);
        }
    }

    #[test]
    fn prefixes_then_substrings_then_scattered_letters_each_in_order() {
        let mut p = picker(&["mock/m2", "anthropic/claude-m2x", "m2/first", "mxx2", "m1"]);
        typed(&mut p, "M2");
        assert_eq!(p.filtered(), [2, 0, 1, 3]);
        assert_eq!(p.key(Action::Submit), Some(Some(2)));
        // Muted entries come after the others, whatever their match.
        let mut entries = vec![Entry::new("m2-unconfigured", ""), Entry::new("mock/m2", "")];
        entries[0].muted = true;
        let mut p = Picker::new("Pick", "none", entries);
        assert_eq!(p.filtered(), [1, 0]);
        typed(&mut p, "m2");
        assert_eq!(p.filtered(), [1, 0]);
    }

    #[test]
    fn the_search_text_matches_too_and_the_filter_can_empty_the_list() {
        let mut entries = vec![Entry::new("mock/m1", "configured")];
        entries[0].search = "Mock One".into();
        let mut p = Picker::new("Pick", "no model matches", entries);
        typed(&mut p, "one");
        assert_eq!(p.filtered(), [0]);
        typed(&mut p, "zz");
        assert!(p.filtered().is_empty());
        let rows: Vec<String> = p
            .lines(&Theme::new(true), 40)
            .iter()
            .map(|l| l.to_string())
            .collect();
        assert_eq!(rows, ["filter: onezz", "no model matches"]);
        assert_eq!(p.key(Action::Submit), Some(None), "Enter on nothing closes");
        assert_eq!(p.key(Action::Backspace), None);
    }

    #[test]
    fn moves_stop_at_the_ends_and_a_preselection_survives_until_typing() {
        let names: Vec<String> = (0..30).map(|n| format!("entry {n:02}")).collect();
        let texts: Vec<&str> = names.iter().map(String::as_str).collect();
        let mut p = picker(&texts).select(20);
        assert_eq!(p.key(Action::PageDown), None);
        assert_eq!(p.key(Action::Down), None);
        assert_eq!(p.key(Action::Submit), Some(Some(29)));
        p.key(Action::PageUp);
        p.key(Action::PageUp);
        p.key(Action::PageUp);
        p.key(Action::Up);
        assert_eq!(p.key(Action::Submit), Some(Some(0)));
        // The selected row is always among the visible ones.
        let p = picker(&texts).select(25);
        let rows = p.lines(&Theme::new(true), 30);
        assert!(rows.iter().any(|l| l.to_string().starts_with("› entry 25")));
        assert_eq!(p.clone().key(Action::Escape), Some(None));
    }
}
