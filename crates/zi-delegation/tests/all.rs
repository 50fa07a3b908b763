//! zi-delegation's integration tests (one binary; a module per area). The black-box tests that
//! drive real `zi` children live with the binary's tests in zi-cli.

// A test fails by panicking with its reason.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod watch_failure;
