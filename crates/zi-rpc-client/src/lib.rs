//! A typed async client for Zi RPC v1 (`zi --mode rpc`).
//!
//! [`ClientBuilder`] spawns a server command with its working directory and environment, waits
//! for `ready` under a deadline, and returns a [`Client`]. The client
//!
//! - sends typed requests and awaits their correlated responses; any number of tasks may have
//!   requests in flight, and the client itself keeps at most 32 ordinary requests (plus one
//!   `session.interrupt`) outstanding, the server's capacity, queueing the rest;
//! - delivers `session_event` frames in sequence order to every [`EventStream`] subscriber;
//! - treats a sequence gap, an unknown frame type, a malformed frame and an `invalid_framing`
//!   error as fatal [`Error`]s that fail every pending request; a recoverable `protocol_error`
//!   fails the request whose id it carries (or, without an id, the connection);
//! - pages messages and outcomes to the end, runs completion watches, interrupts;
//! - closes cleanly: EOF on stdin, a bounded wait, then `SIGKILL`, and reports a non-zero exit
//!   together with the tail of the server's stderr.
//!
//! One-shot helpers mirror the copyable clients: [`run_prompt`] and [`run_command`].
//!
//! ```no_run
//! # async fn demo() -> Result<(), zi_rpc_client::Error> {
//! use zi_rpc_client::{ClientBuilder, Delivery};
//!
//! let client = ClientBuilder::new("zi")
//!     .args(["--mode", "rpc", "--no-session"])
//!     .current_dir("/tmp")
//!     .spawn()
//!     .await?;
//! let mut events = client.subscribe();
//! client.prompt(Delivery::Direct, "Say hi", Some("cycle-1")).await?;
//! let done = client.await_idle(Some("cycle-1")).await?;
//! println!("{:?}", done.and_then(|r| r.completion).map(|c| c.text));
//! while let Ok(event) = events.try_next() {
//!     println!("{} {}", event.sequence, event.event["type"]);
//! }
//! let status = client.close().await?;
//! assert!(status.success());
//! # Ok(()) }
//! ```

use std::time::Duration;

pub use zi_protocol::ThinkingLevel;
pub use zi_protocol::errors::ProtocolErrorCode;
pub use zi_protocol::frame::ResponseErrorCode;
pub use zi_protocol::image::{ImageContent, ImageMimeType};
pub use zi_protocol::message::AgentMessage;
pub use zi_protocol::method_table::{Method, RpcMethod};
pub use zi_protocol::methods;
pub use zi_protocol::params::{
    AwaitIdleParams, CommandInvokeParams, MessagesParams, ModelSelectParams, OutcomesParams,
    PromptParams, SetEventsParams, ThinkingSelectParams,
};
pub use zi_protocol::params::{EntriesParams, ForkParams, SessionListParams, SessionListScope};
pub use zi_protocol::request::{Delivery, EventMode, SettingsScope};
pub use zi_protocol::results::{
    AwaitIdleResult, CommandDescriptor, CommandInvokeResult, CommandList, Completion,
    CompletionResult, EmptyResult, EventModeResult, MessagePage, ModelList, ModelSelection,
    OutcomePage, PromptResult, ThinkingLevels, ThinkingSelection,
};
pub use zi_protocol::results::{
    EntryPage, ForkResult, SessionListPage, SessionModel, SessionSummary,
};
pub use zi_protocol::state::SessionState;

/// The server's ordinary in-flight capacity (docs/rpc.md#request-ids-and-capacity).
pub const MAX_IN_FLIGHT: usize = 32;
/// Default deadline for `ready`.
pub const DEFAULT_READY_TIMEOUT: Duration = Duration::from_secs(10);
/// Default grace period between EOF and `SIGKILL` on close.
pub const DEFAULT_CLOSE_GRACE: Duration = Duration::from_secs(5);
/// How much of the server's stderr the client keeps (the tail).
pub const STDERR_TAIL_BYTES: usize = 64 * 1024;
/// The largest frame line the client accepts.
pub const MAX_FRAME_BYTES: usize = 16 * 1024 * 1024;
/// The largest number of pages [`Client::all_messages`] and [`Client::all_outcomes`] follow.
pub const MAX_PAGES: usize = 1024;

mod builder;
mod client;
mod connection;
mod error;
mod events;
mod requests;

pub use builder::ClientBuilder;
pub use client::Client;
pub use connection::TappedFrame;
pub use error::{Error, Result};
pub use events::{EventStream, SessionEvent};
pub use requests::image_from_file;

/// Spawns the server, runs one prompt, closes, and returns the completion text.
///
/// ```no_run
/// # async fn demo() -> Result<(), zi_rpc_client::Error> {
/// let builder = zi_rpc_client::ClientBuilder::new("zi").args(["--mode", "rpc", "--no-session"]);
/// let text = zi_rpc_client::run_prompt(builder, "Summarize this repository").await?;
/// println!("{text}");
/// # Ok(()) }
/// ```
pub async fn run_prompt(builder: ClientBuilder, prompt: &str) -> Result<String> {
    let client = builder.spawn().await?;
    let outcome = client.run_prompt(prompt).await;
    let closed = client.close().await;
    let text = outcome?;
    closed?;
    Ok(text)
}

/// Spawns the server, checks `command.list`, invokes the command, closes, and returns its
/// feedback message.
///
/// ```no_run
/// # async fn demo() -> Result<(), zi_rpc_client::Error> {
/// let builder = zi_rpc_client::ClientBuilder::new("zi").args(["--mode", "rpc"]);
/// let message = zi_rpc_client::run_command(builder, "counter", "increment").await?;
/// println!("{message:?}");
/// # Ok(()) }
/// ```
pub async fn run_command(
    builder: ClientBuilder,
    name: &str,
    arguments: &str,
) -> Result<Option<String>> {
    let client = builder.spawn().await?;
    let outcome = client.run_command(name, arguments).await;
    let closed = client.close().await;
    let message = outcome?;
    closed?;
    Ok(message)
}
