//! How a tool call looks to an ACP client (docs/acp.md#tool-calls): its kind, a human
//! title, the locations it touches (absolute paths, 1-based lines), the `rawInput`, and the
//! content at its start (a diff of what `write`/`edit` will change) and at its end (the result).
//!
//! Pure functions of the tool name, arguments, result and cwd: the live mapper and the replay
//! of a journal call the same ones, so a loaded session shows every call exactly as it was shown
//! live.

use std::path::{Path, PathBuf};

use agent_client_protocol_schema::v1::{
    ContentBlock, Diff, TextContent, ToolCallContent, ToolCallLocation, ToolCallStatus, ToolKind,
};
use serde_json::{Value, json};
use zi_protocol::message::ContentBlock as ZiBlock;

/// Longest title, in characters (a command's first line is cut with `…`).
const TITLE_CHARS: usize = 80;
/// One `diff` side at most; a larger change is described instead of shown.
const MAX_DIFF_TEXT: usize = 256 * 1024;
/// All diffs of one update at most.
const MAX_DIFF_TOTAL: usize = 1024 * 1024;
/// Result text shown as the call's content at most.
pub const MAX_RESULT_TEXT: usize = 50 * 1024;
/// `rawInput.content` of `write` and `rawOutput` texts at most.
const MAX_RAW_TEXT: usize = 8 * 1024;

/// What a call shows when it starts.
#[derive(Debug, Clone, PartialEq)]
pub struct StartView {
    pub kind: ToolKind,
    pub title: String,
    pub locations: Vec<ToolCallLocation>,
    pub content: Vec<ToolCallContent>,
    pub raw_input: Value,
}

/// What a call shows when it ends: `content`/`locations` replace the start's when present.
#[derive(Debug, Clone, PartialEq)]
pub struct EndView {
    pub status: ToolCallStatus,
    pub content: Option<Vec<ToolCallContent>>,
    pub locations: Option<Vec<ToolCallLocation>>,
    pub raw_output: Value,
}

fn str_arg<'a>(args: &'a Value, key: &str) -> &'a str {
    args.get(key).and_then(Value::as_str).unwrap_or_default()
}

/// The path as the tools resolve it: `~`, then relative to the cwd.
pub fn resolve(path: &str, cwd: &Path) -> PathBuf {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    if let (Some(rest), Some(home)) = (path.strip_prefix("~/"), home.as_ref()) {
        return home.join(rest);
    }
    if path == "~"
        && let Some(home) = home
    {
        return home;
    }
    let path = Path::new(path);
    if path.is_absolute() {
        path.to_path_buf()
    } else {
        cwd.join(path)
    }
}

/// A path for a title: relative to the cwd when inside it.
fn shown(path: &Path, cwd: &Path) -> String {
    match path.strip_prefix(cwd) {
        Ok(relative) if !relative.as_os_str().is_empty() => relative.display().to_string(),
        _ => path.display().to_string(),
    }
}

/// At most `max` bytes of `text`, cut at a character boundary.
pub fn clip(text: &str, max: usize) -> &str {
    zi_protocol::results::clip_utf8(text, max).0
}

fn one_line(text: &str) -> String {
    let first = text.lines().next().unwrap_or_default().trim();
    let mut chars = first.chars();
    let head: String = chars.by_ref().take(TITLE_CHARS).collect();
    let cut = chars.next().is_some() || text.trim().lines().nth(1).is_some();
    if cut { format!("{head}…") } else { head }
}

fn text_content(text: impl Into<String>) -> ToolCallContent {
    ToolCallContent::from(ContentBlock::Text(TextContent::new(text)))
}

fn location(path: PathBuf, line: u32) -> ToolCallLocation {
    ToolCallLocation::new(path).line(line)
}

/// The kind of a tool by name (docs/acp.md#tool-calls).
pub fn kind_of(name: &str) -> ToolKind {
    match name {
        "read" => ToolKind::Read,
        "write" | "edit" => ToolKind::Edit,
        "bash" | "task_output" => ToolKind::Execute,
        "update_plan" | "wait_subagents" | "list_subagents" | "list_subagent_profiles" => {
            ToolKind::Think
        }
        "mcp_search" => ToolKind::Search,
        _ if ["grep", "find", "search", "glob", "ls"]
            .iter()
            .any(|word| name.split(['_', '-']).any(|part| part == *word)) =>
        {
            ToolKind::Search
        }
        _ => ToolKind::Other,
    }
}

/// The call as it starts.
pub fn start_view(name: &str, args: &Value, cwd: &Path) -> StartView {
    let (title, locations, content) = match name {
        "read" => read_start(args, cwd),
        "write" => {
            let path = resolve(str_arg(args, "path"), cwd);
            let diff = diffs(vec![(path.clone(), None, str_arg(args, "content"))]);
            let title = format!("Write {}", shown(&path, cwd));
            (title, vec![location(path, 1)], diff)
        }
        "edit" => edit_start(args, cwd),
        _ => (title_of(name, args), Vec::new(), Vec::new()),
    };
    StartView {
        kind: kind_of(name),
        title,
        locations,
        content,
        raw_input: raw_input(name, args),
    }
}

fn read_start(args: &Value, cwd: &Path) -> (String, Vec<ToolCallLocation>, Vec<ToolCallContent>) {
    let path = resolve(str_arg(args, "path"), cwd);
    let offset = args.get("offset").and_then(Value::as_u64);
    let limit = args.get("limit").and_then(Value::as_u64);
    let first = offset.unwrap_or(1).max(1);
    let mut title = format!("Read {}", shown(&path, cwd));
    match limit {
        Some(limit) if limit > 0 => {
            title.push_str(&format!(" (lines {first}–{})", first + limit - 1));
        }
        _ if offset.is_some() => title.push_str(&format!(" (from line {first})")),
        _ => {}
    }
    let line = u32::try_from(first).unwrap_or(u32::MAX);
    (title, vec![location(path, line)], Vec::new())
}

fn edit_start(args: &Value, cwd: &Path) -> (String, Vec<ToolCallLocation>, Vec<ToolCallContent>) {
    let path = resolve(str_arg(args, "path"), cwd);
    let edits: Vec<(PathBuf, Option<&str>, &str)> = args
        .get("edits")
        .and_then(Value::as_array)
        .map(|edits| {
            edits
                .iter()
                .map(|e| {
                    let old = str_arg(e, "oldText");
                    (path.clone(), Some(old), str_arg(e, "newText"))
                })
                .collect()
        })
        .unwrap_or_default();
    let title = format!("Edit {}", shown(&path, cwd));
    (title, vec![location(path, 1)], diffs(edits))
}

/// Diffs, each side bounded; over the bounds a text says how large the change is.
fn diffs(items: Vec<(PathBuf, Option<&str>, &str)>) -> Vec<ToolCallContent> {
    let total: usize = items
        .iter()
        .map(|(_, old, new)| old.map_or(0, str::len) + new.len())
        .sum();
    let oversized = items
        .iter()
        .any(|(_, old, new)| old.map_or(0, str::len) > MAX_DIFF_TEXT || new.len() > MAX_DIFF_TEXT);
    if oversized || total > MAX_DIFF_TOTAL {
        return vec![text_content(format!("diff omitted: {total} bytes"))];
    }
    items
        .into_iter()
        .map(|(path, old, new)| {
            ToolCallContent::Diff(Diff::new(path, new).old_text(old.map(str::to_string)))
        })
        .collect()
}

/// The title of a tool without a dedicated view.
fn title_of(name: &str, args: &Value) -> String {
    match name {
        "bash" => {
            let description = str_arg(args, "description");
            if description.is_empty() {
                format!("`{}`", one_line(str_arg(args, "command")))
            } else {
                one_line(description)
            }
        }
        "task_output" => format!("Output of {}", str_arg(args, "taskId")),
        "kill_task" => format!("Stop {}", str_arg(args, "taskId")),
        "update_plan" => "Update plan".to_string(),
        // Code Mode (docs/code-mode.md): a cell of JavaScript calling zi's tools.
        "code" => match str_arg(args, "description") {
            "" => "Run code".to_string(),
            description => one_line(description),
        },
        "mcp_call" | "mcp_describe" => {
            let verb = if name == "mcp_call" { "" } else { "Describe " };
            format!(
                "{verb}{}: {}",
                str_arg(args, "server"),
                str_arg(args, "tool")
            )
        }
        "mcp_search" => format!("Search MCP tools: {}", one_line(str_arg(args, "query"))),
        "mcp_status" => "MCP servers".to_string(),
        _ if name.contains("subagent") => subagent_title(name, args),
        _ => match name
            .strip_prefix("mcp__")
            .and_then(|rest| rest.split_once("__"))
        {
            Some((server, tool)) => format!("{server}: {tool}"),
            None if kind_of(name) == ToolKind::Search => match first_string(args) {
                Some(pattern) => format!("Search {}", one_line(pattern)),
                None => name.to_string(),
            },
            None => match first_string(args) {
                Some(text) => format!("{name}: {}", one_line(text)),
                None => name.to_string(),
            },
        },
    }
}

fn subagent_title(name: &str, args: &Value) -> String {
    let who = str_arg(args, "name");
    let text = ["prompt", "text", "task"]
        .iter()
        .map(|key| str_arg(args, key))
        .find(|text| !text.is_empty());
    let verb = name.replace('_', " ");
    match (who.is_empty(), text) {
        (true, _) => verb,
        (false, Some(text)) => format!("Subagent {who}: {}", one_line(text)),
        (false, None) => format!("{verb} {who}"),
    }
}

fn first_string(args: &Value) -> Option<&str> {
    args.as_object()?
        .values()
        .find_map(Value::as_str)
        .filter(|s| !s.is_empty())
}

/// `rawInput`: the arguments, with a `write`'s content clipped (its length kept).
fn raw_input(name: &str, args: &Value) -> Value {
    if name == "write"
        && let Some(content) = args.get("content").and_then(Value::as_str)
        && content.len() > MAX_RAW_TEXT
    {
        let mut clipped = args.clone();
        clipped["content"] = json!(clip(content, MAX_RAW_TEXT));
        clipped["contentBytes"] = json!(content.len());
        return clipped;
    }
    args.clone()
}

/// The result's text blocks joined.
pub fn result_text(content: &[ZiBlock]) -> String {
    let mut text = String::new();
    for block in content {
        if let ZiBlock::Text { text: part, .. } = block {
            if !text.is_empty() {
                text.push('\n');
            }
            text.push_str(part);
        }
    }
    text
}

/// The call as it ends.
pub fn end_view(
    name: &str,
    args: &Value,
    content: &[ZiBlock],
    details: Option<&Value>,
    is_error: bool,
    cwd: &Path,
) -> EndView {
    let text = result_text(content);
    let status = if is_error {
        ToolCallStatus::Failed
    } else {
        ToolCallStatus::Completed
    };
    let raw_output = json!({
        "content": clip(&text, MAX_RAW_TEXT),
        "details": details.cloned().unwrap_or(Value::Null),
    });
    let shown_text = || Some(vec![text_content(clip(&text, MAX_RESULT_TEXT))]);
    let (content, locations) = match name {
        _ if is_error => (shown_text(), None),
        "write" | "update_plan" => (None, None),
        "edit" => edit_end(args, details, cwd),
        _ if text.is_empty() => (None, None),
        _ => (shown_text(), None),
    };
    EndView {
        status,
        content,
        locations,
        raw_output,
    }
}

type Shown = (Option<Vec<ToolCallContent>>, Option<Vec<ToolCallLocation>>);

/// The hunks of the applied edit (`details.diff`, a unified diff) as diffs, a location per
/// hunk at its first new line.
fn edit_end(args: &Value, details: Option<&Value>, cwd: &Path) -> Shown {
    let Some(unified) = details.and_then(|d| d.get("diff")).and_then(Value::as_str) else {
        return (None, None);
    };
    let path = resolve(str_arg(args, "path"), cwd);
    let hunks = parse_hunks(unified);
    if hunks.is_empty() {
        return (None, None);
    }
    let locations = hunks
        .iter()
        .map(|h| location(path.clone(), h.new_start))
        .collect();
    let items = hunks
        .iter()
        .map(|h| (path.clone(), Some(h.old.as_str()), h.new.as_str()))
        .collect();
    (Some(diffs(items)), Some(locations))
}

#[derive(Debug, Default, PartialEq)]
struct Hunk {
    new_start: u32,
    old: String,
    new: String,
}

/// The hunks of a unified diff: each side's lines (context on both).
fn parse_hunks(unified: &str) -> Vec<Hunk> {
    let mut hunks: Vec<Hunk> = Vec::new();
    for line in unified.lines() {
        if let Some(header) = line.strip_prefix("@@ ") {
            let new_start = header
                .split_whitespace()
                .find_map(|part| part.strip_prefix('+'))
                .and_then(|range| range.split(',').next())
                .and_then(|start| start.parse::<u32>().ok())
                .unwrap_or(1)
                .max(1);
            hunks.push(Hunk {
                new_start,
                ..Hunk::default()
            });
            continue;
        }
        let Some(hunk) = hunks.last_mut() else {
            continue;
        };
        let (old, new) = match line.chars().next() {
            Some(' ') => (true, true),
            Some('-') => (true, false),
            Some('+') => (false, true),
            _ => continue,
        };
        let body = &line[1..];
        if old {
            hunk.old.push_str(body);
            hunk.old.push('\n');
        }
        if new {
            hunk.new.push_str(body);
            hunk.new.push('\n');
        }
    }
    hunks
}

#[cfg(test)]
#[path = "tools_tests.rs"]
mod tests;
