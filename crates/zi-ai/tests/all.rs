//! zi-ai's integration tests (one binary; a module per provider client, the shared block assembler
//! and the pinned wire): each client against the mock LLM over real loopback HTTP.

// A test fails by panicking with its reason.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod anthropic;
mod google;
mod interleaved_blocks;
mod openai_completions;
mod openai_responses;
mod support;
mod wire_golden;
