//! The `Tool` trait and argument validation (runtime-reference §15.1, §5.2).

use std::sync::{Arc, OnceLock, RwLock};

use futures::future::BoxFuture;
use serde_json::Value;
use tokio_util::sync::CancellationToken;
use zi_ai::ToolSpec;

use crate::approval::{Escape, Subject};
use zi_protocol::event::ToolResult;
use zi_protocol::message::ContentBlock;

/// A tool set that cannot be built, or arguments a tool refuses.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ToolError {
    #[error("Tool {name} has an invalid parameter schema: {problem}")]
    InvalidSchema { name: String, problem: String },
    #[error("Duplicate tool name: {0}")]
    DuplicateName(String),
    /// `set_active` named tools that are not registered (comma-separated).
    #[error("Unknown tools: {0}")]
    UnknownTools(String),
    /// The arguments break the schema; `problems` lists every violation, one per line.
    #[error("Validation failed for tool \"{name}\":\n{problems}")]
    InvalidArguments { name: String, problems: String },
}

/// How a tool may run next to others in the same batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExecutionMode {
    Parallel,
    /// Forces the whole batch to run one call at a time.
    Sequential,
}

/// What a tool returns: model-visible content, client-facing details, and whether it failed.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolOutput {
    pub content: Vec<ContentBlock>,
    pub details: Option<Value>,
    pub is_error: bool,
}

impl ToolOutput {
    pub fn text(text: impl Into<String>) -> Self {
        ToolOutput {
            content: vec![ContentBlock::text(text)],
            details: None,
            is_error: false,
        }
    }

    pub fn error(text: impl Into<String>) -> Self {
        ToolOutput {
            content: vec![ContentBlock::text(text)],
            details: None,
            is_error: true,
        }
    }

    pub fn to_result(&self) -> ToolResult {
        ToolResult {
            content: self.content.clone(),
            details: self.details.clone(),
        }
    }
}

/// Reports partial results while a tool runs (`tool_execution_update`).
pub type ProgressSink = Arc<dyn Fn(Value) + Send + Sync>;

/// Everything a tool call receives.
pub struct ToolCallContext {
    pub call_id: String,
    pub arguments: Value,
    /// Fires on interruption; a tool must stop promptly and clean up (kill children).
    pub cancel: CancellationToken,
    pub progress: ProgressSink,
    /// The session running the call (work plans, outcomes, task events).
    pub host: crate::session::host::SessionHost,
}

pub trait Tool: Send + Sync {
    fn name(&self) -> &str;
    fn description(&self) -> &str;
    /// JSON Schema of the arguments.
    fn parameters(&self) -> &Value;
    fn execution_mode(&self) -> ExecutionMode {
        ExecutionMode::Parallel
    }
    /// Whether the model sees the tool before anything changes the active set.
    fn active_by_default(&self) -> bool {
        true
    }
    fn execute(&self, call: ToolCallContext) -> BoxFuture<'static, ToolOutput>;
    /// The call as the approval gate sees it (approvals-reference §8): kind, summary, paths,
    /// preview. `Err` is a failing dry run, returned without asking. Called only when approvals
    /// are configured, after validation.
    fn approval_subject(&self, _arguments: &Value) -> Result<Subject, ToolOutput> {
        Ok(Subject::tool(self.name()))
    }
    /// The sandbox's finding for this call (see [`crate::approval`]); none by default.
    fn approval_escape(&self, _arguments: &Value, _subject: &Subject) -> Option<Escape> {
        None
    }
    /// The result of an escape refused without asking (policy `never`).
    fn escape_denied(&self, escape: &Escape) -> ToolOutput {
        crate::approval::texts::approval_required(&escape.reason(), true)
    }
    /// Called once when the session is disposed: stop everything the tool still runs (background
    /// tasks). The session is still usable (outcomes can be appended) until this resolves.
    fn shutdown(&self) -> BoxFuture<'static, ()> {
        Box::pin(async {})
    }
}

/// Every way `value` breaks the schema, one `  - /path: problem` line each (empty when valid).
pub fn schema_problems(validator: &jsonschema::Validator, value: &Value) -> Vec<String> {
    validator
        .iter_errors(value)
        .map(|error| {
            let path = error.instance_path.to_string();
            if path.is_empty() {
                format!("  - {error}")
            } else {
                format!("  - {path}: {error}")
            }
        })
        .collect()
}

/// A tool with its argument validator, compiled on first use: compiling JSON Schemas is the
/// costliest part of building the tool set, and start-up must stay in the low milliseconds.
pub struct RegisteredTool {
    pub tool: Arc<dyn Tool>,
    validator: OnceLock<Result<jsonschema::Validator, ToolError>>,
}

impl RegisteredTool {
    /// Registers a tool whose parameter schema is a JSON object (compiled on first call).
    pub fn new(tool: Arc<dyn Tool>) -> Result<Self, ToolError> {
        if !tool.parameters().is_object() {
            return Err(ToolError::InvalidSchema {
                name: tool.name().to_string(),
                problem: "it must be a JSON object".to_string(),
            });
        }
        Ok(RegisteredTool {
            tool,
            validator: OnceLock::new(),
        })
    }

    fn validator(&self) -> Result<&jsonschema::Validator, &ToolError> {
        self.validator
            .get_or_init(|| {
                jsonschema::validator_for(self.tool.parameters()).map_err(|error| {
                    ToolError::InvalidSchema {
                        name: self.tool.name().to_string(),
                        problem: error.to_string(),
                    }
                })
            })
            .as_ref()
    }

    /// Checks arguments against the schema; the error lists every violation.
    pub fn validate(&self, arguments: &Value) -> Result<(), ToolError> {
        let validator = self.validator().map_err(ToolError::clone)?;
        let problems = schema_problems(validator, arguments);
        if problems.is_empty() {
            Ok(())
        } else {
            Err(ToolError::InvalidArguments {
                name: self.tool.name().to_string(),
                problems: problems.join("\n"),
            })
        }
    }

    pub fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: self.tool.name().to_string(),
            description: self.tool.description().to_string(),
            parameters: self.tool.parameters().clone(),
        }
    }
}

/// Tools that appear after start-up (MCP servers connecting in the background): read on every
/// turn and call, so a source answers from a cheap snapshot. Source tools are always active and
/// a name already registered in the set hides a source tool of the same name.
pub trait ToolSource: Send + Sync {
    /// The source's tools now.
    fn tools(&self) -> Arc<[Arc<RegisteredTool>]>;
    /// Called once when the session is disposed, like [`Tool::shutdown`].
    fn shutdown(&self) -> BoxFuture<'static, ()>;
}

/// One registered tool and whether the model currently sees it.
struct Entry {
    registered: Arc<RegisteredTool>,
    active: bool,
}

/// Every tool of the session, whatever its origin (built-in, extension, MCP), in registration
/// order, with its activity. Only active tools are offered to the model and may be called;
/// the set can change between provider requests (`set_active`) and extension tools are
/// replaced on reload (`replace`), so the entries sit behind a lock that is never held across
/// an await.
#[derive(Default)]
pub struct ToolSet {
    entries: RwLock<Vec<Entry>>,
    sources: Vec<Arc<dyn ToolSource>>,
    /// Source tools (MCP) made dormant by `set_active`; a source tool is active otherwise, also
    /// one that appears later.
    dormant_source_tools: RwLock<Vec<String>>,
}

impl ToolSet {
    pub fn new(tools: Vec<Arc<dyn Tool>>) -> Result<Self, ToolError> {
        let mut entries: Vec<Entry> = Vec::with_capacity(tools.len());
        for tool in tools {
            if entries
                .iter()
                .any(|e| e.registered.tool.name() == tool.name())
            {
                return Err(ToolError::DuplicateName(tool.name().to_string()));
            }
            let active = tool.active_by_default();
            entries.push(Entry {
                registered: Arc::new(RegisteredTool::new(tool)?),
                active,
            });
        }
        Ok(ToolSet {
            entries: RwLock::new(entries),
            sources: Vec::new(),
            dormant_source_tools: RwLock::default(),
        })
    }

    /// Adds a source of tools that come and go while the session runs.
    pub fn add_source(&mut self, source: Arc<dyn ToolSource>) {
        self.sources.push(source);
    }

    /// A source's tool `name`, unless the set registers that name itself.
    fn source_tool(&self, name: &str) -> Option<Arc<RegisteredTool>> {
        if self.read().iter().any(|e| e.registered.tool.name() == name) {
            return None;
        }
        self.sources.iter().find_map(|source| {
            source
                .tools()
                .iter()
                .find(|t| t.tool.name() == name)
                .cloned()
        })
    }

    /// The sources' tools the set does not hide with a registered name, in source order.
    fn visible_source_tools(&self, entries: &[Entry]) -> Vec<Arc<RegisteredTool>> {
        let mut visible: Vec<Arc<RegisteredTool>> = Vec::new();
        for source in &self.sources {
            for tool in source.tools().iter() {
                let name = tool.tool.name();
                if !entries.iter().any(|e| e.registered.tool.name() == name)
                    && !visible.iter().any(|v| v.tool.name() == name)
                {
                    visible.push(tool.clone());
                }
            }
        }
        visible
    }

    fn source_tool_is_dormant(&self, name: &str) -> bool {
        self.dormant_source_tools
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .any(|n| n == name)
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Vec<Entry>> {
        self.entries.read().unwrap_or_else(|p| p.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Vec<Entry>> {
        self.entries.write().unwrap_or_else(|p| p.into_inner())
    }

    /// A registered tool, active or dormant.
    pub fn get(&self, name: &str) -> Option<Arc<RegisteredTool>> {
        let registered = self
            .read()
            .iter()
            .find(|e| e.registered.tool.name() == name)
            .map(|e| e.registered.clone());
        registered.or_else(|| self.source_tool(name))
    }

    /// A tool the model may call now.
    pub fn get_active(&self, name: &str) -> Option<Arc<RegisteredTool>> {
        let registered = self
            .read()
            .iter()
            .find(|e| e.active && e.registered.tool.name() == name)
            .map(|e| e.registered.clone());
        registered.or_else(|| {
            self.source_tool(name)
                .filter(|_| !self.source_tool_is_dormant(name))
        })
    }

    /// What the next provider request offers: the active tools, then the sources' tools.
    pub fn specs(&self) -> Vec<ToolSpec> {
        let entries = self.read();
        let mut specs: Vec<ToolSpec> = entries
            .iter()
            .filter(|e| e.active)
            .map(|e| e.registered.spec())
            .collect();
        for tool in self.visible_source_tools(&entries) {
            if !self.source_tool_is_dormant(tool.tool.name()) {
                specs.push(tool.spec());
            }
        }
        specs
    }

    /// Shuts every tool and source down, concurrently.
    pub async fn shutdown(&self) {
        let tools: Vec<Arc<RegisteredTool>> =
            self.read().iter().map(|e| e.registered.clone()).collect();
        let sources = self.sources.iter().map(|s| s.shutdown());
        futures::future::join_all(tools.iter().map(|t| t.tool.shutdown()).chain(sources)).await;
    }

    /// `(name, description)` of every tool the next request offers, in [`ToolSet::specs`]
    /// order, for the system prompt (which follows them, see `SystemPrompt::follow_tools`).
    pub fn descriptions(&self) -> Vec<(String, String)> {
        self.specs()
            .into_iter()
            .map(|spec| (spec.name, spec.description))
            .collect()
    }

    /// Every registered tool's name, active or not.
    pub fn names(&self) -> Vec<String> {
        self.read()
            .iter()
            .map(|e| e.registered.tool.name().to_string())
            .collect()
    }

    /// The active tools' names: registered ones in registration order, then the sources'.
    pub fn active_names(&self) -> Vec<String> {
        let entries = self.read();
        let mut names: Vec<String> = entries
            .iter()
            .filter(|e| e.active)
            .map(|e| e.registered.tool.name().to_string())
            .collect();
        for tool in self.visible_source_tools(&entries) {
            if !self.source_tool_is_dormant(tool.tool.name()) {
                names.push(tool.tool.name().to_string());
            }
        }
        names
    }

    /// Makes exactly `names` active. Unknown names refuse the whole change and are all named.
    pub fn set_active(&self, names: &[String]) -> Result<(), ToolError> {
        let mut entries = self.write();
        let source_names: Vec<String> = self
            .visible_source_tools(&entries)
            .iter()
            .map(|t| t.tool.name().to_string())
            .collect();
        let unknown: Vec<String> = names
            .iter()
            .filter(|name| {
                !entries.iter().any(|e| e.registered.tool.name() == *name)
                    && !source_names.contains(name)
            })
            .cloned()
            .collect();
        if !unknown.is_empty() {
            return Err(ToolError::UnknownTools(unknown.join(", ")));
        }
        for entry in entries.iter_mut() {
            entry.active = names.iter().any(|n| n == entry.registered.tool.name());
        }
        *self
            .dormant_source_tools
            .write()
            .unwrap_or_else(|p| p.into_inner()) = source_names
            .into_iter()
            .filter(|n| !names.contains(n))
            .collect();
        Ok(())
    }

    /// Replaces the tools named `remove` with `add` (an extension reload) and restores every
    /// tool's default activity. Nothing changes when `add` collides with a kept tool.
    pub fn replace(&self, remove: &[String], add: Vec<Arc<dyn Tool>>) -> Result<(), ToolError> {
        let mut entries = self.write();
        let mut next: Vec<Entry> = Vec::with_capacity(entries.len() + add.len());
        for entry in entries.iter() {
            if !remove.iter().any(|n| n == entry.registered.tool.name()) {
                next.push(Entry {
                    registered: entry.registered.clone(),
                    active: entry.registered.tool.active_by_default(),
                });
            }
        }
        for tool in add {
            if next.iter().any(|e| e.registered.tool.name() == tool.name()) {
                return Err(ToolError::DuplicateName(tool.name().to_string()));
            }
            let active = tool.active_by_default();
            next.push(Entry {
                registered: Arc::new(RegisteredTool::new(tool)?),
                active,
            });
        }
        *entries = next;
        self.dormant_source_tools
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .clear();
        Ok(())
    }
}
