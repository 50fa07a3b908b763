//! Approvals as an inline prompt (approvals-reference §5): the interactive mode is the session's
//! opted-in approval client. Requests arrive through the same `ApprovalSink` an RPC connection
//! installs with `connection.set_approvals`, and answers go through the same broker call
//! `approval.respond` uses (`AgentSession::respond_approval`), so grants, outcomes, journal
//! entries and model-visible results are exactly those of the other clients.
//!
//! The oldest pending request is shown above the composer with the decisions it offers; while
//! one is shown, its keys (the choice letters, arrows, Enter) answer it and other letters are
//! not typed into the composer. Esc still interrupts the run (which cancels pending requests).

use std::sync::Arc;

use crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use ratatui::text::{Line, Span};
use tokio::sync::mpsc::UnboundedSender;
use zi_agent::AgentSession;
use zi_agent::session::approvals::{ApprovalFrame, ApprovalSink, RespondError};
use zi_protocol::approval::{
    ApprovalDecision, ApprovalReason, ApprovalRequest, ApprovalResolution, ResolutionSource,
    ResolvedDecision,
};

use crate::app::UiEvent;
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

/// The pending requests (oldest first) and the selected choice of the first.
#[derive(Debug, Default)]
pub struct Approvals {
    pending: Vec<ApprovalRequest>,
    selected: usize,
}

impl Approvals {
    /// Whether a request waits for an answer.
    pub fn is_open(&self) -> bool {
        !self.pending.is_empty()
    }

    /// Applies a frame; a resolution that did not come from this prompt (timeout, interrupt,
    /// `cancel_turn` of another request) is said in the transcript.
    pub fn apply(&mut self, update: ApprovalUpdate) -> Option<Item> {
        match update {
            ApprovalUpdate::Requested(request) => {
                self.pending.push(*request);
                None
            }
            ApprovalUpdate::Resolved(resolution) => {
                let index = self
                    .pending
                    .iter()
                    .position(|p| p.approval_id == resolution.approval_id)?;
                let request = self.remove(index);
                Some(Item::Notice(resolved_text(
                    &request,
                    resolution.decision,
                    resolution.source,
                )))
            }
        }
    }

    fn remove(&mut self, index: usize) -> ApprovalRequest {
        if index == 0 {
            self.selected = 0;
        }
        self.pending.remove(index)
    }

    /// Handles a key while a request is shown; false for keys that keep their usual meaning
    /// (Esc, Ctrl+…, scrolling).
    pub fn key(&mut self, key: &KeyEvent, session: &AgentSession) -> (bool, Option<Item>) {
        let Some(request) = self.pending.first() else {
            return (false, None);
        };
        if key.kind == KeyEventKind::Release {
            return (true, None);
        }
        let choices = choices(request);
        let modified = key
            .modifiers
            .intersects(KeyModifiers::CONTROL | KeyModifiers::ALT);
        let chosen = match key.code {
            _ if modified => return (false, None),
            KeyCode::Up | KeyCode::Left | KeyCode::BackTab => {
                self.selected = (self.selected + choices.len() - 1) % choices.len().max(1);
                None
            }
            KeyCode::Down | KeyCode::Right | KeyCode::Tab => {
                self.selected = (self.selected + 1) % choices.len().max(1);
                None
            }
            KeyCode::Enter => choices.get(self.selected).cloned(),
            KeyCode::Char(c) => choices.iter().find(|choice| choice.key == c).cloned(),
            _ => return (false, None),
        };
        let Some(choice) = chosen else {
            return (true, None);
        };
        (true, Some(self.answer(session, &choice)))
    }

    /// Answers the shown request through the broker, as `approval.respond` does.
    fn answer(&mut self, session: &AgentSession, choice: &Choice) -> Item {
        let Some(request) = self.pending.first() else {
            return Item::Error("No approval request is pending".to_string());
        };
        let id = request.approval_id.clone();
        match session.respond_approval(&id, choice.decision, None, choice.rule.clone()) {
            Ok(_) => {
                // The broker's `approval_resolved` frame follows; it finds nothing left to do.
                let request = self.remove(0);
                Item::Notice(resolved_text(
                    &request,
                    choice.decision.into(),
                    ResolutionSource::Client,
                ))
            }
            // Resolved meanwhile (timeout, interrupt): its frame removes it.
            Err(RespondError::NotFound(text) | RespondError::Failed(text)) => Item::Error(text),
        }
    }

    /// The prompt's rows, unwrapped (none when nothing is pending).
    pub fn lines(&self, theme: &Theme) -> Vec<Line<'static>> {
        let Some(request) = self.pending.first() else {
            return Vec::new();
        };
        let waiting = if self.pending.len() > 1 {
            format!(" (1 of {})", self.pending.len())
        } else {
            String::new()
        };
        let mut lines = vec![
            Line::from(vec![
                Span::styled(format!("Approval needed{waiting}: "), theme.warning()),
                Span::styled(request.tool_name.clone(), theme.tool()),
                Span::raw(" "),
                Span::styled(request.summary.clone(), theme.bold()),
            ]),
            Line::styled(
                format!(
                    "  {} · sandbox {}{}",
                    reason_text(&request.reason),
                    request.sandbox.mode,
                    if request.sandbox.network {
                        ", network"
                    } else {
                        ""
                    }
                ),
                theme.dim(),
            ),
        ];
        for (n, choice) in choices(request).iter().enumerate() {
            let selected = n == self.selected;
            let style = if selected {
                theme.selected()
            } else {
                theme.plain()
            };
            lines.push(Line::from(vec![
                Span::raw(if selected { "› " } else { "  " }),
                Span::styled(format!("[{}] {}", choice.key, choice.label), style),
            ]));
        }
        lines
    }
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
    format!("{what}: {} {}", request.tool_name, request.summary)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ratatui::Terminal;
    use ratatui::backend::TestBackend;
    use ratatui::widgets::Paragraph;
    use zi_protocol::approval::{ApprovalKind, CallSandbox};

    fn request(decisions: Vec<ApprovalDecision>, rule: Option<&str>) -> ApprovalRequest {
        ApprovalRequest {
            approval_id: "ap-1".into(),
            tool_call_id: "call-1".into(),
            tool_name: "bash".into(),
            kind: ApprovalKind::Exec,
            reason: ApprovalReason::Rule {
                rule: "bash(git push:*)".into(),
                source: "cli".into(),
            },
            summary: "Run: git push origin main".into(),
            args: None,
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
        approvals.apply(ApprovalUpdate::Requested(Box::new(request(
            vec![AllowOnce, Deny, CancelTurn],
            None,
        ))));
        let lines = approvals.lines(&Theme::new(true));
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

    #[test]
    fn a_resolution_from_elsewhere_closes_the_prompt_with_a_notice() {
        use ApprovalDecision::*;
        let mut approvals = Approvals::default();
        approvals.apply(ApprovalUpdate::Requested(Box::new(request(
            vec![AllowOnce, Deny],
            None,
        ))));
        assert!(approvals.is_open());
        let notice = approvals.apply(ApprovalUpdate::Resolved(ApprovalResolution {
            approval_id: "ap-1".into(),
            tool_call_id: "call-1".into(),
            decision: ResolvedDecision::Cancelled,
            source: ResolutionSource::Interrupt,
            message: None,
        }));
        assert!(!approvals.is_open());
        assert!(
            matches!(&notice, Some(Item::Notice(text)) if text == "Approval cancelled: bash Run: git push origin main"),
            "{notice:?}"
        );
        // Unknown ids (answered here already) change nothing.
        let again = approvals.apply(ApprovalUpdate::Resolved(ApprovalResolution {
            approval_id: "ap-1".into(),
            tool_call_id: "call-1".into(),
            decision: ResolvedDecision::Cancelled,
            source: ResolutionSource::Interrupt,
            message: None,
        }));
        assert!(again.is_none());
    }
}
