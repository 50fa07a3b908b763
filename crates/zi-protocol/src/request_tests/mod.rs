//! The decoder's unit tests (docs/rpc.md#decoding-a-request): the decode-case table run through
//! [`decode_record`], then what needs generated input — JavaScript's number-to-string conversion
//! in version messages, bounds at and past their limits, every method in turn — and the fast
//! path agreeing with the general one. Params of each method: `params.rs`. A new decoding case
//! with a literal record is a row of `crate::decode_cases`, not a test here.

use super::*;
use crate::ThinkingLevel;
use crate::params::*;
use serde_json::json;

/// A decoded request with its defaults applied, the shape the assertions below compare.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Normal {
    GetState,
    GetMessages {
        start: u64,
        limit: u64,
    },
    GetOutcomes {
        start: u64,
        limit: u64,
    },
    Prompt {
        delivery: Delivery,
        text: String,
        completion_id: Option<String>,
    },
    Interrupt,
    AwaitIdle {
        completion_id: Option<String>,
    },
    Compact {
        instructions: Option<String>,
    },
    GetStats,
    SetEvents {
        mode: EventMode,
    },
    CommandList,
    CommandInvoke {
        name: String,
        arguments: String,
    },
    ModelList,
    ModelSelect {
        provider: String,
        id: String,
    },
    ThinkingList,
    ThinkingSelect {
        level: ThinkingLevel,
        scope: SettingsScope,
    },
    ListSessions {
        start: u64,
        limit: u64,
        scope: SessionListScope,
    },
    GetEntries {
        start: u64,
        limit: u64,
    },
    Fork {
        entry_id: String,
    },
    SetApprovals(crate::params::SetApprovalsParams),
    ApprovalRespond(crate::params::ApprovalRespondParams),
}

fn normal(request: Request) -> Normal {
    match request {
        Request::GetState(_) => Normal::GetState,
        Request::GetMessages(call) => {
            let MessagesParams { start, limit } = call.params.unwrap_or_default();
            Normal::GetMessages { start, limit }
        }
        Request::GetOutcomes(call) => {
            let OutcomesParams { start, limit } = call.params.unwrap_or_default();
            Normal::GetOutcomes { start, limit }
        }
        Request::Prompt(call) => Normal::Prompt {
            delivery: call.params.delivery,
            text: call.params.text,
            completion_id: call.params.completion_id,
        },
        Request::Interrupt(_) => Normal::Interrupt,
        Request::AwaitIdle(call) => Normal::AwaitIdle {
            completion_id: call.params.map(|p| p.completion_id),
        },
        Request::Compact(call) => Normal::Compact {
            instructions: call.params.and_then(|p| p.instructions),
        },
        Request::GetStats(_) => Normal::GetStats,
        Request::SetEvents(call) => Normal::SetEvents {
            mode: call.params.mode,
        },
        Request::CommandList(_) => Normal::CommandList,
        Request::CommandInvoke(call) => Normal::CommandInvoke {
            name: call.params.name,
            arguments: call.params.arguments,
        },
        Request::ModelList(_) => Normal::ModelList,
        Request::ModelSelect(call) => Normal::ModelSelect {
            provider: call.params.provider,
            id: call.params.id,
        },
        Request::ThinkingList(_) => Normal::ThinkingList,
        Request::ThinkingSelect(call) => Normal::ThinkingSelect {
            level: call.params.level,
            scope: call.params.scope,
        },
        Request::ListSessions(call) => {
            let SessionListParams {
                start,
                limit,
                scope,
            } = call.params.unwrap_or_default();
            Normal::ListSessions {
                start,
                limit,
                scope,
            }
        }
        Request::GetEntries(call) => {
            let EntriesParams { start, limit } = call.params.unwrap_or_default();
            Normal::GetEntries { start, limit }
        }
        Request::Fork(call) => Normal::Fork {
            entry_id: call.params.entry_id,
        },
        Request::SetApprovals(call) => Normal::SetApprovals(call.params),
        Request::ApprovalRespond(call) => Normal::ApprovalRespond(call.params),
    }
}

const ID: &str = "req-1";

fn envelope(method: &str, params: Option<Value>) -> Value {
    let mut value = json!({"version": 1, "id": ID, "method": method});
    if let (Some(params), Value::Object(object)) = (params, &mut value) {
        object.insert("params".to_owned(), params);
    }
    value
}

fn decoded(value: Value) -> Normal {
    match decode_value(value.clone()) {
        Ok(decoded) => {
            assert_eq!(decoded.id, value["id"].as_str().unwrap_or_default());
            assert_eq!(
                decoded.request.method().name(),
                value["method"].as_str().unwrap_or_default()
            );
            normal(decoded.request)
        }
        Err(error) => panic!("{value} was rejected: {error:?}"),
    }
}

fn accepted(method: &str, params: Option<Value>) -> Normal {
    decoded(envelope(method, params))
}

fn failure(value: Value) -> ProtocolError {
    match decode_value(value.clone()) {
        Ok(decoded) => panic!("{value} was accepted as {decoded:?}"),
        Err(error) => error,
    }
}

fn record_failure(line: &str) -> ProtocolError {
    match decode_record(line) {
        Ok(decoded) => panic!("{line:?} was accepted as {decoded:?}"),
        Err(error) => error,
    }
}

/// Asserts an `invalid_request` with the request id.
fn rejected(method: &str, params: Option<Value>, message: &str) {
    let value = envelope(method, params);
    assert_eq!(
        failure(value.clone()),
        ProtocolError::invalid_request(message, Some(ID.to_owned())),
        "for {value}"
    );
}

fn text_of(bytes: usize) -> String {
    "a".repeat(bytes)
}

fn kebab_of(bytes: usize) -> String {
    let mut name = "a-".repeat(bytes / 2);
    if bytes % 2 == 1 {
        name.push('b');
    } else {
        name.pop();
        name.push('c');
    }
    assert_eq!(name.len(), bytes);
    assert!(is_kebab_case(&name), "{name}");
    name
}

fn version_message(version: Value) -> String {
    let mut value = json!({"id": ID, "method": "session.get_state"});
    value["version"] = version;
    failure(value).message
}

// --- the decode-case table (crate::decode_cases) ---

/// What decoding `line` gave, in the table's terms: the `protocol_error`, or the id and
/// `{"method", "params"}` of the request.
fn outcome(line: &str) -> Result<(String, Value), (String, String, Option<String>)> {
    match decode_record(line) {
        Ok(decoded) => {
            let mut request = json!({"method": decoded.request.method().name()});
            match decoded.request.encode_params() {
                Ok(Some(params)) => request["params"] = params,
                Ok(None) => {}
                Err(error) => panic!("{line}: params do not encode: {error}"),
            }
            Ok((decoded.id, request))
        }
        Err(error) => Err((error.code.as_str().to_owned(), error.message, error.id)),
    }
}

#[test]
fn every_decode_case_decodes_as_its_row_says() {
    use crate::decode_cases::{DECODE_CASES, Expected};
    let mut names = std::collections::HashSet::new();
    for case in DECODE_CASES {
        assert!(
            names.insert(case.name),
            "decode.{} is named twice",
            case.name
        );
        let expected = match case.expected {
            Expected::Accepted { id, request } => match serde_json::from_str(request) {
                Ok(request) => Ok((id.to_owned(), request)),
                Err(error) => panic!("decode.{}: the row's request: {error}", case.name),
            },
            Expected::Rejected { code, message, id } => {
                Err((code.to_owned(), message.to_owned(), id.map(str::to_owned)))
            }
        };
        assert_eq!(
            outcome(case.line),
            expected,
            "decode.{}: {}",
            case.name,
            case.line
        );
    }
}

// --- envelope order (docs/rpc.md#processing-order), with generated values ---

/// A valid id (up to 256 bytes) rides along on the version error, an invalid one does not.
#[test]
fn the_version_error_carries_only_a_valid_id() {
    for id in [json!(""), json!(text_of(257)), json!([ID])] {
        assert_eq!(failure(json!({"version": 0, "id": id})).id, None);
    }
    assert_eq!(
        failure(json!({"version": 0, "id": text_of(256)})).id,
        Some(text_of(256))
    );
}

#[test]
fn version_accepts_only_the_number_one() {
    for line in [
        r#"{"version":1,"id":"a","method":"model.list"}"#,
        r#"{"version":1.0,"id":"a","method":"model.list"}"#,
        r#"{"version":1e0,"id":"a","method":"model.list"}"#,
        r#"{"version":10e-1,"id":"a","method":"model.list"}"#,
    ] {
        assert_eq!(
            decode_record(line).map(|d| normal(d.request)),
            Ok(Normal::ModelList),
            "{line}"
        );
    }
    for version in [
        json!("1"),
        json!(true),
        json!(null),
        json!([1]),
        json!({}),
        json!(-1),
        json!(1.5),
    ] {
        let mut value = envelope("model.list", None);
        value["version"] = version;
        assert_eq!(failure(value).code, ProtocolErrorCode::UnsupportedVersion);
    }
}

#[test]
fn version_messages_use_javascript_string_conversion() {
    let cases = [
        (json!(2), "2"),
        (json!(1.5), "1.5"),
        (json!(null), "null"),
        (json!("1"), "1"),
        (json!(""), ""),
        (json!("v1 beta"), "v1 beta"),
        (json!(true), "true"),
        (json!(false), "false"),
        (json!([]), ""),
        (json!([1, 2]), "1,2"),
        (json!([1, [2, [3, "x"]]]), "1,2,3,x"),
        (json!([null, 1, null]), ",1,"),
        (json!([true, {}]), "true,[object Object]"),
        (json!({}), "[object Object]"),
        (json!({"a": 1}), "[object Object]"),
        (json!(0), "0"),
        (json!(-5), "-5"),
        (json!(-0.0), "0"),
        (json!(2.0), "2"),
        (json!(0.1), "0.1"),
        (json!(-1.25), "-1.25"),
        (json!(123.456), "123.456"),
        (json!(1e21), "1e+21"),
        (json!(1e20), "100000000000000000000"),
        (json!(1.5e21), "1.5e+21"),
        (json!(123456789012345680000.0), "123456789012345680000"),
        (json!(0.000001), "0.000001"),
        (json!(0.0000001), "1e-7"),
        (json!(1.25e-7), "1.25e-7"),
        (json!(-2.5e-10), "-2.5e-10"),
        (json!(1e300), "1e+300"),
        (json!(f64::MAX), "1.7976931348623157e+308"),
        (json!(5e-324), "5e-324"),
        (json!(9007199254740992u64), "9007199254740992"),
        (json!(9007199254740993u64), "9007199254740992"),
        (json!(u64::MAX), "18446744073709552000"),
        (json!(i64::MIN), "-9223372036854776000"),
        (json!(-9007199254740992i64), "-9007199254740992"),
    ];
    for (version, expected) in cases {
        assert_eq!(
            version_message(version.clone()),
            errors::unsupported_version(expected),
            "for {version}"
        );
    }
    for (line, expected) in [
        (r#"{"version":2.0}"#, "2"),
        (r#"{"version":1e21}"#, "1e+21"),
        (r#"{"version":-0}"#, "0"),
        (r#"{"version":0.5e1}"#, "5"),
        (r#"{"version":100000000000000000000000}"#, "1e+23"),
    ] {
        assert_eq!(
            record_failure(line).message,
            errors::unsupported_version(expected),
            "{line}"
        );
    }
}

#[test]
fn numbers_beyond_the_double_range_decode_as_infinity() {
    let long = "9".repeat(400);
    for (line, expected) in [
        (
            r#"{"version":1e400,"id":"a","method":"model.list"}"#,
            "Infinity",
        ),
        (r#"{"version":-1e400}"#, "-Infinity"),
        (r#"{"version":[1e400,2,"1e400"]}"#, "Infinity,2,1e400"),
        (&format!(r#"{{"version":{long}}}"#), "Infinity"),
        // Underflow is zero in both parsers.
        (r#"{"version":1e-400}"#, "0"),
    ] {
        assert_eq!(
            record_failure(line).message,
            errors::unsupported_version(expected),
            "{line}"
        );
    }
    let with_id = record_failure(r#"{"version":1e400,"id":"a","method":"model.list"}"#);
    assert_eq!(with_id.code, ProtocolErrorCode::UnsupportedVersion);
    assert_eq!(with_id.id.as_deref(), Some("a"));
}

#[test]
fn request_ids_are_bounded_in_utf8_bytes() {
    let two_byte = "é".repeat(128);
    assert_eq!(two_byte.len(), 256);
    for id in [text_of(1), text_of(256), two_byte.clone(), " ".to_owned()] {
        let value = json!({"version": 1, "id": id, "method": "model.list"});
        assert_eq!(decode_value(value).map(|d| d.id), Ok(id));
    }
    for id in [
        json!(""),
        json!(text_of(257)),
        json!(format!("{two_byte}a")),
        json!(1),
        json!(null),
        json!(["a"]),
        json!({"id": "a"}),
    ] {
        assert_eq!(
            failure(json!({"version": 1, "id": id, "method": "model.list"})),
            ProtocolError::invalid_request(errors::ID_INVALID, None),
            "for {id}"
        );
    }
    assert_eq!(
        failure(json!({"version": 1, "method": "model.list"})),
        ProtocolError::invalid_request(errors::ID_INVALID, None)
    );
}

#[test]
fn every_method_decodes() {
    let minimal: [(&str, Option<Value>, Normal); 15] = [
        ("session.get_state", None, Normal::GetState),
        (
            "session.get_messages",
            None,
            Normal::GetMessages {
                start: 0,
                limit: 100,
            },
        ),
        (
            "session.get_outcomes",
            None,
            Normal::GetOutcomes {
                start: 0,
                limit: 100,
            },
        ),
        (
            "session.prompt",
            Some(json!({"delivery": "direct", "text": "hi", "completionId": "c1"})),
            Normal::Prompt {
                delivery: Delivery::Direct,
                text: "hi".to_owned(),
                completion_id: Some("c1".to_owned()),
            },
        ),
        ("session.interrupt", None, Normal::Interrupt),
        (
            "session.await_idle",
            None,
            Normal::AwaitIdle {
                completion_id: None,
            },
        ),
        (
            "session.compact",
            None,
            Normal::Compact { instructions: None },
        ),
        ("session.get_stats", None, Normal::GetStats),
        (
            "connection.set_events",
            Some(json!({"mode": "none"})),
            Normal::SetEvents {
                mode: EventMode::None,
            },
        ),
        ("command.list", None, Normal::CommandList),
        (
            "command.invoke",
            Some(json!({"name": "counter", "arguments": "increment"})),
            Normal::CommandInvoke {
                name: "counter".to_owned(),
                arguments: "increment".to_owned(),
            },
        ),
        ("model.list", None, Normal::ModelList),
        (
            "model.select",
            Some(json!({"provider": "rpc-select", "id": "second"})),
            Normal::ModelSelect {
                provider: "rpc-select".to_owned(),
                id: "second".to_owned(),
            },
        ),
        ("thinking.list", None, Normal::ThinkingList),
        (
            "thinking.select",
            Some(json!({"level": "high", "scope": "project"})),
            Normal::ThinkingSelect {
                level: ThinkingLevel::High,
                scope: SettingsScope::Project,
            },
        ),
    ];
    for ((method, params, expected), listed) in minimal.into_iter().zip(METHODS) {
        assert_eq!(method, listed);
        assert_eq!(Method::parse(method).map(Method::name), Some(method));
        let decoded = decode_value(envelope(method, params.clone())).map(|d| d.request);
        assert_eq!(
            decoded.map(|r| r.is_interrupt()),
            Ok(method == "session.interrupt")
        );
        assert_eq!(accepted(method, params), expected);
    }
}

mod params;
