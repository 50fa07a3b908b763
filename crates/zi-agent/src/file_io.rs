//! The seam through which the file tools (`read`, `write`, `edit`) reach a file system a client
//! holds: an ACP editor serves its unsaved buffers and shows (and can revert) every write
//! (docs/acp.md#edits-the-editor-can-review). Without one the tools use the disk.

use std::path::Path;

use futures::future::BoxFuture;
use tokio_util::sync::CancellationToken;

/// A client's file system. Each method answers `None` when the client does not take the path
/// (then the tool uses the disk), else the future of the client's answer; an `Err` is the
/// client's message, which the tool reports as its own failure.
pub trait FileIo: Send + Sync {
    /// The whole text of `path` (absolute).
    fn read(
        &self,
        path: &Path,
        cancel: CancellationToken,
    ) -> Option<BoxFuture<'static, Result<String, String>>>;

    /// Replaces the text of `path` (absolute) with `text`; zi's own checks (sandbox paths,
    /// size, the per-file queue) ran before.
    fn write(
        &self,
        path: &Path,
        text: String,
        cancel: CancellationToken,
    ) -> Option<BoxFuture<'static, Result<(), String>>>;
}
