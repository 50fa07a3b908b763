//! The JSON Schema (draft 2020-12) of Zi RPC v1: every request and every server frame.
//!
//! Built from the Rust wire types with `schemars` (serde attributes respected), plus hand-written
//! envelopes for the 13 request shapes and the four frame types, whose key sets are closed.
//! `zi rpc schema` prints [`rpc_schema`]; `docs/rpc-schema.json` is a checked-in copy.
//!
//! The root is `oneOf` [`#/$defs/Request`, `#/$defs/ServerFrame`]. Validators that want only one
//! side can use [`server_frame_schema`] or [`request_schema`].

use schemars::generate::SchemaSettings;
use schemars::{JsonSchema, SchemaGenerator};
use serde_json::{Map, Value, json};

use crate::ThinkingLevel;
use crate::errors::ProtocolErrorCode;
use crate::event::AgentSessionEvent;
use crate::frame::ResponseError;
use crate::message::{AgentMessage, AssistantMessage};
use crate::method_table::{METHODS, MethodSchema, ParamsRule, method_schemas};
use crate::request::{Delivery, EventMode, MAX_REQUEST_ID_BYTES, SettingsScope};
use crate::state::SessionState;

/// Schema-only stand-in for an `AssistantMessage` serialized with its `role: "assistant"` tag
/// (`message::assistant_with_role`).
#[derive(JsonSchema)]
#[serde(tag = "role", rename_all = "camelCase")]
pub enum AssistantWithRole {
    /// The assistant message.
    Assistant(AssistantMessage),
}

/// The `$id` of the schema.
pub const SCHEMA_ID: &str = "https://zi.invalid/schemas/rpc-v1.json";

fn def_ref(name: &str) -> Value {
    json!({ "$ref": format!("#/$defs/{name}") })
}

/// A string of at most `max` bytes. JSON Schema counts characters, so `maxLength` is a necessary
/// condition only; the byte bound is stated in the description.
fn bounded_string(max: usize, non_empty: bool) -> Value {
    let mut schema = json!({
        "type": "string",
        "maxLength": max,
        "description": format!("At most {max} UTF-8 bytes."),
    });
    if non_empty {
        schema["minLength"] = json!(1);
    }
    schema
}

fn object(properties: Value, required: &[&str]) -> Value {
    json!({
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": false,
    })
}

fn envelope(ty: &str, mut properties: Map<String, Value>, required: &[&str]) -> Value {
    let mut props = Map::new();
    props.insert("version".into(), json!({ "const": 1 }));
    props.insert(
        "sequence".into(),
        json!({ "type": "integer", "minimum": 1 }),
    );
    props.insert("type".into(), json!({ "const": ty }));
    props.append(&mut properties);
    let mut all = vec!["version", "sequence", "type"];
    all.extend_from_slice(required);
    json!({
        "type": "object",
        "title": ty,
        "properties": props,
        "required": all,
        "additionalProperties": false,
    })
}

fn props(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}

/// The complete schema document.
pub fn rpc_schema() -> Value {
    let mut generator: SchemaGenerator = SchemaSettings::draft2020_12().into_generator();
    // Every named type a hand-written envelope refers to; the method table adds its params and
    // result types.
    generator.subschema_for::<SessionState>();
    generator.subschema_for::<AgentSessionEvent>();
    generator.subschema_for::<AgentMessage>();
    generator.subschema_for::<ResponseError>();
    generator.subschema_for::<ProtocolErrorCode>();
    generator.subschema_for::<Delivery>();
    generator.subschema_for::<EventMode>();
    generator.subschema_for::<SettingsScope>();
    generator.subschema_for::<ThinkingLevel>();
    generator.subschema_for::<crate::approval::ApprovalRequest>();
    generator.subschema_for::<crate::approval::ResolvedDecision>();
    generator.subschema_for::<crate::approval::ResolutionSource>();
    let methods = method_schemas(&mut generator);
    let mut defs = generator.take_definitions(true);

    defs.insert("Request".into(), request_def(&methods));
    insert_response_defs(&mut defs, &methods);
    insert_frame_defs(&mut defs);

    let mut sorted: Vec<(String, Value)> = defs.into_iter().collect();
    sorted.sort_by(|a, b| a.0.cmp(&b.0));
    let defs: Map<String, Value> = sorted.into_iter().collect();
    json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SCHEMA_ID,
        "title": "Zi RPC v1",
        "description": "Every request a client may send and every frame a Zi RPC v1 server emits. Generated from zi's Rust wire types by `zi rpc schema`.",
        "oneOf": [def_ref("Request"), def_ref("ServerFrame")],
        "$defs": defs,
    })
}

/// `Request`: one request shape per method.
fn request_def(methods: &[MethodSchema]) -> Value {
    let mut requests = Vec::new();
    for method in methods {
        let mut properties = json!({
            "version": { "const": 1 },
            "id": bounded_string(MAX_REQUEST_ID_BYTES, true),
            "method": { "const": method.name },
        });
        let mut required = vec!["version", "id", "method"];
        if let Some((params, rule)) = &method.params {
            properties["params"] = params.clone().to_value();
            if *rule == ParamsRule::Required {
                required.push("params");
            }
        }
        let mut schema = object(properties, &required);
        schema["title"] = json!(method.name);
        requests.push(schema);
    }
    json!({
        "description": "A client request record (one JSON object per line on stdin).",
        "oneOf": requests,
    })
}

/// The responses: one success shape per method, and one failure shape.
fn insert_response_defs(defs: &mut Map<String, Value>, methods: &[MethodSchema]) {
    let mut successes = Vec::new();
    for method in methods {
        let mut schema = envelope(
            "response",
            props(json!({
                "id": { "type": "string" },
                "method": { "const": method.name },
                "ok": { "const": true },
                "result": method.result.clone().to_value(),
            })),
            &["id", "method", "ok", "result"],
        );
        schema["title"] = json!(format!("response to {}", method.name));
        successes.push(schema);
    }
    let mut failure = envelope(
        "response",
        props(json!({
            "id": { "type": "string" },
            "method": { "enum": METHODS },
            "ok": { "const": false },
            "error": def_ref("ResponseError"),
        })),
        &["id", "method", "ok", "error"],
    );
    failure["title"] = json!("failure response");
    defs.insert("SuccessResponseFrame".into(), json!({ "oneOf": successes }));
    defs.insert("FailureResponseFrame".into(), failure);
}

/// The other server frames and `ServerFrame`, the union of all of them.
fn insert_frame_defs(defs: &mut Map<String, Value>) {
    defs.insert(
        "ReadyFrame".into(),
        envelope(
            "ready",
            props(json!({ "state": def_ref("SessionState") })),
            &["state"],
        ),
    );
    defs.insert(
        "ProtocolErrorFrame".into(),
        envelope(
            "protocol_error",
            props(json!({
                "code": def_ref("ProtocolErrorCode"),
                "message": { "type": "string" },
                "id": bounded_string(MAX_REQUEST_ID_BYTES, true),
            })),
            &["code", "message"],
        ),
    );
    defs.insert(
        "SessionEventFrame".into(),
        envelope(
            "session_event",
            props(json!({ "event": def_ref("AgentSessionEvent") })),
            &["event"],
        ),
    );
    // The approval frames reach only connections that called `connection.set_approvals`.
    defs.insert(
        "ApprovalRequestFrame".into(),
        envelope(
            "approval_request",
            props(json!({ "approval": def_ref("ApprovalRequest") })),
            &["approval"],
        ),
    );
    defs.insert(
        "ApprovalResolvedFrame".into(),
        envelope(
            "approval_resolved",
            props(json!({
                "approvalId": { "type": "string" },
                "toolCallId": { "type": "string" },
                "decision": def_ref("ResolvedDecision"),
                "source": def_ref("ResolutionSource"),
                "message": { "type": "string" },
            })),
            &["approvalId", "toolCallId", "decision", "source"],
        ),
    );
    defs.insert(
        "ServerFrame".into(),
        json!({
            "description": "A server frame (one JSON object per line on stdout).",
            "oneOf": [
                def_ref("ReadyFrame"),
                def_ref("SuccessResponseFrame"),
                def_ref("FailureResponseFrame"),
                def_ref("ProtocolErrorFrame"),
                def_ref("SessionEventFrame"),
                def_ref("ApprovalRequestFrame"),
                def_ref("ApprovalResolvedFrame"),
            ],
        }),
    );
}

/// The schema document with its root narrowed to `#/$defs/<name>`.
fn narrowed(name: &str) -> Value {
    let mut schema = rpc_schema();
    schema["oneOf"] = json!([def_ref(name)]);
    schema
}

/// The schema narrowed to server frames.
pub fn server_frame_schema() -> Value {
    narrowed("ServerFrame")
}

/// The schema narrowed to client requests.
pub fn request_schema() -> Value {
    narrowed("Request")
}

/// The schema as pretty JSON followed by a newline (the form `zi rpc schema` prints).
pub fn rpc_schema_text() -> String {
    let mut text = serde_json::to_string_pretty(&rpc_schema()).unwrap_or_default();
    text.push('\n');
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_method_has_a_request_and_a_result() {
        let schema = rpc_schema();
        assert_eq!(
            schema["$defs"]["Request"]["oneOf"].as_array().map(Vec::len),
            Some(crate::method_table::METHODS.len())
        );
        assert_eq!(
            schema["$defs"]["SuccessResponseFrame"]["oneOf"]
                .as_array()
                .map(Vec::len),
            Some(crate::method_table::METHODS.len())
        );
        for name in [
            "SessionState",
            "AgentSessionEvent",
            "AgentMessage",
            "ResponseError",
        ] {
            assert!(schema["$defs"][name].is_object(), "{name} missing");
        }
    }
}
