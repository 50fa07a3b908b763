//! Test support for zi: the black-box harness that starts the real `zi` binary against the mock
//! provider.
//!
//! - [`mock_llm`] (with [`mock_vendors`]): the mock provider server a test points zi at,
//!   re-exported from `zi-mock-provider` (an ordinary library, so the conformance kit can run it
//!   without depending on this tests-only crate).
//! - [`mock_auth`]: the mock sign-in server (OpenAI OAuth, GitHub's device flow, the Copilot
//!   token exchange), re-exported likewise.
//! - [`browser`]: a browser's `GET` of zi's sign-in callback.
//! - [`dirs`]: the agent directory ([`dirs::AgentDir`], with builders for `models.json`,
//!   `settings.json`, `trust.json`, `auth.json` and extensions) and a canonical temporary cwd.
//! - [`zi_command`]: [`zi_command::ZiCommand`], the one builder for starting zi (flags,
//!   sanitized environment, cwd) in rpc mode or for a one-shot run to its end.
//! - [`harness`]: [`harness::Harness`], a running `zi --mode rpc` driven through
//!   `zi-rpc-client` — typed requests, raw bytes for framing cases, and framing, sequence and
//!   schema checks on every frame.
//! - [`process`]: what a child left behind (descendants, process groups).
//! - [`scan`]: everything zi wrote (frames, stderr, files), scanned for secrets.
//! - [`tmux`]: the real binary in a real terminal (tmux), for the interactive mode.
//! - [`mcp`]: real MCP servers (official Python SDK in a provisioned virtual environment).
//! - [`acp`]: `zi acp` over raw JSON-RPC with every message checked against the ACP schema, and
//!   the clients nobody here wrote (acpx, the Python SDK) behind a logging tap.

// Tests only: a harness fails the test it serves by panicking, with the reason in the message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

pub use zi_mock_provider::{mock_auth, mock_llm, mock_vendors};

pub mod acp;
pub mod browser;
pub mod dirs;
pub mod frame_schema;
pub mod harness;
pub mod mcp;
pub mod process;
pub mod scan;
pub mod tmux;
pub mod zi_command;

mod preview;
