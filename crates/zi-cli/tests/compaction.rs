//! Black-box tests of automatic compaction (docs/configuration.md#compaction) through the real
//! binary and the mock provider, with a small-context model. They drive zi with the typed requests
//! and the ordered event stream of `zi-rpc-client`, the client applications use, through the shared
//! harness (which checks every frame).

use serde_json::{Value, json};
use zi_rpc_client::{Client, Delivery, EventStream};
use zi_test_support::harness::Harness;
use zi_test_support::mock_llm::Step;

use crate::compaction_support::{SUMMARY, SmallWindow, WAIT, reply};

async fn setup() -> SmallWindow {
    SmallWindow::start(
        &[json!({"id": "small", "contextWindow": 4000, "maxTokens": 500})],
        r#"{"retryEnabled": false}"#,
    )
    .await
}

/// A harnessed zi plus every session event its client has seen, in order.
struct Zi {
    harness: Harness,
    events: EventStream,
    seen: Vec<Value>,
}

impl Zi {
    /// Moves the events already received into `seen`.
    fn drain(&mut self) {
        while let Ok(event) = self.events.try_next() {
            self.seen.push(event.event);
        }
    }

    fn events_of(&mut self, ty: &str) -> Vec<Value> {
        self.drain();
        self.seen
            .iter()
            .filter(|e| e["type"] == ty)
            .cloned()
            .collect()
    }

    fn event_types(&mut self) -> Vec<String> {
        self.drain();
        self.seen
            .iter()
            .map(|e| e["type"].as_str().unwrap_or_default().to_string())
            .collect()
    }

    /// Waits for the next event of type `ty` (keeping everything in `seen`).
    async fn wait_event(&mut self, ty: &str) -> Value {
        loop {
            let event = tokio::time::timeout(WAIT, self.events.next())
                .await
                .unwrap_or_else(|_| panic!("no {ty} event within {WAIT:?}"))
                .unwrap_or_else(|| panic!("the connection ended before {ty}"));
            self.seen.push(event.event.clone());
            if event.kind() == ty {
                return event.event;
            }
        }
    }

    fn client(&self) -> &Client {
        self.harness.client()
    }

    async fn request(&self, method: &str, params: Option<Value>) -> Value {
        self.client()
            .request(method, params)
            .await
            .unwrap_or_else(|e| panic!("{method}: {e}"))
    }
}

async fn spawn(setup: &SmallWindow, extra: &[&str]) -> Zi {
    let harness = setup.spawn(extra).await;
    let events = harness.client().subscribe();
    Zi {
        harness,
        events,
        seen: Vec::new(),
    }
}

async fn prompt_and_wait(zi: &mut Zi, text: &str) {
    zi.client()
        .prompt(Delivery::Direct, text, None)
        .await
        .unwrap_or_else(|e| panic!("prompt {text}: {e}"));
    zi.client()
        .await_idle(None)
        .await
        .unwrap_or_else(|e| panic!("await_idle: {e}"));
    zi.drain();
}

/// One exchange per `(usage, prompt)`: each prompt is answered by a 4000-byte reply reporting
/// `usage` tokens.
async fn exchanges(setup: &SmallWindow, zi: &mut Zi, turns: &[(u64, &str)]) {
    for &(usage, text) in turns {
        setup.mock.push(reply(4000, usage));
        prompt_and_wait(zi, text).await;
    }
}

/// Three exchanges of ~1000 tokens each, `first`, `again` and `second` (with `suffix`); the last
/// usage (3500 tokens) is over the trigger, so the next prompt compacts first.
async fn fill_past_the_trigger(setup: &SmallWindow, zi: &mut Zi, suffix: &str) {
    let texts = ["first", "again", "second"].map(|t| format!("{t}{suffix}"));
    let turns = [(1100, &*texts[0]), (2200, &*texts[1]), (3500, &*texts[2])];
    exchanges(setup, zi, &turns).await;
}

fn first_user_text(body: &Value) -> String {
    body["messages"]
        .as_array()
        .and_then(|m| m.iter().find(|m| m["role"] == "user"))
        .map(|m| match &m["content"] {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        })
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn threshold_compaction_summarises_before_the_next_prompt() {
    let setup = setup().await;
    let mut zi = spawn(&setup, &["--no-session"]).await;
    // Three exchanges of ~1000 tokens each; the last usage reports 3500 tokens (> trigger).
    let turns = [(1100, "first"), (2200, "second"), (3500, "third")];
    exchanges(&setup, &mut zi, &turns).await;
    assert!(zi.events_of("compaction_start").is_empty());

    // The fourth prompt compacts first: one summary request, then the real turn.
    setup.mock.push(Step::text(SUMMARY));
    setup.mock.push(Step::text("after compaction"));
    prompt_and_wait(&mut zi, "fourth").await;

    let starts = zi.events_of("compaction_start");
    assert_eq!(starts.len(), 1);
    assert_eq!(starts[0]["reason"], "threshold");
    let ends = zi.events_of("compaction_end");
    assert_eq!(ends.len(), 1);
    assert_eq!(ends[0]["outcome"]["type"], "completed", "{}", ends[0]);
    let result = &ends[0]["outcome"]["result"];
    assert_eq!(result["summary"], SUMMARY);
    assert!(result["estimatedTokensAfter"].as_u64() < result["tokensBefore"].as_u64());
    // entry_appended(compaction) precedes compaction_end; compaction precedes agent_start.
    let types = zi.event_types();
    let start_at = types
        .iter()
        .rposition(|t| t == "compaction_start")
        .unwrap_or(0);
    let tail: Vec<&str> = types[start_at..]
        .iter()
        .map(String::as_str)
        .take(4)
        .collect();
    assert_eq!(
        tail,
        [
            "compaction_start",
            "entry_appended",
            "compaction_end",
            "agent_start"
        ]
    );

    let requests = setup.mock.requests();
    assert_eq!(requests.len(), 5);
    let summary_request = &requests[3].body;
    assert!(
        summary_request["messages"][0]["content"]
            .as_str()
            .is_some_and(|s| s.starts_with("You are a context summarization assistant.")),
        "{summary_request}"
    );
    assert!(first_user_text(summary_request).contains("<conversation>"));
    let next = &requests[4].body;
    let first = first_user_text(next);
    assert!(
        first.contains("The conversation history before this point was compacted"),
        "{first}"
    );
    assert!(first.contains("Keep going."));

    // Pages show the summary item; the transcript restarts from the kept messages.
    let page = zi
        .request("session.get_messages", Some(json!({"limit": 100})))
        .await;
    let messages = page["messages"].as_array().cloned().unwrap_or_default();
    assert!(
        messages.iter().any(|m| m["role"] == "compactionSummary"),
        "{page}"
    );
    assert!(!messages.iter().any(|m| m["content"][0]["text"] == "first"));
    assert_eq!(
        messages.last().map(|m| m["content"][0]["text"].clone()),
        Some(json!("after compaction"))
    );
    let state = zi.request("session.get_state", None).await;
    assert_eq!(state["messageCount"].as_u64(), Some(messages.len() as u64));
    assert_eq!(state["compaction"]["type"], "idle");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overflow_recovery_compacts_once_and_continues() {
    let setup = setup().await;
    let mut zi = spawn(&setup, &["--no-session"]).await;
    let turns = [(1100, "first"), (2000, "second"), (2900, "second again")];
    exchanges(&setup, &mut zi, &turns).await;

    // The provider reports an overflow; zi compacts and retries the turn once.
    setup.mock.push(Step::HttpError {
        status: 400,
        message: "prompt is too long: 5000 tokens > 4000 maximum".to_string(),
    });
    setup.mock.push(Step::text(SUMMARY));
    setup.mock.push(Step::text("recovered"));
    prompt_and_wait(&mut zi, "third").await;

    let ends = zi.events_of("compaction_end");
    assert_eq!(ends.len(), 1);
    assert_eq!(ends[0]["reason"], "overflow");
    assert_eq!(ends[0]["outcome"]["type"], "completed", "{}", ends[0]);
    assert_eq!(zi.events_of("agent_settled").len(), 4);
    let compaction_entries: Vec<Value> = zi
        .events_of("entry_appended")
        .into_iter()
        .filter(|e| e["entry"]["type"] == "compaction")
        .collect();
    assert_eq!(compaction_entries.len(), 1);
    assert!(compaction_entries[0]["entry"]["excludedFailureEntryId"].is_string());

    // The overflowed message is gone from pages; the recovered answer is last.
    let page = zi.request("session.get_messages", None).await;
    let messages = page["messages"].as_array().cloned().unwrap_or_default();
    assert!(
        !messages.iter().any(|m| m["stopReason"] == "error"),
        "{page}"
    );
    assert_eq!(
        messages.last().map(|m| m["content"][0]["text"].clone()),
        Some(json!("recovered"))
    );
    let requests = setup.mock.requests();
    assert_eq!(requests.len(), 6);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_summary_fails_the_compaction_and_the_run_goes_on() {
    let setup = setup().await;
    let mut zi = spawn(&setup, &["--no-session"]).await;
    fill_past_the_trigger(&setup, &mut zi, "").await;
    setup.mock.push(Step::HttpError {
        status: 400,
        message: "bad summary request".to_string(),
    });
    setup.mock.push(Step::text("answered anyway"));
    prompt_and_wait(&mut zi, "third").await;
    let ends = zi.events_of("compaction_end");
    assert_eq!(ends.len(), 1);
    assert_eq!(ends[0]["outcome"]["type"], "failed");
    assert!(
        ends[0]["outcome"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("bad summary request"))
    );
    assert!(
        !zi.events_of("entry_appended")
            .iter()
            .any(|e| e["entry"]["type"] == "compaction")
    );
    let page = zi.request("session.get_messages", None).await;
    assert_eq!(
        page["messages"]
            .as_array()
            .and_then(|m| m.last())
            .map(|m| m["content"][0]["text"].clone()),
        Some(json!("answered anyway"))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interrupting_a_compaction_cancels_it() {
    let setup = setup().await;
    let mut zi = spawn(&setup, &["--no-session"]).await;
    fill_past_the_trigger(&setup, &mut zi, "").await;
    setup.mock.push(Step::Hang(vec!["## Goal".to_string()]));
    zi.client()
        .prompt(Delivery::Direct, "third", None)
        .await
        .unwrap_or_else(|e| panic!("prompt: {e}"));
    zi.wait_event("compaction_start").await;
    let state = zi.request("session.get_state", None).await;
    assert_eq!(state["activity"]["type"], "compacting", "{state}");
    assert_eq!(state["compaction"]["type"], "running");
    assert_eq!(state["compaction"]["reason"], "threshold");
    zi.client()
        .interrupt()
        .await
        .unwrap_or_else(|e| panic!("interrupt: {e}"));
    let ends = zi.events_of("compaction_end");
    assert_eq!(ends.len(), 1);
    assert_eq!(ends[0]["outcome"]["type"], "cancelled");
    let state = zi.request("session.get_state", None).await;
    assert_eq!(state["activity"]["type"], "idle");
    assert_eq!(state["compaction"]["type"], "idle");
    assert_eq!(zi.events_of("agent_settled").len(), 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_compacted_session_resumes_with_the_same_pages() {
    let setup = setup().await;
    let mut zi = spawn(&setup, &[]).await;
    fill_past_the_trigger(&setup, &mut zi, "").await;
    setup.mock.push(Step::text(SUMMARY));
    setup.mock.push(Step::text("after"));
    prompt_and_wait(&mut zi, "third").await;
    let before = zi.request("session.get_messages", None).await;
    let state_before = zi.request("session.get_state", None).await;
    zi.harness.close_stdin().await;
    let exited = zi.harness.wait_exit(WAIT).await;
    assert_eq!(exited.code, Some(0), "{}", exited.stderr);

    let resumed = spawn(&setup, &["-c"]).await;
    let after = resumed.request("session.get_messages", None).await;
    let state_after = resumed.request("session.get_state", None).await;
    assert_eq!(before, after);
    for key in ["sessionId", "messageCount", "contextUsage", "model"] {
        assert_eq!(state_before[key], state_after[key], "{key}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transient_summary_failure_is_retried() {
    let setup = setup().await;
    setup.agent.write(
        "settings.json",
        r#"{"retryEnabled": true, "retryBaseDelayMs": 20}"#,
    );
    let mut zi = spawn(&setup, &["--no-session"]).await;
    fill_past_the_trigger(&setup, &mut zi, "").await;
    setup.mock.push(Step::HttpError {
        status: 503,
        message: "service unavailable".to_string(),
    });
    setup.mock.push(Step::text(SUMMARY));
    setup.mock.push(Step::text("after retry"));
    prompt_and_wait(&mut zi, "third").await;

    let types = zi.event_types();
    let from = types
        .iter()
        .position(|t| t == "compaction_start")
        .unwrap_or(0);
    let sequence: Vec<&str> = types[from..]
        .iter()
        .map(String::as_str)
        .filter(|t| t.starts_with("compaction") || t.starts_with("summarization"))
        .collect();
    assert_eq!(
        sequence,
        [
            "compaction_start",
            "summarization_retry_scheduled",
            "summarization_retry_attempt_start",
            "summarization_retry_finished",
            "compaction_end"
        ]
    );
    let scheduled = zi.events_of("summarization_retry_scheduled");
    assert_eq!(scheduled[0]["attempt"], 1);
    assert_eq!(scheduled[0]["delayMs"], 20);
    assert_eq!(scheduled[0]["reason"], "threshold");
    let ends = zi.events_of("compaction_end");
    assert_eq!(ends[0]["outcome"]["type"], "completed", "{}", ends[0]);
}

/// After compactions a live session keeps only the resident tail in memory (issue 10.9); what
/// it sends the provider next must be what a session resumed from the same journal sends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_compacted_live_session_sends_the_context_its_resumed_journal_sends() {
    let setup = setup().await;
    let sessions = setup.cwd.path.join("sessions");
    let copies = setup.cwd.path.join("copies");
    std::fs::create_dir_all(&copies).unwrap_or_else(|e| panic!("{e}"));
    let dir_arg = sessions.display().to_string();
    let mut zi = spawn(&setup, &["--session-dir", &dir_arg]).await;
    let mut compactions = 0;
    for round in 0..3 {
        fill_past_the_trigger(&setup, &mut zi, &format!(" {round}")).await;
        setup.mock.push(Step::text(SUMMARY));
        setup.mock.push(Step::text(&format!("after {round}")));
        prompt_and_wait(&mut zi, &format!("third {round}")).await;
        compactions += 1;
        assert_eq!(zi.events_of("compaction_end").len(), compactions);
    }
    let state = zi.request("session.get_state", None).await;
    let id = state["sessionId"].as_str().unwrap_or_default().to_string();
    let journal = sessions.join(format!("{id}.jsonl"));
    let copy = copies.join(format!("{id}.jsonl"));
    std::fs::copy(&journal, &copy).unwrap_or_else(|e| panic!("copy the journal: {e}"));

    setup.mock.push(Step::text("probed"));
    prompt_and_wait(&mut zi, "probe").await;
    let live_pages = zi.request("session.get_messages", None).await;
    let live_state = zi.request("session.get_state", None).await;
    zi.harness.close_stdin().await;
    let exited = zi.harness.wait_exit(WAIT).await;
    assert_eq!(exited.code, Some(0), "{}", exited.stderr);

    let copy_arg = copy.display().to_string();
    let mut resumed = spawn(&setup, &["-r", &copy_arg]).await;
    setup.mock.push(Step::text("probed"));
    prompt_and_wait(&mut resumed, "probe").await;
    let requests = setup.mock.requests();
    let [.., live, reopened] = requests.as_slice() else {
        panic!("two probe requests expected");
    };
    assert_eq!(live.body["messages"], reopened.body["messages"]);
    let resumed_pages = resumed.request("session.get_messages", None).await;
    let resumed_state = resumed.request("session.get_state", None).await;
    assert_eq!(
        texts_of(&live_pages["messages"]),
        texts_of(&resumed_pages["messages"])
    );
    for key in ["messageCount", "contextUsage"] {
        assert_eq!(live_state[key], resumed_state[key], "{key}");
    }
}

fn texts_of(messages: &Value) -> Vec<String> {
    messages
        .as_array()
        .map(|items| {
            items
                .iter()
                .map(|m| format!("{}:{}", m["role"], m["content"]))
                .collect()
        })
        .unwrap_or_default()
}

/// Whether a provider request is a compaction's summary request.
fn is_summary(request: &zi_test_support::mock_llm::RecordedRequest) -> bool {
    request.body["messages"][0]["content"]
        .as_str()
        .is_some_and(|s| s.starts_with("You are a context summarization assistant."))
}

/// Issue 23 C12: a provider that reports more usage than the trigger after every compaction
/// (a system prompt and tools that fill a small window look the same) gets no summary request
/// before every prompt. After one compaction that did not bring the usage under the trigger,
/// zi backs off — saying so once with `compaction_backoff` — until the context has grown by the
/// keep-recent budget past the usage reported after it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_compaction_that_cannot_help_is_not_repeated_on_every_prompt() {
    let setup = setup().await;
    let mut zi = spawn(&setup, &["--no-session"]).await;
    // Turns offer tools, summary requests do not: each gets its own script (a compaction in
    // this small window asks for a summary chunk by chunk).
    for _ in 0..32 {
        setup.mock.push(Step::text(SUMMARY));
    }
    // Trigger 3000, keep-recent 1500. From the third turn on every turn reports 5000 tokens,
    // the sixth 7000.
    for total in [1100, 2200, 5000, 5000, 5000, 7000, 5000, 5000, 5000] {
        setup.mock.push_offering("bash", reply(4000, total));
    }
    let summaries = |setup: &SmallWindow| {
        setup
            .mock
            .requests()
            .iter()
            .filter(|r| is_summary(r))
            .count()
    };
    for text in ["one", "two", "three"] {
        prompt_and_wait(&mut zi, text).await;
    }
    assert_eq!(summaries(&setup), 0);
    prompt_and_wait(&mut zi, "four").await;
    assert_eq!(
        zi.events_of("compaction_start").len(),
        1,
        "the first compaction runs"
    );
    let paid = summaries(&setup);
    assert!(paid >= 1);
    prompt_and_wait(&mut zi, "five").await;
    prompt_and_wait(&mut zi, "six").await;
    assert_eq!(
        (zi.events_of("compaction_start").len(), summaries(&setup)),
        (1, paid),
        "a compaction that cannot help is not repeated"
    );
    let backoffs = zi.events_of("compaction_backoff");
    assert_eq!(backoffs.len(), 1, "said once: {backoffs:?}");
    assert_eq!(
        backoffs[0],
        json!({
            "type": "compaction_backoff",
            "tokens": backoffs[0]["tokens"],
            "trigger": 3000,
            "tokensAfterCompaction": 5000,
            "resumeAbove": 6500
        })
    );
    assert!(backoffs[0]["tokens"].as_u64().unwrap() > 5000);
    // The sixth turn reported 7000 tokens (> 6500): the context grew enough to compact again,
    // and that compaction did not help either: one more backoff, said once.
    prompt_and_wait(&mut zi, "seven").await;
    assert_eq!(
        zi.events_of("compaction_start").len(),
        2,
        "growth past the backoff compacts again"
    );
    let paid = summaries(&setup);
    prompt_and_wait(&mut zi, "eight").await;
    prompt_and_wait(&mut zi, "nine").await;
    assert_eq!(
        (zi.events_of("compaction_start").len(), summaries(&setup)),
        (2, paid)
    );
    assert_eq!(zi.events_of("compaction_backoff").len(), 2);
    assert!(
        zi.events_of("compaction_end")
            .iter()
            .all(|end| end["outcome"]["type"] == "completed")
    );
}
