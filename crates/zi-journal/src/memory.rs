//! The session journal: a linear chain of entries and the projections computed from it
//! (docs/configuration.md#session-journals, docs/rpc.md#sessionget_messages).
//!
//! This module keeps the chain in memory. Durability (the JSONL file) is layered on top by
//! [`crate::file`]; every append goes through [`Journal::append`], which writes first and
//! only then changes memory.

use std::borrow::Cow;

use zi_os::clock::{iso_timestamp, now_millis, timestamp_millis};
use zi_protocol::event::{CompactionEntry, EntryData, SessionEntry};
use zi_protocol::message::{AgentMessage, CompactionSummaryMessage, CustomMessage, StopReason};

pub use crate::file::JournalError;
use crate::file::JournalFile;
use crate::stats::StatsTally;

/// Whether an entry shows in the presentation projection (docs/rpc.md#sessionget_messages). Legacy
/// `message` rows with role `custom` follow their `display` flag.
fn presented(data: &EntryData) -> bool {
    match data {
        EntryData::Message {
            message: AgentMessage::Custom(custom),
        } => custom.display,
        EntryData::Message { .. } => true,
        EntryData::CustomMessage { display, .. } => *display,
        _ => false,
    }
}

/// The message an entry projects to, if any: its message, or the `custom` role message of a
/// `custom_message` entry (timestamp taken from the entry).
pub fn entry_message(entry: &SessionEntry) -> Option<Cow<'_, AgentMessage>> {
    match &entry.data {
        EntryData::Message { message } => Some(Cow::Borrowed(message)),
        EntryData::CustomMessage {
            custom_type,
            content,
            display,
            details,
        } => Some(Cow::Owned(AgentMessage::Custom(CustomMessage {
            custom_type: custom_type.clone(),
            content: content.clone(),
            display: *display,
            details: details.clone(),
            timestamp: timestamp_millis(&entry.timestamp),
        }))),
        EntryData::Compaction(compaction) => Some(Cow::Owned(AgentMessage::CompactionSummary(
            CompactionSummaryMessage {
                summary: format_compaction_summary(compaction),
                tokens_before: compaction.tokens_before,
                estimated_tokens_after: compaction.estimated_tokens_after,
                timestamp: timestamp_millis(&entry.timestamp),
            },
        ))),
        _ => None,
    }
}

/// The summary as its message shows it: the raw summary plus the file lists.
pub fn format_compaction_summary(compaction: &CompactionEntry) -> String {
    let mut text = compaction.summary.clone();
    for (tag, files) in [
        ("read-files", &compaction.details.read_files),
        ("modified-files", &compaction.details.modified_files),
    ] {
        if !files.is_empty() {
            text.push_str(&format!("\n\n<{tag}>\n{}\n</{tag}>", files.join("\n")));
        }
    }
    text
}

/// Whether an entry older than the resident tail is still needed in memory: the state
/// entries that full-history projections read (custom state, work plans, outcomes, model and
/// thinking changes). Messages were compacted away; older compaction markers and retry
/// entries affect nothing once a later marker exists.
pub(crate) fn kept_cold(data: &EntryData) -> bool {
    !matches!(
        data,
        EntryData::Message { .. }
            | EntryData::CustomMessage { .. }
            | EntryData::Compaction(_)
            | EntryData::Retry { .. }
    )
}

/// A fresh entry id (UUID v4).
pub fn new_entry_id() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// A session's chain of entries in memory: the resident tail, the state entries before it,
/// and the projections the session reads (context, presentation, statistics); with a file, every
/// append is persisted first.
pub struct Journal {
    /// State entries older than the resident tail ([`kept_cold`]); everything else before
    /// the tail stays on disk only.
    cold: Vec<SessionEntry>,
    /// How many journal entries precede `entries[0]`: retired by a compaction, they are read
    /// back from the file on demand (`session.get_entries`).
    retired: usize,
    /// The resident entries, oldest first.
    entries: Vec<SessionEntry>,
    /// Entry indices of the presentation projection, in presentation order.
    presentation: Vec<usize>,
    /// Index of the latest compaction marker.
    latest_compaction: Option<usize>,
    /// Usage statistics of every entry before the resident tail.
    stats_base: StatsBase,
    file: Option<JournalFile>,
}

/// The usage statistics of the entries before the resident tail: tallied, or (in a resumed
/// journal, until someone asks) still on disk only.
enum StatsBase {
    Tallied(StatsTally),
    OnDisk { first_resident_id: String },
}

/// Where the part of the journal that [`Journal::stats_tally`] cannot see is: every line of
/// `path` before the entry `first_resident_id` ([`crate::stats::tally_prefix`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatsOnDisk {
    /// The journal file.
    pub path: std::path::PathBuf,
    /// The first entry in memory: the tally reads the lines before it.
    pub first_resident_id: String,
}

impl Journal {
    /// An in-memory journal (`--no-session`), or one backed by a pending file.
    pub fn new(file: Option<JournalFile>) -> Self {
        Journal {
            cold: Vec::new(),
            retired: 0,
            entries: Vec::new(),
            presentation: Vec::new(),
            latest_compaction: None,
            stats_base: StatsBase::Tallied(StatsTally::default()),
            file,
        }
    }

    /// Restores a journal from entries read from disk: cold state entries and the resident
    /// tail.
    pub fn restored(
        cold: Vec<SessionEntry>,
        entries: Vec<SessionEntry>,
        file: Option<JournalFile>,
    ) -> Self {
        let mut journal = Journal::new(file);
        // Entries before the resident tail were left on disk; their statistics are read from
        // there when first asked for, so resuming costs nothing for clients that never ask.
        if journal.file.is_some()
            && let Some(first) = entries.first().filter(|first| first.parent_id.is_some())
        {
            journal.stats_base = StatsBase::OnDisk {
                first_resident_id: first.id.clone(),
            };
        }
        journal.cold = cold;
        journal.latest_compaction = entries
            .iter()
            .rposition(|e| matches!(e.data, EntryData::Compaction(_)));
        journal.entries = entries;
        journal.rebuild_presentation();
        journal
    }

    /// The presentation messages among the entries in the last `bytes` bytes of the journal
    /// at `path`, projected as an opened journal projects them (a compaction whose first kept
    /// entry lies before the window shows from its marker on).
    pub fn tail_presentation(path: &std::path::Path, bytes: u64) -> Vec<AgentMessage> {
        let tail = Journal::restored(Vec::new(), crate::file::tail_entries(path, bytes), None);
        (0..tail.presentation_len())
            .filter_map(|i| tail.presentation_message(i).map(Cow::into_owned))
            .collect()
    }

    /// Restores a journal as [`crate::file::open_existing`] read it.
    pub fn from_opened(opened: crate::file::OpenedJournal) -> Self {
        let mut journal = Journal::restored(opened.cold, opened.entries, Some(opened.file));
        journal.retired = opened.retired;
        journal
    }

    /// The number of entries in the whole journal, retired ones included.
    pub fn total_entries(&self) -> usize {
        self.retired + self.entries.len()
    }

    /// How many entries precede the resident ones (only the file holds them).
    pub fn retired_entries(&self) -> usize {
        self.retired
    }

    /// The file backing the journal, if any.
    pub fn file(&self) -> Option<&JournalFile> {
        self.file.as_ref()
    }

    /// The resident entries.
    pub fn entries(&self) -> &[SessionEntry] {
        &self.entries
    }

    /// Cold state entries, then resident entries, in journal order.
    pub fn all_entries(&self) -> impl DoubleEndedIterator<Item = &SessionEntry> {
        self.cold.iter().chain(&self.entries)
    }

    /// The file backing the journal; `None` for an in-memory session (`--no-session`).
    pub fn file_path(&self) -> Option<&std::path::Path> {
        self.file.as_ref().map(JournalFile::path)
    }

    /// Appends an entry: persisted first (when a file backs the journal), then added to memory.
    pub fn append(&mut self, data: EntryData) -> Result<SessionEntry, JournalError> {
        self.append_with_id(data, new_entry_id())
    }

    /// [`Journal::append`] under an id minted earlier with [`new_entry_id`]: an assistant
    /// message is announced (`message_start`) before it is journaled, and clients that show it
    /// while it streams name it by the entry id it will have (docs/acp.md, message ids).
    pub fn append_with_id(
        &mut self,
        data: EntryData,
        id: String,
    ) -> Result<SessionEntry, JournalError> {
        if let EntryData::Message {
            message: AgentMessage::Custom(_),
        } = &data
        {
            return Err(JournalError::from(
                "Custom messages are journaled as custom_message entries, not message rows"
                    .to_string(),
            ));
        }
        let entry = SessionEntry {
            data,
            id,
            parent_id: self.entries.last().map(|e| e.id.clone()),
            timestamp: iso_timestamp(now_millis()),
        };
        if let Some(file) = &mut self.file {
            file.append(&entry, &self.entries)?;
        }
        self.push_in_memory(entry.clone());
        Ok(entry)
    }

    /// Forces buffered journal bytes to stable storage (called when a run settles).
    pub fn sync(&mut self) -> Result<(), JournalError> {
        match &mut self.file {
            Some(file) => file.sync(),
            None => Ok(()),
        }
    }

    fn push_in_memory(&mut self, entry: SessionEntry) {
        let index = self.entries.len();
        let is_compaction = matches!(entry.data, EntryData::Compaction(_));
        let shown = presented(&entry.data);
        self.entries.push(entry);
        if is_compaction {
            self.latest_compaction = Some(index);
            self.retire_compacted();
            self.rebuild_presentation();
        } else if shown {
            self.presentation.push(index);
        }
    }

    /// After a compaction, memory holds what a restored journal would: the resident tail from
    /// the marker's first kept entry, plus the older entries [`kept_cold`] keeps.
    /// Only a written file can give retired entries back, so without one (`--no-session`, or
    /// still pending) they stay resident.
    fn retire_compacted(&mut self) {
        if !self.file.as_ref().is_some_and(JournalFile::is_written) {
            return;
        }
        let Some((marker, _, first_kept)) = self.compaction_window() else {
            return;
        };
        self.retired += first_kept;
        let retired: Vec<SessionEntry> = self.entries.drain(..first_kept).collect();
        match &mut self.stats_base {
            StatsBase::Tallied(tally) => {
                for entry in &retired {
                    tally.add_entry(&entry.data);
                }
            }
            // Retired entries are on disk too: the on-disk part now ends at the new tail.
            StatsBase::OnDisk { first_resident_id } => {
                if let Some(first) = self.entries.first() {
                    *first_resident_id = first.id.clone();
                }
            }
        }
        self.cold
            .extend(retired.into_iter().filter(|entry| kept_cold(&entry.data)));
        self.latest_compaction = Some(marker - first_kept);
        // The tail is what the session needs from now on; let go of the old high-water mark.
        self.entries.shrink_to(self.entries.len() * 2);
    }

    /// The latest compaction marker and the index of its first kept entry.
    fn compaction_window(&self) -> Option<(usize, &CompactionEntry, usize)> {
        let marker = self.latest_compaction?;
        let EntryData::Compaction(compaction) = &self.entries.get(marker)?.data else {
            return None;
        };
        let first_kept = self.entries[..marker]
            .iter()
            .position(|e| e.id == compaction.first_kept_entry_id)
            .unwrap_or(marker);
        Some((marker, compaction, first_kept))
    }

    fn retried_ids(&self, range: std::ops::Range<usize>) -> Vec<&str> {
        self.entries[range]
            .iter()
            .filter_map(|e| match &e.data {
                EntryData::Retry {
                    failed_entry_id, ..
                } => Some(failed_entry_id.as_str()),
                _ => None,
            })
            .collect()
    }

    /// Presentation order (docs/configuration.md#compaction): `[kept-before-M…, M, after-M…]`;
    /// retry-marked failures before the marker and the marker's excluded failure are dropped.
    fn rebuild_presentation(&mut self) {
        let shown = |entries: &[SessionEntry], i: usize| presented(&entries[i].data);
        let presentation = match self.compaction_window() {
            None => (0..self.entries.len())
                .filter(|&i| shown(&self.entries, i))
                .collect(),
            Some((marker, compaction, first_kept)) => {
                let excluded = compaction.excluded_failure_entry_id.as_deref();
                let retried = self.retried_ids(0..marker);
                let dropped = |i: usize| {
                    let id = self.entries[i].id.as_str();
                    Some(id) == excluded || retried.contains(&id)
                };
                (first_kept..marker)
                    .filter(|&i| shown(&self.entries, i) && !dropped(i))
                    .chain(std::iter::once(marker))
                    .chain((marker + 1..self.entries.len()).filter(|&i| shown(&self.entries, i)))
                    .collect()
            }
        };
        self.presentation = presentation;
    }

    /// Number of messages in the presentation projection.
    pub fn presentation_len(&self) -> usize {
        self.presentation.len()
    }

    /// The presentation message at a position.
    pub fn presentation_message(&self, index: usize) -> Option<Cow<'_, AgentMessage>> {
        entry_message(self.entries.get(*self.presentation.get(index)?)?)
    }

    /// Entry indices of the provider-context projection (docs/configuration.md#the-commit):
    /// `[M, kept-before-M…, after-M…]`, minus entries without a message, retry-marked failures
    /// and the marker's excluded failure.
    pub fn context_indices(&self) -> Vec<usize> {
        let retried = self.retried_ids(0..self.entries.len());
        let (order, excluded): (Vec<usize>, Option<&str>) = match self.compaction_window() {
            None => ((0..self.entries.len()).collect(), None),
            Some((marker, compaction, first_kept)) => (
                std::iter::once(marker)
                    .chain(first_kept..marker)
                    .chain(marker + 1..self.entries.len())
                    .collect(),
                compaction.excluded_failure_entry_id.as_deref(),
            ),
        };
        order
            .into_iter()
            .filter(|&i| {
                let entry = &self.entries[i];
                let has_message = matches!(
                    entry.data,
                    EntryData::Message { .. }
                        | EntryData::CustomMessage { .. }
                        | EntryData::Compaction(_)
                );
                has_message
                    && Some(entry.id.as_str()) != excluded
                    && !retried.contains(&entry.id.as_str())
            })
            .collect()
    }

    /// The provider-context projection as messages.
    pub fn context_messages(&self) -> Vec<AgentMessage> {
        self.context_indices()
            .into_iter()
            .filter_map(|i| entry_message(&self.entries[i]).map(Cow::into_owned))
            .collect()
    }

    /// Context messages (borrowed where possible) plus the position from which
    /// provider-reported usage counts: usage reported before the latest compaction marker is
    /// ignored (docs/configuration.md#context-usage).
    pub fn context_view(&self) -> (Vec<Cow<'_, AgentMessage>>, usize) {
        let indices = self.context_indices();
        let anchor = match self.latest_compaction {
            Some(marker) => indices
                .iter()
                .position(|&i| i > marker)
                .unwrap_or(indices.len()),
            None => 0,
        };
        let messages = indices
            .into_iter()
            .filter_map(|i| entry_message(&self.entries[i]))
            .collect();
        (messages, anchor)
    }

    /// The usage statistics of the whole journal, or where the entries it cannot see are.
    pub fn stats_tally(&self) -> Result<StatsTally, StatsOnDisk> {
        match (&self.stats_base, &self.file) {
            (StatsBase::Tallied(base), _) => {
                let mut tally = base.clone();
                for entry in &self.entries {
                    tally.add_entry(&entry.data);
                }
                Ok(tally)
            }
            (StatsBase::OnDisk { first_resident_id }, Some(file)) => Err(StatsOnDisk {
                path: file.path().to_path_buf(),
                first_resident_id: first_resident_id.clone(),
            }),
            // Unreachable: only a file-backed journal leaves entries on disk.
            (StatsBase::OnDisk { .. }, None) => Ok(StatsTally::default()),
        }
    }

    /// Records the tally of the on-disk part `read` describes, unless the resident tail has
    /// moved since (then [`Journal::stats_tally`] names the new part).
    pub fn set_stats_base(&mut self, read: &StatsOnDisk, tally: StatsTally) {
        if let StatsBase::OnDisk { first_resident_id } = &self.stats_base
            && *first_resident_id == read.first_resident_id
        {
            self.stats_base = StatsBase::Tallied(tally);
        }
    }

    /// The latest compaction entry, if any.
    pub fn latest_compaction(&self) -> Option<&CompactionEntry> {
        self.compaction_window()
            .map(|(_, compaction, _)| compaction)
    }

    /// Id of the latest entry (the journal leaf).
    pub fn leaf_id(&self) -> Option<&str> {
        self.entries.last().map(|e| e.id.as_str())
    }

    /// `custom` entries of one type, oldest first.
    pub fn custom_entries<'a>(
        &'a self,
        custom_type: &'a str,
    ) -> impl Iterator<Item = &'a SessionEntry> + 'a {
        self.cold.iter().chain(&self.entries).filter(move |e| {
            matches!(&e.data, EntryData::Custom { custom_type: t, .. } if t == custom_type)
        })
    }

    /// The latest work plan, if any.
    pub fn latest_work_plan(&self) -> Option<&zi_protocol::state::WorkPlan> {
        self.all_entries().rev().find_map(|e| match &e.data {
            EntryData::WorkPlan(plan) => Some(plan),
            _ => None,
        })
    }

    /// The model recorded last (a model change or the latest assistant message), for resume.
    pub fn last_model(&self) -> Option<(String, String)> {
        self.all_entries().rev().find_map(|e| match &e.data {
            EntryData::ModelChange { provider, model_id } => {
                Some((provider.clone(), model_id.clone()))
            }
            EntryData::Message {
                message: AgentMessage::Assistant(a),
            } => Some((a.provider.clone(), a.model.clone())),
            _ => None,
        })
    }

    /// The thinking level recorded last, for resume.
    pub fn last_thinking_level(&self) -> Option<zi_protocol::ThinkingLevel> {
        self.all_entries().rev().find_map(|e| match &e.data {
            EntryData::ThinkingLevelChange { thinking_level } => Some(*thinking_level),
            _ => None,
        })
    }

    /// The latest entry if it is an assistant message that failed with `error`.
    pub fn last_failed_assistant(&self) -> Option<&SessionEntry> {
        let last = self.entries.last()?;
        match &last.data {
            EntryData::Message {
                message: AgentMessage::Assistant(a),
            } if a.stop_reason == StopReason::Error => Some(last),
            _ => None,
        }
    }
}
