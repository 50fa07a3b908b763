//! zi-agent's integration tests (one binary; a module per area): a real `AgentSession` against the mock LLM
//! over loopback HTTP.

// A test fails by panicking with its reason.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod agent_loop;
mod common;
mod custom_messages;
mod extension_host;
