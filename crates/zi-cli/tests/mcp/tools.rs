//! MCP tools end to end: catalog and direct modes, list changes, cancellation, crashes and the
//! system prompt.

use super::*;

/// The tool names the model was offered in the latest provider request.
fn offered_tools(mock: &MockLlm) -> Vec<String> {
    let requests = mock.requests();
    offered_in(&requests.last().expect("a provider request").body)
}

/// The tool names a recorded (chat-completions) provider request offers.
fn offered_in(body: &Value) -> Vec<String> {
    body["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["function"]["name"].as_str().map(str::to_string))
        .collect()
}

/// Asks `mcp_status` until every server is ready (connection happens in the background).
async fn wait_ready(p: &mut Harness, mock: &MockLlm) -> Value {
    let deadline = Instant::now() + WAIT;
    for attempt in 0.. {
        let call = format!("status-{attempt}");
        run_calls(
            p,
            mock,
            &format!("status-p{attempt}"),
            &[(&call, "mcp_status", json!({}))],
        )
        .await;
        let status = p.tool_end(&call)["result"]["details"].clone();
        let servers = status["servers"].as_array().expect("servers").clone();
        if servers.iter().all(|s| s["state"] == "ready") {
            return status;
        }
        assert!(
            servers.iter().all(|s| s["state"] != "failed"),
            "a server failed: {status}"
        );
        assert!(Instant::now() < deadline, "servers ready in time: {status}");
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    unreachable!()
}

#[tokio::test]
async fn catalog_mode_discovers_describes_and_calls_stdio_tools_end_to_end() {
    let mock = start_mock().await;
    let (mut p, _dirs) = stdio_zi(&mock, "local", json!({})).await;
    run_calls(
        &mut p,
        &mock,
        "p1",
        &[
            ("s1", "mcp_search", json!({"query": "echo"})),
            (
                "d1",
                "mcp_describe",
                json!({"server": "local", "tool": "add"}),
            ),
            (
                "c1",
                "mcp_call",
                json!({"server": "local", "tool": "echo", "arguments": {"text": "hi"}}),
            ),
            (
                "c2",
                "mcp_call",
                json!({"server": "local", "tool": "add", "arguments": {"a": 2, "b": 3}}),
            ),
            (
                "c3",
                "mcp_call",
                json!({"server": "local", "tool": "fail", "arguments": {"message": "boom"}}),
            ),
            (
                "c4",
                "mcp_call",
                json!({"server": "local", "tool": "nope", "arguments": {}}),
            ),
            (
                "c5",
                "mcp_call",
                json!({"server": "elsewhere", "tool": "echo"}),
            ),
        ],
    )
    .await;
    // The model sees the four catalog tools, never the server's own tools.
    let offered = offered_tools(&mock);
    for tool in ["mcp_search", "mcp_describe", "mcp_call", "mcp_status"] {
        assert!(
            offered.contains(&tool.to_string()),
            "{tool} offered: {offered:?}"
        );
    }
    assert!(
        !offered.iter().any(|t| t.starts_with("mcp__")),
        "{offered:?}"
    );

    let search = p.tool_end("s1");
    assert_eq!(search["isError"], json!(false));
    assert!(
        result_texts(&search).contains("local/echo: Echo the text back."),
        "{search}"
    );
    let describe = result_texts(&p.tool_end("d1"));
    let described: Value = serde_json::from_str(&describe).expect("describe is JSON");
    assert_eq!(
        described["inputSchema"]["required"],
        json!(["a", "b"]),
        "{describe}"
    );
    let echo = p.tool_end("c1");
    assert_eq!(echo["isError"], json!(false));
    assert_eq!(result_texts(&echo), "echo: hi");
    let add = p.tool_end("c2");
    assert_eq!(result_texts(&add), "5");
    assert_eq!(
        add["result"]["details"]["structuredContent"],
        json!({"result": 5})
    );
    let fail = p.tool_end("c3");
    assert_eq!(fail["isError"], json!(true));
    assert!(result_texts(&fail).contains("boom"), "{fail}");
    let missing = p.tool_end("c4");
    assert_eq!(missing["isError"], json!(true));
    assert_eq!(
        result_texts(&missing),
        "MCP server local has no tool nope (mcp_search lists the tools)"
    );
    let unknown = p.tool_end("c5");
    assert_eq!(
        result_texts(&unknown),
        "Unknown MCP server: elsewhere. Configured servers: local"
    );
    // The model got the results: the last request carries the error text of c3.
    let last = mock.requests().last().unwrap().body.to_string();
    assert!(last.contains("boom"), "results reach the model");
}

#[tokio::test]
async fn direct_mode_exposes_prefixed_tools_and_follows_list_changed() {
    let mock = start_mock().await;
    let (mut p, _dirs) = stdio_zi(&mock, "dsrv", json!({"tools": "direct"})).await;
    wait_ready(&mut p, &mock).await;
    run_calls(
        &mut p,
        &mock,
        "p1",
        &[
            ("e1", "mcp__dsrv__echo", json!({"text": "direct"})),
            ("e2", "mcp__dsrv__add", json!({"a": "not a number"})),
            ("l1", "mcp__dsrv__add_late_tool", json!({})),
        ],
    )
    .await;
    let offered = offered_tools(&mock);
    assert!(
        offered.contains(&"mcp__dsrv__echo".to_string()),
        "{offered:?}"
    );
    assert!(
        offered.contains(&"mcp__dsrv__slow".to_string()),
        "{offered:?}"
    );
    assert_eq!(result_texts(&p.tool_end("e1")), "echo: direct");
    // The server's input schema is the tool's schema: zi validates before calling.
    let invalid = p.tool_end("e2");
    assert_eq!(invalid["isError"], json!(true));
    assert!(
        result_texts(&invalid).starts_with("Validation failed for tool \"mcp__dsrv__add\""),
        "{invalid}"
    );
    assert_eq!(result_texts(&p.tool_end("l1")), "added");
    // notifications/tools/list_changed refreshes the set in the background.
    let deadline = Instant::now() + WAIT;
    for attempt in 0.. {
        let call = format!("late-{attempt}");
        run_calls(
            &mut p,
            &mock,
            &format!("late-p{attempt}"),
            &[(&call, "mcp__dsrv__late", json!({}))],
        )
        .await;
        let end = p.tool_end(&call);
        if end["isError"] == json!(false) {
            assert_eq!(result_texts(&end), "late tool ran");
            break;
        }
        assert_eq!(result_texts(&end), "Tool mcp__dsrv__late not found");
        assert!(Instant::now() < deadline, "the late tool appears");
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    assert!(offered_tools(&mock).contains(&"mcp__dsrv__late".to_string()));
}

#[tokio::test]
async fn interrupting_a_slow_call_sends_cancelled_after_progress_updates() {
    let mock = start_mock().await;
    let (mut p, dirs) = stdio_zi(&mock, "local", json!({})).await;
    mock.push(Step::tool_call(
        "slow1",
        "mcp_call",
        json!({"server": "local", "tool": "slow", "arguments": {"seconds": 600}}),
    ));
    mock.push(Step::text("never"));
    let response = p
        .request(
            "p1",
            "session.prompt",
            Some(json!({"delivery": "direct", "text": "wait"})),
        )
        .await;
    assert_eq!(response["ok"], json!(true), "{response}");
    // Progress notifications become tool_execution_update events.
    let update = p.event("tool_execution_update").await;
    assert_eq!(update["toolCallId"], "slow1");
    assert_eq!(update["partialResult"]["total"], json!(10.0));
    assert!(
        update["partialResult"]["message"]
            .as_str()
            .unwrap()
            .starts_with("step ")
    );
    let response = p.request("i1", "session.interrupt", None).await;
    assert_eq!(response["ok"], json!(true), "{response}");
    p.event("agent_settled").await;
    let end = p.tool_end("slow1");
    assert_eq!(end["isError"], json!(true));
    assert_eq!(result_texts(&end), "Tool execution was aborted");
    // The server saw notifications/cancelled: its handler was cancelled.
    let marker = dirs.markers.path.join("cancelled");
    let deadline = Instant::now() + WAIT;
    while !marker.exists() {
        assert!(
            Instant::now() < deadline,
            "the server records the cancellation"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn a_server_that_crashes_mid_call_gives_an_error_and_the_next_call_reconnects() {
    let mock = start_mock().await;
    let (mut p, _dirs) = stdio_zi(&mock, "local", json!({})).await;
    run_calls(
        &mut p,
        &mock,
        "p1",
        &[
            (
                "x1",
                "mcp_call",
                json!({"server": "local", "tool": "crash", "arguments": {}}),
            ),
            (
                "x2",
                "mcp_call",
                json!({"server": "local", "tool": "echo", "arguments": {"text": "again"}}),
            ),
        ],
    )
    .await;
    let crashed = p.tool_end("x1");
    assert_eq!(crashed["isError"], json!(true));
    assert!(
        result_texts(&crashed)
            .starts_with("MCP server local lost the connection during the call to crash"),
        "{crashed}"
    );
    assert!(
        result_texts(&crashed).ends_with("the call was not retried"),
        "{crashed}"
    );
    let again = p.tool_end("x2");
    assert_eq!(again["isError"], json!(false), "{again}");
    assert_eq!(result_texts(&again), "echo: again");
}

/// The system prompt of a recorded (chat-completions) provider request.
fn system_prompt_of(body: &Value) -> String {
    body["messages"][0]["content"]
        .as_str()
        .expect("a system message")
        .to_string()
}

/// The names in a system prompt's `Available tools:` list.
fn listed_tools(prompt: &str) -> Vec<String> {
    let list = prompt
        .split_once("Available tools:\n")
        .map_or("", |(_, rest)| rest.split("\n\n").next().unwrap_or(""));
    list.lines()
        .filter_map(|line| line.strip_prefix("- ")?.split_once(':'))
        .map(|(name, _)| name.to_string())
        .collect()
}

/// Direct tools appear after start-up (their server connects in the background), and the
/// model sees them in the system prompt's tool list as well as in `tools`: every request lists
/// exactly the tools it offers, and the prompt stays byte-identical while they stay the same.
#[tokio::test]
async fn direct_tools_are_listed_in_the_system_prompt_once_their_server_is_ready() {
    let mock = start_mock().await;
    let (mut p, _dirs) = stdio_zi(&mock, "dsrv", json!({"tools": "direct"})).await;
    wait_ready(&mut p, &mock).await;
    run_calls(
        &mut p,
        &mock,
        "p1",
        &[("e1", "mcp__dsrv__echo", json!({"text": "seen"}))],
    )
    .await;
    assert_eq!(result_texts(&p.tool_end("e1")), "echo: seen");
    let requests = mock.requests();
    for request in &requests {
        let prompt = system_prompt_of(&request.body);
        assert_eq!(listed_tools(&prompt), offered_in(&request.body), "{prompt}");
    }
    // The two requests of the last prompt (the call, then the answer) offer the direct tools.
    let [.., call, answer] = requests.as_slice() else {
        panic!("two requests");
    };
    let prompt = system_prompt_of(&call.body);
    assert!(
        prompt.contains("\n- mcp__dsrv__echo: Echo the text back."),
        "{prompt}"
    );
    assert!(listed_tools(&prompt).contains(&"mcp_status".to_string()));
    assert_eq!(
        system_prompt_of(&answer.body),
        prompt,
        "unchanged tools, unchanged prompt"
    );

    // A list_changed that adds a tool adds it to the prompt's list.
    run_calls(
        &mut p,
        &mock,
        "p2",
        &[("l1", "mcp__dsrv__add_late_tool", json!({}))],
    )
    .await;
    let deadline = Instant::now() + WAIT;
    for attempt in 0.. {
        run_calls(&mut p, &mock, &format!("late-p{attempt}"), &[]).await;
        let requests = mock.requests();
        let prompt = system_prompt_of(&requests.last().expect("a request").body);
        if listed_tools(&prompt).contains(&"mcp__dsrv__late".to_string()) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the late tool is listed: {prompt}"
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}
