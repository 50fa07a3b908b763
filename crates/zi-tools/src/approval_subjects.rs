//! What the approval gate sees of each built-in tool's call (docs/approvals.md#the-request): the
//! summary, canonical paths and a preview from a dry run. A failing dry run (`match_missing`,
//! …) is returned without asking.

use std::path::PathBuf;

use serde_json::{Value, json};
use zi_agent::ToolOutput;
use zi_config::approval::{PathBase, Subject, paths};

use crate::bash::BashArgs;
use crate::edit::{EditArgs, describe_diff, plan_edit};
use crate::read::ReadArgs;
use crate::truncate::{MAX_BYTES, MAX_LINES, head};
use crate::write::WriteArgs;
use crate::{ToolEnv, check_path};

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

pub(crate) fn bash(args: &BashArgs) -> Result<Subject, ToolOutput> {
    Ok(Subject::exec(&args.command, args.background == Some(true)))
}

pub(crate) fn read(env: &ToolEnv, args: &ReadArgs) -> Result<Subject, ToolOutput> {
    Ok(Subject::read(canonical(env, &args.path)))
}

pub(crate) fn edit(env: &ToolEnv, args: &EditArgs) -> Result<Subject, ToolOutput> {
    let EditArgs { path: shown, edits } = args;
    check_path(shown)?;
    let path = env.resolve(shown);
    let plan = match plan_edit(&path, shown, edits) {
        Ok(plan) => plan,
        // A client holds the files (ACP): its buffer may differ from the disk and the edit
        // itself reads the buffer, so a dry run on the disk decides nothing.
        Err(_) if env.files.is_client() => {
            let summary = format!("Edit {shown}: {} block(s)", edits.len());
            return Ok(Subject::file_change(canonical(env, shown), summary, None));
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
        canonical(env, shown),
        summary,
        Some(diff_preview(&plan.diff)),
    ))
}

pub(crate) fn write(env: &ToolEnv, args: &WriteArgs) -> Result<Subject, ToolOutput> {
    let shown = args.path.as_str();
    check_path(shown)?;
    let content = args.content.as_str();
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
