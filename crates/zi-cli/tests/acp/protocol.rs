//! The connection (docs/acp.md#connection): initialize and authenticate, the JSON-RPC errors
//! bad input earns while zi keeps serving, and shutdown on EOF and signals.

use serde_json::json;
use zi_test_support::dirs::temp_cwd;
use zi_test_support::mock_llm::{Step, start_mock};

use super::{WAIT, agent, hanging_prompt, id, prompt, scene, start};

#[tokio::test]
async fn initialize_answers_version_1_with_zi_capabilities_and_authenticate_answers() {
    let mock = start_mock().await;
    let agent = agent(&mock);
    let cwd = temp_cwd();
    let mut acp = zi_test_support::zi_command::ZiCommand::acp(super::ZI, &agent, &cwd.path)
        .timeout(WAIT)
        .spawn_acp();
    let init = acp
        .request(
            "initialize",
            json!({"protocolVersion": 7, "clientCapabilities": {}}),
        )
        .await;
    let result = &init["result"];
    assert_eq!(result["protocolVersion"], 1, "{init}");
    assert_eq!(result["agentInfo"]["name"], "zi");
    assert_eq!(result["agentInfo"]["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(
        result["agentCapabilities"],
        json!({
            "loadSession": true,
            "promptCapabilities": {"image": true, "audio": false, "embeddedContext": true},
            "mcpCapabilities": {"http": true, "sse": false},
            "sessionCapabilities": {"list": {}, "delete": {}, "additionalDirectories": {},
                                    "resume": {}, "close": {}},
            "auth": {}
        })
    );
    let method = &result["authMethods"][0];
    assert_eq!(method["id"], "zi-credentials");
    assert!(
        method["description"]
            .as_str()
            .unwrap()
            .contains("auth.json"),
        "{method}"
    );
    let auth = acp
        .request("authenticate", json!({"methodId": "zi-credentials"}))
        .await;
    assert_eq!(auth["result"], json!({}), "{auth}");
    let auth = acp
        .request("authenticate", json!({"methodId": "other"}))
        .await;
    assert_eq!(auth["error"]["code"], -32602, "{auth}");
}

#[tokio::test]
async fn bad_input_gets_the_named_errors_and_zi_keeps_serving() {
    let mut s = scene(json!({})).await;

    s.acp.send_raw(b"{not json\n").await;
    let error = s
        .acp
        .wait_for("a parse error", |m| m["error"]["code"] == -32700)
        .await;
    assert_eq!(error["id"], json!(null), "{error}");
    s.acp.send_raw(b"\xff\xfe\n").await;
    s.acp
        .wait_for("a parse error for bad UTF-8", |m| {
            m["error"]["code"] == -32700
        })
        .await;
    s.acp.send_raw(b"[1,2]\n").await;
    s.acp
        .wait_for("invalid request (batch)", |m| m["error"]["code"] == -32600)
        .await;
    s.acp
        .send_raw(b"{\"jsonrpc\":\"1.0\",\"id\":\"v\",\"method\":\"x\"}\n")
        .await;
    let wrong = s
        .acp
        .wait_for("invalid request (version)", |m| m["id"] == "v")
        .await;
    assert_eq!(wrong["error"]["code"], -32600, "{wrong}");

    let unknown = s.acp.request("nope/what", json!({})).await;
    assert_eq!(unknown["error"]["code"], -32601, "{unknown}");
    assert_eq!(unknown["error"]["message"], "Method not found: nope/what");
    let underscore = s.acp.request("_zed/unknown", json!({})).await;
    assert_eq!(underscore["error"]["code"], -32601, "{underscore}");
    // An unknown notification is ignored.
    s.acp.notify("_zed/whatever", json!({})).await;

    let missing = s
        .acp
        .request("session/new", json!({"mcpServers": []}))
        .await;
    assert_eq!(missing["error"]["code"], -32602, "{missing}");
    assert!(
        missing["error"]["message"]
            .as_str()
            .unwrap()
            .contains("`cwd`"),
        "{missing}"
    );
    let relative = s
        .acp
        .request("session/new", json!({"cwd": "project", "mcpServers": []}))
        .await;
    assert_eq!(relative["error"]["code"], -32602, "{relative}");
    let nobody = s
        .acp
        .request(
            "session/prompt",
            json!({"sessionId": "no-such-session", "prompt": []}),
        )
        .await;
    assert_eq!(nobody["error"]["code"], -32002, "{nobody}");
    assert_eq!(nobody["error"]["data"]["sessionId"], "no-such-session");

    // A record over 16 MiB is refused without ending the connection or the session.
    let mut big =
        b"{\"jsonrpc\":\"2.0\",\"id\":\"big\",\"method\":\"session/prompt\",\"params\":{\"x\":\""
            .to_vec();
    big.resize(big.len() + 16 * 1024 * 1024 + 10, b'a');
    big.extend_from_slice(b"\"}}\n");
    s.acp.send_raw(&big).await;
    let refused = s
        .acp
        .wait_for("the oversized record's error", |m| {
            m["error"]["code"] == -32600
        })
        .await;
    assert_eq!(refused["id"], json!(null), "{refused}");
    s.mock.push(Step::text("still here"));
    let asked = prompt(&mut s.acp, &s.session, "hello").await;
    let done = s.acp.response(asked).await;
    assert_eq!(done["result"]["stopReason"], "end_turn", "{done}");
    assert_eq!(s.acp.agent_text(&s.session), "still here");
}

#[tokio::test]
async fn eof_answers_open_prompts_cancelled_and_exits_0() {
    let mut s = scene(json!({})).await;
    let asked = hanging_prompt(&mut s.acp, &s.mock, &s.session, "hang").await;
    s.acp.close_stdin();
    let answer = s.acp.response(asked).await;
    assert_eq!(answer["result"]["stopReason"], "cancelled", "{answer}");
    let exit = s.acp.exit(std::time::Duration::from_secs(10)).await;
    assert_eq!(exit.code, Some(0), "{}", exit.stderr);
}

#[tokio::test]
async fn sigterm_cancels_every_session_and_exits_143() {
    let mock = start_mock().await;
    let agent = agent(&mock);
    let cwd = temp_cwd();
    let mut acp = start(&agent, &cwd.path, json!({})).await;
    let one = id(&acp.new_session(&cwd.path).await);
    let two = id(&acp.new_session(&cwd.path).await);
    mock.push(Step::Hang(vec!["a".into()]));
    mock.push(Step::Hang(vec!["b".into()]));
    let first = prompt(&mut acp, &one, "hang one").await;
    let second = prompt(&mut acp, &two, "hang two").await;
    mock.wait_for_requests(2, WAIT).await;
    acp.signal(libc::SIGTERM);
    for asked in [first, second] {
        let answer = acp.response(asked).await;
        assert_eq!(answer["result"]["stopReason"], "cancelled", "{answer}");
    }
    let exit = acp.exit(std::time::Duration::from_secs(10)).await;
    assert_eq!(exit.code, Some(143), "{}", exit.stderr);
}

#[tokio::test]
async fn sighup_and_sigint_cancel_open_prompts_and_exit_with_the_signal_code() {
    for (signal, code) in [(libc::SIGHUP, 129), (libc::SIGINT, 130)] {
        let mut s = scene(json!({})).await;
        let asked = hanging_prompt(&mut s.acp, &s.mock, &s.session, "hang").await;
        s.acp.signal(signal);
        let answer = s.acp.response(asked).await;
        assert_eq!(answer["result"]["stopReason"], "cancelled", "{answer}");
        let exit = s.acp.exit(std::time::Duration::from_secs(10)).await;
        assert_eq!(exit.code, Some(code), "signal {signal}: {}", exit.stderr);
    }
}

/// The providers `zi login --status` lists, in its order (issue 26: ACP offers the same).
async fn login_providers(agent: &zi_test_support::dirs::AgentDir) -> Vec<String> {
    let status = zi_test_support::zi_command::ZiCommand::new(super::ZI)
        .args(["login", "--status"])
        .agent_dir(agent)
        .run_to_end(b"", WAIT)
        .await
        .unwrap();
    assert_eq!(status.code, Some(0), "{}", status.stderr_text());
    status
        .stdout_text()
        .lines()
        .filter_map(|line| line.split_whitespace().next().map(str::to_string))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_with_terminal_auth_is_offered_zi_login_which_the_agent_command_runs() {
    use zi_test_support::mock_auth::{DevicePoll, start_auth};
    let (mock, auth) = (start_mock().await, start_auth().await);
    let agent = agent(&mock);
    let cwd = temp_cwd();
    let mut acp = zi_test_support::zi_command::ZiCommand::acp(super::ZI, &agent, &cwd.path)
        .timeout(WAIT)
        .spawn_acp();
    let init = acp.initialize(json!({"auth": {"terminal": true}})).await;
    let methods = init["authMethods"].as_array().unwrap();
    assert_eq!(methods[0]["id"], "zi-credentials");
    assert_eq!(
        methods[1],
        json!({"type": "terminal", "id": "zi-login-openai-codex",
               "name": "Sign in: ChatGPT Plus/Pro (Codex)",
               "description": "Runs `zi login openai-codex` in a terminal",
               "args": ["login", "openai-codex"]})
    );
    // Exactly the sign-ins `zi login` offers, in its order.
    let offered: Vec<String> = methods[1..]
        .iter()
        .map(|m| {
            assert_eq!(m["type"], "terminal", "{m}");
            assert_eq!(m["args"][0], "login", "{m}");
            m["args"][1].as_str().unwrap().to_string()
        })
        .collect();
    assert_eq!(offered, login_providers(&agent).await);
    let refused = acp
        .request("authenticate", json!({"methodId": "zi-login-openai-codex"}))
        .await;
    assert_eq!(refused["error"]["code"], -32602, "{refused}");

    // The client runs the agent's command line with a method's arguments appended: the
    // Copilot method signs in (device flow against the mock) into the agent's auth.json.
    let copilot = methods
        .iter()
        .find(|m| m["id"] == "zi-login-github-copilot")
        .expect("the Copilot method");
    let args: Vec<String> = copilot["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().to_string())
        .collect();
    auth.set_device_timing(1, 900);
    auth.push_poll(DevicePoll::Token("gho_acp-terminal-login".into()));
    let ran = zi_test_support::zi_command::ZiCommand::acp(super::ZI, &agent, &cwd.path)
        .args(args)
        .env("ZI_GITHUB_URL", auth.base_url())
        .env("ZI_GITHUB_API_URL", auth.base_url())
        .env("ZI_COPILOT_BASE_URL", mock.base_url())
        .run_to_end(b"", WAIT)
        .await
        .unwrap();
    assert_eq!(ran.code, Some(0), "{}", ran.stderr_text());
    assert!(
        ran.stdout_text()
            .contains("Signed in to GitHub Copilot (github-copilot)"),
        "{}",
        ran.stdout_text()
    );
    let stored: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(agent.path().join("auth.json")).unwrap())
            .unwrap();
    assert_eq!(stored["github-copilot"]["type"], "oauth", "{stored}");
    assert_eq!(
        stored["github-copilot"]["refresh"],
        "gho_acp-terminal-login"
    );
    // Claude plans are not offered, there as here.
    let ran = zi_test_support::zi_command::ZiCommand::acp(super::ZI, &agent, &cwd.path)
        .args(["login", "anthropic"])
        .run_to_end(b"", WAIT)
        .await
        .unwrap();
    assert_eq!(ran.code, Some(1));
    assert!(
        ran.stderr_text()
            .contains("Claude Pro/Max sign-in is not offered"),
        "{}",
        ran.stderr_text()
    );
}
