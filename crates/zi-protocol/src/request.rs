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
#[path = "request_tests/mod.rs"]
mod tests;
