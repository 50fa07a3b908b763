//! The method table of Zi RPC v1 and zi's extensions (docs/rpc.md#method-summary): every method
//! declared once.
//!
//! Each row of [`rpc_methods!`] names a method's Rust variant, its wire name, its params (none,
//! optional or required, with their type) and its result type. Everything else is generated
//! from the table:
//!
//! - [`Method`] (the closed set, with [`Method::parse`], [`Method::name`] and [`METHODS`]);
//! - one marker type per method in [`methods`], implementing [`RpcMethod`], which ties the wire
//!   name to the params and result types for the server's typed replies and the typed client;
//! - [`Request`], the decoded request (one variant per method carrying a [`Call`]), and the
//!   params step of the decoder;
//! - with the `schema` feature, the per-method request and response shapes of the JSON Schema.
//!
//! Adding a method is one row here plus its params type (with a
//! [`DecodeParams`](crate::params::DecodeParams) impl) in [`crate::params`] and its result type
//! in [`crate::results`]; the compiler then points at the server's dispatch.

use std::fmt;
use std::marker::PhantomData;

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use crate::approval::{ApprovalRespondResult, ApprovalsState};
use crate::params::{
    ApprovalRespondParams, AwaitIdleParams, CommandInvokeParams, CompactParams, DecodeFailure,
    DecodeParams, EntriesParams, ForkParams, MessagesParams, ModelSelectParams, OutcomesParams,
    PromptParams, SessionListParams, SetApprovalsParams, SetEventsParams, ThinkingSelectParams,
};
use crate::results::{
    AwaitIdleResult, CommandInvokeResult, CommandList, CompactResult, EmptyResult, EntryPage,
    EventModeResult, ForkResult, MessagePage, ModelList, ModelSelection, OutcomePage, PromptResult,
    SessionListPage, SessionStats, ThinkingLevels, ThinkingSelection,
};
use crate::state::SessionState;

/// Whether a method takes a `params` key (docs/rpc.md#params-of-each-method).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParamsRule {
    /// A `params` key, even `{}`, is an unknown field.
    Forbidden,
    /// `params` may be absent; when present it is decoded.
    Optional,
    /// `params` must be present.
    Required,
}

/// One RPC method at the type level: its wire name and the types of its params and result.
///
/// Implemented by the marker types in [`methods`], one per row of the method table.
pub trait RpcMethod: Sized + 'static {
    /// The method.
    const METHOD: Method;
    /// What a decoded call carries: `()` without params, `Option<P>` when params are optional
    /// (`None` when the key is absent), `P` when they are required.
    type Params: fmt::Debug + Clone + PartialEq + Send + 'static;
    /// The success `result` of the response.
    type Result: Serialize + DeserializeOwned + Send + 'static;

    /// The `params` value a client sends, or `None` to omit the key.
    fn encode_params(params: &Self::Params) -> Result<Option<Value>, serde_json::Error>;

    /// Wraps a call of this method into the closed [`Request`] enum.
    fn request(params: Self::Params) -> Request;
}

/// A decoded call of method `M`: its params, typed by the method table.
pub struct Call<M: RpcMethod> {
    /// The decoded, normalized params.
    pub params: M::Params,
    method: PhantomData<fn() -> M>,
}

impl<M: RpcMethod> Call<M> {
    /// A call of `M` with `params`.
    pub fn new(params: M::Params) -> Self {
        Call {
            params,
            method: PhantomData,
        }
    }
}

impl<M: RpcMethod> fmt::Debug for Call<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Call")
            .field("method", &M::METHOD.name())
            .field("params", &self.params)
            .finish()
    }
}

impl<M: RpcMethod> Clone for Call<M> {
    fn clone(&self) -> Self {
        Call::new(self.params.clone())
    }
}

impl<M: RpcMethod> PartialEq for Call<M> {
    fn eq(&self, other: &Self) -> bool {
        self.params == other.params
    }
}

/// `params` of a method without params: nothing to encode.
fn no_params(_: &()) -> Result<Option<Value>, serde_json::Error> {
    Ok(None)
}

fn optional_params<P: Serialize>(params: &Option<P>) -> Result<Option<Value>, serde_json::Error> {
    params.as_ref().map(serde_json::to_value).transpose()
}

fn required_params<P: Serialize>(params: &P) -> Result<Option<Value>, serde_json::Error> {
    serde_json::to_value(params).map(Some)
}

/// Decodes the params of a method without params (the key check already rejected any).
fn decode_none(_: Option<Map<String, Value>>) -> Result<(), DecodeFailure> {
    Ok(())
}

fn decode_optional<P: DecodeParams>(
    params: Option<Map<String, Value>>,
) -> Result<Option<P>, DecodeFailure> {
    params.map(crate::params::decode::<P>).transpose()
}

fn decode_required<P: DecodeParams>(
    params: Option<Map<String, Value>>,
) -> Result<P, DecodeFailure> {
    // The envelope key check has already reported a missing `params` key.
    let params = params.ok_or(DecodeFailure::Borrowed(crate::errors::MISSING_FIELDS))?;
    crate::params::decode::<P>(params)
}

/// Expands the params kind of a row into its pieces.
macro_rules! params_kind {
    (type none) => { () };
    (type optional $params:ty) => { Option<$params> };
    (type required $params:ty) => { $params };
    (rule none) => { ParamsRule::Forbidden };
    (rule optional $params:ty) => { ParamsRule::Optional };
    (rule required $params:ty) => { ParamsRule::Required };
    (encode none) => { no_params };
    (encode optional $params:ty) => { optional_params::<$params> };
    (encode required $params:ty) => { required_params::<$params> };
    (decode none) => { decode_none };
    (decode optional $params:ty) => { decode_optional::<$params> };
    (decode required $params:ty) => { decode_required::<$params> };
    (keys none) => { &[] };
    (keys optional $params:ty) => { <$params as DecodeParams>::KEYS };
    (keys required $params:ty) => { <$params as DecodeParams>::KEYS };
    (schema $generator:ident none) => { None };
    (schema $generator:ident optional $params:ty) => {
        Some(($generator.subschema_for::<$params>(), ParamsRule::Optional))
    };
    (schema $generator:ident required $params:ty) => {
        Some(($generator.subschema_for::<$params>(), ParamsRule::Required))
    };
}

/// Generates everything derived from the method table (see the module documentation).
macro_rules! rpc_methods {
    ($(
        $(#[doc = $doc:literal])*
        $variant:ident => $wire:literal,
            params: $kind:ident $($params:ty)?,
            result: $result:ty;
    )*) => {
        /// The closed set of RPC methods, in table order (docs/architecture.md#the-method-table).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum Method {
            $( $(#[doc = $doc])* $variant, )*
        }

        /// Every method, in table order.
        pub const ALL_METHODS: [Method; [$(Method::$variant),*].len()] = [$(Method::$variant),*];

        /// Each row as written in the table: wire name, params kind and type, result type (the
        /// test that keeps docs/architecture.md#the-method-table in step reads them).
        #[cfg(test)]
        pub(crate) const TABLE_ROWS: [(&str, &str, &str); ALL_METHODS.len()] = [
            $( ($wire, stringify!($kind $($params)?), stringify!($result)), )*
        ];

        /// The wire names of every method, in table order.
        pub const METHODS: [&str; ALL_METHODS.len()] = [$($wire),*];

        impl Method {
            /// The method with this exact (case-sensitive) wire name.
            pub fn parse(name: &str) -> Option<Method> {
                match name {
                    $( $wire => Some(Method::$variant), )*
                    _ => None,
                }
            }

            /// The wire name.
            pub fn name(self) -> &'static str {
                match self {
                    $( Method::$variant => $wire, )*
                }
            }

            /// Whether the method takes a `params` key.
            pub fn params_rule(self) -> ParamsRule {
                match self {
                    $( Method::$variant => params_kind!(rule $kind $($params)?), )*
                }
            }

            /// Every key the method's params object may hold (none without params).
            pub fn params_keys(self) -> &'static [&'static str] {
                match self {
                    $( Method::$variant => params_kind!(keys $kind $($params)?), )*
                }
            }
        }

        /// One marker type per method (see [`RpcMethod`]).
        pub mod methods {
            $(
                $(#[doc = $doc])*
                #[derive(Debug, Clone, Copy, PartialEq, Eq)]
                pub struct $variant;
            )*
        }

        $(
            impl RpcMethod for methods::$variant {
                const METHOD: Method = Method::$variant;
                type Params = params_kind!(type $kind $($params)?);
                type Result = $result;

                fn encode_params(params: &Self::Params) -> Result<Option<Value>, serde_json::Error> {
                    (params_kind!(encode $kind $($params)?))(params)
                }

                fn request(params: Self::Params) -> Request {
                    Request::$variant(Call::new(params))
                }
            }
        )*

        /// A decoded request: its method and its params, normalized.
        #[derive(Debug, Clone, PartialEq)]
        pub enum Request {
            $( $(#[doc = $doc])* $variant(Call<methods::$variant>), )*
        }

        impl Request {
            /// The request's method.
            pub fn method(&self) -> Method {
                match self {
                    $( Request::$variant(_) => Method::$variant, )*
                }
            }

            /// The `params` value a client sends for this request, or `None` to omit the key.
            pub fn encode_params(&self) -> Result<Option<Value>, serde_json::Error> {
                match self {
                    $( Request::$variant(call) => {
                        <methods::$variant as RpcMethod>::encode_params(&call.params)
                    } )*
                }
            }
        }

        /// The params step of the decoder: `params` (already known to be an object, or absent)
        /// decoded for `method`.
        pub(crate) fn decode_params(
            method: Method,
            params: Option<Map<String, Value>>,
        ) -> Result<Request, DecodeFailure> {
            Ok(match method {
                $( Method::$variant => Request::$variant(Call::new(
                    (params_kind!(decode $kind $($params)?))(params)?,
                )), )*
            })
        }

        /// The JSON Schema parts of one method.
        #[cfg(feature = "schema")]
        pub(crate) struct MethodSchema {
            /// The wire name.
            pub name: &'static str,
            /// The params schema and whether the key is required; `None` when the method takes
            /// no params.
            pub params: Option<(schemars::Schema, ParamsRule)>,
            /// The success result schema.
            pub result: schemars::Schema,
        }

        /// The schema parts of every method, in table order; named types land in `generator`'s
        /// definitions.
        #[cfg(feature = "schema")]
        pub(crate) fn method_schemas(generator: &mut schemars::SchemaGenerator) -> Vec<MethodSchema> {
            vec![$(
                MethodSchema {
                    name: $wire,
                    params: params_kind!(schema generator $kind $($params)?),
                    result: generator.subschema_for::<$result>(),
                },
            )*]
        }
    };
}

rpc_methods! {
    /// `session.get_state`: the session snapshot.
    GetState => "session.get_state", params: none, result: SessionState;
    /// `session.get_messages`: one page of the message history.
    GetMessages => "session.get_messages", params: optional MessagesParams, result: MessagePage;
    /// `session.get_outcomes`: one page of the operation outcomes.
    GetOutcomes => "session.get_outcomes", params: optional OutcomesParams, result: OutcomePage;
    /// `session.prompt`: admits user input.
    Prompt => "session.prompt", params: required PromptParams, result: PromptResult;
    /// `session.interrupt`: aborts the running activity (the reserved slot).
    Interrupt => "session.interrupt", params: none, result: EmptyResult;
    /// `session.await_idle`: waits until the session is idle, or for a completion watch.
    AwaitIdle => "session.await_idle", params: optional AwaitIdleParams, result: AwaitIdleResult;
    /// `session.compact` (extension): compacts the context now, idle only.
    Compact => "session.compact", params: optional CompactParams, result: CompactResult;
    /// `session.get_stats` (extension): usage and counts of the whole journal.
    GetStats => "session.get_stats", params: none, result: SessionStats;
    /// `connection.set_events`: which session events this connection receives.
    SetEvents => "connection.set_events", params: required SetEventsParams, result: EventModeResult;
    /// `command.list`: the extension commands.
    CommandList => "command.list", params: none, result: CommandList;
    /// `command.invoke`: runs an extension command.
    CommandInvoke => "command.invoke", params: required CommandInvokeParams, result: CommandInvokeResult;
    /// `model.list`: the model catalog.
    ModelList => "model.list", params: none, result: ModelList;
    /// `model.select`: selects a model.
    ModelSelect => "model.select", params: required ModelSelectParams, result: ModelSelection;
    /// `thinking.list`: the thinking levels of the selected model.
    ThinkingList => "thinking.list", params: none, result: ThinkingLevels;
    /// `thinking.select`: sets the thinking level.
    ThinkingSelect => "thinking.select", params: required ThinkingSelectParams, result: ThinkingSelection;
    /// `session.list`: the journals of the sessions directory, newest first (zi extension).
    ListSessions => "session.list", params: optional SessionListParams, result: SessionListPage;
    /// `session.get_entries`: one page of the raw journal entries (zi extension).
    GetEntries => "session.get_entries", params: optional EntriesParams, result: EntryPage;
    /// `session.fork`: writes a new journal up to an entry, without switching (zi extension).
    Fork => "session.fork", params: required ForkParams, result: ForkResult;
    /// `connection.set_approvals`: opts this connection in to approval requests.
    SetApprovals => "connection.set_approvals", params: required SetApprovalsParams, result: ApprovalsState;
    /// `approval.respond`: answers an approval request.
    ApprovalRespond => "approval.respond", params: required ApprovalRespondParams, result: ApprovalRespondResult;
}

impl Method {
    /// Whether the method uses the reserved interruption slot rather than an ordinary one.
    pub fn is_interrupt(self) -> bool {
        self == Method::Interrupt
    }
}

impl Request {
    /// Whether the request uses the reserved interruption slot rather than an ordinary one.
    pub fn is_interrupt(&self) -> bool {
        self.method().is_interrupt()
    }

    /// A request of method `M` (for tests and generic code).
    pub fn of<M: RpcMethod>(params: M::Params) -> Request {
        M::request(params)
    }
}

impl fmt::Display for Method {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::ThinkingLevel;
    use crate::request::{Delivery, EventMode, SettingsScope, decode_value};

    /// One request per method with every optional field set (the exhaustive match makes a new
    /// method add its sample).
    pub(crate) fn samples() -> Vec<Request> {
        ALL_METHODS
            .into_iter()
            .map(|method| match method {
                Method::GetState => Request::of::<methods::GetState>(()),
                Method::GetMessages => {
                    Request::of::<methods::GetMessages>(Some(MessagesParams { start: 3, limit: 7 }))
                }
                Method::GetOutcomes => Request::of::<methods::GetOutcomes>(Some(OutcomesParams {
                    start: 9_007_199_254_740_991,
                    limit: 100,
                })),
                Method::Prompt => Request::of::<methods::Prompt>(PromptParams {
                    delivery: Delivery::FollowUp,
                    text: "caf\u{e9}\n\"quoted\"".into(),
                    completion_id: Some("cycle-1".into()),
                    images: vec![
                        crate::image::ImageContent::new("iVBORw0KGgo=".into(), "image/png")
                            .unwrap_or_else(|error| panic!("{error}")),
                    ],
                }),
                Method::Interrupt => Request::of::<methods::Interrupt>(()),
                Method::AwaitIdle => Request::of::<methods::AwaitIdle>(Some(AwaitIdleParams {
                    completion_id: "cycle-1".into(),
                })),
                Method::Compact => Request::of::<methods::Compact>(Some(CompactParams {
                    instructions: Some("Focus on the \u{e9}diting plan".into()),
                })),
                Method::GetStats => Request::of::<methods::GetStats>(()),
                Method::SetEvents => Request::of::<methods::SetEvents>(SetEventsParams {
                    mode: EventMode::Activity,
                }),
                Method::CommandList => Request::of::<methods::CommandList>(()),
                Method::CommandInvoke => {
                    Request::of::<methods::CommandInvoke>(CommandInvokeParams {
                        name: "a1-b2".into(),
                        arguments: "increment by 2".into(),
                    })
                }
                Method::ModelList => Request::of::<methods::ModelList>(()),
                Method::ModelSelect => Request::of::<methods::ModelSelect>(ModelSelectParams {
                    provider: "rpc-select".into(),
                    id: "second".into(),
                }),
                Method::ThinkingList => Request::of::<methods::ThinkingList>(()),
                Method::ThinkingSelect => {
                    Request::of::<methods::ThinkingSelect>(ThinkingSelectParams {
                        level: ThinkingLevel::Xhigh,
                        scope: SettingsScope::Project,
                    })
                }
                Method::ListSessions => {
                    Request::of::<methods::ListSessions>(Some(SessionListParams {
                        start: 4,
                        limit: 20,
                        scope: crate::params::SessionListScope::All,
                    }))
                }
                Method::GetEntries => {
                    Request::of::<methods::GetEntries>(Some(EntriesParams { start: 5, limit: 1 }))
                }
                Method::Fork => Request::of::<methods::Fork>(ForkParams {
                    entry_id: "00000000-0000-4000-8000-000000000001".into(),
                }),
                Method::SetApprovals => {
                    Request::of::<methods::SetApprovals>(crate::params::SetApprovalsParams {
                        enabled: true,
                        policy: Some(crate::approval::ApprovalPolicy::Untrusted),
                        sandbox: Some(crate::params::SandboxParams {
                            mode: Some(crate::approval::SandboxMode::WorkspaceWrite),
                            network: Some(false),
                            writable_roots: Some(vec!["/tmp/cache".into()]),
                        }),
                        rules: Some(crate::params::ApprovalRules {
                            allow: vec!["bash(cargo test:*)".into()],
                            ask: vec!["bash(git push:*)".into()],
                            deny: vec!["read(.env)".into()],
                        }),
                        timeout_ms: Some(600_000),
                    })
                }
                Method::ApprovalRespond => {
                    Request::of::<methods::ApprovalRespond>(crate::params::ApprovalRespondParams {
                        approval_id: "9b2e6c1e-3f7a-4c55-9a43-0d7f2b9a61c4".into(),
                        decision: crate::approval::ApprovalDecision::Deny,
                        message: Some("Open a pull request instead.".into()),
                        rule: None,
                    })
                }
            })
            .collect()
    }

    fn envelope(request: &Request) -> Value {
        let mut value = serde_json::json!({
            "version": 1,
            "id": "r",
            "method": request.method().name(),
        });
        if let Ok(Some(params)) = request.encode_params() {
            value["params"] = params;
        }
        value
    }

    #[test]
    fn the_table_names_every_method_once() {
        for (method, name) in ALL_METHODS.into_iter().zip(METHODS) {
            assert_eq!(method.name(), name);
            assert_eq!(Method::parse(name), Some(method));
            assert_eq!(method.to_string(), name);
        }
        let mut names = METHODS.to_vec();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), METHODS.len());
    }

    #[test]
    fn what_a_client_encodes_the_server_decodes_unchanged() {
        for request in samples() {
            let method = request.method();
            let value = envelope(&request);
            match &value.get("params") {
                None => assert_eq!(method.params_rule(), ParamsRule::Forbidden, "{method}"),
                Some(Value::Object(params)) => {
                    // With every optional field set, the encoded keys are exactly the keys the
                    // decoder accepts.
                    let mut encoded: Vec<&str> = params.keys().map(String::as_str).collect();
                    let mut accepted = method.params_keys().to_vec();
                    encoded.sort_unstable();
                    accepted.sort_unstable();
                    if method == Method::ApprovalRespond {
                        // `message` (deny) and `rule` (allow_session) exclude each other.
                        accepted.retain(|key| *key != "rule");
                    }
                    assert_eq!(encoded, accepted, "{method}");
                }
                Some(other) => panic!("{method} encodes params {other}"),
            }
            let decoded = decode_value(value.clone()).map(|d| d.request);
            assert_eq!(decoded, Ok(request), "{value}");
        }
    }

    /// docs/architecture.md#the-method-table lists every row of `rpc_methods!`, in order, with
    /// its params and result types, so the page cannot drift from the code.
    #[test]
    fn the_architecture_method_table_matches_rpc_methods() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/architecture.md");
        let page = std::fs::read_to_string(path).expect("docs/architecture.md is readable");
        let documented: Vec<&str> = page
            .split("\n## The method table\n")
            .nth(1)
            .expect("docs/architecture.md has a section `## The method table`")
            .lines()
            .skip_while(|line| !line.starts_with("| method |"))
            .skip(2)
            .take_while(|line| line.starts_with('|'))
            .collect();
        let expected: Vec<String> = TABLE_ROWS
            .iter()
            .map(|(wire, params, result)| {
                let params = match params.split_once(' ') {
                    Some((kind, ty)) => format!("{kind} `{ty}`"),
                    None => params.to_string(),
                };
                format!("| `{wire}` | {params} | `{result}` |")
            })
            .collect();
        assert_eq!(
            documented,
            expected,
            "docs/architecture.md's method table differs from rpc_methods!; its rows should be:\n{}",
            expected.join("\n")
        );
    }

    #[test]
    fn optional_params_may_be_omitted() {
        for method in ALL_METHODS {
            if method.params_rule() != ParamsRule::Optional {
                continue;
            }
            let value = serde_json::json!({"version": 1, "id": "r", "method": method.name()});
            let decoded = decode_value(value).map(|d| d.request.encode_params().ok().flatten());
            assert_eq!(decoded, Ok(None), "{method}");
        }
    }
}
