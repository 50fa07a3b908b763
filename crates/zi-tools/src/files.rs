//! Per-file mutation queue and I/O error classification shared by `read`, `write` and `edit`.

use std::collections::HashMap;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock, Mutex};

use zi_os::sync::lock;

/// Largest file `read` and `edit` accept (16 MiB).
pub const MAX_FILE_BYTES: u64 = 16 * 1024 * 1024;

static FILE_LOCKS: LazyLock<Mutex<HashMap<PathBuf, Arc<tokio::sync::Mutex<()>>>>> =
    LazyLock::new(|| Mutex::new(HashMap::new()));

/// Serialises mutations of one file across every tool call of the process. The lock is held
/// until the returned guard drops.
pub async fn lock_file(path: &Path) -> tokio::sync::OwnedMutexGuard<()> {
    let lock = {
        let mut locks = lock(&FILE_LOCKS);
        // Drop locks nobody holds, so the map stays as small as the set of files in use.
        locks.retain(|_, lock| Arc::strong_count(lock) > 1);
        locks.entry(path.to_path_buf()).or_default().clone()
    };
    lock.lock_owned().await
}

/// The error code of an I/O failure, with `fallback` for anything unclassified.
pub fn io_code(error: &std::io::Error, fallback: &'static str) -> &'static str {
    match error.kind() {
        ErrorKind::NotFound => "not_found",
        ErrorKind::PermissionDenied => "permission_denied",
        ErrorKind::IsADirectory => "not_file",
        _ => fallback,
    }
}

/// Checks that `path` is a regular file of at most [`MAX_FILE_BYTES`]; returns its size.
pub fn check_regular_file(path: &Path, shown: &str) -> Result<u64, (&'static str, String)> {
    let meta = std::fs::metadata(path).map_err(|error| {
        let code = io_code(&error, "unreadable");
        let text = match code {
            "not_found" => format!("File not found: {shown}"),
            "permission_denied" => format!("Permission denied: {shown}"),
            _ => format!("Cannot read {shown}: {error}"),
        };
        (code, text)
    })?;
    if !meta.is_file() {
        return Err(("not_file", format!("Not a regular file: {shown}")));
    }
    if meta.len() > MAX_FILE_BYTES {
        return Err((
            "too_large",
            format!(
                "File too large: {shown} is {} bytes (limit {MAX_FILE_BYTES} bytes). Use bash to inspect parts of it.",
                meta.len()
            ),
        ));
    }
    Ok(meta.len())
}
