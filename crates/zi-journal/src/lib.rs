//! The session journal: the chain of entries in memory and its projections ([`memory`]), the
//! JSONL file that makes it durable ([`file`]: write, open, parse, locate, tail), the image blobs
//! of format 2, entries read back by position ([`entries`]), forks ([`fork`]), the session
//! catalog of `session.list` ([`catalog`]) and usage statistics ([`stats`]).
//!
//! It knows the wire types (zi-protocol) and the operating system (zi-os) only: no session, no
//! provider, no settings. The session (zi-agent) owns a [`Journal`] and appends to it.

mod blobs;
pub mod catalog;
pub mod entries;
pub mod file;
pub mod fork;
pub mod memory;
pub mod messages;
pub mod stats;

pub use file::{JournalError, JournalFile, SessionHeader};
pub use memory::Journal;
