//! Params of each method (docs/rpc.md#params-of-each-method): key sets, pages, and each
//! method's fields at and past their bounds.

use super::*;

// --- key sets (docs/rpc.md#generic-rules) ---

#[test]
fn parameterless_methods_reject_any_params_key() {
    for method in [
        "session.get_state",
        "session.interrupt",
        "command.list",
        "model.list",
        "thinking.list",
        "session.get_stats",
    ] {
        for params in [json!({}), json!(null), json!([])] {
            rejected(method, Some(params), errors::UNKNOWN_FIELDS);
        }
    }
}

#[test]
fn unknown_top_level_keys_are_reported_before_missing_params() {
    for method in METHODS {
        let mut value = envelope(method, None);
        value["Version"] = json!(1);
        assert_eq!(
            failure(value),
            ProtocolError::invalid_request(errors::UNKNOWN_FIELDS, Some(ID.to_owned())),
            "{method}"
        );
    }
    for method in [
        "session.prompt",
        "connection.set_events",
        "command.invoke",
        "model.select",
        "thinking.select",
    ] {
        rejected(method, None, errors::MISSING_FIELDS);
        let mut value = envelope(method, None);
        value["extra"] = json!(null);
        assert_eq!(failure(value).message, errors::UNKNOWN_FIELDS);
    }
}

#[test]
fn params_must_be_objects() {
    for method in METHODS {
        let Some(rule) = Method::parse(method).map(Method::params_rule) else {
            panic!("{method} is not parsed");
        };
        if rule == ParamsRule::Forbidden {
            continue;
        }
        for params in [json!(null), json!([]), json!("x"), json!(0), json!(false)] {
            rejected(
                method,
                Some(params),
                &format!("{method} params must be an object"),
            );
        }
    }
    rejected(
        "session.prompt",
        Some(json!(null)),
        "session.prompt params must be an object",
    );
    rejected(
        "session.get_outcomes",
        Some(json!([])),
        "session.get_outcomes params must be an object",
    );
}

#[test]
fn unknown_params_keys_are_reported_before_missing_ones() {
    rejected(
        "command.invoke",
        Some(json!({"nam": "a"})),
        errors::UNKNOWN_FIELDS,
    );
    rejected(
        "model.select",
        Some(json!({"provider": "p", "model": "m"})),
        errors::UNKNOWN_FIELDS,
    );
    rejected(
        "session.await_idle",
        Some(json!({"completionID": "c"})),
        errors::UNKNOWN_FIELDS,
    );
    rejected(
        "session.get_messages",
        Some(json!({"start": 0, "count": 1})),
        errors::UNKNOWN_FIELDS,
    );
    rejected(
        "session.prompt",
        Some(json!({"delivery": "direct", "text": "", "streamingBehavior": "steer"})),
        errors::UNKNOWN_FIELDS,
    );
    rejected(
        "thinking.select",
        Some(json!({"level": "high", "persist": true})),
        errors::UNKNOWN_FIELDS,
    );
    // Unknown keys win over invalid values too.
    rejected(
        "connection.set_events",
        Some(json!({"mode": "bad", "x": 1})),
        errors::UNKNOWN_FIELDS,
    );
}

// --- pages ---

#[test]
fn pages_apply_defaults_for_absent_and_null() {
    for method in ["session.get_messages", "session.get_outcomes"] {
        for (params, start, limit) in [
            (json!({}), 0, 100),
            (json!({"start": null, "limit": null}), 0, 100),
            (json!({"limit": 1}), 0, 1),
            (json!({"start": 7, "limit": null}), 7, 100),
            (json!({"start": 1.0, "limit": 100.0}), 1, 100),
            (
                json!({"start": 9007199254740991u64}),
                9_007_199_254_740_991,
                100,
            ),
        ] {
            let expected = if method == "session.get_messages" {
                Normal::GetMessages { start, limit }
            } else {
                Normal::GetOutcomes { start, limit }
            };
            assert_eq!(accepted(method, Some(params)), expected);
        }
    }
    let line = r#"{"version":1,"id":"a","method":"session.get_messages","params":{"start":-0,"limit":1e2}}"#;
    assert_eq!(
        decode_record(line).map(|d| normal(d.request)),
        Ok(Normal::GetMessages {
            start: 0,
            limit: 100
        })
    );
}

#[test]
fn page_bounds() {
    for (method, start_message, limit_message) in [
        (
            "session.get_messages",
            errors::MESSAGE_START,
            errors::MESSAGE_LIMIT,
        ),
        (
            "session.get_outcomes",
            errors::OUTCOME_START,
            errors::OUTCOME_LIMIT,
        ),
        (
            "session.get_entries",
            errors::ENTRY_START,
            errors::ENTRY_LIMIT,
        ),
        (
            "session.list",
            errors::SESSION_LIST_START,
            errors::SESSION_LIST_LIMIT,
        ),
    ] {
        for start in [
            json!(-1),
            json!(0.5),
            json!(-0.5),
            json!("1"),
            json!(true),
            json!([0]),
            json!({}),
            json!(9007199254740992u64),
            json!(1e300),
            json!(i64::MIN),
        ] {
            rejected(method, Some(json!({"start": start})), start_message);
        }
        for limit in [
            json!(0),
            json!(101),
            json!(100.5),
            json!(-1),
            json!("10"),
            json!(false),
            json!(9007199254740992u64),
        ] {
            rejected(method, Some(json!({"limit": limit})), limit_message);
        }
        // The start is checked first.
        rejected(
            method,
            Some(json!({"start": -1, "limit": 0})),
            start_message,
        );
    }
}

// --- session.prompt ---

#[test]
fn prompt_deliveries() {
    for delivery in Delivery::ALL {
        assert_eq!(
            accepted(
                "session.prompt",
                Some(json!({"delivery": delivery.as_str(), "text": ""}))
            ),
            Normal::Prompt {
                delivery,
                text: String::new(),
                completion_id: None
            }
        );
        assert_eq!(
            serde_json::to_value(delivery).ok(),
            Some(json!(delivery.as_str()))
        );
    }
    for delivery in [
        json!("later"),
        json!("followUp"),
        json!("Direct"),
        json!(null),
        json!(1),
    ] {
        rejected(
            "session.prompt",
            Some(json!({"delivery": delivery, "text": "x"})),
            errors::PROMPT_DELIVERY,
        );
    }
    rejected(
        "session.prompt",
        Some(json!({"text": "x"})),
        errors::PROMPT_DELIVERY,
    );
    // Delivery is checked before text.
    rejected("session.prompt", Some(json!({})), errors::PROMPT_DELIVERY);
}

#[test]
fn prompt_text_bound() {
    let at_bound = text_of(MAX_PROMPT_TEXT_BYTES);
    assert_eq!(
        accepted(
            "session.prompt",
            Some(json!({"delivery": "steer", "text": at_bound.clone()}))
        ),
        Normal::Prompt {
            delivery: Delivery::Steer,
            text: at_bound,
            completion_id: None
        }
    );
    let mut multibyte = "€".repeat(MAX_PROMPT_TEXT_BYTES / 3);
    multibyte.push_str("ab");
    assert_eq!(multibyte.len(), MAX_PROMPT_TEXT_BYTES);
    assert!(matches!(
        accepted(
            "session.prompt",
            Some(json!({"delivery": "direct", "text": multibyte.clone()}))
        ),
        Normal::Prompt { .. }
    ));
    multibyte.push('c');
    for text in [
        json!(text_of(MAX_PROMPT_TEXT_BYTES + 1)),
        json!(multibyte),
        json!(null),
        json!(1),
        json!(["x"]),
    ] {
        rejected(
            "session.prompt",
            Some(json!({"delivery": "direct", "text": text})),
            errors::PROMPT_TEXT,
        );
    }
    rejected(
        "session.prompt",
        Some(json!({"delivery": "direct"})),
        errors::PROMPT_TEXT,
    );
}

#[test]
fn prompt_completion_id() {
    let at_bound = text_of(MAX_COMPLETION_ID_BYTES);
    assert_eq!(
        accepted(
            "session.prompt",
            Some(json!({"delivery": "continue", "text": "t", "completionId": at_bound.clone()}))
        ),
        Normal::Prompt {
            delivery: Delivery::Continue,
            text: "t".to_owned(),
            completion_id: Some(at_bound)
        }
    );
    for completion_id in [
        json!(null),
        json!(""),
        json!(text_of(MAX_COMPLETION_ID_BYTES + 1)),
        json!(1),
    ] {
        rejected(
            "session.prompt",
            Some(json!({"delivery": "direct", "text": "t", "completionId": completion_id})),
            errors::COMPLETION_ID,
        );
    }
    // Text is checked before the completion id.
    rejected(
        "session.prompt",
        Some(json!({"delivery": "direct", "text": 1, "completionId": ""})),
        errors::PROMPT_TEXT,
    );
}

// --- session.await_idle ---

#[test]
fn await_idle_params() {
    assert_eq!(
        accepted(
            "session.await_idle",
            Some(json!({"completionId": text_of(256)}))
        ),
        Normal::AwaitIdle {
            completion_id: Some(text_of(256))
        }
    );
    rejected(
        "session.await_idle",
        Some(json!({})),
        errors::MISSING_FIELDS,
    );
    for completion_id in [json!(""), json!(null), json!(text_of(257)), json!(5)] {
        rejected(
            "session.await_idle",
            Some(json!({"completionId": completion_id})),
            errors::COMPLETION_ID,
        );
    }
    rejected(
        "session.await_idle",
        Some(json!({"completionId": "c", "timeout": 5})),
        errors::UNKNOWN_FIELDS,
    );
}

// --- connection.set_events ---

#[test]
fn event_modes() {
    for mode in EventMode::ALL {
        assert_eq!(
            accepted(
                "connection.set_events",
                Some(json!({"mode": mode.as_str()}))
            ),
            Normal::SetEvents { mode }
        );
        assert_eq!(serde_json::to_value(mode).ok(), Some(json!(mode.as_str())));
    }
    assert_eq!(EventMode::default(), EventMode::All);
    for mode in [json!("sometimes"), json!("ALL"), json!(null), json!(true)] {
        rejected(
            "connection.set_events",
            Some(json!({"mode": mode})),
            errors::EVENT_MODE,
        );
    }
    rejected(
        "connection.set_events",
        Some(json!({})),
        errors::MISSING_FIELDS,
    );
}

// --- command.invoke ---

#[test]
fn command_names() {
    for name in ["a", "counter", "a1", "a1-b2", "x-1", "abc-def-0g", "z9"] {
        assert!(is_kebab_case(name), "{name}");
        assert_eq!(
            accepted(
                "command.invoke",
                Some(json!({"name": name, "arguments": ""}))
            ),
            Normal::CommandInvoke {
                name: name.to_owned(),
                arguments: String::new()
            }
        );
    }
    for name in [
        "Invalid_Command",
        "1a",
        "-a",
        "a-",
        "a--b",
        "a_b",
        "a b",
        "aé",
        "A",
        "a-B",
        "a\n",
        "/counter",
    ] {
        assert!(!is_kebab_case(name), "{name}");
        rejected(
            "command.invoke",
            Some(json!({"name": name, "arguments": ""})),
            errors::COMMAND_NAME_KEBAB,
        );
    }
    let at_bound = kebab_of(MAX_COMMAND_NAME_BYTES);
    assert!(matches!(
        accepted(
            "command.invoke",
            Some(json!({"name": at_bound, "arguments": "x"}))
        ),
        Normal::CommandInvoke { .. }
    ));
    // Bounds are checked before the pattern.
    for name in [
        json!(kebab_of(MAX_COMMAND_NAME_BYTES + 1)),
        json!("A".repeat(65)),
        json!(""),
        json!(null),
        json!(3),
    ] {
        rejected(
            "command.invoke",
            Some(json!({"name": name, "arguments": ""})),
            errors::COMMAND_NAME,
        );
    }
    rejected(
        "command.invoke",
        Some(json!({"name": "counter"})),
        errors::MISSING_FIELDS,
    );
    rejected(
        "command.invoke",
        Some(json!({"arguments": ""})),
        errors::MISSING_FIELDS,
    );
}

#[test]
fn command_arguments_bound() {
    let at_bound = text_of(MAX_COMMAND_ARGUMENTS_BYTES);
    assert_eq!(
        accepted(
            "command.invoke",
            Some(json!({"name": "counter", "arguments": at_bound.clone()}))
        ),
        Normal::CommandInvoke {
            name: "counter".to_owned(),
            arguments: at_bound
        }
    );
    for arguments in [
        json!(text_of(MAX_COMMAND_ARGUMENTS_BYTES + 1)),
        json!(null),
        json!(["increment"]),
        json!({}),
    ] {
        rejected(
            "command.invoke",
            Some(json!({"name": "counter", "arguments": arguments})),
            errors::COMMAND_ARGUMENTS,
        );
    }
}

// --- model.select ---

#[test]
fn model_select_fields() {
    let at_bound = "ü".repeat(MAX_MODEL_FIELD_BYTES / 2);
    assert_eq!(
        accepted(
            "model.select",
            Some(json!({"id": at_bound.clone(), "provider": at_bound.clone()}))
        ),
        Normal::ModelSelect {
            provider: at_bound.clone(),
            id: at_bound.clone()
        }
    );
    let over = format!("{at_bound}x");
    for provider in [json!(""), json!(over.clone()), json!(null), json!(1)] {
        rejected(
            "model.select",
            Some(json!({"provider": provider, "id": "m"})),
            errors::MODEL_PROVIDER,
        );
    }
    for id in [json!(""), json!(over.clone()), json!(null), json!({})] {
        rejected(
            "model.select",
            Some(json!({"provider": "p", "id": id})),
            errors::MODEL_ID,
        );
    }
    // Provider first.
    rejected(
        "model.select",
        Some(json!({"provider": "", "id": ""})),
        errors::MODEL_PROVIDER,
    );
    rejected(
        "model.select",
        Some(json!({"provider": "p"})),
        errors::MISSING_FIELDS,
    );
}

// --- thinking.select ---

#[test]
fn thinking_select_levels_and_scopes() {
    for level in ThinkingLevel::ALL {
        for (scope, expected) in [
            (json!(null), SettingsScope::Global),
            (json!("global"), SettingsScope::Global),
            (json!("project"), SettingsScope::Project),
        ] {
            assert_eq!(
                accepted(
                    "thinking.select",
                    Some(json!({"level": level.as_str(), "scope": scope}))
                ),
                Normal::ThinkingSelect {
                    level,
                    scope: expected
                }
            );
        }
    }
    for level in [json!("HIGH"), json!("none"), json!(null), json!(3)] {
        rejected(
            "thinking.select",
            Some(json!({"level": level})),
            errors::THINKING_LEVEL,
        );
    }
    rejected("thinking.select", Some(json!({})), errors::THINKING_LEVEL);
    rejected(
        "thinking.select",
        Some(json!({"scope": "bad"})),
        errors::THINKING_LEVEL,
    );
    for scope in [json!("local"), json!("Global"), json!(""), json!(false)] {
        rejected(
            "thinking.select",
            Some(json!({"level": "low", "scope": scope})),
            errors::THINKING_SCOPE,
        );
    }
    for scope in [SettingsScope::Global, SettingsScope::Project] {
        assert_eq!(
            serde_json::to_value(scope).ok(),
            Some(json!(scope.as_str()))
        );
    }
}

// --- session.list, session.get_entries, session.fork (zi extensions) ---

#[test]
fn session_list_defaults_and_scope() {
    for (params, expected) in [
        (None, (0, 100, SessionListScope::Cwd)),
        (Some(json!({})), (0, 100, SessionListScope::Cwd)),
        (
            Some(json!({"start": null, "limit": null, "scope": null})),
            (0, 100, SessionListScope::Cwd),
        ),
        (
            Some(json!({"start": 3, "limit": 1, "scope": "all"})),
            (3, 1, SessionListScope::All),
        ),
        (
            Some(json!({"scope": "cwd"})),
            (0, 100, SessionListScope::Cwd),
        ),
    ] {
        let (start, limit, scope) = expected;
        assert_eq!(
            accepted("session.list", params),
            Normal::ListSessions {
                start,
                limit,
                scope
            }
        );
    }
    for scope in [json!("ALL"), json!(""), json!(1), json!(["all"])] {
        rejected(
            "session.list",
            Some(json!({"scope": scope})),
            errors::SESSION_LIST_SCOPE,
        );
    }
    // Page values are checked before the scope; unknown keys before any value.
    rejected(
        "session.list",
        Some(json!({"limit": 0, "scope": "x"})),
        errors::SESSION_LIST_LIMIT,
    );
    rejected(
        "session.list",
        Some(json!({"scope": "x", "extra": 1})),
        errors::UNKNOWN_FIELDS,
    );
    rejected(
        "session.list",
        Some(json!([])),
        &errors::params_must_be_object("session.list"),
    );
    assert_eq!(
        accepted("session.get_entries", None),
        Normal::GetEntries {
            start: 0,
            limit: 100
        }
    );
}

#[test]
fn fork_entry_id() {
    let id = "a".repeat(256);
    assert_eq!(
        accepted("session.fork", Some(json!({"entryId": id}))),
        Normal::Fork { entry_id: id }
    );
    for entry_id in [json!(""), json!(null), json!(7), json!("a".repeat(257))] {
        rejected(
            "session.fork",
            Some(json!({"entryId": entry_id})),
            errors::FORK_ENTRY_ID,
        );
    }
    rejected("session.fork", Some(json!({})), errors::MISSING_FIELDS);
    rejected(
        "session.fork",
        Some(json!({"entryId": "x", "start": 0})),
        errors::UNKNOWN_FIELDS,
    );
    rejected("session.fork", None, errors::MISSING_FIELDS);
}

#[test]
fn decode_record_matches_decode_value() {
    let value = envelope(
        "session.prompt",
        Some(json!({"delivery": "follow_up", "text": "é\u{1F600}\"\\\n"})),
    );
    assert_eq!(decode_record(&value.to_string()), decode_value(value));
}

/// The borrowed fast path accepts exactly what the general path accepts, with the same
/// result, and leaves every other record (errors included) to it.
#[test]
fn the_plain_fast_path_agrees_with_the_general_path() {
    let long_id = "i".repeat(MAX_REQUEST_ID_BYTES);
    let too_long = "i".repeat(MAX_REQUEST_ID_BYTES + 1);
    let records = [
        r#"{"version":1,"id":"q1","method":"session.get_state"}"#.to_owned(),
        r#" {"method":"thinking.list","id":"qé"2","version":1.0} "#.to_owned(),
        r#"{"version":1e0,"id":"q3","method":"session.get_messages"}"#.to_owned(),
        format!(r#"{{"version":1,"id":"{long_id}","method":"model.list"}}"#),
        format!(r#"{{"version":1,"id":"{too_long}","method":"model.list"}}"#),
        r#"{"version":1,"id":"","method":"session.get_state"}"#.to_owned(),
        r#"{"version":2,"id":"q","method":"session.get_state"}"#.to_owned(),
        r#"{"version":"1","id":"q","method":"session.get_state"}"#.to_owned(),
        r#"{"version":1,"id":7,"method":"session.get_state"}"#.to_owned(),
        r#"{"version":1,"id":"q","method":"no.such"}"#.to_owned(),
        r#"{"version":1,"id":"q","method":"session.fork"}"#.to_owned(),
        r#"{"version":1,"id":"q","id":"r","method":"session.get_state"}"#.to_owned(),
        r#"{"version":1,"id":"q","method":"session.get_state","params":null}"#.to_owned(),
        r#"{"version":1,"id":"q","method":"session.get_state","extra":0}"#.to_owned(),
        r#"{"version":1e400,"id":"q","method":"session.get_state"}"#.to_owned(),
        r#"{"version":1,"id":"q"}"#.to_owned(),
    ];
    for record in records {
        let general = serde_json::from_str::<Value>(&record)
            .map_err(|_| ProtocolError::invalid_json())
            .and_then(decode_value);
        if let Some(plain) = decode_plain(&record) {
            assert_eq!(Ok(plain), general, "{record}");
        }
        assert_eq!(decode_record(&record).ok(), general.ok(), "{record}");
    }
    assert!(decode_plain(r#"{"version":1,"id":"q","method":"session.get_state"}"#).is_some());
}
