//! `/resume`: a picker over the cwd's sessions (the `session.list` catalog, newest first) with
//! each one's first message, age and size. Typing filters (on the first message), Up and Down
//! move, Enter resumes, Esc closes.

use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use zi_protocol::params::SessionListScope;
use zi_protocol::results::SessionSummary;

use crate::app::App;
use crate::picker::{Entry, OpenPicker, Picker, Purpose};
use crate::transcript::Item;

/// Sessions the picker offers at most (the newest).
const LISTED: u64 = 200;

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

/// The picker over `choices` (newest first), and the journal of each entry.
pub fn picker(choices: Vec<Choice>) -> (Picker, Vec<PathBuf>) {
    let mut paths = Vec::with_capacity(choices.len());
    let entries = choices
        .into_iter()
        .map(|choice| {
            let text = if choice.first_message.is_empty() {
                "(no message)".to_string()
            } else {
                choice.first_message.clone()
            };
            let facts = format!(
                "{} · {} msgs · {}",
                age(choice.age),
                choice.messages,
                size(choice.bytes)
            );
            paths.push(choice.path);
            Entry {
                search: choice.first_message,
                ..Entry::new(text, facts)
            }
        })
        .collect();
    (
        Picker::new("Resume a session", "no session matches", entries),
        paths,
    )
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
    let (picker, paths) = picker(choices);
    app.picker = Some(OpenPicker {
        picker,
        purpose: Purpose::Resume(paths),
    });
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
    use crate::keys::Action;
    use crate::theme::Theme;

    fn choice(first: &str, age_secs: u64, bytes: u64) -> Choice {
        Choice {
            path: PathBuf::from(format!("/s/{first}.jsonl")),
            first_message: first.to_string(),
            messages: 4,
            bytes,
            age: Duration::from_secs(age_secs),
        }
    }

    fn rows(picker: &Picker, width: usize) -> Vec<String> {
        picker
            .lines(&Theme::new(true), width)
            .iter()
            .map(|l| l.to_string())
            .collect()
    }

    #[test]
    fn rows_show_first_message_age_and_size() {
        let (picker, _) = picker(vec![
            choice("fix the parser", 90, 3300),
            choice("write docs", 7200, 512),
            choice("", 5, 10),
        ]);
        assert_eq!(
            rows(&picker, 60),
            [
                "filter: ",
                "› fix the parser                   1m ago · 4 msgs · 3.2 KiB",
                "  write docs                         2h ago · 4 msgs · 512 B",
                "  (no message)                        5s ago · 4 msgs · 10 B",
            ]
        );
    }

    #[test]
    fn typing_filters_and_enter_picks_the_selected_one() {
        let (mut picker, paths) = picker(vec![
            choice("fix the parser", 1, 1),
            choice("write docs", 1, 1),
            choice("write tests", 1, 1),
        ]);
        for c in "wrt".chars() {
            assert_eq!(picker.key(Action::Insert(c)), None);
        }
        assert_eq!(picker.key(Action::Down), None);
        assert_eq!(picker.key(Action::Down), None, "stops at the last match");
        let chosen = picker.key(Action::Submit).flatten();
        assert_eq!(
            chosen.map(|i| paths[i].clone()),
            Some(PathBuf::from("/s/write tests.jsonl"))
        );
        assert_eq!(picker.key(Action::Escape), Some(None));
    }

    #[test]
    fn the_picker_draws_over_a_test_backend() {
        let mut terminal =
            ratatui::Terminal::new(ratatui::backend::TestBackend::new(50, 10)).unwrap();
        let (picker, _) = picker(vec![choice("hello there", 30, 2048)]);
        terminal
            .draw(|frame| picker.draw(frame, &Theme::new(true), frame.area()))
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
