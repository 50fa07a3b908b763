//! The session runtime: the `AgentSession` (admission and state, the agent loop, queues,
//! interruption, approvals), the `Tool` trait, compaction, context usage and the system prompt.
//!
//! `session` is the only module that knows the session; everything else here (compaction
//! planning, context usage, the system prompt, the `Tool` trait, the approval result texts) is a
//! leaf the session builds on and never imports it. The journal is zi-journal's, configuration
//! and the approval policy are zi-config's.

pub mod approval_texts;
pub mod compaction;
mod compaction_backoff;
mod context_usage;
pub mod errors;
pub mod file_io;
pub mod session;
mod snapshot_cache;
pub mod system_prompt;
pub mod tool;

pub use session::host::SessionHost;
pub use session::tool_call::GateObserver;
pub use session::{AgentSession, EventContext, PromptAdmission, SessionConfig, Subscriber};
pub use session::{custom, delivery, extension, host};
pub use tool::{
    ExecutionMode, Outcome, PreparedCall, ProgressSink, RegisteredTool, Tool, ToolCallContext,
    ToolOutput, ToolSet, ToolSource, TypedTool,
};
