//! `write` and `edit` against the writable roots and protected paths, directly and through the
//! approval evaluator.

use super::*;

#[tokio::test]
async fn write_and_edit_check_writable_roots_and_protected_paths() {
    let s = scene().await;
    std::fs::create_dir_all(s.cwd.join(".git")).unwrap();
    std::fs::write(s.cwd.join(".git/config"), "[core]\n").unwrap();
    std::fs::create_dir_all(s.cwd.join(".zi")).unwrap();
    std::fs::write(s.cwd.join(".zi/settings.json"), "{}\n").unwrap();
    std::fs::create_dir_all(s.cwd.join("src")).unwrap();
    std::os::unix::fs::symlink(&s.home, s.cwd.join("src/link")).unwrap();
    // Path checks need no kernel support: they run in zi itself.
    let mut p = s
        .command(&["--sandbox", "workspace-write"])
        .env("ZI_TEST_SANDBOX_UNAVAILABLE", "not-supported")
        .spawn_rpc()
        .await;

    let end = s
        .call(
            &mut p,
            "write",
            json!({"path": "src/ok.txt", "content": "fine"}),
        )
        .await;
    assert_eq!(end["isError"], false, "{end}");
    assert_eq!(
        std::fs::read_to_string(s.cwd.join("src/ok.txt")).unwrap(),
        "fine"
    );

    let outside = s.home.join("x.txt");
    let end = s
        .call(
            &mut p,
            "write",
            json!({"path": outside.display().to_string(), "content": "no"}),
        )
        .await;
    assert_eq!(end["isError"], true, "{end}");
    assert_eq!(end["result"]["details"]["code"], "sandbox_denied");
    assert_eq!(
        result_text(&end),
        format!(
            "{} is outside the writable roots of the workspace-write sandbox ({}). The file was not changed.",
            outside.display(),
            s.roots_text()
        )
    );
    assert!(!outside.exists());

    // A symlink inside the cwd pointing outside does not make its target writable.
    let end = s
        .call(
            &mut p,
            "write",
            json!({"path": "src/link/y.txt", "content": "no"}),
        )
        .await;
    assert_eq!(end["result"]["details"]["code"], "sandbox_denied", "{end}");
    assert_eq!(
        end["result"]["details"]["path"],
        s.home.join("y.txt").display().to_string()
    );
    assert!(!s.home.join("y.txt").exists());

    for (tool, path) in [("write", ".git/config"), ("edit", ".zi/settings.json")] {
        let args = if tool == "write" {
            json!({"path": path, "content": "changed"})
        } else {
            json!({"path": path, "edits": [{"oldText": "{}", "newText": "{\"x\":1}"}]})
        };
        let end = s.call(&mut p, tool, args).await;
        assert_eq!(end["result"]["details"]["code"], "sandbox_denied", "{end}");
        let protected = s.cwd.join(path).parent().unwrap().to_path_buf();
        assert_eq!(
            result_text(&end),
            format!(
                "{} is under the protected path {} of the workspace-write sandbox. The file was not changed.",
                s.cwd.join(path).display(),
                protected.display()
            )
        );
    }
    assert_eq!(
        std::fs::read_to_string(s.cwd.join(".git/config")).unwrap(),
        "[core]\n"
    );
    assert_eq!(
        std::fs::read_to_string(s.cwd.join(".zi/settings.json")).unwrap(),
        "{}\n"
    );

    // read-only: no file change anywhere.
    drop(p);
    read_only_changes_no_file(&s).await;
}

/// read-only: no file change anywhere.
async fn read_only_changes_no_file(s: &Scene) {
    let mut p = s
        .command(&["--sandbox", "read-only"])
        .env("ZI_TEST_SANDBOX_UNAVAILABLE", "not-supported")
        .spawn_rpc()
        .await;
    let end = s
        .call(
            &mut p,
            "edit",
            json!({"path": "src/ok.txt", "edits": [{"oldText": "fine", "newText": "edited"}]}),
        )
        .await;
    assert_eq!(end["result"]["details"]["code"], "sandbox_denied", "{end}");
    assert_eq!(
        std::fs::read_to_string(s.cwd.join("src/ok.txt")).unwrap(),
        "fine"
    );
}

#[tokio::test]
async fn write_outside_the_roots_and_to_protected_paths_asks_through_the_evaluator() {
    let s = scene().await;
    std::fs::create_dir_all(s.cwd.join(".git")).unwrap();
    std::fs::write(s.cwd.join(".git/config"), "[core]\n").unwrap();
    // Path checks need no kernel support; a forced unavailability keeps bash out of the way.
    let mut p = s
        .command(&["--sandbox", "workspace-write", "--approvals", "on-failure"])
        .env("ZI_TEST_SANDBOX_UNAVAILABLE", "not-supported")
        .spawn_rpc()
        .await;
    p.request_ok(
        "ap",
        "connection.set_approvals",
        Some(json!({"enabled": true})),
    )
    .await;
    let outside = s.home.join("x.txt");
    for (call_id, tool, args, reason, answer) in [
        (
            "w1",
            "write",
            json!({"path": outside.display().to_string(), "content": "approved"}),
            json!({"type": "outside_writable_roots", "path": outside.display().to_string()}),
            "allow_once",
        ),
        (
            "w2",
            "edit",
            json!({"path": ".git/config", "edits": [{"oldText": "[core]", "newText": "[core]\n\thooksPath = x"}]}),
            json!({"type": "protected_path", "path": s.cwd.join(".git/config").display().to_string()}),
            "deny",
        ),
    ] {
        let decision = json!({"decision": answer});
        let (asked, end) = s.call_asked(&mut p, (call_id, tool, args), decision).await;
        assert_eq!(asked["kind"], "file_change", "{asked}");
        assert_eq!(asked["reason"], reason, "{asked}");
        match answer {
            "allow_once" => assert_eq!(end["isError"], false, "{end}"),
            _ => assert_eq!(end["result"]["details"]["code"], "approval_denied", "{end}"),
        }
    }
    assert_eq!(std::fs::read_to_string(&outside).unwrap(), "approved");
    assert_eq!(
        std::fs::read_to_string(s.cwd.join(".git/config")).unwrap(),
        "[core]\n"
    );

    an_unapplicable_sandbox_asks_to_escalate(&s, &mut p).await;
}

/// A sandbox that cannot be applied asks for an escalation before running; allowed once, the
/// command runs outside it.
async fn an_unapplicable_sandbox_asks_to_escalate(s: &Scene, p: &mut Harness) {
    let call = ("b1", "bash", json!({"command": "echo ran > ran.txt"}));
    let decision = json!({"decision": "allow_once"});
    let (asked, end) = s.call_asked(p, call, decision).await;
    assert_eq!(asked["kind"], "escalation", "{asked}");
    assert_eq!(
        asked["reason"],
        json!({"type": "sandbox_unavailable", "message": "Landlock is not supported by this kernel"})
    );
    assert_eq!(end["isError"], false, "{end}");
    assert_eq!(
        end["result"]["details"]["sandbox"],
        json!({"mode": "none", "escalatedFrom": "workspace-write"})
    );
    assert!(s.cwd.join("ran.txt").exists());
}
