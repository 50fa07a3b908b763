//! Request envelope decoding (rpc-reference §3).
//!
//! One input record becomes either a [`DecodedRequest`] (a normalized, closed [`Request`]) or the
//! [`ProtocolError`] the reference names for it. The checks run in the order of §3.1, so the same
//! malformed record always yields the same code, message and `id`:
//!
//! 1. the record must parse as JSON (`invalid_json`);
//! 2. the value must be an object;
//! 3. a candidate id is extracted (a non-empty string of at most 256 bytes);
//! 4. `version` must be the number 1 (`unsupported_version`, with the candidate id);
//! 5. the id must be valid (no id on this error);
//! 6. `method` must be a string, then a known method (`unknown_method`);
//! 7. the method's key sets and params must fit §3.3 (unknown keys are reported before missing
//!    keys).
//!
//! JSON follows `serde_json`: the last of duplicate keys wins, numbers are read as integers or
//! IEEE doubles (so `1.0` is the integer 1), and lone UTF-16 surrogate escapes are rejected as
//! `invalid_json` (Zi's JavaScript parser accepts them; rpc-reference §16 item 7).

use std::borrow::Cow;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Number, Value};

use crate::ThinkingLevel;
use crate::errors::{self, ProtocolError, ProtocolErrorCode};

/// Maximum UTF-8 length of a request id.
pub const MAX_REQUEST_ID_BYTES: usize = 256;
/// Maximum UTF-8 length of a completion id.
pub const MAX_COMPLETION_ID_BYTES: usize = 256;
/// Maximum UTF-8 length of `session.prompt` text (8 MiB).
pub const MAX_PROMPT_TEXT_BYTES: usize = 8_388_608;
/// Maximum UTF-8 length of a command name.
pub const MAX_COMMAND_NAME_BYTES: usize = 64;
/// Maximum UTF-8 length of command arguments (256 KiB).
pub const MAX_COMMAND_ARGUMENTS_BYTES: usize = 262_144;
/// Maximum UTF-8 length of a model provider and of a model id.
pub const MAX_MODEL_FIELD_BYTES: usize = 256;
/// Page `start` when absent or `null`.
pub const DEFAULT_PAGE_START: u64 = 0;
/// Page `limit` when absent or `null`; also its maximum.
pub const DEFAULT_PAGE_LIMIT: u64 = 100;
/// Largest accepted page `limit`.
pub const MAX_PAGE_LIMIT: u64 = 100;

/// JavaScript's `Number.MAX_SAFE_INTEGER`, 2^53 − 1.
const MAX_SAFE_INTEGER: u64 = 9_007_199_254_740_991;

/// The 13 method names of RPC v1, in the order of rpc-reference §4.14.
pub const METHODS: [&str; 13] = [
    "session.get_state",
    "session.get_messages",
    "session.get_outcomes",
    "session.prompt",
    "session.interrupt",
    "session.await_idle",
    "connection.set_events",
    "command.list",
    "command.invoke",
    "model.list",
    "model.select",
    "thinking.list",
    "thinking.select",
];

/// How `session.prompt` delivers its text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Delivery {
    Direct,
    Steer,
    FollowUp,
    Continue,
}

impl Delivery {
    pub const ALL: [Delivery; 4] = [
        Delivery::Direct,
        Delivery::Steer,
        Delivery::FollowUp,
        Delivery::Continue,
    ];

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
#[serde(rename_all = "lowercase")]
pub enum EventMode {
    #[default]
    All,
    None,
    Activity,
}

impl EventMode {
    pub const ALL: [EventMode; 3] = [EventMode::All, EventMode::None, EventMode::Activity];

    pub fn as_str(self) -> &'static str {
        match self {
            EventMode::All => "all",
            EventMode::None => "none",
            EventMode::Activity => "activity",
        }
    }

    pub fn parse(text: &str) -> Option<EventMode> {
        EventMode::ALL.into_iter().find(|m| m.as_str() == text)
    }
}

/// Which settings file `thinking.select` writes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SettingsScope {
    #[default]
    Global,
    Project,
}

impl SettingsScope {
    pub fn as_str(self) -> &'static str {
        match self {
            SettingsScope::Global => "global",
            SettingsScope::Project => "project",
        }
    }

    pub fn parse(text: &str) -> Option<SettingsScope> {
        match text {
            "global" => Some(SettingsScope::Global),
            "project" => Some(SettingsScope::Project),
            _ => None,
        }
    }
}

/// A decoded request with its params normalized (defaults applied).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
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
}

impl Request {
    /// Whether the request uses the reserved interruption slot rather than an ordinary one.
    pub fn is_interrupt(&self) -> bool {
        matches!(self, Request::Interrupt)
    }

    /// The wire method name.
    pub fn method(&self) -> &'static str {
        match self {
            Request::GetState => "session.get_state",
            Request::GetMessages { .. } => "session.get_messages",
            Request::GetOutcomes { .. } => "session.get_outcomes",
            Request::Prompt { .. } => "session.prompt",
            Request::Interrupt => "session.interrupt",
            Request::AwaitIdle { .. } => "session.await_idle",
            Request::SetEvents { .. } => "connection.set_events",
            Request::CommandList => "command.list",
            Request::CommandInvoke { .. } => "command.invoke",
            Request::ModelList => "model.list",
            Request::ModelSelect { .. } => "model.select",
            Request::ThinkingList => "thinking.list",
            Request::ThinkingSelect { .. } => "thinking.select",
        }
    }
}

/// A request that passed every decode check: its id, its method as received, and the request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodedRequest {
    pub id: String,
    pub method: String,
    pub request: Request,
}

/// Parse one input record (already stripped of its LF and trailing CR; guaranteed valid UTF-8)
/// and decode it.
pub fn decode_record(line: &str) -> Result<DecodedRequest, ProtocolError> {
    let value: Value = serde_json::from_str(line).map_err(|_| ProtocolError::invalid_json())?;
    decode_value(value)
}

/// Decode an already-parsed JSON value (steps 3.x of rpc-reference §3.1).
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
        Some(Value::String(method)) => method.clone(),
        _ => {
            return Err(ProtocolError::invalid_request(
                errors::METHOD_NOT_STRING,
                Some(id),
            ));
        }
    };

    let Some(params_rule) = params_rule(&method) else {
        return Err(ProtocolError::new(
            ProtocolErrorCode::UnknownMethod,
            errors::unknown_method(&method),
            Some(id),
        ));
    };

    match decode_method(&method, params_rule, &mut envelope) {
        Ok(request) => Ok(DecodedRequest {
            id,
            method,
            request,
        }),
        Err(message) => Err(ProtocolError::invalid_request(message, Some(id))),
    }
}

/// Whether a method takes a `params` key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ParamsRule {
    /// A `params` key, even `{}`, is an unknown field.
    Forbidden,
    Optional,
    Required,
}

fn params_rule(method: &str) -> Option<ParamsRule> {
    Some(match method {
        "session.get_state" | "session.interrupt" | "command.list" | "model.list"
        | "thinking.list" => ParamsRule::Forbidden,
        "session.get_messages" | "session.get_outcomes" | "session.await_idle" => {
            ParamsRule::Optional
        }
        "session.prompt" | "connection.set_events" | "command.invoke" | "model.select"
        | "thinking.select" => ParamsRule::Required,
        _ => return None,
    })
}

/// A decode failure message; becomes `invalid_request` with the request id.
type Failure = Cow<'static, str>;

fn decode_method(
    method: &str,
    rule: ParamsRule,
    envelope: &mut Map<String, Value>,
) -> Result<Request, Failure> {
    const ENVELOPE: [&str; 3] = ["version", "id", "method"];
    const ENVELOPE_WITH_PARAMS: [&str; 4] = ["version", "id", "method", "params"];
    match rule {
        ParamsRule::Forbidden => check_keys(envelope, &ENVELOPE, &ENVELOPE)?,
        ParamsRule::Optional => check_keys(envelope, &ENVELOPE_WITH_PARAMS, &ENVELOPE)?,
        ParamsRule::Required => {
            check_keys(envelope, &ENVELOPE_WITH_PARAMS, &ENVELOPE_WITH_PARAMS)?
        }
    }

    let params = match envelope.remove("params") {
        None => None,
        Some(Value::Object(params)) => Some(params),
        Some(_) => return Err(errors::params_must_be_object(method).into()),
    };

    match method {
        "session.get_state" => Ok(Request::GetState),
        "session.interrupt" => Ok(Request::Interrupt),
        "command.list" => Ok(Request::CommandList),
        "model.list" => Ok(Request::ModelList),
        "thinking.list" => Ok(Request::ThinkingList),
        "session.get_messages" => {
            let (start, limit) = decode_page(params, errors::MESSAGE_START, errors::MESSAGE_LIMIT)?;
            Ok(Request::GetMessages { start, limit })
        }
        "session.get_outcomes" => {
            let (start, limit) = decode_page(params, errors::OUTCOME_START, errors::OUTCOME_LIMIT)?;
            Ok(Request::GetOutcomes { start, limit })
        }
        "session.await_idle" => decode_await_idle(params),
        // The remaining methods require params; the key check above guarantees they exist.
        _ => {
            let params = params.ok_or(errors::MISSING_FIELDS)?;
            match method {
                "session.prompt" => decode_prompt(params),
                "connection.set_events" => decode_set_events(params),
                "command.invoke" => decode_command_invoke(params),
                "model.select" => decode_model_select(params),
                "thinking.select" => decode_thinking_select(params),
                _ => Err(errors::INVALID_REQUEST_FALLBACK.into()),
            }
        }
    }
}

/// Unknown keys are reported before missing ones. A key holding `null` is present.
fn check_keys(
    object: &Map<String, Value>,
    allowed: &[&str],
    required: &[&str],
) -> Result<(), Failure> {
    if object.keys().any(|key| !allowed.contains(&key.as_str())) {
        return Err(errors::UNKNOWN_FIELDS.into());
    }
    if required.iter().any(|key| !object.contains_key(*key)) {
        return Err(errors::MISSING_FIELDS.into());
    }
    Ok(())
}

fn decode_page(
    params: Option<Map<String, Value>>,
    start_message: &'static str,
    limit_message: &'static str,
) -> Result<(u64, u64), Failure> {
    let Some(params) = params else {
        return Ok((DEFAULT_PAGE_START, DEFAULT_PAGE_LIMIT));
    };
    check_keys(&params, &["start", "limit"], &[])?;
    let start = match params.get("start") {
        None | Some(Value::Null) => DEFAULT_PAGE_START,
        Some(value) => non_negative_integer(value).ok_or(start_message)?,
    };
    let limit = match params.get("limit") {
        None | Some(Value::Null) => DEFAULT_PAGE_LIMIT,
        Some(value) => non_negative_integer(value)
            .filter(|limit| (1..=MAX_PAGE_LIMIT).contains(limit))
            .ok_or(limit_message)?,
    };
    Ok((start, limit))
}

fn decode_prompt(mut params: Map<String, Value>) -> Result<Request, Failure> {
    check_keys(&params, &["delivery", "text", "completionId"], &[])?;
    let delivery = params
        .get("delivery")
        .and_then(Value::as_str)
        .and_then(Delivery::parse)
        .ok_or(errors::PROMPT_DELIVERY)?;
    let text = bounded_string(
        params.remove("text"),
        MAX_PROMPT_TEXT_BYTES,
        AllowEmpty::Yes,
        errors::PROMPT_TEXT,
    )?;
    let completion_id = match params.remove("completionId") {
        None => None,
        Some(value) => Some(bounded_string(
            Some(value),
            MAX_COMPLETION_ID_BYTES,
            AllowEmpty::No,
            errors::COMPLETION_ID,
        )?),
    };
    Ok(Request::Prompt {
        delivery,
        text,
        completion_id,
    })
}

fn decode_await_idle(params: Option<Map<String, Value>>) -> Result<Request, Failure> {
    let Some(mut params) = params else {
        return Ok(Request::AwaitIdle {
            completion_id: None,
        });
    };
    check_keys(&params, &["completionId"], &["completionId"])?;
    let completion_id = bounded_string(
        params.remove("completionId"),
        MAX_COMPLETION_ID_BYTES,
        AllowEmpty::No,
        errors::COMPLETION_ID,
    )?;
    Ok(Request::AwaitIdle {
        completion_id: Some(completion_id),
    })
}

fn decode_set_events(params: Map<String, Value>) -> Result<Request, Failure> {
    check_keys(&params, &["mode"], &["mode"])?;
    let mode = params
        .get("mode")
        .and_then(Value::as_str)
        .and_then(EventMode::parse)
        .ok_or(errors::EVENT_MODE)?;
    Ok(Request::SetEvents { mode })
}

fn decode_command_invoke(mut params: Map<String, Value>) -> Result<Request, Failure> {
    check_keys(&params, &["name", "arguments"], &["name", "arguments"])?;
    let name = bounded_string(
        params.remove("name"),
        MAX_COMMAND_NAME_BYTES,
        AllowEmpty::No,
        errors::COMMAND_NAME,
    )?;
    if !is_kebab_case(&name) {
        return Err(errors::COMMAND_NAME_KEBAB.into());
    }
    let arguments = bounded_string(
        params.remove("arguments"),
        MAX_COMMAND_ARGUMENTS_BYTES,
        AllowEmpty::Yes,
        errors::COMMAND_ARGUMENTS,
    )?;
    Ok(Request::CommandInvoke { name, arguments })
}

fn decode_model_select(mut params: Map<String, Value>) -> Result<Request, Failure> {
    check_keys(&params, &["provider", "id"], &["provider", "id"])?;
    let provider = bounded_string(
        params.remove("provider"),
        MAX_MODEL_FIELD_BYTES,
        AllowEmpty::No,
        errors::MODEL_PROVIDER,
    )?;
    let id = bounded_string(
        params.remove("id"),
        MAX_MODEL_FIELD_BYTES,
        AllowEmpty::No,
        errors::MODEL_ID,
    )?;
    Ok(Request::ModelSelect { provider, id })
}

fn decode_thinking_select(params: Map<String, Value>) -> Result<Request, Failure> {
    check_keys(&params, &["level", "scope"], &[])?;
    let level = params
        .get("level")
        .and_then(Value::as_str)
        .and_then(ThinkingLevel::parse)
        .ok_or(errors::THINKING_LEVEL)?;
    let scope = match params.get("scope") {
        None | Some(Value::Null) => SettingsScope::Global,
        Some(value) => value
            .as_str()
            .and_then(SettingsScope::parse)
            .ok_or(errors::THINKING_SCOPE)?,
    };
    Ok(Request::ThinkingSelect { level, scope })
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum AllowEmpty {
    Yes,
    No,
}

/// A string of at most `max_bytes` UTF-8 bytes (and non-empty unless allowed); an absent key
/// fails like any other non-string.
fn bounded_string(
    value: Option<Value>,
    max_bytes: usize,
    allow_empty: AllowEmpty,
    message: &'static str,
) -> Result<String, Failure> {
    match value {
        Some(Value::String(text))
            if text.len() <= max_bytes && (allow_empty == AllowEmpty::Yes || !text.is_empty()) =>
        {
            Ok(text)
        }
        _ => Err(message.into()),
    }
}

/// A JSON number that is an integer within JavaScript's safe range and not negative.
/// `1.0` is the integer 1; `-0` is 0.
fn non_negative_integer(value: &Value) -> Option<u64> {
    let Value::Number(number) = value else {
        return None;
    };
    if let Some(unsigned) = number.as_u64() {
        return (unsigned <= MAX_SAFE_INTEGER).then_some(unsigned);
    }
    if number.is_i64() {
        // Negative integers are never accepted here.
        return None;
    }
    let float = number.as_f64()?;
    let safe = float.is_finite()
        && float.fract() == 0.0
        && float >= 0.0_f64.min(-0.0)
        && float <= MAX_SAFE_INTEGER as f64;
    // In range and integral, so the conversion is exact.
    safe.then_some(float as u64)
}

/// `version === 1` in JavaScript: the number 1, however it is written (`1`, `1.0`, `1e0`).
fn is_version_one(version: Option<&Value>) -> bool {
    match version {
        Some(Value::Number(number)) => number.as_f64() == Some(1.0),
        _ => false,
    }
}

/// `^[a-z][a-z0-9]*(?:-[a-z0-9]+)*$`: lowercase ASCII words joined by single hyphens.
fn is_kebab_case(name: &str) -> bool {
    let mut bytes = name.bytes();
    if !bytes.next().is_some_and(|first| first.is_ascii_lowercase()) {
        return false;
    }
    let mut after_hyphen = false;
    for byte in bytes {
        match byte {
            b'a'..=b'z' | b'0'..=b'9' => after_hyphen = false,
            b'-' if !after_hyphen => after_hyphen = true,
            _ => return false,
        }
    }
    !after_hyphen
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
    if let Some(unsigned) = number.as_u64() {
        if unsigned <= EXACT_LIMIT {
            return unsigned.to_string();
        }
    } else if let Some(signed) = number.as_i64() {
        if signed.unsigned_abs() <= EXACT_LIMIT {
            // `-0` cannot be an i64, so this never prints "-0".
            return signed.to_string();
        }
    }
    match number.as_f64() {
        Some(float) => js_double_string(float),
        None => number.to_string(),
    }
}

/// ECMAScript Number::toString(10) (ECMA-262 §6.1.6.1.20), built on Rust's shortest
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
        let exponent_sign = if n - 1 >= 0 { '+' } else { '-' };
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
