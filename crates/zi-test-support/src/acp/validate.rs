//! Every message zi sends over ACP, checked against the ACP v1 JSON Schema generated from the
//! pinned `agent-client-protocol-schema` crate (`crates/zi-acp/schema/acp-v1.schema.json`).
//!
//! The root schema alone is weak: an agent notification's `params` and a response's `result`
//! may be extension objects, which accept anything. So each message is checked twice: the
//! envelope against the root's `Agent` branch, then `params` against the definition whose
//! `x-method` is the message's method (`*Request` or `*Notification`), a response's `result`
//! against the `*Response` of the method its id was sent with, and an `error` against `Error`.
//! `session/set_model` (legacy, in no schema) is not checked beyond its envelope.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use serde_json::{Value, json};

/// The checked-in schema.
pub fn schema_path() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../zi-acp/schema/acp-v1.schema.json")
}

struct Schema {
    document: Value,
    envelope: jsonschema::Validator,
    /// `(method, kind)` → definition name; kind is request, notification or response.
    by_method: HashMap<(String, &'static str), String>,
    /// Compiled definitions, on first use.
    defs: Mutex<HashMap<String, &'static jsonschema::Validator>>,
}

fn schema() -> &'static Schema {
    static SCHEMA: OnceLock<Schema> = OnceLock::new();
    SCHEMA.get_or_init(|| {
        let text = std::fs::read_to_string(schema_path())
            .unwrap_or_else(|e| panic!("read {}: {e}", schema_path().display()));
        let document: Value = serde_json::from_str(&text).expect("the ACP schema is JSON");
        let agent = document["anyOf"]
            .as_array()
            .and_then(|branches| branches.iter().find(|b| b["title"] == "Agent"))
            .cloned()
            .expect("the schema's root has an Agent branch");
        let mut root = document.clone();
        root["anyOf"] = json!([agent]);
        let envelope = jsonschema::draft202012::new(&root).expect("the ACP schema compiles");
        let mut by_method = HashMap::new();
        for (name, definition) in document["$defs"].as_object().expect("$defs") {
            let Some(method) = definition["x-method"].as_str() else {
                continue;
            };
            let kind = if name.ends_with("Response") {
                "response"
            } else if name.ends_with("Notification") {
                "notification"
            } else {
                "request"
            };
            by_method.insert((method.to_string(), kind), name.clone());
        }
        Schema {
            document,
            envelope,
            by_method,
            defs: Mutex::new(HashMap::new()),
        }
    })
}

impl Schema {
    fn definition(&self, name: &str) -> &'static jsonschema::Validator {
        let mut defs = self.defs.lock().unwrap_or_else(|p| p.into_inner());
        defs.entry(name.to_string()).or_insert_with(|| {
            let doc = json!({
                "$schema": self.document["$schema"],
                "$defs": self.document["$defs"],
                "$ref": format!("#/$defs/{name}"),
            });
            let validator = jsonschema::draft202012::new(&doc)
                .unwrap_or_else(|e| panic!("the ACP definition {name} does not compile: {e}"));
            Box::leak(Box::new(validator))
        })
    }
}

fn problems(validator: &jsonschema::Validator, value: &Value, what: &str) -> Vec<String> {
    validator
        .iter_errors(value)
        .take(3)
        .map(|e| format!("{what}: {e} at {}", e.instance_path))
        .collect()
}

/// Checks one conversation: what the client sent (to know the method of each response zi
/// gives) and what zi sent.
#[derive(Default)]
pub struct Validator {
    /// Requests the client sent and zi has not answered: id → method.
    pending: HashMap<String, String>,
}

impl Validator {
    /// Notes a message the client sent.
    pub fn client_sent(&mut self, message: &Value) {
        if let (Some(method), Some(id)) = (message["method"].as_str(), message.get("id")) {
            self.pending.insert(id.to_string(), method.to_string());
        }
    }

    /// Why a message zi sent is invalid (empty when it is valid).
    pub fn agent_sent(&mut self, message: &Value) -> Vec<String> {
        let schema = schema();
        let mut found = problems(&schema.envelope, message, "envelope");
        if let Some(method) = message["method"].as_str() {
            let kind = if message.get("id").is_some() {
                "request"
            } else {
                "notification"
            };
            let name = schema
                .by_method
                .get(&(method.to_string(), kind))
                .cloned()
                .or_else(|| {
                    (method == "$/cancel_request").then(|| "CancelRequestNotification".into())
                });
            match name {
                Some(name) => found.extend(problems(
                    schema.definition(&name),
                    &message["params"],
                    &name,
                )),
                None => found.push(format!("no schema for the {kind} {method}")),
            }
            return found;
        }
        let method = message
            .get("id")
            .and_then(|id| self.pending.remove(&id.to_string()));
        if let Some(error) = message.get("error") {
            found.extend(problems(schema.definition("Error"), error, "Error"));
        } else if let Some(method) = method
            && let Some(name) = schema.by_method.get(&(method.clone(), "response"))
        {
            found.extend(problems(schema.definition(name), &message["result"], name));
        }
        found
    }
}

/// Validates a tap log (`{"dir": "in"|"out", "msg": …}` per line, `out` = zi's) and returns
/// every problem with the message it is about; also the number of messages zi sent.
pub fn check_tap_log(text: &str) -> (usize, Vec<String>) {
    let mut validator = Validator::default();
    let mut sent = 0;
    let mut found = Vec::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let record: Value = match serde_json::from_str(line) {
            Ok(record) => record,
            Err(error) => {
                found.push(format!("tap line is not JSON ({error}): {line}"));
                continue;
            }
        };
        let message = &record["msg"];
        if record["dir"] == "out" {
            sent += 1;
            for problem in validator.agent_sent(message) {
                found.push(format!(
                    "{problem}\n    in {}",
                    crate::preview::preview_value(message)
                ));
            }
        } else {
            validator.client_sent(message);
        }
    }
    (sent, found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_validator_knows_valid_and_invalid_agent_messages() {
        let mut validator = Validator::default();
        validator.client_sent(
            &json!({"jsonrpc": "2.0", "id": 1, "method": "session/prompt",
            "params": {"sessionId": "s", "prompt": []}}),
        );
        assert!(
            validator
                .agent_sent(
                    &json!({"jsonrpc": "2.0", "id": 1, "result": {"stopReason": "end_turn"}})
                )
                .is_empty()
        );
        validator.client_sent(
            &json!({"jsonrpc": "2.0", "id": 2, "method": "session/prompt",
            "params": {"sessionId": "s", "prompt": []}}),
        );
        assert!(
            !validator
                .agent_sent(&json!({"jsonrpc": "2.0", "id": 2, "result": {"stopReason": "error"}}))
                .is_empty(),
            "no such stop reason"
        );
        // The docs' `modeId` spelling is not the crate's `currentModeId`.
        let bad = json!({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s",
            "update": {"sessionUpdate": "current_mode_update", "modeId": "ask"}}});
        assert!(!validator.agent_sent(&bad).is_empty());
        let good = json!({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s",
            "update": {"sessionUpdate": "current_mode_update", "currentModeId": "ask"}}});
        assert_eq!(validator.agent_sent(&good), Vec::<String>::new());
    }
}
