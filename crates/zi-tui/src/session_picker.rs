//! `/resume`: a picker over the cwd's sessions (the `session.list` catalog, newest first) with
//! each one's first message, age and size. Typing filters (fuzzy, on the first message), Up and
//! Down move, Enter resumes, Esc closes.

use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph};
use zi_protocol::params::SessionListScope;
use zi_protocol::results::SessionSummary;

use crate::app::App;
use crate::keys::Action;
use crate::sessions::{self, SessionTarget};
use crate::slash::fuzzy_score;
use crate::status::clip;
use crate::theme::Theme;
use crate::transcript::Item;
use crate::wrap::text_width;

/// Sessions the picker offers at most (the newest).
const LISTED: u64 = 200;
/// Rows of sessions shown at once.
const VISIBLE: usize = 12;

/// One session on offer.
#[derive(Debug, Clone, PartialEq)]
pub struct Choice {
    pub path: PathBuf,
    pub first_message: String,
    pub messages: u64,
    pub bytes: u64,
    /// Since the journal was last written.
    pub age: Duration,
}

impl Choice {
    fn from_summary(summary: SessionSummary, now: SystemTime) -> Choice {
        let path = PathBuf::from(&summary.path);
        let metadata = std::fs::metadata(&path).ok();
        let age = metadata
            .as_ref()
            .and_then(|m| m.modified().ok())
            .and_then(|at| now.duration_since(at).ok())
            .unwrap_or_default();
        Choice {
            first_message: summary.first_user_text.replace('\n', " "),
            messages: summary.message_count,
            bytes: metadata.map_or(0, |m| m.len()),
            age,
            path,
        }
    }
}

pub struct SessionPicker {
    choices: Vec<Choice>,
    query: String,
    /// Index into the filtered list.
    selected: usize,
}

impl SessionPicker {
    pub fn new(choices: Vec<Choice>) -> SessionPicker {
        SessionPicker {
            choices,
            query: String::new(),
            selected: 0,
        }
    }

    /// The choices matching the query, in catalog order (newest first).
    fn filtered(&self) -> Vec<&Choice> {
        let query = self.query.to_lowercase();
        self.choices
            .iter()
            .filter(|c| {
                query.is_empty() || fuzzy_score(&c.first_message.to_lowercase(), &query).is_some()
            })
            .collect()
    }

    /// Applies a key; `Some` when the picker closes (with the chosen journal, if any).
    pub fn key(&mut self, action: Action) -> Option<Option<PathBuf>> {
        let count = self.filtered().len();
        match action {
            Action::Escape | Action::CtrlC => return Some(None),
            Action::Submit => {
                return Some(self.filtered().get(self.selected).map(|c| c.path.clone()));
            }
            Action::Up => self.selected = self.selected.saturating_sub(1),
            Action::Down => self.selected = (self.selected + 1).min(count.saturating_sub(1)),
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

    /// The picker's rows at `width` cells: the query, then one row per visible session, its
    /// facts right-aligned.
    pub fn lines(&self, theme: &Theme, width: usize) -> Vec<Line<'static>> {
        let filtered = self.filtered();
        let mut lines = vec![Line::from(vec![
            Span::styled("filter: ", theme.dim()),
            Span::raw(self.query.clone()),
        ])];
        if filtered.is_empty() {
            lines.push(Line::styled("no session matches", theme.dim()));
        }
        let first = (self.selected + 1).saturating_sub(VISIBLE);
        for (index, choice) in filtered.iter().enumerate().skip(first).take(VISIBLE) {
            let facts = format!(
                "  {} · {} msgs · {}",
                age(choice.age),
                choice.messages,
                size(choice.bytes)
            );
            let room = width.saturating_sub(text_width(&facts) + 2).max(8);
            let text = if choice.first_message.is_empty() {
                "(no message)".to_string()
            } else {
                clip(&choice.first_message, room)
            };
            let pad = room.saturating_sub(text_width(&text));
            let selected = index == self.selected;
            let mark = if selected { "› " } else { "  " };
            let style = if selected {
                theme.bold()
            } else {
                theme.plain()
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
}

/// `/resume`: opens the picker over the cwd's other sessions.
pub fn open(app: &mut App) {
    let current = app.session.journal_path();
    let page = app.session.list_sessions(0, LISTED, SessionListScope::Cwd);
    let now = SystemTime::now();
    let choices: Vec<Choice> = page
        .sessions
        .into_iter()
        .filter(|s| current.as_deref() != Some(std::path::Path::new(&s.path)))
        .map(|s| Choice::from_summary(s, now))
        .collect();
    if choices.is_empty() {
        app.transcript.push(Item::Notice(
            "No other session of this directory to resume".to_string(),
        ));
        return;
    }
    app.picker = Some(SessionPicker::new(choices));
}

/// A key while the picker is open.
pub fn key(app: &mut App, action: Action) {
    let Some(picker) = app.picker.as_mut() else {
        return;
    };
    match picker.key(action) {
        None => {}
        Some(choice) => {
            app.picker = None;
            if let Some(path) = choice {
                sessions::replace(app, SessionTarget::Resume(path));
            }
        }
    }
}

/// Draws the picker over the lower part of the screen.
pub fn draw(frame: &mut Frame<'_>, picker: &SessionPicker, theme: &Theme, area: Rect) {
    let width = area.width.saturating_sub(2);
    let lines = picker.lines(theme, width.saturating_sub(2) as usize);
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
                .title(" Resume a session · ↑↓ Enter · Esc closes "),
        ),
        rect,
    );
}

/// `3s`, `5m`, `2h`, `4d` ago.
fn age(age: Duration) -> String {
    let seconds = age.as_secs();
    match seconds {
        0..60 => format!("{seconds}s ago"),
        60..3600 => format!("{}m ago", seconds / 60),
        3600..86400 => format!("{}h ago", seconds / 3600),
        _ => format!("{}d ago", seconds / 86400),
    }
}

/// `812 B`, `3.2 KiB`, `1.5 MiB`.
fn size(bytes: u64) -> String {
    const KIB: f64 = 1024.0;
    let b = bytes as f64;
    if b < KIB {
        format!("{bytes} B")
    } else if b < KIB * KIB {
        format!("{:.1} KiB", b / KIB)
    } else {
        format!("{:.1} MiB", b / (KIB * KIB))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn choice(first: &str, age_secs: u64, bytes: u64) -> Choice {
        Choice {
            path: PathBuf::from(format!("/s/{first}.jsonl")),
            first_message: first.to_string(),
            messages: 4,
            bytes,
            age: Duration::from_secs(age_secs),
        }
    }

    fn rows(picker: &SessionPicker, width: usize) -> Vec<String> {
        picker
            .lines(&Theme::new(true), width)
            .iter()
            .map(|l| l.to_string())
            .collect()
    }

    #[test]
    fn rows_show_first_message_age_and_size() {
        let picker = SessionPicker::new(vec![
            choice("fix the parser", 90, 3300),
            choice("write docs", 7200, 512),
        ]);
        assert_eq!(
            rows(&picker, 60),
            [
                "filter: ",
                "› fix the parser                   1m ago · 4 msgs · 3.2 KiB",
                "  write docs                         2h ago · 4 msgs · 512 B",
            ]
        );
    }

    #[test]
    fn typing_filters_and_enter_picks_the_selected_one() {
        let mut picker = SessionPicker::new(vec![
            choice("fix the parser", 1, 1),
            choice("write docs", 1, 1),
            choice("write tests", 1, 1),
        ]);
        for c in "wrt".chars() {
            assert_eq!(picker.key(Action::Insert(c)), None);
        }
        assert_eq!(picker.key(Action::Down), None);
        assert_eq!(picker.key(Action::Down), None, "stops at the last match");
        assert_eq!(
            picker.key(Action::Submit),
            Some(Some(PathBuf::from("/s/write tests.jsonl")))
        );
        assert_eq!(picker.key(Action::Escape), Some(None));
    }

    #[test]
    fn the_picker_draws_over_a_test_backend() {
        let mut terminal =
            ratatui::Terminal::new(ratatui::backend::TestBackend::new(50, 10)).unwrap();
        let picker = SessionPicker::new(vec![choice("hello there", 30, 2048)]);
        terminal
            .draw(|frame| draw(frame, &picker, &Theme::new(true), frame.area()))
            .unwrap();
        let buffer = terminal.backend().buffer();
        let text: Vec<String> = (0..buffer.area.height)
            .map(|y| {
                (0..buffer.area.width)
                    .map(|x| buffer[(x, y)].symbol().to_string())
                    .collect::<String>()
            })
            .collect();
        let screen = text.join("\n");
        assert!(screen.contains("Resume a session"), "{screen}");
        assert!(screen.contains("› hello there"), "{screen}");
        assert!(screen.contains("30s ago · 4 msgs · 2.0 KiB"), "{screen}");
    }
}
