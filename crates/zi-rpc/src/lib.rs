//! Zi RPC v1 over stdio: framing, admission, request ids and capacity, ordered bounded output,
//! completion watches, event modes and shutdown.

pub mod completion;
pub mod connection;
pub mod line_decoder;
pub mod output;
pub mod registry;

pub use connection::{ConnectionResult, serve};
