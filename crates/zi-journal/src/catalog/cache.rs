//! The catalog cache of one session directory (`.zi-catalog.json`): each journal's summary
//! keyed by its file name, size and modification time, so a listing opens only journals that
//! changed since the last one, and scans only what was appended to them.
//!
//! It is a cache: a missing, unreadable or stale file only costs a rescan, and failing to
//! write it is logged, never reported.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::scan::Summary;

/// The cache's file name inside a session directory (not `.jsonl`, so `--continue` and the
/// listing never take it for a journal).
pub const CACHE_FILE: &str = ".zi-catalog.json";
/// 2: a summary may cover only the header (journals listed but never on a page).
const CACHE_VERSION: u32 = 2;

/// One journal as the cache last saw it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Cached {
    pub len: u64,
    /// Modification time in nanoseconds since the epoch.
    pub modified: u128,
    pub summary: Summary,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct CacheFile {
    version: u32,
    journals: BTreeMap<String, Cached>,
}

/// The cache of one directory.
pub struct DirCache {
    dir: PathBuf,
    journals: BTreeMap<String, Cached>,
    changed: bool,
}

impl DirCache {
    /// Loads the cache of `dir` (empty when absent, unreadable or of another version).
    pub fn load(dir: &Path) -> DirCache {
        let journals = std::fs::read(dir.join(CACHE_FILE))
            .ok()
            .and_then(|bytes| serde_json::from_slice::<CacheFile>(&bytes).ok())
            .filter(|file| file.version == CACHE_VERSION)
            .map(|file| file.journals)
            .unwrap_or_default();
        DirCache {
            dir: dir.to_path_buf(),
            journals,
            changed: false,
        }
    }

    pub fn get(&self, name: &str) -> Option<&Cached> {
        self.journals.get(name)
    }

    pub fn put(&mut self, name: &str, cached: Cached) {
        if self.journals.get(name) != Some(&cached) {
            self.journals.insert(name.to_string(), cached);
            self.changed = true;
        }
    }

    /// Forgets journals that are no longer listed.
    pub fn retain(&mut self, listed: &std::collections::HashSet<String>) {
        let before = self.journals.len();
        self.journals.retain(|name, _| listed.contains(name));
        self.changed |= self.journals.len() != before;
    }

    /// Writes the cache if it changed: a private temporary file renamed over the old one, so
    /// a concurrent reader sees the old or the new cache, never a part.
    pub fn save(self) {
        if !self.changed {
            return;
        }
        let file = CacheFile {
            version: CACHE_VERSION,
            journals: self.journals,
        };
        let target = self.dir.join(CACHE_FILE);
        let temporary = self
            .dir
            .join(format!("{CACHE_FILE}.{}.tmp", std::process::id()));
        let written = serde_json::to_vec(&file)
            .map_err(std::io::Error::other)
            .and_then(|bytes| write_private(&temporary, &bytes))
            .and_then(|()| std::fs::rename(&temporary, &target));
        if let Err(error) = written {
            let _ = std::fs::remove_file(&temporary);
            tracing::debug!(
                "could not write the session catalog cache {}: {error}",
                target.display()
            );
        }
    }
}

fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    options.open(path)?.write_all(bytes)
}
