//! `schema/acp-v1.schema.json` is the ACP v1 JSON Schema generated from the pinned
//! `agent-client-protocol-schema` crate, exactly as upstream's schema generator builds
//! `schema/v1/schema.json` (draft 2020-12, variant titles, `$ref` siblings removed, boolean
//! schemas replaced). The crate does not ship the file, so zi generates it; every message zi
//! sends in the black-box tests is validated against it. Regenerate after changing the pinned
//! version with `ZI_UPDATE_SCHEMA=1 cargo test -p zi-acp --test all schema`.

use agent_client_protocol_schema::v1::{
    AgentNotification, AgentRequest, AgentResponse, ClientNotification, ClientRequest,
    ClientResponse, JsonRpcMessage, Notification, ProtocolLevelNotification, Request, Response,
};
use schemars::JsonSchema;
use schemars::generate::SchemaSettings;
use schemars::transform::{RemoveRefSiblings, ReplaceBoolSchemas};
use serde::{Deserialize, Serialize};

// The root of upstream's generator (`schema-generator/src/main.rs`, `root_schema_value`).
#[derive(Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
#[schemars(inline)]
#[allow(dead_code, clippy::large_enum_variant)]
enum AgentOutgoingMessage {
    Request(Request<AgentRequest>),
    Response(Response<AgentResponse>),
    Notification(Notification<AgentNotification>),
}

#[derive(Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
#[schemars(inline)]
#[allow(dead_code, clippy::large_enum_variant)]
enum ClientOutgoingMessage {
    Request(Request<ClientRequest>),
    Response(Response<ClientResponse>),
    Notification(Notification<ClientNotification>),
}

#[derive(JsonSchema)]
#[serde(untagged)]
#[schemars(title = "Agent Client Protocol")]
#[allow(dead_code, clippy::large_enum_variant)]
enum AcpTypes {
    Agent(JsonRpcMessage<AgentOutgoingMessage>),
    Client(JsonRpcMessage<ClientOutgoingMessage>),
    ProtocolLevel(JsonRpcMessage<Notification<ProtocolLevelNotification>>),
}

fn generate() -> serde_json::Value {
    let mut settings = SchemaSettings::draft2020_12();
    settings.untagged_enum_variant_titles = true;
    let mut bool_schemas = ReplaceBoolSchemas::default();
    bool_schemas.skip_additional_properties = true;
    settings = settings
        .with_transform(RemoveRefSiblings::default())
        .with_transform(bool_schemas);
    let schema = settings.into_generator().into_root_schema_for::<AcpTypes>();
    serde_json::to_value(&schema).unwrap()
}

fn path() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("schema/acp-v1.schema.json")
}

#[test]
fn the_checked_in_schema_is_generated_from_the_pinned_crate() {
    let generated = generate();
    if std::env::var_os("ZI_UPDATE_SCHEMA").is_some() {
        let text = serde_json::to_string_pretty(&generated).unwrap() + "\n";
        std::fs::write(path(), text).unwrap();
    }
    let checked_in: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path()).unwrap()).unwrap();
    assert!(
        checked_in == generated,
        "schema/acp-v1.schema.json differs from the pinned crate's schema; regenerate it with \
         ZI_UPDATE_SCHEMA=1 cargo test -p zi-acp --test all schema"
    );
    // 203 definitions in crate 1.20.0's stable schema; the validator compiles it.
    assert_eq!(checked_in["$defs"].as_object().unwrap().len(), 203);
    jsonschema::draft202012::new(&checked_in).expect("the schema compiles");
}
