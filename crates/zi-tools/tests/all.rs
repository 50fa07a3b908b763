//! zi-tools' integration tests (one binary; a module per area).

// A test fails by panicking with its reason.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod tools;
