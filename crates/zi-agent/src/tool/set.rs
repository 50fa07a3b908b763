//! The tool set (docs/architecture.md#tools-and-the-session): registered tools with their
//! argument validators, tools that come and go (sources), activity, and the nesting tool.

use std::sync::{Arc, OnceLock, RwLock};

use futures::future::BoxFuture;
use serde_json::Value;
use zi_ai::ToolSpec;
use zi_os::sync;

use super::Tool;

/// A tool set that cannot be built, or arguments a tool refuses.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ToolError {
    /// A tool's parameter schema is not a JSON object or does not compile.
    #[error("Tool {name} has an invalid parameter schema: {problem}")]
    InvalidSchema {
        /// The tool.
        name: String,
        /// What is wrong with its schema.
        problem: String,
    },
    /// Two tools of one set share a name.
    #[error("Duplicate tool name: {0}")]
    DuplicateName(String),
    /// `set_active` named tools that are not registered (comma-separated).
    #[error("Unknown tools: {0}")]
    UnknownTools(String),
    /// The arguments break the schema; `problems` lists every violation, one per line.
    #[error("Validation failed for tool \"{name}\":\n{problems}")]
    InvalidArguments {
        /// The tool called.
        name: String,
        /// Every violation, one `  - /path: problem` line each.
        problems: String,
    },
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
    /// The tool.
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

    /// The tool as a provider request offers it: name, description, parameter schema.
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
    /// The tool whose calls reach the others (Code Mode's `code`), and whether the model is
    /// offered that tool alone (`--code-only`).
    nesting: Option<(String, bool)>,
    /// Source tools (MCP) made dormant by `set_active`; a source tool is active otherwise, also
    /// one that appears later.
    dormant_source_tools: RwLock<Vec<String>>,
}

impl ToolSet {
    /// A set of `tools` in that order, each active or not by its default; names must be unique.
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
            nesting: None,
            dormant_source_tools: RwLock::default(),
        })
    }

    /// Adds a source of tools that come and go while the session runs.
    pub fn add_source(&mut self, source: Arc<dyn ToolSource>) {
        self.sources.push(source);
    }

    /// Makes `name` the tool whose calls reach the other active tools (Code Mode's `code`):
    /// its description is [`Tool::describe_with`] those tools, and with `exclusive` the model
    /// is offered it alone while the others stay reachable from inside its calls
    /// ([`ToolSet::get_reachable`]). The nesting tool itself is never reachable that way.
    pub fn set_nesting_tool(&mut self, name: &str, exclusive: bool) {
        self.nesting = Some((name.to_string(), exclusive));
    }

    fn nesting_tool(&self) -> Option<&str> {
        self.nesting.as_ref().map(|(name, _)| name.as_str())
    }

    fn exclusive(&self) -> Option<&str> {
        self.nesting
            .as_ref()
            .filter(|(_, exclusive)| *exclusive)
            .map(|(name, _)| name.as_str())
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
        sync::read(&self.dormant_source_tools)
            .iter()
            .any(|n| n == name)
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Vec<Entry>> {
        sync::read(&self.entries)
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Vec<Entry>> {
        sync::write(&self.entries)
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
    pub(crate) fn get_active(&self, name: &str) -> Option<Arc<RegisteredTool>> {
        if self.exclusive().is_some_and(|only| only != name) {
            return None;
        }
        self.active(name)
    }

    /// A tool a call of the nesting tool may call now: an active one other than the nesting
    /// tool, whether or not the model is offered it.
    pub(crate) fn get_reachable(&self, name: &str) -> Option<Arc<RegisteredTool>> {
        if self.nesting_tool().is_none_or(|nesting| nesting == name) {
            return None;
        }
        self.active(name)
    }

    /// Every tool [`ToolSet::get_reachable`] finds, in offer order.
    pub fn reachable(&self) -> Vec<Arc<RegisteredTool>> {
        let Some(nesting) = self.nesting_tool() else {
            return Vec::new();
        };
        self.active_tools()
            .into_iter()
            .filter(|t| t.tool.name() != nesting)
            .collect()
    }

    fn active(&self, name: &str) -> Option<Arc<RegisteredTool>> {
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

    /// The active tools, then the sources' tools.
    fn active_tools(&self) -> Vec<Arc<RegisteredTool>> {
        let entries = self.read();
        let mut tools: Vec<Arc<RegisteredTool>> = entries
            .iter()
            .filter(|e| e.active)
            .map(|e| e.registered.clone())
            .collect();
        for tool in self.visible_source_tools(&entries) {
            if !self.source_tool_is_dormant(tool.tool.name()) {
                tools.push(tool);
            }
        }
        tools
    }

    /// What the next provider request offers: the active tools, then the sources' tools (the
    /// nesting tool alone when it is exclusive).
    pub(crate) fn specs(&self) -> Vec<ToolSpec> {
        let tools = self.active_tools();
        let Some(nesting) = self.nesting_tool() else {
            return tools.iter().map(|t| t.spec()).collect();
        };
        let exclusive = self.exclusive().is_some();
        let reachable: Vec<Arc<RegisteredTool>> = tools
            .iter()
            .filter(|t| t.tool.name() != nesting)
            .cloned()
            .collect();
        tools
            .iter()
            .filter(|t| !exclusive || t.tool.name() == nesting)
            .map(|t| {
                let mut spec = t.spec();
                if t.tool.name() == nesting
                    && let Some(description) = t.tool.describe_with(&reachable)
                {
                    spec.description = description;
                }
                spec
            })
            .collect()
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
        *sync::write(&self.dormant_source_tools) = source_names
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
        sync::write(&self.dormant_source_tools).clear();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tool::{ToolCallContext, ToolOutput, TypedTool};
    use serde_json::json;

    struct Named(&'static str, Value);

    impl TypedTool for Named {
        type Args = Value;
        fn name(&self) -> &str {
            self.0
        }
        fn description(&self) -> &str {
            "plain"
        }
        fn parameters(&self) -> &Value {
            &self.1
        }
        fn execute(&self, _args: Value, _call: ToolCallContext) -> BoxFuture<'static, ToolOutput> {
            Box::pin(async { ToolOutput::text("ran") })
        }
        fn describe_with(&self, reachable: &[Arc<RegisteredTool>]) -> Option<String> {
            let names: Vec<&str> = reachable.iter().map(|t| t.tool.name()).collect();
            Some(format!("reaches {}", names.join(",")))
        }
    }

    fn set(names: &[&'static str]) -> ToolSet {
        let tools: Vec<Arc<dyn Tool>> = names
            .iter()
            .map(|n| Arc::new(Named(n, json!({"type": "object"}))) as Arc<dyn Tool>)
            .collect();
        ToolSet::new(tools).unwrap_or_default()
    }

    fn described(set: &ToolSet) -> Vec<(String, String)> {
        set.descriptions()
    }

    #[test]
    fn without_a_nesting_tool_nothing_is_reachable_and_descriptions_are_plain() {
        let set = set(&["read", "code"]);
        assert!(set.get_reachable("read").is_none());
        assert!(set.reachable().is_empty());
        assert_eq!(described(&set)[1], ("code".into(), "plain".into()));
    }

    #[test]
    fn the_nesting_tool_reaches_the_active_tools_but_itself() {
        let mut set = set(&["read", "code", "bash"]);
        set.set_nesting_tool("code", false);
        let names: Vec<String> = set.specs().into_iter().map(|s| s.name).collect();
        assert_eq!(names, ["read", "code", "bash"]);
        assert_eq!(described(&set)[1].1, "reaches read,bash");
        assert!(set.get_reachable("bash").is_some());
        assert!(set.get_reachable("code").is_none(), "no recursion");
        assert!(set.get_active("read").is_some());
        // A tool made dormant is reachable from nowhere.
        set.set_active(&["code".into(), "bash".into()])
            .unwrap_or_default();
        assert!(set.get_reachable("read").is_none());
        assert_eq!(described(&set)[0].1, "reaches bash");
    }

    #[test]
    fn an_exclusive_nesting_tool_is_offered_alone() {
        let mut set = set(&["read", "code"]);
        set.set_nesting_tool("code", true);
        let names: Vec<String> = set.specs().into_iter().map(|s| s.name).collect();
        assert_eq!(names, ["code"]);
        assert!(set.get_active("read").is_none(), "the model cannot call it");
        assert!(set.get_active("code").is_some());
        assert!(set.get_reachable("read").is_some(), "a cell can");
        assert_eq!(described(&set)[0].1, "reaches read");
    }
}
