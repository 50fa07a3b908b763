//! The session journal: a linear chain of entries and the projections computed from it
//! (rpc-reference §11, runtime-reference §12).
//!
//! This module keeps the chain in memory. Durability (the JSONL file) is layered on top by
//! [`crate::journal_file`]; every append goes through [`Journal::append`], which writes first and
//! only then changes memory.

use std::borrow::Cow;

use zi_protocol::event::{EntryData, SessionEntry};
use zi_protocol::message::{AgentMessage, CustomMessage, StopReason};

use crate::journal_file::JournalFile;

/// Formats a timestamp as ISO-8601 UTC with milliseconds.
pub fn iso_timestamp(millis: i64) -> String {
    jiff::Timestamp::from_millisecond(millis)
        .map(|ts| ts.strftime("%Y-%m-%dT%H:%M:%S.%3fZ").to_string())
        .unwrap_or_else(|_| "1970-01-01T00:00:00.000Z".to_string())
}

pub fn now_millis() -> i64 {
    zi_ai::stream::now_millis()
}

/// Parses an entry timestamp back to epoch milliseconds (0 if malformed).
pub fn timestamp_millis(timestamp: &str) -> i64 {
    timestamp
        .parse::<jiff::Timestamp>()
        .map_or(0, |ts| ts.as_millisecond())
}

/// Whether an entry shows in the presentation projection (rpc-reference §11.4). Legacy
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
        _ => None,
    }
}

pub struct Journal {
    entries: Vec<SessionEntry>,
    /// Index of every entry that maps to a message in the presentation projection.
    presentation: Vec<usize>,
    file: Option<JournalFile>,
}

impl Journal {
    /// An in-memory journal (`--no-session`), or one backed by a pending file.
    pub fn new(file: Option<JournalFile>) -> Self {
        Journal {
            entries: Vec::new(),
            presentation: Vec::new(),
            file,
        }
    }

    /// Restores a journal from entries read from disk.
    pub fn restored(entries: Vec<SessionEntry>, file: Option<JournalFile>) -> Self {
        let mut journal = Journal::new(file);
        for entry in entries {
            journal.push_in_memory(entry);
        }
        journal
    }

    pub fn entries(&self) -> &[SessionEntry] {
        &self.entries
    }

    pub fn file_path(&self) -> Option<&std::path::Path> {
        self.file.as_ref().map(JournalFile::path)
    }

    /// Appends an entry: persisted first (when a file backs the journal), then added to memory.
    pub fn append(&mut self, data: EntryData) -> Result<SessionEntry, String> {
        let entry = SessionEntry {
            data,
            id: uuid::Uuid::new_v4().to_string(),
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
    pub fn sync(&mut self) -> Result<(), String> {
        match &mut self.file {
            Some(file) => file.sync(),
            None => Ok(()),
        }
    }

    fn push_in_memory(&mut self, entry: SessionEntry) {
        if presented(&entry.data) {
            self.presentation.push(self.entries.len());
        }
        self.entries.push(entry);
    }

    /// Number of messages in the presentation projection.
    pub fn presentation_len(&self) -> usize {
        self.presentation.len()
    }

    /// The presentation message at a position.
    pub fn presentation_message(&self, index: usize) -> Option<Cow<'_, AgentMessage>> {
        entry_message(self.entries.get(*self.presentation.get(index)?)?)
    }

    /// The provider-context projection: messages and custom messages, minus assistant
    /// failures marked by a `retry` entry.
    pub fn context_messages(&self) -> Vec<AgentMessage> {
        let retried: Vec<&str> = self
            .entries
            .iter()
            .filter_map(|e| match &e.data {
                EntryData::Retry {
                    failed_entry_id, ..
                } => Some(failed_entry_id.as_str()),
                _ => None,
            })
            .collect();
        self.entries
            .iter()
            .filter(|e| !retried.contains(&e.id.as_str()))
            .filter_map(|e| entry_message(e).map(Cow::into_owned))
            .collect()
    }

    /// `custom` entries of one type, oldest first.
    pub fn custom_entries<'a>(
        &'a self,
        custom_type: &'a str,
    ) -> impl Iterator<Item = &'a SessionEntry> + 'a {
        self.entries.iter().filter(move |e| {
            matches!(&e.data, EntryData::Custom { custom_type: t, .. } if t == custom_type)
        })
    }

    /// The latest work plan, if any.
    pub fn latest_work_plan(&self) -> Option<&zi_protocol::state::WorkPlan> {
        self.entries.iter().rev().find_map(|e| match &e.data {
            EntryData::WorkPlan(plan) => Some(plan),
            _ => None,
        })
    }

    /// The model recorded last (a model change or the latest assistant message), for resume.
    pub fn last_model(&self) -> Option<(String, String)> {
        self.entries.iter().rev().find_map(|e| match &e.data {
            EntryData::ModelChange { provider, model_id } => {
                Some((provider.clone(), model_id.clone()))
            }
            EntryData::Message {
                message: AgentMessage::Assistant(a),
            } => Some((a.provider.clone(), a.model.clone())),
            _ => None,
        })
    }

    pub fn last_thinking_level(&self) -> Option<zi_protocol::ThinkingLevel> {
        self.entries.iter().rev().find_map(|e| match &e.data {
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
