//! The decode-case table of the conformance kit (docs/rpc.md#decoding-a-request): one record each,
//! with the `protocol_error` a server must answer it with, after which the connection keeps
//! serving.
//!
//! The kit sends every case to the server under test (checks `decode.<name>`); zi-protocol's
//! unit tests run the same table through its decoder (`#[path]`-included, so this file uses
//! nothing but `core`).

/// One record and the recoverable `protocol_error` it must produce.
pub struct DecodeCase {
    /// The check name (`decode.<name>`).
    pub name: &'static str,
    /// The record, without its LF.
    pub line: &'static str,
    /// The `protocol_error` code.
    pub code: &'static str,
    /// The exact message.
    pub message: &'static str,
    /// The `id` the frame carries; `None` when the key must be absent.
    pub id: Option<&'static str>,
}

const MISSING: &str = "RPC request is missing required fields";
const UNKNOWN: &str = "RPC request contains unknown fields";

/// Every case, in check order.
pub const DECODE_CASES: &[DecodeCase] = &[
    DecodeCase {
        name: "invalid-json",
        line: "not json",
        code: "invalid_json",
        message: "RPC input must contain one JSON object per line",
        id: None,
    },
    DecodeCase {
        name: "not-an-object",
        line: "[1]",
        code: "invalid_request",
        message: "RPC requests must be JSON objects",
        id: None,
    },
    DecodeCase {
        name: "version-2",
        line: r#"{"version":2,"id":"v","method":"session.get_state"}"#,
        code: "unsupported_version",
        message: "Unsupported RPC protocol version: 2 (expected 1)",
        id: Some("v"),
    },
    DecodeCase {
        name: "version-missing",
        line: r#"{"id":"v","method":"session.get_state"}"#,
        code: "unsupported_version",
        message: "Unsupported RPC protocol version: undefined (expected 1)",
        id: Some("v"),
    },
    DecodeCase {
        name: "version-string",
        line: r#"{"version":"1","id":"v","method":"session.get_state"}"#,
        code: "unsupported_version",
        message: "Unsupported RPC protocol version: 1 (expected 1)",
        id: Some("v"),
    },
    DecodeCase {
        name: "version-before-id",
        line: r#"{"version":2}"#,
        code: "unsupported_version",
        message: "Unsupported RPC protocol version: 2 (expected 1)",
        id: None,
    },
    DecodeCase {
        name: "empty-id",
        line: r#"{"version":1,"id":"","method":"session.get_state"}"#,
        code: "invalid_request",
        message: "RPC request id must be a non-empty string of at most 256 bytes",
        id: None,
    },
    // The id is 257 bytes, one over the bound.
    DecodeCase {
        name: "long-id",
        line: r#"{"version":1,"id":"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx","method":"session.get_state"}"#,
        code: "invalid_request",
        message: "RPC request id must be a non-empty string of at most 256 bytes",
        id: None,
    },
    DecodeCase {
        name: "method-not-string",
        line: r#"{"version":1,"id":"m","method":7}"#,
        code: "invalid_request",
        message: "RPC request method must be a string",
        id: Some("m"),
    },
    DecodeCase {
        name: "unknown-method",
        line: r#"{"version":1,"id":"u","method":"unknown"}"#,
        code: "unknown_method",
        message: "Unknown RPC method: unknown",
        id: Some("u"),
    },
    DecodeCase {
        name: "extra-top-level-key",
        line: r#"{"version":1,"id":"x","method":"session.get_state","extra":1}"#,
        code: "invalid_request",
        message: UNKNOWN,
        id: Some("x"),
    },
    DecodeCase {
        name: "params-on-get-state",
        line: r#"{"version":1,"id":"x","method":"session.get_state","params":{}}"#,
        code: "invalid_request",
        message: UNKNOWN,
        id: Some("x"),
    },
    DecodeCase {
        name: "prompt-missing-params",
        line: r#"{"version":1,"id":"p","method":"session.prompt"}"#,
        code: "invalid_request",
        message: MISSING,
        id: Some("p"),
    },
    DecodeCase {
        name: "prompt-params-not-object",
        line: r#"{"version":1,"id":"p","method":"session.prompt","params":[]}"#,
        code: "invalid_request",
        message: "session.prompt params must be an object",
        id: Some("p"),
    },
    DecodeCase {
        name: "prompt-bad-delivery",
        line: r#"{"version":1,"id":"p","method":"session.prompt","params":{"delivery":"later","text":""}}"#,
        code: "invalid_request",
        message: "Prompt delivery must be direct, steer, follow_up, or continue",
        id: Some("p"),
    },
    DecodeCase {
        name: "prompt-unknown-param",
        line: r#"{"version":1,"id":"p","method":"session.prompt","params":{"delivery":"direct","text":"","x":1}}"#,
        code: "invalid_request",
        message: UNKNOWN,
        id: Some("p"),
    },
    DecodeCase {
        name: "prompt-null-completion-id",
        line: r#"{"version":1,"id":"p","method":"session.prompt","params":{"delivery":"direct","text":"","completionId":null}}"#,
        code: "invalid_request",
        message: "Completion id must be a non-empty string of at most 256 bytes",
        id: Some("p"),
    },
    DecodeCase {
        name: "prompt-images-null",
        line: r#"{"version":1,"id":"p","method":"session.prompt","params":{"delivery":"direct","text":"","images":null}}"#,
        code: "invalid_request",
        message: "Prompt images must be an array of at most 16 images",
        id: Some("p"),
    },
    DecodeCase {
        name: "prompt-images-not-array",
        line: r#"{"version":1,"id":"p","method":"session.prompt","params":{"delivery":"direct","text":"","images":{"type":"image"}}}"#,
        code: "invalid_request",
        message: "Prompt images must be an array of at most 16 images",
        id: Some("p"),
    },
    DecodeCase {
        name: "prompt-images-over-16",
        line: r#"{"version":1,"id":"p","method":"session.prompt","params":{"delivery":"direct","text":"","images":[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1]}}"#,
        code: "invalid_request",
        message: "Prompt images must be an array of at most 16 images",
        id: Some("p"),
    },
    DecodeCase {
        name: "prompt-image-not-object",
        line: r#"{"version":1,"id":"p","method":"session.prompt","params":{"delivery":"direct","text":"","images":["iVBORw0KGgo="]}}"#,
        code: "invalid_request",
        message: "Prompt images[0] must be an object",
        id: Some("p"),
    },
    DecodeCase {
        name: "prompt-image-unknown-field",
        line: r#"{"version":1,"id":"p","method":"session.prompt","params":{"delivery":"direct","text":"","images":[{"type":"image","data":"QUJD","mimeType":"image/png","x":1}]}}"#,
        code: "invalid_request",
        message: "Prompt images[0] contains unknown fields",
        id: Some("p"),
    },
    DecodeCase {
        name: "prompt-image-missing-field",
        line: r#"{"version":1,"id":"p","method":"session.prompt","params":{"delivery":"direct","text":"","images":[{"type":"image","mimeType":"image/png"}]}}"#,
        code: "invalid_request",
        message: "Prompt images[0] is missing required fields",
        id: Some("p"),
    },
    DecodeCase {
        name: "prompt-image-wrong-type",
        line: r#"{"version":1,"id":"p","method":"session.prompt","params":{"delivery":"direct","text":"","images":[{"type":"image","data":"QUJD","mimeType":"image/png"},{"type":"text","data":"QUJD","mimeType":"image/png"}]}}"#,
        code: "invalid_request",
        message: "Prompt images[1] type must be image",
        id: Some("p"),
    },
    DecodeCase {
        name: "prompt-image-wrong-mime-type",
        line: r#"{"version":1,"id":"p","method":"session.prompt","params":{"delivery":"direct","text":"","images":[{"type":"image","data":"QUJD","mimeType":"image/svg+xml"}]}}"#,
        code: "invalid_request",
        message: "Prompt images[0] mimeType must be image/png, image/jpeg, image/gif, or image/webp",
        id: Some("p"),
    },
    DecodeCase {
        name: "prompt-image-bad-base64",
        line: r#"{"version":1,"id":"p","method":"session.prompt","params":{"delivery":"direct","text":"","images":[{"type":"image","data":"QUJ","mimeType":"image/png"}]}}"#,
        code: "invalid_request",
        message: "Prompt images[0] data must be non-empty standard base64",
        id: Some("p"),
    },
    DecodeCase {
        name: "prompt-image-empty-data",
        line: r#"{"version":1,"id":"p","method":"session.prompt","params":{"delivery":"direct","text":"","images":[{"type":"image","data":"","mimeType":"image/jpeg"}]}}"#,
        code: "invalid_request",
        message: "Prompt images[0] data must be non-empty standard base64",
        id: Some("p"),
    },
    DecodeCase {
        name: "await-idle-empty-params",
        line: r#"{"version":1,"id":"w","method":"session.await_idle","params":{}}"#,
        code: "invalid_request",
        message: MISSING,
        id: Some("w"),
    },
    DecodeCase {
        name: "await-idle-empty-completion-id",
        line: r#"{"version":1,"id":"w","method":"session.await_idle","params":{"completionId":""}}"#,
        code: "invalid_request",
        message: "Completion id must be a non-empty string of at most 256 bytes",
        id: Some("w"),
    },
    DecodeCase {
        name: "messages-negative-start",
        line: r#"{"version":1,"id":"m","method":"session.get_messages","params":{"start":-1}}"#,
        code: "invalid_request",
        message: "Message start must be a non-negative integer",
        id: Some("m"),
    },
    DecodeCase {
        name: "messages-limit-101",
        line: r#"{"version":1,"id":"m","method":"session.get_messages","params":{"limit":101}}"#,
        code: "invalid_request",
        message: "Message limit must be an integer from 1 through 100",
        id: Some("m"),
    },
    DecodeCase {
        name: "outcomes-limit-101",
        line: r#"{"version":1,"id":"o","method":"session.get_outcomes","params":{"limit":101}}"#,
        code: "invalid_request",
        message: "Outcome limit must be an integer from 1 through 100",
        id: Some("o"),
    },
    DecodeCase {
        name: "outcomes-params-not-object",
        line: r#"{"version":1,"id":"o","method":"session.get_outcomes","params":3}"#,
        code: "invalid_request",
        message: "session.get_outcomes params must be an object",
        id: Some("o"),
    },
    DecodeCase {
        name: "set-events-bad-mode",
        line: r#"{"version":1,"id":"e","method":"connection.set_events","params":{"mode":"sometimes"}}"#,
        code: "invalid_request",
        message: "Event mode must be all, none, or activity",
        id: Some("e"),
    },
    DecodeCase {
        name: "set-events-extra-key",
        line: r#"{"version":1,"id":"e","method":"connection.set_events","params":{"mode":"none","extra":true}}"#,
        code: "invalid_request",
        message: UNKNOWN,
        id: Some("e"),
    },
    DecodeCase {
        name: "command-name-case",
        line: r#"{"version":1,"id":"c","method":"command.invoke","params":{"name":"Invalid_Command","arguments":""}}"#,
        code: "invalid_request",
        message: "Command name must use lowercase kebab-case",
        id: Some("c"),
    },
    DecodeCase {
        name: "command-missing-arguments",
        line: r#"{"version":1,"id":"c","method":"command.invoke","params":{"name":"x"}}"#,
        code: "invalid_request",
        message: MISSING,
        id: Some("c"),
    },
    DecodeCase {
        name: "model-empty-provider",
        line: r#"{"version":1,"id":"s","method":"model.select","params":{"provider":"","id":"m1"}}"#,
        code: "invalid_request",
        message: "Model provider must be a non-empty string of at most 256 bytes",
        id: Some("s"),
    },
    DecodeCase {
        name: "thinking-bad-level",
        line: r#"{"version":1,"id":"t","method":"thinking.select","params":{"level":"huge"}}"#,
        code: "invalid_request",
        message: "Unsupported thinking level",
        id: Some("t"),
    },
    DecodeCase {
        name: "thinking-bad-scope",
        line: r#"{"version":1,"id":"t","method":"thinking.select","params":{"level":"high","scope":"user"}}"#,
        code: "invalid_request",
        message: "Thinking scope must be global or project",
        id: Some("t"),
    },
];
