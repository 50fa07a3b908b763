//! Operating-system plumbing shared by zi's crates: bounded reads of configuration files, the
//! `!command` runner, process groups (start, signal, the process tree, signal names), file
//! descriptors (non-blocking pipes, private copies, the standard streams redirected), zi's own
//! environment, the clock, the poison-tolerant lock, and the scrubbing of configured secrets from
//! texts.
//!
//! Every `unsafe` that concerns processes lives here, each with its SAFETY comment, so the rest
//! of the workspace starts and ends child processes through safe functions (zi-sandbox keeps
//! the Landlock and seccomp calls it applies in the child).

pub mod clock;
pub mod command;
pub mod config_file;
pub mod env;
pub mod fd;
pub mod process;
pub mod redact;
pub mod sync;
