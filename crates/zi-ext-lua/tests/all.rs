//! zi-ext-lua's integration tests (one binary; a module per area): the real Lua host.

// A test fails by panicking with its reason.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod host;
mod subagent_profiles;
