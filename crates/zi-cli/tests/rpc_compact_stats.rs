//! Black-box tests of the additive methods `session.compact` and `session.get_stats` and of the
//! cycle usage `session.await_idle` reports with a `completionId` (issue 14 points 2 and 3):
//! the real binary against the mock provider, every frame checked by the harness.

use serde_json::{Value, json};
use zi_test_support::harness::Harness;
use zi_test_support::mock_llm::Step;

use crate::compaction_support::{SUMMARY, SmallWindow, WAIT, reply_with_usage};

/// Catalog prices of the `small` model, dollars per million tokens.
const PRICE_INPUT: f64 = 3.0;
const PRICE_OUTPUT: f64 = 15.0;

async fn setup(settings: &str) -> SmallWindow {
    SmallWindow::start(
        &[
            json!({"id": "small", "contextWindow": 4000, "maxTokens": 500,
                   "cost": {"input": PRICE_INPUT, "output": PRICE_OUTPUT}}),
            json!({"id": "other", "contextWindow": 4000, "maxTokens": 500}),
        ],
        settings,
    )
    .await
}

/// Sends a direct prompt and waits for the session to be idle again.
async fn prompt_and_wait(zi: &mut Harness, id: &str, text: &str) {
    zi.prompt(&format!("{id}-p"), text).await;
    zi.request_ok(&format!("{id}-w"), "session.await_idle", None)
        .await;
}

/// Four exchanges of ~500 estimated tokens each: enough for a manual compaction (the retained
/// tail is the last 1500 tokens), small enough for a one-chunk summary. The reported usage
/// stays under the 3000-token trigger, so no threshold compaction intervenes.
async fn fill_context(setup: &SmallWindow, zi: &mut Harness, round: &str) {
    for (i, input) in [100u64, 200, 300, 400].into_iter().enumerate() {
        setup.mock.push(reply_with_usage(2000, input, 500));
        prompt_and_wait(zi, &format!("{round}{i}"), &format!("{round} {i}")).await;
    }
}

fn assert_failure(frame: &Value, code: &str, message: &str) {
    assert_eq!(frame["type"], "response", "{frame}");
    assert_eq!(frame["ok"], false, "{frame}");
    assert_eq!(
        frame["error"],
        json!({"code": code, "message": message}),
        "{frame}"
    );
}

fn assert_invalid(frame: &Value, id: &str, message: &str) {
    assert_eq!(frame["type"], "protocol_error", "{frame}");
    assert_eq!(frame["code"], "invalid_request", "{frame}");
    assert_eq!(frame["id"], id, "{frame}");
    assert_eq!(frame["message"], message, "{frame}");
}

/// The `entry_appended` events of compaction entries received so far.
fn compaction_entries(zi: &Harness) -> Vec<Value> {
    zi.events()
        .into_iter()
        .filter(|e| e["type"] == "entry_appended" && e["entry"]["type"] == "compaction")
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compact_and_get_stats_decode_errors_are_exact_and_the_session_keeps_serving() {
    let setup = setup(r#"{"retryEnabled": false}"#).await;
    let mut zi = setup.spawn(&["--no-session"]).await;
    const INSTRUCTIONS: &str = "Compaction instructions must be a string of at most 8192 bytes";
    for (id, params) in [
        ("n", json!({"instructions": 7})),
        ("a", json!({"instructions": ["x"]})),
        ("l", json!({"instructions": "é".repeat(4097)})),
    ] {
        let frame = zi.request(id, "session.compact", Some(params)).await;
        assert_invalid(&frame, id, INSTRUCTIONS);
    }
    let frame = zi
        .request("u", "session.compact", Some(json!({"focus": "x"})))
        .await;
    assert_invalid(&frame, "u", "RPC request contains unknown fields");
    let frame = zi.request("s", "session.compact", Some(json!("x"))).await;
    assert_invalid(&frame, "s", "session.compact params must be an object");
    for params in [json!({}), json!(null)] {
        let frame = zi.request("g", "session.get_stats", Some(params)).await;
        assert_invalid(&frame, "g", "RPC request contains unknown fields");
    }

    // At the bound, with null, with no params: admitted, and a fresh session has nothing to
    // compact (no event, still idle).
    for (id, params) in [
        ("b", Some(json!({"instructions": "x".repeat(8192)}))),
        ("z", Some(json!({"instructions": null}))),
        ("e", Some(json!({}))),
        ("o", None),
    ] {
        let frame = zi.request(id, "session.compact", params).await;
        assert_failure(&frame, "operation_failed", "Nothing to compact");
    }
    assert!(
        !zi.event_types().iter().any(|t| t.starts_with("compaction")),
        "{:?}",
        zi.event_types()
    );
    let stats = zi.request_ok("g2", "session.get_stats", None).await;
    assert_eq!(stats["total"]["turns"], 0, "{stats}");
    let state = zi.request_ok("st", "session.get_state", None).await;
    assert_eq!(state["activity"]["type"], "idle");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn manual_compaction_commits_with_reason_manual_and_reports_the_entry() {
    let setup = setup(r#"{"retryEnabled": false}"#).await;
    let mut zi = setup.spawn(&["--no-session"]).await;
    fill_context(&setup, &mut zi, "fill").await;
    let before = zi.last_sequence();

    setup.mock.push(Step::text(SUMMARY));
    let result = zi
        .request_ok(
            "c",
            "session.compact",
            Some(json!({"instructions": "Keep the file names"})),
        )
        .await;
    let keys: Vec<&String> = result.as_object().map(|o| o.keys().collect()).unwrap();
    assert_eq!(
        keys,
        ["tokensBefore", "estimatedTokensAfter", "firstKeptEntryId"],
        "{result}"
    );
    assert!(
        result["estimatedTokensAfter"].as_u64() < result["tokensBefore"].as_u64(),
        "{result}"
    );

    // compaction_start → entry_appended(compaction) → compaction_end, then the response; no run.
    let after: Vec<Value> = zi
        .frames()
        .iter()
        .filter(|f| f["sequence"].as_u64().unwrap_or(0) > before)
        .cloned()
        .collect();
    let kinds: Vec<String> = after
        .iter()
        .map(|f| match f["type"].as_str() {
            Some("session_event") => f["event"]["type"].as_str().unwrap_or("").to_string(),
            other => other.unwrap_or("").to_string(),
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "compaction_start",
            "entry_appended",
            "compaction_end",
            "response"
        ],
        "{after:?}"
    );
    let start = &after[0]["event"];
    assert_eq!(start["reason"], "manual");
    let entry = &after[1]["event"]["entry"];
    assert_eq!(entry["reason"], "manual");
    assert_eq!(entry["summary"], SUMMARY);
    assert_eq!(entry["firstKeptEntryId"], result["firstKeptEntryId"]);
    assert_eq!(entry["tokensBefore"], result["tokensBefore"]);
    assert_eq!(
        entry["estimatedTokensAfter"],
        result["estimatedTokensAfter"]
    );
    let end = &after[2]["event"];
    assert_eq!(end["operationId"], start["operationId"]);
    assert_eq!(end["outcome"]["type"], "completed", "{end}");
    assert_eq!(end["outcome"]["result"]["reason"], "manual");

    // The summary request carries the focus; the next turn sends the checkpoint.
    let requests = setup.mock.requests();
    let summary_request = &requests[4].body;
    let prompt = summary_request["messages"][1]["content"].to_string();
    assert!(prompt.contains("<conversation>"), "{summary_request}");
    assert!(
        prompt.contains("Additional focus: Keep the file names"),
        "{summary_request}"
    );
    setup.mock.push(Step::text("after"));
    prompt_and_wait(&mut zi, "next", "next").await;
    let next = setup.mock.requests()[5].body["messages"].to_string();
    assert!(
        next.contains("The conversation history before this point was compacted"),
        "{next}"
    );
    let state = zi.request_ok("st", "session.get_state", None).await;
    assert_eq!(state["activity"]["type"], "idle");
    assert_eq!(state["compaction"]["type"], "idle");
    let stats = zi.request_ok("g", "session.get_stats", None).await;
    assert_eq!(stats["total"]["compactions"], 1, "{stats}");
    assert_eq!(stats["models"][0]["compactions"], 1, "{stats}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compact_is_idle_only_and_a_compaction_refuses_other_work() {
    let setup = setup(r#"{"retryEnabled": false}"#).await;
    let mut zi = setup.spawn(&["--no-session"]).await;
    fill_context(&setup, &mut zi, "fill").await;

    // While a run streams.
    setup.mock.push(Step::Hang(vec!["partial".to_string()]));
    zi.prompt("p", "hang").await;
    // Four fills, then the hung request.
    setup.mock.wait_for_requests(5, WAIT).await;
    let frame = zi.request("c1", "session.compact", None).await;
    assert_failure(
        &frame,
        "operation_failed",
        "Cannot compact while the agent is running",
    );
    zi.request_ok("i1", "session.interrupt", None).await;

    // With queued input.
    zi.request_ok(
        "q",
        "session.prompt",
        Some(json!({"delivery": "follow_up", "text": "later"})),
    )
    .await;
    let frame = zi.request("c2", "session.compact", None).await;
    assert_failure(
        &frame,
        "operation_failed",
        "Cannot compact while queued input is pending",
    );
    // A run drains the queue (the hung answer left a failed tail; prompt once more).
    setup.mock.push(Step::text("ok"));
    setup.mock.push(Step::text("ok too"));
    prompt_and_wait(&mut zi, "drain", "drain").await;
    let state = zi.request_ok("s0", "session.get_state", None).await;
    assert_eq!(state["queuedInputs"]["followUp"], json!([]), "{state}");

    // While the compaction runs, everything idle-only is refused with the compaction message.
    setup.mock.push(Step::Hang(vec!["## Goal".to_string()]));
    zi.send("c3", "session.compact", None).await;
    let start = zi.event("compaction_start").await;
    // Four fills, the hung prompt, the drain and its follow-up, then the summary request.
    setup.mock.wait_for_requests(8, WAIT).await;
    assert_eq!(start["reason"], "manual");
    let state = zi.request_ok("s1", "session.get_state", None).await;
    assert_eq!(
        state["activity"],
        json!({"type": "compacting", "operationId": start["operationId"], "reason": "manual"})
    );
    assert_eq!(
        state["compaction"],
        json!({"type": "running", "operationId": start["operationId"], "reason": "manual"})
    );
    idle_only_work_is_refused_while_compacting(&mut zi).await;
    zi.request_ok("i2", "session.interrupt", None).await;
    let frame = zi.response("c3").await;
    assert_failure(&frame, "operation_failed", "Compaction was cancelled");
}

/// Everything idle-only is refused with the compaction message.
async fn idle_only_work_is_refused_while_compacting(zi: &mut Harness) {
    for (id, method, params, message) in [
        (
            "r1",
            "session.prompt",
            Some(json!({"delivery": "direct", "text": "x"})),
            "Cannot prompt while context compaction is active",
        ),
        (
            "r2",
            "session.prompt",
            Some(json!({"delivery": "continue", "text": "x"})),
            "Cannot prompt while context compaction is active",
        ),
        (
            "r3",
            "session.prompt",
            Some(json!({"delivery": "steer", "text": "x"})),
            "Cannot queue input while context compaction is active",
        ),
        (
            "r4",
            "session.compact",
            None,
            "Cannot compact while context compaction is active",
        ),
        (
            "r5",
            "model.select",
            Some(json!({"provider": "mock", "id": "other"})),
            "Cannot change model while context compaction is active",
        ),
        (
            "r6",
            "thinking.select",
            Some(json!({"level": "off"})),
            "Cannot change thinking level while context compaction is active",
        ),
    ] {
        let frame = zi.request(id, method, params).await;
        assert_failure(&frame, "operation_failed", message);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interrupting_a_manual_compaction_cancels_it_cleanly() {
    let setup = setup(r#"{"retryEnabled": false}"#).await;
    let sessions = setup.cwd.path.join("sessions");
    let dir_arg = sessions.display().to_string();
    let mut zi = setup.spawn(&["--session-dir", &dir_arg]).await;
    fill_context(&setup, &mut zi, "fill").await;
    let state = zi.request_ok("s0", "session.get_state", None).await;
    let id = state["sessionId"].as_str().unwrap().to_string();
    let journal = sessions.join(format!("{id}.jsonl"));
    let journal_before = std::fs::read_to_string(&journal).unwrap();

    setup.mock.push(Step::Hang(vec!["## Goal".to_string()]));
    zi.send("c", "session.compact", None).await;
    zi.event("compaction_start").await;
    // Interrupted once the summary request is out (four fills, then the summary).
    setup.mock.wait_for_requests(5, WAIT).await;
    let interrupt = zi.request("i", "session.interrupt", None).await;
    assert_eq!(interrupt["ok"], true, "{interrupt}");
    // The compaction's answer precedes the interrupt's.
    let compact = zi.response("c").await;
    assert_failure(&compact, "operation_failed", "Compaction was cancelled");
    assert!(compact["sequence"].as_u64() < interrupt["sequence"].as_u64());
    let end = zi.event("compaction_end").await;
    assert_eq!(end["reason"], "manual");
    assert_eq!(end["outcome"], json!({"type": "cancelled"}));
    assert!(compaction_entries(&zi).is_empty());
    // The summary request was dropped.
    assert_eq!(setup.mock.wait_for_disconnects(1, WAIT).await, 1);

    let state = zi.request_ok("s1", "session.get_state", None).await;
    assert_eq!(state["activity"]["type"], "idle");
    assert_eq!(state["compaction"]["type"], "idle");
    assert_eq!(std::fs::read_to_string(&journal).unwrap(), journal_before);

    // The session goes on: a second attempt commits.
    setup.mock.push(Step::text(SUMMARY));
    let result = zi.request_ok("c2", "session.compact", None).await;
    assert!(result["firstKeptEntryId"].is_string(), "{result}");
    assert_eq!(compaction_entries(&zi).len(), 1);
}

/// Every assistant message's usage, as the session pages it.
async fn assistant_usages(zi: &mut Harness, id: &str) -> Vec<Value> {
    let page = zi
        .request_ok(id, "session.get_messages", Some(json!({"limit": 100})))
        .await;
    page["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "assistant")
        .map(|m| m["usage"].clone())
        .collect()
}

fn sum(usages: &[Value], key: &str) -> u64 {
    usages.iter().map(|u| u[key].as_u64().unwrap()).sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stats_count_the_whole_journal_and_are_exact_after_continue() {
    let setup = setup(r#"{"retryEnabled": true, "retryBaseDelayMs": 20}"#).await;
    std::fs::write(setup.cwd.path.join("notes.txt"), "notes\n").unwrap();
    let mut zi = setup.spawn(&[]).await;

    // A tool-using cycle watched by a completion id: two assistant messages.
    setup
        .mock
        .push(Step::tool_call("t1", "read", json!({"path": "notes.txt"})));
    setup.mock.push(reply_with_usage(40, 300, 20));
    zi.request_ok(
        "p",
        "session.prompt",
        Some(json!({"delivery": "direct", "text": "read it", "completionId": "cyc"})),
    )
    .await;
    let idle = zi
        .request_ok(
            "w",
            "session.await_idle",
            Some(json!({"completionId": "cyc"})),
        )
        .await;
    let cycle = assistant_usages(&mut zi, "m0").await;
    assert_eq!(cycle.len(), 2);
    for key in ["input", "output", "cacheRead", "cacheWrite", "totalTokens"] {
        assert_eq!(idle["usage"][key].as_u64(), Some(sum(&cycle, key)), "{key}");
    }
    assert!(
        idle["usage"]["cost"]["total"].as_f64() > Some(0.0),
        "{idle}"
    );
    // Without a completion id, await_idle answers `{}` as before.
    let plain = zi.request_ok("w0", "session.await_idle", None).await;
    assert_eq!(plain, json!({}));

    // A retried provider error, then enough context for a manual compaction.
    setup.mock.push(Step::HttpError {
        status: 503,
        message: "service unavailable".to_string(),
    });
    setup.mock.push(reply_with_usage(40, 400, 10));
    prompt_and_wait(&mut zi, "retry", "retry").await;
    fill_context(&setup, &mut zi, "fill").await;
    setup.mock.push(Step::text(SUMMARY));
    zi.request_ok("c", "session.compact", None).await;
    // A turn of the second model.
    zi.request_ok(
        "sel",
        "model.select",
        Some(json!({"provider": "mock", "id": "other"})),
    )
    .await;
    setup.mock.push(reply_with_usage(40, 700, 30));
    prompt_and_wait(&mut zi, "other", "other").await;

    let live = zi.request_ok("g", "session.get_stats", None).await;
    assert_the_live_stats(&zi, &live);

    zi.exit_by_eof().await;

    // Resumed: the compacted history is on disk only, and the figures are the same.
    let mut resumed = setup.spawn(&["-c"]).await;
    let after = resumed.request_ok("g", "session.get_stats", None).await;
    assert_eq!(after, live);
    // And the resumed session compacts and counts on.
    fill_context(&setup, &mut resumed, "again").await;
    setup.mock.push(Step::text(SUMMARY));
    resumed.request_ok("c", "session.compact", None).await;
    let stats = resumed.request_ok("g2", "session.get_stats", None).await;
    assert_eq!(stats["total"]["compactions"], 2, "{stats}");
    assert_eq!(stats["total"]["turns"], 13, "{stats}");
    resumed.exit_by_eof().await;

    // Resumed again, compacting before anyone asks: the on-disk part grows with the tail.
    let mut third = setup.spawn(&["-c"]).await;
    fill_context(&setup, &mut third, "third").await;
    setup.mock.push(Step::text(SUMMARY));
    third.request_ok("c", "session.compact", None).await;
    let latest = third.request_ok("g", "session.get_stats", None).await;
    assert_eq!(latest["total"]["compactions"], 3, "{latest}");
    assert_eq!(latest["total"]["turns"], 17, "{latest}");
    assert_eq!(latest["total"]["retries"], 1, "{latest}");
    assert_eq!(latest["total"]["toolCalls"]["byName"], json!({"read": 1}));
    let added: u64 = assistant_ends(&resumed)
        .iter()
        .chain(assistant_ends(&third).iter())
        .map(|m| m["usage"]["input"].as_u64().unwrap())
        .sum();
    assert_eq!(
        latest["total"]["usage"]["input"].as_u64(),
        Some(live["total"]["usage"]["input"].as_u64().unwrap() + added)
    );
}

/// The live figures: turns, retries, compactions and tool calls per model and in total; tokens as
/// every assistant message reported them, compacted ones included; cost at the catalog's prices.
fn assert_the_live_stats(zi: &Harness, live: &Value) {
    let total = &live["total"];
    // read+answer, error+retried answer, four fills, one on `other`.
    assert_eq!(total["turns"], 9, "{live}");
    assert_eq!(total["retries"], 1, "{live}");
    assert_eq!(total["compactions"], 1, "{live}");
    assert_eq!(
        total["toolCalls"],
        json!({"total": 1, "byName": {"read": 1}}),
        "{live}"
    );
    let models = live["models"].as_array().unwrap();
    assert_eq!(models.len(), 2, "{live}");
    let (small, other) = (&models[0], &models[1]);
    assert_eq!(
        (&small["provider"], &small["id"]),
        (&json!("mock"), &json!("small"))
    );
    assert_eq!(small["pricing"], "catalog");
    assert_eq!(small["turns"], 8);
    assert_eq!(small["retries"], 1);
    assert_eq!(small["compactions"], 1);
    assert_eq!(small["toolCalls"]["total"], 1);
    assert_eq!(other["id"], "other");
    assert_eq!(other["turns"], 1);
    assert_eq!(other["retries"], 0);
    assert_eq!(other["usage"]["input"], 700);
    assert_eq!(other["usage"]["output"], 30);
    assert_eq!(other["usage"]["cost"]["total"], 0.0);
    // Tokens: what every assistant message reported, compacted ones included.
    let ended = assistant_ends(zi);
    for key in ["input", "output", "cacheRead", "cacheWrite", "totalTokens"] {
        let small_sum: u64 = ended
            .iter()
            .filter(|m| m["model"] == "small")
            .map(|m| m["usage"][key].as_u64().unwrap())
            .sum();
        assert_eq!(small["usage"][key].as_u64(), Some(small_sum), "{key}");
        let all: u64 = ended
            .iter()
            .map(|m| m["usage"][key].as_u64().unwrap())
            .sum();
        assert_eq!(total["usage"][key].as_u64(), Some(all), "{key}");
    }
    // Cost: the token totals at the catalog's prices.
    let input = small["usage"]["input"].as_f64().unwrap();
    let output = small["usage"]["output"].as_f64().unwrap();
    let expected = input * PRICE_INPUT / 1e6 + output * PRICE_OUTPUT / 1e6;
    let cost = small["usage"]["cost"]["total"].as_f64().unwrap();
    assert!(
        cost > 0.0 && (cost - expected).abs() < 1e-12,
        "{cost} vs {expected}"
    );
    assert_eq!(total["usage"]["cost"]["total"].as_f64(), Some(cost));
}

/// The assistant messages of every `message_end` received so far.
fn assistant_ends(zi: &Harness) -> Vec<Value> {
    zi.events()
        .into_iter()
        .filter(|e| e["type"] == "message_end" && e["message"]["role"] == "assistant")
        .map(|e| e["message"].clone())
        .collect()
}
