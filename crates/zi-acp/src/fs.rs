//! The client's file system (docs/acp.md#edits-the-editor-can-review): when the client
//! advertises `fs.writeTextFile`, `write` and `edit` hand their result to it with
//! `fs/write_text_file` (the editor shows it and can revert it) after zi's own checks; when it
//! advertises `fs.readTextFile`, `read` reads through it (unsaved buffers). Only files under the
//! session's roots (`cwd` and `additionalDirectories`) go to the client; others, and everything
//! when the client advertises nothing, use the disk.

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock, Weak};

use agent_client_protocol_schema::v1::{
    ReadTextFileRequest, ReadTextFileResponse, WriteTextFileRequest,
};
use futures::future::BoxFuture;
use serde_json::{Value, json};
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;
use zi_agent::file_io::FileIo;

use crate::jsonrpc;
use crate::link::Link;
use crate::outgoing::Waiter;

/// Why a file request to the client got no answer to use.
#[derive(Debug, thiserror::Error)]
enum ClientFsError {
    /// The client failed the request; carries its message, when it sent one.
    #[error("{}", .0.as_deref().unwrap_or("the client failed the request"))]
    Failed(Option<String>),
    /// The connection ended before the answer.
    #[error("the client connection ended")]
    Ended,
    /// The tool call was cancelled (the request was withdrawn).
    #[error("the tool call was cancelled")]
    Cancelled,
    /// The answer is not the method's result.
    #[error("the client's answer does not decode: {0}")]
    Decode(serde_json::Error),
}

/// The client's file system for one session.
pub struct ClientFs {
    link: Weak<Link>,
    /// Set once the session exists (the tools are built before it).
    session_id: OnceLock<String>,
    roots: Vec<PathBuf>,
    read: bool,
    write: bool,
}

/// The session's client file system, when the client offers one.
pub fn client_file_io(link: &Arc<Link>, cwd: &Path, dirs: &[PathBuf]) -> Option<Arc<ClientFs>> {
    let caps = link.client();
    if !caps.read_text_file && !caps.write_text_file {
        return None;
    }
    let mut roots = vec![cwd.to_path_buf()];
    roots.extend(dirs.iter().cloned());
    Some(Arc::new(ClientFs {
        link: Arc::downgrade(link),
        session_id: OnceLock::new(),
        roots,
        read: caps.read_text_file,
        write: caps.write_text_file,
    }))
}

impl ClientFs {
    /// Names the session the requests are for.
    pub fn bind(&self, session_id: &str) {
        let _ = self.session_id.set(session_id.to_string());
    }

    fn takes(&self, path: &Path) -> bool {
        self.session_id.get().is_some() && self.roots.iter().any(|root| path.starts_with(root))
    }

    /// Sends `method` and waits for the answer (or the call's cancellation, which withdraws
    /// the request with `$/cancel_request`).
    fn ask(
        &self,
        method: &'static str,
        params: Value,
        cancel: CancellationToken,
    ) -> Option<BoxFuture<'static, Result<Value, ClientFsError>>> {
        let link = self.link.upgrade()?;
        Some(Box::pin(async move {
            let (sender, answer) = oneshot::channel();
            let id = link.outgoing.register(Waiter::Reply(sender));
            link.send(jsonrpc::request_line(id, method, &params));
            tokio::select! {
                answer = answer => match answer {
                    Ok(Ok(result)) => Ok(result),
                    Ok(Err(error)) => Err(ClientFsError::Failed(
                        error.get("message").and_then(Value::as_str).map(str::to_string),
                    )),
                    Err(_) => Err(ClientFsError::Ended),
                },
                () = cancel.cancelled() => {
                    if link.outgoing.forget(id) {
                        link.send(jsonrpc::notification_line(
                            "$/cancel_request",
                            &json!({ "requestId": id }),
                        ));
                    }
                    Err(ClientFsError::Cancelled)
                }
            }
        }))
    }
}

impl FileIo for ClientFs {
    fn read(
        &self,
        path: &Path,
        cancel: CancellationToken,
    ) -> Option<BoxFuture<'static, Result<String, String>>> {
        if !self.read || !self.takes(path) {
            return None;
        }
        let request = ReadTextFileRequest::new(self.session_id.get()?.clone(), path.to_path_buf());
        let asked = self.ask(
            "fs/read_text_file",
            serde_json::to_value(request).ok()?,
            cancel,
        )?;
        // The tool reports the failure in words (zi-agent's FileIo carries text).
        Some(Box::pin(async move {
            let value = asked.await.map_err(|error| error.to_string())?;
            serde_json::from_value::<ReadTextFileResponse>(value)
                .map(|response| response.content)
                .map_err(|error| ClientFsError::Decode(error).to_string())
        }))
    }

    fn write(
        &self,
        path: &Path,
        text: String,
        cancel: CancellationToken,
    ) -> Option<BoxFuture<'static, Result<(), String>>> {
        if !self.write || !self.takes(path) {
            return None;
        }
        let request =
            WriteTextFileRequest::new(self.session_id.get()?.clone(), path.to_path_buf(), text);
        let asked = self.ask(
            "fs/write_text_file",
            serde_json::to_value(request).ok()?,
            cancel,
        )?;
        Some(Box::pin(async move {
            asked.await.map(|_| ()).map_err(|error| error.to_string())
        }))
    }
}
