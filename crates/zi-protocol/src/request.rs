//! Request envelope decoding (docs/rpc.md#decoding-a-request).
//!
//! One input record becomes either a [`DecodedRequest`] (a normalized, closed [`Request`]) or the
//! [`ProtocolError`] the protocol names for it. The checks run in the order of
//! docs/rpc.md#processing-order, so the same malformed record always yields the same code, message
//! and `id`:
//!
//! 1. the record must parse as JSON (`invalid_json`);
//! 2. the value must be an object;
//! 3. a candidate id is extracted (a non-empty string of at most 256 bytes);
//! 4. `version` must be the number 1 (`unsupported_version`, with the candidate id);
//! 5. the id must be valid (no id on this error);
//! 6. `method` must be a string, then a known method (`unknown_method`);
//! 7. the method's key sets and params must fit docs/rpc.md#params-of-each-method (unknown keys are
//!    reported before missing keys): the envelope keys here, the params in [`crate::params`], per
//!    the method table ([`crate::method_table`]).
//!
//! JSON follows `serde_json`: the last of duplicate keys wins, numbers are read as integers or
//! IEEE doubles (so `1.0` is the integer 1, and `1e400` is `Infinity` as in `JSON.parse`), and
//! lone UTF-16 surrogate escapes are rejected as `invalid_json` (Zi's JavaScript parser accepts
//! them; decision 7 of docs/rpc.md#zis-decisions).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Number, Value};

use crate::errors::{self, ProtocolError, ProtocolErrorCode};
use crate::json_infinity::{self, StandIn};
pub use crate::method_table::{METHODS, Method, Request};
use crate::method_table::{ParamsRule, decode_params};
use crate::params::{DecodeFailure, check_keys};

/// Maximum UTF-8 length of a request id.
pub const MAX_REQUEST_ID_BYTES: usize = 256;

/// How `session.prompt` delivers its text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum Delivery {
    /// Starts a run when idle; rejected in any other state.
    Direct,
    /// Queued on the steering queue, idle or running; never starts a run.
    Steer,
    /// Queued on the follow-up queue, idle or running; never starts a run.
    FollowUp,
    /// Starts a run when idle; queued as a follow-up of the running one.
    Continue,
}

impl Delivery {
    /// Every delivery, in wire order.
    pub const ALL: [Delivery; 4] = [
        Delivery::Direct,
        Delivery::Steer,
        Delivery::FollowUp,
        Delivery::Continue,
    ];

    /// The wire string.
    pub fn as_str(self) -> &'static str {
        match self {
            Delivery::Direct => "direct",
            Delivery::Steer => "steer",
            Delivery::FollowUp => "follow_up",
            Delivery::Continue => "continue",
        }
    }

    /// The exact wire string, case-sensitive.
    pub fn parse(text: &str) -> Option<Delivery> {
        Delivery::ALL.into_iter().find(|d| d.as_str() == text)
    }
}

/// Which session events a connection receives (`connection.set_events`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum EventMode {
    /// Every event, none dropped.
    #[default]
    All,
    /// No session events.
    None,
    /// Every session event, as a droppable frame (dropped under output pressure).
    Activity,
}

impl EventMode {
    /// Every mode, in wire order.
    pub const ALL: [EventMode; 3] = [EventMode::All, EventMode::None, EventMode::Activity];

    /// The wire string.
    pub fn as_str(self) -> &'static str {
        match self {
            EventMode::All => "all",
            EventMode::None => "none",
            EventMode::Activity => "activity",
        }
    }

    /// The exact wire string, case-sensitive.
    pub fn parse(text: &str) -> Option<EventMode> {
        EventMode::ALL.into_iter().find(|m| m.as_str() == text)
    }
}

/// Which settings file `thinking.select` writes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum SettingsScope {
    /// The agent directory's `settings.json`.
    #[default]
    Global,
    /// The project's `.zi/settings.json`.
    Project,
}

impl SettingsScope {
    /// The wire string.
    pub fn as_str(self) -> &'static str {
        match self {
            SettingsScope::Global => "global",
            SettingsScope::Project => "project",
        }
    }

    /// The exact wire string, case-sensitive.
    pub fn parse(text: &str) -> Option<SettingsScope> {
        match text {
            "global" => Some(SettingsScope::Global),
            "project" => Some(SettingsScope::Project),
            _ => None,
        }
    }
}

/// A request that passed every decode check: its id and the request.
#[derive(Debug, Clone, PartialEq)]
pub struct DecodedRequest {
    /// The request id (echoed by the response).
    pub id: String,
    /// The decoded request; [`Request::method`] names its method.
    pub request: Request,
}

/// Parse one input record (already stripped of its LF and trailing CR; guaranteed valid UTF-8)
/// and decode it.
pub fn decode_record(line: &str) -> Result<DecodedRequest, ProtocolError> {
    if let Some(decoded) = decode_plain(line) {
        return Ok(decoded);
    }
    match serde_json::from_str(line) {
        Ok(value) => decode_value(value),
        Err(_) => decode_with_infinities(line),
    }
}

/// The envelope of a request without params, borrowed from the record: exactly the three
/// keys, each once (a duplicate or any other key fails, and the record takes the general path).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PlainEnvelope<'a> {
    version: f64,
    #[serde(borrow)]
    id: std::borrow::Cow<'a, str>,
    #[serde(borrow)]
    method: std::borrow::Cow<'a, str>,
}

/// The common record — `version` 1, a valid id, a known method, no `params` — decoded without
/// building a JSON tree (pipelined queries are mostly these). Anything else returns `None` and
/// takes the general path, which alone produces errors, so both paths accept the same records
/// with the same result.
fn decode_plain(line: &str) -> Option<DecodedRequest> {
    let envelope: PlainEnvelope = serde_json::from_str(line).ok()?;
    let id_valid = !envelope.id.is_empty() && envelope.id.len() <= MAX_REQUEST_ID_BYTES;
    if envelope.version != 1.0 || !id_valid {
        return None;
    }
    let method = Method::parse(&envelope.method)?;
    if method.params_rule() == ParamsRule::Required {
        return None;
    }
    let request = decode_params(method, None).ok()?;
    Some(DecodedRequest {
        id: envelope.id.into_owned(),
        request,
    })
}

/// A record that `serde_json` refused, decoded as `JSON.parse` reads it: numbers beyond the
/// double range are `±Infinity` (see [`json_infinity`]).
fn decode_with_infinities(line: &str) -> Result<DecodedRequest, ProtocolError> {
    let parse = |stand_in| {
        json_infinity::rewrite(line, stand_in)
            .and_then(|record| serde_json::from_str::<Value>(&record).ok())
    };
    let value = parse(StandIn::LargestDouble).ok_or_else(ProtocolError::invalid_json)?;
    let mut decoded = decode_value(value);
    if let Err(error) = &mut decoded
        && error.code == ProtocolErrorCode::UnsupportedVersion
        && let Some(Value::Object(printable)) = parse(StandIn::InfinityText)
    {
        error.message = errors::unsupported_version(&js_string(printable.get("version")));
    }
    decoded
}

/// Decode an already-parsed JSON value (steps 3.x of docs/rpc.md#processing-order).
pub fn decode_value(value: Value) -> Result<DecodedRequest, ProtocolError> {
    let Value::Object(mut envelope) = value else {
        return Err(ProtocolError::invalid_request(
            errors::REQUESTS_MUST_BE_OBJECTS,
            None,
        ));
    };

    let candidate_id = match envelope.get("id") {
        Some(Value::String(id)) if !id.is_empty() && id.len() <= MAX_REQUEST_ID_BYTES => {
            Some(id.clone())
        }
        _ => None,
    };

    let version = envelope.get("version");
    if !is_version_one(version) {
        return Err(ProtocolError::new(
            ProtocolErrorCode::UnsupportedVersion,
            errors::unsupported_version(&js_string(version)),
            candidate_id,
        ));
    }

    let Some(id) = candidate_id else {
        return Err(ProtocolError::invalid_request(errors::ID_INVALID, None));
    };

    let method = match envelope.get("method") {
        Some(Value::String(method)) => Method::parse(method).ok_or_else(|| {
            ProtocolError::new(
                ProtocolErrorCode::UnknownMethod,
                errors::unknown_method(method),
                Some(id.clone()),
            )
        })?,
        _ => {
            return Err(ProtocolError::invalid_request(
                errors::METHOD_NOT_STRING,
                Some(id),
            ));
        }
    };

    match decode_method(method, &mut envelope) {
        Ok(request) => Ok(DecodedRequest { id, request }),
        Err(message) => Err(ProtocolError::invalid_request(message, Some(id))),
    }
}

/// The envelope key check, the `params` type check, then the method's params.
fn decode_method(
    method: Method,
    envelope: &mut Map<String, Value>,
) -> Result<Request, DecodeFailure> {
    const ENVELOPE: [&str; 3] = ["version", "id", "method"];
    const ENVELOPE_WITH_PARAMS: [&str; 4] = ["version", "id", "method", "params"];
    match method.params_rule() {
        ParamsRule::Forbidden => check_keys(envelope, &ENVELOPE, &ENVELOPE)?,
        ParamsRule::Optional => check_keys(envelope, &ENVELOPE_WITH_PARAMS, &ENVELOPE)?,
        ParamsRule::Required => check_keys(envelope, &ENVELOPE_WITH_PARAMS, &ENVELOPE_WITH_PARAMS)?,
    }

    let params = match envelope.remove("params") {
        None => None,
        Some(Value::Object(params)) => Some(params),
        Some(_) => return Err(errors::params_must_be_object(method.name()).into()),
    };
    decode_params(method, params)
}

/// `version === 1` in JavaScript: the number 1, however it is written (`1`, `1.0`, `1e0`).
fn is_version_one(version: Option<&Value>) -> bool {
    match version {
        Some(Value::Number(number)) => number.as_f64() == Some(1.0),
        _ => false,
    }
}

/// JavaScript's `String(value)` for a JSON value, `undefined` when the key is absent.
fn js_string(value: Option<&Value>) -> String {
    match value {
        None => "undefined".to_owned(),
        Some(value) => js_value_string(value),
    }
}

fn js_value_string(value: &Value) -> String {
    match value {
        Value::Null => "null".to_owned(),
        Value::Bool(flag) => flag.to_string(),
        Value::Number(number) => js_number_string(number),
        Value::String(text) => text.clone(),
        // Array.prototype.toString: elements joined by ",", with null as the empty string.
        Value::Array(items) => items
            .iter()
            .map(|item| match item {
                Value::Null => String::new(),
                other => js_value_string(other),
            })
            .collect::<Vec<_>>()
            .join(","),
        Value::Object(_) => "[object Object]".to_owned(),
    }
}

/// Numbers as JavaScript prints them. JavaScript reads every JSON number as a double, so
/// integers beyond 2^53 are printed after rounding to the nearest double.
fn js_number_string(number: &Number) -> String {
    const EXACT_LIMIT: u64 = 1 << 53;
    let exact = match (number.as_u64(), number.as_i64()) {
        (Some(unsigned), _) => unsigned <= EXACT_LIMIT,
        // `-0` is never an i64, so this never prints "-0".
        (None, Some(signed)) => signed.unsigned_abs() <= EXACT_LIMIT,
        (None, None) => false,
    };
    if exact {
        return number.to_string();
    }
    match number.as_f64() {
        Some(float) => js_double_string(float),
        None => number.to_string(),
    }
}

/// ECMAScript Number::toString(10) (ECMA-262 section 6.1.6.1.20), built on Rust's shortest
/// round-trip digits.
fn js_double_string(float: f64) -> String {
    if float.is_nan() {
        return "NaN".to_owned();
    }
    if float.is_infinite() {
        return if float > 0.0 { "Infinity" } else { "-Infinity" }.to_owned();
    }
    if float == 0.0 {
        return "0".to_owned();
    }
    let sign = if float < 0.0 { "-" } else { "" };
    let scientific = format!("{:e}", float.abs());
    let Some((mantissa, exponent)) = scientific.split_once('e') else {
        return format!("{sign}{scientific}");
    };
    let Ok(exponent) = exponent.parse::<i64>() else {
        return format!("{sign}{scientific}");
    };
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    // The value is 0.d1d2…dk × 10^n.
    let k = digits.len() as i64;
    let n = exponent + 1;
    let body = if k <= n && n <= 21 {
        format!("{digits}{}", "0".repeat((n - k) as usize))
    } else if 0 < n && n <= 21 {
        let (integral, fraction) = digits.split_at(n as usize);
        format!("{integral}.{fraction}")
    } else if -6 < n && n <= 0 {
        format!("0.{}{digits}", "0".repeat((-n) as usize))
    } else {
        let exponent_sign = if n > 0 { '+' } else { '-' };
        let magnitude = (n - 1).unsigned_abs();
        let (first, rest) = digits.split_at(1);
        if rest.is_empty() {
            format!("{first}e{exponent_sign}{magnitude}")
        } else {
            format!("{first}.{rest}e{exponent_sign}{magnitude}")
        }
    };
    format!("{sign}{body}")
}

#[cfg(test)]
mod tests {
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

    // --- decoder examples (accepted; the rejected ones are in the kit's table) ---

    #[test]
    fn reference_examples() {
        assert_eq!(
            accepted("thinking.select", Some(json!({"level": "high"}))),
            Normal::ThinkingSelect {
                level: ThinkingLevel::High,
                scope: SettingsScope::Global
            }
        );
        assert_eq!(
            accepted("session.get_messages", None),
            Normal::GetMessages {
                start: 0,
                limit: 100
            }
        );
        assert_eq!(
            accepted("session.get_messages", Some(json!({"start": 2}))),
            Normal::GetMessages {
                start: 2,
                limit: 100
            }
        );
        assert_eq!(
            accepted(
                "session.get_outcomes",
                Some(json!({"start": 2, "limit": 3}))
            ),
            Normal::GetOutcomes { start: 2, limit: 3 }
        );
        assert_eq!(
            accepted("connection.set_events", Some(json!({"mode": "activity"}))),
            Normal::SetEvents {
                mode: EventMode::Activity
            }
        );
        // The rejected examples are the conformance kit's decode cases, run below.
    }

    // --- the conformance kit's decode cases ---

    #[test]
    fn the_conformance_decode_cases() {
        for case in crate::conformance_decode_cases::DECODE_CASES {
            let error = record_failure(case.line);
            assert_eq!(
                (
                    error.code.as_str(),
                    error.message.as_str(),
                    error.id.as_deref()
                ),
                (case.code, case.message, case.id),
                "decode.{}",
                case.name
            );
        }
    }

    // --- record parsing ---

    #[test]
    fn unparseable_records_are_invalid_json_without_id() {
        for line in [
            "",
            " ",
            "\r",
            "{",
            "{}x",
            "{} {}",
            "{'version':1}",
            r#"{"version":1,"id":"a","method":"session.get_state",}"#,
            "\u{feff}{}",
            "NaN",
            r#"{"version":1,"id":"\ud800","method":"session.get_state"}"#,
        ] {
            assert_eq!(
                record_failure(line),
                ProtocolError::new(ProtocolErrorCode::InvalidJson, errors::INVALID_JSON, None),
                "for {line:?}"
            );
        }
    }

    #[test]
    fn a_full_record_decodes() {
        let decoded = decode_record(
            r#"  {"method":"session.prompt","params":{"text":"hi","delivery":"steer"},"id":"p1","version":1}  "#,
        );
        assert_eq!(
            decoded,
            Ok(DecodedRequest {
                id: "p1".to_owned(),
                request: Request::of::<crate::methods::Prompt>(PromptParams {
                    delivery: Delivery::Steer,
                    text: "hi".to_owned(),
                    completion_id: None,
                    images: Vec::new(),
                })
            })
        );
    }

    #[test]
    fn duplicate_keys_keep_the_last_value() {
        let line =
            r#"{"version":2,"version":1,"id":"","id":"b","method":"x","method":"model.list"}"#;
        assert_eq!(
            decode_record(line).map(|d| (d.id, normal(d.request))),
            Ok(("b".to_owned(), Normal::ModelList))
        );
        let line = r#"{"version":1,"id":"b","id":"","method":"model.list"}"#;
        assert_eq!(
            record_failure(line),
            ProtocolError::invalid_request(errors::ID_INVALID, None)
        );
        let line = r#"{"version":1,"id":"b","method":"session.get_messages","params":{"limit":0,"limit":5}}"#;
        assert_eq!(
            decode_record(line).map(|d| normal(d.request)),
            Ok(Normal::GetMessages { start: 0, limit: 5 })
        );
    }

    // --- envelope order (docs/rpc.md#processing-order) ---

    #[test]
    fn non_objects_are_rejected_without_id() {
        for value in [
            json!([]),
            json!(null),
            json!("x"),
            json!(1),
            json!(true),
            json!([{"id": ID}]),
        ] {
            assert_eq!(
                failure(value),
                ProtocolError::invalid_request(errors::REQUESTS_MUST_BE_OBJECTS, None)
            );
        }
        assert_eq!(
            record_failure("[]"),
            ProtocolError::invalid_request(errors::REQUESTS_MUST_BE_OBJECTS, None)
        );
    }

    #[test]
    fn version_is_checked_before_the_id() {
        assert_eq!(
            failure(json!({"version": 2})),
            ProtocolError::new(
                ProtocolErrorCode::UnsupportedVersion,
                "Unsupported RPC protocol version: 2 (expected 1)",
                None
            )
        );
        assert_eq!(
            failure(json!({})),
            ProtocolError::new(
                ProtocolErrorCode::UnsupportedVersion,
                "Unsupported RPC protocol version: undefined (expected 1)",
                None
            )
        );
        // A valid id rides along on the version error, whatever the method.
        assert_eq!(
            failure(json!({"version": "1", "id": ID, "method": 5, "extra": 1})),
            ProtocolError::new(
                ProtocolErrorCode::UnsupportedVersion,
                "Unsupported RPC protocol version: 1 (expected 1)",
                Some(ID.to_owned())
            )
        );
        // An invalid id does not.
        for id in [json!(""), json!(7), json!(null), json!(text_of(257))] {
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

        let id = Some(ID.to_owned());
        for (line, expected) in [
            (
                r#"{"version":1,"id":"req-1","method":"session.get_messages","params":{"start":1e400}}"#,
                ProtocolError::invalid_request(errors::MESSAGE_START, id.clone()),
            ),
            (
                r#"{"version":1,"id":"req-1","method":"session.get_messages","params":{"limit":-1e400}}"#,
                ProtocolError::invalid_request(errors::MESSAGE_LIMIT, id.clone()),
            ),
            (
                r#"{"version":1,"id":"req-1","method":"session.get_outcomes","params":{"start":1e999}}"#,
                ProtocolError::invalid_request(errors::OUTCOME_START, id.clone()),
            ),
            (
                r#"{"version":1,"id":"req-1","method":"session.prompt","params":{"delivery":"direct","text":1e400}}"#,
                ProtocolError::invalid_request(errors::PROMPT_TEXT, id.clone()),
            ),
            (
                r#"{"version":1,"id":"req-1","method":"session.get_state","x":1e400}"#,
                ProtocolError::invalid_request(errors::UNKNOWN_FIELDS, id.clone()),
            ),
            (
                r#"{"version":1,"id":"req-1","method":1e400}"#,
                ProtocolError::invalid_request(errors::METHOD_NOT_STRING, id.clone()),
            ),
            (
                r#"{"version":1,"id":1e400,"method":"model.list"}"#,
                ProtocolError::invalid_request(errors::ID_INVALID, None),
            ),
            (
                "1e400",
                ProtocolError::invalid_request(errors::REQUESTS_MUST_BE_OBJECTS, None),
            ),
            // Any other syntax error still makes the record invalid JSON.
            (r#"{"version":1e400,"#, ProtocolError::invalid_json()),
            (r#"{"version":1e400 1}"#, ProtocolError::invalid_json()),
        ] {
            assert_eq!(record_failure(line), expected, "{line}");
        }
        // Underflow is zero, a valid start.
        let decoded = decode_record(
            r#"{"version":1,"id":"req-1","method":"session.get_messages","params":{"start":1e-400}}"#,
        );
        assert_eq!(
            decoded.map(|d| normal(d.request)),
            Ok(Normal::GetMessages {
                start: 0,
                limit: DEFAULT_PAGE_LIMIT
            })
        );
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
    fn method_must_be_a_known_string() {
        for method in [json!(null), json!(1), json!(["model.list"]), json!({})] {
            assert_eq!(
                failure(json!({"version": 1, "id": ID, "method": method})),
                ProtocolError::invalid_request(errors::METHOD_NOT_STRING, Some(ID.to_owned()))
            );
        }
        assert_eq!(
            failure(json!({"version": 1, "id": ID})),
            ProtocolError::invalid_request(errors::METHOD_NOT_STRING, Some(ID.to_owned()))
        );
        for method in [
            "unknown",
            "",
            "Session.get_state",
            "session.get_state ",
            "peer_request",
        ] {
            assert_eq!(
                failure(envelope(method, None)),
                ProtocolError::new(
                    ProtocolErrorCode::UnknownMethod,
                    format!("Unknown RPC method: {method}"),
                    Some(ID.to_owned())
                )
            );
        }
        // The unknown method is reported before its unknown keys.
        let error = failure(json!({"version": 1, "id": ID, "method": "nope", "x": 1}));
        assert_eq!(error.code, ProtocolErrorCode::UnknownMethod);
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

    // --- key sets (docs/rpc.md#generic-rules) ---

    #[test]
    fn parameterless_methods_reject_any_params_key() {
        for method in [
            "session.get_state",
            "session.interrupt",
            "command.list",
            "model.list",
            "thinking.list",
            "session.get_stats",
        ] {
            for params in [json!({}), json!(null), json!([])] {
                rejected(method, Some(params), errors::UNKNOWN_FIELDS);
            }
        }
    }

    #[test]
    fn unknown_top_level_keys_are_reported_before_missing_params() {
        for method in METHODS {
            let mut value = envelope(method, None);
            value["Version"] = json!(1);
            assert_eq!(
                failure(value),
                ProtocolError::invalid_request(errors::UNKNOWN_FIELDS, Some(ID.to_owned())),
                "{method}"
            );
        }
        for method in [
            "session.prompt",
            "connection.set_events",
            "command.invoke",
            "model.select",
            "thinking.select",
        ] {
            rejected(method, None, errors::MISSING_FIELDS);
            let mut value = envelope(method, None);
            value["extra"] = json!(null);
            assert_eq!(failure(value).message, errors::UNKNOWN_FIELDS);
        }
    }

    #[test]
    fn params_must_be_objects() {
        for method in METHODS {
            let Some(rule) = Method::parse(method).map(Method::params_rule) else {
                panic!("{method} is not parsed");
            };
            if rule == ParamsRule::Forbidden {
                continue;
            }
            for params in [json!(null), json!([]), json!("x"), json!(0), json!(false)] {
                rejected(
                    method,
                    Some(params),
                    &format!("{method} params must be an object"),
                );
            }
        }
        rejected(
            "session.prompt",
            Some(json!(null)),
            "session.prompt params must be an object",
        );
        rejected(
            "session.get_outcomes",
            Some(json!([])),
            "session.get_outcomes params must be an object",
        );
    }

    #[test]
    fn unknown_params_keys_are_reported_before_missing_ones() {
        rejected(
            "command.invoke",
            Some(json!({"nam": "a"})),
            errors::UNKNOWN_FIELDS,
        );
        rejected(
            "model.select",
            Some(json!({"provider": "p", "model": "m"})),
            errors::UNKNOWN_FIELDS,
        );
        rejected(
            "session.await_idle",
            Some(json!({"completionID": "c"})),
            errors::UNKNOWN_FIELDS,
        );
        rejected(
            "session.get_messages",
            Some(json!({"start": 0, "count": 1})),
            errors::UNKNOWN_FIELDS,
        );
        rejected(
            "session.prompt",
            Some(json!({"delivery": "direct", "text": "", "streamingBehavior": "steer"})),
            errors::UNKNOWN_FIELDS,
        );
        rejected(
            "thinking.select",
            Some(json!({"level": "high", "persist": true})),
            errors::UNKNOWN_FIELDS,
        );
        // Unknown keys win over invalid values too.
        rejected(
            "connection.set_events",
            Some(json!({"mode": "bad", "x": 1})),
            errors::UNKNOWN_FIELDS,
        );
    }

    // --- pages ---

    #[test]
    fn pages_apply_defaults_for_absent_and_null() {
        for method in ["session.get_messages", "session.get_outcomes"] {
            for (params, start, limit) in [
                (json!({}), 0, 100),
                (json!({"start": null, "limit": null}), 0, 100),
                (json!({"limit": 1}), 0, 1),
                (json!({"start": 7, "limit": null}), 7, 100),
                (json!({"start": 1.0, "limit": 100.0}), 1, 100),
                (
                    json!({"start": 9007199254740991u64}),
                    9_007_199_254_740_991,
                    100,
                ),
            ] {
                let expected = if method == "session.get_messages" {
                    Normal::GetMessages { start, limit }
                } else {
                    Normal::GetOutcomes { start, limit }
                };
                assert_eq!(accepted(method, Some(params)), expected);
            }
        }
        let line = r#"{"version":1,"id":"a","method":"session.get_messages","params":{"start":-0,"limit":1e2}}"#;
        assert_eq!(
            decode_record(line).map(|d| normal(d.request)),
            Ok(Normal::GetMessages {
                start: 0,
                limit: 100
            })
        );
    }

    #[test]
    fn page_bounds() {
        for (method, start_message, limit_message) in [
            (
                "session.get_messages",
                errors::MESSAGE_START,
                errors::MESSAGE_LIMIT,
            ),
            (
                "session.get_outcomes",
                errors::OUTCOME_START,
                errors::OUTCOME_LIMIT,
            ),
            (
                "session.get_entries",
                errors::ENTRY_START,
                errors::ENTRY_LIMIT,
            ),
            (
                "session.list",
                errors::SESSION_LIST_START,
                errors::SESSION_LIST_LIMIT,
            ),
        ] {
            for start in [
                json!(-1),
                json!(0.5),
                json!(-0.5),
                json!("1"),
                json!(true),
                json!([0]),
                json!({}),
                json!(9007199254740992u64),
                json!(1e300),
                json!(i64::MIN),
            ] {
                rejected(method, Some(json!({"start": start})), start_message);
            }
            for limit in [
                json!(0),
                json!(101),
                json!(100.5),
                json!(-1),
                json!("10"),
                json!(false),
                json!(9007199254740992u64),
            ] {
                rejected(method, Some(json!({"limit": limit})), limit_message);
            }
            // The start is checked first.
            rejected(
                method,
                Some(json!({"start": -1, "limit": 0})),
                start_message,
            );
        }
    }

    // --- session.prompt ---

    #[test]
    fn prompt_deliveries() {
        for delivery in Delivery::ALL {
            assert_eq!(
                accepted(
                    "session.prompt",
                    Some(json!({"delivery": delivery.as_str(), "text": ""}))
                ),
                Normal::Prompt {
                    delivery,
                    text: String::new(),
                    completion_id: None
                }
            );
            assert_eq!(
                serde_json::to_value(delivery).ok(),
                Some(json!(delivery.as_str()))
            );
        }
        for delivery in [
            json!("later"),
            json!("followUp"),
            json!("Direct"),
            json!(null),
            json!(1),
        ] {
            rejected(
                "session.prompt",
                Some(json!({"delivery": delivery, "text": "x"})),
                errors::PROMPT_DELIVERY,
            );
        }
        rejected(
            "session.prompt",
            Some(json!({"text": "x"})),
            errors::PROMPT_DELIVERY,
        );
        // Delivery is checked before text.
        rejected("session.prompt", Some(json!({})), errors::PROMPT_DELIVERY);
    }

    #[test]
    fn prompt_text_bound() {
        let at_bound = text_of(MAX_PROMPT_TEXT_BYTES);
        assert_eq!(
            accepted(
                "session.prompt",
                Some(json!({"delivery": "steer", "text": at_bound.clone()}))
            ),
            Normal::Prompt {
                delivery: Delivery::Steer,
                text: at_bound,
                completion_id: None
            }
        );
        let mut multibyte = "€".repeat(MAX_PROMPT_TEXT_BYTES / 3);
        multibyte.push_str("ab");
        assert_eq!(multibyte.len(), MAX_PROMPT_TEXT_BYTES);
        assert!(matches!(
            accepted(
                "session.prompt",
                Some(json!({"delivery": "direct", "text": multibyte.clone()}))
            ),
            Normal::Prompt { .. }
        ));
        multibyte.push('c');
        for text in [
            json!(text_of(MAX_PROMPT_TEXT_BYTES + 1)),
            json!(multibyte),
            json!(null),
            json!(1),
            json!(["x"]),
        ] {
            rejected(
                "session.prompt",
                Some(json!({"delivery": "direct", "text": text})),
                errors::PROMPT_TEXT,
            );
        }
        rejected(
            "session.prompt",
            Some(json!({"delivery": "direct"})),
            errors::PROMPT_TEXT,
        );
    }

    #[test]
    fn prompt_completion_id() {
        let at_bound = text_of(MAX_COMPLETION_ID_BYTES);
        assert_eq!(
            accepted(
                "session.prompt",
                Some(
                    json!({"delivery": "continue", "text": "t", "completionId": at_bound.clone()})
                )
            ),
            Normal::Prompt {
                delivery: Delivery::Continue,
                text: "t".to_owned(),
                completion_id: Some(at_bound)
            }
        );
        for completion_id in [
            json!(null),
            json!(""),
            json!(text_of(MAX_COMPLETION_ID_BYTES + 1)),
            json!(1),
        ] {
            rejected(
                "session.prompt",
                Some(json!({"delivery": "direct", "text": "t", "completionId": completion_id})),
                errors::COMPLETION_ID,
            );
        }
        // Text is checked before the completion id.
        rejected(
            "session.prompt",
            Some(json!({"delivery": "direct", "text": 1, "completionId": ""})),
            errors::PROMPT_TEXT,
        );
    }

    // --- session.await_idle ---

    #[test]
    fn await_idle_params() {
        assert_eq!(
            accepted(
                "session.await_idle",
                Some(json!({"completionId": text_of(256)}))
            ),
            Normal::AwaitIdle {
                completion_id: Some(text_of(256))
            }
        );
        rejected(
            "session.await_idle",
            Some(json!({})),
            errors::MISSING_FIELDS,
        );
        for completion_id in [json!(""), json!(null), json!(text_of(257)), json!(5)] {
            rejected(
                "session.await_idle",
                Some(json!({"completionId": completion_id})),
                errors::COMPLETION_ID,
            );
        }
        rejected(
            "session.await_idle",
            Some(json!({"completionId": "c", "timeout": 5})),
            errors::UNKNOWN_FIELDS,
        );
    }

    // --- connection.set_events ---

    #[test]
    fn event_modes() {
        for mode in EventMode::ALL {
            assert_eq!(
                accepted(
                    "connection.set_events",
                    Some(json!({"mode": mode.as_str()}))
                ),
                Normal::SetEvents { mode }
            );
            assert_eq!(serde_json::to_value(mode).ok(), Some(json!(mode.as_str())));
        }
        assert_eq!(EventMode::default(), EventMode::All);
        for mode in [json!("sometimes"), json!("ALL"), json!(null), json!(true)] {
            rejected(
                "connection.set_events",
                Some(json!({"mode": mode})),
                errors::EVENT_MODE,
            );
        }
        rejected(
            "connection.set_events",
            Some(json!({})),
            errors::MISSING_FIELDS,
        );
    }

    // --- command.invoke ---

    #[test]
    fn command_names() {
        for name in ["a", "counter", "a1", "a1-b2", "x-1", "abc-def-0g", "z9"] {
            assert!(is_kebab_case(name), "{name}");
            assert_eq!(
                accepted(
                    "command.invoke",
                    Some(json!({"name": name, "arguments": ""}))
                ),
                Normal::CommandInvoke {
                    name: name.to_owned(),
                    arguments: String::new()
                }
            );
        }
        for name in [
            "Invalid_Command",
            "1a",
            "-a",
            "a-",
            "a--b",
            "a_b",
            "a b",
            "aé",
            "A",
            "a-B",
            "a\n",
            "/counter",
        ] {
            assert!(!is_kebab_case(name), "{name}");
            rejected(
                "command.invoke",
                Some(json!({"name": name, "arguments": ""})),
                errors::COMMAND_NAME_KEBAB,
            );
        }
        let at_bound = kebab_of(MAX_COMMAND_NAME_BYTES);
        assert!(matches!(
            accepted(
                "command.invoke",
                Some(json!({"name": at_bound, "arguments": "x"}))
            ),
            Normal::CommandInvoke { .. }
        ));
        // Bounds are checked before the pattern.
        for name in [
            json!(kebab_of(MAX_COMMAND_NAME_BYTES + 1)),
            json!("A".repeat(65)),
            json!(""),
            json!(null),
            json!(3),
        ] {
            rejected(
                "command.invoke",
                Some(json!({"name": name, "arguments": ""})),
                errors::COMMAND_NAME,
            );
        }
        rejected(
            "command.invoke",
            Some(json!({"name": "counter"})),
            errors::MISSING_FIELDS,
        );
        rejected(
            "command.invoke",
            Some(json!({"arguments": ""})),
            errors::MISSING_FIELDS,
        );
    }

    #[test]
    fn command_arguments_bound() {
        let at_bound = text_of(MAX_COMMAND_ARGUMENTS_BYTES);
        assert_eq!(
            accepted(
                "command.invoke",
                Some(json!({"name": "counter", "arguments": at_bound.clone()}))
            ),
            Normal::CommandInvoke {
                name: "counter".to_owned(),
                arguments: at_bound
            }
        );
        for arguments in [
            json!(text_of(MAX_COMMAND_ARGUMENTS_BYTES + 1)),
            json!(null),
            json!(["increment"]),
            json!({}),
        ] {
            rejected(
                "command.invoke",
                Some(json!({"name": "counter", "arguments": arguments})),
                errors::COMMAND_ARGUMENTS,
            );
        }
    }

    // --- model.select ---

    #[test]
    fn model_select_fields() {
        let at_bound = "ü".repeat(MAX_MODEL_FIELD_BYTES / 2);
        assert_eq!(
            accepted(
                "model.select",
                Some(json!({"id": at_bound.clone(), "provider": at_bound.clone()}))
            ),
            Normal::ModelSelect {
                provider: at_bound.clone(),
                id: at_bound.clone()
            }
        );
        let over = format!("{at_bound}x");
        for provider in [json!(""), json!(over.clone()), json!(null), json!(1)] {
            rejected(
                "model.select",
                Some(json!({"provider": provider, "id": "m"})),
                errors::MODEL_PROVIDER,
            );
        }
        for id in [json!(""), json!(over.clone()), json!(null), json!({})] {
            rejected(
                "model.select",
                Some(json!({"provider": "p", "id": id})),
                errors::MODEL_ID,
            );
        }
        // Provider first.
        rejected(
            "model.select",
            Some(json!({"provider": "", "id": ""})),
            errors::MODEL_PROVIDER,
        );
        rejected(
            "model.select",
            Some(json!({"provider": "p"})),
            errors::MISSING_FIELDS,
        );
    }

    // --- thinking.select ---

    #[test]
    fn thinking_select_levels_and_scopes() {
        for level in ThinkingLevel::ALL {
            for (scope, expected) in [
                (json!(null), SettingsScope::Global),
                (json!("global"), SettingsScope::Global),
                (json!("project"), SettingsScope::Project),
            ] {
                assert_eq!(
                    accepted(
                        "thinking.select",
                        Some(json!({"level": level.as_str(), "scope": scope}))
                    ),
                    Normal::ThinkingSelect {
                        level,
                        scope: expected
                    }
                );
            }
        }
        for level in [json!("HIGH"), json!("none"), json!(null), json!(3)] {
            rejected(
                "thinking.select",
                Some(json!({"level": level})),
                errors::THINKING_LEVEL,
            );
        }
        rejected("thinking.select", Some(json!({})), errors::THINKING_LEVEL);
        rejected(
            "thinking.select",
            Some(json!({"scope": "bad"})),
            errors::THINKING_LEVEL,
        );
        for scope in [json!("local"), json!("Global"), json!(""), json!(false)] {
            rejected(
                "thinking.select",
                Some(json!({"level": "low", "scope": scope})),
                errors::THINKING_SCOPE,
            );
        }
        for scope in [SettingsScope::Global, SettingsScope::Project] {
            assert_eq!(
                serde_json::to_value(scope).ok(),
                Some(json!(scope.as_str()))
            );
        }
    }

    // --- session.list, session.get_entries, session.fork (zi extensions) ---

    #[test]
    fn session_list_defaults_and_scope() {
        for (params, expected) in [
            (None, (0, 100, SessionListScope::Cwd)),
            (Some(json!({})), (0, 100, SessionListScope::Cwd)),
            (
                Some(json!({"start": null, "limit": null, "scope": null})),
                (0, 100, SessionListScope::Cwd),
            ),
            (
                Some(json!({"start": 3, "limit": 1, "scope": "all"})),
                (3, 1, SessionListScope::All),
            ),
            (
                Some(json!({"scope": "cwd"})),
                (0, 100, SessionListScope::Cwd),
            ),
        ] {
            let (start, limit, scope) = expected;
            assert_eq!(
                accepted("session.list", params),
                Normal::ListSessions {
                    start,
                    limit,
                    scope
                }
            );
        }
        for scope in [json!("ALL"), json!(""), json!(1), json!(["all"])] {
            rejected(
                "session.list",
                Some(json!({"scope": scope})),
                errors::SESSION_LIST_SCOPE,
            );
        }
        // Page values are checked before the scope; unknown keys before any value.
        rejected(
            "session.list",
            Some(json!({"limit": 0, "scope": "x"})),
            errors::SESSION_LIST_LIMIT,
        );
        rejected(
            "session.list",
            Some(json!({"scope": "x", "extra": 1})),
            errors::UNKNOWN_FIELDS,
        );
        rejected(
            "session.list",
            Some(json!([])),
            &errors::params_must_be_object("session.list"),
        );
        assert_eq!(
            accepted("session.get_entries", None),
            Normal::GetEntries {
                start: 0,
                limit: 100
            }
        );
    }

    #[test]
    fn fork_entry_id() {
        let id = "a".repeat(256);
        assert_eq!(
            accepted("session.fork", Some(json!({"entryId": id}))),
            Normal::Fork { entry_id: id }
        );
        for entry_id in [json!(""), json!(null), json!(7), json!("a".repeat(257))] {
            rejected(
                "session.fork",
                Some(json!({"entryId": entry_id})),
                errors::FORK_ENTRY_ID,
            );
        }
        rejected("session.fork", Some(json!({})), errors::MISSING_FIELDS);
        rejected(
            "session.fork",
            Some(json!({"entryId": "x", "start": 0})),
            errors::UNKNOWN_FIELDS,
        );
        rejected("session.fork", None, errors::MISSING_FIELDS);
    }

    #[test]
    fn decode_record_matches_decode_value() {
        let value = envelope(
            "session.prompt",
            Some(json!({"delivery": "follow_up", "text": "é\u{1F600}\"\\\n"})),
        );
        assert_eq!(decode_record(&value.to_string()), decode_value(value));
    }

    /// The borrowed fast path accepts exactly what the general path accepts, with the same
    /// result, and leaves every other record (errors included) to it.
    #[test]
    fn the_plain_fast_path_agrees_with_the_general_path() {
        let long_id = "i".repeat(MAX_REQUEST_ID_BYTES);
        let too_long = "i".repeat(MAX_REQUEST_ID_BYTES + 1);
        let records = [
            r#"{"version":1,"id":"q1","method":"session.get_state"}"#.to_owned(),
            r#" {"method":"thinking.list","id":"qé"2","version":1.0} "#.to_owned(),
            r#"{"version":1e0,"id":"q3","method":"session.get_messages"}"#.to_owned(),
            format!(r#"{{"version":1,"id":"{long_id}","method":"model.list"}}"#),
            format!(r#"{{"version":1,"id":"{too_long}","method":"model.list"}}"#),
            r#"{"version":1,"id":"","method":"session.get_state"}"#.to_owned(),
            r#"{"version":2,"id":"q","method":"session.get_state"}"#.to_owned(),
            r#"{"version":"1","id":"q","method":"session.get_state"}"#.to_owned(),
            r#"{"version":1,"id":7,"method":"session.get_state"}"#.to_owned(),
            r#"{"version":1,"id":"q","method":"no.such"}"#.to_owned(),
            r#"{"version":1,"id":"q","method":"session.fork"}"#.to_owned(),
            r#"{"version":1,"id":"q","id":"r","method":"session.get_state"}"#.to_owned(),
            r#"{"version":1,"id":"q","method":"session.get_state","params":null}"#.to_owned(),
            r#"{"version":1,"id":"q","method":"session.get_state","extra":0}"#.to_owned(),
            r#"{"version":1e400,"id":"q","method":"session.get_state"}"#.to_owned(),
            r#"{"version":1,"id":"q"}"#.to_owned(),
        ];
        for record in records {
            let general = serde_json::from_str::<Value>(&record)
                .map_err(|_| ProtocolError::invalid_json())
                .and_then(decode_value);
            if let Some(plain) = decode_plain(&record) {
                assert_eq!(Ok(plain), general, "{record}");
            }
            assert_eq!(decode_record(&record).ok(), general.ok(), "{record}");
        }
        assert!(decode_plain(r#"{"version":1,"id":"q","method":"session.get_state"}"#).is_some());
    }
}
