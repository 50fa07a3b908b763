//! Ordering and results: sequences one to n, synchronous responses in input order, commands and
//! unknown models, paging of messages and outcomes.

use super::*;

// ---------------------------------------------------------------------------------------------
// 7. Paging (docs/rpc.md#sessionget_messages, docs/rpc.md#sessionget_outcomes)
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paging_messages_and_outcomes() {
    let (mock, _env, mut p) = Env::started_with_model().await;
    mock.push(Step::text("one"));
    mock.push(Step::text("two"));
    p.request_ok("p1", "session.prompt", prompt_params("first"))
        .await;
    p.request_ok("w1", "session.await_idle", None).await;
    p.request_ok("p2", "session.prompt", prompt_params("second"))
        .await;
    p.request_ok("w2", "session.await_idle", None).await;

    let page = p.request_ok("m0", "session.get_messages", None).await;
    assert_eq!(keys(&page), ["start", "total", "nextStart", "messages"]);
    assert_eq!(page["start"], 0);
    assert_eq!(page["total"], 4);
    assert_eq!(page["nextStart"], Value::Null);
    let messages = page["messages"].as_array().unwrap();
    let roles: Vec<&str> = messages
        .iter()
        .map(|m| m["role"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(roles, ["user", "assistant", "user", "assistant"]);
    let texts: Vec<&str> = messages
        .iter()
        .map(|m| m["content"][0]["text"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(texts, ["first", "one", "second", "two"]);

    let page = p
        .request_ok(
            "m1",
            "session.get_messages",
            Some(json!({"start": 1, "limit": 2})),
        )
        .await;
    assert_eq!(page["start"], 1);
    assert_eq!(page["total"], 4);
    assert_eq!(page["nextStart"], 3);
    assert_eq!(page["messages"].as_array().unwrap().len(), 2);
    assert_eq!(page["messages"][0], messages[1]);
    assert_eq!(page["messages"][1], messages[2]);

    let page = p
        .request_ok(
            "m2",
            "session.get_messages",
            Some(json!({"start": 3, "limit": 1})),
        )
        .await;
    assert_eq!(page["nextStart"], Value::Null);
    assert_eq!(page["messages"], json!([messages[3]]));

    let page = p
        .request_ok(
            "m3",
            "session.get_messages",
            Some(json!({"start": 0, "limit": 3})),
        )
        .await;
    assert_eq!(page["nextStart"], 3);

    for start in [4, 99] {
        let page = p
            .request_ok(
                &format!("m-{start}"),
                "session.get_messages",
                Some(json!({"start": start})),
            )
            .await;
        assert_eq!(
            page,
            json!({"start": start, "total": 4, "nextStart": null, "messages": []})
        );
    }

    let page = p.request_ok("o0", "session.get_outcomes", None).await;
    assert_eq!(keys(&page), ["start", "total", "nextStart", "outcomes"]);
    assert_eq!(
        page,
        json!({"start": 0, "total": 0, "nextStart": null, "outcomes": []})
    );
    let page = p
        .request_ok(
            "o1",
            "session.get_outcomes",
            Some(json!({"start": 5, "limit": 2})),
        )
        .await;
    assert_eq!(
        page,
        json!({"start": 5, "total": 0, "nextStart": null, "outcomes": []})
    );

    p.exit_by_eof().await;
}

// ---------------------------------------------------------------------------------------------
// 9. Sequences across a session (docs/rpc.md#frames)
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sequences_are_exactly_one_to_n_and_the_run_settles() {
    let (mock, _env, mut p) = Env::started_with_model().await;
    mock.push(Step::Text(vec!["Hel".into(), "lo".into()]));
    mock.push(Step::text("second"));

    p.request_ok("p1", "session.prompt", prompt_params("hello"))
        .await;
    p.request_ok("w1", "session.await_idle", None).await;
    p.event("agent_settled").await;
    p.request_ok("s1", "session.get_state", None).await;
    p.request_ok("p2", "session.prompt", prompt_params("again"))
        .await;
    p.request_ok("w2", "session.await_idle", None).await;
    p.event("agent_settled").await;
    p.request_ok("m", "session.get_messages", None).await;
    p.exit_by_eof().await;

    let seq = sequences(&p);
    assert_eq!(seq, (1..=seq.len() as u64).collect::<Vec<_>>());
    let frames = p.frames().to_vec();
    assert_eq!(frames[0]["type"], "ready");
    for f in &frames[1..] {
        assert_ne!(f["type"], "ready");
    }

    // Each prompt's response precedes the first event of the run it starts (zi's decision),
    // every run starts with agent_start and ends with exactly one agent_settled after agent_end.
    for (prompt, next) in [("p1", "p2"), ("p2", "m")] {
        let at = frames
            .iter()
            .position(|f| f["type"] == "response" && f["id"] == prompt)
            .unwrap();
        let end = frames
            .iter()
            .position(|f| f["type"] == "response" && f["id"] == next)
            .unwrap();
        let before: Vec<&Value> = frames[..at]
            .iter()
            .rev()
            .take_while(|f| f["type"] == "session_event")
            .collect();
        assert!(
            before.iter().all(|f| f["event"]["type"] != "agent_start"),
            "{prompt}: agent_start before the prompt response"
        );
        let run: Vec<&str> = frames[at..end]
            .iter()
            .filter(|f| f["type"] == "session_event")
            .map(|f| f["event"]["type"].as_str().unwrap_or_default())
            .collect();
        assert_eq!(run.first(), Some(&"agent_start"), "{prompt}: {run:?}");
        assert_eq!(
            run.iter().filter(|t| **t == "agent_settled").count(),
            1,
            "{prompt}: {run:?}"
        );
        let settled = run.iter().position(|t| *t == "agent_settled").unwrap();
        let ended = run
            .iter()
            .position(|t| *t == "agent_end")
            .expect("agent_end");
        assert!(ended < settled, "{prompt}: {run:?}");
    }
    let deltas: String = frames
        .iter()
        .filter(|f| f["type"] == "session_event" && f["event"]["type"] == "message_update")
        .filter_map(|f| {
            f["event"]["assistantMessageEvent"]["delta"]
                .as_str()
                .map(str::to_string)
        })
        .collect();
    assert!(deltas.contains("Hello"), "{deltas:?}");
}

// ---------------------------------------------------------------------------------------------
// 10. Commands, models, synchronous ordering (docs/rpc.md#methods-by-example,
//     docs/rpc.md#zis-decisions)
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commands_and_unknown_models() {
    let (_env, mut p) = Env::started_without_model().await;

    assert_eq!(
        request_succeeds(&mut p, "c1", "command.list", None).await,
        json!({"commands": []})
    );
    request_fails(
        &mut p,
        "c2",
        "command.invoke",
        Some(json!({"name": "missing", "arguments": "x y"})),
        "not_found",
        "Command not found: missing",
    )
    .await;
    request_fails(
        &mut p,
        "ms",
        "model.select",
        Some(json!({"provider": "p", "id": "x"})),
        "not_found",
        "Model not found: p/x",
    )
    .await;
    let models = request_succeeds(&mut p, "ml", "model.list", None).await["models"].clone();
    // Only the built-in catalog, none of it configured.
    assert!(
        models
            .as_array()
            .is_some_and(|list| !list.is_empty() && list.iter().all(|m| m["configured"] == false)),
        "{models}"
    );
    let state = p.request_ok("s", "session.get_state", None).await;
    assert_eq!(state["model"], json!({"type": "unselected"}));
    p.exit_by_eof().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn synchronous_responses_come_in_input_order() {
    let (_env, mut p) = Env::started_without_model().await;
    let mut bytes = Vec::new();
    bytes.extend(line("a", "session.get_state", None));
    bytes.extend(line("b", "command.list", None));
    bytes.extend(b"\n");
    bytes.extend(line(
        "c",
        "model.select",
        Some(json!({"provider": "p", "id": "x"})),
    ));
    bytes.extend(line("d", "session.nope", None));
    bytes.extend(line("e", "thinking.list", None));
    bytes.extend(line("f", "session.get_messages", None));
    bytes.extend(line(
        "g",
        "connection.set_events",
        Some(json!({"mode": "none"})),
    ));
    bytes.extend(line("h", "session.get_outcomes", None));
    bytes.extend(line("i", "session.interrupt", None));
    bytes.extend(line("j", "session.await_idle", None));
    bytes.extend(line("k", "model.list", None));
    p.send_raw(&bytes).await;
    let mut seen = Vec::new();
    for _ in 0..12 {
        let f = next_reply(&mut p).await;
        seen.push(
            f["id"]
                .as_str()
                .map(str::to_string)
                .unwrap_or_else(|| format!("<{}>", f["code"].as_str().unwrap_or("?"))),
        );
    }
    // interrupt and await_idle run as tasks and may overtake or trail; the rest is in input order.
    let synchronous: Vec<&str> = seen
        .iter()
        .map(String::as_str)
        .filter(|id| *id != "i" && *id != "j")
        .collect();
    assert_eq!(
        synchronous,
        [
            "a",
            "b",
            "<invalid_json>",
            "c",
            "d",
            "e",
            "f",
            "g",
            "h",
            "k"
        ]
    );
    assert!(seen.contains(&"i".to_string()) && seen.contains(&"j".to_string()));
    p.exit_by_eof().await;
}
