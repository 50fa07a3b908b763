//! Background tasks (`bash` with `background: true`, docs/tools.md#background-tasks) and their
//! status, as a pane above the composer. Everything comes from the session's events: the task
//! appears with its first `shell_task_changed`, the `bash` call that started it names its command
//! (the result's `details.taskId`), and its operation outcome (docs/rpc.md#operation-outcomes) says
//! how it ended. A finished task stays until the next prompt is sent, so its end is seen; running
//! ones always show.

use std::collections::HashMap;

use ratatui::text::{Line, Span};
use serde_json::Value;
use zi_protocol::event::{AgentSessionEvent, EntryData, OperationOutcome, OutcomeResult};

use crate::status::clip;
use crate::theme::Theme;
use crate::wrap::text_width;

/// Task rows shown at most (the newest); the rest are counted.
const ROWS: usize = 4;
/// The operation outcomes of background tasks are named `shell/background_task/<task id>`.
const OUTCOME_PREFIX: &str = "shell/background_task/";

#[derive(Debug, Clone, PartialEq)]
pub enum TaskStatus {
    Running,
    /// How it ended (`exit 0`, `exit 2`, `killed`, `timed out`, …) and whether it succeeded.
    Ended {
        text: String,
        ok: bool,
    },
}

#[derive(Debug, Clone)]
struct Task {
    id: String,
    command: String,
    status: TaskStatus,
}

#[derive(Debug, Default)]
pub struct BackgroundTasks {
    tasks: Vec<Task>,
    /// Commands of `bash` calls with `background: true` that have not returned yet.
    starting: HashMap<String, String>,
}

impl BackgroundTasks {
    fn task(&mut self, id: &str) -> &mut Task {
        let index = match self.tasks.iter().position(|t| t.id == id) {
            Some(index) => index,
            None => {
                self.tasks.push(Task {
                    id: id.to_string(),
                    command: String::new(),
                    status: TaskStatus::Running,
                });
                self.tasks.len() - 1
            }
        };
        &mut self.tasks[index]
    }

    /// Follows one session event; true when the pane changed.
    pub fn apply(&mut self, event: &AgentSessionEvent) -> bool {
        match event {
            AgentSessionEvent::ToolExecutionStart {
                tool_call_id,
                tool_name,
                args,
            } if tool_name == "bash" && args.get("background") == Some(&Value::Bool(true)) => {
                let command = args.get("command").and_then(Value::as_str).unwrap_or("");
                self.starting
                    .insert(tool_call_id.clone(), command.to_string());
                false
            }
            AgentSessionEvent::ToolExecutionEnd {
                tool_call_id,
                result,
                ..
            } => {
                let Some(command) = self.starting.remove(tool_call_id) else {
                    return false;
                };
                let id = result
                    .details
                    .as_ref()
                    .and_then(|d| d.get("taskId"))
                    .and_then(Value::as_str)
                    .filter(|id| !id.is_empty());
                match id {
                    Some(id) => {
                        self.task(id).command = command;
                        true
                    }
                    None => false,
                }
            }
            AgentSessionEvent::ShellTaskChanged { task_id } => {
                self.task(task_id);
                true
            }
            AgentSessionEvent::OperationOutcome { outcome } => match &outcome.data {
                EntryData::OperationOutcome(outcome) => {
                    match outcome.operation_id.strip_prefix(OUTCOME_PREFIX) {
                        Some(id) => {
                            self.task(id).status = ended(outcome);
                            true
                        }
                        None => false,
                    }
                }
                _ => false,
            },
            _ => false,
        }
    }

    /// A prompt was sent: finished tasks have been seen and leave the pane.
    pub fn prompt_sent(&mut self) {
        self.tasks.retain(|t| t.status == TaskStatus::Running);
    }

    pub fn running(&self) -> usize {
        self.tasks
            .iter()
            .filter(|t| t.status == TaskStatus::Running)
            .count()
    }

    /// The pane's rows at `width` cells (none without tasks).
    pub fn lines(&self, theme: &Theme, width: usize) -> Vec<Line<'static>> {
        if self.tasks.is_empty() {
            return Vec::new();
        }
        let mut lines = vec![Line::styled(
            format!("Background tasks · {} running", self.running()),
            theme.bold(),
        )];
        let hidden = self.tasks.len().saturating_sub(ROWS);
        for task in &self.tasks[hidden..] {
            let (mark, style, state) = match &task.status {
                TaskStatus::Running => ("⋯ ", theme.plain(), "running".to_string()),
                TaskStatus::Ended { text, ok: true } => ("✓ ", theme.ok(), text.clone()),
                TaskStatus::Ended { text, ok: false } => ("✗ ", theme.error(), text.clone()),
            };
            let lead = format!("{}  ", task.id);
            let tail = format!("  {state}");
            let room = width.saturating_sub(2 + text_width(&lead) + text_width(&tail));
            let command = clip(
                &format!("$ {}", task.command.replace('\n', " ")),
                room.max(1),
            );
            lines.push(Line::from(vec![
                Span::styled(mark, style),
                Span::styled(lead, theme.tool()),
                Span::raw(command),
                Span::styled(tail, style),
            ]));
        }
        if hidden > 0 {
            lines.push(Line::styled(format!("  … {hidden} earlier"), theme.dim()));
        }
        lines
    }
}

/// The status text of a finished task, from its outcome's result and evidence.
fn ended(outcome: &OperationOutcome) -> TaskStatus {
    let evidence = &outcome.evidence;
    let code = |key: &str| evidence.get(key).and_then(Value::as_str).unwrap_or("");
    let text = match outcome.result {
        OutcomeResult::Succeeded => "exit 0".to_string(),
        OutcomeResult::Cancelled => match code("cancellationCode") {
            "disposed" => "stopped with the session".to_string(),
            _ => "killed".to_string(),
        },
        OutcomeResult::Failed => match code("errorCode") {
            "exit_nonzero" => format!(
                "exit {}",
                evidence
                    .get("exitCode")
                    .and_then(Value::as_i64)
                    .unwrap_or(-1)
            ),
            "signaled" => format!("killed by {}", code("signal")),
            "timed_out" => "timed out".to_string(),
            "output_limit" => "output limit".to_string(),
            _ => "failed to start".to_string(),
        },
    };
    TaskStatus::Ended {
        text,
        ok: outcome.result == OutcomeResult::Succeeded,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use zi_protocol::event::{SessionEntry, ToolResult};

    fn outcome(task: &str, result: OutcomeResult, evidence: Value) -> AgentSessionEvent {
        AgentSessionEvent::OperationOutcome {
            outcome: SessionEntry {
                data: EntryData::OperationOutcome(OperationOutcome {
                    operation_id: format!("{OUTCOME_PREFIX}{task}"),
                    capability: "shell".into(),
                    operation: "background_task".into(),
                    result,
                    duration_ms: 5,
                    evidence,
                }),
                id: "e1".into(),
                parent_id: None,
                timestamp: "2026-12-01T00:00:00.000Z".into(),
            },
        }
    }

    fn started(tasks: &mut BackgroundTasks, call: &str, task: &str, command: &str) {
        tasks.apply(&AgentSessionEvent::ToolExecutionStart {
            tool_call_id: call.into(),
            tool_name: "bash".into(),
            args: json!({"command": command, "background": true}),
        });
        // The task registers (and says so) before the call returns.
        tasks.apply(&AgentSessionEvent::ShellTaskChanged {
            task_id: task.into(),
        });
        tasks.apply(&AgentSessionEvent::ToolExecutionEnd {
            tool_call_id: call.into(),
            tool_name: "bash".into(),
            result: ToolResult {
                content: Vec::new(),
                details: Some(json!({"taskId": task, "status": "running"})),
            },
            is_error: false,
        });
    }

    fn rows(tasks: &BackgroundTasks) -> Vec<String> {
        tasks
            .lines(&Theme::new(true), 60)
            .iter()
            .map(|l| l.to_string())
            .collect()
    }

    #[test]
    fn tasks_show_their_command_and_status_until_the_next_prompt() {
        let mut tasks = BackgroundTasks::default();
        assert!(rows(&tasks).is_empty());
        started(&mut tasks, "c1", "task-1", "sleep 30");
        started(&mut tasks, "c2", "task-2", "make build");
        started(&mut tasks, "c3", "task-3", "false");
        tasks.apply(&outcome(
            "task-2",
            OutcomeResult::Succeeded,
            json!({"exitCode": 0}),
        ));
        tasks.apply(&outcome(
            "task-3",
            OutcomeResult::Failed,
            json!({"errorCode": "exit_nonzero", "exitCode": 1}),
        ));
        assert_eq!(
            rows(&tasks),
            [
                "Background tasks · 1 running",
                "⋯ task-1  $ sleep 30  running",
                "✓ task-2  $ make build  exit 0",
                "✗ task-3  $ false  exit 1",
            ]
        );
        tasks.prompt_sent();
        assert_eq!(
            rows(&tasks),
            [
                "Background tasks · 1 running",
                "⋯ task-1  $ sleep 30  running"
            ]
        );
        tasks.apply(&outcome(
            "task-1",
            OutcomeResult::Cancelled,
            json!({"cancellationCode": "killed"}),
        ));
        assert_eq!(rows(&tasks)[1], "✗ task-1  $ sleep 30  killed");
    }

    #[test]
    fn a_foreground_bash_call_is_no_task() {
        let mut tasks = BackgroundTasks::default();
        tasks.apply(&AgentSessionEvent::ToolExecutionStart {
            tool_call_id: "c1".into(),
            tool_name: "bash".into(),
            args: json!({"command": "ls"}),
        });
        assert!(rows(&tasks).is_empty());
    }
}
