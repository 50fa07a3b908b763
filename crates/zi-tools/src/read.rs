//! `read` (docs/tools.md#read): a window of a text file, head-truncated to 2,000 lines /
//! 50 KiB, with a continuation notice. The file is streamed, so memory stays at the window size
//! plus one line whatever the file size.

use std::io::BufRead;
use std::sync::LazyLock;

use futures::future::BoxFuture;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use zi_agent::tool::{KEY_ORDER, parameters_schema, whole_number};
use zi_agent::{ExecutionMode, ToolCallContext, ToolOutput, TypedTool};

use crate::ToolEnv;
use crate::files::check_regular_file;
use crate::truncate::{MAX_BYTES, MAX_LINES};

static PARAMETERS: LazyLock<Value> = LazyLock::new(|| parameters_schema::<ReadArgs>(KEY_ORDER));

/// The arguments of `read`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadArgs {
    /// Path of the file to read (relative or absolute)
    #[schemars(length(max = crate::MAX_PATH_BYTES))]
    pub path: String,
    /// Line number to start reading from (1-based)
    #[serde(default, deserialize_with = "whole_number")]
    #[schemars(range(min = 1))]
    pub offset: Option<u64>,
    /// Maximum number of lines to read
    #[serde(default, deserialize_with = "whole_number")]
    #[schemars(range(min = 1))]
    pub limit: Option<u64>,
}

/// The `read` tool (docs/tools.md#read).
pub struct ReadTool {
    env: ToolEnv,
}

impl ReadTool {
    /// `read` in `env`.
    pub fn new(env: ToolEnv) -> Self {
        ReadTool { env }
    }
}

impl TypedTool for ReadTool {
    type Args = ReadArgs;

    fn name(&self) -> &str {
        "read"
    }

    fn description(&self) -> &str {
        "Read the contents of a text file. Output is limited to 2000 lines or 50KB, whichever comes first; use offset and limit to page through large files."
    }

    fn parameters(&self) -> &Value {
        &PARAMETERS
    }

    fn execution_mode(&self) -> ExecutionMode {
        ExecutionMode::Parallel
    }

    fn approval_subject(
        &self,
        args: &ReadArgs,
    ) -> Result<zi_config::approval::Subject, ToolOutput> {
        crate::approval_subjects::read(&self.env, args)
    }

    fn execute(&self, args: ReadArgs, call: ToolCallContext) -> BoxFuture<'static, ToolOutput> {
        let env = self.env.clone();
        Box::pin(async move {
            let ReadArgs {
                path: shown,
                offset,
                limit,
            } = args;
            let offset = offset.unwrap_or(1);
            if !shown.is_empty() {
                let path = env.resolve(&shown);
                if let Some(read) = env.files.read(&path, &call.cancel) {
                    return read_with_client(&path, &shown, (offset, limit), read).await;
                }
            }
            tokio::task::spawn_blocking(move || read_window(&env, &shown, offset, limit))
                .await
                .unwrap_or_else(|e| ToolOutput::failure("unreadable", format!("Read failed: {e}")))
        })
    }
}

fn read_window(env: &ToolEnv, shown: &str, offset: u64, limit: Option<u64>) -> ToolOutput {
    if shown.is_empty() {
        return ToolOutput::failure("not_found", "File not found: (empty path)");
    }
    let path = env.resolve(shown);
    if let Err((code, text)) = check_regular_file(&path, shown) {
        return ToolOutput::failure(code, text);
    }
    let file = match std::fs::File::open(&path) {
        Ok(file) => file,
        Err(error) => {
            let code = crate::files::io_code(&error, "unreadable");
            return ToolOutput::failure(code, format!("Cannot read {shown}: {error}"));
        }
    };
    render_window(&path, shown, offset, limit, std::io::BufReader::new(file))
}

/// `read` when a client holds the files (ACP): zi's own checks on the path, then the client's
/// text (its unsaved buffer) in the same window as a file's.
async fn read_with_client(
    path: &std::path::Path,
    shown: &str,
    (offset, limit): (u64, Option<u64>),
    read: futures::future::BoxFuture<'static, Result<String, String>>,
) -> ToolOutput {
    if let Err((code, text)) = check_regular_file(path, shown) {
        return ToolOutput::failure(code, text);
    }
    match read.await {
        Ok(text) => render_window(path, shown, offset, limit, text.as_bytes()),
        Err(message) => {
            ToolOutput::failure("unreadable", format!("Cannot read {shown}: {message}"))
        }
    }
}

/// The window of lines `offset..offset+limit` of `reader` as the tool's result.
fn render_window(
    path: &std::path::Path,
    shown: &str,
    offset: u64,
    limit: Option<u64>,
    reader: impl BufRead,
) -> ToolOutput {
    let first = offset.max(1);
    let last_wanted = limit.map(|l| first.saturating_add(l) - 1);
    let Window {
        mut text,
        total,
        shown_lines,
        truncated_by,
        oversized_first,
    } = match scan_window(reader, shown, first, last_wanted) {
        Ok(window) => window,
        Err(failed) => return failed,
    };
    if first > total.max(1) {
        return ToolOutput::failure(
            "invalid_offset",
            format!("Offset {first} is beyond end of file ({total} lines total)"),
        );
    }
    let end = first + shown_lines - 1;
    let details = |truncated: bool| {
        json!({
            "path": path.display().to_string(),
            "totalLines": total,
            "startLine": first,
            "endLine": end.max(first.saturating_sub(1)),
            "truncated": truncated,
            "truncatedBy": truncated_by,
        })
    };
    if oversized_first {
        return ToolOutput::success(
            format!(
                "[Line {first} exceeds the {MAX_BYTES} byte limit. Use bash to inspect a bounded byte range.]"
            ),
            details(true),
        );
    }
    if shown_lines > 0 && end < total {
        text.push_str(&format!(
            "\n\n[Showing lines {first}-{end} of {total}. Use offset={} to continue.]",
            end + 1
        ));
    }
    ToolOutput::success(text, details(truncated_by.is_some()))
}

/// The lines `first..=last_wanted` of a file as far as the limits allow, and how many it has.
struct Window {
    text: String,
    total: u64,
    shown_lines: u64,
    /// `lines` or `bytes` when a limit cut the window short.
    truncated_by: Option<&'static str>,
    /// The first wanted line alone exceeds the byte limit.
    oversized_first: bool,
}

/// Reads the whole file (to count its lines), keeping the wanted window; a NUL byte means a
/// binary file, which fails.
fn scan_window(
    mut reader: impl BufRead,
    shown: &str,
    first: u64,
    last_wanted: Option<u64>,
) -> Result<Window, ToolOutput> {
    let mut total: u64 = 0;
    let mut shown_lines: u64 = 0;
    let mut text = String::new();
    let mut full = false;
    let mut truncated_by: Option<&str> = None;
    let mut oversized_first = false;
    let mut line = Vec::new();
    loop {
        line.clear();
        match reader.read_until(b'\n', &mut line) {
            Ok(0) => break,
            Ok(_) => {}
            Err(error) => {
                return Err(ToolOutput::failure(
                    "unreadable",
                    format!("Cannot read {shown}: {error}"),
                ));
            }
        }
        if line.contains(&0) {
            return Err(ToolOutput::failure(
                "unreadable",
                format!(
                    "Cannot read {shown}: it looks like a binary file. Use bash to inspect it."
                ),
            ));
        }
        total += 1;
        if total < first || full || last_wanted.is_some_and(|last| total > last) {
            continue;
        }
        let mut content = line.as_slice();
        content = content.strip_suffix(b"\n").unwrap_or(content);
        content = content.strip_suffix(b"\r").unwrap_or(content);
        if total == 1 {
            content = content.strip_prefix(b"\xef\xbb\xbf").unwrap_or(content);
        }
        let separator = usize::from(shown_lines > 0);
        if shown_lines as usize == MAX_LINES {
            full = true;
            truncated_by = Some("lines");
            continue;
        }
        if text.len() + separator + content.len() > MAX_BYTES {
            full = true;
            truncated_by = Some("bytes");
            oversized_first = shown_lines == 0;
            continue;
        }
        if separator == 1 {
            text.push('\n');
        }
        text.push_str(&String::from_utf8_lossy(content));
        shown_lines += 1;
    }
    Ok(Window {
        text,
        total,
        shown_lines,
        truncated_by,
        oversized_first,
    })
}
