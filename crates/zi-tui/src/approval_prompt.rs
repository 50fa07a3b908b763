//! Approvals as an inline prompt (docs/interactive.md#approvals): the interactive mode is the
//! session's opted-in approval client. Requests arrive through the same `ApprovalSink` an RPC
//! connection installs with `connection.set_approvals`, and answers go through the same broker call
//! `approval.respond` uses (`AgentSession::respond_approval`), so grants, outcomes, journal entries
//! and model-visible results are exactly those of the other clients.
//!
//! The oldest pending request is shown above the composer with the decisions it offers; while
//! one is shown, its keys (the choice letters, arrows, Enter) answer it and other letters are
//! not typed into the composer. Esc still interrupts the run (which cancels pending requests).

use std::sync::Arc;

use crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use ratatui::text::{Line, Span};
use serde_json::Value;
use tokio::sync::mpsc::UnboundedSender;
use zi_agent::AgentSession;
use zi_agent::session::approvals::{ApprovalFrame, ApprovalSink};
use zi_protocol::approval::{
    ApprovalDecision, ApprovalKind, ApprovalReason, ApprovalRequest, ApprovalResolution,
    ResolutionSource, ResolvedDecision,
};

use crate::app::UiEvent;
use crate::command_view::{self, Reading};
use crate::theme::Theme;
use crate::transcript::Item;

/// An approval frame, as the event loop receives it.
#[derive(Debug, Clone)]
pub enum ApprovalUpdate {
    Requested(Box<ApprovalRequest>),
    Resolved(ApprovalResolution),
}

/// The sink that forwards the broker's frames into the event loop (it only enqueues: it is
/// called under the session lock).
fn sink(sender: UnboundedSender<UiEvent>) -> ApprovalSink {
    Arc::new(move |frame: ApprovalFrame<'_>| {
        let update = match frame {
            ApprovalFrame::Request(request) => ApprovalUpdate::Requested(Box::new(request.clone())),
            ApprovalFrame::Resolved(resolution) => ApprovalUpdate::Resolved(resolution.clone()),
        };
        let _ = sender.send(UiEvent::Approval(update));
    })
}

/// Makes the view `session`'s approval client, as `connection.set_approvals {"enabled": true}`
/// makes an RPC connection one (the operator's policy, sandbox and rules stay as configured).
/// Done for every session the view shows (start-up, `/new`, `/resume`).
pub fn attach(session: &AgentSession, sender: &UnboundedSender<UiEvent>) {
    let params = zi_protocol::params::SetApprovalsParams {
        enabled: true,
        policy: None,
        sandbox: None,
        rules: None,
        timeout_ms: None,
    };
    if let Err(error) = session.set_approvals(params, sink(sender.clone())) {
        tracing::warn!("approvals stay unattended: {error}");
    }
}

/// One answer the prompt offers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Choice {
    pub key: char,
    pub label: String,
    pub decision: ApprovalDecision,
    /// With `allow_session`: grant this rule instead of the exact call.
    pub rule: Option<String>,
}

/// The choices for `request`, in the order of its `decisions`; `allow_session` also comes as
/// "allow RULE for this session" when the request suggests a rule.
pub fn choices(request: &ApprovalRequest) -> Vec<Choice> {
    let mut choices = Vec::new();
    for decision in &request.decisions {
        let (key, label) = match decision {
            ApprovalDecision::AllowOnce => ('y', "Allow once".to_string()),
            ApprovalDecision::AllowSession => ('a', "Allow for this session".to_string()),
            ApprovalDecision::Deny => ('n', "Deny".to_string()),
            ApprovalDecision::CancelTurn => ('x', "Deny and stop the turn".to_string()),
        };
        choices.push(Choice {
            key,
            label,
            decision: *decision,
            rule: None,
        });
        if *decision == ApprovalDecision::AllowSession
            && let Some(rule) = &request.suggested_rule
        {
            choices.push(Choice {
                key: 'r',
                label: format!("Allow {rule} for this session"),
                decision: *decision,
                rule: Some(rule.clone()),
            });
        }
    }
    choices
}

/// A request waiting for an answer, with the whole command it would run.
#[derive(Debug)]
struct Pending {
    request: ApprovalRequest,
    subject: Subject,
}

/// What the person approves, in full: a command (`bash`, or `bash` outside the sandbox) or
/// the request's summary for any other tool.
#[derive(Debug, Clone, PartialEq)]
struct Subject {
    /// What is done with the text (`Run`, `Run outside the sandbox`, `Run (background)`); empty
    /// when the text is the summary.
    label: String,
    text: String,
    /// False when only a clipped preview of the text is known: it can never be read whole.
    complete: bool,
}

impl Subject {
    /// The command of an `exec`/`escalation` request from its `args` (or, when the arguments
    /// were too large to travel inline, from `full_args`: the call as the transcript has it).
    fn of(request: &ApprovalRequest, full_args: Option<&Value>) -> Subject {
        let label = match request.kind {
            ApprovalKind::Exec => "Run",
            ApprovalKind::Escalation => "Run outside the sandbox",
            ApprovalKind::FileChange | ApprovalKind::Tool => {
                return Subject {
                    label: String::new(),
                    text: request.summary.clone(),
                    complete: true,
                };
            }
        };
        let args = request.args.as_ref().or(full_args);
        let command = args.and_then(|a| a.get("command")).and_then(Value::as_str);
        let background = args
            .and_then(|a| a.get("background"))
            .and_then(Value::as_bool)
            .unwrap_or(false);
        let label = if background {
            format!("{label} (background)")
        } else {
            label.to_string()
        };
        match command {
            Some(command) => Subject {
                label,
                text: command.to_string(),
                complete: true,
            },
            None => Subject {
                label,
                text: request
                    .args_preview
                    .as_ref()
                    .map_or_else(|| request.summary.clone(), |p| p.text.clone()),
                complete: false,
            },
        }
    }
}

/// The pending requests (oldest first), the selected choice of the first and how far its
/// command has been read.
#[derive(Debug, Default)]
pub struct Approvals {
    pending: Vec<Pending>,
    selected: usize,
    reading: Reading,
    /// The last frame showed the command in its scrolling window (it did not fit the header).
    windowed: bool,
    /// Every character of the shown request's text has been on screen.
    read_whole: bool,
    /// An allow was refused because the command was not read whole yet: the hint says so
    /// louder.
    refused: bool,
}

impl Approvals {
    /// Whether a request waits for an answer.
    pub fn is_open(&self) -> bool {
        !self.pending.is_empty()
    }

    /// Whether the shown command's window takes the screen (Ctrl+O).
    pub fn expanded(&self) -> bool {
        self.is_open() && self.windowed && self.reading.expanded
    }

    /// Applies a frame; a resolution that did not come from this prompt (timeout, interrupt,
    /// `cancel_turn` of another request) is said in the transcript. `full_args` finds a call's
    /// arguments by tool call id when the request carries only their preview.
    pub fn apply(
        &mut self,
        update: ApprovalUpdate,
        full_args: impl FnOnce(&str) -> Option<Value>,
    ) -> Option<Item> {
        match update {
            ApprovalUpdate::Requested(request) => {
                let args = match request.args {
                    Some(_) => None,
                    None => full_args(&request.tool_call_id),
                };
                let subject = Subject::of(&request, args.as_ref());
                self.pending.push(Pending {
                    request: *request,
                    subject,
                });
                None
            }
            ApprovalUpdate::Resolved(resolution) => {
                let index = self
                    .pending
                    .iter()
                    .position(|p| p.request.approval_id == resolution.approval_id)?;
                let pending = self.remove(index);
                Some(Item::Notice(resolved_text(
                    &pending.request,
                    resolution.decision,
                    resolution.source,
                )))
            }
        }
    }

    fn remove(&mut self, index: usize) -> Pending {
        if index == 0 {
            self.selected = 0;
            self.reading = Reading::default();
            self.windowed = false;
            self.read_whole = false;
            self.refused = false;
        }
        self.pending.remove(index)
    }

    /// Handles a key while a request is shown; false for keys that keep their usual meaning
    /// (Esc, Ctrl+…, scrolling the transcript).
    pub fn key(&mut self, key: &KeyEvent, session: &AgentSession) -> (bool, Option<Item>) {
        match self.decide(key) {
            Decided::Ignored => (false, None),
            Decided::Taken => (true, None),
            Decided::Answer(choice) => (true, Some(self.answer(session, &choice))),
        }
    }

    /// What a key does to the shown request.
    fn decide(&mut self, key: &KeyEvent) -> Decided {
        let Some(first) = self.pending.first() else {
            return Decided::Ignored;
        };
        if key.kind == KeyEventKind::Release {
            return Decided::Taken;
        }
        let choices = choices(&first.request);
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        let modified = ctrl || key.modifiers.contains(KeyModifiers::ALT);
        if self.windowed && self.scroll_key(key.code, ctrl) {
            return Decided::Taken;
        }
        let count = choices.len().max(1);
        let chosen = match key.code {
            _ if modified => return Decided::Ignored,
            KeyCode::Up | KeyCode::Left | KeyCode::BackTab => {
                self.selected = (self.selected + count - 1) % count;
                None
            }
            KeyCode::Down | KeyCode::Right | KeyCode::Tab => {
                self.selected = (self.selected + 1) % count;
                None
            }
            KeyCode::Enter => choices.get(self.selected).cloned(),
            KeyCode::Char(c) => choices.iter().find(|choice| choice.key == c).cloned(),
            _ => return Decided::Ignored,
        };
        match chosen {
            None => Decided::Taken,
            // What is allowed must have been read, every character of it
            // (docs/interactive.md#approvals).
            Some(choice) if allows(choice.decision) && !self.read_whole => {
                self.refused = true;
                Decided::Taken
            }
            Some(choice) => Decided::Answer(choice),
        }
    }

    /// The keys of a command shown in its window: ↑/↓ a row, PageUp/PageDown (Space) a page,
    /// Home the top, Ctrl+O the whole screen. True when the key was one of them.
    fn scroll_key(&mut self, code: KeyCode, ctrl: bool) -> bool {
        let page = self.reading.page.max(1) as isize;
        match code {
            KeyCode::Char('o') if ctrl => self.reading.expanded = !self.reading.expanded,
            _ if ctrl => return false,
            KeyCode::Down => self.reading.scroll_by(1),
            KeyCode::Up => self.reading.scroll_by(-1),
            KeyCode::PageDown | KeyCode::Char(' ') => self.reading.scroll_by(page),
            KeyCode::PageUp => self.reading.scroll_by(-page),
            KeyCode::Home => self.reading.scroll = 0,
            _ => return false,
        }
        true
    }

    /// Answers the shown request through the broker, as `approval.respond` does.
    fn answer(&mut self, session: &AgentSession, choice: &Choice) -> Item {
        let Some(pending) = self.pending.first() else {
            return Item::Error("No approval request is pending".to_string());
        };
        let id = pending.request.approval_id.clone();
        match session.respond_approval(&id, choice.decision, None, choice.rule.clone()) {
            Ok(_) => {
                // The broker's `approval_resolved` frame follows; it finds nothing left to do.
                let pending = self.remove(0);
                Item::Notice(resolved_text(
                    &pending.request,
                    choice.decision.into(),
                    ResolutionSource::Client,
                ))
            }
            // Resolved meanwhile (timeout, interrupt): its frame removes it.
            Err(error) => Item::Error(error.to_string()),
        }
    }

    /// The prompt's rows at `width` cells, at most `height` of them (none when nothing is
    /// pending). A request whose text fits is shown as one header; a longer one (or one with
    /// newlines or invisible characters) gets a window over its command that scrolls, and what
    /// the window shows counts as read.
    pub fn render(&mut self, theme: &Theme, width: usize, height: usize) -> Vec<Line<'static>> {
        let Some(pending) = self.pending.first() else {
            return Vec::new();
        };
        let waiting = if self.pending.len() > 1 {
            format!(" (1 of {})", self.pending.len())
        } else {
            String::new()
        };
        let title = Span::styled(format!("Approval needed{waiting}: "), theme.warning());
        let tool = Span::styled(pending.request.tool_name.clone(), theme.tool());
        let reason = wrap(
            &Line::styled(reason_row(&pending.request), theme.dim()),
            width,
        );
        let choices = self.choice_lines(theme);
        let subject = &pending.subject;
        let fits_header = subject.complete
            && command_view::is_plain(&subject.text)
            && pending.request.summary.contains(subject.text.as_str());
        if fits_header {
            let header = Line::from(vec![
                title.clone(),
                tool.clone(),
                Span::raw(" "),
                Span::styled(pending.request.summary.clone(), theme.bold()),
            ]);
            let mut lines = wrap(&header, width);
            lines.extend(reason.iter().cloned());
            lines.extend(choices.iter().cloned());
            if lines.len() <= height {
                self.windowed = false;
                self.read_whole = true;
                return lines;
            }
        }
        self.windowed = true;
        let text = subject.text.clone();
        let header = Line::from(vec![
            title,
            tool,
            Span::raw(" "),
            Span::styled(
                format!("{} ({} bytes):", subject.label, text.len())
                    .trim_start()
                    .to_string(),
                theme.bold(),
            ),
        ]);
        let header = wrap(&header, width);
        let rows = command_view::rows(&text, width.saturating_sub(GUTTER.len()), theme);
        // The hint's rows, with the widest numbers it can show.
        let total = rows.len();
        let hint_room = wrap(
            &Line::raw(self.hint(total, total, total, subject.complete)),
            width,
        )
        .len();
        let fixed = header.len() + choices.len() + hint_room;
        let with_reason = height.saturating_sub(fixed + reason.len()) >= MIN_WINDOW;
        let window = height
            .saturating_sub(fixed + if with_reason { reason.len() } else { 0 })
            .max(1);
        let shown = self.reading.window(&rows, window);
        let first_row = self.reading.scroll + 1;
        let last_row = self.reading.scroll + shown.len();
        let mut lines = header;
        if with_reason {
            lines.extend(reason);
        }
        for row in shown {
            let mut spans = vec![Span::styled(GUTTER, theme.dim())];
            spans.extend(row.line.spans.iter().cloned());
            lines.push(Line::from(spans));
        }
        self.read_whole = subject.complete && self.reading.read_whole(text.len());
        let hint = self.hint(first_row, last_row, total, subject.complete);
        let style = if self.refused && !self.read_whole {
            theme.warning()
        } else {
            theme.dim()
        };
        lines.extend(wrap(&Line::styled(hint, style), width));
        lines.extend(choices);
        lines
    }

    /// The row under a windowed command: where the window is and what it takes to allow.
    fn hint(&self, first: usize, last: usize, total: usize, complete: bool) -> String {
        let position = format!("  rows {first}–{last} of {total}");
        let expand = if self.reading.expanded {
            "Ctrl+O shrinks"
        } else {
            "Ctrl+O expands"
        };
        if !complete {
            format!("{position} · too large to show whole: it cannot be allowed here")
        } else if self.read_whole {
            format!("{position} · whole command shown · ↑/↓ PageUp/PageDown · {expand}")
        } else {
            format!("{position} · ↓ PageDown {expand}: read the whole command before allowing")
        }
    }

    fn choice_lines(&self, theme: &Theme) -> Vec<Line<'static>> {
        let Some(pending) = self.pending.first() else {
            return Vec::new();
        };
        choices(&pending.request)
            .iter()
            .enumerate()
            .map(|(n, choice)| {
                let selected = n == self.selected;
                let style = if selected {
                    theme.selected()
                } else {
                    theme.plain()
                };
                Line::from(vec![
                    Span::raw(if selected { "› " } else { "  " }),
                    Span::styled(format!("[{}] {}", choice.key, choice.label), style),
                ])
            })
            .collect()
    }
}

/// What a key did to the prompt.
#[derive(Debug, PartialEq)]
enum Decided {
    /// Not the prompt's key: it keeps its usual meaning.
    Ignored,
    /// Taken by the prompt (a move, a scroll, a refused allow).
    Taken,
    Answer(Choice),
}

/// The mark before each row of a windowed command.
const GUTTER: &str = "  │ ";
/// Rows of command below which the reason row gives up its place.
const MIN_WINDOW: usize = 3;

fn allows(decision: ApprovalDecision) -> bool {
    matches!(
        decision,
        ApprovalDecision::AllowOnce | ApprovalDecision::AllowSession
    )
}

fn wrap(line: &Line<'static>, width: usize) -> Vec<Line<'static>> {
    crate::wrap::wrap_line(line, width, &[])
}

/// The second row: why it is asked and the sandbox it would run under.
fn reason_row(request: &ApprovalRequest) -> String {
    format!(
        "  {} · sandbox {}{}",
        reason_text(&request.reason),
        request.sandbox.mode,
        if request.sandbox.network {
            ", network"
        } else {
            ""
        }
    )
}

/// Why the request was made, in words.
fn reason_text(reason: &ApprovalReason) -> String {
    match reason {
        ApprovalReason::Policy { policy } => format!("policy {policy}"),
        ApprovalReason::Rule { rule, source } => format!("rule {rule} ({source})"),
        ApprovalReason::OutsideWritableRoots { path } => {
            format!("{path} is outside the writable roots")
        }
        ApprovalReason::ProtectedPath { path } => format!("{path} is a protected path"),
        ApprovalReason::SandboxDenied { exit_code, signal } => match (exit_code, signal) {
            (_, Some(signal)) => format!("the sandbox likely denied it (killed by {signal})"),
            (Some(code), None) => format!("the sandbox likely denied it (exit {code})"),
            (None, None) => "the sandbox likely denied it".to_string(),
        },
        ApprovalReason::SandboxUnavailable { message } => {
            format!("the sandbox is unavailable ({message})")
        }
    }
}

/// The transcript's record of how a request ended.
fn resolved_text(
    request: &ApprovalRequest,
    decision: ResolvedDecision,
    source: ResolutionSource,
) -> String {
    let what = match decision {
        ResolvedDecision::AllowOnce => "Allowed once",
        ResolvedDecision::AllowSession => "Allowed for this session",
        ResolvedDecision::Deny if source == ResolutionSource::Timeout => "Denied (timed out)",
        ResolvedDecision::Deny => "Denied",
        ResolvedDecision::CancelTurn => "Denied and stopped the turn",
        ResolvedDecision::Cancelled => "Approval cancelled",
    };
    let summary = crate::status::clip(&request.summary, NOTICE_SUMMARY);
    format!("{what}: {} {summary}", request.tool_name)
}

/// Cells of a request's summary in the transcript's note of its resolution (the whole text was
/// in the prompt).
const NOTICE_SUMMARY: usize = 160;

#[cfg(test)]
mod tests {
    use super::*;
    use ratatui::Terminal;
    use ratatui::backend::TestBackend;
    use ratatui::widgets::Paragraph;
    use zi_protocol::approval::{ApprovalKind, CallSandbox};

    fn request(decisions: Vec<ApprovalDecision>, rule: Option<&str>) -> ApprovalRequest {
        command_request("git push origin main", decisions, rule)
    }

    fn command_request(
        command: &str,
        decisions: Vec<ApprovalDecision>,
        rule: Option<&str>,
    ) -> ApprovalRequest {
        ApprovalRequest {
            approval_id: "ap-1".into(),
            tool_call_id: "call-1".into(),
            tool_name: "bash".into(),
            kind: ApprovalKind::Exec,
            reason: ApprovalReason::Rule {
                rule: "bash(git push:*)".into(),
                source: "cli".into(),
            },
            summary: format!("Run: {command}"),
            args: Some(serde_json::json!({ "command": command })),
            args_preview: None,
            preview: None,
            cwd: "/p".into(),
            sandbox: CallSandbox {
                mode: "full".into(),
                network: true,
            },
            suggested_rule: rule.map(String::from),
            decisions,
            requested_at: 0,
            expires_at: None,
        }
    }

    #[test]
    fn choices_follow_the_offered_decisions() {
        use ApprovalDecision::*;
        let keys = |r: &ApprovalRequest| choices(r).iter().map(|c| c.key).collect::<String>();
        let all = request(
            vec![AllowOnce, AllowSession, Deny, CancelTurn],
            Some("bash(git push:*)"),
        );
        assert_eq!(keys(&all), "yarnx");
        let rule_choice = &choices(&all)[2];
        assert_eq!(rule_choice.decision, AllowSession);
        assert_eq!(rule_choice.rule.as_deref(), Some("bash(git push:*)"));
        // An ask rule's request offers no allow_session, so no rule choice either.
        let ask = request(vec![AllowOnce, Deny, CancelTurn], Some("bash(git push:*)"));
        assert_eq!(keys(&ask), "ynx");
    }

    #[test]
    fn the_prompt_shows_tool_summary_reason_and_choices() {
        use ApprovalDecision::*;
        let mut approvals = Approvals::default();
        approvals.apply(
            ApprovalUpdate::Requested(Box::new(request(vec![AllowOnce, Deny, CancelTurn], None))),
            |_| None,
        );
        let lines = approvals.render(&Theme::new(true), 60, 6);
        assert!(approvals.read_whole, "a short command is read at once");
        let mut terminal = Terminal::new(TestBackend::new(60, 6)).unwrap_or_else(|e| panic!("{e}"));
        terminal
            .draw(|frame| frame.render_widget(Paragraph::new(lines), frame.area()))
            .unwrap_or_else(|e| panic!("{e}"));
        let buffer = terminal.backend().buffer();
        let rows: Vec<String> = (0..buffer.area.height)
            .map(|y| {
                (0..buffer.area.width)
                    .map(|x| buffer[(x, y)].symbol())
                    .collect::<String>()
                    .trim_end()
                    .to_string()
            })
            .collect();
        assert_eq!(
            rows,
            [
                "Approval needed: bash Run: git push origin main",
                "  rule bash(git push:*) (cli) · sandbox full, network",
                "› [y] Allow once",
                "  [n] Deny",
                "  [x] Deny and stop the turn",
                "",
            ]
        );
        // The selected choice is reversed.
        assert!(
            buffer[(2, 2)]
                .modifier
                .contains(ratatui::style::Modifier::REVERSED)
        );
    }

    fn cancelled(id: &str) -> ApprovalUpdate {
        ApprovalUpdate::Resolved(ApprovalResolution {
            approval_id: id.into(),
            tool_call_id: "call-1".into(),
            decision: ResolvedDecision::Cancelled,
            source: ResolutionSource::Interrupt,
            message: None,
        })
    }

    #[test]
    fn a_resolution_from_elsewhere_closes_the_prompt_with_a_notice() {
        use ApprovalDecision::*;
        let mut approvals = Approvals::default();
        approvals.apply(
            ApprovalUpdate::Requested(Box::new(request(vec![AllowOnce, Deny], None))),
            |_| None,
        );
        assert!(approvals.is_open());
        let notice = approvals.apply(cancelled("ap-1"), |_| None);
        assert!(!approvals.is_open());
        assert!(
            matches!(&notice, Some(Item::Notice(text)) if text == "Approval cancelled: bash Run: git push origin main"),
            "{notice:?}"
        );
        // Unknown ids (answered here already) change nothing.
        let again = approvals.apply(cancelled("ap-1"), |_| None);
        assert!(again.is_none());
    }

    fn press(code: KeyCode) -> KeyEvent {
        KeyEvent::new(code, KeyModifiers::NONE)
    }

    fn texts(lines: &[Line<'_>]) -> Vec<String> {
        lines.iter().map(|l| l.to_string()).collect()
    }

    /// An 8 KiB command with a second command in its middle.
    fn long_request(decisions: Vec<ApprovalDecision>) -> ApprovalRequest {
        let filler = "harmless ".repeat(450);
        let command = format!("echo {filler}; touch PWNED; echo {filler}");
        let mut request = command_request(&command, decisions, None);
        // As the broker clips it.
        request.summary = format!("{}…", &request.summary[..1021]);
        request
    }

    #[test]
    fn a_long_command_is_windowed_and_allowing_waits_until_all_of_it_was_shown() {
        use ApprovalDecision::*;
        let mut approvals = Approvals::default();
        approvals.apply(
            ApprovalUpdate::Requested(Box::new(long_request(vec![AllowOnce, AllowSession, Deny]))),
            |_| None,
        );
        let theme = Theme::new(true);
        let rows = texts(&approvals.render(&theme, 100, 12));
        assert_eq!(rows.len(), 12, "{rows:#?}");
        assert_eq!(rows[0], "Approval needed: bash Run (8125 bytes):");
        assert!(rows[2].starts_with("  │ echo harmless"), "{rows:#?}");
        assert!(
            rows.iter()
                .any(|r| r.contains("read the whole command before allowing")),
            "{rows:#?}"
        );
        // y, a and Enter on an allow are refused; the selection still moves with Tab.
        for key in [KeyCode::Char('y'), KeyCode::Char('a'), KeyCode::Enter] {
            assert_eq!(approvals.decide(&press(key)), Decided::Taken);
        }
        assert!(approvals.refused);
        assert_eq!(approvals.decide(&press(KeyCode::Tab)), Decided::Taken);
        assert_eq!(approvals.selected, 1);
        // ↓ and PageDown scroll the command, not the choices.
        let mut payload_seen = false;
        let mut frames = 0;
        while !approvals.read_whole {
            let rows = texts(&approvals.render(&theme, 100, 12));
            payload_seen |= rows.iter().any(|r| r.contains("touch PWNED"));
            approvals.decide(&press(KeyCode::PageDown));
            frames += 1;
            assert!(frames < 100, "the end is reached");
        }
        assert!(payload_seen);
        assert_eq!(approvals.selected, 1);
        let rows = texts(&approvals.render(&theme, 100, 12));
        assert!(
            rows.iter().any(|r| r.contains("whole command shown")),
            "{rows:#?}"
        );
        assert!(matches!(
            approvals.decide(&press(KeyCode::Char('y'))),
            Decided::Answer(Choice {
                decision: AllowOnce,
                ..
            })
        ));
    }

    #[test]
    fn deny_needs_no_reading_and_ctrl_o_expands_the_window() {
        use ApprovalDecision::*;
        let mut approvals = Approvals::default();
        approvals.apply(
            ApprovalUpdate::Requested(Box::new(long_request(vec![AllowOnce, Deny]))),
            |_| None,
        );
        let theme = Theme::new(true);
        let small = approvals.render(&theme, 60, 12).len();
        assert!(!approvals.expanded());
        let ctrl_o = KeyEvent::new(KeyCode::Char('o'), KeyModifiers::CONTROL);
        assert_eq!(approvals.decide(&ctrl_o), Decided::Taken);
        assert!(approvals.expanded());
        assert!(approvals.render(&theme, 60, 40).len() > small);
        assert!(matches!(
            approvals.decide(&press(KeyCode::Char('n'))),
            Decided::Answer(Choice { decision: Deny, .. })
        ));
    }

    #[test]
    fn newlines_and_hidden_characters_get_the_window_even_when_short() {
        use ApprovalDecision::*;
        let mut approvals = Approvals::default();
        let mut request = command_request("echo ok\nrm -rf ~", vec![AllowOnce, Deny], None);
        request.args = Some(serde_json::json!({"command": "echo ok\u{202e}\nrm -rf ~"}));
        request.summary = "Run: echo ok rm -rf ~".into();
        approvals.apply(ApprovalUpdate::Requested(Box::new(request)), |_| None);
        let rows = texts(&approvals.render(&Theme::new(true), 60, 12));
        assert!(
            rows.contains(&"  │ echo ok\\u{202e}".to_string()),
            "{rows:#?}"
        );
        assert!(rows.contains(&"  │ rm -rf ~".to_string()), "{rows:#?}");
        // Both rows fit: shown whole at once.
        assert!(approvals.read_whole);
    }

    #[test]
    fn arguments_too_large_for_the_request_come_from_the_transcript() {
        use ApprovalDecision::*;
        let mut request = long_request(vec![AllowOnce, Deny]);
        let full = request.args.take();
        let mut approvals = Approvals::default();
        approvals.apply(ApprovalUpdate::Requested(Box::new(request.clone())), |id| {
            assert_eq!(id, "call-1");
            full.clone()
        });
        assert!(approvals.pending[0].subject.complete);
        // Without them only a preview is known: it can never be allowed here.
        let mut approvals = Approvals::default();
        approvals.apply(ApprovalUpdate::Requested(Box::new(request)), |_| None);
        assert!(!approvals.pending[0].subject.complete);
        let rows = texts(&approvals.render(&Theme::new(true), 100, 40));
        assert!(rows.iter().any(|r| r.contains("cannot be allowed here")));
        for _ in 0..100 {
            approvals.decide(&press(KeyCode::PageDown));
            approvals.render(&Theme::new(true), 60, 40);
        }
        assert_eq!(approvals.decide(&press(KeyCode::Char('y'))), Decided::Taken);
    }
}
