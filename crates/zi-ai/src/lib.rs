//! Models, credentials and streaming provider clients for zi.
//!
//! The agent loop asks [`stream_assistant`] for one assistant message; the provider adapter
//! speaks its API over HTTP and normalises what it receives into [`AssistantMessageEvent`]s,
//! ending with exactly one `done` or `error` event carrying the final message. The consumer
//! accumulates the message: it applies each [`StreamUpdate`] to the partial message it holds. Providers never
//! retry a request themselves: retries are session policy and must be visible.

pub mod auth;
pub mod builtin;
pub mod catalog;
pub mod classify;
pub mod credentials;
mod http;
pub mod model;
mod providers;
pub mod stream;
mod update;

pub use model::{Api, Model};
pub use stream::{AssistantStream, LlmContext, StreamOptions, ToolSpec, stream_assistant};
pub use update::StreamUpdate;
pub use zi_protocol::event::AssistantMessageEvent;
