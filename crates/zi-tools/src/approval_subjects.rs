//! What the approval gate sees of each built-in tool's call (docs/approvals.md#the-request): the
//! summary, canonical paths and a preview from a dry run. A failing dry run (`match_missing`,
//! …) is returned without asking.

use std::path::PathBuf;

use serde_json::{Value, json};
use zi_agent::ToolOutput;
use zi_config::approval::{PathBase, Subject, paths};

use crate::edit::{describe_diff, edit_arguments, plan_edit};
use crate::truncate::{MAX_BYTES, MAX_LINES, head};
use crate::{ToolEnv, check_path, str_arg};

fn canonical(env: &ToolEnv, shown: &str) -> PathBuf {
    let base = PathBase {
        cwd: env.cwd.clone(),
        home: None,
    };
    paths::canonical(&base, &env.resolve(shown).to_string_lossy())
}

/// `{"type":"diff",…}` from `edit`'s diff details.
fn diff_preview(diff: &Value) -> Value {
    json!({
        "type": "diff",
        "text": diff["diff"],
        "truncated": diff["diffTruncated"],
        "additions": diff["additions"],
        "deletions": diff["deletions"],
    })
}

pub(crate) fn bash(args: &Value) -> Result<Subject, ToolOutput> {
    let background = args.get("background").and_then(Value::as_bool) == Some(true);
    Ok(Subject::exec(str_arg(args, "command"), background))
}

pub(crate) fn read(env: &ToolEnv, args: &Value) -> Result<Subject, ToolOutput> {
    Ok(Subject::read(canonical(env, str_arg(args, "path"))))
}

pub(crate) fn edit(env: &ToolEnv, args: &Value) -> Result<Subject, ToolOutput> {
    let (shown, edits) = edit_arguments(args);
    check_path(&shown)?;
    let path = env.resolve(&shown);
    let plan = match plan_edit(&path, &shown, &edits) {
        Ok(plan) => plan,
        // A client holds the files (ACP): its buffer may differ from the disk and the edit
        // itself reads the buffer, so a dry run on the disk decides nothing.
        Err(_) if env.files.is_client() => {
            let summary = format!("Edit {shown}: {} block(s)", edits.len());
            return Ok(Subject::file_change(canonical(env, &shown), summary, None));
        }
        Err(output) => return Err(output),
    };
    let summary = format!(
        "Edit {}: {} block(s), +{} -{} lines",
        shown,
        edits.len(),
        plan.diff["additions"],
        plan.diff["deletions"]
    );
    Ok(Subject::file_change(
        canonical(env, &shown),
        summary,
        Some(diff_preview(&plan.diff)),
    ))
}

pub(crate) fn write(env: &ToolEnv, args: &Value) -> Result<Subject, ToolOutput> {
    let shown = str_arg(args, "path");
    check_path(shown)?;
    let content = str_arg(args, "content");
    let path = env.resolve(shown);
    let existing = std::fs::read(&path).ok();
    let (summary, preview) = match existing {
        Some(bytes) => {
            let preview = String::from_utf8(bytes)
                .ok()
                .map(|old| diff_preview(&describe_diff(&old, content, shown)));
            (
                format!("Overwrite {shown} ({} bytes)", content.len()),
                preview,
            )
        }
        None => {
            let (text, truncated) = head(content, MAX_LINES, MAX_BYTES);
            let preview = json!({
                "type": "content",
                "text": text,
                "truncated": truncated,
                "bytes": content.len(),
            });
            (
                format!("Create {shown} ({} bytes)", content.len()),
                Some(preview),
            )
        }
    };
    Ok(Subject::file_change(
        canonical(env, shown),
        summary,
        preview,
    ))
}
