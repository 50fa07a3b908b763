//! Checks of server frames against the RPC JSON Schema (the same document as the checked-in
//! `docs/rpc-schema.json`, which a test keeps in sync).

use serde_json::Value;

/// The validator of server frames, built once from `zi_protocol::schema` (the same document as
/// the checked-in `docs/rpc-schema.json`, which a test keeps in sync).
fn frame_validator() -> &'static jsonschema::Validator {
    static VALIDATOR: std::sync::OnceLock<jsonschema::Validator> = std::sync::OnceLock::new();
    VALIDATOR.get_or_init(|| {
        jsonschema::validator_for(&zi_protocol::schema::server_frame_schema())
            .unwrap_or_else(|e| panic!("the RPC frame schema does not compile: {e}"))
    })
}

/// Why `frame` does not match the server-frame schema, if it does not.
pub fn schema_violation(frame: &Value) -> Option<String> {
    let validator = frame_validator();
    if validator.is_valid(frame) {
        return None;
    }
    let errors: Vec<String> = validator
        .iter_errors(frame)
        .take(3)
        .map(|e| format!("{e} at {}", e.instance_path))
        .collect();
    Some(errors.join("; "))
}
