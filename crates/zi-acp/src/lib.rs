//! The Agent Client Protocol front end of zi (docs/acp.md): `zi acp` serves editors (Zed,
//! JetBrains IDEs, Neovim, Emacs) and headless clients such as acpx over JSON-RPC 2.0 on stdio,
//! with many [`AgentSession`](zi_agent::AgentSession)s in one process.
//!
//! - `jsonrpc` and `lines`: the JSON-RPC layer (zi's own), on zi-rpc's ordered bounded
//!   writer; `connection` reads, routes and shuts down.
//! - `host` and `session`: the session table and one session (its subscriber, open prompts,
//!   mode, permissions); `turns`, `modes`, `config`, `commands`, `prompt`, `permissions`,
//!   `fs`, `mcp` and `listing` are their parts.
//! - `mapper`: session events and journal entries as `session/update`s.
//! - [`factory`]: the seam through which the binary builds each session as `zi` would.

mod commands;
mod config;
mod connection;
pub mod factory;
mod fs;
mod host;
mod jsonrpc;
mod lines;
mod link;
mod listing;
mod mapper;
mod mcp;
mod modes;
mod outgoing;
mod permissions;
mod prompt;
mod session;
mod session_errors;
mod turns;

pub use connection::serve;

/// Locks a mutex, recovering from a poisoned one (a panicking holder leaves consistent data
/// here: every critical section is a few assignments).
pub(crate) fn lock<T>(mutex: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}
