//! Zi RPC v1 over stdio: framing, admission, request ids and capacity, ordered bounded output,
//! completion watches, event modes and shutdown.

mod completion;
mod connection;
pub mod input_buffer;
mod line_decoder;
pub mod output;
mod registry;

pub use connection::{ConnectionResult, SETTLE_TIMEOUT, serve};
