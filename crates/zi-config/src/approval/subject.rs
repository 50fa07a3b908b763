//! What a tool call is, as the approval gate sees it ([`crate::Tool::approval_subject`]).

use std::path::PathBuf;

use serde_json::Value;

/// The `kind` of an approval request (docs/approvals.md#the-request).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SubjectKind {
    /// `bash`.
    Exec,
    /// `write`, `edit`.
    FileChange,
    /// Every other tool.
    Tool,
}

/// A call described for rules, policies and the request a client sees.
#[derive(Debug, Clone, PartialEq)]
pub struct Subject {
    /// Which rules and policies apply to it.
    pub kind: SubjectKind,
    /// One line: `Run: CMD`, `Create PATH (N bytes)`, `Edit PATH: …`, `Call TOOL`.
    pub summary: String,
    /// The `bash` command as given.
    pub command: Option<String>,
    /// Canonical target paths (docs/approvals.md#paths-in-rules) of file tools.
    pub paths: Vec<PathBuf>,
    /// The request's `preview` (`diff` or `content`), from a dry run.
    pub preview: Option<Value>,
    /// A `bash` background task (never escalated).
    pub background: bool,
}

impl Subject {
    /// A tool with no specifier-bearing arguments: `Call TOOL`.
    pub fn tool(name: &str) -> Subject {
        Subject {
            kind: SubjectKind::Tool,
            summary: format!("Call {name}"),
            command: None,
            paths: Vec::new(),
            preview: None,
            background: false,
        }
    }

    /// A `bash` command: `Run: CMD`, ` (background)` appended for background tasks.
    pub fn exec(command: &str, background: bool) -> Subject {
        let mut summary = format!("Run: {command}");
        if background {
            summary.push_str(" (background)");
        }
        Subject {
            kind: SubjectKind::Exec,
            summary,
            command: Some(command.to_string()),
            paths: Vec::new(),
            preview: None,
            background,
        }
    }

    /// A file change of `path` (already canonical).
    pub fn file_change(path: PathBuf, summary: String, preview: Option<Value>) -> Subject {
        Subject {
            kind: SubjectKind::FileChange,
            summary,
            command: None,
            paths: vec![path],
            preview,
            background: false,
        }
    }

    /// A file read of `path` (contained: only rules apply).
    pub fn read(path: PathBuf) -> Subject {
        Subject {
            paths: vec![path],
            ..Subject::tool("read")
        }
    }
}
