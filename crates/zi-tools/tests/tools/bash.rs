//! bash and background tasks: environment, output limits, progress, timeouts and interruption
//! that end the whole process group, the task bound (docs/tools.md).

use zi_test_support::process::pgrep;

use super::*;

// ---------------------------------------------------------------------------------------------
// bash
// ---------------------------------------------------------------------------------------------

fn bash(f: &Fixture) -> (BashTool, TaskRegistry) {
    let tasks = TaskRegistry::new();
    (BashTool::new(f.env.clone(), tasks.clone()), tasks)
}

#[tokio::test]
async fn bash_runs_in_the_cwd_with_the_documented_environment() {
    let f = fixture();
    let (bash, _) = bash(&f);
    let out = call(
        &bash,
        json!({"command": "pwd; echo $NO_COLOR $TERM $PAGER $GIT_PAGER; echo err >&2"}),
    )
    .await;
    assert!(!out.is_error, "{}", text(&out));
    assert_eq!(
        text(&out),
        format!("{}\n1 dumb cat cat\nerr", f.root.display())
    );
    assert_eq!(detail(&out, "exitCode"), json!(0));
    let out = call(&bash, json!({"command": "true"})).await;
    assert_eq!(text(&out), "(no output)");
}

#[tokio::test]
async fn bash_nonzero_exit_is_an_error() {
    let f = fixture();
    let (bash, _) = bash(&f);
    let out = call(&bash, json!({"command": "echo out; exit 3"})).await;
    assert!(out.is_error);
    assert_eq!(text(&out), "out\n\nCommand exited with code 3");
    assert_eq!(detail(&out, "exitCode"), json!(3));
    assert_eq!(detail(&out, "outcome"), json!("error"));
    // A command of exactly 256 KiB runs (a comment pads it); one more byte is refused.
    let exact = format!("echo fits #{}", "x".repeat(256 * 1024 - 11));
    assert_eq!(exact.len(), 256 * 1024);
    let out = call(&bash, json!({ "command": exact })).await;
    assert_eq!(text(&out), "fits");
    let out = call(&bash, json!({"command": format!("{exact}x")})).await;
    assert_error(&out, "too_large");
    assert_error(
        &call(&bash, json!({"command": "  "})).await,
        "invalid_command",
    );
}

#[tokio::test]
async fn bash_tail_truncation_spills_the_full_output() {
    let f = fixture();
    let (bash, _) = bash(&f);
    let out = call(&bash, json!({"command": "seq 1 2000"})).await;
    assert_eq!(detail(&out, "truncated"), json!(false));
    assert!(text(&out).starts_with("1\n2\n"));
    assert_eq!(detail(&out, "fullOutputPath"), Value::Null);

    let out = call(&bash, json!({"command": "seq 1 2001"})).await;
    assert_eq!(detail(&out, "truncated"), json!(true));
    let path = detail(&out, "fullOutputPath");
    let path = path.as_str().unwrap_or_default().to_string();
    let t = text(&out);
    assert!(t.starts_with("2\n3\n"), "the first line is dropped");
    assert!(
        t.ends_with(&format!("2001\n\n[Output truncated. Full output: {path}]")),
        "{}",
        &t[t.len() - 200..]
    );
    let full = std::fs::read_to_string(&path).unwrap_or_default();
    assert_eq!(full.lines().count(), 2001);
    let _ = std::fs::remove_file(&path);

    // 51,200 bytes exactly fit; one more byte spills.
    let out = call(
        &bash,
        json!({"command": "head -c 51200 /dev/zero | tr '\\0' a"}),
    )
    .await;
    assert_eq!(detail(&out, "truncated"), json!(false));
    assert_eq!(text(&out).len(), 51_200);
    let out = call(
        &bash,
        json!({"command": "head -c 51201 /dev/zero | tr '\\0' a"}),
    )
    .await;
    assert_eq!(detail(&out, "truncated"), json!(true));
    let path = detail(&out, "fullOutputPath");
    let path = path.as_str().unwrap_or_default().to_string();
    assert!(text(&out).starts_with(&format!("{}\n\n[Output truncated.", "a".repeat(51_200))));
    assert_eq!(
        std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0),
        51_201
    );
    let _ = std::fs::remove_file(&path);
}

#[tokio::test]
async fn bash_streams_progress_updates() {
    let f = fixture();
    let (bash, _) = bash(&f);
    let (out, updates) = call_with(
        &bash,
        json!({"command": "echo one; sleep 0.6; echo two"}),
        CancellationToken::new(),
    )
    .await;
    assert_eq!(text(&out), "one\ntwo");
    let updates = lock(&updates).clone();
    assert!(!updates.is_empty());
    assert_eq!(
        updates
            .last()
            .and_then(|u| u["content"][0]["text"].as_str()),
        Some("one\ntwo")
    );
}

async fn assert_gone(pattern: &str) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while !pgrep("-f", pattern).is_empty() {
        assert!(
            Instant::now() < deadline,
            "processes matching {pattern} are still running"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn bash_timeout_kills_the_process_group() {
    let f = fixture();
    let (bash, _) = bash(&f);
    let marker = format!("sleep 31{}", std::process::id() % 1000);
    let started = Instant::now();
    // A 2 s timeout leaves a loaded machine time to start a login shell and print.
    let out = call(&bash, json!({"command": format!("echo started; ( {marker}; echo never ) & {marker}"), "timeout": 2})).await;
    assert!(started.elapsed() < Duration::from_secs(8));
    assert!(out.is_error);
    assert_eq!(text(&out), "started\n\nCommand timed out after 2 seconds");
    assert_eq!(detail(&out, "status"), json!("timed_out"));
    assert_gone(&marker).await;
}

#[tokio::test]
async fn bash_interrupt_kills_grandchildren() {
    let f = fixture();
    let (bash, _) = bash(&f);
    let marker = format!("sleep 32{}", std::process::id() % 1000);
    let cancel = CancellationToken::new();
    let trigger = cancel.clone();
    let probe = marker.clone();
    tokio::spawn(async move {
        let deadline = Instant::now() + Duration::from_secs(5);
        while pgrep("-f", &probe).len() < 2 && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        trigger.cancel();
    });
    // A subshell whose `sleep` ignores SIGTERM must still be gone (SIGKILL after the grace).
    let command = format!("(trap '' TERM; {marker}) & {marker}; wait");
    let (out, _) = call_with(&bash, json!({"command": command}), cancel).await;
    assert!(out.is_error);
    assert!(text(&out).ends_with("Command aborted"), "{}", text(&out));
    assert_eq!(detail(&out, "status"), json!("aborted"));
    assert_gone(&marker).await;
}

#[tokio::test]
async fn one_foreground_command_at_a_time() {
    let f = fixture();
    let (bash, _) = bash(&f);
    let bash = Arc::new(bash);
    let stamp = f.root.join("stamps");
    let command = format!(
        "echo start >> {0}; sleep 0.3; echo end >> {0}",
        stamp.display()
    );
    let a = {
        let bash = bash.clone();
        let command = command.clone();
        tokio::spawn(async move { call(bash.as_ref(), json!({"command": command})).await })
    };
    let b = call(bash.as_ref(), json!({"command": command})).await;
    let a = a.await.unwrap_or_else(|e| panic!("{e}"));
    assert!(!a.is_error && !b.is_error);
    assert_eq!(
        std::fs::read_to_string(&stamp).unwrap_or_default(),
        "start\nend\nstart\nend\n"
    );
}

// ---------------------------------------------------------------------------------------------
// background tasks
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn background_task_lifecycle() {
    let f = fixture();
    let (bash, tasks) = bash(&f);
    let output = TaskOutputTool::new(tasks.clone());
    let kill = KillTaskTool::new(tasks.clone());
    let started = Instant::now();
    let out = call(
        &bash,
        json!({"command": "echo hi; sleep 0.3; echo bye", "background": true}),
    )
    .await;
    assert!(
        started.elapsed() < Duration::from_millis(250),
        "returns at once"
    );
    assert_eq!(
        text(&out),
        "Command running in background (task ID: task-1). Use task_output to read its output and kill_task to stop it."
    );
    assert_eq!(detail(&out, "taskId"), json!("task-1"));
    let polled = call(&output, json!({"taskId": "task-1", "timeout": 0})).await;
    assert_eq!(detail(&polled, "status"), json!("running"));
    let waited = call(&output, json!({"taskId": "task-1", "timeout": 10})).await;
    assert_eq!(text(&waited), "hi\nbye\n\n[Task task-1 finished]");
    assert_eq!(detail(&waited, "exitCode"), json!(0));
    let killed = call(&kill, json!({"taskId": "task-1"})).await;
    assert_eq!(detail(&killed, "result"), json!("already_completed"));
    assert_error(&call(&kill, json!({"taskId": "task-9"})).await, "not_found");
    assert_error(
        &call(&output, json!({"taskId": "task-9"})).await,
        "not_found",
    );

    let marker = format!("sleep 33{}", std::process::id() % 1000);
    call(
        &bash,
        json!({"command": format!("({marker}) & {marker}"), "background": true}),
    )
    .await;
    let killed = call(&kill, json!({"taskId": "task-2"})).await;
    assert_eq!(text(&killed), "Task task-2 is stopping.");
    let again = call(&kill, json!({"taskId": "task-2"})).await;
    assert!(matches!(
        detail(&again, "result").as_str(),
        Some("settling" | "already_completed")
    ));
    let done = call(&output, json!({"taskId": "task-2", "timeout": 5})).await;
    assert_eq!(detail(&done, "status"), json!("killed"));
    assert!(text(&done).contains("Command killed"));
    assert_gone(&marker).await;
}

#[tokio::test]
async fn at_most_eight_live_tasks_and_shutdown_kills_them() {
    let f = fixture();
    let (bash, tasks) = bash(&f);
    let marker = format!("sleep 34{}", std::process::id() % 1000);
    for i in 1..=8 {
        let out = call(&bash, json!({"command": marker, "background": true})).await;
        assert_eq!(detail(&out, "taskId"), json!(format!("task-{i}")));
    }
    let out = call(&bash, json!({"command": marker, "background": true})).await;
    assert_error(&out, "too_many_tasks");
    bash.shutdown().await;
    assert_gone(&marker).await;
    let output = TaskOutputTool::new(tasks);
    let out = call(&output, json!({"taskId": "task-3"})).await;
    assert_eq!(detail(&out, "status"), json!("disposed"));
    let out = call(&bash, json!({"command": "true", "background": true})).await;
    assert_error(&out, "unavailable");
}
