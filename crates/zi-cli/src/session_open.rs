//! Session selection (step 1 of docs/cli.md#start-up, docs/configuration.md#session-journals): a
//! new journal, an ephemeral one, the newest journal of the cwd (`--continue`) or an exact file
//! (`--resume`).

use std::path::{Path, PathBuf};

use anyhow::{Result, anyhow, bail};
use zi_journal::file::{
    JournalFile, SessionHeader, default_session_dir, find_latest_for_cwd, open_existing,
};
use zi_journal::memory::Journal;
use zi_os::clock::{iso_timestamp, now_millis};
use zi_protocol::ThinkingLevel;

use crate::runtime::warn;
use crate::startup::{SessionChoice, SessionOptions};

/// What a resumed journal says about the session's model and thinking level.
pub struct Restored {
    pub model: Option<(String, String)>,
    pub thinking: Option<ThinkingLevel>,
}

pub struct OpenedSession {
    pub cwd: PathBuf,
    pub header: SessionHeader,
    pub journal: Journal,
    /// `Some` when an existing journal was opened.
    pub restored: Option<Restored>,
}

fn absolute(path: &Path, base: &Path) -> PathBuf {
    if path.is_absolute() {
        path.to_path_buf()
    } else {
        base.join(path)
    }
}

fn session_dir(options: &SessionOptions, cwd: &Path) -> PathBuf {
    match &options.session_dir {
        Some(dir) => absolute(dir, cwd),
        None => default_session_dir(&options.agent_dir, cwd),
    }
}

/// Opens or creates the session's journal. `cwd` is the invocation's working directory; a
/// resumed session takes its cwd from the journal header instead.
pub fn open(options: &SessionOptions, cwd: PathBuf) -> Result<OpenedSession> {
    match existing_journal(options, &cwd) {
        Some(path) => resume(&path),
        None => Ok(new_session(options, cwd)),
    }
}

/// The journal `--resume` names or `--continue` finds, if the invocation resumes one.
pub fn existing_journal(options: &SessionOptions, cwd: &Path) -> Option<PathBuf> {
    match &options.choice {
        SessionChoice::Resume(file) => Some(file.clone()),
        SessionChoice::Continue => find_latest_for_cwd(&session_dir(options, cwd), cwd),
        SessionChoice::New | SessionChoice::Ephemeral => None,
    }
}

fn resume(path: &Path) -> Result<OpenedSession> {
    let mut opened = open_existing(path).map_err(|e| anyhow!(e))?;
    if let Some(repair) = opened.repaired.take() {
        warn(&repair);
    }
    let cwd = PathBuf::from(&opened.header.cwd);
    if !cwd.is_dir() {
        bail!(
            "The working directory of session {} no longer exists: {}",
            opened.header.id,
            cwd.display()
        );
    }
    let header = opened.header.clone();
    let journal = Journal::from_opened(opened);
    let restored = Restored {
        model: journal.last_model(),
        thinking: journal.last_thinking_level(),
    };
    Ok(OpenedSession {
        cwd,
        header,
        journal,
        restored: Some(restored),
    })
}

fn new_session(options: &SessionOptions, cwd: PathBuf) -> OpenedSession {
    let session_id = uuid::Uuid::new_v4().to_string();
    let header = SessionHeader::new(&session_id, &cwd, iso_timestamp(now_millis()));
    let file = (options.choice != SessionChoice::Ephemeral).then(|| {
        let dir = session_dir(options, &cwd);
        JournalFile::pending(dir.join(format!("{session_id}.jsonl")), header.clone())
    });
    OpenedSession {
        cwd,
        header,
        journal: Journal::new(file),
        restored: None,
    }
}
