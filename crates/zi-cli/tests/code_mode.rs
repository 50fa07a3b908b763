//! Black-box tests of Code Mode (docs/code-mode.md) over Zi RPC v1: the model (the mock
//! provider) calls `code`, and the cell's `zi.*` calls go through zi's real tool path — files,
//! approvals, the sandbox, a real MCP server — while the worker runs confined in its own
//! process.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use zi_test_support::dirs::{AgentDir, TempCwd, temp_cwd};
use zi_test_support::harness::Harness;
use zi_test_support::mcp::stdio_command;
use zi_test_support::mock_llm::{MockLlm, Step, start_mock};
use zi_test_support::process::{descendants, wait_until_gone};
use zi_test_support::zi_command::ZiCommand;

use crate::wire_support::result_text;

const ZI: &str = env!("CARGO_BIN_EXE_zi");
const WAIT: Duration = Duration::from_secs(60);
const KEY: &str = "code-key";

fn agent(mock: &MockLlm, settings: Value) -> AgentDir {
    AgentDir::new()
        .models(mock, KEY, &[json!({"id": "m1"})])
        .settings(&settings.to_string())
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

/// The mock LLM, an agent directory on it with `settings`, and a cwd.
async fn scene(settings: Value) -> (MockLlm, AgentDir, TempCwd) {
    let mock = start_mock().await;
    let agent = agent(&mock, settings);
    (mock, agent, temp_cwd())
}

/// Sends a prompt and waits for its run to settle.
async fn run(p: &mut Harness, id: &str) {
    let sent = prompt(p, id).await;
    settle(p, sent).await;
}

/// Sends a prompt; returns the sequence before it, for [`settle`].
async fn prompt(p: &mut Harness, id: &str) -> u64 {
    let before = p.last_sequence();
    p.prompt(id, "go").await;
    before
}

/// Waits for the run of the prompt sent after `before` to settle.
async fn settle(p: &mut Harness, before: u64) {
    p.event_after("agent_settled", before).await;
}

/// One `code` call with `code`, then "done".
fn script_cell(mock: &MockLlm, id: &str, code: &str) {
    mock.push(Step::tool_call(
        id,
        "code",
        json!({"description": "test cell", "code": code}),
    ));
    mock.push(Step::text("done"));
}

fn offered(request: &Value) -> Vec<String> {
    request["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["function"]["name"].as_str().map(str::to_string))
        .collect()
}

/// The `zi __code-worker` children of zi.
fn workers(zi: u32) -> Vec<u32> {
    descendants(zi)
        .into_iter()
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).contains("__code-worker"))
        })
        .collect()
}

async fn one_worker(zi: u32) -> u32 {
    let deadline = Instant::now() + WAIT;
    loop {
        if let [pid] = workers(zi)[..] {
            return pid;
        }
        assert!(Instant::now() < deadline, "a worker starts");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn a_cell_reads_three_files_and_returns_a_summary() {
    let (mock, agent, cwd) = scene(json!({"codeMode": true})).await;
    for (name, text) in [
        ("a.txt", "one two"),
        ("b.txt", "three"),
        ("c.txt", "four five six"),
    ] {
        std::fs::write(cwd.path.join(name), text).unwrap();
    }
    script_cell(
        &mock,
        "c1",
        r#"const names = ["a.txt", "b.txt", "c.txt"];
const texts = await Promise.all(names.map(path => zi.read({path})));
console.log("read", texts.length, "files");
return {files: texts.length, words: texts.map(t => t.split(" ").length)};"#,
    );
    let mut p = spawn(&agent, &cwd.path, &[]).await;
    run(&mut p, "p1").await;
    let end = p.tool_end("c1");
    assert_eq!(end["isError"], false, "{end}");
    assert_eq!(
        result_text(&end),
        "[calls: 3 ok, 0 error]\n[logs]\nread 3 files\n[result]\n{\"files\":3,\"words\":[2,1,3]}"
    );
    let details = &end["result"]["details"];
    assert_eq!(details["type"], "code_mode");
    assert_eq!(details["outcome"], "ok");
    assert_eq!(details["logs"], json!(["read 3 files"]));
    let calls = details["calls"].as_array().unwrap();
    assert_eq!(calls.len(), 3);
    let names = ["a.txt", "b.txt", "c.txt"];
    for (index, call) in calls.iter().enumerate() {
        assert_eq!(call["id"], index + 1);
        assert_eq!(call["name"], "read");
        assert_eq!(call["arguments"], json!({"path": names[index]}));
        assert_eq!(call["state"], "ok");
        assert!(call["durationMs"].is_u64());
    }
    assert!(
        details["sandbox"]["enforcement"]
            .as_str()
            .unwrap()
            .contains("seccomp"),
        "{details}"
    );
    // Nested calls showed while the cell ran.
    let updates: Vec<Value> = p
        .events()
        .into_iter()
        .filter(|e| e["type"] == "tool_execution_update" && e["toolCallId"] == "c1")
        .collect();
    assert!(!updates.is_empty());
    assert_eq!(updates[0]["partialResult"]["details"]["type"], "code_mode");
    // Code Mode is additive: the model saw `code` beside the tools, with their declarations.
    let requests = mock.requests();
    let first = &requests[0].body;
    let tools = offered(first);
    assert!(
        tools.contains(&"code".to_string()) && tools.contains(&"read".to_string()),
        "{tools:?}"
    );
    let code = first["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["function"]["name"] == "code")
        .unwrap();
    let description = code["function"]["description"].as_str().unwrap();
    assert!(description.contains("declare const zi: {"), "{description}");
    assert!(description.contains("  read(input: {"), "{description}");
    assert!(!description.contains("  code(input"), "{description}");
    // The model's next request carries the one tool result.
    let second = requests[1].body.to_string();
    assert!(second.contains("read 3 files"), "{second}");
    // Message pages (and the journal they come from) keep the nested calls.
    let page = p
        .request_ok("m1", "session.get_messages", Some(json!({})))
        .await;
    let result = page["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "toolResult")
        .cloned()
        .unwrap();
    assert_eq!(result["details"]["calls"], details["calls"]);
}

#[tokio::test]
async fn a_cell_stops_at_its_65th_call_and_zi_keeps_serving() {
    let (mock, agent, cwd) = scene(json!({})).await;
    std::fs::write(cwd.path.join("a.txt"), "x").unwrap();
    script_cell(
        &mock,
        "c1",
        r#"for (let i = 0; i < 70; i++) { try { await zi.read({path: "a.txt"}); } catch (e) {} } return "all"; "#,
    );
    let mut p = spawn(&agent, &cwd.path, &["--code-mode"]).await;
    run(&mut p, "p1").await;
    let end = p.tool_end("c1");
    assert_eq!(end["isError"], true);
    let details = &end["result"]["details"];
    assert_eq!(details["outcome"], "error");
    assert_eq!(details["error"]["kind"], "call_limit");
    assert_eq!(details["calls"].as_array().unwrap().len(), 64);
    assert!(
        result_text(&end).contains("more than 64 calls"),
        "{}",
        result_text(&end)
    );
    // A memory bomb is stopped the same way, and zi still serves the next prompt.
    script_cell(
        &mock,
        "c2",
        "let a = []; while (true) a.push(new Array(1e6).fill(1));",
    );
    run(&mut p, "p2").await;
    let end = p.tool_end("c2");
    assert_eq!(end["isError"], true);
    assert_eq!(end["result"]["details"]["error"]["kind"], "memory", "{end}");
}

#[tokio::test]
async fn nothing_but_zi_is_reachable_from_a_cell() {
    let (mock, agent, cwd) = scene(json!({})).await;
    script_cell(
        &mock,
        "c1",
        r#"let imported;
try { await import("fs"); imported = "loaded"; } catch (e) { imported = e.name; }
return {require: typeof require, process: typeof process, fetch: typeof fetch, imported};"#,
    );
    let mut p = spawn(&agent, &cwd.path, &["--code-mode"]).await;
    run(&mut p, "p1").await;
    let end = p.tool_end("c1");
    assert_eq!(
        result_text(&end),
        "[result]\n{\"require\":\"undefined\",\"process\":\"undefined\",\"fetch\":\"undefined\",\"imported\":\"ReferenceError\"}"
    );
}

#[tokio::test]
async fn interrupt_kills_a_spinning_worker() {
    let (mock, agent, cwd) = scene(json!({})).await;
    script_cell(&mock, "c1", "while (true) {}");
    let mut p = spawn(&agent, &cwd.path, &["--code-mode"]).await;
    let sent = prompt(&mut p, "p1").await;
    let worker = one_worker(p.pid()).await;
    // The worker runs under the strictest profile once it has confined itself (before it
    // reads the cell).
    let deadline = Instant::now() + WAIT;
    let status = loop {
        let status = std::fs::read_to_string(format!("/proc/{worker}/status")).unwrap();
        if status.contains("Seccomp:\t2") {
            break status;
        }
        assert!(
            Instant::now() < deadline,
            "the worker confines itself: {status}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert!(status.contains("NoNewPrivs:\t1"), "{status}");
    let interrupted = p.request_ok("i1", "session.interrupt", None).await;
    assert_eq!(interrupted, json!({}));
    assert_eq!(wait_until_gone(&[worker], WAIT).await, Vec::<u32>::new());
    settle(&mut p, sent).await;
    let end = p.tool_end("c1");
    assert_eq!(end["isError"], true);
    assert_eq!(end["result"]["details"]["outcome"], "interrupted");
}

/// Three reads finish within one 50 ms interval, then the cell computes for a long time: the
/// update that shows them done must go out when the interval ends, not wait for the next change
/// (which never comes) — it used to be dropped, leaving "running" on screen while the cell spun.
#[tokio::test]
async fn the_last_progress_before_a_long_pause_is_delivered() {
    let mock = start_mock().await;
    let agent = agent(&mock, json!({"codeMode": true}));
    let cwd = temp_cwd();
    for name in ["a.txt", "b.txt", "c.txt"] {
        std::fs::write(cwd.path.join(name), "text").unwrap();
    }
    script_cell(
        &mock,
        "c1",
        r#"await Promise.all(["a.txt", "b.txt", "c.txt"].map(path => zi.read({path})));
while (true) {}"#,
    );
    let mut p = spawn(&agent, &cwd.path, &[]).await;
    let sent = prompt(&mut p, "p1").await;
    let update = p
        .wait_for("the update that shows the three reads done", |f| {
            let event = &f["event"];
            event["type"] == "tool_execution_update"
                && event["partialResult"]["content"][0]["text"]
                    == "[calls: 3 ok, 0 error, 0 running]"
        })
        .await;
    assert_eq!(update["event"]["toolCallId"], "c1");
    assert!(
        !p.events().iter().any(|e| e["type"] == "tool_execution_end"),
        "the cell still runs"
    );
    p.request_ok("i1", "session.interrupt", None).await;
    settle(&mut p, sent).await;
    assert_eq!(
        p.tool_end("c1")["result"]["details"]["outcome"],
        "interrupted"
    );
}

#[tokio::test]
async fn a_worker_killed_mid_cell_is_a_tool_error() {
    let (mock, agent, cwd) = scene(json!({})).await;
    script_cell(&mock, "c1", "console.log('started'); while (true) {}");
    let mut p = spawn(&agent, &cwd.path, &["--code-mode"]).await;
    let sent = prompt(&mut p, "p1").await;
    let worker = one_worker(p.pid()).await;
    // SAFETY: kill(2) of the worker this test found among zi's children.
    unsafe { libc::kill(worker as i32, libc::SIGKILL) };
    settle(&mut p, sent).await;
    let end = p.tool_end("c1");
    assert_eq!(end["isError"], true);
    let details = &end["result"]["details"];
    assert_eq!(details["error"]["kind"], "crashed", "{details}");
    assert!(
        result_text(&end).contains("SIGKILL"),
        "{}",
        result_text(&end)
    );
    // zi keeps serving.
    script_cell(&mock, "c2", "return 1 + 1");
    run(&mut p, "p2").await;
    assert_eq!(result_text(&p.tool_end("c2")), "[result]\n2");
}

#[tokio::test]
async fn a_nested_bash_asks_under_untrusted_and_a_denial_reaches_the_cell() {
    let (mock, agent, cwd) = scene(json!({})).await;
    script_cell(
        &mock,
        "c1",
        r#"try { await zi.bash({command: "touch made"}); return "ran"; }
catch (e) { return e.name + " from " + e.toolName + ": " + e.message; }"#,
    );
    let mut p = spawn(&agent, &cwd.path, &["--code-mode"]).await;
    p.request_ok(
        "ap",
        "connection.set_approvals",
        Some(json!({"enabled": true, "policy": "untrusted"})),
    )
    .await;
    let sent = prompt(&mut p, "p1").await;
    // The cell itself is approved like a command…
    let first = p
        .wait_for("approval_request", |f| f["type"] == "approval_request")
        .await["approval"]
        .clone();
    assert_eq!(
        (first["toolCallId"].as_str(), first["toolName"].as_str()),
        (Some("c1"), Some("code"))
    );
    assert_eq!(first["kind"], "exec");
    assert_eq!(first["summary"], "Run code: test cell");
    p.request_ok(
        "a1",
        "approval.respond",
        Some(json!({"approvalId": first["approvalId"], "decision": "allow_once"})),
    )
    .await;
    // …then its nested bash asks on its own, named by the nested call id.
    let after = p.last_sequence();
    let nested = p
        .wait_for("nested approval_request", |f| {
            f["type"] == "approval_request" && f["sequence"].as_u64() > Some(after)
        })
        .await["approval"]
        .clone();
    assert_eq!(nested["toolCallId"], "c1#1");
    assert_eq!(nested["toolName"], "bash");
    assert_eq!(nested["summary"], "Run: touch made");
    p.request_ok(
        "a2",
        "approval.respond",
        Some(json!({"approvalId": nested["approvalId"], "decision": "deny"})),
    )
    .await;
    settle(&mut p, sent).await;
    let end = p.tool_end("c1");
    assert_eq!(end["isError"], false, "the cell caught the denial: {end}");
    assert!(
        result_text(&end).contains("ZiToolError from bash: The user denied this tool call."),
        "{}",
        result_text(&end)
    );
    assert_eq!(end["result"]["details"]["calls"][0]["state"], "error");
    assert!(!cwd.path.join("made").exists(), "the command did not run");
}

#[tokio::test]
async fn time_waiting_for_an_approval_does_not_count_against_the_cell() {
    let (mock, agent, cwd) = scene(json!({"codeModeTimeoutMs": 1000})).await;
    script_cell(
        &mock,
        "c1",
        r#"return await zi.bash({command: "touch made && echo approved"});"#,
    );
    let mut p = spawn(&agent, &cwd.path, &["--code-mode"]).await;
    p.request_ok(
        "ap",
        "connection.set_approvals",
        Some(json!({"enabled": true, "policy": "untrusted", "rules": {"allow": ["code"]}})),
    )
    .await;
    let sent = prompt(&mut p, "p1").await;
    let nested = p
        .wait_for("approval_request", |f| f["type"] == "approval_request")
        .await["approval"]
        .clone();
    assert_eq!(nested["toolCallId"], "c1#1");
    // A person takes longer to decide than the cell may run (1 s, plus the host's 1 s grace).
    tokio::time::sleep(Duration::from_millis(2500)).await;
    p.request_ok(
        "a1",
        "approval.respond",
        Some(json!({"approvalId": nested["approvalId"], "decision": "allow_once"})),
    )
    .await;
    settle(&mut p, sent).await;
    let end = p.tool_end("c1");
    assert_eq!(end["isError"], false, "{end}");
    assert_eq!(
        result_text(&end),
        "[calls: 1 ok, 0 error]\n[result]\napproved"
    );
}

#[tokio::test]
async fn a_nested_write_outside_the_workspace_is_refused_by_the_sandbox() {
    let (mock, agent, cwd) = scene(json!({})).await;
    // Outside the writable roots (the cwd, /tmp and $TMPDIR), wherever the checkout lives.
    let outside = zi_test_support::dirs::outside_writable_roots(
        "zi-code-mode-",
        std::path::Path::new(env!("CARGO_TARGET_TMPDIR")),
    );
    let target = outside
        .path
        .join(format!("code-mode-escape-{}.txt", std::process::id()));
    let code = format!(
        r#"const inside = await zi.write({{path: "inside.txt", content: "ok"}});
try {{ await zi.write({{path: {}, content: "no"}}); return "written"; }}
catch (e) {{ return {{inside, code: e.details.code, message: e.message}}; }}"#,
        json!(target.display().to_string())
    );
    script_cell(&mock, "c1", &code);
    let mut p = spawn(
        &agent,
        &cwd.path,
        &["--code-mode", "--sandbox", "workspace-write"],
    )
    .await;
    run(&mut p, "p1").await;
    let end = p.tool_end("c1");
    let text = result_text(&end);
    assert!(text.contains("\"code\":\"sandbox_denied\""), "{text}");
    assert!(text.contains("is outside the writable roots"), "{text}");
    assert!(!target.exists(), "nothing written outside");
    assert_eq!(
        std::fs::read_to_string(cwd.path.join("inside.txt")).unwrap(),
        "ok"
    );
    let calls = &end["result"]["details"]["calls"];
    assert_eq!(
        calls[0]["arguments"],
        json!({"path": "inside.txt", "bytes": 2})
    );
    assert_eq!(calls[1]["state"], "error");
}

#[tokio::test]
async fn a_cell_calls_an_mcp_tool_and_gets_its_structured_value() {
    let mock = start_mock().await;
    let markers = temp_cwd();
    let settings = json!({"mcpServers": {"calc": {"command": stdio_command(&markers.path), "tools": "direct", "required": true, "startupTimeoutMs": 120_000}}});
    let agent = agent(&mock, settings);
    let cwd = temp_cwd();
    script_cell(
        &mock,
        "c1",
        r#"const sum = await zi.mcp__calc__add({a: 2, b: 3});
const echoed = await zi["mcp__calc__echo"]({text: "hi"});
return {sum, echoed};"#,
    );
    let mut p = ZiCommand::rpc(ZI, &agent, &cwd.path)
        .no_session()
        .model("mock/m1")
        .args(["--code-only"])
        .timeout(Duration::from_secs(120))
        .spawn_rpc()
        .await;
    run(&mut p, "p1").await;
    let end = p.tool_end("c1");
    assert_eq!(end["isError"], false, "{end}");
    let text = result_text(&end);
    assert!(text.contains("\"sum\":{\"result\":5}"), "{text}");
    assert!(text.contains("\"echoed\":"), "{text}");
    assert_eq!(
        end["result"]["details"]["calls"][0]["name"],
        "mcp__calc__add"
    );
    // Declared with its output schema.
    let request = &mock.requests()[0].body;
    assert_eq!(offered(request), ["code"]);
    let description = request["tools"][0]["function"]["description"]
        .as_str()
        .unwrap();
    assert!(
        description.contains("mcp__calc__add(input: {"),
        "{description}"
    );
    assert!(description.contains("}): Promise<{"), "{description}");
}

#[tokio::test]
async fn code_only_offers_code_alone_and_cells_reach_the_rest() {
    let (mock, agent, cwd) = scene(json!({})).await;
    std::fs::write(cwd.path.join("a.txt"), "alpha").unwrap();
    script_cell(
        &mock,
        "c1",
        r#"await zi.write({path: "b.txt", content: await zi.read({path: "a.txt"})}); return Object.keys(zi);"#,
    );
    let mut p = spawn(&agent, &cwd.path, &["--code-only"]).await;
    run(&mut p, "p1").await;
    let requests = mock.requests();
    assert_eq!(offered(&requests[0].body), ["code"]);
    let system = requests[0].body["messages"][0]["content"].to_string();
    assert!(system.contains("- code:"), "{system}");
    let end = p.tool_end("c1");
    assert_eq!(end["isError"], false, "{end}");
    let text = result_text(&end);
    assert!(
        text.contains("\"read\"") && text.contains("\"bash\"") && !text.contains("\"code\""),
        "{text}"
    );
    assert_eq!(
        std::fs::read_to_string(cwd.path.join("b.txt")).unwrap(),
        "alpha"
    );
    // The model cannot call the other tools directly.
    mock.push(Step::tool_call("r1", "read", json!({"path": "a.txt"})));
    mock.push(Step::text("done"));
    run(&mut p, "p2").await;
    assert_eq!(p.tool_end("r1")["isError"], true);
}

#[tokio::test]
async fn code_mode_is_off_by_default_and_invalid_settings_turn_it_off() {
    let mock = start_mock().await;
    mock.push(Step::text("done"));
    let agent = agent(&mock, json!({"codeModeTimeoutMs": 0, "codeMode": true}));
    let cwd = temp_cwd();
    let mut p = spawn(&agent, &cwd.path, &[]).await;
    run(&mut p, "p1").await;
    assert!(!offered(&mock.requests()[0].body).contains(&"code".to_string()));
    assert!(
        p.stderr_text().contains("Warning: (code mode) codeModeTimeoutMs must be an integer from 1 to 120000; Code Mode is off"),
        "{}",
        p.stderr_text()
    );
}

#[tokio::test]
async fn subagents_inherit_code_only() {
    let mock = start_mock().await;
    let agent = AgentDir::new().models(
        &mock,
        KEY,
        &[json!({"id": "parent"}), json!({"id": "child"})],
    );
    agent.write(
        "subagents/worker.md",
        "---\ndescription: Does one delegated job\nmodel: mock/child\n---\nYou are a careful worker.\n",
    );
    let cwd = temp_cwd();
    let spawn =
        r#"return await zi.spawn_subagent({profile: "worker", name: "w1", prompt: "hello"})"#;
    mock.push_for(
        "parent",
        Step::tool_call("c1", "code", json!({"code": spawn})),
    );
    mock.push_for("parent", Step::text("done"));
    mock.push_for("child", Step::text("child done"));
    let mut p = ZiCommand::rpc(ZI, &agent, &cwd.path)
        .no_session()
        .model("mock/parent")
        .args(["--code-only"])
        .timeout(WAIT)
        .spawn_rpc()
        .await;
    run(&mut p, "p1").await;
    let end = p.tool_end("c1");
    assert_eq!(end["isError"], false, "{end}");
    assert_eq!(
        end["result"]["details"]["calls"][0]["name"],
        "spawn_subagent"
    );
    let deadline = Instant::now() + WAIT;
    let child = loop {
        let requests = mock.requests();
        if let Some(request) = requests.iter().find(|r| r.body["model"] == "child") {
            break request.body.clone();
        }
        assert!(Instant::now() < deadline, "the child asks its model");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(
        offered(&child),
        ["code"],
        "the child runs with --code-only too"
    );
}
