//! zi-sandbox's integration tests (one binary; a module per area): confinement applied to real child
//! processes on this machine's kernel. Nothing here confines the test process itself: `confine`
//! applies the sandbox in each child's `pre_exec`, and `worker_profile` runs this binary again as
//! the confined child (`worker_profile::confined_child`).

// A test fails by panicking with its reason.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod confine;
mod worker_profile;
