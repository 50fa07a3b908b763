//! The last screen of a large resumed journal, drawn from the journal's tail before the session
//! has opened. Opening checks the whole file (about half a second for 60 MiB of never-compacted
//! messages); the person sees where they left off at once, and keys typed meanwhile wait in the
//! terminal until the view reads them. The view replaces this frame as soon as it starts.

use std::fs::File;

use ratatui::Terminal;
use ratatui::backend::CrosstermBackend;
use ratatui::layout::{Constraint, Layout};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph};
use zi_protocol::message::AgentMessage;

use crate::TuiError;
use crate::terminal::{TerminalGuard, screen_writer};
use crate::theme::Theme;
use crate::transcript::{RenderOptions, Transcript};
use crate::view::{PROMPT, draw_transcript};

/// Holds the terminal from the preview until the view has taken it over (see
/// [`TerminalGuard::enter`]); dropping it restores the terminal.
pub struct Preview {
    _guard: TerminalGuard,
}

/// Takes the terminal behind `output` over and draws `messages` (the journal's last ones) as
/// the view will show them, with the status line saying the session is opening.
pub fn show(output: &File, messages: &[AgentMessage], theme: Theme) -> Result<Preview, TuiError> {
    let guard = TerminalGuard::enter(output)?;
    let mut terminal = Terminal::new(CrosstermBackend::new(screen_writer(output.try_clone()?)))?;
    terminal.clear()?;
    let mut transcript = Transcript::default();
    transcript.load_messages(messages);
    terminal.draw(|frame| {
        // The view's layout with an empty composer: transcript, rule and prompt, status.
        let [transcript_area, composer_area, status_area] = Layout::vertical([
            Constraint::Min(1),
            Constraint::Length(2),
            Constraint::Length(1),
        ])
        .areas(frame.area());
        let options = RenderOptions {
            width: transcript_area.width as usize,
            show_thinking: false,
            theme,
        };
        draw_transcript(frame, transcript_area, &mut transcript, options, 0);
        let rule = Block::default()
            .borders(Borders::TOP)
            .border_style(theme.dim());
        let inner = rule.inner(composer_area);
        frame.render_widget(rule, composer_area);
        frame.render_widget(
            Paragraph::new(Line::from(Span::styled(PROMPT, theme.user()))),
            inner,
        );
        frame.render_widget(
            Paragraph::new(Line::from(Span::styled(OPENING, theme.dim()))),
            status_area,
        );
    })?;
    Ok(Preview { _guard: guard })
}

/// The preview's status line.
pub const OPENING: &str = "opening the session…";
