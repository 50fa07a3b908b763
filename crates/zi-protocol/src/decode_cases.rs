//! The decode-case table (docs/rpc.md#decoding-a-request): one record per row and what decoding
//! it must give — the recoverable `protocol_error` (code, exact message, the `id` it carries) or
//! the request (its id, method and params as the decoder fills them in).
//!
//! This is the one place decoding cases go: a new case, or one a bug report brings, is a row
//! here. zi-protocol's `every_decode_case_decodes_as_its_row_says` runs every row through
//! [`crate::request::decode_record`]; zi-cli's black-box test sends every rejected row to the real
//! binary and checks it answers each and keeps serving; the conformance kit sends every rejected
//! row to the server under test (check `decode.<name>`), and zi-cli's schema test checks the
//! request schema rejects them. Cases that need generated input (sizes at and past a bound, every method
//! in a loop) stay with the decoder's unit tests (`request_tests/`), and zi-cli's test keeps the
//! few oversized records it builds.

/// What decoding one record gives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expected {
    /// A recoverable `protocol_error`, after which the connection keeps serving.
    Rejected {
        /// The `protocol_error` code.
        code: &'static str,
        /// The exact message.
        message: &'static str,
        /// The `id` the frame carries; `None` when the key must be absent.
        id: Option<&'static str>,
    },
    /// A request.
    Accepted {
        /// The request id.
        id: &'static str,
        /// `{"method": …, "params": …}` of the decoded request with defaults filled in (`params`
        /// absent when the decoder keeps none), as JSON.
        request: &'static str,
    },
}

/// One record and what decoding it gives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DecodeCase {
    /// The row's name (the conformance check `decode.<name>`).
    pub name: &'static str,
    /// The record, without its LF.
    pub line: &'static str,
    /// What decoding it gives.
    pub expected: Expected,
}

/// The `protocol_error` of a rejected row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rejection {
    /// The `protocol_error` code.
    pub code: &'static str,
    /// The exact message.
    pub message: &'static str,
    /// The `id` the frame carries; `None` when the key must be absent.
    pub id: Option<&'static str>,
}

impl DecodeCase {
    /// The `protocol_error` a rejected row must produce; `None` for an accepted row.
    pub fn rejection(&self) -> Option<Rejection> {
        match self.expected {
            Expected::Rejected { code, message, id } => Some(Rejection { code, message, id }),
            Expected::Accepted { .. } => None,
        }
    }
}

const fn no(
    name: &'static str,
    line: &'static str,
    code: &'static str,
    message: &'static str,
    id: Option<&'static str>,
) -> DecodeCase {
    DecodeCase {
        name,
        line,
        expected: Expected::Rejected { code, message, id },
    }
}

const fn ok(
    name: &'static str,
    line: &'static str,
    id: &'static str,
    request: &'static str,
) -> DecodeCase {
    DecodeCase {
        name,
        line,
        expected: Expected::Accepted { id, request },
    }
}

const INVALID_JSON: &str = "RPC input must contain one JSON object per line";
const NOT_OBJECT: &str = "RPC requests must be JSON objects";
const BAD_ID: &str = "RPC request id must be a non-empty string of at most 256 bytes";
const METHOD_NOT_STRING: &str = "RPC request method must be a string";
const MISSING_FIELDS: &str = "RPC request is missing required fields";
const UNKNOWN_FIELDS: &str = "RPC request contains unknown fields";

/// Every row, the conformance kit's original checks first.
#[rustfmt::skip]
pub const DECODE_CASES: &[DecodeCase] = &[
    no("invalid-json", "not json", "invalid_json", "RPC input must contain one JSON object per line", None),
    no("not-an-object", "[1]", "invalid_request", "RPC requests must be JSON objects", None),
    no("version-2", r#"{"version":2,"id":"v","method":"session.get_state"}"#, "unsupported_version", "Unsupported RPC protocol version: 2 (expected 1)", Some("v")),
    no("version-missing", r#"{"id":"v","method":"session.get_state"}"#, "unsupported_version", "Unsupported RPC protocol version: undefined (expected 1)", Some("v")),
    no("version-string", r#"{"version":"1","id":"v","method":"session.get_state"}"#, "unsupported_version", "Unsupported RPC protocol version: 1 (expected 1)", Some("v")),
    no("version-before-id", r#"{"version":2}"#, "unsupported_version", "Unsupported RPC protocol version: 2 (expected 1)", None),
    no("empty-id", r#"{"version":1,"id":"","method":"session.get_state"}"#, "invalid_request", "RPC request id must be a non-empty string of at most 256 bytes", None),
    no("long-id", r#"{"version":1,"id":"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx","method":"session.get_state"}"#, "invalid_request", "RPC request id must be a non-empty string of at most 256 bytes", None),
    no("method-not-string", r#"{"version":1,"id":"m","method":7}"#, "invalid_request", "RPC request method must be a string", Some("m")),
    no("unknown-method", r#"{"version":1,"id":"u","method":"unknown"}"#, "unknown_method", "Unknown RPC method: unknown", Some("u")),
    no("extra-top-level-key", r#"{"version":1,"id":"x","method":"session.get_state","extra":1}"#, "invalid_request", UNKNOWN_FIELDS, Some("x")),
    no("params-on-get-state", r#"{"version":1,"id":"x","method":"session.get_state","params":{}}"#, "invalid_request", UNKNOWN_FIELDS, Some("x")),
    no("prompt-missing-params", r#"{"version":1,"id":"p","method":"session.prompt"}"#, "invalid_request", MISSING_FIELDS, Some("p")),
    no("prompt-params-not-object", r#"{"version":1,"id":"p","method":"session.prompt","params":[]}"#, "invalid_request", "session.prompt params must be an object", Some("p")),
    no("prompt-bad-delivery", r#"{"version":1,"id":"p","method":"session.prompt","params":{"delivery":"later","text":""}}"#, "invalid_request", "Prompt delivery must be direct, steer, follow_up, or continue", Some("p")),
    no("prompt-unknown-param", r#"{"version":1,"id":"p","method":"session.prompt","params":{"delivery":"direct","text":"","x":1}}"#, "invalid_request", UNKNOWN_FIELDS, Some("p")),
    no("prompt-null-completion-id", r#"{"version":1,"id":"p","method":"session.prompt","params":{"delivery":"direct","text":"","completionId":null}}"#, "invalid_request", "Completion id must be a non-empty string of at most 256 bytes", Some("p")),
    no("prompt-images-null", r#"{"version":1,"id":"p","method":"session.prompt","params":{"delivery":"direct","text":"","images":null}}"#, "invalid_request", "Prompt images must be an array of at most 16 images", Some("p")),
    no("prompt-images-not-array", r#"{"version":1,"id":"p","method":"session.prompt","params":{"delivery":"direct","text":"","images":{"type":"image"}}}"#, "invalid_request", "Prompt images must be an array of at most 16 images", Some("p")),
    no("prompt-images-over-16", r#"{"version":1,"id":"p","method":"session.prompt","params":{"delivery":"direct","text":"","images":[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1]}}"#, "invalid_request", "Prompt images must be an array of at most 16 images", Some("p")),
    no("prompt-image-not-object", r#"{"version":1,"id":"p","method":"session.prompt","params":{"delivery":"direct","text":"","images":["iVBORw0KGgo="]}}"#, "invalid_request", "Prompt images[0] must be an object", Some("p")),
    no("prompt-image-unknown-field", r#"{"version":1,"id":"p","method":"session.prompt","params":{"delivery":"direct","text":"","images":[{"type":"image","data":"QUJD","mimeType":"image/png","x":1}]}}"#, "invalid_request", "Prompt images[0] contains unknown fields", Some("p")),
    no("prompt-image-missing-field", r#"{"version":1,"id":"p","method":"session.prompt","params":{"delivery":"direct","text":"","images":[{"type":"image","mimeType":"image/png"}]}}"#, "invalid_request", "Prompt images[0] is missing required fields", Some("p")),
    no("prompt-image-wrong-type", r#"{"version":1,"id":"p","method":"session.prompt","params":{"delivery":"direct","text":"","images":[{"type":"image","data":"QUJD","mimeType":"image/png"},{"type":"text","data":"QUJD","mimeType":"image/png"}]}}"#, "invalid_request", "Prompt images[1] type must be image", Some("p")),
    no("prompt-image-wrong-mime-type", r#"{"version":1,"id":"p","method":"session.prompt","params":{"delivery":"direct","text":"","images":[{"type":"image","data":"QUJD","mimeType":"image/svg+xml"}]}}"#, "invalid_request", "Prompt images[0] mimeType must be image/png, image/jpeg, image/gif, or image/webp", Some("p")),
    no("prompt-image-bad-base64", r#"{"version":1,"id":"p","method":"session.prompt","params":{"delivery":"direct","text":"","images":[{"type":"image","data":"QUJ","mimeType":"image/png"}]}}"#, "invalid_request", "Prompt images[0] data must be non-empty standard base64", Some("p")),
    no("prompt-image-empty-data", r#"{"version":1,"id":"p","method":"session.prompt","params":{"delivery":"direct","text":"","images":[{"type":"image","data":"","mimeType":"image/jpeg"}]}}"#, "invalid_request", "Prompt images[0] data must be non-empty standard base64", Some("p")),
    no("await-idle-empty-params", r#"{"version":1,"id":"w","method":"session.await_idle","params":{}}"#, "invalid_request", MISSING_FIELDS, Some("w")),
    no("await-idle-empty-completion-id", r#"{"version":1,"id":"w","method":"session.await_idle","params":{"completionId":""}}"#, "invalid_request", "Completion id must be a non-empty string of at most 256 bytes", Some("w")),
    no("messages-negative-start", r#"{"version":1,"id":"m","method":"session.get_messages","params":{"start":-1}}"#, "invalid_request", "Message start must be a non-negative integer", Some("m")),
    no("messages-limit-101", r#"{"version":1,"id":"m","method":"session.get_messages","params":{"limit":101}}"#, "invalid_request", "Message limit must be an integer from 1 through 100", Some("m")),
    no("outcomes-limit-101", r#"{"version":1,"id":"o","method":"session.get_outcomes","params":{"limit":101}}"#, "invalid_request", "Outcome limit must be an integer from 1 through 100", Some("o")),
    no("outcomes-params-not-object", r#"{"version":1,"id":"o","method":"session.get_outcomes","params":3}"#, "invalid_request", "session.get_outcomes params must be an object", Some("o")),
    no("set-events-bad-mode", r#"{"version":1,"id":"e","method":"connection.set_events","params":{"mode":"sometimes"}}"#, "invalid_request", "Event mode must be all, none, or activity", Some("e")),
    no("set-events-extra-key", r#"{"version":1,"id":"e","method":"connection.set_events","params":{"mode":"none","extra":true}}"#, "invalid_request", UNKNOWN_FIELDS, Some("e")),
    no("command-name-case", r#"{"version":1,"id":"c","method":"command.invoke","params":{"name":"Invalid_Command","arguments":""}}"#, "invalid_request", "Command name must use lowercase kebab-case", Some("c")),
    no("command-missing-arguments", r#"{"version":1,"id":"c","method":"command.invoke","params":{"name":"x"}}"#, "invalid_request", MISSING_FIELDS, Some("c")),
    no("model-empty-provider", r#"{"version":1,"id":"s","method":"model.select","params":{"provider":"","id":"m1"}}"#, "invalid_request", "Model provider must be a non-empty string of at most 256 bytes", Some("s")),
    no("thinking-bad-level", r#"{"version":1,"id":"t","method":"thinking.select","params":{"level":"huge"}}"#, "invalid_request", "Unsupported thinking level", Some("t")),
    no("thinking-bad-scope", r#"{"version":1,"id":"t","method":"thinking.select","params":{"level":"high","scope":"user"}}"#, "invalid_request", "Thinking scope must be global or project", Some("t")),
    // Records that are not JSON, or not objects.
    no("truncated-object", "{", "invalid_json", INVALID_JSON, None),
    no("truncated-record", r#"{"version":1,"id":"trunc","method":"session.get_state""#, "invalid_json", INVALID_JSON, None),
    no("empty-record", "", "invalid_json", INVALID_JSON, None),
    no("blank-record", " ", "invalid_json", INVALID_JSON, None),
    no("trailing-garbage", "{}x", "invalid_json", INVALID_JSON, None),
    no("two-objects", "{} {}", "invalid_json", INVALID_JSON, None),
    no("single-quotes", "{'version':1}", "invalid_json", INVALID_JSON, None),
    no("trailing-comma", r#"{"version":1,"id":"a","method":"session.get_state",}"#, "invalid_json", INVALID_JSON, None),
    no("byte-order-mark", "\u{feff}{}", "invalid_json", INVALID_JSON, None),
    no("nan", "NaN", "invalid_json", INVALID_JSON, None),
    no("lone-surrogate", r#"{"version":1,"id":"\ud800","method":"session.get_state"}"#, "invalid_json", INVALID_JSON, None),
    no("infinity-then-syntax-error", r#"{"version":1e400,"#, "invalid_json", INVALID_JSON, None),
    no("infinity-then-garbage", r#"{"version":1e400 1}"#, "invalid_json", INVALID_JSON, None),
    no("empty-array", "[]", "invalid_request", NOT_OBJECT, None),
    no("array-of-a-request", r#"[{"version":1,"id":"a","method":"session.get_state"}]"#, "invalid_request", NOT_OBJECT, None),
    no("null-record", "null", "invalid_request", NOT_OBJECT, None),
    no("string-record", r#""text""#, "invalid_request", NOT_OBJECT, None),
    no("number-record", "42", "invalid_request", NOT_OBJECT, None),
    no("boolean-record", "true", "invalid_request", NOT_OBJECT, None),
    no("infinite-number-record", "1e400", "invalid_request", NOT_OBJECT, None),
    // The version, checked before the id, which rides along when valid.
    no("version-null", r#"{"version":null,"id":"vn","method":"session.get_state"}"#, "unsupported_version", "Unsupported RPC protocol version: null (expected 1)", Some("vn")),
    no("version-true", r#"{"version":true,"id":"vt","method":"session.get_state"}"#, "unsupported_version", "Unsupported RPC protocol version: true (expected 1)", Some("vt")),
    no("version-fraction", r#"{"version":1.5,"id":"vf","method":"session.get_state"}"#, "unsupported_version", "Unsupported RPC protocol version: 1.5 (expected 1)", Some("vf")),
    no("version-missing-no-id", r#"{"method":"session.get_state"}"#, "unsupported_version", "Unsupported RPC protocol version: undefined (expected 1)", None),
    no("version-empty-object", "{}", "unsupported_version", "Unsupported RPC protocol version: undefined (expected 1)", None),
    no("version-2-empty-id", r#"{"version":2,"id":"","method":"session.get_state"}"#, "unsupported_version", "Unsupported RPC protocol version: 2 (expected 1)", None),
    no("version-before-method", r#"{"version":"1","id":"req-1","method":5,"extra":1}"#, "unsupported_version", "Unsupported RPC protocol version: 1 (expected 1)", Some("req-1")),
    no("version-0-number-id", r#"{"version":0,"id":7}"#, "unsupported_version", "Unsupported RPC protocol version: 0 (expected 1)", None),
    no("version-0-null-id", r#"{"version":0,"id":null}"#, "unsupported_version", "Unsupported RPC protocol version: 0 (expected 1)", None),
    no("version-infinity", r#"{"version":1e400,"id":"vinf","method":"session.get_state"}"#, "unsupported_version", "Unsupported RPC protocol version: Infinity (expected 1)", Some("vinf")),
    no("version-minus-infinity", r#"{"version":[-1e400,2],"id":"vninf","method":"session.get_state"}"#, "unsupported_version", "Unsupported RPC protocol version: -Infinity,2 (expected 1)", Some("vninf")),
    // The id.
    no("id-missing", r#"{"version":1,"method":"session.get_state"}"#, "invalid_request", BAD_ID, None),
    no("id-number", r#"{"version":1,"id":7,"method":"session.get_state"}"#, "invalid_request", BAD_ID, None),
    no("id-null", r#"{"version":1,"id":null,"method":"session.get_state"}"#, "invalid_request", BAD_ID, None),
    no("id-infinity", r#"{"version":1,"id":1e400,"method":"session.get_state"}"#, "invalid_request", BAD_ID, None),
    no("id-duplicate-key-empty", r#"{"version":1,"id":"b","id":"","method":"model.list"}"#, "invalid_request", BAD_ID, None),
    // The method, reported before unknown keys.
    no("method-missing", r#"{"version":1,"id":"m0"}"#, "invalid_request", METHOD_NOT_STRING, Some("m0")),
    no("method-null", r#"{"version":1,"id":"mn","method":null}"#, "invalid_request", METHOD_NOT_STRING, Some("mn")),
    no("method-array", r#"{"version":1,"id":"ma","method":["model.list"]}"#, "invalid_request", METHOD_NOT_STRING, Some("ma")),
    no("method-object", r#"{"version":1,"id":"mo","method":{}}"#, "invalid_request", METHOD_NOT_STRING, Some("mo")),
    no("method-peer-request", r#"{"version":1,"id":"u1","method":"peer_request"}"#, "unknown_method", "Unknown RPC method: peer_request", Some("u1")),
    no("method-infinity", r#"{"version":1,"id":"req-1","method":1e400}"#, "invalid_request", METHOD_NOT_STRING, Some("req-1")),
    no("method-case", r#"{"version":1,"id":"u2","method":"Session.Get_State"}"#, "unknown_method", "Unknown RPC method: Session.Get_State", Some("u2")),
    no("method-empty", r#"{"version":1,"id":"u3","method":""}"#, "unknown_method", "Unknown RPC method: ", Some("u3")),
    no("method-trailing-space", r#"{"version":1,"id":"u4","method":"session.get_state "}"#, "unknown_method", "Unknown RPC method: session.get_state ", Some("u4")),
    no("method-unknown-before-keys", r#"{"version":1,"id":"u5","method":"nope","x":1}"#, "unknown_method", "Unknown RPC method: nope", Some("u5")),
    // Top-level keys and params presence.
    no("params-null-on-get-state", r#"{"version":1,"id":"gn","method":"session.get_state","params":null}"#, "invalid_request", UNKNOWN_FIELDS, Some("gn")),
    no("params-on-interrupt", r#"{"version":1,"id":"ip","method":"session.interrupt","params":{}}"#, "invalid_request", UNKNOWN_FIELDS, Some("ip")),
    no("params-on-command-list", r#"{"version":1,"id":"cl","method":"command.list","params":{}}"#, "invalid_request", UNKNOWN_FIELDS, Some("cl")),
    no("params-on-model-list", r#"{"version":1,"id":"mlp","method":"model.list","params":{}}"#, "invalid_request", UNKNOWN_FIELDS, Some("mlp")),
    no("params-on-thinking-list", r#"{"version":1,"id":"tlp","method":"thinking.list","params":{}}"#, "invalid_request", UNKNOWN_FIELDS, Some("tlp")),
    no("params-on-get-stats", r#"{"version":1,"id":"gs","method":"session.get_stats","params":[]}"#, "invalid_request", UNKNOWN_FIELDS, Some("gs")),
    no("infinite-extra-key", r#"{"version":1,"id":"req-1","method":"session.get_state","x":1e400}"#, "invalid_request", UNKNOWN_FIELDS, Some("req-1")),
    no("key-case", r#"{"version":1,"Version":1,"id":"kc","method":"model.list"}"#, "invalid_request", UNKNOWN_FIELDS, Some("kc")),
    no("prompt-params-null", r#"{"version":1,"id":"pn","method":"session.prompt","params":null}"#, "invalid_request", "session.prompt params must be an object", Some("pn")),
    no("messages-params-string", r#"{"version":1,"id":"gm","method":"session.get_messages","params":"x"}"#, "invalid_request", "session.get_messages params must be an object", Some("gm")),
    no("await-idle-params-null", r#"{"version":1,"id":"an","method":"session.await_idle","params":null}"#, "invalid_request", "session.await_idle params must be an object", Some("an")),
    no("set-events-missing-params", r#"{"version":1,"id":"se0","method":"connection.set_events"}"#, "invalid_request", MISSING_FIELDS, Some("se0")),
    no("command-invoke-missing-params", r#"{"version":1,"id":"ci0","method":"command.invoke"}"#, "invalid_request", MISSING_FIELDS, Some("ci0")),
    no("model-select-missing-params", r#"{"version":1,"id":"ms0","method":"model.select"}"#, "invalid_request", MISSING_FIELDS, Some("ms0")),
    no("thinking-select-missing-params", r#"{"version":1,"id":"ts0","method":"thinking.select"}"#, "invalid_request", MISSING_FIELDS, Some("ts0")),
    no("fork-missing-params", r#"{"version":1,"id":"f0","method":"session.fork"}"#, "invalid_request", MISSING_FIELDS, Some("f0")),
    no("missing-params-extra-key", r#"{"version":1,"id":"mx","method":"model.select","extra":null}"#, "invalid_request", UNKNOWN_FIELDS, Some("mx")),
    // Params, one check at a time in the documented order.
    no("messages-start-string", r#"{"version":1,"id":"pm-0","method":"session.get_messages","params":{"start":"1"}}"#, "invalid_request", "Message start must be a non-negative integer", Some("pm-0")),
    no("messages-start-fraction", r#"{"version":1,"id":"pm-1","method":"session.get_messages","params":{"start":1.5}}"#, "invalid_request", "Message start must be a non-negative integer", Some("pm-1")),
    no("messages-start-infinity", r#"{"version":1,"id":"pm-2","method":"session.get_messages","params":{"start":1e400}}"#, "invalid_request", "Message start must be a non-negative integer", Some("pm-2")),
    no("messages-limit-0", r#"{"version":1,"id":"pm-3","method":"session.get_messages","params":{"limit":0}}"#, "invalid_request", "Message limit must be an integer from 1 through 100", Some("pm-3")),
    no("messages-limit-minus-infinity", r#"{"version":1,"id":"pm-4","method":"session.get_messages","params":{"limit":-1e400}}"#, "invalid_request", "Message limit must be an integer from 1 through 100", Some("pm-4")),
    no("messages-start-before-limit", r#"{"version":1,"id":"pm-5","method":"session.get_messages","params":{"start":-1,"limit":101}}"#, "invalid_request", "Message start must be a non-negative integer", Some("pm-5")),
    no("messages-unknown-param", r#"{"version":1,"id":"pm-6","method":"session.get_messages","params":{"start":0,"extra":1}}"#, "invalid_request", UNKNOWN_FIELDS, Some("pm-6")),
    no("outcomes-negative-start", r#"{"version":1,"id":"pm-7","method":"session.get_outcomes","params":{"start":-1}}"#, "invalid_request", "Outcome start must be a non-negative integer", Some("pm-7")),
    no("outcomes-start-infinity", r#"{"version":1,"id":"pm-8","method":"session.get_outcomes","params":{"start":1e999}}"#, "invalid_request", "Outcome start must be a non-negative integer", Some("pm-8")),
    no("outcomes-limit-string", r#"{"version":1,"id":"pm-9","method":"session.get_outcomes","params":{"limit":"5"}}"#, "invalid_request", "Outcome limit must be an integer from 1 through 100", Some("pm-9")),
    no("outcomes-limit-infinity", r#"{"version":1,"id":"pm-10","method":"session.get_outcomes","params":{"limit":1e400}}"#, "invalid_request", "Outcome limit must be an integer from 1 through 100", Some("pm-10")),
    no("prompt-delivery-camel-case", r#"{"version":1,"id":"pm-11","method":"session.prompt","params":{"delivery":"followUp","text":"x"}}"#, "invalid_request", "Prompt delivery must be direct, steer, follow_up, or continue", Some("pm-11")),
    no("prompt-delivery-null", r#"{"version":1,"id":"pm-12","method":"session.prompt","params":{"delivery":null,"text":"x"}}"#, "invalid_request", "Prompt delivery must be direct, steer, follow_up, or continue", Some("pm-12")),
    no("prompt-delivery-missing", r#"{"version":1,"id":"pm-13","method":"session.prompt","params":{"text":"x"}}"#, "invalid_request", "Prompt delivery must be direct, steer, follow_up, or continue", Some("pm-13")),
    no("prompt-empty-params", r#"{"version":1,"id":"pm-14","method":"session.prompt","params":{}}"#, "invalid_request", "Prompt delivery must be direct, steer, follow_up, or continue", Some("pm-14")),
    no("prompt-text-number", r#"{"version":1,"id":"pm-15","method":"session.prompt","params":{"delivery":"direct","text":5}}"#, "invalid_request", "Prompt text must be a string of at most 8388608 bytes", Some("pm-15")),
    no("prompt-text-infinity", r#"{"version":1,"id":"pm-16","method":"session.prompt","params":{"delivery":"direct","text":1e400}}"#, "invalid_request", "Prompt text must be a string of at most 8388608 bytes", Some("pm-16")),
    no("prompt-text-missing", r#"{"version":1,"id":"pm-17","method":"session.prompt","params":{"delivery":"direct"}}"#, "invalid_request", "Prompt text must be a string of at most 8388608 bytes", Some("pm-17")),
    no("prompt-text-before-completion-id", r#"{"version":1,"id":"pm-18","method":"session.prompt","params":{"delivery":"direct","text":1,"completionId":""}}"#, "invalid_request", "Prompt text must be a string of at most 8388608 bytes", Some("pm-18")),
    no("prompt-unknown-param-first", r#"{"version":1,"id":"pm-19","method":"session.prompt","params":{"delivery":"later","bogus":1}}"#, "invalid_request", UNKNOWN_FIELDS, Some("pm-19")),
    no("prompt-empty-completion-id", r#"{"version":1,"id":"pm-20","method":"session.prompt","params":{"delivery":"direct","text":"x","completionId":""}}"#, "invalid_request", "Completion id must be a non-empty string of at most 256 bytes", Some("pm-20")),
    no("await-idle-completion-id-number", r#"{"version":1,"id":"pm-21","method":"session.await_idle","params":{"completionId":1}}"#, "invalid_request", "Completion id must be a non-empty string of at most 256 bytes", Some("pm-21")),
    no("await-idle-unknown-param", r#"{"version":1,"id":"pm-22","method":"session.await_idle","params":{"completionId":"a","x":1}}"#, "invalid_request", UNKNOWN_FIELDS, Some("pm-22")),
    no("set-events-mode-null", r#"{"version":1,"id":"pm-23","method":"connection.set_events","params":{"mode":null}}"#, "invalid_request", "Event mode must be all, none, or activity", Some("pm-23")),
    no("set-events-empty-params", r#"{"version":1,"id":"pm-24","method":"connection.set_events","params":{}}"#, "invalid_request", MISSING_FIELDS, Some("pm-24")),
    no("set-events-unknown-before-value", r#"{"version":1,"id":"pm-25","method":"connection.set_events","params":{"mode":"bad","x":1}}"#, "invalid_request", UNKNOWN_FIELDS, Some("pm-25")),
    no("command-name-trailing-dash", r#"{"version":1,"id":"pm-26","method":"command.invoke","params":{"name":"trailing-","arguments":""}}"#, "invalid_request", "Command name must use lowercase kebab-case", Some("pm-26")),
    no("command-name-empty", r#"{"version":1,"id":"pm-27","method":"command.invoke","params":{"name":"","arguments":""}}"#, "invalid_request", "Command name must be a non-empty string of at most 64 bytes", Some("pm-27")),
    no("command-arguments-number", r#"{"version":1,"id":"pm-28","method":"command.invoke","params":{"name":"x","arguments":5}}"#, "invalid_request", "Command arguments must be a string of at most 262144 bytes", Some("pm-28")),
    no("command-unknown-param", r#"{"version":1,"id":"pm-29","method":"command.invoke","params":{"name":"x","arguments":"","more":1}}"#, "invalid_request", UNKNOWN_FIELDS, Some("pm-29")),
    no("command-missing-name", r#"{"version":1,"id":"pm-30","method":"command.invoke","params":{"arguments":""}}"#, "invalid_request", MISSING_FIELDS, Some("pm-30")),
    no("model-empty-id", r#"{"version":1,"id":"pm-31","method":"model.select","params":{"provider":"p","id":""}}"#, "invalid_request", "Model id must be a non-empty string of at most 256 bytes", Some("pm-31")),
    no("model-id-number", r#"{"version":1,"id":"pm-32","method":"model.select","params":{"provider":"p","id":3}}"#, "invalid_request", "Model id must be a non-empty string of at most 256 bytes", Some("pm-32")),
    no("model-provider-before-id", r#"{"version":1,"id":"pm-33","method":"model.select","params":{"provider":"","id":""}}"#, "invalid_request", "Model provider must be a non-empty string of at most 256 bytes", Some("pm-33")),
    no("model-missing-id", r#"{"version":1,"id":"pm-34","method":"model.select","params":{"provider":"p"}}"#, "invalid_request", MISSING_FIELDS, Some("pm-34")),
    no("model-unknown-param", r#"{"version":1,"id":"pm-35","method":"model.select","params":{"provider":"p","id":"x","x":1}}"#, "invalid_request", UNKNOWN_FIELDS, Some("pm-35")),
    no("thinking-empty-params", r#"{"version":1,"id":"pm-36","method":"thinking.select","params":{}}"#, "invalid_request", "Unsupported thinking level", Some("pm-36")),
    no("thinking-unknown-param", r#"{"version":1,"id":"pm-37","method":"thinking.select","params":{"level":"high","x":1}}"#, "invalid_request", UNKNOWN_FIELDS, Some("pm-37")),
    no("session-list-limit-before-scope", r#"{"version":1,"id":"pm-38","method":"session.list","params":{"limit":0,"scope":"x"}}"#, "invalid_request", "Session list limit must be an integer from 1 through 100", Some("pm-38")),
    no("fork-empty-entry-id", r#"{"version":1,"id":"pm-39","method":"session.fork","params":{"entryId":""}}"#, "invalid_request", "Entry id must be a non-empty string of at most 256 bytes", Some("pm-39")),
    // Accepted records.
    ok("thinking-select-default-scope", r#"{"version":1,"id":"a1","method":"thinking.select","params":{"level":"high"}}"#, "a1", r#"{"method":"thinking.select","params":{"level":"high","scope":"global"}}"#),
    ok("messages-without-params", r#"{"version":1,"id":"a2","method":"session.get_messages"}"#, "a2", r#"{"method":"session.get_messages"}"#),
    ok("messages-default-limit", r#"{"version":1,"id":"a3","method":"session.get_messages","params":{"start":2}}"#, "a3", r#"{"method":"session.get_messages","params":{"start":2,"limit":100}}"#),
    ok("outcomes-page", r#"{"version":1,"id":"a4","method":"session.get_outcomes","params":{"start":2,"limit":3}}"#, "a4", r#"{"method":"session.get_outcomes","params":{"start":2,"limit":3}}"#),
    ok("set-events-activity", r#"{"version":1,"id":"a5","method":"connection.set_events","params":{"mode":"activity"}}"#, "a5", r#"{"method":"connection.set_events","params":{"mode":"activity"}}"#),
    ok("full-record-any-key-order", r#"  {"method":"session.prompt","params":{"text":"hi","delivery":"steer"},"id":"p1","version":1}  "#, "p1", r#"{"method":"session.prompt","params":{"delivery":"steer","text":"hi"}}"#),
    ok("version-one-point-zero", r#"{"version":1.0,"id":"a6","method":"model.list"}"#, "a6", r#"{"method":"model.list"}"#),
    ok("version-exponent", r#"{"version":10e-1,"id":"a7","method":"model.list"}"#, "a7", r#"{"method":"model.list"}"#),
    ok("duplicate-keys-last-wins", r#"{"version":2,"version":1,"id":"","id":"b","method":"x","method":"model.list"}"#, "b", r#"{"method":"model.list"}"#),
    ok("duplicate-param-last-wins", r#"{"version":1,"id":"b","method":"session.get_messages","params":{"limit":0,"limit":5}}"#, "b", r#"{"method":"session.get_messages","params":{"start":0,"limit":5}}"#),
    ok("page-nulls-take-defaults", r#"{"version":1,"id":"a8","method":"session.get_outcomes","params":{"start":null,"limit":null}}"#, "a8", r#"{"method":"session.get_outcomes","params":{"start":0,"limit":100}}"#),
    ok("page-underflow-is-zero", r#"{"version":1,"id":"a9","method":"session.get_messages","params":{"start":1e-400,"limit":1e2}}"#, "a9", r#"{"method":"session.get_messages","params":{"start":0,"limit":100}}"#),
    ok("session-list-null-scope", r#"{"version":1,"id":"b1","method":"session.list","params":{"start":null,"limit":null,"scope":null}}"#, "b1", r#"{"method":"session.list","params":{"start":0,"limit":100,"scope":"cwd"}}"#),
];
