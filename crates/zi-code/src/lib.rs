//! Code Mode (docs/code-mode.md): the `code` tool, whose JavaScript cells run in an embedded
//! QuickJS engine inside a separate worker process started from zi's own binary
//! (`zi __code-worker`) under zi-sandbox's strictest profile, where the only effects are calls
//! to zi's own tools through the session's normal tool path.
//!
//! - `worker/`: the worker process (engine, glue, the cell loop); [`worker_main`].
//! - `protocol.rs`: the framed host ↔ worker protocol.
//! - `host/`: one cell seen from zi: the worker process, the scheduler of nested calls, the
//!   deadline and the kill.
//! - `trace.rs`: what the cell did (calls, logs) as the call's `details`.
//! - `tool.rs`: the `code` tool; `decl.rs`: TypeScript-style declarations of the tools.
//! - `settings.rs`: `codeMode*` settings.

mod decl;
pub mod host;
pub mod limits;
mod protocol;
pub mod settings;
mod text;
mod tool;
mod trace;
mod worker;

pub use tool::{CodeArgs, CodeModeConfig, CodeTool, NAME};
pub use worker::worker_main;

/// The hidden subcommand that runs a worker: `zi __code-worker`.
pub const WORKER_SUBCOMMAND: &str = "__code-worker";
