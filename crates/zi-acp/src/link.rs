//! What every session of a connection shares: the ordered writer, the requests zi sent the
//! client, and what the client said it can do.

use std::sync::RwLock;

use zi_rpc::output::{FrameKind, Output};

use crate::jsonrpc::Line;
use crate::mapper::Display;
use crate::outgoing::Outgoing;

/// The client's capabilities that change what zi does (docs/acp.md#connection).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ClientCaps {
    pub read_text_file: bool,
    pub write_text_file: bool,
    /// Zed's `_meta.terminal_output`.
    pub terminal_output: bool,
    /// `auth.terminal`: the client can run a login command in a terminal.
    pub auth_terminal: bool,
}

pub struct Link {
    pub output: Output,
    pub outgoing: Outgoing,
    pub runtime: tokio::runtime::Handle,
    client: RwLock<ClientCaps>,
}

impl Link {
    pub fn new(output: Output, runtime: tokio::runtime::Handle) -> Link {
        Link {
            output,
            outgoing: Outgoing::default(),
            runtime,
            client: RwLock::new(ClientCaps::default()),
        }
    }

    pub fn client(&self) -> ClientCaps {
        *self.client.read().unwrap_or_else(|p| p.into_inner())
    }

    pub fn set_client(&self, caps: ClientCaps) {
        *self.client.write().unwrap_or_else(|p| p.into_inner()) = caps;
    }

    pub fn display(&self) -> Display {
        Display {
            terminal_output: self.client().terminal_output,
        }
    }

    /// Queues a line that belongs to no session (a response, an error).
    pub fn send(&self, line: Line) {
        if let Err(error) = &line {
            tracing::error!("an ACP message could not be serialized: {error}");
        }
        self.output.enqueue_plain(line, FrameKind::Required, None);
    }
}
