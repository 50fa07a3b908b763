//! `zi rpc schema`: the printed JSON Schema equals the checked-in `docs/rpc-schema.json`, compiles
//! as draft 2020-12, and accepts example frames and requests like those of
//! docs/rpc.md#methods-by-example.
//!
//! After changing a wire type, refresh the copy with
//! `ZI_UPDATE_SCHEMA=1 cargo test -p zi-cli --test all rpc_schema`. A change of the schema's
//! structure must keep its accepted language (`schema_language_is_unchanged`); a deliberate
//! change of the language also refreshes `tests/fixtures/rpc-schema-language.json` with
//! `ZI_UPDATE_SCHEMA_LANGUAGE=1`.

use std::path::PathBuf;
use std::process::Command;

use serde_json::{Map, Value, json};
use zi_protocol::decode_cases::DECODE_CASES;

fn schema_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/rpc-schema.json")
}

fn printed_schema() -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_zi"))
        .args(["rpc", "schema"])
        .output()
        .unwrap_or_else(|e| panic!("run zi rpc schema: {e}"));
    assert!(out.status.success(), "zi rpc schema failed: {out:?}");
    assert!(
        out.stderr.is_empty(),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap_or_else(|e| panic!("schema is not UTF-8: {e}"))
}

#[test]
fn checked_in_schema_matches_zi_rpc_schema() {
    let printed = printed_schema();
    let path = schema_path();
    if std::env::var_os("ZI_UPDATE_SCHEMA").is_some() {
        std::fs::write(&path, &printed).unwrap_or_else(|e| panic!("write {path:?}: {e}"));
    }
    let stored = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        stored == printed,
        "docs/rpc-schema.json is out of date; run ZI_UPDATE_SCHEMA=1 cargo test -p zi-cli --test all rpc_schema"
    );
}

#[test]
fn extra_arguments_are_rejected() {
    let out = Command::new(env!("CARGO_BIN_EXE_zi"))
        .args(["rpc", "schema", "extra"])
        .output()
        .unwrap_or_else(|e| panic!("run zi: {e}"));
    assert_eq!(out.status.code(), Some(1));
}

fn validator(root: &str) -> jsonschema::Validator {
    let mut schema: Value =
        serde_json::from_str(&printed_schema()).unwrap_or_else(|e| panic!("schema JSON: {e}"));
    assert_eq!(
        schema["$schema"],
        "https://json-schema.org/draft/2020-12/schema"
    );
    schema["oneOf"] = json!([{ "$ref": format!("#/$defs/{root}") }]);
    jsonschema::validator_for(&schema).unwrap_or_else(|e| panic!("schema does not compile: {e}"))
}

#[test]
fn reference_frames_validate() {
    let frames = validator("ServerFrame");
    let good = [
        r#"{"version":1,"sequence":1,"type":"ready","state":{"sessionId":"s","activity":{"type":"idle"},"model":{"type":"unselected"},"thinkingLevel":"off","supportedThinkingLevels":["off"],"steeringMode":"one-at-a-time","followUpMode":"one-at-a-time","queuedInputs":{"steering":[],"followUp":[]},"workPlan":{"revision":0,"steps":[]},"messageCount":0,"compaction":{"type":"idle"},"retry":{"type":"idle"},"contextUsage":{"type":"unavailable","reason":"no_model"}}}"#,
        r#"{"version":1,"sequence":8,"type":"response","id":"req-2","method":"model.select","ok":false,"error":{"code":"not_found","message":"Model not found: openai/gpt-x"}}"#,
        r#"{"version":1,"sequence":3,"type":"protocol_error","code":"invalid_request","message":"RPC request contains unknown fields","id":"req-3"}"#,
        r#"{"version":1,"sequence":12,"type":"session_event","event":{"type":"agent_start"}}"#,
        r#"{"version":1,"sequence":31,"type":"response","id":"w1","method":"session.await_idle","ok":true,"result":{}}"#,
        r#"{"version":1,"sequence":32,"type":"response","id":"w2","method":"session.await_idle","ok":true,"result":{"completionRevision":2,"messageCount":4,"completion":{"text":"second completion","stopReason":"stop","originalBytes":17,"omittedBytes":0}}}"#,
        r#"{"version":1,"sequence":6,"type":"response","id":"c2","method":"command.invoke","ok":true,"result":{"message":"Counter: 1"}}"#,
        r#"{"version":1,"sequence":7,"type":"response","id":"ts","method":"thinking.select","ok":true,"result":{"scope":"global","requested":"high","effective":"high"}}"#,
        r#"{"version":1,"sequence":9,"type":"response","id":"m1","method":"session.get_messages","ok":true,"result":{"start":0,"total":2,"nextStart":null,"messages":[{"role":"user","content":[{"type":"text","text":"hello"}],"timestamp":1760000000000},{"role":"assistant","content":[{"type":"text","text":"done"}],"api":"anthropic-messages","provider":"anthropic","model":"claude-sonnet-4-5","usage":{"input":10,"output":2,"cacheRead":0,"cacheWrite":0,"totalTokens":12,"cost":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":0}},"stopReason":"stop","timestamp":1760000000500}]}}"#,
    ];
    for text in good {
        let frame: Value = serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}: {text}"));
        let errors: Vec<String> = frames.iter_errors(&frame).map(|e| e.to_string()).collect();
        assert!(errors.is_empty(), "{text}: {errors:?}");
    }
    let bad = [
        r#"{"version":2,"sequence":1,"type":"ready","state":{}}"#,
        r#"{"version":1,"sequence":1,"type":"peer_request"}"#,
        r#"{"version":1,"sequence":2,"type":"response","id":"a","method":"session.get_state","ok":true,"result":{"mode":"all"}}"#,
        r#"{"version":1,"sequence":3,"type":"protocol_error","code":"nope","message":"m"}"#,
        r#"{"version":1,"sequence":4,"type":"session_event","event":{"type":"no_such_event"}}"#,
    ];
    for text in bad {
        let frame: Value = serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}: {text}"));
        assert!(!frames.is_valid(&frame), "accepted {text}");
    }
}

#[test]
fn reference_requests_validate() {
    let requests = validator("Request");
    let good = [
        json!({"version":1,"id":"s1","method":"session.get_state"}),
        json!({"version":1,"id":"m1","method":"session.get_messages","params":{"start":0,"limit":100}}),
        json!({"version":1,"id":"p1","method":"session.prompt","params":{"delivery":"direct","text":"start","completionId":"cycle-1"}}),
        json!({"version":1,"id":"w2","method":"session.await_idle","params":{"completionId":"cycle-1"}}),
        json!({"version":1,"id":"c2","method":"command.invoke","params":{"name":"counter","arguments":"increment"}}),
        json!({"version":1,"id":"ts","method":"thinking.select","params":{"level":"high"}}),
    ];
    for request in good {
        assert!(requests.is_valid(&request), "rejected {request}");
    }
    let bad = [
        json!({"version":1,"id":"s1","method":"session.get_state","params":{}}),
        json!({"version":1,"id":"","method":"session.get_state"}),
        json!({"version":1,"id":"p","method":"session.prompt","params":{"delivery":"later","text":""}}),
        json!({"version":1,"id":"c","method":"command.invoke","params":{"name":"Invalid_Command","arguments":""}}),
        json!({"version":1,"id":"m","method":"session.get_messages","params":{"limit":101}}),
        json!({"version":1,"id":"u","method":"unknown"}),
    ];
    for request in bad {
        assert!(!requests.is_valid(&request), "accepted {request}");
    }
}

/// The accepted language of the schema, recorded at the last deliberate wire change. A refactor
/// of the schema's structure (named definitions, descriptions, reference layout) must leave
/// [`language`] of the printed schema equal to that of this file; a deliberate change of the
/// language refreshes it with `ZI_UPDATE_SCHEMA_LANGUAGE=1 cargo test -p zi-cli --test all rpc_schema`.
fn language_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/rpc-schema-language.json")
}

/// Keywords that annotate without constraining (JSON Schema 2020-12 §7.7, and `format`, which
/// is an annotation unless a validator opts in).
const ANNOTATIONS: [&str; 8] = [
    "$schema",
    "$id",
    "title",
    "description",
    "default",
    "examples",
    "format",
    "$comment",
];

/// The schema reduced to what decides acceptance: annotations dropped, empty
/// `properties`/`required` dropped, literals in one canonical form, and the keyword values whose
/// order does not matter (`required`, `enum`, `type`, `anyOf`, `oneOf`, `allOf`) sorted. A
/// `$ref` to a definition named in `shared` stays a reference (that definition is normalised and
/// compared on its own); any other `$ref` is inlined. Two schemas whose reductions over their
/// shared definition names are equal accept exactly the same documents.
fn language(schema: &Value, shared: &[String]) -> Map<String, Value> {
    let defs = schema["$defs"].as_object().cloned().unwrap_or_default();
    let mut root = schema.clone();
    if let Value::Object(map) = &mut root {
        map.remove("$defs");
    }
    let mut out = Map::new();
    out.insert(
        "(root)".into(),
        normalise(&root, &defs, shared, &mut Vec::new()),
    );
    for name in shared {
        let mut stack = vec![name.clone()];
        out.insert(
            name.clone(),
            normalise(&defs[name.as_str()], &defs, shared, &mut stack),
        );
    }
    out
}

fn normalise(
    node: &Value,
    defs: &Map<String, Value>,
    shared: &[String],
    stack: &mut Vec<String>,
) -> Value {
    match node {
        Value::Array(items) => Value::Array(
            items
                .iter()
                .map(|i| normalise(i, defs, shared, stack))
                .collect(),
        ),
        Value::Object(map) => {
            let mut out = Map::new();
            let mut inlined = None;
            for (key, value) in map {
                if ANNOTATIONS.contains(&key.as_str()) {
                    continue;
                }
                if key == "$ref" {
                    let name = value
                        .as_str()
                        .and_then(|r| r.strip_prefix("#/$defs/"))
                        .unwrap_or_else(|| panic!("unexpected $ref {value}"));
                    if shared.iter().any(|s| s == name) || stack.iter().any(|s| s == name) {
                        // A shared definition is compared on its own; a recursive one stays a
                        // reference too.
                        out.insert(key.clone(), value.clone());
                        continue;
                    }
                    stack.push(name.to_string());
                    let target = defs
                        .get(name)
                        .unwrap_or_else(|| panic!("missing $defs/{name}"));
                    inlined = Some(normalise(target, defs, shared, stack));
                    stack.pop();
                    continue;
                }
                let mut value = match key.as_str() {
                    // Keyword values that are maps of schemas or schemas themselves.
                    "properties" | "$defs" | "patternProperties" => match value {
                        Value::Object(props) => Value::Object(
                            props
                                .iter()
                                .map(|(k, v)| (k.clone(), normalise(v, defs, shared, stack)))
                                .collect(),
                        ),
                        other => other.clone(),
                    },
                    // Literal values: kept as they are.
                    "const" | "enum" => value.clone(),
                    _ => normalise(value, defs, shared, stack),
                };
                if matches!(
                    key.as_str(),
                    "required" | "enum" | "type" | "anyOf" | "oneOf" | "allOf"
                ) && let Value::Array(items) = &mut value
                {
                    items.sort_by_key(|item| item.to_string());
                }
                let empty = match &value {
                    Value::Object(m) => m.is_empty() && key == "properties",
                    Value::Array(a) => a.is_empty() && key == "required",
                    _ => false,
                };
                if !empty {
                    out.insert(key.clone(), value);
                }
            }
            canonical_literals(&mut out);
            match inlined {
                // `{}` accepts everything, like `true`.
                None if out.is_empty() => Value::Bool(true),
                None => Value::Object(out),
                Some(target) if out.is_empty() => target,
                // `$ref` beside other keywords: both apply.
                Some(target) => {
                    let mut both = vec![target, Value::Object(out)];
                    both.sort_by_key(|item| item.to_string());
                    json!({ "allOf": both })
                }
            }
        }
        other => other.clone(),
    }
}

#[test]
fn schema_language_is_unchanged() {
    let printed: Value =
        serde_json::from_str(&printed_schema()).unwrap_or_else(|e| panic!("schema JSON: {e}"));
    let path = language_path();
    if std::env::var_os("ZI_UPDATE_SCHEMA_LANGUAGE").is_some() {
        let text = serde_json::to_string_pretty(&printed).unwrap_or_default() + "\n";
        std::fs::write(&path, text).unwrap_or_else(|e| panic!("write {path:?}: {e}"));
    }
    let recorded: Value = serde_json::from_str(
        &std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {path:?}: {e}")),
    )
    .unwrap_or_else(|e| panic!("{path:?}: {e}"));
    let names = |schema: &Value| -> Vec<String> {
        schema["$defs"]
            .as_object()
            .map(|defs| defs.keys().cloned().collect())
            .unwrap_or_default()
    };
    let recorded_names = names(&recorded);
    let shared: Vec<String> = names(&printed)
        .into_iter()
        .filter(|name| recorded_names.contains(name))
        .collect();
    let (now, then) = (
        Value::Object(language(&printed, &shared)),
        Value::Object(language(&recorded, &shared)),
    );
    if let Some(difference) = first_difference(&then, &now, "") {
        panic!("the schema's accepted language changed at {difference}");
    }
}

/// `const` as a one-value `enum`; a `type` implied by every `enum` value dropped; and a
/// `oneOf`/`anyOf` of nothing but `enum`s merged into one `enum` (schemars writes a documented
/// string enum as a `oneOf` of `const`s, an undocumented one as an `enum`).
fn canonical_literals(node: &mut Map<String, Value>) {
    if let Some(value) = node.remove("const") {
        node.insert("enum".into(), json!([value]));
    }
    for key in ["oneOf", "anyOf"] {
        let Some(Value::Array(items)) = node.get(key) else {
            continue;
        };
        let literals: Option<Vec<Value>> = items
            .iter()
            .map(|item| match item.as_object() {
                Some(map) if map.len() == 1 => map.get("enum").and_then(Value::as_array).cloned(),
                _ => None,
            })
            .collect::<Option<Vec<Vec<Value>>>>()
            .map(|all| all.concat());
        if let Some(values) = literals {
            node.remove(key);
            node.insert("enum".into(), Value::Array(values));
        }
    }
    let values = match node.get_mut("enum") {
        Some(Value::Array(values)) => {
            values.sort_by_key(|value| value.to_string());
            values.dedup();
            values.clone()
        }
        _ => return,
    };
    let implied = match node.get("type") {
        Some(Value::String(ty)) => values.iter().all(|value| match ty.as_str() {
            "string" => value.is_string(),
            "integer" => value.is_i64() || value.is_u64(),
            "number" => value.is_number(),
            "boolean" => value.is_boolean(),
            "null" => value.is_null(),
            "object" => value.is_object(),
            "array" => value.is_array(),
            _ => false,
        }),
        _ => false,
    };
    if implied {
        node.remove("type");
    }
}

/// The JSON pointer of the first place where `a` and `b` differ, with both values.
fn first_difference(a: &Value, b: &Value, at: &str) -> Option<String> {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            for key in x.keys().chain(y.keys()) {
                let (left, right) = (x.get(key), y.get(key));
                let here = format!("{at}/{key}");
                match (left, right) {
                    (Some(l), Some(r)) => {
                        if let Some(d) = first_difference(l, r, &here) {
                            return Some(d);
                        }
                    }
                    _ => return Some(format!("{here}: recorded {left:?}, now {right:?}")),
                }
            }
            None
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => x
            .iter()
            .zip(y)
            .enumerate()
            .find_map(|(i, (l, r))| first_difference(l, r, &format!("{at}/{i}"))),
        _ if a == b => None,
        _ => Some(format!("{at}: recorded {a}, now {b}")),
    }
}

#[test]
fn the_request_schema_rejects_every_decode_case() {
    let requests = validator("Request");
    for case in DECODE_CASES
        .iter()
        .filter(|case| case.rejection().is_some())
    {
        // Records that are not JSON cannot be validated; every other case is outside the schema.
        if let Ok(record) = serde_json::from_str::<Value>(case.line) {
            assert!(
                !requests.is_valid(&record),
                "decode.{} is accepted",
                case.name
            );
        }
    }
}
