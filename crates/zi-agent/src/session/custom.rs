//! Custom entries and custom messages (docs/extensions.md#state-and-messages,
//! docs/configuration.md#custom-entries-and-messages-internal-api): the internal API extensions use
//! to keep durable state and to add messages.
//!
//! - `custom` entries hold extension state: never in provider context, never in message pages,
//!   announced by `entry_appended`.
//! - `custom_message` entries always enter provider context; they appear in message pages only
//!   when `display` is true. Hidden ones are still announced by `entry_appended`.

use serde_json::Value;
use zi_protocol::event::{AgentSessionEvent, EntryData, SessionEntry};
use zi_protocol::message::{ContentBlock, MessageContent};
use zi_protocol::state::QueuedDelivery;

use crate::errors::{Activity, Operation, SessionError};
use crate::session::{AgentSession, RunActivity, RunStarter};

/// Longest custom type name.
pub(crate) const MAX_CUSTOM_TYPE_BYTES: usize = 128;
/// Bounds of custom JSON values (entry data, message details).
pub(crate) const MAX_JSON_DEPTH: usize = 32;
pub(crate) const MAX_JSON_NODES: usize = 4096;
pub(crate) const MAX_JSON_BYTES: usize = 256 * 1024;
/// Largest custom-message content.
pub(crate) const MAX_CUSTOM_CONTENT_BYTES: u64 = 1024 * 1024;
/// Custom-state history per type.
pub(crate) const MAX_CUSTOM_HISTORY_ENTRIES: usize = 2048;
pub(crate) const MAX_CUSTOM_HISTORY_BYTES: usize = 2 * 1024 * 1024;
/// The reserved program-state type has a larger byte budget.
pub(crate) const PROGRAM_STATE_TYPE: &str = "zi.programmatic-state.v1";
pub(crate) const MAX_PROGRAM_STATE_BYTES: usize = 8 * 1024 * 1024;

/// A custom entry or message that breaks the bounds of docs/extensions.md#state-and-messages.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CustomError {
    /// The custom type is not a valid name.
    #[error(
        "Custom type must match ^[a-z][a-z0-9._:/-]*$ and be at most {MAX_CUSTOM_TYPE_BYTES} bytes: {0:?}"
    )]
    Type(String),
    /// `what` is "Custom entry data" or "Custom message details"; `problem` says which bound.
    #[error("{what} {problem} (limits: depth {MAX_JSON_DEPTH}, {MAX_JSON_NODES} values)")]
    JsonShape {
        /// Which value.
        what: &'static str,
        /// Which bound it breaks.
        problem: &'static str,
    },
    /// The value serializes to more bytes than the bound.
    #[error("{what} exceeds {MAX_JSON_BYTES} bytes")]
    JsonTooLarge {
        /// Which value.
        what: &'static str,
    },
    /// The message's content is over its bound.
    #[error("Custom message content exceeds {MAX_CUSTOM_CONTENT_BYTES} bytes")]
    ContentTooLarge,
    /// The type's state history is at its bound: no more entries of it are kept.
    #[error(
        "Custom state history for {custom_type} is full ({MAX_CUSTOM_HISTORY_ENTRIES} entries or {byte_limit} bytes)"
    )]
    HistoryFull {
        /// The custom type.
        custom_type: String,
        /// The type's byte budget (larger for the program-state type).
        byte_limit: usize,
    },
}

/// A custom message to add to the conversation.
#[derive(Debug, Clone, PartialEq)]
pub struct CustomMessageInput {
    /// The extension's name for this kind of message.
    pub custom_type: String,
    /// What the model reads.
    pub content: MessageContent,
    /// Whether front ends show it to the user.
    pub display: bool,
    /// Data for the extension that front ends and the model do not read.
    pub details: Option<Value>,
}

impl CustomMessageInput {
    /// Bytes of the content: text, plus each image's MIME type and base64 data.
    pub(crate) fn content_bytes(&self) -> u64 {
        match &self.content {
            MessageContent::Text(text) => text.len() as u64,
            MessageContent::Parts(parts) => parts
                .iter()
                .map(|part| match part {
                    ContentBlock::Text { text, .. } => text.len() as u64,
                    ContentBlock::Image { data, mime_type } => {
                        (data.len() + mime_type.len()) as u64
                    }
                    _ => 0,
                })
                .sum(),
        }
    }
}

/// How a custom message enters the session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CustomDelivery {
    /// Idle only: committed now.
    Append,
    /// Idle only: committed now, then a run continues the conversation without a new prompt.
    TriggerTurn,
    /// Active run only: delivered at the next turn boundary.
    Steer,
    /// Active run only: delivered when the run would stop.
    FollowUp,
    /// Any time: held in memory and committed right before the user message of the next run a
    /// prompt starts (zi's reading of "injected before the next user prompt").
    NextTurn,
}

/// `^[a-z][a-z0-9._:/-]*$`, at most 128 bytes.
pub(crate) fn validate_custom_type(custom_type: &str) -> Result<(), CustomError> {
    let mut bytes = custom_type.bytes();
    let valid = custom_type.len() <= MAX_CUSTOM_TYPE_BYTES
        && bytes.next().is_some_and(|b| b.is_ascii_lowercase())
        && bytes.all(|b| {
            b.is_ascii_lowercase()
                || b.is_ascii_digit()
                || matches!(b, b'.' | b'_' | b':' | b'/' | b'-')
        });
    if valid {
        Ok(())
    } else {
        Err(CustomError::Type(custom_type.to_string()))
    }
}

/// Checks a value is bounded session JSON: depth, node count and encoded size. (Non-finite
/// numbers cannot exist in a `serde_json::Value`.)
pub fn validate_session_json(value: &Value, what: &'static str) -> Result<(), CustomError> {
    fn walk(value: &Value, depth: usize, nodes: &mut usize) -> Result<(), &'static str> {
        *nodes += 1;
        if *nodes > MAX_JSON_NODES {
            return Err("has too many values");
        }
        if depth > MAX_JSON_DEPTH {
            return Err("is nested too deeply");
        }
        match value {
            Value::Array(items) => items.iter().try_for_each(|v| walk(v, depth + 1, nodes)),
            Value::Object(map) => map.values().try_for_each(|v| walk(v, depth + 1, nodes)),
            _ => Ok(()),
        }
    }
    let mut nodes = 0;
    walk(value, 1, &mut nodes).map_err(|problem| CustomError::JsonShape { what, problem })?;
    let bytes = serde_json::to_vec(value).map_or(usize::MAX, |v| v.len());
    if bytes > MAX_JSON_BYTES {
        return Err(CustomError::JsonTooLarge { what });
    }
    Ok(())
}

fn validate_message(message: &CustomMessageInput) -> Result<(), CustomError> {
    validate_custom_type(&message.custom_type)?;
    if message.content_bytes() > MAX_CUSTOM_CONTENT_BYTES {
        return Err(CustomError::ContentTooLarge);
    }
    if let Some(details) = &message.details {
        validate_session_json(details, "Custom message details")?;
    }
    Ok(())
}

impl AgentSession {
    /// Appends a `custom` entry (extension state) and announces it with `entry_appended`.
    pub fn append_custom_entry(
        &self,
        custom_type: &str,
        data: Option<Value>,
    ) -> Result<SessionEntry, SessionError> {
        validate_custom_type(custom_type)?;
        let size = match &data {
            Some(value) => {
                validate_session_json(value, "Custom entry data")?;
                serde_json::to_vec(value).map_or(0, |v| v.len())
            }
            None => 0,
        };
        let mut state = self.lock();
        if matches!(state.activity, RunActivity::Disposed) {
            return Err(SessionError::Disposed);
        }
        let (count, bytes) = state.journal.custom_entries(custom_type).fold(
            (0usize, 0usize),
            |(count, bytes), entry| {
                let size = match &entry.data {
                    EntryData::Custom { data: Some(v), .. } => {
                        serde_json::to_vec(v).map_or(0, |v| v.len())
                    }
                    _ => 0,
                };
                (count + 1, bytes + size)
            },
        );
        let byte_limit = if custom_type == PROGRAM_STATE_TYPE {
            MAX_PROGRAM_STATE_BYTES
        } else {
            MAX_CUSTOM_HISTORY_BYTES
        };
        if count + 1 > MAX_CUSTOM_HISTORY_ENTRIES || bytes + size > byte_limit {
            return Err(CustomError::HistoryFull {
                custom_type: custom_type.to_string(),
                byte_limit,
            }
            .into());
        }
        state
            .append_announced(EntryData::Custom {
                custom_type: custom_type.to_string(),
                data,
            })
            .map_err(SessionError::from)
    }

    /// Every `custom` entry of one type, oldest first.
    pub fn custom_entries(&self, custom_type: &str) -> Vec<SessionEntry> {
        self.lock()
            .journal
            .custom_entries(custom_type)
            .cloned()
            .collect()
    }

    /// Adds a custom message with one of the deliveries of docs/extensions.md#state-and-messages.
    /// Admission is all the result reports; with `TriggerTurn` the returned starter releases the
    /// run.
    pub fn send_custom_message(
        &self,
        message: CustomMessageInput,
        delivery: CustomDelivery,
    ) -> Result<Option<RunStarter>, SessionError> {
        validate_message(&message)?;
        let mut state = self.lock();
        // Refused before anything is committed or held, as a prompt's images are.
        super::admission::require_image_input(&state, message.content.has_images())?;
        match delivery {
            // The command owns the session: appended messages are committed once it settles.
            CustomDelivery::Append
                if matches!(state.activity, RunActivity::ExtensionCommand { .. }) =>
            {
                state.deferred_custom.push(message);
                Ok(None)
            }
            CustomDelivery::Append => {
                state.require_idle(Operation::CustomMessage)?;
                state.commit_custom_message(message)?;
                Ok(None)
            }
            CustomDelivery::TriggerTurn => {
                state.require_idle(Operation::CustomMessage)?;
                if state.model.is_none() {
                    return Err(SessionError::NoModel);
                }
                state.commit_custom_message(message)?;
                Ok(Some(self.start_run(&mut state, None)))
            }
            CustomDelivery::NextTurn => {
                if matches!(state.activity, RunActivity::Disposed) {
                    return Err(SessionError::Disposed);
                }
                state.next_turn_custom.push(message);
                Ok(None)
            }
            CustomDelivery::Steer | CustomDelivery::FollowUp => match state.busy_activity()? {
                Some(activity @ (Activity::Aborting | Activity::Compacting)) => {
                    Err(SessionError::Busy {
                        operation: Operation::QueueInput,
                        activity,
                    })
                }
                Some(Activity::Running) => {
                    let queue = if delivery == CustomDelivery::Steer {
                        QueuedDelivery::Steer
                    } else {
                        QueuedDelivery::FollowUp
                    };
                    state
                        .queues
                        .push_custom(queue, message)
                        .map_err(|_| SessionError::QueueCapacity)?;
                    Ok(None)
                }
                None | Some(Activity::ExtensionCommand | Activity::QueuedInput) => {
                    Err(SessionError::CustomQueueWhileIdle)
                }
            },
        }
    }
}

impl crate::session::State {
    /// Commits a custom message: journal, `entry_appended`, then `message_end` with the
    /// journal's projection. Returns the projected message.
    pub(super) fn commit_custom_message(
        &mut self,
        message: CustomMessageInput,
    ) -> Result<zi_protocol::message::AgentMessage, zi_journal::memory::JournalError> {
        let entry = self.append_announced(EntryData::CustomMessage {
            custom_type: message.custom_type,
            content: message.content,
            display: message.display,
            details: message.details,
        })?;
        let projected = zi_journal::memory::entry_message(&entry)
            .map(std::borrow::Cow::into_owned)
            .ok_or_else(|| {
                zi_journal::memory::JournalError::from(
                    "custom message entry has no projection".to_string(),
                )
            })?;
        self.emit(AgentSessionEvent::MessageEnd {
            message: projected.clone(),
        });
        Ok(projected)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn custom_type_pattern_and_length() {
        assert!(validate_custom_type("example.counter").is_ok());
        assert!(validate_custom_type("a/b:c-d_e.f9").is_ok());
        assert!(validate_custom_type("Example").is_err());
        assert!(validate_custom_type("9abc").is_err());
        assert!(validate_custom_type("").is_err());
        assert!(validate_custom_type(&"a".repeat(128)).is_ok());
        assert!(validate_custom_type(&"a".repeat(129)).is_err());
    }

    #[test]
    fn session_json_bounds() {
        assert!(validate_session_json(&json!({"n": 1}), "data").is_ok());
        let mut deep = json!(1);
        for _ in 0..32 {
            deep = json!([deep]);
        }
        assert!(validate_session_json(&deep, "data").is_err());
        let wide = Value::Array((0..4096).map(Value::from).collect());
        assert!(validate_session_json(&wide, "data").is_err());
        let wide_ok = Value::Array((0..4095).map(Value::from).collect());
        assert!(validate_session_json(&wide_ok, "data").is_ok());
        let big = json!("x".repeat(MAX_JSON_BYTES));
        assert!(validate_session_json(&big, "data").is_err());
    }
}
