//! Zi RPC v1 wire types and request decoding.
//!
//! This crate is pure: serde types and functions, no I/O and no async runtime. Everything that
//! crosses the protocol boundary is defined here so that the server, the clients and the schema
//! agree on one shape.

pub mod errors;
pub mod event;
pub mod frame;
pub mod message;
pub mod request;
pub mod results;
#[cfg(feature = "schema")]
pub mod schema;
pub mod state;
pub mod thinking;

pub use thinking::ThinkingLevel;
