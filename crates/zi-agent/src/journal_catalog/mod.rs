//! The session catalog (`session.list`): the journals of one or more session directories,
//! newest first, each summarized from its header and a scan that a per-directory cache
//! ([`cache`]) keeps incremental, so listing never loads whole journals and re-reads only what
//! was appended since the last listing.

mod cache;
mod scan;

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::time::UNIX_EPOCH;

use zi_protocol::results::SessionSummary;

pub use cache::CACHE_FILE;
pub use scan::FIRST_USER_TEXT_BYTES;

/// Every listed journal, newest first, and how many `.jsonl` files were skipped.
#[derive(Debug, Default)]
pub struct Catalog {
    pub sessions: Vec<SessionSummary>,
    pub skipped: u64,
}

/// The session directories under `<agentDir>/sessions` (one per cwd), plus `extra` (a
/// `--session-dir`), without duplicates.
pub fn all_session_dirs(agent_dir: &Path, extra: &Path) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(agent_dir.join("sessions"))
        .map(|read| {
            read.filter_map(Result::ok)
                .filter(|entry| entry.file_type().is_ok_and(|t| t.is_dir()))
                .map(|entry| entry.path())
                .collect()
        })
        .unwrap_or_default();
    if !dirs.iter().any(|dir| dir == extra) {
        dirs.push(extra.to_path_buf());
    }
    dirs.sort();
    dirs
}

/// Lists the journals in `dirs`; with `cwd`, only those whose header names it. A file that
/// cannot be read, or is not a zi journal, is counted in `skipped`.
pub fn list(dirs: &[PathBuf], cwd: Option<&str>) -> Catalog {
    let mut listed: Vec<(u128, SessionSummary)> = Vec::new();
    let mut skipped = 0;
    for dir in dirs {
        let Ok(read) = std::fs::read_dir(dir) else {
            continue;
        };
        let mut cache = cache::DirCache::load(dir);
        let mut present = HashSet::new();
        for entry in read.filter_map(Result::ok) {
            let path = entry.path();
            if path.extension().is_none_or(|x| x != "jsonl") {
                continue;
            }
            let name = entry.file_name().to_string_lossy().into_owned();
            match summarize(&path, &name, &mut cache) {
                Some((modified, summary)) => {
                    present.insert(name);
                    if cwd.is_none_or(|cwd| summary.cwd == cwd) {
                        listed.push((modified, public(&path, modified, summary)));
                    }
                }
                None => skipped += 1,
            }
        }
        cache.retain(&present);
        cache.save();
    }
    listed.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.path.cmp(&b.1.path)));
    Catalog {
        sessions: listed.into_iter().map(|(_, summary)| summary).collect(),
        skipped,
    }
}

/// The summary of one journal: from the cache when its size and modification time are
/// unchanged (the file is not opened), else scanned (incrementally when it only grew).
fn summarize(
    path: &Path,
    name: &str,
    cache: &mut cache::DirCache,
) -> Option<(u128, scan::Summary)> {
    // Symbolic links are followed; only regular files are journals.
    let meta = std::fs::metadata(path).ok().filter(|m| m.is_file())?;
    let len = meta.len();
    let modified = meta
        .modified()
        .ok()
        .and_then(|time| time.duration_since(UNIX_EPOCH).ok())
        .map_or(0, |since| since.as_nanos());
    let earlier = cache.get(name);
    if let Some(cached) = earlier.filter(|c| c.len == len && c.modified == modified) {
        return Some((modified, cached.summary.clone()));
    }
    let summary = scan::summarize(path, len, earlier.map(|c| c.summary.clone())).ok()?;
    cache.put(
        name,
        cache::Cached {
            len,
            modified,
            summary: summary.clone(),
        },
    );
    Some((modified, summary))
}

fn public(path: &Path, modified: u128, summary: scan::Summary) -> SessionSummary {
    let millis = i64::try_from(modified / 1_000_000).unwrap_or(i64::MAX);
    SessionSummary {
        session_id: summary.session_id,
        path: path.display().to_string(),
        cwd: summary.cwd,
        created_at: summary.created_at,
        modified_at: crate::journal::iso_timestamp(millis),
        message_count: summary.message_count,
        first_user_text: summary.first_user_text.unwrap_or_default(),
        model: summary.model,
    }
}
