//! The session catalog, raw entry pages and forks (`session.list`, `session.get_entries`,
//! `session.fork`): read-only for this session, so they are answered in every activity. File
//! reads happen outside the session lock; the lock is held only to snapshot what memory holds.

use std::path::PathBuf;

use zi_journal::catalog;
use zi_journal::file::{JournalFile, SessionHeader};
use zi_journal::fork::{ForkSource, fork_path, write_fork};
use zi_os::clock::{iso_timestamp, now_millis};
use zi_protocol::event::SessionEntry;
use zi_protocol::params::SessionListScope;
use zi_protocol::results::{EntryPage, ForkResult, SessionListPage};

use super::AgentSession;
use super::queries::{PAGE_BYTE_BOUND, PAGE_BYTE_START, encoded_len};
use crate::errors::SessionError;

impl AgentSession {
    /// Sets the cwd's session directory when it is not the default (`--session-dir`).
    pub fn set_session_dir(&self, dir: PathBuf) {
        let _ = self.inner.session_dir.set(dir);
    }

    /// The directory new journals of this cwd go to, which `--continue` reads.
    fn session_dir(&self) -> PathBuf {
        self.inner.session_dir.get().cloned().unwrap_or_else(|| {
            zi_journal::file::default_session_dir(&self.inner.agent_dir, &self.inner.cwd)
        })
    }

    /// One page of the session catalog (blocking file I/O).
    pub fn list_sessions(
        &self,
        start: u64,
        limit: u64,
        scope: SessionListScope,
    ) -> SessionListPage {
        let own_dir = self.session_dir();
        let cwd = self.inner.cwd.display().to_string();
        let start_index = usize::try_from(start).unwrap_or(usize::MAX);
        let limit = usize::try_from(limit).unwrap_or(usize::MAX);
        let catalog = match scope {
            SessionListScope::Cwd => catalog::list(&[own_dir], Some(&cwd), start_index, limit),
            SessionListScope::All => catalog::list(
                &catalog::all_session_dirs(&self.inner.agent_dir, &own_dir),
                None,
                start_index,
                limit,
            ),
        };
        let total = catalog.total;
        let sessions = catalog.sessions;
        let next = start.saturating_add(sessions.len() as u64);
        SessionListPage {
            start,
            total,
            next_start: (next < total).then_some(next),
            sessions,
            skipped: catalog.skipped,
        }
    }

    /// One page of the whole journal's entries in journal order, with the message pages' byte
    /// bound (blocking file I/O for entries a compaction retired from memory).
    pub fn entries_page(&self, start: u64, limit: u64) -> Result<EntryPage, SessionError> {
        let (total, retired, path, resident) = {
            let state = self.lock();
            let journal = &state.journal;
            let total = journal.total_entries();
            let retired = journal.retired_entries();
            let begin = usize::try_from(start).unwrap_or(usize::MAX).min(total);
            let end = begin
                .saturating_add(usize::try_from(limit).unwrap_or(usize::MAX))
                .min(total);
            let resident: Vec<SessionEntry> = journal.entries()
                [begin.max(retired) - retired..end.max(retired) - retired]
                .to_vec();
            let path = (begin < retired)
                .then(|| {
                    journal
                        .file_path()
                        .map(|p| (p.to_path_buf(), end.min(retired)))
                })
                .flatten();
            (total, retired, path, resident)
        };
        let begin = usize::try_from(start).unwrap_or(usize::MAX).min(total);
        let mut candidates = match path {
            Some((path, retired_end)) if begin < retired => {
                zi_journal::entries::read_entries(&path, begin, retired_end)?
            }
            _ => Vec::new(),
        };
        candidates.extend(resident);
        let mut accumulated = PAGE_BYTE_START;
        let mut entries = Vec::with_capacity(candidates.len());
        for (offset, entry) in candidates.into_iter().enumerate() {
            let bytes = encoded_len(&entry).map_or(u64::MAX, |len| len + 1);
            if bytes > PAGE_BYTE_BOUND {
                return Err(SessionError::EntryPageTooLarge(start + offset as u64));
            }
            if !entries.is_empty() && accumulated + bytes > PAGE_BYTE_BOUND {
                break;
            }
            entries.push(entry);
            accumulated += bytes;
        }
        let total = total as u64;
        let next = start.saturating_add(entries.len() as u64);
        Ok(EntryPage {
            start,
            total,
            next_start: (next < total).then_some(next),
            entries,
        })
    }

    /// Writes a fork of this session's journal up to and including `entry_id` (blocking file
    /// I/O); the session itself is unchanged.
    pub fn fork(&self, entry_id: &str) -> Result<ForkResult, SessionError> {
        let session_id = uuid::Uuid::new_v4().to_string();
        let (parent, header, pending) = {
            let state = self.lock();
            let Some(file) = state.journal.file() else {
                return Err(SessionError::ForkWithoutJournal);
            };
            let parent = file.path().to_path_buf();
            let mut header = SessionHeader::new(
                &session_id,
                std::path::Path::new(&file.header().cwd),
                iso_timestamp(now_millis()),
            );
            header.parent_session = Some(parent.display().to_string());
            // A pending journal has no file to copy: memory holds all of it.
            let pending =
                (!JournalFile::is_written(file)).then(|| state.journal.entries().to_vec());
            (parent, header, pending)
        };
        let path = fork_path(&parent, &session_id);
        let source = match &pending {
            Some(entries) => ForkSource::Pending(entries),
            None => ForkSource::Written(&parent),
        };
        write_fork(source, entry_id, &path, &header)?;
        Ok(ForkResult {
            session_id,
            path: path.display().to_string(),
        })
    }
}
