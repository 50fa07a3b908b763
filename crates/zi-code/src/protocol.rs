//! The host ↔ worker protocol (docs/code-mode.md#the-worker-protocol): frames of a 4-byte
//! big-endian length and that many bytes of one UTF-8 JSON object, both directions, on the
//! worker's stdin and stdout. Each side treats the other's frames as untrusted: a length over
//! [`MAX_FRAME`] is refused before anything is allocated, and the host kills a worker that
//! breaks the protocol.
//!
//! | dir | `t` | fields |
//! | --- | --- | --- |
//! | W→H | `ready` | `v`, `ok`, `enforcement`, `landlockAbi`, or `ok: false, problem` |
//! | H→W | `start` | `v`, `code`, `tools`, `limits {timeoutMs, maxCalls, memoryMiB, logBytes}` |
//! | W→H | `call` | `id` (1, 2, … in start order), `name`, `input` (an object) |
//! | W→H | `log` | `text`, `truncated` |
//! | H→W | `result` | `id`, `ok: true, value?` or `ok: false, error {message, details?}`; `deadlineMs?` |
//! | H→W | `cancel` | — |
//! | W→H | `done` | `ok: true, value?, calls` or `ok: false, error {kind, message, name?, stack?, toolName?, unawaited?}` |

use serde::Deserialize;
use serde_json::value::RawValue;

/// The protocol version both sides check.
pub const VERSION: u32 = 1;
/// Largest frame either side accepts (a `write` of 8 MiB plus JSON escaping headroom).
pub const MAX_FRAME: usize = 16 << 20;
/// Deepest JSON value that may cross the boundary.
pub const MAX_DEPTH: usize = 64;
/// Largest call input, as JSON.
pub const MAX_INPUT_BYTES: usize = (8 << 20) + (64 << 10);
/// Largest value handed back to a cell, as JSON.
pub const MAX_VALUE_BYTES: usize = 8 << 20;
/// Largest return value of a cell, as JSON.
pub const MAX_RETURN_BYTES: usize = 1 << 20;

/// A length-prefixed frame around `body`.
pub fn frame(body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(4 + body.len());
    out.extend_from_slice(&(body.len() as u32).to_be_bytes());
    out.extend_from_slice(body);
    out
}

/// Nesting depth of JSON text produced by a serializer (strings are the only place brackets
/// hide, and `\"` the only escaped quote): O(n), no allocation.
pub fn json_depth(text: &str) -> usize {
    let (mut depth, mut max, mut in_string, mut escaped) = (0usize, 0usize, false, false);
    for byte in text.bytes() {
        if in_string {
            match byte {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match byte {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                max = max.max(depth);
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    max
}

/// Why a cell ended without a value (the worker's `done.error`, or the host's own finding).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CellError {
    /// `exception`, `memory`, `stack`, `timeout`, `interrupted`, `call_limit`, `unawaited`,
    /// `deadlock`, `result_too_large`, `result_not_json`, `protocol`, `internal`; the host adds
    /// `crashed`, `killed` and `sandbox`.
    pub kind: String,
    pub message: String,
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub stack: Option<Box<str>>,
    #[serde(default)]
    pub tool_name: Option<String>,
    /// The calls never awaited (`[{id, name, awaited, settled}]`).
    #[serde(default)]
    pub unawaited: Option<Box<serde_json::Value>>,
}

impl CellError {
    pub fn new(kind: &str, message: impl Into<String>) -> CellError {
        CellError {
            kind: kind.to_string(),
            message: message.into(),
            name: None,
            stack: None,
            tool_name: None,
            unawaited: None,
        }
    }
}

/// A frame from the worker, decoded by the host.
#[derive(Debug)]
pub enum WorkerFrame {
    Ready {
        enforcement: String,
        landlock_abi: u32,
    },
    /// The worker could not confine itself.
    NotReady {
        problem: String,
    },
    Call {
        id: u64,
        name: String,
        input: Box<RawValue>,
    },
    Log {
        text: String,
        truncated: bool,
    },
    Done(Result<Option<Box<RawValue>>, CellError>),
}

/// The flat shape every worker frame is read into (an internally tagged enum cannot hold a
/// `RawValue`, which keeps large inputs from being rebuilt).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Flat {
    t: String,
    v: Option<u32>,
    ok: Option<bool>,
    enforcement: Option<String>,
    landlock_abi: Option<u32>,
    problem: Option<String>,
    id: Option<u64>,
    name: Option<String>,
    input: Option<Box<RawValue>>,
    text: Option<String>,
    truncated: Option<bool>,
    value: Option<Box<RawValue>>,
    /// How many calls the cell made (informational; the host counts them itself).
    #[serde(rename = "calls")]
    _calls: Option<u64>,
    error: Option<CellError>,
}

/// A frame the host refuses: the worker is then killed as compromised or broken.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("protocol error: {0}")]
pub struct ProtocolError(pub String);

impl WorkerFrame {
    pub fn decode(body: &[u8]) -> Result<WorkerFrame, ProtocolError> {
        let flat: Flat =
            serde_json::from_slice(body).map_err(|e| ProtocolError(format!("bad frame: {e}")))?;
        let missing = |field: &str| ProtocolError(format!("`{}` frame without `{field}`", flat.t));
        Ok(match flat.t.as_str() {
            "ready" => {
                if flat.v != Some(VERSION) {
                    return Err(ProtocolError(format!(
                        "worker speaks version {:?}, not {VERSION}",
                        flat.v
                    )));
                }
                match flat.ok {
                    Some(true) => WorkerFrame::Ready {
                        enforcement: flat.enforcement.ok_or_else(|| missing("enforcement"))?,
                        landlock_abi: flat.landlock_abi.unwrap_or(0),
                    },
                    _ => WorkerFrame::NotReady {
                        problem: flat.problem.unwrap_or_default(),
                    },
                }
            }
            "call" => {
                let input = flat.input.ok_or_else(|| missing("input"))?;
                WorkerFrame::Call {
                    id: flat.id.ok_or_else(|| missing("id"))?,
                    name: flat.name.ok_or_else(|| missing("name"))?,
                    input,
                }
            }
            "log" => WorkerFrame::Log {
                text: flat.text.ok_or_else(|| missing("text"))?,
                truncated: flat.truncated.unwrap_or(false),
            },
            "done" => match flat.ok {
                Some(true) => WorkerFrame::Done(Ok(flat.value)),
                Some(false) => {
                    WorkerFrame::Done(Err(flat.error.ok_or_else(|| missing("error"))?))
                }
                None => return Err(missing("ok")),
            },
            other => return Err(ProtocolError(format!("unknown frame type {other:?}"))),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn depth_ignores_brackets_in_strings() {
        assert_eq!(json_depth(r#"{"a":[1,{"b":"[[[{"}]}"#), 3);
        assert_eq!(json_depth(r#""\"[""#), 0);
        assert_eq!(json_depth("1"), 0);
        let deep = "[".repeat(70) + &"]".repeat(70);
        assert_eq!(json_depth(&deep), 70);
    }

    #[test]
    fn frames_decode_and_refuse_junk() {
        let call =
            WorkerFrame::decode(br#"{"t":"call","id":3,"name":"read","input":{"path":"a"}}"#);
        match call {
            Ok(WorkerFrame::Call { id, name, input }) => {
                assert_eq!((id, name.as_str()), (3, "read"));
                assert_eq!(input.get(), r#"{"path":"a"}"#);
            }
            other => panic!("{other:?}"),
        }
        let ready = WorkerFrame::decode(
            br#"{"t":"ready","v":1,"ok":true,"enforcement":"landlock+seccomp","landlockAbi":7}"#,
        );
        assert!(matches!(
            ready,
            Ok(WorkerFrame::Ready {
                landlock_abi: 7,
                ..
            })
        ));
        let failed = WorkerFrame::decode(
            br#"{"t":"done","ok":false,"error":{"kind":"timeout","message":"late"}}"#,
        );
        assert!(matches!(failed, Ok(WorkerFrame::Done(Err(e))) if e.kind == "timeout"));
        for junk in [
            &br#"{"t":"call","id":1,"name":"x"}"#[..],
            br#"{"t":"ready","v":2,"ok":true,"enforcement":"none"}"#,
            br#"{"t":"log","text":"a","extra":1}"#,
            br#"{"t":"exec"}"#,
            b"[1]",
            b"not json",
        ] {
            assert!(
                WorkerFrame::decode(junk).is_err(),
                "{}",
                String::from_utf8_lossy(junk)
            );
        }
    }

    #[test]
    fn frames_are_length_prefixed() {
        assert_eq!(frame(b"{}"), [0, 0, 0, 2, b'{', b'}']);
    }
}
