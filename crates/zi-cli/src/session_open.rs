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

use crate::args::Args;
use crate::runtime::warn;

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

fn session_dir(args: &Args, agent_dir: &Path, cwd: &Path) -> PathBuf {
    match &args.session_dir {
        Some(dir) => absolute(dir, cwd),
        None => default_session_dir(agent_dir, cwd),
    }
}

/// Opens or creates the session's journal. `cwd` is the invocation's working directory; a
/// resumed session takes its cwd from the journal header instead.
pub fn open(
    args: &Args,
    process_cwd: &Path,
    cwd: PathBuf,
    agent_dir: &Path,
) -> Result<OpenedSession> {
    match existing_journal(args, process_cwd, &cwd, agent_dir) {
        Some(path) => resume(&path),
        None => Ok(new_session(args, cwd, agent_dir)),
    }
}

/// The journal `--resume` names or `--continue` finds, if the invocation resumes one.
pub fn existing_journal(
    args: &Args,
    process_cwd: &Path,
    cwd: &Path,
    agent_dir: &Path,
) -> Option<PathBuf> {
    if let Some(file) = &args.resume {
        Some(absolute(file, process_cwd))
    } else if args.continue_session {
        find_latest_for_cwd(&session_dir(args, agent_dir, cwd), cwd)
    } else {
        None
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

fn new_session(args: &Args, cwd: PathBuf, agent_dir: &Path) -> OpenedSession {
    let session_id = uuid::Uuid::new_v4().to_string();
    let header = SessionHeader::new(&session_id, &cwd, iso_timestamp(now_millis()));
    let file = (!args.no_session).then(|| {
        let dir = session_dir(args, agent_dir, &cwd);
        JournalFile::pending(dir.join(format!("{session_id}.jsonl")), header.clone())
    });
    OpenedSession {
        cwd,
        header,
        journal: Journal::new(file),
        restored: None,
    }
}
