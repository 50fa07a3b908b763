//! `zi rpc schema`: the printed JSON Schema equals the checked-in `docs/rpc-schema.json`, compiles
//! as draft 2020-12, and accepts the reference examples of rpc-reference §2 and §4.
//!
//! After changing a wire type, refresh the copy with
//! `ZI_UPDATE_SCHEMA=1 cargo test -p zi-cli --test rpc_schema`.

// A test fails by panicking with its reason.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::process::Command;

use serde_json::{Value, json};

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
        "docs/rpc-schema.json is out of date; run ZI_UPDATE_SCHEMA=1 cargo test -p zi-cli --test rpc_schema"
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
