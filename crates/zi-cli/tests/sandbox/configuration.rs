//! Configuring the sandbox: unavailable sandboxes, layers that fail closed, flags, no configuration,
//! and Lua's `ctx.exec` inside it.

use super::*;

#[tokio::test]
async fn an_unavailable_sandbox_fails_the_call_or_warns_once() {
    let s = scene().await;
    let mut p = s
        .command(&["--sandbox", "workspace-write"])
        .env("ZI_TEST_SANDBOX_ABI", "2")
        .spawn_rpc()
        .await;
    let end = s.bash(&mut p, "echo ran > marker.txt").await;
    assert_eq!(end["isError"], true, "{end}");
    assert_eq!(
        result_text(&end),
        "The workspace-write sandbox is unavailable (Landlock ABI 2 is older than the required 3). The command was not run."
    );
    assert_eq!(end["result"]["details"]["code"], "sandbox_unavailable");
    assert_eq!(
        end["result"]["details"]["sandbox"]["enforcement"],
        "unavailable"
    );
    assert!(!s.cwd.join("marker.txt").exists(), "the command never ran");
    let warning = "Warning: (sandbox) workspace-write is unavailable: Landlock ABI 2 is older than the required 3";
    assert_eq!(
        p.stderr_text().matches(warning).count(),
        1,
        "{}",
        p.stderr_text()
    );
    drop(p);

    s.agent.write(
        "settings.json",
        r#"{"sandbox": {"mode": "read-only", "onUnavailable": "warn"}}"#,
    );
    let mut p = s
        .command(&[])
        .env("ZI_TEST_SANDBOX_UNAVAILABLE", "disabled")
        .spawn_rpc()
        .await;
    let end = s.bash(&mut p, "echo ran > marker.txt && echo fine").await;
    assert_eq!(end["isError"], false, "{end}");
    assert_eq!(
        result_text(&end),
        "fine\n\n[Warning: the read-only sandbox is unavailable (Landlock is disabled at boot); the command ran without it.]",
        "{end}"
    );
    assert!(end["result"]["details"].get("sandbox").is_none(), "{end}");
    assert!(s.cwd.join("marker.txt").exists());
    let warning = "Warning: (sandbox) read-only is unavailable: Landlock is disabled at boot";
    assert_eq!(
        p.stderr_text().matches(warning).count(),
        1,
        "{}",
        p.stderr_text()
    );
}

#[tokio::test]
async fn an_agent_directory_inside_a_writable_root_makes_the_sandbox_unavailable() {
    let Some(_abi) = landlock_abi() else { return };
    let s = scene().await;
    let agent = s.cwd.join("agent");
    std::fs::create_dir_all(&agent).unwrap();
    std::fs::copy(
        s.agent.path().join("models.json"),
        agent.join("models.json"),
    )
    .unwrap();
    let mut p = ZiCommand::new(ZI)
        .args(["--mode", "rpc", "--no-session", "--model", "mock/m1"])
        .arg("--agent-dir")
        .arg(&agent)
        .args(["--sandbox", "workspace-write"])
        .current_dir(&s.cwd)
        .env("HOME", &s.home)
        .timeout(WAIT)
        .spawn_rpc()
        .await;
    let end = s.bash(&mut p, "true").await;
    assert_eq!(
        end["result"]["details"]["code"], "sandbox_unavailable",
        "{end}"
    );
    assert!(
        result_text(&end).contains(&format!(
            "(the agent directory {} is inside the writable root {})",
            agent.display(),
            s.cwd.display()
        )),
        "{end}"
    );
}

#[tokio::test]
async fn sandbox_configuration_layers_fail_closed_and_flags_win() {
    let s = scene().await;
    // An invalid sandbox value rejects the file with a warning and fails closed.
    s.agent
        .write("settings.json", r#"{"sandbox": {"mode": "loose"}}"#);
    let mut p = s.spawn(&[]).await;
    let settings = s.agent.path().join("settings.json");
    assert!(
        p.stderr_text().contains(&format!(
            "Warning: (global settings) {}: sandbox.mode must be read-only, workspace-write, or full",
            settings.display()
        )),
        "{}",
        p.stderr_text()
    );
    let end = s.bash(&mut p, "echo ran > marker.txt").await;
    assert_eq!(
        end["result"]["details"]["code"], "approval_config_invalid",
        "{end}"
    );
    assert_eq!(
        result_text(&end),
        format!(
            "Approval settings are invalid ({}: sandbox.mode must be read-only, workspace-write, or full). The tool call was not run.",
            settings.display()
        )
    );
    assert!(!s.cwd.join("marker.txt").exists());
    std::fs::write(s.cwd.join("r.txt"), "readable").unwrap();
    let end = s.call(&mut p, "read", json!({"path": "r.txt"})).await;
    assert_eq!(end["isError"], false, "read still works: {end}");
    drop(p);

    // A higher layer that sets the mode explicitly restores service: ZI_SANDBOX, then the flag.
    let mut p = s.command(&[]).env("ZI_SANDBOX", "full").spawn_rpc().await;
    let end = s.bash(&mut p, "echo ran").await;
    assert_eq!(end["isError"], false, "{end}");
    assert!(end["result"]["details"].get("sandbox").is_none(), "{end}");
    drop(p);

    // Invalid flag and environment values stop zi before ready.
    let finished = s
        .command(&["--sandbox", "loose"])
        .run_to_end(b"", WAIT)
        .await
        .unwrap();
    assert_eq!(finished.code, Some(1));
    assert!(
        finished
            .stderr_text()
            .contains("--sandbox must be read-only, workspace-write, or full"),
        "{}",
        finished.stderr_text()
    );
    let finished = s
        .command(&[])
        .env("ZI_SANDBOX", "loose")
        .run_to_end(b"", WAIT)
        .await
        .unwrap();
    assert_eq!(finished.code, Some(1));
    assert!(
        finished
            .stderr_text()
            .contains("ZI_SANDBOX must be read-only, workspace-write, or full"),
        "{}",
        finished.stderr_text()
    );

    // Valid layers: the trusted project's key wins over the global one, the flag over both.
    if landlock_abi().is_none() {
        return;
    }
    s.agent
        .write("settings.json", r#"{"sandbox": {"mode": "read-only"}}"#);
    let mut p = s
        .command(&["--sandbox", "workspace-write"])
        .spawn_rpc()
        .await;
    let end = s.bash(&mut p, "echo a > inside.txt").await;
    assert_eq!(end["isError"], false, "{end}");
    assert_eq!(
        end["result"]["details"]["sandbox"]["mode"],
        "workspace-write"
    );
    drop(p);
    let mut p = s.spawn(&[]).await;
    let end = s.bash(&mut p, "echo a > inside2.txt").await;
    assert_eq!(end["isError"], true, "{end}");
    assert_eq!(end["result"]["details"]["sandbox"]["mode"], "read-only");
}

#[tokio::test]
async fn without_configuration_bash_write_and_edit_are_v1() {
    let s = scene().await;
    let mut p = s.spawn(&[]).await;
    let end = s
        .bash(
            &mut p,
            "shopt -q login_shell && echo login; echo x > \"$HOME/free.txt\" && echo wrote",
        )
        .await;
    assert_eq!(result_text(&end), "login\nwrote");
    let details = end["result"]["details"].as_object().unwrap();
    let keys: Vec<&str> = details.keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        [
            "outcome",
            "status",
            "exitCode",
            "signal",
            "truncated",
            "fullOutputPath",
            "outputBytes",
            "durationMs"
        ]
    );
    assert!(s.home.join("free.txt").exists());
    let end = s
        .call(
            &mut p,
            "write",
            json!({"path": s.home.join("w.txt").display().to_string(), "content": "v1"}),
        )
        .await;
    assert_eq!(end["isError"], false, "{end}");
    let end = s
        .call(
            &mut p,
            "bash",
            json!({"command": "true", "background": true}),
        )
        .await;
    assert_eq!(
        end["result"]["details"],
        json!({"outcome": "success", "taskId": "task-1", "status": "running"})
    );
    assert!(!p.stderr_text().contains("sandbox"), "{}", p.stderr_text());
}

const EXEC_EXTENSION: &str = r#"
zi.register_command{ name = "touch", description = "writes a file through ctx.exec", execute = function(args, ctx)
  local r = ctx.exec{ "sh", "-c", "echo lua > " .. args .. " && echo wrote" }
  return "code=" .. tostring(r.code) .. " " .. r.stdout .. r.stderr
end }
"#;

#[tokio::test]
async fn lua_ctx_exec_runs_inside_the_session_sandbox() {
    let Some(_abi) = landlock_abi() else { return };
    let s = scene().await;
    s.agent.write("extensions/touch.lua", EXEC_EXTENSION);
    let mut p = s.spawn(&["--sandbox", "workspace-write"]).await;
    let inside = s.cwd.join("lua.txt");
    let outside = s.home.join("lua.txt");
    for (id, target) in [("i1", &inside), ("i2", &outside)] {
        let response = p
            .request_ok(
                id,
                "command.invoke",
                Some(json!({"name": "touch", "arguments": target.display().to_string()})),
            )
            .await;
        let message = response["message"].as_str().unwrap_or_default().to_string();
        if target == &inside {
            assert!(message.starts_with("code=0 wrote"), "{response}");
        } else {
            assert!(message.contains("Permission denied"), "{response}");
        }
    }
    assert!(inside.exists());
    assert!(
        !outside.exists(),
        "ctx.exec could not write outside the roots"
    );
    drop(p);

    // Required and unavailable: the command never runs.
    let mut p = s
        .command(&["--sandbox", "workspace-write"])
        .env("ZI_TEST_SANDBOX_UNAVAILABLE", "not-supported")
        .spawn_rpc()
        .await;
    let response = p
        .request(
            "i3",
            "command.invoke",
            Some(json!({"name": "touch", "arguments": outside.display().to_string()})),
        )
        .await;
    assert!(
        response.to_string().contains(
            "The workspace-write sandbox is unavailable (Landlock is not supported by this kernel). The command was not run."
        ),
        "{response}"
    );
    assert!(!outside.exists());
}
