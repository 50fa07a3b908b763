//! Black-box tests of tool approvals (docs/approvals.md#approvals): the compatibility of runs that
//! never opt in, decoding of the two methods, rules across layers, the wire flow
//! (`approval_request` → `approval.respond` → `approval_resolved`), the lifecycle (timeout,
//! interrupt, EOF) and the headless modes.

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};
use zi_test_support::dirs::{AgentDir, temp_cwd};
use zi_test_support::harness::Harness;
use zi_test_support::mock_llm::{MockLlm, Step, start_mock};
use zi_test_support::zi_command::ZiCommand;

use crate::wire_support::result_text;

const ZI: &str = env!("CARGO_BIN_EXE_zi");
const WAIT: Duration = Duration::from_secs(30);
const KEY: &str = "approvals-key";

fn agent_with(mock: &MockLlm, settings: &str) -> AgentDir {
    AgentDir::new()
        .models(mock, KEY, &[json!({"id": "m1"})])
        .settings(settings)
}

async fn spawn(agent: &AgentDir, cwd: &Path, args: &[&str]) -> Harness {
    ZiCommand::rpc(ZI, agent, cwd)
        .no_session()
        .model("mock/m1")
        .args(args)
        .timeout(WAIT)
        .spawn_rpc()
        .await
}

/// Scripts one `bash` call per turn, `(call id, command)` in order, then the answer `done`.
fn bash_then_done(mock: &MockLlm, calls: &[(&str, &str)]) {
    for (id, command) in calls {
        mock.push(Step::tool_calls(&[(
            *id,
            "bash",
            json!({"command": command}),
        )]));
    }
    mock.push(Step::text("done"));
}

async fn opt_in(p: &mut Harness, params: Value) -> Value {
    p.request_ok("ap1", "connection.set_approvals", Some(params))
        .await
}

async fn approval_request(p: &mut Harness) -> Value {
    p.wait_for("approval_request", |f| f["type"] == "approval_request")
        .await["approval"]
        .clone()
}

#[tokio::test]
async fn without_opt_in_needed_approvals_are_unattended_and_frames_stay_v1() {
    let mock = start_mock().await;
    let agent = agent_with(&mock, r#"{"approvals": {"policy": "untrusted"}}"#);
    let cwd = temp_cwd();
    bash_then_done(&mock, &[("c1", "touch made")]);
    let mut p = spawn(&agent, &cwd.path, &[]).await;
    assert!(p.ready().get("approvals").is_none());
    p.prompt("p1", "go").await;
    p.event("agent_settled").await;
    let end = p.tool_end("c1");
    assert_eq!(end["isError"], json!(true));
    assert_eq!(
        result_text(&end),
        "This tool call needs approval (policy untrusted), but no client can approve it in this zi run. It was not run."
    );
    assert_eq!(end["result"]["details"]["code"], "approval_required");
    assert!(!cwd.path.join("made").exists(), "the command did not run");
    let outcome = p
        .events()
        .into_iter()
        .find(|e| e["type"] == "operation_outcome")
        .expect("an unattended outcome");
    let outcome = &outcome["outcome"];
    assert!(
        outcome["operationId"]
            .as_str()
            .unwrap()
            .starts_with("approval/")
    );
    assert_eq!(outcome["capability"], "approval");
    assert_eq!(outcome["result"], "failed");
    assert_eq!(outcome["evidence"]["source"], "unattended");
    assert_eq!(outcome["evidence"]["reason"], "policy");
    let state = p.request_ok("s1", "session.get_state", None).await;
    assert!(
        state.get("approvals").is_none(),
        "no state key without opt-in"
    );
    assert!(
        p.frames()
            .iter()
            .all(|f| ["ready", "response", "session_event"].contains(&f["type"].as_str().unwrap())),
        "no new frame type without opt-in"
    );
}

#[tokio::test]
async fn decoding_and_operation_errors_are_exact() {
    let mock = start_mock().await;
    let agent = agent_with(&mock, "{}");
    let cwd = temp_cwd();
    let mut p = spawn(&agent, &cwd.path, &[]).await;
    set_approvals_decoding_errors_are_exact(&mut p).await;
    let respond = [
        (
            json!({"approvalId": "", "decision": "deny"}),
            "Approval id must be a non-empty string of at most 256 bytes",
        ),
        (
            json!({"approvalId": "a", "decision": "maybe"}),
            "Approval decision must be allow_once, allow_session, deny, or cancel_turn",
        ),
        (
            json!({"approvalId": "a", "decision": "allow_once", "message": "m"}),
            "Approval message is allowed only with decision deny",
        ),
        (
            json!({"approvalId": "a", "decision": "deny", "rule": "bash"}),
            "Approval rule is allowed only with decision allow_session",
        ),
    ];
    for (index, (params, message)) in respond.into_iter().enumerate() {
        let id = format!("r{index}");
        p.send(&id, "approval.respond", Some(params)).await;
        let error = p.protocol_error(Some(&id)).await;
        assert_eq!(error["message"], message);
    }
    let not_enabled = p
        .request(
            "n1",
            "approval.respond",
            Some(json!({"approvalId": "a", "decision": "deny"})),
        )
        .await;
    assert_eq!(
        not_enabled["error"]["message"],
        "Approvals are not enabled on this connection"
    );
    let state = opt_in(&mut p, json!({"enabled": true, "policy": "accept-edits"})).await;
    assert_eq!(state["enabled"], true);
    assert_eq!(state["policy"], "accept-edits");
    assert_eq!(state["pending"], json!([]));
    let missing = p
        .request(
            "n2",
            "approval.respond",
            Some(json!({"approvalId": "nope", "decision": "deny"})),
        )
        .await;
    assert_eq!(missing["error"]["code"], "not_found");
    assert_eq!(missing["error"]["message"], "Approval not found: nope");
    let looser = p
        .request(
            "n3",
            "connection.set_approvals",
            Some(json!({"enabled": true, "policy": "never"})),
        )
        .await;
    assert_eq!(
        looser["ok"], true,
        "the operator set no policy: never is not looser than the default"
    );
}

/// `connection.set_approvals` params that do not decode: each an `invalid_request` with its exact
/// message.
async fn set_approvals_decoding_errors_are_exact(p: &mut Harness) {
    let cases = [
        (json!({}), "Approvals enabled must be a boolean"),
        (
            json!({"enabled": true, "x": 1}),
            "RPC request contains unknown fields",
        ),
        (
            json!({"enabled": "yes"}),
            "Approvals enabled must be a boolean",
        ),
        (
            json!({"enabled": true, "policy": "always"}),
            "Approval policy must be never, on-failure, accept-edits, or untrusted",
        ),
        (
            json!({"enabled": true, "sandbox": {"mode": "full", "x": 1}}),
            "Sandbox must be an object with mode, network, or writableRoots",
        ),
        (
            json!({"enabled": true, "sandbox": {"mode": "none"}}),
            "Sandbox mode must be read-only, workspace-write, or full",
        ),
        (
            json!({"enabled": true, "sandbox": {"writableRoots": ["rel"]}}),
            "Sandbox writable roots must be at most 32 absolute paths of at most 4096 bytes",
        ),
        (
            json!({"enabled": true, "rules": {"allow": "bash"}}),
            "Approval rules must be an object of at most 256 rules per list",
        ),
        (
            json!({"enabled": true, "rules": {"deny": ["bash(npm *)"]}}),
            "Invalid approval rule: bash(npm *): \"*\" is allowed only as a trailing \":*\"",
        ),
        (
            json!({"enabled": true, "timeoutMs": 86_400_001u64}),
            "Approval timeout must be an integer from 0 through 86400000",
        ),
    ];
    for (index, (params, message)) in cases.into_iter().enumerate() {
        let id = format!("d{index}");
        p.send(&id, "connection.set_approvals", Some(params)).await;
        let error = p.protocol_error(Some(&id)).await;
        assert_eq!(error["code"], "invalid_request");
        assert_eq!(error["message"], message);
    }
}

#[tokio::test]
async fn a_connection_cannot_loosen_the_operator_policy() {
    let mock = start_mock().await;
    let agent = agent_with(&mock, "{}");
    let cwd = temp_cwd();
    let mut p = spawn(&agent, &cwd.path, &["--approvals", "accept-edits"]).await;
    let looser = p
        .request(
            "l1",
            "connection.set_approvals",
            Some(json!({"enabled": true, "policy": "on-failure"})),
        )
        .await;
    assert_eq!(looser["error"]["code"], "operation_failed");
    assert_eq!(
        looser["error"]["message"],
        "Approval policy cannot be looser than accept-edits set by --approvals"
    );
}

#[tokio::test]
async fn the_wire_flow_allow_once_deny_with_message_and_session_grants() {
    let mock = start_mock().await;
    let agent = agent_with(&mock, "{}");
    let cwd = temp_cwd();
    bash_then_done(
        &mock,
        &[
            ("c1", "touch one"),
            ("c2", "touch two"),
            ("c3", "touch  three"),
            ("c4", "touch three"),
        ],
    );
    let mut p = spawn(&agent, &cwd.path, &[]).await;
    p.request_ok("e1", "connection.set_events", Some(json!({"mode": "none"})))
        .await;
    opt_in(&mut p, json!({"enabled": true, "policy": "untrusted"})).await;
    p.prompt("p1", "go").await;

    let first = the_first_approval_request(&mut p).await;

    allow_once_and_a_second_answer_is_refused(&mut p, &first).await;

    let second = approval_request(&mut p).await;
    assert_eq!(second["toolCallId"], "c2");
    let id2 = second["approvalId"].as_str().unwrap().to_string();
    let not_offered = p
        .request(
            "a3",
            "approval.respond",
            Some(json!({"approvalId": id2, "decision": "allow_session", "rule": "bash(git:*)"})),
        )
        .await;
    assert_eq!(
        not_offered["error"]["message"],
        "Approval rule bash(git:*) does not match tool call c2"
    );
    p.request_ok(
        "a4",
        "approval.respond",
        Some(json!({"approvalId": id2, "decision": "deny", "message": "Not now."})),
    )
    .await;

    let third = approval_request(&mut p).await;
    let id3 = third["approvalId"].as_str().unwrap().to_string();
    p.request_ok(
        "a5",
        "approval.respond",
        Some(json!({"approvalId": id3, "decision": "allow_session"})),
    )
    .await;
    // The identical (normalised) fourth call is not asked.
    let done = p.client().await_idle(None).await;
    assert!(done.is_ok(), "{done:?}");
    let state = p.request_ok("s2", "session.get_state", None).await;
    assert_eq!(state["approvals"]["sessionGrants"], 1);
    assert_eq!(state["approvals"]["pending"], json!([]));
    assert_eq!(
        p.frames()
            .iter()
            .filter(|f| f["type"] == "approval_request")
            .count(),
        3
    );
    assert!(cwd.path.join("one").exists());
    assert!(!cwd.path.join("two").exists());
    assert!(cwd.path.join("three").exists());
    // The model saw the deny message.
    let bodies: Vec<String> = mock.requests().iter().map(|r| r.body.to_string()).collect();
    assert!(
        bodies
            .iter()
            .any(|b| b.contains("The user denied this tool call.\\n\\nThe user said: Not now.")),
        "deny message reaches the model"
    );
    let outcomes = p.request_ok("o1", "session.get_outcomes", None).await;
    let results: Vec<&str> = outcomes["outcomes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|o| o["capability"] == "approval")
        .map(|o| o["result"].as_str().unwrap())
        .collect();
    assert_eq!(results, ["succeeded", "failed", "succeeded"]);
}

/// The first request carries every key, in order, and shows in the state as pending.
async fn the_first_approval_request(p: &mut Harness) -> Value {
    let first = approval_request(p).await;
    let keys: Vec<&str> = first
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys,
        [
            "approvalId",
            "toolCallId",
            "toolName",
            "kind",
            "reason",
            "summary",
            "args",
            "cwd",
            "sandbox",
            "suggestedRule",
            "decisions",
            "requestedAt",
            "expiresAt"
        ]
    );
    assert_eq!(first["toolCallId"], "c1");
    assert_eq!(first["kind"], "exec");
    assert_eq!(
        first["reason"],
        json!({"type": "policy", "policy": "untrusted"})
    );
    assert_eq!(first["summary"], "Run: touch one");
    assert_eq!(first["suggestedRule"], "bash(touch:*)");
    assert_eq!(
        first["decisions"],
        json!(["allow_once", "allow_session", "deny", "cancel_turn"])
    );
    assert_eq!(first["expiresAt"], Value::Null);
    let state = p.request_ok("s1", "session.get_state", None).await;
    assert_eq!(state["approvals"]["pending"][0], first);
    assert_eq!(state["activity"]["type"], "running");
    first
}

/// `allow_once` answers the first request (`approval_resolved` precedes the response); a second
/// answer is refused.
async fn allow_once_and_a_second_answer_is_refused(p: &mut Harness, first: &Value) {
    let id = first["approvalId"].as_str().unwrap().to_string();
    let answered = p
        .request_ok(
            "a1",
            "approval.respond",
            Some(json!({"approvalId": id, "decision": "allow_once"})),
        )
        .await;
    assert_eq!(
        answered,
        json!({"approvalId": id, "decision": "allow_once"})
    );
    let resolved = p
        .frames()
        .iter()
        .find(|f| f["type"] == "approval_resolved")
        .cloned()
        .expect("approval_resolved precedes the response");
    assert_eq!(resolved["decision"], "allow_once");
    assert_eq!(resolved["source"], "client");
    let again = p
        .request(
            "a2",
            "approval.respond",
            Some(json!({"approvalId": id, "decision": "deny"})),
        )
        .await;
    assert_eq!(
        again["error"]["message"],
        format!("Approval already resolved: {id}")
    );
}

#[tokio::test]
async fn rules_across_layers_deny_beats_a_connection_allow() {
    let mock = start_mock().await;
    let agent = agent_with(
        &mock,
        r#"{"approvals": {"rules": {"deny": ["bash(rm:*)"]}}}"#,
    );
    let cwd = temp_cwd();
    std::fs::write(cwd.path.join("keep"), "x").unwrap();
    bash_then_done(&mock, &[("c1", "sudo -n rm keep"), ("c2", "ls && echo ok")]);
    let mut p = spawn(&agent, &cwd.path, &[]).await;
    opt_in(
        &mut p,
        json!({"enabled": true, "policy": "untrusted", "rules": {"allow": ["bash(rm:*)", "bash(echo:*)"]}}),
    )
    .await;
    p.prompt("p1", "go").await;
    p.event("agent_settled").await;
    let denied = p.tool_end("c1");
    assert_eq!(
        result_text(&denied),
        "This tool call is denied by the approval rule bash(rm:*) (global settings)."
    );
    assert_eq!(denied["result"]["details"]["code"], "denied_by_rule");
    assert!(cwd.path.join("keep").exists());
    // `ls` is on the safe list and `echo ok` is allowed: the compound runs without asking.
    assert_eq!(p.tool_end("c2")["isError"], json!(false));
    assert!(!p.frames().iter().any(|f| f["type"] == "approval_request"));
}

/// Issue 23 C8: a deny rule sees through `time -p`, an absolute path to `env` or to the
/// executable, and git's options before its subcommand. A `git` on PATH records every run, so a
/// command that slipped through leaves a file behind.
#[tokio::test]
async fn deny_rules_see_through_time_env_paths_and_git_options() {
    let mock = start_mock().await;
    let agent = agent_with(&mock, "{}");
    let cwd = temp_cwd();
    let bin = cwd.path.join("bin");
    std::fs::create_dir(&bin).unwrap();
    let git = bin.join("git");
    std::fs::write(&git, "#!/bin/sh\ntouch \"$(dirname \"$0\")/../RAN-$$\"\n").unwrap();
    std::fs::set_permissions(&git, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let absolute = git.display().to_string();
    let commands = [
        "time -p git push".to_string(),
        "/usr/bin/env git push".to_string(),
        "git -C . push".to_string(),
        "git --no-pager push".to_string(),
        format!("{absolute} push origin main"),
        "git -c push.default=current --git-dir=.git -P push".to_string(),
        format!("sudo -n {absolute} -C . push"),
    ];
    let calls: Vec<(String, Value)> = commands
        .iter()
        .enumerate()
        .map(|(i, command)| (format!("c{i}"), json!({"command": command})))
        .collect();
    let steps: Vec<(&str, &str, Value)> = calls
        .iter()
        .map(|(id, args)| (id.as_str(), "bash", args.clone()))
        .collect();
    mock.push(Step::tool_calls(&steps));
    mock.push(Step::text("done"));
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
    let mut p = ZiCommand::rpc(ZI, &agent, &cwd.path)
        .no_session()
        .model("mock/m1")
        .args(["--deny", "bash(git push:*)"])
        .env("PATH", path)
        .timeout(WAIT)
        .spawn_rpc()
        .await;
    p.prompt("p1", "push it").await;
    p.event("agent_settled").await;
    for (i, command) in commands.iter().enumerate() {
        let end = p.tool_end(&format!("c{i}"));
        assert_eq!(
            end["result"]["details"]["code"], "denied_by_rule",
            "{command}: {end}"
        );
        assert!(
            result_text(&end).contains("bash(git push:*)"),
            "{command}: {end}"
        );
    }
    let ran: Vec<_> = std::fs::read_dir(&cwd.path)
        .unwrap()
        .flatten()
        .map(|entry| entry.file_name())
        .filter(|name| name.to_string_lossy().starts_with("RAN-"))
        .collect();
    assert!(ran.is_empty(), "git ran: {ran:?}");
}

#[tokio::test]
async fn an_invalid_global_rule_fails_closed_but_read_still_works() {
    let mock = start_mock().await;
    let agent = agent_with(&mock, r#"{"approvals": {"rules": {"deny": ["bash(rm"]}}}"#);
    let cwd = temp_cwd();
    std::fs::write(cwd.path.join("a.txt"), "hello").unwrap();
    mock.push(Step::tool_calls(&[
        ("c1", "bash", json!({"command": "echo hi"})),
        ("c2", "read", json!({"path": "a.txt"})),
    ]));
    mock.push(Step::text("done"));
    let mut p = spawn(&agent, &cwd.path, &[]).await;
    p.prompt("p1", "go").await;
    p.event("agent_settled").await;
    let bash = p.tool_end("c1");
    assert_eq!(bash["result"]["details"]["code"], "approval_config_invalid");
    let settings = agent.path().join("settings.json");
    assert_eq!(
        result_text(&bash),
        format!(
            "Approval settings are invalid ({}: Invalid approval rule: bash(rm: unknown syntax). The tool call was not run.",
            settings.display()
        )
    );
    assert_eq!(p.tool_end("c2")["isError"], json!(false));
    assert!(p.stderr_text().contains("Warning: (global settings)"));
}

#[tokio::test]
async fn timeout_interrupt_and_eof_resolve_pending_requests() {
    let mock = start_mock().await;
    let agent = agent_with(&mock, "{}");
    let cwd = temp_cwd();
    mock.push(Step::tool_calls(&[(
        "t1",
        "bash",
        json!({"command": "touch late"}),
    )]));
    mock.push(Step::text("timed out"));
    mock.push(Step::tool_calls(&[
        ("w1", "write", json!({"path": "a.txt", "content": "a"})),
        ("w2", "write", json!({"path": "b.txt", "content": "b"})),
        ("w3", "write", json!({"path": "c.txt", "content": "c"})),
    ]));
    let mut p = spawn(&agent, &cwd.path, &[]).await;
    opt_in(
        &mut p,
        json!({"enabled": true, "policy": "untrusted", "timeoutMs": 200}),
    )
    .await;
    p.prompt("p1", "go").await;
    let asked = approval_request(&mut p).await;
    assert!(asked["expiresAt"].as_u64().unwrap() >= asked["requestedAt"].as_u64().unwrap() + 200);
    p.event("agent_settled").await;
    let timed = p
        .frames()
        .iter()
        .find(|f| f["type"] == "approval_resolved")
        .cloned()
        .unwrap();
    assert_eq!(timed["decision"], "deny");
    assert_eq!(timed["source"], "timeout");
    assert_eq!(
        result_text(&p.tool_end("t1")),
        "The approval request timed out after 0.2 seconds. The tool call was not run."
    );

    opt_in(&mut p, json!({"enabled": true, "timeoutMs": 0})).await;
    p.prompt("p2", "again").await;
    let after = p.last_sequence();
    for _ in 0..3 {
        p.wait_for("three requests", |f| {
            f["type"] == "approval_request" && f["sequence"].as_u64().unwrap() > after
        })
        .await;
        if p.frames()
            .iter()
            .filter(|f| f["type"] == "approval_request" && f["sequence"].as_u64().unwrap() > after)
            .count()
            == 3
        {
            break;
        }
        let _ = p.next_frame_within(Duration::from_millis(100)).await;
    }
    let disable = p
        .request(
            "d1",
            "connection.set_approvals",
            Some(json!({"enabled": false})),
        )
        .await;
    assert_eq!(
        disable["error"]["message"],
        "Cannot disable approvals while 3 approval requests are pending"
    );
    let interrupted = p.request("i1", "session.interrupt", None).await;
    assert_eq!(interrupted["ok"], true);
    let response_at = interrupted["sequence"].as_u64().unwrap();
    let cancelled: Vec<&Value> = p
        .frames()
        .iter()
        .filter(|f| f["type"] == "approval_resolved" && f["source"] == "interrupt")
        .collect();
    assert_eq!(cancelled.len(), 3);
    assert!(
        cancelled
            .iter()
            .all(|f| f["decision"] == "cancelled" && f["sequence"].as_u64().unwrap() < response_at)
    );
    let state = p.request_ok("s1", "session.get_state", None).await;
    assert_eq!(state["approvals"]["pending"], json!([]));
    assert!(!cwd.path.join("a.txt").exists());
}

#[tokio::test]
async fn a_rule_reason_request_offers_no_session_grant_and_suggests_no_rule() {
    let mock = start_mock().await;
    let agent = agent_with(&mock, "{}");
    let cwd = temp_cwd();
    bash_then_done(&mock, &[("c1", "git push origin main")]);
    let mut p = spawn(&agent, &cwd.path, &[]).await;
    opt_in(
        &mut p,
        json!({"enabled": true, "policy": "on-failure", "rules": {"ask": ["bash(git push:*)"]}}),
    )
    .await;
    p.prompt("p1", "go").await;
    let asked = approval_request(&mut p).await;
    assert_eq!(
        asked["reason"],
        json!({"type": "rule", "rule": "bash(git push:*)", "source": "connection"})
    );
    assert_eq!(
        asked["decisions"],
        json!(["allow_once", "deny", "cancel_turn"])
    );
    // `suggestedRule` is a rule to pass with `allow_session`, which is not offered here.
    assert!(asked.get("suggestedRule").is_none(), "{asked}");
    let state = p.request_ok("s1", "session.get_state", None).await;
    assert_eq!(state["approvals"]["pending"][0], asked);
    p.request_ok(
        "r1",
        "approval.respond",
        Some(json!({"approvalId": asked["approvalId"], "decision": "deny"})),
    )
    .await;
    p.event("agent_settled").await;
    assert_eq!(p.tool_end("c1")["isError"], json!(true));
}
