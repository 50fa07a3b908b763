//! One tool call as a compact row: `bash` with its command and exit status, `edit` with its
//! coloured diff, `write` with the written lines, `read` with path and line range, anything else
//! with its name and arguments. Collapsed, a row shows a few lines of output; expanded (Ctrl+O)
//! all of it.

use ratatui::style::Style;
use ratatui::text::{Line, Span};
use serde_json::Value;

use crate::theme::Theme;
use crate::wrap::Logical;

/// A tool call as the transcript keeps it.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCallView {
    pub id: String,
    pub name: String,
    pub args: Value,
    /// The latest progress text (bash output tail) while running.
    pub partial: Option<String>,
    pub result: Option<ToolOutcome>,
    pub expanded: bool,
}

/// How a tool call ended.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolOutcome {
    pub text: String,
    pub details: Option<Value>,
    pub is_error: bool,
}

/// Output lines shown while collapsed.
const COLLAPSED_OUTPUT: usize = 4;
/// Diff or written lines shown while collapsed.
const COLLAPSED_DIFF: usize = 16;

fn str_arg<'a>(value: &'a Value, key: &str) -> Option<&'a str> {
    value.get(key).and_then(Value::as_str)
}

fn u64_arg(value: &Value, key: &str) -> Option<u64> {
    value.get(key).and_then(Value::as_u64)
}

impl ToolCallView {
    pub fn new(id: String, name: String, args: Value) -> ToolCallView {
        ToolCallView {
            id,
            name,
            args,
            partial: None,
            result: None,
            expanded: false,
        }
    }

    fn details(&self) -> Option<&Value> {
        self.result.as_ref().and_then(|r| r.details.as_ref())
    }

    /// The header: status mark, tool name and what it works on.
    fn header(&self, theme: &Theme) -> Line<'static> {
        let (mark, mark_style) = match &self.result {
            None => ("⋯ ", theme.dim()),
            Some(r) if r.is_error => ("✗ ", theme.error()),
            Some(_) => ("✓ ", theme.ok()),
        };
        let mut spans = vec![
            Span::styled(mark, mark_style),
            Span::styled(self.name.clone(), theme.tool()),
            Span::raw(" "),
        ];
        match self.name.as_str() {
            "bash" => {
                let command = str_arg(&self.args, "command").unwrap_or("");
                let first = command.lines().next().unwrap_or("");
                spans.push(Span::styled(format!("$ {first}"), theme.bold()));
                if command.lines().nth(1).is_some() {
                    spans.push(Span::styled(" …", theme.dim()));
                }
                if let Some(status) = self.bash_status(theme) {
                    spans.push(Span::raw("  "));
                    spans.push(status);
                }
            }
            "read" => {
                let path = self
                    .details()
                    .and_then(|d| str_arg(d, "path"))
                    .or_else(|| str_arg(&self.args, "path"))
                    .unwrap_or("");
                spans.push(Span::raw(path.to_string()));
                if let Some(range) = self.read_range() {
                    spans.push(Span::styled(range, theme.dim()));
                }
            }
            "edit" | "write" => {
                let path = str_arg(&self.args, "path").unwrap_or("");
                spans.push(Span::raw(path.to_string()));
                if let Some(d) = self.details() {
                    let added = u64_arg(d, "additions");
                    let removed = u64_arg(d, "deletions");
                    if let (Some(a), Some(r)) = (added, removed) {
                        spans.push(Span::styled(format!("  +{a}"), theme.added()));
                        spans.push(Span::styled(format!(" -{r}"), theme.removed()));
                    }
                    if let Some(bytes) = u64_arg(d, "bytes") {
                        spans.push(Span::styled(format!("  {bytes} bytes"), theme.dim()));
                    }
                }
            }
            _ => {
                let mut args = self.args.to_string();
                if args.len() > 120 {
                    let mut cut = 117;
                    while !args.is_char_boundary(cut) {
                        cut -= 1;
                    }
                    args.truncate(cut);
                    args.push('…');
                }
                spans.push(Span::styled(args, theme.dim()));
            }
        }
        Line::from(spans)
    }

    fn bash_status(&self, theme: &Theme) -> Option<Span<'static>> {
        let result = self.result.as_ref()?;
        let details = result.details.as_ref();
        let status = details.and_then(|d| str_arg(d, "status")).unwrap_or("");
        let text = match (status, details.and_then(|d| d.get("exitCode"))) {
            ("exited", Some(code)) => format!("exit {code}"),
            ("signaled", _) => format!(
                "killed by {}",
                details
                    .and_then(|d| str_arg(d, "signal"))
                    .unwrap_or("a signal")
            ),
            ("timed_out", _) => "timed out".to_string(),
            ("aborted", _) => "aborted".to_string(),
            ("", _) if result.is_error => "failed".to_string(),
            ("", _) => "done".to_string(),
            (other, _) => other.replace('_', " "),
        };
        let style = if result.is_error {
            theme.error()
        } else {
            theme.ok()
        };
        Some(Span::styled(text, style))
    }

    fn read_range(&self) -> Option<String> {
        if let Some(d) = self.details() {
            let start = u64_arg(d, "startLine")?;
            let end = u64_arg(d, "endLine")?;
            let total = u64_arg(d, "totalLines");
            return Some(match total {
                Some(total) => format!(":{start}-{end} of {total}"),
                None => format!(":{start}-{end}"),
            });
        }
        let offset = u64_arg(&self.args, "offset");
        let limit = u64_arg(&self.args, "limit");
        match (offset, limit) {
            (Some(o), Some(l)) => Some(format!(":{o}-{}", o + l.saturating_sub(1))),
            (Some(o), None) => Some(format!(":{o}-")),
            (None, Some(l)) => Some(format!(":1-{l}")),
            (None, None) => None,
        }
    }

    /// The body lines under the header, indented.
    fn body(&self, theme: &Theme) -> Vec<Logical> {
        let indent = || vec![Span::raw("  ")];
        let line = |text: &str, style: Style| {
            Logical::indented(
                Line::from(vec![Span::raw("  "), Span::styled(text.to_string(), style)]),
                indent(),
            )
        };
        let mut out = Vec::new();
        if self.name == "bash" && self.expanded {
            let command = str_arg(&self.args, "command").unwrap_or("");
            for rest in command.lines().skip(1) {
                out.push(line(&format!("  {rest}"), theme.bold()));
            }
        }
        let Some(result) = &self.result else {
            if let Some(partial) = &self.partial {
                tail(partial, COLLAPSED_OUTPUT, theme.dim(), &mut out, &line);
            }
            return out;
        };
        let diff = self
            .details()
            .and_then(|d| str_arg(d, "diff"))
            .filter(|_| !result.is_error);
        if self.name == "edit"
            && let Some(diff) = diff
        {
            let lines: Vec<&str> = diff
                .lines()
                .filter(|l| !l.starts_with("--- ") && !l.starts_with("+++ "))
                .collect();
            let shown = if self.expanded {
                lines.len()
            } else {
                COLLAPSED_DIFF.min(lines.len())
            };
            for l in &lines[..shown] {
                let style = if l.starts_with('+') {
                    theme.added()
                } else if l.starts_with('-') {
                    theme.removed()
                } else if l.starts_with("@@") {
                    theme.hunk()
                } else {
                    theme.dim()
                };
                out.push(line(l, style));
            }
            more(lines.len() - shown, theme, &mut out);
            return out;
        }
        if self.name == "write" && !result.is_error {
            let content = str_arg(&self.args, "content").unwrap_or("");
            let lines: Vec<&str> = content.lines().collect();
            let shown = if self.expanded {
                lines.len()
            } else {
                COLLAPSED_DIFF.min(lines.len())
            };
            for l in &lines[..shown] {
                out.push(line(&format!("+{l}"), theme.added()));
            }
            more(lines.len() - shown, theme, &mut out);
            return out;
        }
        if self.name == "read" && !result.is_error && !self.expanded {
            return out;
        }
        let style = if result.is_error {
            theme.error()
        } else {
            theme.dim()
        };
        if self.expanded {
            for l in result.text.lines() {
                out.push(line(l, style));
            }
        } else {
            tail(&result.text, COLLAPSED_OUTPUT, style, &mut out, &line);
        }
        out
    }

    /// Header and body.
    pub fn render(&self, theme: &Theme) -> Vec<Logical> {
        let mut out = vec![Logical::indented(
            self.header(theme),
            vec![Span::raw("    ")],
        )];
        out.extend(self.body(theme));
        out
    }
}

fn tail(
    text: &str,
    keep: usize,
    style: Style,
    out: &mut Vec<Logical>,
    line: &dyn Fn(&str, Style) -> Logical,
) {
    let lines: Vec<&str> = text.trim_end_matches('\n').lines().collect();
    let skipped = lines.len().saturating_sub(keep);
    if skipped > 0 {
        out.push(line(
            &format!("… {skipped} earlier lines (Ctrl+O expands)"),
            Style::default().add_modifier(ratatui::style::Modifier::DIM),
        ));
    }
    for l in &lines[skipped..] {
        out.push(line(l, style));
    }
}

fn more(hidden: usize, theme: &Theme, out: &mut Vec<Logical>) {
    if hidden > 0 {
        out.push(Logical::new(Line::styled(
            format!("  … {hidden} more lines (Ctrl+O expands)"),
            theme.dim(),
        )));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn texts(view: &ToolCallView) -> Vec<String> {
        view.render(&Theme::new(true))
            .iter()
            .map(|l| l.line.to_string())
            .collect()
    }

    fn done(mut view: ToolCallView, text: &str, details: Value, is_error: bool) -> ToolCallView {
        view.result = Some(ToolOutcome {
            text: text.to_string(),
            details: Some(details),
            is_error,
        });
        view
    }

    #[test]
    fn bash_shows_command_exit_status_and_output_tail() {
        let view = ToolCallView::new("c1".into(), "bash".into(), json!({"command": "make"}));
        let view = done(
            view,
            "1\n2\n3\n4\n5\n6\n\nCommand exited with code 2",
            json!({"status": "exited", "exitCode": 2}),
            true,
        );
        let rows = texts(&view);
        assert_eq!(rows[0], "✗ bash $ make  exit 2");
        assert_eq!(rows[1], "  … 4 earlier lines (Ctrl+O expands)");
        assert_eq!(
            rows.last().map(String::as_str),
            Some("  Command exited with code 2")
        );
    }

    #[test]
    fn edit_shows_the_coloured_diff_without_file_headers() {
        let view = ToolCallView::new("c1".into(), "edit".into(), json!({"path": "a.txt"}));
        let diff = "--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-old\n+new\n";
        let view = done(
            view,
            "Successfully replaced 1 block(s) in a.txt",
            json!({"diff": diff, "additions": 1, "deletions": 1}),
            false,
        );
        let theme = Theme::new(true);
        let rows = view.render(&theme);
        let text: Vec<String> = rows.iter().map(|l| l.line.to_string()).collect();
        assert_eq!(
            text,
            ["✓ edit a.txt  +1 -1", "  @@ -1 +1 @@", "  -old", "  +new"]
        );
        assert_eq!(rows[3].line.spans[1].style, theme.added());
        assert_eq!(rows[2].line.spans[1].style, theme.removed());
    }

    #[test]
    fn read_shows_path_and_range() {
        let view = ToolCallView::new("c1".into(), "read".into(), json!({"path": "src/lib.rs"}));
        let view = done(
            view,
            "text",
            json!({"path": "/w/src/lib.rs", "startLine": 1, "endLine": 40, "totalLines": 90}),
            false,
        );
        assert_eq!(texts(&view), ["✓ read /w/src/lib.rs:1-40 of 90"]);
    }

    #[test]
    fn expanding_shows_all_output() {
        let mut view = ToolCallView::new("c1".into(), "bash".into(), json!({"command": "seq 9"}));
        view = done(
            view,
            "1\n2\n3\n4\n5\n6\n7\n8\n9",
            json!({"status": "exited", "exitCode": 0}),
            false,
        );
        assert_eq!(texts(&view).len(), 1 + 1 + COLLAPSED_OUTPUT);
        view.expanded = true;
        assert_eq!(texts(&view).len(), 1 + 9);
    }
}
