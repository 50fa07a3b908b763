//! Zi RPC v1 wire types and request decoding.
//!
//! This crate is pure: serde types and functions, no I/O and no async runtime. Everything that
//! crosses the protocol boundary is defined here so that the server, the clients and the schema
//! agree on one shape.

pub mod approval;
pub mod approval_rule;
pub mod decode_cases;
pub mod encoded;
pub mod errors;
pub mod event;
pub mod frame;
pub mod image;
mod json_infinity;
pub mod message;
pub mod method_table;
pub mod params;
pub mod request;
pub mod results;
#[cfg(feature = "schema")]
pub mod schema;
pub mod state;
pub mod thinking;

pub use method_table::methods;
pub use thinking::ThinkingLevel;
