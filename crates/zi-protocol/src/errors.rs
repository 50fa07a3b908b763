//! Protocol error codes and every fixed error message of the RPC v1 connection layer
//! (docs/rpc.md#framing, docs/rpc.md#decoding-a-request, docs/rpc.md#error-codes,
//! docs/rpc.md#request-ids-and-capacity and docs/rpc.md#shutdown-eof-signals-and-exit-codes).
//!
//! The strings are part of the wire contract: clients match on them, so each one lives here
//! exactly once. Templated messages are built by the small functions at the end.

use serde::{Deserialize, Serialize};

// --- Framing (docs/rpc.md#framing). Fatal: reported with code `invalid_framing`, then the
// connection stops. ---

/// An input record is not valid UTF-8 (including an incomplete sequence at EOF).
pub const FRAMING_INVALID_UTF8: &str = "RPC input must be valid UTF-8";
/// An input record (everything before its LF, including a CR) exceeds 16,777,216 bytes.
pub const FRAMING_OVERSIZED: &str = "RPC input records cannot exceed 16777216 bytes";
/// Defensive fallback: input arrived after the decoder was closed.
pub const FRAMING_INPUT_CLOSED: &str = "RPC input is closed";
/// Defensive fallback: the input could not be decoded for another reason.
pub const FRAMING_DECODE_FAILED: &str = "Could not decode RPC input";
/// Fallback message of an `input_error` when a stdin read error carries no message
/// (docs/rpc.md#shutdown-eof-signals-and-exit-codes).
pub const INPUT_READ_FAILED: &str = "Could not read RPC input";
/// Written to stderr (exit code 1) when `--mode rpc` is given positional prompts
/// (docs/rpc.md#framing).
pub const POSITIONAL_PROMPT_REJECTED: &str =
    "RPC mode accepts input only through its JSONL protocol";

// --- Envelope decoding (docs/rpc.md#processing-order, docs/rpc.md#generic-rules).
// Recoverable protocol errors. ---

/// The record is not parseable JSON (an empty record included). Code `invalid_json`.
pub const INVALID_JSON: &str = "RPC input must contain one JSON object per line";
/// The record is JSON but not an object. Code `invalid_request`, never with an id.
pub const REQUESTS_MUST_BE_OBJECTS: &str = "RPC requests must be JSON objects";
/// `id` is missing, not a string, empty or longer than 256 bytes. Never with an id.
pub const ID_INVALID: &str = "RPC request id must be a non-empty string of at most 256 bytes";
/// `method` is missing or not a string.
pub const METHOD_NOT_STRING: &str = "RPC request method must be a string";
/// A top-level or params key that the method does not accept is present.
pub const UNKNOWN_FIELDS: &str = "RPC request contains unknown fields";
/// A required top-level or params key is absent.
pub const MISSING_FIELDS: &str = "RPC request is missing required fields";
/// Defensive fallback for any other decoding failure. Never with an id.
pub const INVALID_REQUEST_FALLBACK: &str = "Invalid RPC request";

// --- Admission (steps 4 and 5 of docs/rpc.md#processing-order,
// docs/rpc.md#request-ids-and-capacity). ---

/// The request id is already in flight. Protocol error `invalid_request`, always with the id.
pub const ID_IN_FLIGHT: &str = "RPC request id is already in flight";
/// Response error `capacity`: a 33rd concurrent ordinary operation.
pub const CAPACITY_ORDINARY: &str = "RPC accepts at most 32 in-flight operations";
/// Response error `capacity`: a second concurrent `session.interrupt`.
pub const CAPACITY_INTERRUPT: &str = "An interruption request is already active";

// --- Output (docs/rpc.md#backpressure-and-bounds). Each one ends the connection with
// `output_error`. ---

/// A frame could not be serialized.
pub const OUTPUT_SERIALIZE: &str = "Could not serialize RPC output";
/// A frame line would exceed 16,777,216 bytes.
pub const OUTPUT_OVERSIZED: &str = "RPC output records cannot exceed 16777216 bytes";
/// Unwritten output exceeded its bound.
pub const OUTPUT_PENDING_BOUND: &str = "RPC output exceeded its pending-write bound";
/// Writing to the output stream failed.
pub const OUTPUT_WRITE: &str = "Could not write RPC output";

// --- Shutdown settlement (docs/rpc.md#shutdown-eof-signals-and-exit-codes).
// `settlement_error` results. ---

/// Admitted work did not finish within the shutdown budget.
pub const SETTLEMENT_RESOURCES: &str = "RPC resources did not settle within 5000ms";
/// Queued output was not written within the shutdown budget.
pub const SETTLEMENT_OUTPUT: &str = "RPC output did not settle within 5000ms";

// --- Per-method params (docs/rpc.md#params-of-each-method). Code `invalid_request`, with
// the id. ---

/// `session.get_messages` `start` is not a non-negative safe integer.
pub const MESSAGE_START: &str = "Message start must be a non-negative integer";
/// `session.get_messages` `limit` is outside 1..=100.
pub const MESSAGE_LIMIT: &str = "Message limit must be an integer from 1 through 100";
/// `session.get_outcomes` `start` is not a non-negative safe integer.
pub const OUTCOME_START: &str = "Outcome start must be a non-negative integer";
/// `session.get_outcomes` `limit` is outside 1..=100.
pub const OUTCOME_LIMIT: &str = "Outcome limit must be an integer from 1 through 100";
/// `session.prompt` `delivery` is absent or not one of the four deliveries.
pub const PROMPT_DELIVERY: &str = "Prompt delivery must be direct, steer, follow_up, or continue";
/// `session.prompt` `text` is absent, not a string, or over 8 MiB.
pub const PROMPT_TEXT: &str = "Prompt text must be a string of at most 8388608 bytes";
/// `session.prompt` `images` is not an array of at most 16 images (`null` included).
pub const PROMPT_IMAGES: &str = "Prompt images must be an array of at most 16 images";
/// A `completionId` is not a non-empty string of at most 256 bytes (`null` included).
pub const COMPLETION_ID: &str = "Completion id must be a non-empty string of at most 256 bytes";
/// `connection.set_events` `mode` is not `all`, `none` or `activity`.
pub const EVENT_MODE: &str = "Event mode must be all, none, or activity";
/// `command.invoke` `name` is not a non-empty string of at most 64 bytes.
pub const COMMAND_NAME: &str = "Command name must be a non-empty string of at most 64 bytes";
/// `command.invoke` `name` is not lowercase kebab-case.
pub const COMMAND_NAME_KEBAB: &str = "Command name must use lowercase kebab-case";
/// `command.invoke` `arguments` is not a string of at most 256 KiB.
pub const COMMAND_ARGUMENTS: &str = "Command arguments must be a string of at most 262144 bytes";
/// `model.select` `provider` is not a non-empty string of at most 256 bytes.
pub const MODEL_PROVIDER: &str = "Model provider must be a non-empty string of at most 256 bytes";
/// `model.select` `id` is not a non-empty string of at most 256 bytes.
pub const MODEL_ID: &str = "Model id must be a non-empty string of at most 256 bytes";
/// Also produced when `level` is absent.
pub const THINKING_LEVEL: &str = "Unsupported thinking level";
/// `thinking.select` `scope` is not `global`, `project` or `null`.
pub const THINKING_SCOPE: &str = "Thinking scope must be global or project";
/// `session.compact` `instructions` is not a string of at most 8 KiB (`null` is absent).
pub const COMPACT_INSTRUCTIONS: &str =
    "Compaction instructions must be a string of at most 8192 bytes";
/// `connection.set_approvals` `enabled` is not a boolean.
pub const APPROVALS_ENABLED: &str = "Approvals enabled must be a boolean";
/// `connection.set_approvals` `policy` is not a policy name.
pub const APPROVAL_POLICY: &str =
    "Approval policy must be never, on-failure, accept-edits, or untrusted";
/// `connection.set_approvals` `sandbox` is not an object with known keys.
pub const SANDBOX_OBJECT: &str = "Sandbox must be an object with mode, network, or writableRoots";
/// `sandbox.mode` is not a mode name.
pub const SANDBOX_MODE: &str = "Sandbox mode must be read-only, workspace-write, or full";
/// `sandbox.network` is not a boolean.
pub const SANDBOX_NETWORK: &str = "Sandbox network must be a boolean";
/// `sandbox.writableRoots` is not a list of at most 32 absolute paths of at most 4096 bytes.
pub const SANDBOX_WRITABLE_ROOTS: &str =
    "Sandbox writable roots must be at most 32 absolute paths of at most 4096 bytes";
/// `rules` is not an object of at most 256 rules per list.
pub const APPROVAL_RULES: &str = "Approval rules must be an object of at most 256 rules per list";
/// `timeoutMs` is not an integer from 0 through 86,400,000.
pub const APPROVAL_TIMEOUT: &str = "Approval timeout must be an integer from 0 through 86400000";
/// `approval.respond` `approvalId` is not a non-empty string of at most 256 bytes.
pub const APPROVAL_ID: &str = "Approval id must be a non-empty string of at most 256 bytes";
/// `approval.respond` `decision` is not a decision name.
pub const APPROVAL_DECISION: &str =
    "Approval decision must be allow_once, allow_session, deny, or cancel_turn";
/// `approval.respond` `message` is not a string of at most 8192 bytes.
pub const APPROVAL_MESSAGE: &str = "Approval message must be a string of at most 8192 bytes";
/// `approval.respond` `message` with a decision other than `deny`.
pub const APPROVAL_MESSAGE_DENY_ONLY: &str = "Approval message is allowed only with decision deny";
/// `approval.respond` `rule` with a decision other than `allow_session`.
pub const APPROVAL_RULE_SESSION_ONLY: &str =
    "Approval rule is allowed only with decision allow_session";

// --- Session catalog, entry pages and fork (issue 14, zi extensions). `invalid_request`. ---

/// `session.list` `start` is not a non-negative safe integer.
pub const SESSION_LIST_START: &str = "Session list start must be a non-negative integer";
/// `session.list` `limit` is outside 1..=100.
pub const SESSION_LIST_LIMIT: &str = "Session list limit must be an integer from 1 through 100";
/// `session.list` `scope` is not `cwd`, `all` or `null`.
pub const SESSION_LIST_SCOPE: &str = "Session list scope must be cwd or all";
/// `session.get_entries` `start` is not a non-negative safe integer.
pub const ENTRY_START: &str = "Entry start must be a non-negative integer";
/// `session.get_entries` `limit` is outside 1..=100.
pub const ENTRY_LIMIT: &str = "Entry limit must be an integer from 1 through 100";
/// `session.fork` `entryId` is not a non-empty string of at most 256 bytes.
pub const FORK_ENTRY_ID: &str = "Entry id must be a non-empty string of at most 256 bytes";

// --- Templated messages. ---

/// `Unsupported RPC protocol version: <v> (expected 1)`, where `v` is the JavaScript string
/// conversion of the received `version` value (`undefined` when absent).
pub fn unsupported_version(v: &str) -> String {
    format!("Unsupported RPC protocol version: {v} (expected 1)")
}

/// `Unknown RPC method: <method>`.
pub fn unknown_method(method: &str) -> String {
    format!("Unknown RPC method: {method}")
}

/// `Prompt images[<index>] <problem>`: one image of `session.prompt` is refused. `problem` is
/// `must be an object`, `contains unknown fields`, `is missing required fields`,
/// `type must be image`, or an [`crate::image::ImageError`].
pub fn prompt_image(index: usize, problem: &dyn std::fmt::Display) -> String {
    format!("Prompt images[{index}] {problem}")
}

/// The problems of one prompt image that are not [`crate::image::ImageError`]s.
pub mod prompt_image_problem {
    /// The element is not a JSON object.
    pub const NOT_AN_OBJECT: &str = "must be an object";
    /// The element has a key other than `type`, `data` and `mimeType`.
    pub const UNKNOWN_FIELDS: &str = "contains unknown fields";
    /// The element lacks `type`, `data` or `mimeType`.
    pub const MISSING_FIELDS: &str = "is missing required fields";
    /// `type` is not the string `image`.
    pub const TYPE: &str = "type must be image";
}

/// `<method> params must be an object`.
pub fn params_must_be_object(method: &str) -> String {
    format!("{method} params must be an object")
}

/// The `code` of a `protocol_error` frame (docs/rpc.md#error-codes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum ProtocolErrorCode {
    /// The record is not parseable JSON.
    InvalidJson,
    /// The record is not a valid request (envelope, key set or params).
    InvalidRequest,
    /// The method is not one of RPC v1's.
    UnknownMethod,
    /// `version` is not the number 1.
    UnsupportedVersion,
    /// The only fatal code: the connection shuts down after reporting it.
    InvalidFraming,
}

impl ProtocolErrorCode {
    /// The wire string.
    pub fn as_str(self) -> &'static str {
        match self {
            ProtocolErrorCode::InvalidJson => "invalid_json",
            ProtocolErrorCode::InvalidRequest => "invalid_request",
            ProtocolErrorCode::UnknownMethod => "unknown_method",
            ProtocolErrorCode::UnsupportedVersion => "unsupported_version",
            ProtocolErrorCode::InvalidFraming => "invalid_framing",
        }
    }

    /// Whether the connection stays open after this error.
    pub fn is_recoverable(self) -> bool {
        self != ProtocolErrorCode::InvalidFraming
    }
}

impl std::fmt::Display for ProtocolErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The payload of a `protocol_error` frame: `{code, message, id?}`.
///
/// `id` is present only when a valid request id (a non-empty string of at most 256 bytes) could
/// be extracted from the record; on the wire the key is then omitted, never `null`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ProtocolError {
    /// The error code.
    pub code: ProtocolErrorCode,
    /// The exact message.
    pub message: String,
    /// The request id, when a valid one was extracted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
}

impl ProtocolError {
    /// An error with `code`, `message` and optionally the request id.
    pub fn new(code: ProtocolErrorCode, message: impl Into<String>, id: Option<String>) -> Self {
        ProtocolError {
            code,
            message: message.into(),
            id,
        }
    }

    /// `invalid_json` for a record that is not parseable JSON.
    pub fn invalid_json() -> Self {
        ProtocolError::new(ProtocolErrorCode::InvalidJson, INVALID_JSON, None)
    }

    /// `invalid_request`, with the id when one was extracted.
    pub fn invalid_request(message: impl Into<String>, id: Option<String>) -> Self {
        ProtocolError::new(ProtocolErrorCode::InvalidRequest, message, id)
    }

    /// `invalid_request` `RPC request id is already in flight`, always with the id.
    pub fn id_in_flight(id: impl Into<String>) -> Self {
        ProtocolError::new(
            ProtocolErrorCode::InvalidRequest,
            ID_IN_FLIGHT,
            Some(id.into()),
        )
    }

    /// The fatal `invalid_framing` error, never with an id.
    pub fn invalid_framing(message: impl Into<String>) -> Self {
        ProtocolError::new(ProtocolErrorCode::InvalidFraming, message, None)
    }
}

impl std::fmt::Display for ProtocolError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

impl std::error::Error for ProtocolError {}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn templated_messages() {
        assert_eq!(
            unsupported_version("2"),
            "Unsupported RPC protocol version: 2 (expected 1)"
        );
        assert_eq!(
            unsupported_version("undefined"),
            "Unsupported RPC protocol version: undefined (expected 1)"
        );
        assert_eq!(unknown_method("unknown"), "Unknown RPC method: unknown");
        assert_eq!(
            params_must_be_object("session.prompt"),
            "session.prompt params must be an object"
        );
    }

    #[test]
    fn bound_messages_name_their_bounds() {
        assert!(FRAMING_OVERSIZED.contains(&(16u64 * 1024 * 1024).to_string()));
        assert!(OUTPUT_OVERSIZED.contains(&(16u64 * 1024 * 1024).to_string()));
        assert!(PROMPT_TEXT.contains(&(8u64 * 1024 * 1024).to_string()));
        assert!(COMMAND_ARGUMENTS.contains(&(256u64 * 1024).to_string()));
    }

    #[test]
    fn codes_serialize_in_snake_case() {
        for code in [
            ProtocolErrorCode::InvalidJson,
            ProtocolErrorCode::InvalidRequest,
            ProtocolErrorCode::UnknownMethod,
            ProtocolErrorCode::UnsupportedVersion,
            ProtocolErrorCode::InvalidFraming,
        ] {
            assert_eq!(serde_json::to_value(code).ok(), Some(json!(code.as_str())));
            assert_eq!(
                code.is_recoverable(),
                code != ProtocolErrorCode::InvalidFraming
            );
        }
    }

    #[test]
    fn protocol_error_omits_a_missing_id() {
        let without = ProtocolError::invalid_json();
        assert_eq!(
            serde_json::to_string(&without).ok().as_deref(),
            Some(
                r#"{"code":"invalid_json","message":"RPC input must contain one JSON object per line"}"#
            )
        );
        let with = ProtocolError::id_in_flight("req-1");
        assert_eq!(
            serde_json::to_value(&with).ok(),
            Some(json!({
                "code": "invalid_request",
                "message": "RPC request id is already in flight",
                "id": "req-1"
            }))
        );
        assert_eq!(
            ProtocolError::invalid_framing(FRAMING_INVALID_UTF8).to_string(),
            "invalid_framing: RPC input must be valid UTF-8"
        );
    }
}
