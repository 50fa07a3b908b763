//! Custom entries and custom messages (docs/extensions.md#state-and-messages,
//! docs/architecture.md#the-run, docs/rpc.md#event-order, docs/rpc.md#sessionget_messages): a real
//! `AgentSession` with a persistent journal in a temporary directory talks to the mock LLM over
//! loopback HTTP.

use std::path::{Path, PathBuf};

use base64::Engine as _;
use serde_json::{Value, json};
use zi_agent::AgentSession;
use zi_agent::custom::{CustomDelivery, CustomMessageInput};
use zi_journal::file::{JournalFile, SessionHeader, open_existing};
use zi_journal::memory::Journal;
use zi_os::clock::timestamp_millis;
use zi_os::sync::lock;
use zi_protocol::event::{AgentSessionEvent, EntryData, SessionEntry};
use zi_protocol::message::{AgentMessage, ContentBlock, MessageContent};
use zi_protocol::request::Delivery;
use zi_test_support::mock_llm::{MockLlm, Step};

use crate::common::harness::Harness;
use crate::common::session::{
    Events, Options, abort, count, idle, labels_of, log_events, mock_session, run,
};
use crate::common::tools::{Gate, gate_tool};
use crate::common::{
    WAIT, assert_steer_then_follow_up_on_the_wire, role, wire_messages, wire_text, wire_user_texts,
};

mod deliveries;
mod entries;
mod restart;

const CUSTOM_MESSAGE_WHILE_RUNNING: &str =
    "Cannot append or trigger a custom message while the agent is running";
const CUSTOM_QUEUE_WHILE_IDLE: &str =
    "Custom messages can be steered or queued for follow-up only during an active run";
const QUEUE_CAPACITY: &str = "Queue capacity exceeded (maximum 32 messages or 8 MiB).";
const NO_MODEL: &str = "No model selected. Use /login, then /model.";

// ---------------------------------------------------------------------------------------------
// Harness
// ---------------------------------------------------------------------------------------------

/// The model `m1` takes images: the restart test persists a custom message carrying one.
fn m1_fields() -> Value {
    json!({"id": "m1", "input": ["text", "image"]})
}

/// The journal file the harness's session writes (it may not exist yet: new journals start
/// pending).
fn journal_path(dir: &Path) -> PathBuf {
    dir.join("sessions").join("custom-messages-test.jsonl")
}

async fn harness_with(options: Options) -> Harness {
    Harness::start_with("custom-messages-test", m1_fields(), options, |dir| {
        let header = SessionHeader::new(
            "custom-messages-test",
            dir,
            "2026-01-01T00:00:00.000Z".into(),
        );
        Journal::new(Some(JournalFile::pending(journal_path(dir), header)))
    })
    .await
}

async fn harness() -> Harness {
    harness_with(Options::default()).await
}

/// A harness whose only tool is the gate.
async fn gated_harness() -> (Harness, Gate) {
    let (gate, gate_ctl) = gate_tool();
    let h = harness_with(Options {
        tools: vec![gate],
        ..Options::default()
    })
    .await;
    (h, gate_ctl)
}

/// Reopens a journal file the way a resumed session does.
fn reopen(mock: &MockLlm, dir: &Path, path: &Path, options: Options) -> (AgentSession, Events) {
    let opened = open_existing(path).unwrap_or_else(|e| panic!("reopen {}: {e}", path.display()));
    assert_eq!(
        opened.repaired, None,
        "a cleanly written journal needs no repair"
    );
    let journal = Journal::restored(opened.cold, opened.entries, Some(opened.file));
    mock_session(
        "custom-messages-test",
        mock,
        dir,
        journal,
        m1_fields(),
        options,
    )
}

impl Harness {
    /// The journal file of the session (it may not exist yet: new journals start pending).
    fn path(&self) -> PathBuf {
        journal_path(self.dir.path())
    }
}

fn appended(events: &[AgentSessionEvent]) -> Vec<SessionEntry> {
    events
        .iter()
        .filter_map(|e| match e {
            AgentSessionEvent::EntryAppended { entry } => Some(entry.clone()),
            _ => None,
        })
        .collect()
}

fn custom_message(custom_type: &str, text: &str, display: bool) -> CustomMessageInput {
    CustomMessageInput {
        custom_type: custom_type.into(),
        content: MessageContent::Text(text.into()),
        display,
        details: None,
    }
}

/// Admits a custom message that must not start a run.
fn send(session: &AgentSession, message: CustomMessageInput, delivery: CustomDelivery) {
    let starter = session
        .send_custom_message(message, delivery)
        .unwrap_or_else(|e| panic!("custom message ({delivery:?}) refused: {e}"));
    assert!(starter.is_none(), "{delivery:?} must not start a run");
}

fn refused(
    session: &AgentSession,
    message: CustomMessageInput,
    delivery: CustomDelivery,
) -> String {
    match session.send_custom_message(message, delivery) {
        Ok(_) => panic!("custom message with {delivery:?} was admitted"),
        Err(error) => error.to_string(),
    }
}

/// Replaces format-2 image references (`{"type":"image","mimeType":…,"blob":{"sha256":…}}`)
/// with the base64 `data` of their blob files, as the journal reader does.
fn inline_blobs(value: &mut Value, blobs: &Path) {
    match value {
        Value::Object(map) => {
            let sha = map
                .get("blob")
                .and_then(|blob| blob["sha256"].as_str())
                .map(str::to_string);
            if let (Some("image"), Some(sha)) = (map.get("type").and_then(Value::as_str), sha) {
                let bytes = std::fs::read(blobs.join(&sha)).expect("the blob file exists");
                map.remove("blob");
                map.insert(
                    "data".into(),
                    base64::engine::general_purpose::STANDARD
                        .encode(bytes)
                        .into(),
                );
                return;
            }
            map.values_mut()
                .for_each(|child| inline_blobs(child, blobs));
        }
        Value::Array(items) => items
            .iter_mut()
            .for_each(|child| inline_blobs(child, blobs)),
        _ => {}
    }
}

/// Header and entries of a journal file; the file must end with a newline and every entry
/// must follow its predecessor.
fn read_journal(path: &Path) -> (Value, Vec<SessionEntry>) {
    let text =
        std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    assert!(text.ends_with('\n'), "journal ends with a newline");
    let mut lines = text.lines();
    let header: Value = serde_json::from_str(lines.next().unwrap_or_default()).expect("header");
    let mut entries: Vec<SessionEntry> = Vec::new();
    for line in lines {
        let mut value: Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("entry {line}: {e}"));
        inline_blobs(&mut value, &path.with_extension("blobs"));
        let entry: SessionEntry =
            serde_json::from_value(value).unwrap_or_else(|e| panic!("entry {line}: {e}"));
        assert_eq!(
            entry.parent_id.as_deref(),
            entries.last().map(|e| e.id.as_str()),
            "linear chain at {line}"
        );
        entries.push(entry);
    }
    (header, entries)
}

fn file_len(path: &Path) -> u64 {
    std::fs::metadata(path).map(|m| m.len()).unwrap_or(0)
}
