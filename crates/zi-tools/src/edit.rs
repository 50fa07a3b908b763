//! `edit` (docs/tools.md#edit): exact, unique, non-overlapping replacements matched
//! against the original file. CRLF files are matched with LF and written back with CRLF; a BOM
//! is kept. `details` carry a unified diff.

use std::sync::LazyLock;

use futures::future::BoxFuture;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use similar::{ChangeTag, TextDiff};
use zi_agent::tool::{KEY_ORDER, parameters_schema, undescribed};
use zi_agent::{ToolCallContext, ToolOutput, TypedTool};
use zi_config::approval::{Escape, Subject};

use crate::files::{check_regular_file, io_code, lock_file};
use crate::sandboxing::FileChangeCheck;
use crate::truncate::{MAX_BYTES, MAX_LINES, elide_long_lines, head};
use crate::{ToolEnv, check_path};

pub const MAX_EDITS: usize = 64;
/// Largest total arguments (8 MiB).
pub const MAX_EDIT_ARGUMENT_BYTES: usize = 8 * 1024 * 1024;
/// Diff lines longer than this are elided.
const MAX_DIFF_LINE: usize = 512;
const BOM: &str = "\u{feff}";

static PARAMETERS: LazyLock<Value> = LazyLock::new(|| parameters_schema::<EditArgs>(KEY_ORDER));

/// The arguments of `edit`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EditArgs {
    /// Path of the file to edit (relative or absolute)
    pub path: String,
    /// Replacements; each oldText must match exactly once in the original file and edits must
    /// not overlap
    #[schemars(length(min = 1, max = MAX_EDITS))]
    pub edits: Vec<Replacement>,
}

/// One replacement of an `edit` call.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
#[schemars(transform = undescribed)]
pub struct Replacement {
    /// Exact text to find
    pub old_text: String,
    /// Replacement text
    pub new_text: String,
}

/// The `edit` tool (docs/tools.md#edit).
pub struct EditTool {
    env: ToolEnv,
}

impl EditTool {
    /// `edit` in `env`.
    pub fn new(env: ToolEnv) -> Self {
        EditTool { env }
    }
}

impl TypedTool for EditTool {
    type Args = EditArgs;

    fn name(&self) -> &str {
        "edit"
    }

    fn description(&self) -> &str {
        "Edit a file by replacing exact text. Each oldText must appear exactly once in the file; several non-overlapping edits can be applied at once."
    }

    fn parameters(&self) -> &Value {
        &PARAMETERS
    }

    fn approval_escape(&self, args: &EditArgs, _subject: &Subject) -> Option<Escape> {
        crate::sandboxing::file_escape(&self.env, &args.path)
    }

    fn escape_denied(&self, escape: &Escape) -> ToolOutput {
        crate::sandboxing::file_escape_denied(&self.env, escape)
    }

    fn approval_subject(&self, args: &EditArgs) -> Result<Subject, ToolOutput> {
        crate::approval_subjects::edit(&self.env, args)
    }

    fn execute(&self, args: EditArgs, call: ToolCallContext) -> BoxFuture<'static, ToolOutput> {
        let env = self.env.clone();
        Box::pin(async move {
            // The bound is on the arguments as the model sent them.
            let size = serde_json::to_vec(&call.raw_arguments).map_or(usize::MAX, |v| v.len());
            if size > MAX_EDIT_ARGUMENT_BYTES {
                return ToolOutput::failure(
                    "too_large",
                    format!(
                        "Edit arguments too large: {size} bytes (limit {MAX_EDIT_ARGUMENT_BYTES} bytes)"
                    ),
                );
            }
            let EditArgs { path: shown, edits } = args;
            if let Err(output) = check_path(&shown) {
                return output;
            }
            let path = env.resolve(&shown);
            let check = match FileChangeCheck::before(
                env.sandbox.get(),
                &path,
                call.host.escape_approved(&call.call_id),
            ) {
                Ok(check) => check,
                Err(output) => return output,
            };
            let _guard = lock_file(&path).await;
            if env.files.is_client() {
                return edit_with_client(&env, &path, &shown, &edits, &check, &call.cancel).await;
            }
            tokio::task::spawn_blocking(move || edit_file(&path, &shown, &edits, &check))
                .await
                .unwrap_or_else(|e| ToolOutput::failure("unwritable", format!("Edit failed: {e}")))
        })
    }
}

/// An edit computed against the current file: the bytes to write and the diff details.
pub(crate) struct PlannedEdit {
    pub written: String,
    pub diff: Value,
}

/// Reads the file and applies the edits in memory (the approval dry run and the edit itself).
pub(crate) fn plan_edit(
    path: &std::path::Path,
    shown: &str,
    edits: &[Replacement],
) -> Result<PlannedEdit, ToolOutput> {
    check_edit_count(edits)?;
    let original = read_original(path, shown)?;
    plan_text(&original, shown, edits)
}

fn check_edit_count(edits: &[Replacement]) -> Result<(), ToolOutput> {
    if edits.is_empty() || edits.len() > MAX_EDITS {
        return Err(ToolOutput::failure(
            "invalid_edit",
            format!("Provide 1 to {MAX_EDITS} edits"),
        ));
    }
    Ok(())
}

/// The file's text from the disk (a regular file within the size bound, UTF-8).
fn read_original(path: &std::path::Path, shown: &str) -> Result<String, ToolOutput> {
    if let Err((code, text)) = check_regular_file(path, shown) {
        return Err(ToolOutput::failure(code, text));
    }
    let bytes = std::fs::read(path).map_err(|error| {
        ToolOutput::failure(
            io_code(&error, "unreadable"),
            format!("Cannot read {shown}: {error}"),
        )
    })?;
    String::from_utf8(bytes).map_err(|_| {
        ToolOutput::failure(
            "unreadable",
            format!("Cannot edit {shown}: it is not UTF-8 text"),
        )
    })
}

/// The edits applied to `original` in memory (a BOM and CRLF line ends are kept).
fn plan_text(
    original: &str,
    shown: &str,
    edits: &[Replacement],
) -> Result<PlannedEdit, ToolOutput> {
    check_edit_count(edits)?;
    let (bom, body) = match original.strip_prefix(BOM) {
        Some(body) => (BOM, body),
        None => ("", original),
    };
    let crlf = body.contains("\r\n");
    let normalized = if crlf {
        body.replace("\r\n", "\n")
    } else {
        body.to_string()
    };
    let updated = apply_edits(&normalized, edits, shown)?;
    let mut written = String::with_capacity(updated.len() + bom.len());
    written.push_str(bom);
    if crlf {
        written.push_str(&updated.replace('\n', "\r\n"));
    } else {
        written.push_str(&updated);
    }
    Ok(PlannedEdit {
        written,
        diff: describe_diff(&normalized, &updated, shown),
    })
}

fn edit_file(
    path: &std::path::Path,
    shown: &str,
    edits: &[Replacement],
    check: &FileChangeCheck,
) -> ToolOutput {
    let plan = match plan_edit(path, shown, edits) {
        Ok(plan) => plan,
        Err(output) => return output,
    };
    if let Err(output) = check.again(path) {
        return output;
    }
    if let Err(output) = write_disk(path, shown, &plan.written) {
        return output;
    }
    edited(shown, edits, plan)
}

fn write_disk(path: &std::path::Path, shown: &str, text: &str) -> Result<(), ToolOutput> {
    std::fs::write(path, text.as_bytes()).map_err(|error| {
        let code = match io_code(&error, "unwritable") {
            "not_found" => "unwritable",
            code => code,
        };
        ToolOutput::failure(code, format!("Cannot write {shown}: {error}"))
    })
}

fn edited(shown: &str, edits: &[Replacement], plan: PlannedEdit) -> ToolOutput {
    ToolOutput::success(
        format!("Successfully replaced {} block(s) in {shown}", edits.len()),
        plan.diff,
    )
}

/// The edit when a client holds the files (ACP): the text comes from the client when it reads
/// (its unsaved buffer) and goes back through it when it writes (its editor shows the change);
/// each side the client does not take uses the disk. zi's own checks run as on the disk.
async fn edit_with_client(
    env: &ToolEnv,
    path: &std::path::Path,
    shown: &str,
    edits: &[Replacement],
    check: &FileChangeCheck,
    cancel: &tokio_util::sync::CancellationToken,
) -> ToolOutput {
    let original = match env.files.read(path, cancel) {
        Some(read) => {
            if let Err((code, text)) = check_regular_file(path, shown) {
                return ToolOutput::failure(code, text);
            }
            match read.await {
                Ok(text) => text,
                Err(message) => {
                    return ToolOutput::failure(
                        "unreadable",
                        format!("Cannot read {shown}: {message}"),
                    );
                }
            }
        }
        None => match read_original(path, shown) {
            Ok(text) => text,
            Err(output) => return output,
        },
    };
    let plan = match plan_text(&original, shown, edits) {
        Ok(plan) => plan,
        Err(output) => return output,
    };
    if let Err(output) = check.again(path) {
        return output;
    }
    match env.files.write(path, &plan.written, cancel) {
        Some(written) => {
            if let Err(message) = written.await {
                return ToolOutput::failure(
                    "unwritable",
                    format!("Cannot write {shown}: {message}"),
                );
            }
        }
        None => {
            if let Err(output) = write_disk(path, shown, &plan.written) {
                return output;
            }
        }
    }
    edited(shown, edits, plan)
}

/// All positions of `needle` in `haystack`, overlapping ones included.
fn occurrences(haystack: &str, needle: &str) -> Vec<usize> {
    let mut found = Vec::new();
    let mut from = 0;
    while let Some(at) = haystack[from..].find(needle) {
        found.push(from + at);
        from += at
            + haystack[from + at..]
                .chars()
                .next()
                .map_or(1, char::len_utf8);
        if from > haystack.len() || found.len() > 1 {
            break;
        }
    }
    found
}

/// Matches every edit against `text` and applies them; errors carry the edit's code.
pub(crate) fn apply_edits(
    text: &str,
    edits: &[Replacement],
    shown: &str,
) -> Result<String, ToolOutput> {
    let single = edits.len() == 1;
    let mut ranges: Vec<(usize, usize, usize)> = Vec::with_capacity(edits.len());
    for (index, edit) in edits.iter().enumerate() {
        let old = edit.old_text.replace("\r\n", "\n");
        let which = if single {
            "the text".to_string()
        } else {
            format!("edits[{index}].oldText")
        };
        if old.is_empty() {
            return Err(ToolOutput::failure(
                "invalid_edit",
                format!("Invalid edit: {which} must not be empty"),
            ));
        }
        let found = occurrences(text, &old);
        match found.as_slice() {
            [] => {
                return Err(ToolOutput::failure(
                    "match_missing",
                    format!(
                        "Could not find {which} in {shown}. The old text must match exactly, including all whitespace and newlines."
                    ),
                ));
            }
            [at] => ranges.push((*at, at + old.len(), index)),
            _ => {
                return Err(ToolOutput::failure(
                    "match_ambiguous",
                    format!(
                        "Found multiple occurrences of {which} in {shown}. The text must be unique; add surrounding context to make it unique."
                    ),
                ));
            }
        }
    }
    ranges.sort_unstable();
    for pair in ranges.windows(2) {
        if pair[0].1 > pair[1].0 {
            let (a, b) = (pair[0].2.min(pair[1].2), pair[0].2.max(pair[1].2));
            return Err(ToolOutput::failure(
                "overlap",
                format!("edits[{a}] and edits[{b}] overlap in {shown}. Merge them into one edit."),
            ));
        }
    }
    let mut updated = String::with_capacity(text.len());
    let mut cursor = 0;
    for (start, end, index) in &ranges {
        updated.push_str(&text[cursor..*start]);
        updated.push_str(&edits[*index].new_text.replace("\r\n", "\n"));
        cursor = *end;
    }
    updated.push_str(&text[cursor..]);
    if updated == text {
        return Err(ToolOutput::failure(
            "no_change",
            format!("No changes made to {shown}: the replacements produce identical content."),
        ));
    }
    Ok(updated)
}

/// `{diff, additions, deletions, firstChangedLine, diffTruncated}`.
pub(crate) fn describe_diff(old: &str, new: &str, shown: &str) -> Value {
    let diff = TextDiff::from_lines(old, new);
    let mut additions = 0;
    let mut deletions = 0;
    let mut first_changed: Option<usize> = None;
    for change in diff.iter_all_changes() {
        match change.tag() {
            ChangeTag::Insert => additions += 1,
            ChangeTag::Delete => deletions += 1,
            ChangeTag::Equal => continue,
        }
        if first_changed.is_none() {
            first_changed = change.new_index().or(change.old_index()).map(|i| i + 1);
        }
    }
    let unified = diff
        .unified_diff()
        .context_radius(3)
        .header(&format!("a/{shown}"), &format!("b/{shown}"))
        .to_string();
    let elided = elide_long_lines(&unified, MAX_DIFF_LINE);
    let (kept, truncated) = head(&elided, MAX_LINES, MAX_BYTES);
    json!({
        "diff": kept,
        "diffTruncated": truncated,
        "additions": additions,
        "deletions": deletions,
        "firstChangedLine": first_changed,
    })
}
