//! The session catalog (`session.list`): the journals of one or more session directories,
//! newest first. A listing reads each journal's header (to filter by cwd) and sorts by
//! modification time; only the journals on the requested page are scanned for their counts,
//! and a per-directory cache ([`cache`]) keeps every scan incremental, so listing never loads
//! whole journals and re-reads only what was appended since the last scan.

mod cache;
mod scan;

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::time::UNIX_EPOCH;

use zi_protocol::results::SessionSummary;

/// One page of the listed journals, newest first, how many there are in all and how many
/// `.jsonl` files were skipped.
#[derive(Debug, Default)]
pub struct Catalog {
    /// The page's journals, newest first.
    pub sessions: Vec<SessionSummary>,
    /// How many journals match, over all pages.
    pub total: u64,
    /// `.jsonl` files that could not be read or are not zi journals.
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

/// A journal found by a listing: what its header (or the cache) tells.
struct Found {
    dir: usize,
    name: String,
    path: PathBuf,
    len: u64,
    modified: u128,
    summary: scan::Summary,
}

/// Lists the journals in `dirs`; with `cwd`, only those whose header names it, and returns
/// the `limit` newest from `start` on. A file that cannot be read, or is not a zi journal, is
/// counted in `skipped`.
pub fn list(dirs: &[PathBuf], cwd: Option<&str>, start: usize, limit: usize) -> Catalog {
    let mut caches = Vec::with_capacity(dirs.len());
    let mut found: Vec<Found> = Vec::new();
    let mut skipped = 0;
    for dir in dirs {
        let Ok(read) = std::fs::read_dir(dir) else {
            continue;
        };
        let index = caches.len();
        let mut cache = cache::DirCache::load(dir);
        let mut present = HashSet::new();
        for entry in read.filter_map(Result::ok) {
            let path = entry.path();
            if path.extension().is_none_or(|x| x != "jsonl") {
                continue;
            }
            let name = entry.file_name().to_string_lossy().into_owned();
            match identify(&path, &name, &mut cache) {
                Some((len, modified, summary)) => {
                    present.insert(name.clone());
                    if cwd.is_none_or(|cwd| summary.cwd == cwd) {
                        found.push(Found {
                            dir: index,
                            name,
                            path,
                            len,
                            modified,
                            summary,
                        });
                    }
                }
                None => skipped += 1,
            }
        }
        cache.retain(&present);
        caches.push(cache);
    }
    found.sort_by(|a, b| {
        b.modified
            .cmp(&a.modified)
            .then_with(|| a.path.cmp(&b.path))
    });
    let mut total = found.len() as u64;
    let mut sessions = Vec::new();
    for journal in found.into_iter().skip(start).take(limit) {
        match complete(journal, &mut caches) {
            Some(summary) => sessions.push(summary),
            // Unreadable since its header was read: skipped like any unreadable file.
            None => {
                total -= 1;
                skipped += 1;
            }
        }
    }
    for cache in caches {
        cache.save();
    }
    Catalog {
        sessions,
        total,
        skipped,
    }
}

/// Size, modification time and the summary known of one journal: the cached one when its
/// size and modification time are unchanged (the file is not opened), else the header's (or
/// the earlier summary when the header still matches it and the file grew past it, for a later
/// scan to resume; a rewritten file is scanned afresh).
fn identify(
    path: &Path,
    name: &str,
    cache: &mut cache::DirCache,
) -> Option<(u64, u128, scan::Summary)> {
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
        return Some((len, modified, cached.summary.clone()));
    }
    let header = scan::header_summary(path, len).ok()?;
    let summary = match earlier {
        Some(earlier)
            if earlier.summary.session_id == header.session_id && earlier.summary.scanned < len =>
        {
            earlier.summary.clone()
        }
        _ => header,
    };
    cache.put(
        name,
        cache::Cached {
            len,
            modified,
            summary: summary.clone(),
        },
    );
    Some((len, modified, summary))
}

/// The public summary of a journal on the page, scanned first unless the summary already
/// covers the whole file (the scan resumes where the last one stopped).
fn complete(journal: Found, caches: &mut [cache::DirCache]) -> Option<SessionSummary> {
    let summary = if journal.summary.covers(journal.len) {
        journal.summary
    } else {
        let scanned = scan::summarize(&journal.path, journal.len, Some(journal.summary)).ok()?;
        caches[journal.dir].put(
            &journal.name,
            cache::Cached {
                len: journal.len,
                modified: journal.modified,
                summary: scanned.clone(),
            },
        );
        scanned
    };
    Some(public(&journal.path, journal.modified, summary))
}
fn public(path: &Path, modified: u128, summary: scan::Summary) -> SessionSummary {
    let millis = i64::try_from(modified / 1_000_000).unwrap_or(i64::MAX);
    SessionSummary {
        session_id: summary.session_id,
        path: path.display().to_string(),
        cwd: summary.cwd,
        created_at: summary.created_at,
        modified_at: zi_os::clock::iso_timestamp(millis),
        message_count: summary.message_count,
        first_user_text: summary.first_user_text.unwrap_or_default(),
        model: summary.model,
    }
}
