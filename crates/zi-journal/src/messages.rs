//! The texts of journal failures, one function each, so that each template lives once. The
//! session reports them as they are; docs/rpc.md#error-texts-of-the-zi-extensions lists those
//! the RPC methods can answer with.

use std::fmt::Display;

use crate::file::MAX_JOURNAL_BYTES;

/// The journal (or a fork's parent) cannot be opened or read.
pub fn read_failed(path: impl Display, cause: impl Display) -> String {
    format!("Could not read journal {path}: {cause}")
}

/// A line of the journal is not an entry zi can read; `line` counts from 1 (the header).
pub fn corrupt_line(path: impl Display, line: impl Display, cause: impl Display) -> String {
    format!("Journal {path} is corrupt at line {line}: {cause}")
}

/// The journal file cannot be created.
pub fn create_failed(path: impl Display, cause: impl Display) -> String {
    format!("Could not create journal {path}: {cause}")
}

/// The journal's directory cannot be created.
pub fn create_dir_failed(path: impl Display, dir: impl Display, cause: impl Display) -> String {
    create_failed(path, format!("cannot create its directory {dir}: {cause}"))
}

/// A directory whose entries changed cannot be synced after the journal was created.
pub fn sync_dir_failed(path: impl Display, dir: impl Display, cause: impl Display) -> String {
    create_failed(path, format!("cannot sync directory {dir}: {cause}"))
}

/// The journal's bytes cannot be written.
pub fn write_failed(path: impl Display, cause: impl Display) -> String {
    format!("Could not write journal {path}: {cause}")
}

/// An entry cannot be encoded as a journal line.
pub fn encode_failed(cause: impl Display) -> String {
    format!("Could not encode journal entry: {cause}")
}

/// An entry cannot be appended to the journal file.
pub fn append_failed(path: impl Display, cause: impl Display) -> String {
    format!("Could not append to journal {path}: {cause}")
}

/// One more entry would make the journal larger than zi writes or opens.
pub fn journal_full(path: impl Display) -> String {
    format!(
        "Journal {path} and its image blobs would exceed {MAX_JOURNAL_BYTES} bytes; start a new session"
    )
}

/// A fork would be larger than any journal zi writes or opens.
pub fn fork_too_large() -> String {
    format!("The fork would exceed {MAX_JOURNAL_BYTES} bytes")
}

/// The image blobs a fork references cannot be linked or copied into its blob directory.
pub fn blobs_not_copied(dir: impl Display, cause: impl Display) -> String {
    format!("Could not copy image blobs to {dir}: {cause}")
}
