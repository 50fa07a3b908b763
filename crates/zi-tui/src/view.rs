//! One frame: the transcript, the composer and the status line (and the help screen over them).

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Position, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph};

use crate::app::App;
use crate::keys::HELP;
use crate::slash::BUILTIN;
use crate::transcript::RenderOptions;

/// Composer rows shown at most (the text scrolls inside).
const COMPOSER_ROWS: usize = 8;
const PROMPT: &str = "› ";

pub fn draw(frame: &mut Frame<'_>, app: &mut App) {
    let area = frame.area();
    let text_width = (area.width as usize).saturating_sub(PROMPT.len()).max(1);
    let layout = app.composer.layout(text_width);
    let composer_rows = layout.rows.len().clamp(1, COMPOSER_ROWS);
    let [transcript_area, composer_area, status_area] = Layout::vertical([
        Constraint::Min(1),
        Constraint::Length(composer_rows as u16 + 1),
        Constraint::Length(1),
    ])
    .areas(area);

    app.viewport = transcript_area.height as usize;
    let window = app.transcript.window(
        RenderOptions {
            width: transcript_area.width as usize,
            show_thinking: app.show_thinking,
            theme: app.theme,
        },
        transcript_area.height as usize,
        app.scroll,
    );
    app.scroll = window.scroll;
    // Bottom-aligned: a short transcript sits just above the composer.
    let pad = (transcript_area.height as usize).saturating_sub(window.rows.len());
    let mut rows: Vec<Line<'static>> = vec![Line::default(); pad];
    rows.extend(window.rows);
    frame.render_widget(Paragraph::new(rows), transcript_area);

    // The composer: a rule, then the text rows that keep the cursor in view.
    let first = (layout.cursor_row + 1).saturating_sub(composer_rows);
    let rule_label = if app.scroll > 0 {
        format!(" ↑ {} rows up · PageDown ", app.scroll)
    } else {
        String::new()
    };
    let rule = Block::default()
        .borders(Borders::TOP)
        .border_style(app.theme.dim())
        .title(Span::styled(rule_label, app.theme.dim()));
    let inner = rule.inner(composer_area);
    frame.render_widget(rule, composer_area);
    let composer_lines: Vec<Line<'static>> = layout
        .rows
        .iter()
        .enumerate()
        .skip(first)
        .take(composer_rows)
        .map(|(i, row)| {
            let lead = if i == 0 { PROMPT } else { "  " };
            Line::from(vec![
                Span::styled(lead, app.theme.user()),
                Span::raw(row.clone()),
            ])
        })
        .collect();
    frame.render_widget(Paragraph::new(composer_lines), inner);
    if !app.help {
        let x = inner.x + (PROMPT.len() + layout.cursor_col) as u16;
        let y = inner.y + (layout.cursor_row - first) as u16;
        if x < inner.right() && y < inner.bottom() {
            frame.set_cursor_position(Position { x, y });
        }
    }

    let now_ms = now_millis();
    let status = app
        .status
        .line(&app.theme, status_area.width as usize, now_ms, app.frame);
    frame.render_widget(Paragraph::new(status), status_area);

    if app.help {
        draw_help(frame, app, area);
    }
}

fn now_millis() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

fn draw_help(frame: &mut Frame<'_>, app: &App, area: Rect) {
    let mut lines = vec![Line::styled("Keys", app.theme.bold())];
    for (key, what) in HELP {
        lines.push(Line::from(vec![
            Span::styled(format!("  {key:<26}"), app.theme.tool()),
            Span::raw(*what),
        ]));
    }
    lines.push(Line::default());
    lines.push(Line::styled("Commands", app.theme.bold()));
    for (name, what) in BUILTIN {
        lines.push(Line::from(vec![
            Span::styled(format!("  /{name:<25}"), app.theme.tool()),
            Span::raw(*what),
        ]));
    }
    lines.push(Line::default());
    lines.push(Line::styled("Any key closes this help.", app.theme.dim()));
    let width = area.width.saturating_sub(4).min(90);
    let height = (lines.len() as u16 + 2).min(area.height);
    let x = area.x + (area.width - width) / 2;
    let y = area.y + (area.height - height) / 2;
    let rect = Rect::new(x, y, width, height);
    frame.render_widget(Clear, rect);
    frame.render_widget(
        Paragraph::new(lines).block(Block::default().borders(Borders::ALL).title(" Help ")),
        rect,
    );
}
