//! The project trust prompt: a modal screen shown before the runtime loads a project's `.zi/`
//! configuration, when trust.json decides nothing for it (zi-agent's `trust::needs_prompt`).
//! It only asks; the caller records the answer (zi-agent's `trust::record_decision`) and loads
//! the project's settings, extensions and profiles, or not.

use std::fs::File;
use std::path::Path;
use std::time::Duration;

use crossterm::event::{Event, KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use ratatui::Frame;
use ratatui::Terminal;
use ratatui::backend::CrosstermBackend;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph, Wrap};
use tokio_util::sync::CancellationToken;

use crate::TuiError;
use crate::terminal::{TerminalGuard, screen_writer};
use crate::theme::Theme;

/// How often the prompt looks at the cancellation token between keys.
const POLL: Duration = Duration::from_millis(100);
/// The widest the prompt's box gets.
const MAX_WIDTH: u16 = 76;

/// What the person answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TrustAnswer {
    /// Trust the project: its `.zi/` configuration loads.
    Trust,
    /// Do not trust it: its `.zi/` configuration is ignored.
    DontTrust,
    /// Ctrl+C, Ctrl+D or a signal: zi ends without a decision.
    Quit,
}

/// The prompt's state: what it shows and which answer Enter picks.
#[derive(Debug, Clone)]
pub struct TrustPrompt {
    /// The project directory, as shown.
    pub project: String,
    /// What `.zi/` holds that trust would load.
    pub content: Vec<String>,
    /// Enter picks "Trust" when true; "Don't trust", the safe choice, is preselected.
    pub trust_selected: bool,
}

impl TrustPrompt {
    /// The prompt for `project`, "Don't trust" preselected.
    pub fn new(project: &Path, content: &[String]) -> TrustPrompt {
        TrustPrompt {
            project: project.display().to_string(),
            content: content.to_vec(),
            trust_selected: false,
        }
    }

    /// The answer a key gives, if any (the arrows and Tab move the selection).
    pub fn key(&mut self, key: &KeyEvent) -> Option<TrustAnswer> {
        if key.kind == KeyEventKind::Release {
            return None;
        }
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        match key.code {
            KeyCode::Char('c' | 'd') if ctrl => Some(TrustAnswer::Quit),
            KeyCode::Char('y' | 'Y' | 't' | 'T') => Some(TrustAnswer::Trust),
            KeyCode::Char('n' | 'N') => Some(TrustAnswer::DontTrust),
            KeyCode::Left | KeyCode::Right | KeyCode::Tab | KeyCode::BackTab => {
                self.trust_selected = !self.trust_selected;
                None
            }
            KeyCode::Enter if self.trust_selected => Some(TrustAnswer::Trust),
            KeyCode::Enter => Some(TrustAnswer::DontTrust),
            _ => None,
        }
    }

    fn lines(&self, theme: &Theme) -> Vec<Line<'static>> {
        // Long listings are cut: the names only hint at what is there.
        const SHOWN: usize = 8;
        let mut listed = self
            .content
            .iter()
            .take(SHOWN)
            .cloned()
            .collect::<Vec<_>>()
            .join(", ");
        if self.content.len() > SHOWN {
            listed.push_str(&format!(", … ({} more)", self.content.len() - SHOWN));
        }
        let button = |label: &str, selected: bool| {
            let style = if selected {
                theme.selected().patch(theme.bold())
            } else {
                theme.plain()
            };
            Span::styled(format!(" {label} "), style)
        };
        vec![
            Line::styled(self.project.clone(), theme.bold()),
            Line::from(format!("has project configuration in .zi/: {listed}")),
            Line::default(),
            Line::from(
                "Trusting it lets zi load the project's settings, extensions (which run code), \
                 prompt templates, skills, subagent profiles and system prompt files. Without \
                 trust zi starts without them.",
            ),
            Line::styled(
                "The answer is kept in trust.json in the agent directory and not asked again.",
                theme.dim(),
            ),
            Line::default(),
            Line::from(vec![
                Span::raw("  "),
                button("Trust (y)", self.trust_selected),
                Span::raw("   "),
                button("Don't trust (n)", !self.trust_selected),
            ]),
            Line::default(),
            Line::styled("←/→ choose · Enter confirms · Ctrl+C quits", theme.dim()),
        ]
    }
}

/// Draws the prompt as a box in the middle of the screen.
pub fn draw(frame: &mut Frame<'_>, prompt: &TrustPrompt, theme: &Theme) {
    let area = frame.area();
    let width = area.width.min(MAX_WIDTH);
    let lines = prompt.lines(theme);
    // Rows the wrapped text takes inside the borders (2 columns, 2 rows); word wrapping may
    // take a row more per line than the cell count says, hence the slack.
    let inner = usize::from(width.saturating_sub(2)).max(1);
    let rows: usize = lines
        .iter()
        .map(|line| line.width().div_ceil(inner).max(1) + usize::from(line.width() > inner))
        .sum();
    let paragraph = Paragraph::new(lines).wrap(Wrap { trim: false });
    let rows = u16::try_from(rows + 2).unwrap_or(u16::MAX);
    let height = rows.min(area.height);
    let rect = Rect {
        x: area.x + (area.width - width) / 2,
        y: area.y + (area.height - height) / 2,
        width,
        height,
    };
    let block = Block::default()
        .borders(Borders::ALL)
        .border_style(theme.tool())
        .title(Span::styled(" Trust this project? ", theme.bold()));
    frame.render_widget(Clear, rect);
    frame.render_widget(paragraph.block(block), rect);
}

/// Asks on the terminal behind `output` whether to trust the project at `project`, whose
/// `.zi/` holds `content`. The terminal is restored before this returns.
pub fn ask(
    output: &File,
    project: &Path,
    content: &[String],
    theme: Theme,
    cancel: &CancellationToken,
) -> Result<TrustAnswer, TuiError> {
    let guard = TerminalGuard::enter(output)?;
    let mut terminal = Terminal::new(CrosstermBackend::new(screen_writer(output.try_clone()?)))?;
    terminal.clear()?;
    let mut prompt = TrustPrompt::new(project, content);
    let answer = loop {
        terminal.draw(|frame| draw(frame, &prompt, &theme))?;
        // `None`: redraw (a key that moved the selection, a resize).
        let answer = loop {
            if cancel.is_cancelled() {
                break Some(TrustAnswer::Quit);
            }
            if !crossterm::event::poll(POLL)? {
                continue;
            }
            match crossterm::event::read()? {
                Event::Key(key) => break prompt.key(&key),
                Event::Resize(..) => break None,
                _ => {}
            }
        };
        if let Some(answer) = answer {
            break answer;
        }
    };
    drop(guard);
    Ok(answer)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ratatui::backend::TestBackend;

    fn screen(prompt: &TrustPrompt, width: u16, height: u16) -> String {
        let mut terminal =
            Terminal::new(TestBackend::new(width, height)).unwrap_or_else(|e| panic!("{e}"));
        terminal
            .draw(|frame| draw(frame, prompt, &Theme::new(true)))
            .unwrap_or_else(|e| panic!("{e}"));
        let buffer = terminal.backend().buffer();
        (0..buffer.area.height)
            .map(|y| {
                (0..buffer.area.width)
                    .map(|x| buffer[(x, y)].symbol())
                    .collect::<String>()
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    fn press(code: KeyCode) -> KeyEvent {
        KeyEvent::new(code, KeyModifiers::NONE)
    }

    #[test]
    fn the_prompt_names_the_project_its_content_and_the_choices() {
        let prompt = TrustPrompt::new(
            Path::new("/home/u/proj"),
            &["extensions/".to_string(), "settings.json".to_string()],
        );
        let text = screen(&prompt, 80, 24);
        for needle in [
            "Trust this project?",
            "/home/u/proj",
            "extensions/, settings.json",
            "Trust (y)",
            "Don't trust (n)",
        ] {
            assert!(text.contains(needle), "{needle}:\n{text}");
        }
        // Narrow terminals wrap the text inside the box instead of cutting the choices.
        let narrow = screen(&prompt, 40, 24);
        assert!(narrow.contains("Trust (y)"), "{narrow}");
    }

    #[test]
    fn keys_answer_and_enter_takes_the_selection() {
        let mut prompt = TrustPrompt::new(Path::new("/p"), &[]);
        assert_eq!(
            prompt.key(&press(KeyCode::Enter)),
            Some(TrustAnswer::DontTrust)
        );
        assert_eq!(prompt.key(&press(KeyCode::Left)), None);
        assert_eq!(prompt.key(&press(KeyCode::Enter)), Some(TrustAnswer::Trust));
        assert_eq!(
            prompt.key(&press(KeyCode::Char('n'))),
            Some(TrustAnswer::DontTrust)
        );
        assert_eq!(
            prompt.key(&press(KeyCode::Char('y'))),
            Some(TrustAnswer::Trust)
        );
        assert_eq!(prompt.key(&press(KeyCode::Char('x'))), None);
        let ctrl_c = KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL);
        assert_eq!(prompt.key(&ctrl_c), Some(TrustAnswer::Quit));
    }
}
