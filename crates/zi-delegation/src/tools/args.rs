//! The arguments of the eight tools (docs/delegation.md#tools): one type per tool, its parameter
//! schema derived from it, laid out as the delegation tools' schemas always were.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use zi_agent::tool::{parameters_schema, whole_number};
use zi_config::subagent_profiles::SubagentCatalog;

use crate::limits::{MAX_WAIT_NAMES, MAX_WAIT_TIMEOUT_MS, TEXT_MAX_BYTES};

/// The key order of the delegation tools' schemas: an object's `required` before its
/// `properties`, an array's `items` before its bounds, a property's description last.
const KEY_ORDER: &[&str] = &[
    "type",
    "enum",
    "required",
    "properties",
    "items",
    "minLength",
    "maxLength",
    "pattern",
    "minimum",
    "maximum",
    "minItems",
    "maxItems",
    "uniqueItems",
    "description",
];

/// The parameter schema of arguments `T`.
pub(crate) fn schema<T: JsonSchema>() -> Value {
    parameters_schema::<T>(KEY_ORDER)
}

/// `spawn_subagent`'s schema: `profile` names the catalog's admitted profiles, with their
/// purposes as its description (docs/delegation.md#tools), so it is set here for each catalog.
pub(crate) fn spawn_schema(catalog: &SubagentCatalog) -> Value {
    let mut schema = schema::<SpawnArgs>();
    let names: Vec<&str> = catalog.profiles().iter().map(|p| p.name.as_str()).collect();
    schema["properties"]["profile"] = json!({
        "type": "string",
        "enum": names,
        "description": super::schemas::profile_enum_description(catalog),
    });
    schema
}

/// The runtime name given at spawn (not the profile name); reuse it for every later operation
/// on this subagent. Lowercase letters, digits, _ or -.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(transparent)]
pub(crate) struct SubagentName(
    #[schemars(length(min = 1, max = 64), regex(pattern = r"^[a-z][a-z0-9_-]*$"))] pub(crate) String,
);

/// `list_subagent_profiles` and `list_subagents` take nothing.
#[derive(Debug, Deserialize, JsonSchema)]
pub(crate) struct NoArgs {}

/// The arguments of `spawn_subagent`.
#[derive(Debug, Deserialize, JsonSchema)]
pub(crate) struct SpawnArgs {
    /// The admitted profile (its schema is the catalog's, see [`spawn_schema`]).
    pub(crate) profile: String,
    /// A new runtime name for this subagent, unique in this session and never reused (distinct
    /// from the profile name). Lowercase letters, digits, _ or -.
    pub(crate) name: SubagentName,
    /// The initial task for the subagent; it is appended to the profile's instructions.
    #[schemars(length(min = 1, max = TEXT_MAX_BYTES))]
    pub(crate) prompt: String,
}

/// The arguments of `send_subagent_message`.
#[derive(Debug, Deserialize, JsonSchema)]
pub(crate) struct SendArgs {
    // Described by its type.
    pub(crate) name: SubagentName,
    /// Context for the subagent's current or next task; it never starts an idle turn.
    #[schemars(length(min = 1, max = TEXT_MAX_BYTES))]
    pub(crate) text: String,
}

/// The arguments of `assign_subagent_task`.
#[derive(Debug, Deserialize, JsonSchema)]
pub(crate) struct AssignArgs {
    // Described by its type.
    pub(crate) name: SubagentName,
    /// The task: starts a new work cycle when the subagent is idle, joins the current cycle
    /// while it works.
    #[schemars(length(min = 1, max = TEXT_MAX_BYTES))]
    pub(crate) text: String,
}

/// The arguments of `interrupt_subagent` and `close_subagent`.
#[derive(Debug, Deserialize, JsonSchema)]
pub(crate) struct NameArgs {
    // Described by its type.
    pub(crate) name: SubagentName,
}

/// The arguments of `wait_subagents`.
#[derive(Debug, Deserialize, JsonSchema)]
pub(crate) struct WaitArgs {
    /// Runtime names to wait for. Omit to capture every working or result-ready subagent (up to
    /// 16).
    #[schemars(length(min = 1, max = MAX_WAIT_NAMES), extend("uniqueItems" = true))]
    pub(crate) names: Option<Vec<SubagentName>>,
    /// How long to wait at most, in milliseconds (default: the subagentWaitTimeoutMs setting).
    #[serde(default, deserialize_with = "whole_number")]
    #[schemars(range(min = 0, max = MAX_WAIT_TIMEOUT_MS))]
    pub(crate) timeout_ms: Option<u64>,
}
