//! Escalation of sandbox denials (docs/approvals.md), the hint without an opted-in client, and a
//! connection that tightens the sandbox.

use super::*;

/// Prompts one `bash` call, waits for its `approval_request` and answers it; returns the
/// request and the call's `tool_execution_end`.
async fn escalate(
    s: &Scene,
    p: &mut Harness,
    call_id: &str,
    command: &str,
    answer: Value,
) -> (Value, Value) {
    let call = (call_id, "bash", json!({"command": command}));
    s.call_asked(p, call, answer).await
}

#[tokio::test]
async fn a_sandbox_denied_command_escalates_and_allow_once_reruns_it_outside() {
    let Some(abi) = landlock_abi() else { return };
    let s = scene().await;
    let mut p = s
        .spawn(&["--sandbox", "workspace-write", "--approvals", "on-failure"])
        .await;
    let state = p
        .request_ok(
            "ap",
            "connection.set_approvals",
            Some(json!({"enabled": true})),
        )
        .await;
    assert_eq!(state["policy"], "on-failure");
    assert_eq!(
        state["sandbox"],
        json!({
            "mode": "workspace-write",
            "network": false,
            "writableRoots": s.roots_text().split(", ").collect::<Vec<_>>(),
            "enforcement": "landlock+seccomp",
            "landlockAbi": abi,
        })
    );

    let command = format!("echo escaped > {}/out.txt", s.home.display());
    let (asked, end) = escalate(
        &s,
        &mut p,
        "e1",
        &command,
        json!({"decision": "allow_once"}),
    )
    .await;
    assert_eq!(asked["kind"], "escalation", "{asked}");
    assert_eq!(
        asked["reason"],
        json!({"type": "sandbox_denied", "exitCode": 1, "signal": null})
    );
    assert_eq!(
        asked["summary"],
        format!("Run outside the sandbox: {command}")
    );
    assert_eq!(
        asked["sandbox"],
        json!({"mode": "workspace-write", "network": false})
    );
    assert_eq!(asked["preview"]["type"], "output");
    assert_eq!(asked["preview"]["exitCode"], 1);
    assert!(
        asked["preview"]["text"]
            .as_str()
            .unwrap()
            .contains("Permission denied"),
        "{asked}"
    );
    assert!(asked.get("suggestedRule").is_none(), "{asked}");
    assert_eq!(
        asked["decisions"],
        json!(["allow_once", "allow_session", "deny", "cancel_turn"])
    );
    assert_eq!(end["isError"], false, "{end}");
    assert_eq!(
        result_text(&end),
        "[The first attempt failed in the workspace-write sandbox (exit 1); re-ran without the sandbox after approval.]\n\n(no output)",
        "{end}"
    );
    assert_eq!(
        end["result"]["details"]["sandbox"],
        json!({"mode": "none", "escalatedFrom": "workspace-write", "approvalId": asked["approvalId"]})
    );
    assert_eq!(
        std::fs::read_to_string(s.home.join("out.txt")).unwrap(),
        "escaped\n"
    );
    let outcome = p
        .frames()
        .iter()
        .find(|f| {
            f["type"] == "session_event"
                && f["event"]["type"] == "operation_outcome"
                && f["event"]["outcome"]["operationId"]
                    == format!("approval/{}", asked["approvalId"].as_str().unwrap())
        })
        .cloned()
        .expect("the escalation's outcome");
    assert_eq!(outcome["event"]["outcome"]["operation"], "escalation");
    assert_eq!(outcome["event"]["outcome"]["result"], "succeeded");

    deny_keeps_the_sandboxed_result(&s, &mut p).await;

    allow_session_runs_the_command_outside_from_then_on(&s, &mut p).await;
}

/// `deny` keeps the sandboxed result, with the hint.
async fn deny_keeps_the_sandboxed_result(s: &Scene, p: &mut Harness) {
    let command = format!("echo kept > {}/denied.txt", s.home.display());
    let (_, end) = escalate(s, p, "e2", &command, json!({"decision": "deny"})).await;
    assert_eq!(end["isError"], true, "{end}");
    assert!(
        result_text(&end).ends_with(&format!(
            "[The command ran in the workspace-write sandbox (writes limited to {}, metadata changes to files below them, network off); it may have failed because of the sandbox.]",
            s.roots_text()
        )),
        "{end}"
    );
    assert_eq!(
        end["result"]["details"]["sandbox"]["mode"],
        "workspace-write"
    );
    assert!(!s.home.join("denied.txt").exists());
}

/// `allow_session` on an escalation: that exact command runs outside from then on, unasked.
async fn allow_session_runs_the_command_outside_from_then_on(s: &Scene, p: &mut Harness) {
    let command = format!("echo again >> {}/granted.txt", s.home.display());
    let (_, end) = escalate(s, p, "e3", &command, json!({"decision": "allow_session"})).await;
    assert_eq!(end["isError"], false, "{end}");
    let before = p
        .frames()
        .iter()
        .filter(|f| f["type"] == "approval_request")
        .count();
    let end = s.bash(p, &command).await;
    assert_eq!(end["isError"], false, "{end}");
    assert_eq!(
        end["result"]["details"]["sandbox"],
        json!({"mode": "none", "escalatedFrom": "workspace-write"})
    );
    assert_eq!(
        p.frames()
            .iter()
            .filter(|f| f["type"] == "approval_request")
            .count(),
        before,
        "the granted command was not asked again"
    );
    assert_eq!(
        std::fs::read_to_string(s.home.join("granted.txt")).unwrap(),
        "again\nagain\n"
    );
}

#[tokio::test]
async fn an_approved_escalation_ends_with_its_call_and_a_reused_call_id_is_asked_again() {
    let Some((s, mut p)) =
        sandboxed(&["--sandbox", "workspace-write", "--approvals", "on-failure"]).await
    else {
        return;
    };
    p.request_ok(
        "ap",
        "connection.set_approvals",
        Some(json!({"enabled": true})),
    )
    .await;
    let command = format!("echo once > {}/once.txt", s.home.display());
    let (_, end) = escalate(
        &s,
        &mut p,
        "same",
        &command,
        json!({"decision": "allow_once"}),
    )
    .await;
    assert_eq!(end["isError"], false, "{end}");
    assert!(s.home.join("once.txt").exists());

    // Call ids come from the model: a later call with the same id is a new call, confined
    // again and asked again, never let out by the earlier approval (which ran it unasked).
    let command = format!("echo stale > {}/stale.txt", s.home.display());
    let (asked, end) = escalate(&s, &mut p, "same", &command, json!({"decision": "deny"})).await;
    assert_eq!(asked["kind"], "escalation", "{asked}");
    assert_eq!(end["isError"], true, "{end}");
    assert_eq!(
        end["result"]["details"]["sandbox"]["mode"],
        "workspace-write"
    );
    assert!(!s.home.join("stale.txt").exists());
}

#[tokio::test]
async fn without_an_opted_in_client_a_sandbox_denial_gets_the_hint() {
    let Some((s, mut p)) =
        sandboxed(&["--sandbox", "workspace-write", "--approvals", "untrusted"]).await
    else {
        return;
    };
    s.mock.push(Step::tool_call(
        "c",
        "bash",
        json!({"command": format!("echo no > {}/x.txt", s.home.display())}),
    ));
    s.mock.push(Step::text("done"));
    // Untrusted asks before running: unattended, so approval_required, never an escalation.
    p.prompt("p1", "go").await;
    let end = p.event("tool_execution_end").await;
    p.event("agent_settled").await;
    assert_eq!(
        end["result"]["details"]["code"], "approval_required",
        "{end}"
    );
    drop(p);

    let mut p = s
        .spawn(&["--sandbox", "workspace-write", "--approvals", "on-failure"])
        .await;
    let end = s
        .bash(&mut p, &format!("echo no > {}/x.txt", s.home.display()))
        .await;
    assert_eq!(end["isError"], true, "{end}");
    assert!(
        result_text(&end).contains("it may have failed because of the sandbox."),
        "{end}"
    );
    assert!(
        p.frames().iter().all(|f| f["type"] != "approval_request"),
        "no frame without opt-in"
    );
    assert!(!s.home.join("x.txt").exists());
}

#[tokio::test]
async fn a_connection_tightens_the_sandbox_and_its_state_is_reported() {
    let Some(abi) = landlock_abi() else { return };
    let s = scene().await;
    let mut p = s.spawn(&[]).await;
    let state = p
        .request_ok(
            "ap",
            "connection.set_approvals",
            Some(json!({"enabled": true, "sandbox": {"mode": "read-only"}})),
        )
        .await;
    assert_eq!(
        state["sandbox"],
        json!({
            "mode": "read-only",
            "network": false,
            "writableRoots": [],
            "enforcement": "landlock+seccomp",
            "landlockAbi": abi,
        })
    );
    let snapshot = p.request_ok("s1", "session.get_state", None).await;
    assert_eq!(snapshot["approvals"]["sandbox"], state["sandbox"]);
    let end = s.bash(&mut p, "touch inside.txt").await;
    assert_eq!(end["isError"], true, "{end}");
    assert_eq!(end["result"]["details"]["sandbox"]["mode"], "read-only");
    assert!(
        !s.cwd.join("inside.txt").exists(),
        "read-only applied to bash"
    );
    drop(p);

    // The operator's workspace-write is a floor: a connection cannot loosen it.
    let mut p = s.spawn(&["--sandbox", "workspace-write"]).await;
    for (params, message) in [
        (
            json!({"enabled": true, "sandbox": {"mode": "full"}}),
            "Sandbox cannot be looser than workspace-write set by --sandbox",
        ),
        (
            json!({"enabled": true, "sandbox": {"network": true}}),
            "Sandbox cannot be looser than workspace-write set by --sandbox",
        ),
        (
            json!({"enabled": true, "sandbox": {"writableRoots": [s.home.display().to_string()]}}),
            "Sandbox cannot be looser than workspace-write set by --sandbox",
        ),
    ] {
        let response = p
            .request("bad", "connection.set_approvals", Some(params))
            .await;
        assert_eq!(response["error"]["code"], "operation_failed", "{response}");
        assert_eq!(response["error"]["message"], message);
    }
    // Under `full` a connection may add roots (and they must exist).
    drop(p);
    let mut p = s.spawn(&[]).await;
    let missing = s.home.join("missing");
    let response = p
        .request(
            "bad",
            "connection.set_approvals",
            Some(json!({"enabled": true, "sandbox": {"mode": "workspace-write", "writableRoots": [missing.display().to_string()]}})),
        )
        .await;
    assert_eq!(
        response["error"]["message"],
        format!(
            "Sandbox writable root does not exist: {}",
            missing.display()
        )
    );
    let state = p
        .request_ok(
            "ap",
            "connection.set_approvals",
            Some(json!({"enabled": true, "sandbox": {"mode": "workspace-write", "writableRoots": [s.home.display().to_string()]}})),
        )
        .await;
    assert!(
        state["sandbox"]["writableRoots"]
            .as_array()
            .unwrap()
            .contains(&json!(s.home.display().to_string())),
        "{state}"
    );
    let end = s
        .bash(&mut p, &format!("echo ok > {}/added.txt", s.home.display()))
        .await;
    assert_eq!(end["isError"], false, "{end}");
    assert!(s.home.join("added.txt").exists());
}
