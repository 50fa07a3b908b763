//! Key bindings: one table from key events to actions, which the help screen lists too.

use crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};

/// What a key asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Submit,
    FollowUp,
    Newline,
    Insert(char),
    Backspace,
    Delete,
    Left,
    Right,
    Home,
    End,
    Up,
    Down,
    KillToStart,
    KillToEnd,
    DeleteWord,
    Escape,
    CtrlC,
    CtrlD,
    ExpandTool,
    ToggleThinking,
    TogglePlan,
    PageUp,
    PageDown,
    Complete,
    Redraw,
}

/// The bindings as the help screen and docs/interactive.md list them.
pub const HELP: &[(&str, &str)] = &[
    ("Enter", "send (while a run is active: steer it)"),
    ("Alt+Enter", "queue a follow-up for after the run"),
    ("Shift+Enter, Ctrl+J", "new line"),
    ("Esc", "interrupt the run; again: clear the composer"),
    ("Up / Down", "previous / next prompt from history"),
    ("Ctrl+O", "expand or collapse the last tool output"),
    ("Ctrl+T", "show or hide thinking"),
    ("Ctrl+P", "show or hide the work plan checklist"),
    ("PageUp / PageDown, wheel", "scroll the transcript"),
    ("Tab", "complete a /command or @path"),
    ("Ctrl+A / Ctrl+E", "start / end of line"),
    (
        "Ctrl+U / Ctrl+K / Ctrl+W",
        "delete to line start / to line end / the word before",
    ),
    ("Ctrl+L", "redraw the screen"),
    ("Ctrl+C twice", "quit"),
    ("Ctrl+D", "quit (on an empty composer)"),
    ("?", "this help (on an empty composer)"),
];

/// The action of a key press (releases and unbound keys: none).
pub fn action(key: &KeyEvent) -> Option<Action> {
    if key.kind == KeyEventKind::Release {
        return None;
    }
    let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
    let alt = key.modifiers.contains(KeyModifiers::ALT);
    let shift = key.modifiers.contains(KeyModifiers::SHIFT);
    Some(match key.code {
        KeyCode::Enter if shift => Action::Newline,
        KeyCode::Enter if alt => Action::FollowUp,
        KeyCode::Enter => Action::Submit,
        KeyCode::Char('j') if ctrl => Action::Newline,
        KeyCode::Char('c') if ctrl => Action::CtrlC,
        KeyCode::Char('d') if ctrl => Action::CtrlD,
        KeyCode::Char('o') if ctrl => Action::ExpandTool,
        KeyCode::Char('t') if ctrl => Action::ToggleThinking,
        KeyCode::Char('p') if ctrl => Action::TogglePlan,
        KeyCode::Char('a') if ctrl => Action::Home,
        KeyCode::Char('e') if ctrl => Action::End,
        KeyCode::Char('u') if ctrl => Action::KillToStart,
        KeyCode::Char('k') if ctrl => Action::KillToEnd,
        KeyCode::Char('w') if ctrl => Action::DeleteWord,
        KeyCode::Char('l') if ctrl => Action::Redraw,
        KeyCode::Backspace if alt || ctrl => Action::DeleteWord,
        KeyCode::Char(_) if ctrl => return None,
        KeyCode::Char(c) => Action::Insert(c),
        KeyCode::Backspace => Action::Backspace,
        KeyCode::Delete => Action::Delete,
        KeyCode::Left => Action::Left,
        KeyCode::Right => Action::Right,
        KeyCode::Home => Action::Home,
        KeyCode::End => Action::End,
        KeyCode::Up => Action::Up,
        KeyCode::Down => Action::Down,
        KeyCode::PageUp => Action::PageUp,
        KeyCode::PageDown => Action::PageDown,
        KeyCode::Esc => Action::Escape,
        KeyCode::Tab => Action::Complete,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(code: KeyCode, modifiers: KeyModifiers) -> Option<Action> {
        action(&KeyEvent::new(code, modifiers))
    }

    #[test]
    fn enter_variants() {
        assert_eq!(
            key(KeyCode::Enter, KeyModifiers::NONE),
            Some(Action::Submit)
        );
        assert_eq!(
            key(KeyCode::Enter, KeyModifiers::ALT),
            Some(Action::FollowUp)
        );
        assert_eq!(
            key(KeyCode::Enter, KeyModifiers::SHIFT),
            Some(Action::Newline)
        );
        assert_eq!(
            key(KeyCode::Char('j'), KeyModifiers::CONTROL),
            Some(Action::Newline)
        );
    }

    #[test]
    fn unbound_control_keys_do_nothing() {
        assert_eq!(key(KeyCode::Char('z'), KeyModifiers::CONTROL), None);
    }
}
