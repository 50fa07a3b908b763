//! The status line: what the session is doing (streaming, a tool, compacting, a retry with its
//! countdown) on the left; model, thinking level, context usage and session cost on the right.

use ratatui::text::{Line, Span};
use zi_protocol::event::AgentSessionEvent;
use zi_protocol::state::{ContextUsage, ModelState, SessionState};

use crate::theme::Theme;
use crate::wrap::text_width;

/// What the session is doing, as the status line names it.
#[derive(Debug, Clone, PartialEq)]
pub enum Activity {
    Idle,
    Thinking,
    Streaming,
    Tool(String),
    Compacting,
    /// A retry waits until `retry_at` (Unix milliseconds).
    Retrying {
        attempt: u32,
        max_attempts: u32,
        retry_at: i64,
    },
    Interrupting,
}

#[derive(Debug, Clone)]
pub struct Status {
    pub activity: Activity,
    pub model: Option<String>,
    pub thinking: String,
    pub context_percent: Option<f64>,
    pub cost: f64,
    pub steering: usize,
    pub follow_up: usize,
    /// A transient hint ("Press Ctrl+C again to quit").
    pub hint: Option<String>,
}

impl Default for Status {
    fn default() -> Status {
        Status {
            activity: Activity::Idle,
            model: None,
            thinking: "off".to_string(),
            context_percent: None,
            cost: 0.0,
            steering: 0,
            follow_up: 0,
            hint: None,
        }
    }
}

impl Status {
    /// Takes what the snapshot tells (model, thinking level, context usage, queues).
    pub fn refresh(&mut self, state: &SessionState) {
        self.model = match &state.model {
            ModelState::Selected { model } => Some(format!("{}/{}", model.provider, model.id)),
            ModelState::Unselected => None,
        };
        self.thinking = state.thinking_level.as_str().to_string();
        self.context_percent = match &state.context_usage {
            ContextUsage::Measured { percent, .. } | ContextUsage::Estimated { percent, .. } => {
                Some(*percent)
            }
            ContextUsage::Unavailable { .. } => None,
        };
        self.steering = state.queued_inputs.steering.len();
        self.follow_up = state.queued_inputs.follow_up.len();
    }

    /// Follows the activity through the events; true when the snapshot should be refreshed.
    pub fn apply(&mut self, event: &AgentSessionEvent) -> bool {
        use zi_protocol::event::AssistantMessageEvent as Delta;
        match event {
            AgentSessionEvent::AgentStart | AgentSessionEvent::TurnStart => {
                self.activity = Activity::Thinking;
            }
            AgentSessionEvent::MessageUpdate {
                assistant_message_event,
            } => {
                let next = match assistant_message_event {
                    Delta::ThinkingStart { .. } | Delta::ThinkingDelta { .. } => Activity::Thinking,
                    _ => Activity::Streaming,
                };
                if self.activity != next && self.activity != Activity::Interrupting {
                    self.activity = next;
                }
            }
            AgentSessionEvent::ToolExecutionStart { tool_name, .. } => {
                self.activity = Activity::Tool(tool_name.clone());
            }
            AgentSessionEvent::ToolExecutionEnd { .. } => self.activity = Activity::Thinking,
            AgentSessionEvent::AutoRetryStart {
                attempt,
                max_attempts,
                retry_at,
                ..
            } => {
                self.activity = Activity::Retrying {
                    attempt: *attempt,
                    max_attempts: *max_attempts,
                    retry_at: *retry_at,
                };
            }
            AgentSessionEvent::CompactionStart { .. } => self.activity = Activity::Compacting,
            AgentSessionEvent::CompactionEnd { .. } => {
                self.activity = Activity::Thinking;
                return true;
            }
            AgentSessionEvent::AgentSettled => {
                self.activity = Activity::Idle;
                return true;
            }
            AgentSessionEvent::MessageEnd { message } => {
                if let Some(assistant) = message.as_assistant() {
                    self.cost += assistant.usage.cost.total;
                }
                return true;
            }
            AgentSessionEvent::QueueUpdate {
                steering,
                follow_up,
            } => {
                self.steering = steering.len();
                self.follow_up = follow_up.len();
            }
            AgentSessionEvent::ModelChanged { .. }
            | AgentSessionEvent::ThinkingLevelChanged { .. } => return true,
            _ => {}
        }
        false
    }

    fn activity_text(&self, now_ms: i64, frame: u64) -> String {
        const SPINNER: [&str; 4] = ["◐", "◓", "◑", "◒"];
        let spin = SPINNER[(frame % 4) as usize];
        match &self.activity {
            Activity::Idle => "ready · ? for help".to_string(),
            Activity::Thinking => format!("{spin} working · Esc interrupts"),
            Activity::Streaming => format!("{spin} streaming · Esc interrupts"),
            Activity::Tool(name) => format!("{spin} running {name} · Esc interrupts"),
            Activity::Compacting => format!("{spin} compacting"),
            Activity::Retrying {
                attempt,
                max_attempts,
                retry_at,
            } => {
                let seconds = (retry_at - now_ms).max(0).div_euclid(1000)
                    + i64::from((retry_at - now_ms).rem_euclid(1000) > 0);
                format!("retrying in {seconds}s (attempt {attempt}/{max_attempts})")
            }
            Activity::Interrupting => format!("{spin} interrupting"),
        }
    }

    /// The status line at `width` cells.
    pub fn line(&self, theme: &Theme, width: usize, now_ms: i64, frame: u64) -> Line<'static> {
        let mut left = self
            .hint
            .clone()
            .unwrap_or_else(|| self.activity_text(now_ms, frame));
        if self.steering + self.follow_up > 0 {
            left.push_str(&format!(
                " · queued: {} steer, {} follow-up",
                self.steering, self.follow_up
            ));
        }
        let mut right = vec![
            self.model.clone().unwrap_or_else(|| "no model".to_string()),
            format!("thinking {}", self.thinking),
        ];
        if let Some(percent) = self.context_percent {
            right.push(format!("ctx {percent:.0}%"));
        }
        right.push(format!("${:.4}", self.cost));
        let mut right = right.join(" · ");
        let right_budget = width / 2;
        // Narrow terminals drop the right side's details first, then clip the left.
        while text_width(&right) + 2 > right_budget && right.contains(" · ") {
            if let Some(cut) = right.rfind(" · ") {
                right.truncate(cut);
            }
        }
        let right = clip(&right, (width / 2).saturating_sub(2));
        let room = width.saturating_sub(text_width(&right) + 2);
        let left = clip(&left, room);
        let gap = width.saturating_sub(text_width(&left) + text_width(&right) + 2);
        Line::from(vec![
            Span::raw(" "),
            Span::raw(left),
            Span::raw(" ".repeat(gap)),
            Span::raw(right),
            Span::raw(" "),
        ])
        .style(theme.status())
    }
}

/// `text` cut to `width` cells, with `…` when cut.
pub(crate) fn clip(text: &str, width: usize) -> String {
    if text_width(text) <= width {
        return text.to_string();
    }
    let mut out = String::new();
    let mut used = 0;
    for c in text.chars() {
        let w = text_width(c.encode_utf8(&mut [0u8; 4]));
        if used + w + 1 > width {
            break;
        }
        out.push(c);
        used += w;
    }
    out.push('…');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_countdown_rounds_up() {
        let status = Status {
            activity: Activity::Retrying {
                attempt: 2,
                max_attempts: 5,
                retry_at: 10_500,
            },
            ..Status::default()
        };
        let line = status.line(&Theme::new(true), 100, 8_000, 0).to_string();
        assert!(line.contains("retrying in 3s (attempt 2/5)"), "{line}");
    }

    #[test]
    fn narrow_lines_fit_their_width() {
        let status = Status {
            model: Some("provider/a-long-model-name".to_string()),
            context_percent: Some(42.0),
            ..Status::default()
        };
        for width in [20, 40, 80] {
            let line = status.line(&Theme::new(true), width, 0, 0);
            assert!(text_width(&line.to_string()) <= width, "{width}: {line}");
        }
    }
}
