//! One frame: the transcript, the composer and the status line (and the help screen over them).

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Position, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph};
use zi_protocol::state::{PlanStepStatus, WorkPlan};

use crate::app::App;
use crate::composer::Layout as ComposerLayout;
use crate::keys::HELP;
use crate::slash::BUILTIN;
use crate::theme::Theme;
use crate::transcript::{RenderOptions, Transcript};

/// Composer rows shown at most (the text scrolls inside).
const COMPOSER_ROWS: usize = 8;
pub(crate) const PROMPT: &str = "› ";

/// Draws the whole view of `app` into `frame`.
pub fn draw(frame: &mut Frame<'_>, app: &mut App) {
    let area = frame.area();
    let text_width = (area.width as usize).saturating_sub(PROMPT.len()).max(1);
    let layout = app.composer.layout(text_width);
    let composer_rows = layout.rows.len().clamp(1, COMPOSER_ROWS);
    // A command expanded for reading (Ctrl+O) takes all but one row above the composer.
    let expanded = app.approvals.expanded();
    let plan = if app.show_plan && !expanded {
        plan_lines(&app.plan, &app.theme)
    } else {
        Vec::new()
    };
    // The plan pane never takes more than a third of the screen.
    let plan_rows = plan.len().min(area.height as usize / 3);
    // Background tasks: at most a quarter.
    let tasks = if expanded {
        Vec::new()
    } else {
        app.background.lines(&app.theme, area.width as usize)
    };
    let task_rows = tasks.len().min(area.height as usize / 4);
    // A pending approval request comes before everything but the composer: up to half.
    let approval_room = if expanded {
        (area.height as usize).saturating_sub(composer_rows + 3)
    } else {
        area.height as usize / 2
    };
    let approval = app
        .approvals
        .render(&app.theme, area.width as usize, approval_room);
    let approval_rows = approval.len().min(approval_room);
    let [
        transcript_area,
        task_area,
        plan_area,
        approval_area,
        composer_area,
        status_area,
    ] = Layout::vertical([
        Constraint::Min(1),
        Constraint::Length(task_rows as u16),
        Constraint::Length(plan_rows as u16),
        Constraint::Length(approval_rows as u16),
        Constraint::Length(composer_rows as u16 + 1),
        Constraint::Length(1),
    ])
    .areas(area);
    if task_rows > 0 {
        frame.render_widget(Paragraph::new(tasks), task_area);
    }
    if plan_rows > 0 {
        frame.render_widget(Paragraph::new(plan), plan_area);
    }
    if approval_rows > 0 {
        frame.render_widget(Paragraph::new(approval), approval_area);
    }

    app.viewport = transcript_area.height as usize;
    let options = RenderOptions {
        width: transcript_area.width as usize,
        show_thinking: app.show_thinking,
        theme: app.theme,
    };
    app.scroll = draw_transcript(
        frame,
        transcript_area,
        &mut app.transcript,
        options,
        app.scroll,
    );

    draw_composer(frame, app, &layout, composer_rows, composer_area);

    let now_ms = zi_os::clock::now_millis();
    let status = app
        .status
        .line(&app.theme, status_area.width as usize, now_ms, app.frame);
    frame.render_widget(Paragraph::new(status), status_area);

    if !app.help && app.picker.is_none() {
        crate::completion::draw(frame, app, transcript_area);
    }
    if let Some(open) = &app.picker {
        open.picker.draw(frame, &app.theme, area);
    }
    if app.help {
        draw_help(frame, app, area);
    }
}

/// The composer: a rule (with the scroll position when scrolled up), then the text rows that
/// keep the cursor in view, and the cursor itself unless an overlay has the keys.
fn draw_composer(
    frame: &mut Frame<'_>,
    app: &App,
    layout: &ComposerLayout,
    composer_rows: usize,
    composer_area: Rect,
) {
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
    if !app.help && app.picker.is_none() {
        let x = inner.x + (PROMPT.len() + layout.cursor_col) as u16;
        let y = inner.y + (layout.cursor_row - first) as u16;
        if x < inner.right() && y < inner.bottom() {
            frame.set_cursor_position(Position { x, y });
        }
    }
}

/// Draws the transcript's window bottom-aligned in `area`; returns the scroll actually applied.
pub fn draw_transcript(
    frame: &mut Frame<'_>,
    area: Rect,
    transcript: &mut Transcript,
    options: RenderOptions,
    scroll: usize,
) -> usize {
    let window = transcript.window(options, area.height as usize, scroll);
    // Bottom-aligned: a short transcript sits just above the composer.
    let pad = (area.height as usize).saturating_sub(window.rows.len());
    let mut rows: Vec<Line<'static>> = vec![Line::default(); pad];
    rows.extend(window.rows);
    frame.render_widget(Paragraph::new(rows), area);
    window.scroll
}

/// The work plan as a checklist: a title row, then one row per step (none without steps).
pub fn plan_lines(plan: &WorkPlan, theme: &Theme) -> Vec<Line<'static>> {
    if plan.steps.is_empty() {
        return Vec::new();
    }
    let done = plan
        .steps
        .iter()
        .filter(|s| s.status == PlanStepStatus::Completed)
        .count();
    let mut lines = vec![Line::styled(
        format!("Plan {done}/{} · Ctrl+P hides", plan.steps.len()),
        theme.bold(),
    )];
    for step in &plan.steps {
        let (mark, style) = match step.status {
            PlanStepStatus::Completed => ("[x] ", theme.ok()),
            PlanStepStatus::InProgress => ("[~] ", theme.bold()),
            PlanStepStatus::Pending => ("[ ] ", theme.plain()),
            PlanStepStatus::Cancelled => ("[-] ", theme.dim()),
        };
        lines.push(Line::from(vec![
            Span::styled(mark, style),
            Span::styled(step.text.clone(), style),
        ]));
    }
    lines
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tool_row::{ToolCallView, ToolOutcome};
    use crate::transcript::{AssistantBlock, Item};
    use ratatui::Terminal;
    use ratatui::backend::TestBackend;
    use serde_json::json;

    fn screen(terminal: &Terminal<TestBackend>) -> Vec<String> {
        let buffer = terminal.backend().buffer();
        (0..buffer.area.height)
            .map(|y| {
                (0..buffer.area.width)
                    .map(|x| buffer[(x, y)].symbol().to_string())
                    .collect::<String>()
                    .trim_end()
                    .to_string()
            })
            .collect()
    }

    fn sample() -> Transcript {
        let mut transcript = Transcript::default();
        transcript.push(Item::User("list the files".to_string()));
        let mut tool = ToolCallView::new("c1".into(), "bash".into(), json!({"command": "ls"}));
        tool.result = Some(ToolOutcome {
            text: "a.txt\nb.txt".to_string(),
            details: Some(json!({"status": "exited", "exitCode": 0})),
            is_error: false,
        });
        transcript.push(Item::Tool(Box::new(tool)));
        transcript.push(Item::Assistant {
            blocks: vec![
                AssistantBlock::Thinking("the user wants files".to_string()),
                AssistantBlock::Text("Two files:\n\n- `a.txt`\n- `b.txt`".to_string()),
            ],
            streaming: false,
            error: None,
        });
        transcript
    }

    #[test]
    fn the_transcript_renders_bottom_aligned_in_a_narrow_terminal() {
        let mut terminal = Terminal::new(TestBackend::new(24, 12)).unwrap();
        let mut transcript = sample();
        let options = RenderOptions {
            width: 24,
            show_thinking: false,
            theme: Theme::new(true),
        };
        terminal
            .draw(|frame| {
                let area = frame.area();
                draw_transcript(frame, area, &mut transcript, options, 0);
            })
            .unwrap();
        assert_eq!(screen(&terminal), expected_tail());
    }

    #[test]
    fn the_plan_is_a_checklist() {
        let plan = WorkPlan {
            revision: 1,
            explanation: None,
            steps: vec![
                zi_protocol::state::PlanStep {
                    text: "read".into(),
                    status: PlanStepStatus::Completed,
                },
                zi_protocol::state::PlanStep {
                    text: "write".into(),
                    status: PlanStepStatus::InProgress,
                },
            ],
        };
        let rows: Vec<String> = plan_lines(&plan, &Theme::new(true))
            .iter()
            .map(|l| l.to_string())
            .collect();
        assert_eq!(rows, ["Plan 1/2 · Ctrl+P hides", "[x] read", "[~] write"]);
    }

    /// 12 rows: the whole sample, exactly filling the screen.
    fn expected_tail() -> Vec<String> {
        [
            "› list the files",
            "",
            "✓ bash $ ls  exit 0",
            "  a.txt",
            "  b.txt",
            "",
            "∴ Thinking… (4 words,",
            "Ctrl+T shows)",
            "Two files:",
            "",
            "• a.txt",
            "• b.txt",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect()
    }
}
