//! Custom entries and appended custom messages: announced, bounded, kept out of or put into the
//! context (docs/extensions.md#state-and-messages, docs/rpc.md#event-order).

use super::*;

// ---------------------------------------------------------------------------------------------
// 1. Custom entries (docs/extensions.md#state-and-messages)
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn custom_entries_are_announced_but_never_presented_or_sent() {
    let h = harness().await;
    assert!(!h.path().exists(), "a new journal starts pending");

    let first = h
        .session
        .append_custom_entry(
            "example.counter",
            Some(json!({"n": 1, "marker": "state-one"})),
        )
        .expect("custom entry");
    // The first custom entry materializes the pending journal.
    assert!(
        h.path().is_file(),
        "the journal exists after the first custom entry"
    );
    let second = h
        .session
        .append_custom_entry(
            "example.counter",
            Some(json!({"n": 2, "marker": "state-two"})),
        )
        .expect("custom entry");
    let other = h
        .session
        .append_custom_entry("example.other", None)
        .expect("custom entry without data");

    // entry_appended only: no message events.
    assert_eq!(
        h.labels(),
        [
            "entry_appended:custom",
            "entry_appended:custom",
            "entry_appended:custom"
        ]
    );
    assert_eq!(
        appended(&h.events()),
        [first.clone(), second.clone(), other.clone()]
    );
    let wire = serde_json::to_value(&first).expect("entry JSON");
    assert_eq!(wire["type"], "custom");
    assert_eq!(wire["customType"], "example.counter");
    assert_eq!(wire["data"], json!({"n": 1, "marker": "state-one"}));
    assert_eq!(wire["parentId"], Value::Null);
    let wire = serde_json::to_value(&other).expect("entry JSON");
    assert!(
        wire.get("data").is_none(),
        "no data key without data: {wire}"
    );
    assert_eq!(wire["parentId"], json!(second.id));

    // Durable before announced: the file holds exactly these entries after the header.
    let (header, on_disk) = read_journal(&h.path());
    assert_eq!(header["type"], "session");
    assert_eq!(header["id"], "custom-messages-test");
    assert_eq!(on_disk, [first.clone(), second.clone(), other.clone()]);

    // getSessionEntries(type): that type only, oldest first.
    assert_eq!(h.session.custom_entries("example.counter"), [first, second]);
    assert_eq!(h.session.custom_entries("example.other"), [other]);
    assert!(h.session.custom_entries("example.none").is_empty());

    // Never in the transcript.
    assert_eq!(h.session.state().message_count, 0);
    let page = h.session.messages_page(0, 100).expect("page");
    assert_eq!(page.total, 0);
    assert!(page.messages.is_empty());

    // Never in provider context.
    h.mock.push(Step::text("reply"));
    h.run("hello").await;
    let bodies = h.request_bodies();
    assert_eq!(bodies.len(), 1);
    let body = bodies[0].to_string();
    for marker in ["state-one", "state-two", "example.counter", "example.other"] {
        assert!(
            !body.contains(marker),
            "{marker} reached the provider: {body}"
        );
    }
    assert_eq!(wire_user_texts(&bodies[0]), ["hello"]);
    assert_eq!(h.session.state().message_count, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_custom_entries_are_refused_and_nothing_is_appended() {
    let h = harness().await;
    let long = "a".repeat(129);
    for bad in [
        "",
        "Example",
        "9abc",
        "-x",
        "with space",
        "ünï",
        "a\u{0}b",
        long.as_str(),
    ] {
        let result = h.session.append_custom_entry(bad, Some(json!(1)));
        assert!(result.is_err(), "custom type {bad:?} was accepted");
    }
    let mut deep = json!(1);
    for _ in 0..40 {
        deep = json!([deep]);
    }
    let wide = Value::Array((0..5000).map(Value::from).collect());
    let big = json!("x".repeat(300 * 1024));
    for (what, data) in [
        ("too deep", deep),
        ("too many values", wide),
        ("too big", big),
    ] {
        let result = h.session.append_custom_entry("example.data", Some(data));
        assert!(result.is_err(), "{what} data was accepted");
    }
    assert!(h.events().is_empty(), "nothing announced: {:?}", h.labels());
    assert!(h.session.custom_entries("example.data").is_empty());
    assert!(!h.path().exists(), "nothing written");

    // The limits themselves are accepted: a 128-byte type name and a [a-z][a-z0-9._:/-]* name.
    let longest = "a".repeat(128);
    h.session
        .append_custom_entry(&longest, None)
        .expect("a 128-byte type name");
    h.session
        .append_custom_entry("a0._:/-z", Some(json!({"ok": true})))
        .expect("every allowed character");
    assert_eq!(h.labels().len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn custom_state_history_is_bounded_in_entries_per_type() {
    let h = harness().await;
    // ≤ 2,048 entries per type.
    for n in 0..2048 {
        h.session
            .append_custom_entry("example.many", Some(json!(n)))
            .unwrap_or_else(|e| panic!("entry {n}: {e}"));
    }
    let size = file_len(&h.path());
    assert!(
        h.session
            .append_custom_entry("example.many", Some(json!(2048)))
            .is_err()
    );
    assert_eq!(file_len(&h.path()), size, "nothing half-written");
    assert_eq!(h.session.custom_entries("example.many").len(), 2048);
    // Other types have their own history.
    h.session
        .append_custom_entry("example.few", Some(json!(0)))
        .expect("another type");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn custom_state_history_is_bounded_in_bytes_per_type() {
    let h = harness().await;
    // ≤ 2 MiB per type: eight 250 KiB values fit, a ninth does not.
    let chunk = json!("y".repeat(250 * 1024));
    for n in 0..8 {
        h.session
            .append_custom_entry("example.bytes", Some(chunk.clone()))
            .unwrap_or_else(|e| panic!("chunk {n}: {e}"));
    }
    let size = file_len(&h.path());
    assert!(
        h.session
            .append_custom_entry("example.bytes", Some(chunk.clone()))
            .is_err()
    );
    assert_eq!(file_len(&h.path()), size, "nothing half-written");
    assert_eq!(h.session.custom_entries("example.bytes").len(), 8);

    // The reserved program-state type may hold up to 8 MiB.
    for n in 0..9 {
        h.session
            .append_custom_entry("zi.programmatic-state.v1", Some(chunk.clone()))
            .unwrap_or_else(|e| panic!("program state {n}: {e}"));
    }
}

// ---------------------------------------------------------------------------------------------
// 2. Appended custom messages (`append` of docs/extensions.md#state-and-messages,
//    docs/rpc.md#event-order)
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn appended_custom_messages_enter_context_but_only_displayed_ones_are_presented() {
    let h = harness().await;
    send(
        &h.session,
        custom_message("example.visible", "visible note", true),
        CustomDelivery::Append,
    );
    assert!(
        h.path().is_file(),
        "the first custom message materializes the journal"
    );
    let mut hidden = custom_message("example.hidden", "hidden note", false);
    hidden.details = Some(json!({"source": "test"}));
    send(&h.session, hidden, CustomDelivery::Append);

    let events = h.events();
    assert_eq!(
        labels_of(&events),
        [
            "entry_appended:custom_message",
            "message_end:custom",
            "entry_appended:custom_message",
            "message_end:custom"
        ]
    );
    let entries = appended(&events);
    let visible_entry = serde_json::to_value(&entries[0]).expect("JSON");
    assert_eq!(visible_entry["type"], "custom_message");
    assert_eq!(visible_entry["customType"], "example.visible");
    assert_eq!(visible_entry["content"], "visible note");
    assert_eq!(visible_entry["display"], true);
    let hidden_entry = serde_json::to_value(&entries[1]).expect("JSON");
    assert_eq!(hidden_entry["display"], false);
    assert_eq!(hidden_entry["details"], json!({"source": "test"}));

    // message_end carries the journal projection: timestamp = the entry's, as epoch ms.
    let visible_ts = timestamp_millis(&entries[0].timestamp);
    let expected_visible = json!({
        "role": "custom",
        "customType": "example.visible",
        "content": "visible note",
        "display": true,
        "timestamp": visible_ts,
    });
    let ends: Vec<Value> = events
        .iter()
        .filter_map(|e| match e {
            AgentSessionEvent::MessageEnd { message } => {
                Some(serde_json::to_value(message).expect("JSON"))
            }
            _ => None,
        })
        .collect();
    assert_eq!(ends[0], expected_visible);
    assert_eq!(
        ends[1],
        json!({
            "role": "custom",
            "customType": "example.hidden",
            "content": "hidden note",
            "display": false,
            "details": {"source": "test"},
            "timestamp": timestamp_millis(&entries[1].timestamp),
        })
    );

    // Presentation: only the displayed one.
    let page = h.session.messages_page(0, 100).expect("page");
    assert_eq!(page.total, 1);
    assert_eq!(
        serde_json::to_value(&page.messages).expect("JSON"),
        json!([expected_visible])
    );
    assert_eq!(h.session.state().message_count, 1);
    let counts: Vec<u64> = lock(&h.events).iter().map(|(_, c)| *c).collect();
    assert_eq!(
        counts,
        [1, 1, 1, 1],
        "the subscriber context counts presented messages"
    );

    // Durable before announced.
    let (_, on_disk) = read_journal(&h.path());
    assert_eq!(on_disk, entries);

    // Context: both, as user messages, before the next prompt.
    h.mock.push(Step::text("noted"));
    h.run("next").await;
    let bodies = h.request_bodies();
    assert_eq!(bodies.len(), 1);
    assert_eq!(
        wire_user_texts(&bodies[0]),
        ["visible note", "hidden note", "next"]
    );
    assert_eq!(h.session.state().message_count, 3);
}

/// docs/rpc.md#event-order, after the test "RPC exposes committed custom entries while message
/// pages retain presentation policy".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn custom_entries_and_messages_are_all_announced_while_pages_keep_presentation_policy() {
    let h = harness().await;
    h.session
        .append_custom_entry("example.state", Some(json!({"count": 1})))
        .expect("custom entry");
    send(
        &h.session,
        custom_message("example.visible", "visible", true),
        CustomDelivery::Append,
    );
    send(
        &h.session,
        custom_message("example.hidden", "hidden", false),
        CustomDelivery::Append,
    );
    let types: Vec<&'static str> = appended(&h.events())
        .iter()
        .map(|e| e.data.type_name())
        .collect();
    assert_eq!(types, ["custom", "custom_message", "custom_message"]);
    let page = serde_json::to_value(h.session.messages_page(0, 100).expect("page")).expect("JSON");
    assert_eq!(page["total"], 1);
    let messages = page["messages"].as_array().cloned().unwrap_or_default();
    assert_eq!(messages.len(), 1, "{page}");
    assert_eq!(messages[0]["role"], "custom");
    assert_eq!(messages[0]["customType"], "example.visible");
    assert_eq!(messages[0]["content"], "visible");
    assert_eq!(messages[0]["display"], true);
}

// ---------------------------------------------------------------------------------------------
