//! zi-cli's integration tests, one binary (`cargo test -p zi-cli --test all [FILTER]`): a module
//! per area, each driving the real `zi` binary (docs/architecture.md#testing). A test's name starts
//! with its module, so `cargo test -p zi-cli --test all rpc_schema` runs one area.
//!
//! All areas share this process: the tests never change process-wide state (environment, cwd,
//! signal dispositions) and find their own processes by markers unique to the test, so they may
//! overlap across areas as they do within one.

// A test fails by panicking with its reason.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod compaction_support;
mod ext_support;
mod wire_support;

mod acp;
mod approvals;
mod approvals_lifecycle;
mod code_mode;
mod code_worker;
mod compaction;
mod config_hardening;
mod conformance;
mod delegation;
mod docs_links;
mod example_clients;
mod extension_api;
mod extensions;
mod interactive;
mod interactive_prompts;
mod journal;
mod local_llm;
mod mcp;
mod mcp_http_bounds;
mod oneshot;
mod process_lifetime;
mod providers;
mod rpc_catalog;
mod rpc_client;
mod rpc_compact_stats;
mod rpc_images;
mod rpc_output_bounds;
mod rpc_protocol;
mod rpc_retry;
mod rpc_schema;
mod rpc_session;
mod rpc_tools;
mod sandbox;
mod subagent_profiles;
mod subscriptions;
mod tool_schemas;
