//! The `AgentSession`: admission and state, the agent loop, queues, interruption, the journal,
//! settings and the `Tool` trait.

pub mod compaction;
pub mod context_usage;
pub mod custom;
pub mod errors;
pub mod extension;
pub mod host;
pub mod journal;
pub mod journal_file;
pub mod queue;
pub mod resources;
mod run;
pub mod session;
pub mod settings;
pub mod system_prompt;
pub mod tool;

pub use host::SessionHost;
pub use session::{AgentSession, EventContext, PromptAdmission, SessionConfig, Subscriber};
pub use tool::{ExecutionMode, Tool, ToolCallContext, ToolOutput, ToolSet};
