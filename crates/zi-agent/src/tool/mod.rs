//! Tools: what the model can call (docs/tools.md describes zi's own).
//!
//! A tool is written as a [`TypedTool`]. Its arguments are a type that derives `Deserialize`
//! and `JsonSchema`; its parameter schema is derived from that type ([`parameters_schema`],
//! each field's doc comment its description). For every call the session validates the
//! model's arguments against the schema, parses them once into that type ([`Tool::prepare`]),
//! and hands the typed value to the approval gate ([`TypedTool::approval_subject`],
//! [`TypedTool::approval_escape`]) and to [`TypedTool::execute`]. A blanket adapter makes every
//! typed tool a [`Tool`], the object-safe form a [`ToolSet`] holds. Tools whose schemas come
//! from outside zi (Lua extensions, MCP servers' direct tools) take `Args = serde_json::Value`.
//!
//! Results follow one convention ([`ToolOutput::success`], [`ToolOutput::failure`]):
//! `details.outcome` says how the call ended and a failure's `code` says why.

mod output;
pub mod progress;
mod schema;
mod set;

use std::sync::Arc;

use futures::future::BoxFuture;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use tokio_util::sync::CancellationToken;
use zi_config::approval::{Escape, Subject};

pub use output::{Outcome, ToolOutput};
pub use schema::{KEY_ORDER, parameters_schema, undescribed, whole_number};
pub use set::{RegisteredTool, ToolError, ToolSet, ToolSource, schema_problems};

/// How a tool may run next to others in the same batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExecutionMode {
    /// Runs at the same time as the batch's other parallel calls.
    Parallel,
    /// Forces the whole batch to run one call at a time.
    Sequential,
}

/// Reports partial results while a tool runs (`tool_execution_update`).
pub type ProgressSink = Arc<dyn Fn(Value) + Send + Sync>;

/// Everything a call receives besides its typed arguments.
pub struct ToolCallContext {
    /// The call's id (the model's, or `<code call>#<n>` for a Code Mode cell's call).
    pub call_id: String,
    /// The arguments exactly as the model sent them. A tool reads its typed arguments; this is
    /// for showing the call to a person again (an escalation's approval request).
    pub raw_arguments: Value,
    /// Fires on interruption; a tool must stop promptly and clean up (kill children).
    pub cancel: CancellationToken,
    /// Where partial results go while the call runs.
    pub progress: ProgressSink,
    /// The session running the call (work plans, outcomes, task events).
    pub host: crate::session::host::SessionHost,
}

/// A tool as a [`ToolSet`] holds it: object-safe, its arguments still JSON until
/// [`Tool::prepare`]. Implement [`TypedTool`] instead; the blanket adapter provides this.
pub trait Tool: Send + Sync {
    /// The name the model calls it by, unique in a tool set.
    fn name(&self) -> &str;
    /// What the model reads about the tool (the request's `tools`, the system prompt).
    fn description(&self) -> &str;
    /// JSON Schema of the arguments, as offered to the model and validated before a call.
    fn parameters(&self) -> &Value;
    /// Whether it may run next to other calls of the same batch.
    fn execution_mode(&self) -> ExecutionMode;
    /// Whether the model sees the tool before anything changes the active set.
    fn active_by_default(&self) -> bool;
    /// Parses a call's validated arguments (the one parse of the call): the call to make, or
    /// the failed result when they do not fit the argument type.
    fn prepare(self: Arc<Self>, arguments: &Value) -> Result<Box<dyn PreparedCall>, ToolOutput>;
    /// Parses `call.raw_arguments` and runs the call, without the session's schema validation
    /// and approval gate: one tool exercised on its own (tests, benchmarks).
    fn execute_json(&self, call: ToolCallContext) -> BoxFuture<'static, ToolOutput>;
    /// The result of an escape refused without asking (policy `never`).
    fn escape_denied(&self, escape: &Escape) -> ToolOutput;
    /// Called once when the session is disposed (see [`TypedTool::shutdown`]).
    fn shutdown(&self) -> BoxFuture<'static, ()>;
    /// JSON Schema of the structured value a call returns (see [`TypedTool::output_schema`]).
    fn output_schema(&self) -> Option<&Value>;
    /// The structured value of a successful result, for a tool with an output schema.
    fn structured_value(&self, output: &ToolOutput) -> Option<Value>;
    /// For the nesting tool: its description given the tools it reaches (see
    /// [`TypedTool::describe_with`]).
    fn describe_with(&self, reachable: &[Arc<RegisteredTool>]) -> Option<String>;
}

/// One call with its arguments parsed: what the approval gate asks about and then runs.
pub trait PreparedCall: Send + Sync {
    /// The call as the approval gate sees it (see [`TypedTool::approval_subject`]).
    fn approval_subject(&self) -> Result<Subject, ToolOutput>;
    /// The sandbox's finding for the call (see [`TypedTool::approval_escape`]).
    fn approval_escape(&self, subject: &Subject) -> Option<Escape>;
    /// Runs the call.
    fn execute(self: Box<Self>, call: ToolCallContext) -> BoxFuture<'static, ToolOutput>;
}

/// A tool with typed arguments. Every [`TypedTool`] is a [`Tool`].
pub trait TypedTool: Send + Sync + 'static {
    /// The arguments, parsed once per call from JSON already validated against
    /// [`TypedTool::parameters`]; usually the type the schema is derived from.
    type Args: DeserializeOwned + Send + Sync + 'static;
    /// The name the model calls it by, unique in a tool set.
    fn name(&self) -> &str;
    /// What the model reads about the tool (the request's `tools`, the system prompt).
    fn description(&self) -> &str;
    /// JSON Schema of the arguments: [`parameters_schema`] of `Args`, built once.
    fn parameters(&self) -> &Value;
    /// Whether it may run next to other calls of the same batch; parallel by default.
    fn execution_mode(&self) -> ExecutionMode {
        ExecutionMode::Parallel
    }
    /// Whether the model sees the tool before anything changes the active set.
    fn active_by_default(&self) -> bool {
        true
    }
    /// The call as the approval gate sees it (docs/approvals.md#the-request): kind, summary, paths,
    /// preview. `Err` is a failing dry run, returned without asking. Called only when approvals
    /// are configured, after validation, and again before an approved file change runs (a
    /// different preview is stale).
    fn approval_subject(&self, _args: &Self::Args) -> Result<Subject, ToolOutput> {
        Ok(Subject::tool(self.name()))
    }
    /// The sandbox's finding for this call (see [`zi_config::approval`]); none by default.
    fn approval_escape(&self, _args: &Self::Args, _subject: &Subject) -> Option<Escape> {
        None
    }
    /// The result of an escape refused without asking (policy `never`).
    fn escape_denied(&self, escape: &Escape) -> ToolOutput {
        crate::approval_texts::approval_required(&escape.reason(), true)
    }
    /// Runs one call. Failures are results ([`ToolOutput::failure`]), never panics.
    fn execute(&self, args: Self::Args, call: ToolCallContext) -> BoxFuture<'static, ToolOutput>;
    /// Called once when the session is disposed: stop everything the tool still runs (background
    /// tasks). The session is still usable (outcomes can be appended) until this resolves.
    fn shutdown(&self) -> BoxFuture<'static, ()> {
        Box::pin(async {})
    }
    /// JSON Schema of the structured value a call returns ([`TypedTool::structured_value`]);
    /// Code Mode cells then receive that value instead of the text (docs/code-mode.md).
    fn output_schema(&self) -> Option<&Value> {
        None
    }
    /// The structured value of a successful result, for a tool with an output schema.
    fn structured_value(&self, _output: &ToolOutput) -> Option<Value> {
        None
    }
    /// For the tool that calls the others (Code Mode's `code`, see
    /// [`ToolSet::set_nesting_tool`]): its description given the tools its calls reach, in
    /// offer order. `None` keeps [`TypedTool::description`].
    fn describe_with(&self, _reachable: &[Arc<RegisteredTool>]) -> Option<String> {
        None
    }
}

/// A typed tool's call: the tool and the arguments parsed for it.
struct Prepared<T: TypedTool> {
    tool: Arc<T>,
    args: T::Args,
}

impl<T: TypedTool> PreparedCall for Prepared<T> {
    fn approval_subject(&self) -> Result<Subject, ToolOutput> {
        self.tool.approval_subject(&self.args)
    }

    fn approval_escape(&self, subject: &Subject) -> Option<Escape> {
        self.tool.approval_escape(&self.args, subject)
    }

    fn execute(self: Box<Self>, call: ToolCallContext) -> BoxFuture<'static, ToolOutput> {
        let Prepared { tool, args } = *self;
        tool.execute(args, call)
    }
}

/// The one parse of a call's arguments into the tool's type.
fn parse_arguments<T: TypedTool>(tool: &T, arguments: &Value) -> Result<T::Args, ToolOutput> {
    T::Args::deserialize(arguments).map_err(|error| {
        // The schema promised what the type refuses: reported like a schema violation.
        ToolOutput::error(
            ToolError::InvalidArguments {
                name: TypedTool::name(tool).to_string(),
                problems: format!("  - {error}"),
            }
            .to_string(),
        )
    })
}

impl<T: TypedTool> Tool for T {
    fn name(&self) -> &str {
        TypedTool::name(self)
    }

    fn description(&self) -> &str {
        TypedTool::description(self)
    }

    fn parameters(&self) -> &Value {
        TypedTool::parameters(self)
    }

    fn execution_mode(&self) -> ExecutionMode {
        TypedTool::execution_mode(self)
    }

    fn active_by_default(&self) -> bool {
        TypedTool::active_by_default(self)
    }

    fn prepare(self: Arc<Self>, arguments: &Value) -> Result<Box<dyn PreparedCall>, ToolOutput> {
        let args = parse_arguments(&*self, arguments)?;
        Ok(Box::new(Prepared { tool: self, args }))
    }

    fn execute_json(&self, call: ToolCallContext) -> BoxFuture<'static, ToolOutput> {
        match parse_arguments(self, &call.raw_arguments) {
            Ok(args) => TypedTool::execute(self, args, call),
            Err(refused) => Box::pin(async move { refused }),
        }
    }

    fn escape_denied(&self, escape: &Escape) -> ToolOutput {
        TypedTool::escape_denied(self, escape)
    }

    fn shutdown(&self) -> BoxFuture<'static, ()> {
        TypedTool::shutdown(self)
    }

    fn output_schema(&self) -> Option<&Value> {
        TypedTool::output_schema(self)
    }

    fn structured_value(&self, output: &ToolOutput) -> Option<Value> {
        TypedTool::structured_value(self, output)
    }

    fn describe_with(&self, reachable: &[Arc<RegisteredTool>]) -> Option<String> {
        TypedTool::describe_with(self, reachable)
    }
}
