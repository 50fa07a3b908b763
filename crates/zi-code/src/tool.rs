//! The `code` tool (docs/code-mode.md): validates its arguments, runs the cell in a worker and
//! turns what happened into one tool result. Every `zi.<tool>()` of the cell is a nested call
//! through the session's own tool path ([`zi_agent::SessionHost::run_nested_tool`]), with the id
//! `<code call id>#<n>`.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use futures::future::BoxFuture;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use zi_agent::tool::{KEY_ORDER, parameters_schema};
use zi_agent::{
    ExecutionMode, GateObserver, RegisteredTool, SessionHost, ToolCallContext, ToolOutput,
    TypedTool,
};
use zi_config::approval::{Subject, SubjectKind};
use zi_protocol::message::{ContentBlock, ToolCall};

use crate::decl::{Decl, member, wrap};
use crate::host::{
    ApprovalClock, CallHandler, CellSpec, CellTool, NestedAnswer, NestedRequest, WorkerProgram,
    run_cell,
};
use crate::limits::{Limits, MAX_CODE_BYTES, MAX_DESCRIPTION_CHARS};
use crate::trace::Trace;

/// The tool's name.
pub const NAME: &str = "code";
/// Names a cell never reaches: `code` (no recursion) and `then` (`await zi` must not call a
/// tool).
const RESERVED: [&str; 2] = [NAME, "then"];
/// The declarations in the description stay under this; the rest are listed by name.
const DECLARATIONS_BUDGET: usize = 24 * 1024;

const PREAMBLE: &str = "Run JavaScript that calls zi's tools. Use it to chain many tool calls in one step (read several files, loop over results, reshape a large result) instead of calling the tools one by one.
`code` is the body of an async function: use `await` and `return` at the top level. Every tool below is `await zi.<tool>(input)` (or `zi[\"name\"](input)`); it resolves to the tool's text (or its structured value where a return type is declared) and a failure throws a `ZiToolError` (`e.toolName`, `e.message`) you can catch. Start independent calls together with `Promise.all`; await every call. `console.log` output is returned with the result. There is no require, import, fetch, process, file system or timers: only these tools. Limits: 64 calls, 120 s, 64 MiB per cell; return at most 1 MiB of JSON.";

/// How Code Mode runs here.
#[derive(Debug, Clone)]
pub struct CodeModeConfig {
    /// The limits of every cell.
    pub limits: Limits,
    /// `false` only with `codeModeSandbox: "engine-only"` where the worker cannot be confined.
    pub require_seccomp: bool,
    /// The executable that runs cells (zi itself).
    pub program: WorkerProgram,
}

/// The `code` tool (docs/code-mode.md): runs a JavaScript cell in a confined worker process,
/// whose `zi.<tool>()` calls go through the session's normal tool path.
pub struct CodeTool {
    config: CodeModeConfig,
    parameters: Value,
}

/// The arguments of `code`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CodeArgs {
    /// What the code does, in a few words (at most 160 characters)
    #[schemars(length(max = MAX_DESCRIPTION_CHARS))]
    pub description: Option<String>,
    /// The body of an async JavaScript function (top-level await and return)
    #[schemars(length(max = MAX_CODE_BYTES))]
    pub code: String,
}

impl CodeTool {
    /// The tool with its parameter schema and the description built for `config`.
    pub fn new(config: CodeModeConfig) -> CodeTool {
        let parameters = parameters_schema::<CodeArgs>(KEY_ORDER);
        CodeTool { config, parameters }
    }
}

/// The cell's tools: every reachable tool but the reserved names.
fn cell_tools(reachable: &[Arc<RegisteredTool>]) -> Vec<Arc<RegisteredTool>> {
    reachable
        .iter()
        .filter(|t| !RESERVED.contains(&t.tool.name()))
        .cloned()
        .collect()
}

impl TypedTool for CodeTool {
    type Args = CodeArgs;

    fn name(&self) -> &str {
        NAME
    }

    fn description(&self) -> &str {
        PREAMBLE
    }

    fn parameters(&self) -> &Value {
        &self.parameters
    }

    fn execution_mode(&self) -> ExecutionMode {
        ExecutionMode::Sequential
    }

    fn describe_with(&self, reachable: &[Arc<RegisteredTool>]) -> Option<String> {
        let mut members = String::new();
        let mut rest: Vec<String> = Vec::new();
        for tool in cell_tools(reachable) {
            let member = member(&Decl {
                name: tool.tool.name(),
                description: tool.tool.description(),
                input: tool.tool.parameters(),
                output: tool.tool.output_schema(),
            });
            if members.len() + member.len() > DECLARATIONS_BUDGET {
                rest.push(tool.tool.name().to_string());
            } else {
                members.push_str(&member);
            }
        }
        let mut description = format!("{PREAMBLE}\n\n```ts\n{}```", wrap(&members));
        if !rest.is_empty() {
            description.push_str(&format!(
                "\nAlso callable, each `(input: object): Promise<unknown>`: {}.",
                rest.join(", ")
            ));
        }
        Some(description)
    }

    /// Approved like a command (docs/code-mode.md#approvals-and-the-sandbox): asked under
    /// `accept-edits` and `untrusted`; each nested call is then gated on its own.
    fn approval_subject(&self, args: &CodeArgs) -> Result<Subject, ToolOutput> {
        let what = args
            .description
            .as_deref()
            .filter(|d| !d.trim().is_empty())
            .map_or_else(|| first_line(&args.code), str::to_string);
        Ok(Subject {
            kind: SubjectKind::Exec,
            summary: format!("Run code: {what}"),
            command: None,
            paths: Vec::new(),
            preview: None,
            background: false,
        })
    }

    fn execute(&self, args: CodeArgs, call: ToolCallContext) -> BoxFuture<'static, ToolOutput> {
        let config = self.config.clone();
        Box::pin(async move { run(config, args.code, call).await })
    }
}

fn first_line(code: &str) -> String {
    let line = code
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or_default()
        .trim();
    line.chars().take(120).collect()
}

async fn run(config: CodeModeConfig, code: String, call: ToolCallContext) -> ToolOutput {
    if code.len() as u64 > MAX_CODE_BYTES {
        return ToolOutput::error(format!(
            "The code is {} bytes; at most {MAX_CODE_BYTES} bytes (256 KiB) run as one cell.",
            code.len()
        ));
    }
    let tools = cell_tools(&call.host.reachable_tools());
    let spec = CellSpec {
        code,
        tools: tools
            .iter()
            .map(|t| CellTool {
                name: t.tool.name().to_string(),
                parallel: t.tool.execution_mode() == ExecutionMode::Parallel,
            })
            .collect(),
        limits: config.limits,
        require_seccomp: config.require_seccomp,
    };
    let handler = Arc::new(SessionCalls {
        host: call.host.clone(),
        parent: call.call_id.clone(),
        tools: tools
            .iter()
            .map(|t| (t.tool.name().to_string(), t.clone()))
            .collect(),
    });
    let started = Instant::now();
    // Coalesced to one update per 50 ms; the newest is never dropped.
    let (progress, forwarder) = zi_agent::tool::progress::channel(call.progress.clone());
    let outcome = forwarder
        .run(run_cell(
            &config.program,
            spec,
            handler,
            &call.cancel,
            &|trace| progress.report(running_update(trace)),
        ))
        .await;
    let text = crate::text::model_text(&outcome.trace, &outcome.result);
    let mut details = outcome.trace.details(outcome.outcome());
    details["sandbox"] =
        json!({"enforcement": outcome.enforcement, "landlockAbi": outcome.landlock_abi});
    details["durationMs"] = json!(started.elapsed().as_millis() as u64);
    if let Err(error) = &outcome.result {
        let mut shown = json!({"kind": error.kind, "message": error.message});
        if let Some(name) = &error.name {
            shown["name"] = json!(name);
        }
        if let Some(tool) = &error.tool_name {
            shown["toolName"] = json!(tool);
        }
        details["error"] = shown;
    }
    ToolOutput {
        content: vec![ContentBlock::text(text)],
        details: Some(details),
        is_error: outcome.result.is_err(),
    }
}

/// The progress update (`tool_execution_update`) that shows `trace` while the cell runs.
fn running_update(trace: &Trace) -> Value {
    let (ok, failed) = trace.counts();
    let running = trace.calls.len() - ok - failed;
    json!({
        "content": [{"type": "text", "text": format!("[calls: {ok} ok, {failed} error, {running} running]")}],
        "details": trace.details("running"),
    })
}

/// Nested calls through the session's tool path.
struct SessionCalls {
    host: SessionHost,
    parent: String,
    tools: HashMap<String, Arc<RegisteredTool>>,
}

impl CallHandler for SessionCalls {
    fn call(
        &self,
        request: NestedRequest,
        cancel: CancellationToken,
        clock: ApprovalClock,
    ) -> BoxFuture<'static, NestedAnswer> {
        let host = self.host.clone();
        let tool = self.tools.get(&request.name).cloned();
        let call = ToolCall {
            id: format!("{}#{}", self.parent, request.id),
            name: request.name,
            arguments: request.input,
            thought_signature: None,
        };
        let gate: GateObserver = Arc::new(move |entered| clock.gate(entered));
        Box::pin(async move {
            let output = host.run_nested_tool(&call, &cancel, &gate).await;
            answer(tool.as_deref(), &output, cancel.is_cancelled())
        })
    }
}

/// What the cell receives: the structured value of a tool with an output schema, else the
/// text; a failure's text and `code`.
fn answer(tool: Option<&RegisteredTool>, output: &ToolOutput, cancelled: bool) -> NestedAnswer {
    let text: String = output
        .content
        .iter()
        .filter_map(|block| match block {
            ContentBlock::Text { text, .. } => Some(text.as_str()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n");
    if output.is_error {
        if cancelled {
            return NestedAnswer::Interrupted;
        }
        let details = output
            .details
            .as_ref()
            .and_then(|d| d.get("code"))
            .map(|code| json!({"code": code}));
        return NestedAnswer::Error {
            message: text,
            details,
        };
    }
    let structured = tool
        .filter(|t| t.tool.output_schema().is_some())
        .and_then(|t| t.tool.structured_value(output));
    NestedAnswer::Ok(Some(structured.unwrap_or(Value::String(text))))
}
