//! Writing: a pending journal created whole on its first durable entry, then appends that are
//! whole or nothing.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::Serialize;
use zi_protocol::event::{EntryData, SessionEntry};
use zi_protocol::message::AgentMessage;

use super::{JournalError, MAX_JOURNAL_BYTES, SessionHeader};
use crate::blobs::{Blob, BlobDir, EncodedEntry, encode_format_2};
use crate::messages;

pub(super) enum FileState {
    Pending,
    Open(File),
}

/// A journal's file, open for appending, or pending: a new session's file is written only
/// once its first assistant message makes it worth keeping.
pub struct JournalFile {
    pub(super) path: PathBuf,
    pub(super) header: SessionHeader,
    pub(super) state: FileState,
    /// Length of the file's complete lines: where the next entry goes.
    pub(super) bytes: u64,
    pub(super) dirty: bool,
    /// A failed append could not be cut back: the file may end in a partial line, which the
    /// next append removes before writing.
    pub(super) torn: bool,
    /// The image blobs of a format-2 journal; `None` for format 1, whose images stay inline.
    pub(super) blobs: Option<BlobDir>,
}

/// Entries whose append makes a pending session durable.
pub(super) fn materializes(data: &EntryData) -> bool {
    matches!(
        data,
        EntryData::Message {
            message: AgentMessage::Assistant(_),
        } | EntryData::Custom { .. }
            | EntryData::CustomMessage { .. }
            | EntryData::Subagent(_)
    )
}

pub(crate) fn encode_line<T: Serialize>(value: &T) -> Result<Vec<u8>, JournalError> {
    let mut line = serde_json::to_vec(value).map_err(messages::encode_failed)?;
    line.push(b'\n');
    Ok(line)
}

impl JournalFile {
    /// A journal that will be created at `path` when it first needs to exist.
    pub fn pending(path: PathBuf, header: SessionHeader) -> Self {
        JournalFile {
            path,
            header,
            state: FileState::Pending,
            bytes: 0,
            dirty: false,
            torn: false,
            blobs: None,
        }
        .with_blobs()
    }

    /// Format 2 keeps images in blobs; a format-1 journal (continued) keeps them inline.
    pub(super) fn with_blobs(mut self) -> Self {
        self.blobs = (self.header.version >= 2).then(|| BlobDir::beside(&self.path));
        self
    }

    fn encode(&self, entry: &SessionEntry) -> Result<EncodedEntry, JournalError> {
        match self.blobs {
            Some(_) => encode_format_2(entry).map_err(JournalError::from),
            None => Ok(EncodedEntry {
                line: encode_line(entry)?,
                blobs: Vec::new(),
            }),
        }
    }

    /// Whether `lines` more bytes and `blobs` new blob files stay within the bound.
    fn fits(&self, lines: u64, blobs: &[Blob]) -> bool {
        let blob_bytes = self
            .blobs
            .as_ref()
            .map_or(0, |dir| dir.bytes() + dir.added_bytes(blobs));
        self.bytes + lines + blob_bytes <= MAX_JOURNAL_BYTES
    }

    /// Writes the blobs an entry refers to before its line.
    fn write_blobs(&mut self, blobs: &[Blob]) -> Result<(), JournalError> {
        match &mut self.blobs {
            Some(dir) if !blobs.is_empty() => dir.write(blobs).map_err(JournalError::from),
            _ => Ok(()),
        }
    }

    /// Where the file is (or will be, while pending).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Line 1 of the file.
    pub fn header(&self) -> &SessionHeader {
        &self.header
    }

    /// Whether the file exists (it is no longer pending).
    pub fn is_written(&self) -> bool {
        matches!(self.state, FileState::Open(_))
    }

    /// Persists `entry`, given the entries already in memory (written too if the file is
    /// still pending). On error nothing of the entry is on disk: a failed creation leaves no
    /// file (the journal stays pending and the next durable entry tries again), and a failed
    /// append cuts the file back to its last complete line.
    pub fn append(
        &mut self,
        entry: &SessionEntry,
        previous: &[SessionEntry],
    ) -> Result<(), JournalError> {
        let pending = matches!(self.state, FileState::Pending);
        if pending && !materializes(&entry.data) {
            return Ok(());
        }
        // A pending journal is written whole: the header, every buffered entry, this one.
        let mut bytes = if pending {
            encode_line(&self.header)?
        } else {
            Vec::new()
        };
        let mut blobs = Vec::new();
        let written = if pending { previous } else { &[] };
        for each in written.iter().chain([entry]) {
            let encoded = self.encode(each)?;
            bytes.extend(encoded.line);
            blobs.extend(encoded.blobs);
        }
        if !self.fits(bytes.len() as u64, &blobs) {
            return Err(messages::journal_full(self.path.display()).into());
        }
        // Blobs first: a line never refers to a blob that is not on disk.
        self.write_blobs(&blobs)?;
        let line = bytes;
        match &mut self.state {
            FileState::Pending => {
                let file = create_whole(&self.path, &line)?;
                self.bytes = line.len() as u64;
                self.state = FileState::Open(file);
                // `create_whole` synced the data and the directory entry.
                self.dirty = false;
                Ok(())
            }
            FileState::Open(file) => {
                let append_error =
                    |error: std::io::Error| messages::append_failed(self.path.display(), error);
                if self.torn {
                    cut_back(file, self.bytes).map_err(append_error)?;
                    self.torn = false;
                }
                if let Err(error) = file.write_all(&line).and_then(|()| file.flush()) {
                    // Whole or nothing: remove what reached the file of this line.
                    self.torn = cut_back(file, self.bytes).is_err();
                    return Err(append_error(error).into());
                }
                self.bytes += line.len() as u64;
                self.dirty = true;
                Ok(())
            }
        }
    }

    /// fsyncs the file if anything was written since the last sync.
    pub fn sync(&mut self) -> Result<(), JournalError> {
        if let FileState::Open(file) = &self.state
            && self.dirty
        {
            file.sync_data().map_err(|error| {
                format!("Could not sync journal {}: {error}", self.path.display())
            })?;
            self.dirty = false;
        }
        Ok(())
    }
}

/// Truncates `file` to `len` and puts the write position there.
pub(super) fn cut_back(file: &mut File, len: u64) -> std::io::Result<()> {
    use std::io::{Seek, SeekFrom};
    file.set_len(len)?;
    file.seek(SeekFrom::Start(len)).map(|_| ())
}

/// Creates the journal at `path` holding exactly `bytes`, durably: the session directory
/// (0700) is created as needed, the file (0600) with create-new semantics, its data is synced
/// and then every directory whose entries changed. The bytes are written under a staging name
/// first and the journal's name is linked to them only once they are synced, so a crash at any
/// point never leaves an empty or partial journal under its name (a leftover staging file does
/// not end in `.jsonl`, so no listing sees it). If any step fails, the files are removed again,
/// so a later attempt is not refused because a partial file exists.
pub(crate) fn create_whole(path: &Path, bytes: &[u8]) -> Result<File, JournalError> {
    let parent = path
        .parent()
        .filter(|parent| !parent.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let created = create_private_dir(parent)
        .map_err(|error| messages::create_dir_failed(path.display(), parent.display(), error))?;
    let mut staging_name = path.file_name().unwrap_or_default().to_os_string();
    staging_name.push(".creating");
    let staging = parent.join(staging_name);
    // A staging file left by a crash of an earlier attempt at this very session is stale.
    let _ = std::fs::remove_file(&staging);
    let mut file = open_new_private(&staging)?;
    let mut linked = false;
    let written = file
        .write_all(bytes)
        .and_then(|()| file.sync_data())
        .map_err(|error| messages::write_failed(path.display(), error))
        .and_then(|()| {
            // A hard link keeps create-new semantics: it fails if the journal already exists.
            std::fs::hard_link(&staging, path)
                .map_err(|error| messages::create_failed(path.display(), error))
        })
        .and_then(|()| {
            linked = true;
            std::fs::remove_file(&staging)
                .map_err(|error| messages::write_failed(path.display(), error))
        })
        .and_then(|()| {
            sync_dirs(parent, created.as_deref()).map_err(|(dir, error)| {
                messages::sync_dir_failed(path.display(), dir.display(), error)
            })
        });
    match written {
        Ok(()) => Ok(file),
        Err(error) => {
            drop(file);
            let _ = std::fs::remove_file(&staging);
            if linked && let Err(removal) = std::fs::remove_file(path) {
                tracing::error!(
                    "could not remove the partial journal {}: {removal}",
                    path.display()
                );
            }
            Err(error.into())
        }
    }
}

/// fsyncs `dir` (which gained the journal's entry) and, when directories were created down
/// from `first_created`, the parent of each of them.
pub(super) fn sync_dirs<'a>(
    dir: &'a Path,
    first_created: Option<&'a Path>,
) -> Result<(), (&'a Path, std::io::Error)> {
    let mut synced = vec![dir];
    if let Some(first) = first_created {
        let mut current = dir;
        while current != first {
            match current.parent() {
                Some(parent) => current = parent,
                None => break,
            }
            synced.push(current);
        }
        if let Some(parent) = first.parent() {
            synced.push(parent);
        }
    }
    for dir in synced {
        File::open(dir)
            .and_then(|handle| handle.sync_all())
            .map_err(|error| (dir, error))?;
    }
    Ok(())
}

/// Creates `dir` and its missing ancestors (mode 0700); returns the topmost directory it
/// created, if any.
pub(crate) fn create_private_dir(dir: &Path) -> std::io::Result<Option<PathBuf>> {
    let first_missing = dir
        .ancestors()
        .take_while(|ancestor| !ancestor.as_os_str().is_empty() && !ancestor.exists())
        .last()
        .map(Path::to_path_buf);
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        builder.mode(0o700);
    }
    builder.create(dir)?;
    Ok(first_missing)
}

pub(super) fn open_new_private(path: &Path) -> Result<File, JournalError> {
    let mut options = OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    options
        .open(path)
        .map_err(|error| JournalError(messages::create_failed(path.display(), error)))
}
