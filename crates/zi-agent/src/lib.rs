//! The `AgentSession`: admission and state, the agent loop, queues, interruption, the journal,
//! settings and the `Tool` trait.
//!
//! `session` is the only module that knows the session; everything else here (journal, settings,
//! resources, compaction planning, context usage, usage statistics, the system prompt, the `Tool` trait) is a
//! leaf the session builds on and never imports it.

pub mod approval;
pub mod compaction;
pub mod context_usage;
pub mod errors;
pub mod journal;
mod journal_blobs;
pub mod journal_catalog;
pub mod journal_entries;
pub mod journal_file;
pub mod journal_fork;
pub mod resources;
pub mod session;
pub mod settings;
mod snapshot_cache;
pub mod subagent_profiles;
pub mod system_prompt;
pub mod tool;
pub mod trust;
pub mod usage_stats;

pub use session::host::SessionHost;
pub use session::tool_call::GateObserver;
pub use session::{AgentSession, EventContext, PromptAdmission, SessionConfig, Subscriber};
pub use session::{custom, delivery, extension, host, queue};
pub use tool::{
    ExecutionMode, ProgressSink, RegisteredTool, Tool, ToolCallContext, ToolOutput, ToolSet,
    ToolSource,
};
