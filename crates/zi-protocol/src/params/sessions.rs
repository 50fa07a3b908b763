//! Params of the session catalog and its operations: `session.list`, `session.fork` and
//! `session.compact`.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::{
    AllowEmpty, DEFAULT_PAGE_LIMIT, DEFAULT_PAGE_START, DecodeFailure, DecodeParams,
    MAX_COMPACT_INSTRUCTIONS_BYTES, bounded_string, decode_page,
};
#[cfg(feature = "schema")]
use super::{MAX_PAGE_LIMIT, default_page_limit};
use crate::errors;

/// Which journals `session.list` reads.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum SessionListScope {
    /// The session directory of the session's cwd, journals whose header names that cwd.
    #[default]
    Cwd,
    /// Every session directory under the agent directory's `sessions/`, any cwd.
    All,
}

impl SessionListScope {
    /// The exact wire string, case-sensitive.
    pub fn parse(text: &str) -> Option<SessionListScope> {
        match text {
            "cwd" => Some(SessionListScope::Cwd),
            "all" => Some(SessionListScope::All),
            _ => None,
        }
    }
}

page_params! {
    /// Params of `session.list`. Absent or `null` fields take their defaults.
    pub struct SessionListParams {
        start: "The index of the first session, newest first (default 0).",
        limit: "How many sessions at most, 1 through 100 (default 100).",
        /// Which journals are listed (absent or `null`: `cwd`).
        #[serde(default)]
        #[cfg_attr(feature = "schema", schemars(with = "Option<SessionListScope>"))]
        pub scope: SessionListScope,
    }
}

impl Default for SessionListParams {
    fn default() -> Self {
        SessionListParams {
            start: DEFAULT_PAGE_START,
            limit: DEFAULT_PAGE_LIMIT,
            scope: SessionListScope::Cwd,
        }
    }
}

impl DecodeParams for SessionListParams {
    const KEYS: &'static [&'static str] = &["start", "limit", "scope"];
    const REQUIRED: &'static [&'static str] = &[];

    fn decode_checked(params: Map<String, Value>) -> Result<Self, DecodeFailure> {
        let (start, limit) = decode_page(
            &params,
            errors::SESSION_LIST_START,
            errors::SESSION_LIST_LIMIT,
        )?;
        let scope = match params.get("scope") {
            None | Some(Value::Null) => SessionListScope::Cwd,
            Some(value) => value
                .as_str()
                .and_then(SessionListScope::parse)
                .ok_or(errors::SESSION_LIST_SCOPE)?,
        };
        Ok(SessionListParams {
            start,
            limit,
            scope,
        })
    }
}

/// Maximum UTF-8 length of an entry id in `session.fork`.
pub const MAX_ENTRY_ID_BYTES: usize = 256;

/// Params of `session.fork`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ForkParams {
    /// The last entry the fork keeps, a non-empty string of at most 256 UTF-8 bytes.
    #[cfg_attr(feature = "schema", schemars(length(min = 1, max = MAX_ENTRY_ID_BYTES)))]
    pub entry_id: String,
}

impl DecodeParams for ForkParams {
    const KEYS: &'static [&'static str] = &["entryId"];
    const REQUIRED: &'static [&'static str] = &["entryId"];

    fn decode_checked(mut params: Map<String, Value>) -> Result<Self, DecodeFailure> {
        let entry_id = bounded_string(
            params.remove("entryId"),
            MAX_ENTRY_ID_BYTES,
            AllowEmpty::No,
            errors::FORK_ENTRY_ID,
        )?;
        Ok(ForkParams { entry_id })
    }
}

/// Params of `session.compact` (an extension of v1). Absent params, an absent key and `null`
/// all mean no instructions.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct CompactParams {
    /// A focus for the summary (`Additional focus: …` in the summary prompt), a string of at
    /// most 8,192 UTF-8 bytes; an empty string adds no focus.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "schema",
        schemars(length(max = MAX_COMPACT_INSTRUCTIONS_BYTES))
    )]
    pub instructions: Option<String>,
}

impl DecodeParams for CompactParams {
    const KEYS: &'static [&'static str] = &["instructions"];
    const REQUIRED: &'static [&'static str] = &[];

    fn decode_checked(mut params: Map<String, Value>) -> Result<Self, DecodeFailure> {
        let instructions = match params.remove("instructions") {
            None | Some(Value::Null) => None,
            value => Some(bounded_string(
                value,
                MAX_COMPACT_INSTRUCTIONS_BYTES,
                AllowEmpty::Yes,
                errors::COMPACT_INSTRUCTIONS,
            )?),
        };
        Ok(CompactParams { instructions })
    }
}
