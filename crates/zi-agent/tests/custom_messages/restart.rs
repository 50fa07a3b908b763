//! Custom entries and messages across a restart, and legacy `message` rows with role `custom`
//! (docs/configuration.md#session-journals).

use super::*;

// 4. Restart (docs/configuration.md#session-journals)
// ---------------------------------------------------------------------------------------------

/// A copy of the session's journal beside it, with its blob directory (format 2 keeps the image
/// bytes there), as a restart would find it.
fn snapshot_journal(h: &Harness) -> PathBuf {
    let snapshot = h.dir.path().join("restart.jsonl");
    std::fs::copy(h.path(), &snapshot).expect("copy the journal");
    let blobs = h.path().with_extension("blobs");
    let snapshot_blobs = snapshot.with_extension("blobs");
    std::fs::create_dir(&snapshot_blobs).expect("blob directory");
    for blob in std::fs::read_dir(&blobs).expect("the image was written as a blob") {
        let blob = blob.expect("blob entry").path();
        std::fs::copy(&blob, snapshot_blobs.join(blob.file_name().expect("name")))
            .expect("copy a blob");
    }
    snapshot
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn custom_entries_and_messages_survive_a_restart() {
    let h = harness().await;
    h.session
        .append_custom_entry("example.state", Some(json!({"step": 1})))
        .expect("custom entry");
    let image = ContentBlock::Image {
        data: "aGVsbG8=".into(),
        mime_type: "image/png".into(),
    };
    send(
        &h.session,
        CustomMessageInput {
            custom_type: "example.visible".into(),
            content: MessageContent::Parts(vec![ContentBlock::text("visible with image"), image]),
            display: true,
            details: Some(json!({"kind": "note"})),
        },
        CustomDelivery::Append,
    );
    send(
        &h.session,
        custom_message("example.hidden", "hidden context", false),
        CustomDelivery::Append,
    );
    h.mock.push(Step::text("first reply"));
    h.run("first prompt").await;
    h.session
        .append_custom_entry("example.state", Some(json!({"step": 2})))
        .expect("custom entry");

    let pages_before = h.messages();
    let state_before = h.session.state();
    let entries_before = h.session.custom_entries("example.state");
    assert_eq!(pages_before.len(), 3, "visible custom, user, assistant");

    // Snapshot the journal as a restart would find it, then probe the live session's context.
    let snapshot = snapshot_journal(&h);
    h.mock.push(Step::text("probe reply"));
    h.run("probe").await;
    let live_body = h.request_bodies().pop().expect("probe request");
    h.session.dispose().await;

    // Restart: reopen the file and rebuild the session from it.
    let (resumed, resumed_events) = reopen(&h.mock, h.dir.path(), &snapshot, Options::default());
    assert_eq!(
        resumed.messages_page(0, 100).expect("page").messages,
        pages_before
    );
    let state_after = resumed.state();
    assert_eq!(state_after.message_count, state_before.message_count);
    assert_eq!(state_after.context_usage, state_before.context_usage);
    assert_eq!(resumed.custom_entries("example.state"), entries_before);
    assert!(
        log_events(&resumed_events).is_empty(),
        "restoring announces nothing"
    );

    resumed
        .prompt(Delivery::Direct, "probe".into())
        .expect("prompt");
    idle(&resumed).await;
    let resumed_body = h
        .request_bodies()
        .pop()
        .expect("probe request after restart");
    assert_eq!(
        wire_messages(&resumed_body),
        wire_messages(&live_body),
        "the provider context is the same after a restart"
    );
    assert_eq!(
        wire_user_texts(&resumed_body),
        [
            "visible with image",
            "hidden context",
            "first prompt",
            "probe"
        ]
    );

    // Appends after the restart continue the chain, and a second restart sees them.
    resumed
        .append_custom_entry("example.state", Some(json!({"step": 3})))
        .expect("custom entry after restart");
    let pages = resumed.messages_page(0, 100).expect("page").messages;
    let (_, on_disk) = read_journal(&snapshot);
    assert_eq!(on_disk.last().map(|e| e.data.type_name()), Some("custom"));
    let (again, _) = reopen(&h.mock, h.dir.path(), &snapshot, Options::default());
    assert_eq!(again.messages_page(0, 100).expect("page").messages, pages);
    assert_eq!(again.custom_entries("example.state").len(), 3);
}

// ---------------------------------------------------------------------------------------------
// 5. Legacy `message` rows with role `custom`
//    (docs/configuration.md#custom-entries-and-messages-internal-api)
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn legacy_custom_message_rows_are_read_but_never_written() {
    let mock = MockLlm::start().await.expect("mock LLM starts");
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("legacy.jsonl");
    let row = |id: &str, parent: Value, text: &str, display: bool| {
        json!({
            "type": "message",
            "message": {"role": "custom", "customType": "example.legacy", "content": text,
                        "display": display, "timestamp": 7},
            "id": id, "parentId": parent, "timestamp": "2026-01-01T00:00:01.000Z",
        })
    };
    let text = format!(
        "{}\n{}\n{}\n",
        json!({"type": "session", "version": 1, "id": "legacy", "timestamp": "2026-01-01T00:00:00.000Z",
               "cwd": dir.path().display().to_string()}),
        row("e1", Value::Null, "legacy shown", true),
        row("e2", json!("e1"), "legacy hidden", false),
    );
    std::fs::write(&path, text).expect("write the journal");

    let (session, _events) = reopen(&mock, dir.path(), &path, Options::default());
    let page = serde_json::to_value(session.messages_page(0, 10).expect("page")).expect("JSON");
    assert_eq!(page["total"], 1, "{page}");
    assert_eq!(page["messages"][0]["content"], "legacy shown", "{page}");
    mock.push(Step::text("ok"));
    run(&session, "now").await;
    let body = mock.requests().pop().map(|r| r.body).unwrap_or_default();
    assert_eq!(
        wire_user_texts(&body),
        ["legacy shown", "legacy hidden", "now"],
        "both legacy rows enter the context"
    );

    // New writes of that form are rejected: custom messages are written as `custom_message`.
    let mut journal = Journal::new(None);
    let result = journal.append(EntryData::Message {
        message: AgentMessage::Custom(zi_protocol::message::CustomMessage {
            custom_type: "example.legacy".into(),
            content: MessageContent::Text("new legacy row".into()),
            display: true,
            details: None,
            timestamp: 1,
        }),
    });
    assert!(
        result.is_err(),
        "a new `message` row with role `custom` was accepted"
    );
    assert!(journal.entries().is_empty());
}
