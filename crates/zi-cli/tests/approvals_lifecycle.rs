//! Black-box tests of the approval lifecycle and of the runs without a client
//! (docs/approvals.md#timeouts-interruption-and-eof,
//! docs/approvals.md#one-shot-modes-and-subagents): `cancel_turn`, client EOF and `SIGTERM` while a
//! request is pending, a stale `edit`, headless `-p` / `--mode json` with an ask rule, the
//! compatibility diff of a client that never opts in, and MCP tools matched by rules.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use zi_test_support::dirs::{AgentDir, TempCwd, temp_cwd};
use zi_test_support::harness::Harness;
use zi_test_support::mcp::stdio_command;
use zi_test_support::mock_llm::{MockLlm, Step, start_mock};
use zi_test_support::zi_command::{Finished, ZiCommand};

use crate::wire_support::result_text;

const ZI: &str = env!("CARGO_BIN_EXE_zi");
/// Generous: a debug build on a loaded machine; nothing here measures time.
const WAIT: Duration = Duration::from_secs(60);
const KEY: &str = "approvals-lifecycle-key";
const SIGTERM: i32 = 15;

fn agent_with(mock: &MockLlm, settings: &str) -> AgentDir {
    AgentDir::new()
        .models(mock, KEY, &[json!({"id": "m1"})])
        .settings(settings)
}

fn rpc(agent: &AgentDir, cwd: &Path, args: &[&str]) -> ZiCommand {
    ZiCommand::rpc(ZI, agent, cwd)
        .model("mock/m1")
        .args(args)
        .timeout(WAIT)
}

async fn prompt(p: &mut Harness, id: &str, delivery: &str, text: &str) {
    p.request_ok(
        id,
        "session.prompt",
        Some(json!({"delivery": delivery, "text": text})),
    )
    .await;
}

async fn opt_in(p: &mut Harness, params: Value) -> Value {
    p.request_ok("ap", "connection.set_approvals", Some(params))
        .await
}

/// The next `approval_request` after sequence `after`.
async fn request_after(p: &mut Harness, after: u64) -> Value {
    p.wait_for("an approval_request", |f| {
        f["type"] == "approval_request" && f["sequence"].as_u64().unwrap() > after
    })
    .await["approval"]
        .clone()
}

/// Every journal line under `dir` (the session directory).
fn journal_lines(dir: &Path) -> Vec<Value> {
    let mut lines = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.extension().is_some_and(|e| e == "jsonl") {
            let text = std::fs::read_to_string(&path).unwrap();
            lines.extend(text.lines().filter_map(|l| serde_json::from_str(l).ok()));
        }
    }
    lines
}

/// The journaled approval outcomes (`operationId` `approval/…`).
fn approval_outcomes(dir: &Path) -> Vec<Value> {
    journal_lines(dir)
        .into_iter()
        .filter(|line| {
            line.to_string().contains("\"operationId\":\"approval/")
                && line["type"] == "operation_outcome"
        })
        .collect()
}

#[tokio::test]
async fn cancel_turn_aborts_the_run_and_keeps_queued_steering() {
    let mock = start_mock().await;
    let agent = agent_with(&mock, "{}");
    let cwd = temp_cwd();
    mock.push(Step::tool_call(
        "c1",
        "bash",
        json!({"command": "touch never"}),
    ));
    mock.push(Step::text("not reached"));
    let mut p = rpc(&agent, &cwd.path, &[]).no_session().spawn_rpc().await;
    opt_in(&mut p, json!({"enabled": true, "policy": "untrusted"})).await;
    prompt(&mut p, "p1", "direct", "go").await;
    let asked = request_after(&mut p, 0).await;
    prompt(&mut p, "st", "steer", "later, please").await;
    let response = p
        .request_ok(
            "r1",
            "approval.respond",
            Some(json!({"approvalId": asked["approvalId"], "decision": "cancel_turn"})),
        )
        .await;
    assert_eq!(
        response,
        json!({"approvalId": asked["approvalId"], "decision": "cancel_turn"})
    );
    p.event("agent_settled").await;
    let resolved = p
        .frames()
        .iter()
        .find(|f| f["type"] == "approval_resolved")
        .cloned()
        .unwrap();
    assert_eq!(resolved["decision"], "cancel_turn");
    assert_eq!(resolved["source"], "client");
    let end = p.tool_end("c1");
    assert_eq!(
        result_text(&end),
        "The user denied this tool call and stopped the turn."
    );
    assert_eq!(end["result"]["details"]["code"], "approval_denied");
    assert_eq!(
        mock.requests().len(),
        1,
        "the run stopped: no further provider call"
    );
    let state = p.request_ok("s1", "session.get_state", None).await;
    assert_eq!(state["activity"], json!({"type": "idle"}));
    assert_eq!(
        state["queuedInputs"]["steering"].as_array().unwrap().len(),
        1,
        "queued steering is kept: {state}"
    );
    assert!(!cwd.path.join("never").exists());
    let outcome = p
        .events()
        .into_iter()
        .find(|e| e["type"] == "operation_outcome")
        .unwrap();
    assert_eq!(outcome["outcome"]["result"], "cancelled");
    assert_eq!(outcome["outcome"]["evidence"]["decision"], "cancel_turn");
}

/// A zi with a session directory, one `bash` call pending approval.
async fn pending_with_journal(
    mock: &MockLlm,
    agent: &AgentDir,
    cwd: &TempCwd,
) -> (Harness, PathBuf) {
    let sessions = cwd.path.join("sessions");
    std::fs::create_dir_all(&sessions).unwrap();
    mock.push(Step::tool_call(
        "c1",
        "bash",
        json!({"command": "touch never"}),
    ));
    mock.push(Step::text("not reached"));
    let dir_arg = sessions.display().to_string();
    let mut p = rpc(agent, &cwd.path, &["--session-dir", &dir_arg])
        .spawn_rpc()
        .await;
    opt_in(&mut p, json!({"enabled": true, "policy": "untrusted"})).await;
    prompt(&mut p, "p1", "direct", "go").await;
    request_after(&mut p, 0).await;
    (p, sessions)
}

#[tokio::test]
async fn client_eof_while_pending_exits_0_and_journals_a_disconnect() {
    let mock = start_mock().await;
    let agent = agent_with(&mock, "{}");
    let cwd = temp_cwd();
    let (mut p, sessions) = pending_with_journal(&mock, &agent, &cwd).await;
    let frames_before = p.frames().len();
    p.exit_by_eof().await;
    assert!(
        p.frames()[frames_before..]
            .iter()
            .all(|f| f["type"] != "approval_resolved"),
        "no approval frame after the stop"
    );
    let outcomes = approval_outcomes(&sessions);
    assert_eq!(outcomes.len(), 1, "{outcomes:?}");
    let outcome = outcomes[0].to_string();
    assert!(outcome.contains("\"source\":\"disconnect\""), "{outcome}");
    assert!(outcome.contains("\"decision\":\"cancelled\""), "{outcome}");
    assert!(outcome.contains("\"result\":\"cancelled\""), "{outcome}");
    assert!(!cwd.path.join("never").exists());
}

#[tokio::test]
async fn sigterm_while_pending_exits_143_and_journals_a_disconnect() {
    let mock = start_mock().await;
    let agent = agent_with(&mock, "{}");
    let cwd = temp_cwd();
    let (mut p, sessions) = pending_with_journal(&mock, &agent, &cwd).await;
    p.signal(SIGTERM);
    let exited = p.wait_exit(WAIT).await;
    assert_eq!(exited.code, Some(143), "{}", exited.stderr);
    let outcomes = approval_outcomes(&sessions);
    assert_eq!(outcomes.len(), 1, "{outcomes:?}");
    assert!(
        outcomes[0]
            .to_string()
            .contains("\"source\":\"disconnect\""),
        "{outcomes:?}"
    );
    assert!(!cwd.path.join("never").exists());
}

/// How many times the EOF race below is run: each round is one zi process.
const EOF_ROUNDS: usize = 8;

/// One zi with a session directory whose model asks for `batch`; returns once `pending`
/// approval requests were sent.
async fn asked_batch(
    mock: &MockLlm,
    agent: &AgentDir,
    cwd: &Path,
    batch: &[(&str, &str, Value)],
    pending: usize,
    flags: &[&str],
) -> (Harness, PathBuf) {
    let sessions = cwd.join("sessions");
    std::fs::create_dir_all(&sessions).unwrap();
    mock.push(Step::tool_calls(batch));
    mock.push(Step::text("not reached"));
    let dir_arg = sessions.display().to_string();
    let mut args = vec!["--session-dir", dir_arg.as_str()];
    args.extend(flags);
    let mut p = rpc(agent, cwd, &args).spawn_rpc().await;
    opt_in(&mut p, json!({"enabled": true, "policy": "untrusted"})).await;
    prompt(&mut p, "p1", "direct", "go").await;
    for _ in 0..pending {
        let after = p
            .frames()
            .iter()
            .filter(|f| f["type"] == "approval_request")
            .map(|f| f["sequence"].as_u64().unwrap())
            .max()
            .unwrap_or(0);
        request_after(&mut p, after).await;
    }
    (p, sessions)
}

/// The journaled tool-result texts by tool call id.
fn journaled_results(dir: &Path) -> Vec<(String, String)> {
    journal_lines(dir)
        .into_iter()
        .filter(|line| line["type"] == "message" && line["message"]["role"] == "toolResult")
        .map(|line| {
            let message = &line["message"];
            let text = message["content"][0]["text"].as_str().unwrap_or_default();
            (
                message["toolCallId"].as_str().unwrap().to_string(),
                text.to_string(),
            )
        })
        .collect()
}

/// EOF while calls wait for approval takes the stop path
/// (docs/approvals.md#timeouts-interruption-and-eof): every pending request ends
/// `cancelled`/`disconnect`, the calls queued behind them (over the 16 pending, or later in a
/// sequential batch) end aborted, and nothing is journaled as an `unattended` denial. The race it
/// guards against (the run reaching a queued call between the approvals' disconnect and the run's
/// abort) is run in several processes, with a parallel batch of `write` calls (16 pending, 4
/// queued) and a sequential batch of `bash` calls, with and without an operator policy under the
/// connection's.
#[tokio::test]
async fn eof_with_queued_approvals_journals_no_unattended_denials() {
    for round in 0..EOF_ROUNDS {
        // A mock per round: an aborted run leaves its script's later steps unused.
        let mock = start_mock().await;
        let agent = agent_with(&mock, "{}");
        let cwd = temp_cwd();
        let (batch, pending): (Vec<(String, &str, Value)>, usize) = if round % 2 == 0 {
            let writes = (0..20)
                .map(|i| {
                    (
                        format!("w{i}"),
                        "write",
                        json!({"path": format!("f{i}.txt"), "content": "x"}),
                    )
                })
                .collect();
            (writes, 16)
        } else {
            let commands = (0..4)
                .map(|i| {
                    (
                        format!("b{i}"),
                        "bash",
                        json!({"command": format!("touch b{i}")}),
                    )
                })
                .collect();
            (commands, 1)
        };
        let calls: Vec<(&str, &str, Value)> = batch
            .iter()
            .map(|(id, name, args)| (id.as_str(), *name, args.clone()))
            .collect();
        // Without an operator policy a queued call once found the gate open after the
        // disconnect; with one it was journaled as an `unattended` denial.
        let flags: &[&str] = if round % 4 < 2 {
            &[]
        } else {
            &["--approvals", "on-failure"]
        };
        let (mut p, sessions) = asked_batch(&mock, &agent, &cwd.path, &calls, pending, flags).await;
        p.exit_by_eof().await;
        let outcomes = approval_outcomes(&sessions);
        let sources: Vec<String> = outcomes
            .iter()
            .map(|o| {
                o["evidence"]["source"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string()
            })
            .collect();
        assert_eq!(
            sources,
            vec!["disconnect".to_string(); pending],
            "round {round}: only the pending requests are journaled, each as a disconnect"
        );
        for outcome in &outcomes {
            assert_eq!(outcome["evidence"]["decision"], "cancelled", "{outcome}");
        }
        let asked: Vec<String> = p
            .frames()
            .iter()
            .filter(|f| f["type"] == "approval_request")
            .map(|f| f["approval"]["toolCallId"].as_str().unwrap().to_string())
            .collect();
        for (call_id, text) in journaled_results(&sessions) {
            if !asked.contains(&call_id) {
                assert_eq!(
                    text, "Tool execution was aborted",
                    "round {round}: the queued call {call_id} ends aborted"
                );
            }
        }
        assert_eq!(
            std::fs::read_dir(&cwd.path).unwrap().count(),
            1,
            "round {round}: no call ran (only the session directory is there)"
        );
    }
}

#[tokio::test]
async fn an_edit_whose_file_changed_while_waiting_is_stale() {
    let mock = start_mock().await;
    let agent = agent_with(&mock, "{}");
    let cwd = temp_cwd();
    let file = cwd.path.join("notes.txt");
    std::fs::write(&file, "alpha\nbeta\n").unwrap();
    mock.push(Step::tool_call(
        "e1",
        "edit",
        json!({"path": "notes.txt", "edits": [{"oldText": "alpha", "newText": "ALPHA"}]}),
    ));
    mock.push(Step::text("done"));
    let mut p = rpc(&agent, &cwd.path, &[]).no_session().spawn_rpc().await;
    opt_in(&mut p, json!({"enabled": true, "policy": "untrusted"})).await;
    prompt(&mut p, "p1", "direct", "go").await;
    let asked = request_after(&mut p, 0).await;
    assert_eq!(asked["kind"], "file_change");
    assert_eq!(asked["preview"]["type"], "diff");
    // Someone else changes the file while the request waits.
    std::fs::write(&file, "alpha\nbeta\ngamma\n").unwrap();
    p.request_ok(
        "r1",
        "approval.respond",
        Some(json!({"approvalId": asked["approvalId"], "decision": "allow_once"})),
    )
    .await;
    p.event("agent_settled").await;
    let end = p.tool_end("e1");
    assert_eq!(end["isError"], true, "{end}");
    assert_eq!(end["result"]["details"]["code"], "approval_stale");
    assert_eq!(end["result"]["details"]["approvalId"], asked["approvalId"]);
    let shown = file.canonicalize().unwrap();
    assert_eq!(
        result_text(&end),
        format!(
            "{} changed while the edit was awaiting approval. The change was not applied.",
            shown.display()
        )
    );
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        "alpha\nbeta\ngamma\n"
    );
}

fn one_shot(agent: &AgentDir, cwd: &Path, args: &[&str]) -> ZiCommand {
    ZiCommand::new(ZI)
        .current_dir(cwd)
        .no_session()
        .agent_dir(agent)
        .model("mock/m1")
        .args(args)
}

async fn run(builder: ZiCommand) -> Finished {
    builder
        .run_to_end(b"", WAIT)
        .await
        .unwrap_or_else(|e| panic!("run zi: {e}"))
}

#[tokio::test]
async fn headless_runs_resolve_ask_rules_as_unattended_approval_required() {
    let mock = start_mock().await;
    let agent = agent_with(&mock, "{}");
    let cwd = temp_cwd();
    let touch = || Step::tool_call("c1", "bash", json!({"command": "touch made"}));

    mock.push(touch());
    mock.push(Step::text("gave up"));
    let finished = run(one_shot(
        &agent,
        &cwd.path,
        &[
            "--mode",
            "json",
            "--approvals",
            "on-failure",
            "--ask",
            "bash(touch:*)",
            "go",
        ],
    ))
    .await;
    assert_eq!(finished.code, Some(0), "{}", finished.stderr_text());
    let lines = finished.json_lines();
    let end = lines
        .iter()
        .find(|l| l["type"] == "tool_execution_end")
        .cloned()
        .unwrap();
    assert_eq!(
        result_text(&end),
        "This tool call needs approval (rule bash(touch:*)), but no client can approve it in this zi run. It was not run."
    );
    assert_eq!(end["result"]["details"]["code"], "approval_required");
    let outcome = lines
        .iter()
        .find(|l| l["type"] == "operation_outcome")
        .cloned()
        .expect("the unattended outcome in the json stream");
    assert_eq!(outcome["outcome"]["capability"], "approval");
    assert_eq!(outcome["outcome"]["evidence"]["source"], "unattended");
    assert_eq!(outcome["outcome"]["evidence"]["reason"], "rule");
    assert_eq!(outcome["outcome"]["evidence"]["rule"], "bash(touch:*)");
    assert!(!cwd.path.join("made").exists());

    // Policy `never` with an ask rule: refused without asking, nothing journaled.
    mock.push(touch());
    mock.push(Step::text("gave up"));
    let finished = run(one_shot(
        &agent,
        &cwd.path,
        &["--mode", "json", "--ask", "bash(touch:*)", "go"],
    ))
    .await;
    assert_eq!(finished.code, Some(0), "{}", finished.stderr_text());
    let lines = finished.json_lines();
    let end = lines
        .iter()
        .find(|l| l["type"] == "tool_execution_end")
        .cloned()
        .unwrap();
    assert_eq!(
        result_text(&end),
        "This tool call needs approval (rule bash(touch:*)), but the approval policy is never. It was not run."
    );
    assert!(lines.iter().all(|l| l["type"] != "operation_outcome"));
    assert!(!cwd.path.join("made").exists());

    // `-p` (text): the same refusal, the model's final text printed, exit code unchanged.
    mock.push(touch());
    mock.push(Step::text("gave up"));
    let finished = run(one_shot(
        &agent,
        &cwd.path,
        &["-p", "--approvals", "untrusted", "go"],
    ))
    .await;
    assert_eq!(finished.code, Some(0), "{}", finished.stderr_text());
    assert_eq!(finished.stdout_text(), "gave up\n");
    assert!(!cwd.path.join("made").exists());
    let requests = mock.requests();
    let replayed = requests.last().unwrap().body.to_string();
    assert!(
        replayed.contains("needs approval (policy untrusted), but no client can approve it"),
        "the model saw the refusal"
    );

    // `--approvals never --sandbox full` restores v1 over settings.
    let strict = agent_with(&mock, r#"{"approvals": {"policy": "untrusted"}}"#);
    mock.push(touch());
    mock.push(Step::text("ran"));
    let finished = run(one_shot(
        &strict,
        &cwd.path,
        &["-p", "--approvals", "never", "--sandbox", "full", "go"],
    ))
    .await;
    assert_eq!(finished.code, Some(0), "{}", finished.stderr_text());
    assert!(cwd.path.join("made").exists(), "v1: the command ran");
}

/// Replaces what differs between two runs by nature (ids, times, durations, paths of the
/// temporary directories) so the frames of two runs compare byte for byte.
fn normalized(frame: &Value, cwd: &Path) -> String {
    fn walk(value: &mut Value) {
        match value {
            Value::Object(map) => {
                for (key, item) in map.iter_mut() {
                    let volatile = matches!(
                        key.as_str(),
                        "timestamp"
                            | "sequence"
                            | "durationMs"
                            | "sessionId"
                            | "id"
                            | "parentId"
                            | "entryId"
                            | "startedAt"
                            | "finishedAt"
                            | "createdAt"
                            | "taskId"
                            | "outputPath"
                            | "completionId"
                    );
                    if volatile && !item.is_object() && !item.is_array() {
                        *item = json!("*");
                    } else {
                        walk(item);
                    }
                }
            }
            Value::Array(items) => items.iter_mut().for_each(walk),
            _ => {}
        }
    }
    let mut value = frame.clone();
    walk(&mut value);
    value
        .to_string()
        .replace(&cwd.display().to_string(), "<cwd>")
}

/// One scripted session with `bash`, `write`, `edit` and a background task; the frames.
async fn scripted_session(args: &[&str], settings: &str) -> Vec<String> {
    let mock = start_mock().await;
    let agent = agent_with(&mock, settings);
    let cwd = temp_cwd();
    std::fs::write(cwd.path.join("a.txt"), "one\ntwo\n").unwrap();
    mock.push(Step::tool_call("b1", "bash", json!({"command": "echo hi"})));
    mock.push(Step::tool_call(
        "w1",
        "write",
        json!({"path": "b.txt", "content": "new\n"}),
    ));
    mock.push(Step::tool_call(
        "e1",
        "edit",
        json!({"path": "a.txt", "edits": [{"oldText": "two", "newText": "TWO"}]}),
    ));
    mock.push(Step::tool_call(
        "t1",
        "bash",
        json!({"command": "true", "background": true}),
    ));
    mock.push(Step::text("done"));
    let mut p = rpc(&agent, &cwd.path, args).no_session().spawn_rpc().await;
    prompt(&mut p, "p1", "direct", "go").await;
    p.event("agent_settled").await;
    p.request_ok("s1", "session.get_state", None).await;
    // Both runs are compared once the background task has settled (its outcome is journaled).
    p.wait_for("the background task's outcome", |f| {
        f["type"] == "session_event"
            && f["event"]["type"] == "operation_outcome"
            && f["event"]["outcome"]["operationId"] == "shell/background_task/task-1"
    })
    .await;
    // The background task finishes at its own pace: its frames are compared as a set, the
    // rest in order.
    let (mut background, mut frames): (Vec<String>, Vec<String>) = p
        .frames()
        .iter()
        .map(|f| normalized(f, &cwd.path))
        .partition(|f| f.contains("shell/background_task/") || f.contains("shell_task_changed"));
    drop(p);
    background.sort();
    // `shell_task_changed` says "look again"; how many a task emits depends on how its output
    // and exit interleave, so equal runs compare the set of distinct frames.
    background.dedup();
    frames.push("-- background task --".into());
    frames.append(&mut background);
    frames
}

#[tokio::test]
async fn a_client_that_never_opts_in_sees_the_frames_of_a_run_without_approvals() {
    let plain = scripted_session(&[], "{}").await;
    // Everything configured that lets these calls run: the gate evaluates every call, and a
    // client that never opted in must not see a byte of it.
    let configured = scripted_session(
        &[
            "--approvals",
            "on-failure",
            "--allow",
            "bash(echo:*)",
            "--ask",
            "bash(git push:*)",
            "--deny",
            "read(.env)",
            "--approval-timeout-ms",
            "5000",
        ],
        r#"{"approvals": {"rules": {"deny": ["bash(rm -rf:*)"]}}}"#,
    )
    .await;
    assert_eq!(plain.len(), configured.len(), "{plain:#?}\n{configured:#?}");
    for (a, b) in plain.iter().zip(&configured) {
        assert_eq!(a, b);
    }
    let types: Vec<&str> = ["ready", "response", "session_event"].to_vec();
    assert!(
        configured.iter().filter(|f| f.starts_with('{')).all(|f| {
            let v: Value = serde_json::from_str(f).unwrap();
            types.contains(&v["type"].as_str().unwrap())
        }),
        "no new frame type"
    );
    assert!(
        configured.iter().all(|f| !f.contains("\"approvals\"")),
        "no approvals key in any state"
    );
}

#[tokio::test]
async fn mcp_tools_are_matched_by_rules_like_any_other_tool() {
    let mock = start_mock().await;
    let markers = temp_cwd();
    let agent = AgentDir::new()
        .models(&mock, KEY, &[json!({"id": "m1"})])
        .settings(
        &json!({
            "mcpServers": {"dsrv": {"command": stdio_command(&markers.path), "tools": "direct"}},
            "approvals": {
                "policy": "untrusted",
                "rules": {
                    "allow": ["mcp_status"],
                    "ask": ["mcp__dsrv__echo"],
                    "deny": ["mcp__dsrv__add"],
                },
            },
        })
        .to_string(),
    );
    let cwd = temp_cwd();
    let mut p = rpc(&agent, &cwd.path, &[])
        .no_session()
        .timeout(Duration::from_secs(120))
        .spawn_rpc()
        .await;
    p.set_timeout(Duration::from_secs(120));
    opt_in(&mut p, json!({"enabled": true})).await;
    // The server connects in the background; the allowed catalog tool reports when it is ready.
    let deadline = Instant::now() + Duration::from_secs(120);
    for attempt in 0.. {
        let call = format!("status-{attempt}");
        mock.push(Step::tool_call(&call, "mcp_status", json!({})));
        mock.push(Step::text("ok"));
        let after = p.last_sequence();
        prompt(&mut p, &format!("ps{attempt}"), "direct", "status").await;
        p.event_after("agent_settled", after).await;
        let status = p.tool_end(&call)["result"]["details"].clone();
        if status["servers"][0]["state"] == "ready" {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the server is ready in time: {status}"
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    assert!(
        p.frames().iter().all(|f| f["type"] != "approval_request"),
        "the allow rule let mcp_status run unasked"
    );

    mock.push(Step::tool_call(
        "d1",
        "mcp__dsrv__add",
        json!({"a": 1, "b": 2}),
    ));
    mock.push(Step::tool_call(
        "a1",
        "mcp__dsrv__echo",
        json!({"text": "asked"}),
    ));
    mock.push(Step::text("done"));
    let after = p.last_sequence();
    prompt(&mut p, "p1", "direct", "go").await;
    let asked = request_after(&mut p, after).await;
    assert_eq!(asked["toolName"], "mcp__dsrv__echo");
    assert_eq!(asked["kind"], "tool");
    assert_eq!(
        asked["reason"],
        json!({"type": "rule", "rule": "mcp__dsrv__echo", "source": "global"})
    );
    assert_eq!(asked["summary"], "Call mcp__dsrv__echo");
    assert_eq!(
        asked["decisions"],
        json!(["allow_once", "deny", "cancel_turn"])
    );
    p.request_ok(
        "r1",
        "approval.respond",
        Some(json!({"approvalId": asked["approvalId"], "decision": "allow_once"})),
    )
    .await;
    p.event_after("agent_settled", after).await;
    let denied = p.tool_end("d1");
    assert_eq!(denied["result"]["details"]["code"], "denied_by_rule");
    assert_eq!(
        result_text(&denied),
        "This tool call is denied by the approval rule mcp__dsrv__add (global settings)."
    );
    assert_eq!(result_text(&p.tool_end("a1")), "echo: asked");
}
