//! Where `read`, `write` and `edit` find file text: the disk, or a client's file system (an ACP
//! editor's buffers, docs/acp.md#edits-the-editor-can-review) through zi-agent's
//! [`FileIo`] seam. The tools run every check of their own either way (paths, sandbox, size,
//! the per-file queue); only the final read or write is handed over.

use std::path::Path;
use std::sync::Arc;

use futures::future::BoxFuture;
use tokio_util::sync::CancellationToken;
use zi_agent::file_io::FileIo;

/// The files of a session: the disk unless a client offers its own.
#[derive(Clone, Default)]
pub struct ClientFiles(Option<Arc<dyn FileIo>>);

impl std::fmt::Debug for ClientFiles {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() { "client" } else { "disk" })
    }
}

impl ClientFiles {
    /// The client's file system `io`, or the disk when `None`.
    pub fn new(io: Option<Arc<dyn FileIo>>) -> ClientFiles {
        ClientFiles(io)
    }

    /// Whether a client offers its files (else everything is the disk).
    pub fn is_client(&self) -> bool {
        self.0.is_some()
    }

    /// The client's read of `path`, or `None` for the disk.
    pub fn read(
        &self,
        path: &Path,
        cancel: &CancellationToken,
    ) -> Option<BoxFuture<'static, Result<String, String>>> {
        self.0.as_ref()?.read(path, cancel.clone())
    }

    /// The client's write of `path`, or `None` for the disk.
    pub fn write(
        &self,
        path: &Path,
        text: &str,
        cancel: &CancellationToken,
    ) -> Option<BoxFuture<'static, Result<(), String>>> {
        self.0
            .as_ref()?
            .write(path, text.to_string(), cancel.clone())
    }
}
