//! Writing a fork (`session.fork`): a new journal whose entries are a prefix of the parent's
//! chain, up to and including one entry, under a new header that names the parent
//! (`parentSession`). Written lines are copied byte for byte, and the image blobs they
//! reference (format 2) are linked or copied into the fork's own blob directory first, so
//! the fork never names a blob it does not have. The fork is created whole (exclusive create,
//! mode 0600, synced) like a pending journal that materializes.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};

use serde::Deserialize;
use zi_protocol::event::SessionEntry;

use crate::file::{MAX_JOURNAL_BYTES, SessionHeader, create_whole, encode_line};
use crate::messages;

/// Where the parent's entries come from.
pub enum ForkSource<'a> {
    /// The parent's file exists: its lines are copied.
    Written(&'a Path),
    /// The parent is still pending: its entries are all in memory.
    Pending(&'a [SessionEntry]),
}

/// Why a fork was not written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ForkError {
    /// No entry of the parent has this id.
    #[error("Entry not found: {0}")]
    NotFound(String),
    /// Reading the parent or writing the fork failed; the text says what and where.
    #[error("{0}")]
    Failed(String),
}

/// Writes the fork at `path` with `header`: the parent's entries up to and including
/// `entry_id`.
pub fn write_fork(
    source: ForkSource<'_>,
    entry_id: &str,
    path: &Path,
    header: &SessionHeader,
) -> Result<(), ForkError> {
    let mut bytes = encode_line(header).map_err(|error| ForkError::Failed(error.to_string()))?;
    let mut blobs = Vec::new();
    let found = match source {
        ForkSource::Written(parent) => copy_lines(parent, entry_id, &mut bytes, &mut blobs)?,
        ForkSource::Pending(entries) => {
            let mut found = false;
            for entry in entries {
                bytes.extend(
                    encode_line(entry).map_err(|error| ForkError::Failed(error.to_string()))?,
                );
                if entry.id == entry_id {
                    found = true;
                    break;
                }
            }
            found
        }
    };
    if !found {
        return Err(ForkError::NotFound(entry_id.to_string()));
    }
    if bytes.len() as u64 > MAX_JOURNAL_BYTES {
        return Err(ForkError::Failed(messages::fork_too_large()));
    }
    if let ForkSource::Written(parent) = source {
        carry_blobs(
            &parent.with_extension("blobs"),
            &path.with_extension("blobs"),
            &blobs,
        )?;
    }
    create_whole(path, &bytes)
        .map(drop)
        .map_err(|error| ForkError::Failed(error.to_string()))
}

/// Appends the parent's entry lines to `bytes` up to and including `entry_id`'s, collecting
/// the blob digests they reference; false when the id is not in the file.
fn copy_lines(
    parent: &Path,
    entry_id: &str,
    bytes: &mut Vec<u8>,
    blobs: &mut Vec<String>,
) -> Result<bool, ForkError> {
    let describe =
        |error: std::io::Error| ForkError::Failed(messages::read_failed(parent.display(), error));
    let file = std::fs::File::open(parent).map_err(describe)?;
    let mut reader = BufReader::with_capacity(256 * 1024, file);
    let mut line = Vec::new();
    reader.read_until(b'\n', &mut line).map_err(describe)?;
    // An id appears unescaped only as a key's value; the head parse confirms it is the
    // entry's own `id`.
    let needle = format!("\"id\":{}", serde_json::Value::from(entry_id));
    let finder = memchr::memmem::Finder::new(needle.as_bytes());
    loop {
        line.clear();
        if reader.read_until(b'\n', &mut line).map_err(describe)? == 0 {
            return Ok(false);
        }
        let text = line.strip_suffix(b"\n").unwrap_or(&line);
        bytes.extend_from_slice(text);
        bytes.push(b'\n');
        collect_blobs(text, blobs);
        if finder.find(text).is_some() && entry_head_id(text).as_deref() == Some(entry_id) {
            return Ok(true);
        }
    }
}

fn entry_head_id(line: &[u8]) -> Option<String> {
    #[derive(Deserialize)]
    struct Head {
        id: String,
    }
    serde_json::from_slice::<Head>(line)
        .ok()
        .map(|head| head.id)
}

/// The `sha256` digests of the blob references in one line.
fn collect_blobs(line: &[u8], blobs: &mut Vec<String>) {
    const KEY: &[u8] = b"\"sha256\":\"";
    if memchr::memmem::find(line, b"\"blob\":").is_none() {
        return;
    }
    for at in memchr::memmem::find_iter(line, KEY) {
        let digest = &line[at + KEY.len()..];
        if digest.len() > 64 && digest[64] == b'"' && digest[..64].iter().all(u8::is_ascii_hexdigit)
        {
            let digest = String::from_utf8_lossy(&digest[..64]).into_owned();
            if !blobs.contains(&digest) {
                blobs.push(digest);
            }
        }
    }
}

/// Links (or, across file systems, copies) each referenced blob into the fork's blob
/// directory. Blobs are content-addressed and never rewritten, so sharing the inode is safe.
fn carry_blobs(from: &Path, to: &Path, digests: &[String]) -> Result<(), ForkError> {
    let present: Vec<&String> = digests.iter().filter(|d| from.join(d).is_file()).collect();
    if present.is_empty() {
        return Ok(());
    }
    let failed =
        |error: std::io::Error| ForkError::Failed(messages::blobs_not_copied(to.display(), error));
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        builder.mode(0o700);
    }
    builder.create(to).map_err(failed)?;
    for digest in present {
        let (source, target) = (from.join(digest), to.join(digest));
        if target.exists() {
            continue;
        }
        if std::fs::hard_link(&source, &target).is_err() {
            std::fs::copy(&source, &target).map_err(failed)?;
        }
    }
    Ok(())
}

/// The fork's path: a sibling of the parent's journal named after the new session id.
pub fn fork_path(parent: &Path, session_id: &str) -> PathBuf {
    parent.with_file_name(format!("{session_id}.jsonl"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blob_digests_are_read_from_blob_references_only() {
        let digest = "a".repeat(64);
        let line = format!(
            r#"{{"content":[{{"type":"image","mimeType":"image/png","blob":{{"sha256":"{digest}","bytes":3}}}}],"text":"\"sha256\":\"{}\""}}"#,
            "b".repeat(64)
        );
        let mut blobs = Vec::new();
        collect_blobs(line.as_bytes(), &mut blobs);
        assert_eq!(blobs, vec![digest]);
    }
}
