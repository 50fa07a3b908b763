//! The params of the RPC methods (docs/rpc.md#params-of-each-method): one type per method that
//! takes params.
//!
//! Each type serializes to exactly what a client sends (the typed client uses it), carries its
//! JSON Schema, and decodes through [`DecodeParams`]: first the key check (unknown keys before
//! missing ones), then the value checks in the order the reference lists them, each failing
//! with its exact message. The decoder reads JSON the way the reference's JavaScript server
//! does (`1.0` is an integer, `null` is a present key), which `serde`'s derive cannot express,
//! so the value checks are written out; the unit tests tie them to the serialized form.

use std::borrow::Cow;

use serde::Serialize;
use serde_json::{Map, Value};

use crate::ThinkingLevel;
use crate::errors::{self, prompt_image_problem};
use crate::image::{ImageContent, MAX_PROMPT_IMAGES};
use crate::request::{Delivery, EventMode, SettingsScope};

/// A paged params type `{start?, limit?, …}` (absent or `null`: the defaults): the struct
/// with its `start` and `limit` fields, documented by the two strings, then any further
/// fields. With `decode: <start message>, <limit message>;` (a type with no further field),
/// also its default page and its decoder, which checks the values with [`decode_page`].
macro_rules! page_params {
    (
        $(#[$meta:meta])*
        pub struct $params:ident {
            start: $start_doc:literal,
            limit: $limit_doc:literal,
        }
        decode: $start_message:path, $limit_message:path;
    ) => {
        page_params! {
            $(#[$meta])*
            pub struct $params {
                start: $start_doc,
                limit: $limit_doc,
            }
        }

        impl Default for $params {
            fn default() -> Self {
                $params {
                    start: DEFAULT_PAGE_START,
                    limit: DEFAULT_PAGE_LIMIT,
                }
            }
        }

        impl DecodeParams for $params {
            const KEYS: &'static [&'static str] = &["start", "limit"];
            const REQUIRED: &'static [&'static str] = &[];

            fn decode_checked(params: Map<String, Value>) -> Result<Self, DecodeFailure> {
                let (start, limit) = decode_page(&params, $start_message, $limit_message)?;
                Ok($params { start, limit })
            }
        }
    };
    (
        $(#[$meta:meta])*
        pub struct $params:ident {
            start: $start_doc:literal,
            limit: $limit_doc:literal,
            $($fields:tt)*
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
        #[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
        #[serde(deny_unknown_fields)]
        pub struct $params {
            #[doc = $start_doc]
            #[serde(default)]
            #[cfg_attr(feature = "schema", schemars(with = "Option<u64>"))]
            pub start: u64,
            #[doc = $limit_doc]
            #[serde(default = "default_page_limit")]
            #[cfg_attr(
                feature = "schema",
                schemars(with = "Option<u64>", range(min = 1, max = MAX_PAGE_LIMIT))
            )]
            pub limit: u64,
            $($fields)*
        }
    };
}

mod approval;
mod sessions;
pub use approval::{
    ApprovalRespondParams, ApprovalRules, MAX_APPROVAL_TIMEOUT_MS, SandboxParams,
    SetApprovalsParams,
};
pub use sessions::{
    CompactParams, ForkParams, MAX_ENTRY_ID_BYTES, SessionListParams, SessionListScope,
};

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
/// Maximum UTF-8 length of `session.compact` instructions (8 KiB).
pub const MAX_COMPACT_INSTRUCTIONS_BYTES: usize = 8_192;
/// Page `start` when absent or `null`.
pub const DEFAULT_PAGE_START: u64 = 0;
/// Page `limit` when absent or `null`.
pub const DEFAULT_PAGE_LIMIT: u64 = 100;
/// Largest accepted page `limit`.
pub const MAX_PAGE_LIMIT: u64 = 100;
/// The command name pattern: lowercase ASCII words joined by single hyphens.
pub const COMMAND_NAME_PATTERN: &str = "^[a-z][a-z0-9]*(?:-[a-z0-9]+)*$";

/// JavaScript's `Number.MAX_SAFE_INTEGER`, 2^53 − 1.
const MAX_SAFE_INTEGER: u64 = 9_007_199_254_740_991;

/// The message of a params decode failure; it becomes `invalid_request` with the request id.
pub type DecodeFailure = Cow<'static, str>;

/// How one params type is decoded from its wire object.
pub trait DecodeParams: Sized {
    /// Every key the params object may hold.
    const KEYS: &'static [&'static str];
    /// The keys whose absence is reported as missing fields. Other absent keys fall to their
    /// value check (with its own message) or take their default.
    const REQUIRED: &'static [&'static str];

    /// Decodes an object whose key set already passed the check, running the value checks in
    /// the reference's order.
    fn decode_checked(params: Map<String, Value>) -> Result<Self, DecodeFailure>;
}

/// Decodes a params object: the key check, then the value checks.
pub fn decode<P: DecodeParams>(params: Map<String, Value>) -> Result<P, DecodeFailure> {
    check_keys(&params, P::KEYS, P::REQUIRED)?;
    P::decode_checked(params)
}

/// Unknown keys are reported before missing ones. A key holding `null` is present.
pub(crate) fn check_keys(
    object: &Map<String, Value>,
    allowed: &[&str],
    required: &[&str],
) -> Result<(), DecodeFailure> {
    if object.keys().any(|key| !allowed.contains(&key.as_str())) {
        return Err(errors::UNKNOWN_FIELDS.into());
    }
    if required.iter().any(|key| !object.contains_key(*key)) {
        return Err(errors::MISSING_FIELDS.into());
    }
    Ok(())
}

/// Named by `#[serde(default = …)]`, which only the schema derive reads (it makes `limit`
/// optional there).
#[cfg(feature = "schema")]
fn default_page_limit() -> u64 {
    DEFAULT_PAGE_LIMIT
}

page_params! {
    /// Params of `session.get_messages`. Absent or `null` fields take their defaults.
    pub struct MessagesParams {
        start: "The index of the first message (default 0).",
        limit: "How many messages at most, 1 through 100 (default 100).",
    }
    decode: errors::MESSAGE_START, errors::MESSAGE_LIMIT;
}

page_params! {
    /// Params of `session.get_outcomes`. Absent or `null` fields take their defaults.
    pub struct OutcomesParams {
        start: "The index of the first outcome (default 0).",
        limit: "How many outcomes at most, 1 through 100 (default 100).",
    }
    decode: errors::OUTCOME_START, errors::OUTCOME_LIMIT;
}

/// `start` then `limit`, each `null` or absent for its default.
fn decode_page(
    params: &Map<String, Value>,
    start_message: &'static str,
    limit_message: &'static str,
) -> Result<(u64, u64), DecodeFailure> {
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

/// Params of `session.prompt`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PromptParams {
    /// How the text is delivered.
    pub delivery: Delivery,
    /// The prompt text, at most 8,388,608 UTF-8 bytes (may be empty).
    #[cfg_attr(feature = "schema", schemars(length(max = MAX_PROMPT_TEXT_BYTES)))]
    pub text: String,
    /// A completion watch to arm, a non-empty string of at most 256 UTF-8 bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "schema",
        schemars(with = "String", length(min = 1, max = MAX_COMPLETION_ID_BYTES))
    )]
    pub completion_id: Option<String>,
    /// Images attached after the text, at most 16 (absent: none). An extension of Zi RPC v1:
    /// the key is never sent without images, so a v1 client's records are unchanged.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[cfg_attr(feature = "schema", schemars(length(max = MAX_PROMPT_IMAGES)))]
    pub images: Vec<ImageContent>,
}

impl DecodeParams for PromptParams {
    const KEYS: &'static [&'static str] = &["delivery", "text", "completionId", "images"];
    const REQUIRED: &'static [&'static str] = &[];

    fn decode_checked(mut params: Map<String, Value>) -> Result<Self, DecodeFailure> {
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
            Some(value) => Some(completion_id(Some(value))?),
        };
        let images = match params.remove("images") {
            None => Vec::new(),
            Some(value) => prompt_images(value)?,
        };
        Ok(PromptParams {
            delivery,
            text,
            completion_id,
            images,
        })
    }
}

/// `images`: an array (not `null`) of at most 16 elements, each checked in order: an object,
/// unknown keys before missing ones, `type`, then `mimeType`, the base64 `data` and its decoded
/// size ([`crate::image::validate_image`]). The first refused element is reported.
fn prompt_images(value: Value) -> Result<Vec<ImageContent>, DecodeFailure> {
    const KEYS: &[&str] = &["type", "data", "mimeType"];
    let Value::Array(elements) = value else {
        return Err(errors::PROMPT_IMAGES.into());
    };
    if elements.len() > MAX_PROMPT_IMAGES {
        return Err(errors::PROMPT_IMAGES.into());
    }
    let mut images = Vec::with_capacity(elements.len());
    for (index, element) in elements.into_iter().enumerate() {
        let refuse = |problem: &dyn std::fmt::Display| -> DecodeFailure {
            errors::prompt_image(index, problem).into()
        };
        let Value::Object(mut object) = element else {
            return Err(refuse(&prompt_image_problem::NOT_AN_OBJECT));
        };
        if object.keys().any(|key| !KEYS.contains(&key.as_str())) {
            return Err(refuse(&prompt_image_problem::UNKNOWN_FIELDS));
        }
        if KEYS.iter().any(|key| !object.contains_key(*key)) {
            return Err(refuse(&prompt_image_problem::MISSING_FIELDS));
        }
        if object.get("type").and_then(Value::as_str) != Some("image") {
            return Err(refuse(&prompt_image_problem::TYPE));
        }
        let mime_type = match object.remove("mimeType") {
            Some(Value::String(mime_type)) => mime_type,
            _ => return Err(refuse(&crate::image::ImageError::MimeType)),
        };
        let data = match object.remove("data") {
            Some(Value::String(data)) => data,
            _ => String::new(),
        };
        let image = ImageContent::new(data, &mime_type).map_err(|error| refuse(&error))?;
        images.push(image);
    }
    Ok(images)
}

/// Params of `session.await_idle` with a completion watch (without params it waits for idle).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AwaitIdleParams {
    /// The watch, a non-empty string of at most 256 UTF-8 bytes.
    #[cfg_attr(
        feature = "schema",
        schemars(length(min = 1, max = MAX_COMPLETION_ID_BYTES))
    )]
    pub completion_id: String,
}

impl DecodeParams for AwaitIdleParams {
    const KEYS: &'static [&'static str] = &["completionId"];
    const REQUIRED: &'static [&'static str] = &["completionId"];

    fn decode_checked(mut params: Map<String, Value>) -> Result<Self, DecodeFailure> {
        Ok(AwaitIdleParams {
            completion_id: completion_id(params.remove("completionId"))?,
        })
    }
}

fn completion_id(value: Option<Value>) -> Result<String, DecodeFailure> {
    bounded_string(
        value,
        MAX_COMPLETION_ID_BYTES,
        AllowEmpty::No,
        errors::COMPLETION_ID,
    )
}

/// Params of `connection.set_events`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct SetEventsParams {
    /// The new event mode.
    pub mode: EventMode,
}

impl DecodeParams for SetEventsParams {
    const KEYS: &'static [&'static str] = &["mode"];
    const REQUIRED: &'static [&'static str] = &["mode"];

    fn decode_checked(params: Map<String, Value>) -> Result<Self, DecodeFailure> {
        let mode = params
            .get("mode")
            .and_then(Value::as_str)
            .and_then(EventMode::parse)
            .ok_or(errors::EVENT_MODE)?;
        Ok(SetEventsParams { mode })
    }
}

/// Params of `command.invoke`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct CommandInvokeParams {
    /// The command name: lowercase kebab-case, at most 64 bytes.
    #[cfg_attr(
        feature = "schema",
        schemars(
            length(min = 1, max = MAX_COMMAND_NAME_BYTES),
            regex(pattern = COMMAND_NAME_PATTERN)
        )
    )]
    pub name: String,
    /// The argument text, at most 262,144 UTF-8 bytes (may be empty).
    #[cfg_attr(feature = "schema", schemars(length(max = MAX_COMMAND_ARGUMENTS_BYTES)))]
    pub arguments: String,
}

impl DecodeParams for CommandInvokeParams {
    const KEYS: &'static [&'static str] = &["name", "arguments"];
    const REQUIRED: &'static [&'static str] = &["name", "arguments"];

    fn decode_checked(mut params: Map<String, Value>) -> Result<Self, DecodeFailure> {
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
        Ok(CommandInvokeParams { name, arguments })
    }
}

/// Params of `model.select`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct ModelSelectParams {
    /// The provider, a non-empty string of at most 256 UTF-8 bytes.
    #[cfg_attr(
        feature = "schema",
        schemars(length(min = 1, max = MAX_MODEL_FIELD_BYTES))
    )]
    pub provider: String,
    /// The model id, a non-empty string of at most 256 UTF-8 bytes.
    #[cfg_attr(
        feature = "schema",
        schemars(length(min = 1, max = MAX_MODEL_FIELD_BYTES))
    )]
    pub id: String,
}

impl DecodeParams for ModelSelectParams {
    const KEYS: &'static [&'static str] = &["provider", "id"];
    const REQUIRED: &'static [&'static str] = &["provider", "id"];

    fn decode_checked(mut params: Map<String, Value>) -> Result<Self, DecodeFailure> {
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
        Ok(ModelSelectParams { provider, id })
    }
}

/// Params of `thinking.select`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct ThinkingSelectParams {
    /// The requested level.
    pub level: ThinkingLevel,
    /// Which settings file records it (absent or `null`: global).
    #[serde(default)]
    #[cfg_attr(feature = "schema", schemars(with = "Option<SettingsScope>"))]
    pub scope: SettingsScope,
}

impl DecodeParams for ThinkingSelectParams {
    const KEYS: &'static [&'static str] = &["level", "scope"];
    const REQUIRED: &'static [&'static str] = &[];

    fn decode_checked(params: Map<String, Value>) -> Result<Self, DecodeFailure> {
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
        Ok(ThinkingSelectParams { level, scope })
    }
}

page_params! {
    /// Params of `session.get_entries`. Absent or `null` fields take their defaults.
    pub struct EntriesParams {
        start: "The index of the first journal entry (default 0).",
        limit: "How many entries at most, 1 through 100 (default 100).",
    }
    decode: errors::ENTRY_START, errors::ENTRY_LIMIT;
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
) -> Result<String, DecodeFailure> {
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
        && float >= 0.0
        && float <= MAX_SAFE_INTEGER as f64;
    // In range and integral, so the conversion is exact.
    safe.then_some(float as u64)
}

/// `^[a-z][a-z0-9]*(?:-[a-z0-9]+)*$` ([`COMMAND_NAME_PATTERN`]).
pub(crate) fn is_kebab_case(name: &str) -> bool {
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
