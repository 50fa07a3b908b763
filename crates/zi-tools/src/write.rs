//! `write` (docs/tools.md#write): creates parent directories and overwrites the file;
//! writes to one file are serialised with `edit`'s through the per-file queue.

use std::sync::LazyLock;

use futures::future::BoxFuture;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use zi_agent::tool::{KEY_ORDER, parameters_schema};
use zi_agent::{ToolCallContext, ToolOutput, TypedTool};
use zi_config::approval::{Escape, Subject};

use crate::files::{io_code, lock_file};
use crate::sandboxing::FileChangeCheck;
use crate::{ToolEnv, check_path};

/// Largest `content` accepted (8 MiB).
pub const MAX_WRITE_BYTES: usize = 8 * 1024 * 1024;

static PARAMETERS: LazyLock<Value> = LazyLock::new(|| parameters_schema::<WriteArgs>(KEY_ORDER));

/// The arguments of `write`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WriteArgs {
    /// Path of the file to write (relative or absolute)
    pub path: String,
    /// The complete new content of the file
    pub content: String,
}

/// The `write` tool (docs/tools.md#write).
pub struct WriteTool {
    env: ToolEnv,
}

impl WriteTool {
    /// `write` in `env`.
    pub fn new(env: ToolEnv) -> Self {
        WriteTool { env }
    }
}

impl TypedTool for WriteTool {
    type Args = WriteArgs;

    fn name(&self) -> &str {
        "write"
    }

    fn description(&self) -> &str {
        "Write content to a file, creating it and its parent directories if needed and overwriting it if it exists."
    }

    fn parameters(&self) -> &Value {
        &PARAMETERS
    }

    fn approval_escape(&self, args: &WriteArgs, _subject: &Subject) -> Option<Escape> {
        crate::sandboxing::file_escape(&self.env, &args.path)
    }

    fn escape_denied(&self, escape: &Escape) -> ToolOutput {
        crate::sandboxing::file_escape_denied(&self.env, escape)
    }

    fn approval_subject(&self, args: &WriteArgs) -> Result<Subject, ToolOutput> {
        crate::approval_subjects::write(&self.env, args)
    }

    fn execute(&self, args: WriteArgs, call: ToolCallContext) -> BoxFuture<'static, ToolOutput> {
        let env = self.env.clone();
        Box::pin(async move {
            let WriteArgs {
                path: shown,
                content,
            } = args;
            let content = content.as_str();
            if let Err(output) = check_path(&shown) {
                return output;
            }
            if content.len() > MAX_WRITE_BYTES {
                return ToolOutput::failure(
                    "too_large",
                    format!(
                        "Content too large: {} bytes (limit {MAX_WRITE_BYTES} bytes)",
                        content.len()
                    ),
                );
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
            if path.is_dir() {
                return ToolOutput::failure("not_file", format!("Not a regular file: {shown}"));
            }
            if let Some(parent) = path.parent()
                && let Err(error) = tokio::fs::create_dir_all(parent).await
            {
                let code = match io_code(&error, "unwritable") {
                    "not_found" | "not_file" => "unwritable",
                    code => code,
                };
                return ToolOutput::failure(
                    code,
                    format!("Cannot create the parent directory of {shown}: {error}"),
                );
            }
            if let Err(output) = check.again(&path) {
                return output;
            }
            // A client that holds the file (ACP) writes it, so its editor shows the change.
            if let Some(written) = env.files.write(&path, content, &call.cancel) {
                if let Err(message) = written.await {
                    return ToolOutput::failure(
                        "unwritable",
                        format!("Cannot write {shown}: {message}"),
                    );
                }
            } else if let Err(error) = tokio::fs::write(&path, content.as_bytes()).await {
                let code = match io_code(&error, "unwritable") {
                    "not_found" => "unwritable",
                    code => code,
                };
                return ToolOutput::failure(code, format!("Cannot write {shown}: {error}"));
            }
            ToolOutput::success(
                format!("Successfully wrote {} bytes to {shown}", content.len()),
                json!({"path": path.display().to_string(), "bytes": content.len()}),
            )
        })
    }
}
