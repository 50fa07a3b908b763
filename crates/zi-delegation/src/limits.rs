//! The bounds of docs/delegation.md#limits and the input checks every tool shares
//! (docs/delegation.md#tools).

use std::time::Duration;

use crate::error::SubagentError;

/// Live children per parent session (idle ones count).
pub const MAX_LIVE_CHILDREN: usize = 4;
/// Exited snapshots kept for `list_subagents`, `wait_subagents` and `close_subagent`.
pub const MAX_RETAINED_EXITED: usize = 32;
/// Completion ledger entries (reserved + retained completions).
pub const LEDGER_CAPACITY: usize = 32;
/// Names per `wait_subagents` call.
pub const MAX_WAIT_NAMES: usize = 16;
pub const NAME_MAX_BYTES: usize = 64;
pub const TEXT_MAX_BYTES: usize = 8 * 1024 * 1024;
pub const TASK_MAX_BYTES: usize = 256;
pub const MODEL_MAX_BYTES: usize = 4096;
pub const API_KEY_MAX_BYTES: usize = 64 * 1024;
/// Retained error text and hidden-message text.
pub const ERROR_MAX_BYTES: usize = 8 * 1024;
pub const HIDDEN_TEXT_MAX_BYTES: usize = 8 * 1024;
/// Outcome `preview` / `errorMessage`, JSON-encoded.
pub const PREVIEW_JSON_MAX_BYTES: usize = 3072;
pub const WAIT_TEXT_MAX_BYTES: usize = 64 * 1024;
pub const CONTROL_TEXT_MAX_BYTES: usize = 64 * 1024 - 64;
pub const DETAILS_AGENTS_MAX_BYTES: usize = 16 * 1024;
pub const PROFILE_TEXT_MAX_BYTES: usize = 60 * 1024;
pub const PROFILE_ENUM_DESCRIPTION_MAX_BYTES: usize = 8192;
pub const PROFILE_PURPOSE_MAX_BYTES: usize = 256;
pub const MAX_WAIT_TIMEOUT_MS: u64 = 3_600_000;

pub const READY_TIMEOUT: Duration = Duration::from_secs(10);
pub const RPC_RESPONSE_TIMEOUT: Duration = Duration::from_secs(30);
pub const INTERRUPT_SETTLEMENT: Duration = Duration::from_secs(10);
/// Explicit `close_subagent`: graceful, then forced.
pub const CLOSE_GRACE: Duration = Duration::from_secs(5);
pub const CLOSE_FORCED: Duration = Duration::from_secs(5);
/// Session shutdown per child, all children concurrently: inside the CLI's 5 s disposal
/// bound (docs/delegation.md#limits).
pub const SHUTDOWN_GRACE: Duration = Duration::from_millis(2000);
pub const SHUTDOWN_FORCED: Duration = Duration::from_millis(2000);
/// How often a waiting tool re-checks the ledger without a change notification.
pub const WAIT_POLL: Duration = Duration::from_millis(100);

/// `^[a-z][a-z0-9_-]*$`.
pub fn name_pattern_matches(name: &str) -> bool {
    let mut bytes = name.bytes();
    bytes.next().is_some_and(|b| b.is_ascii_lowercase())
        && bytes.all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-')
}

/// The runtime-name checks (docs/delegation.md#tools), in a fixed order.
pub fn check_name(name: &str) -> Result<(), SubagentError> {
    if name.is_empty() || name.len() > NAME_MAX_BYTES || name.contains('\0') {
        return Err(SubagentError::NameLength);
    }
    if !name_pattern_matches(name) {
        return Err(SubagentError::NamePattern);
    }
    Ok(())
}

/// `what` is `prompt` (spawn) or `message` (send, assign).
pub fn check_text(text: &str, what: &'static str) -> Result<(), SubagentError> {
    if text.is_empty() || text.len() > TEXT_MAX_BYTES || text.contains('\0') {
        return Err(SubagentError::TextLength { what });
    }
    Ok(())
}

/// The longest prefix of `text` of at most `max` bytes, on a UTF-8 boundary.
pub fn clip(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// Bytes of `text` as a JSON string literal (quotes included).
pub fn json_string_bytes(text: &str) -> usize {
    serde_json::to_string(text).map_or(usize::MAX, |s| s.len())
}

/// The longest prefix of `text` (first clipped to `first` bytes) whose JSON string encoding is
/// at most `max_json` bytes (docs/delegation.md#evidence).
pub fn clip_json(text: &str, first: usize, max_json: usize) -> &str {
    let mut clipped = clip(text, first);
    if json_string_bytes(clipped) <= max_json {
        return clipped;
    }
    // Binary search on the byte length; escapes make the encoded size grow monotonically.
    let (mut low, mut high) = (0usize, clipped.len());
    while low < high {
        let middle = (low + high).div_ceil(2);
        if json_string_bytes(clip(clipped, middle)) <= max_json {
            low = middle;
        } else {
            high = middle - 1;
        }
    }
    clipped = clip(clipped, low);
    clipped
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_the_rule() {
        assert!(check_name("worker-1_a").is_ok());
        assert!(check_name("").is_err());
        assert!(check_name("Worker").is_err());
        assert!(check_name("1a").is_err());
        assert!(check_name(&"a".repeat(65)).is_err());
    }

    #[test]
    fn clips_keep_utf8_and_json_bounds() {
        assert_eq!(clip("héllo", 2), "h");
        let quoted = "\"".repeat(100);
        let clipped = clip_json(&quoted, 8192, 22);
        assert_eq!(json_string_bytes(clipped), 22);
        assert_eq!(clip_json("abc", 8192, 3072), "abc");
    }
}
