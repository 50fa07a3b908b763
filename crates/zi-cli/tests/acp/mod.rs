//! Black-box tests of `zi acp` (docs/acp.md): the real binary against the mock provider.
//! `protocol` and `turns` speak raw JSON-RPC through the ACP harness, which checks every message
//! zi sends against the ACP JSON Schema; `clients` drives zi with acpx and the Python SDK.

mod clients;
mod commands;
mod files;
mod protocol;
mod sessions;
mod tools;
mod turns;

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};
use zi_test_support::acp::AcpHarness;
use zi_test_support::dirs::AgentDir;
use zi_test_support::mock_llm::MockLlm;
use zi_test_support::zi_command::ZiCommand;

/// The zi binary under test.
pub const ZI: &str = env!("CARGO_BIN_EXE_zi");
/// How long a test waits for an answer.
pub const WAIT: Duration = Duration::from_secs(30);
/// The mock provider's API key.
pub const KEY: &str = "test-key-acp";

/// An agent directory serving `mock/m1` (reasoning) and `mock/m2`.
pub fn agent(mock: &MockLlm) -> AgentDir {
    AgentDir::new().models(
        mock,
        KEY,
        &[
            json!({"id": "m1", "name": "Mock One", "reasoning": true}),
            json!({"id": "m2", "name": "Mock Two"}),
        ],
    )
}

/// `zi acp --model mock/m1` in `cwd`, initialized with `capabilities`.
pub async fn start(agent: &AgentDir, cwd: &Path, capabilities: Value) -> AcpHarness {
    let mut acp = ZiCommand::acp(ZI, agent, cwd)
        .model("mock/m1")
        .timeout(WAIT)
        .spawn_acp();
    acp.initialize(capabilities).await;
    acp
}

/// A mock provider, its agent directory, a project directory and `zi acp` with one session.
pub struct Scene {
    /// The mock provider.
    pub mock: MockLlm,
    /// The agent directory serving it.
    pub agent: AgentDir,
    /// The project directory.
    pub cwd: zi_test_support::dirs::TempCwd,
    /// The running `zi acp`.
    pub acp: AcpHarness,
    /// The id of its session.
    pub session: String,
}

/// A [`Scene`] whose client advertised `capabilities`.
pub async fn scene(capabilities: Value) -> Scene {
    let mock = zi_test_support::mock_llm::start_mock().await;
    let agent = agent(&mock);
    let cwd = zi_test_support::dirs::temp_cwd();
    let mut acp = start(&agent, &cwd.path, capabilities).await;
    let session = id(&acp.new_session(&cwd.path).await);
    Scene {
        mock,
        agent,
        cwd,
        acp,
        session,
    }
}

/// Switches `session` to `full-access` (no sandbox, no questions).
pub async fn full_access(acp: &mut AcpHarness, session: &str) {
    let set = acp
        .request(
            "session/set_mode",
            json!({"sessionId": session, "modeId": "full-access"}),
        )
        .await;
    assert_eq!(set["result"], json!({}), "{set}");
}

/// A session's id.
pub fn id(new: &Value) -> String {
    new["sessionId"].as_str().expect("a session id").to_string()
}

/// Sends a prompt whose model reply hangs after a first chunk; returns its request id once the
/// chunk arrived.
pub async fn hanging_prompt(
    acp: &mut AcpHarness,
    mock: &MockLlm,
    session: &str,
    text: &str,
) -> i64 {
    mock.push(zi_test_support::mock_llm::Step::Hang(vec![
        "partial ".into(),
    ]));
    let asked = prompt(acp, session, text).await;
    acp.wait_for("the first chunk", |m| {
        m["params"]["update"]["sessionUpdate"] == "agent_message_chunk"
    })
    .await;
    asked
}

/// `session/cancel` of `session` (a notification: nothing answers it).
pub async fn cancel(acp: &mut AcpHarness, session: &str) {
    acp.notify("session/cancel", json!({"sessionId": session}))
        .await;
}

/// Scripts a `bash` call `id` running `command` (then the text `reply`, if any), prompts `text`
/// and returns the prompt's request id with the `session/request_permission` the call raises.
pub async fn prompt_for_permission(
    s: &mut Scene,
    id: &str,
    command: &str,
    reply: Option<&str>,
    text: &str,
) -> (i64, Value) {
    s.mock.push(zi_test_support::mock_llm::Step::tool_call(
        id,
        "bash",
        json!({ "command": command }),
    ));
    if let Some(reply) = reply {
        s.mock.push(zi_test_support::mock_llm::Step::text(reply));
    }
    let asked = prompt(&mut s.acp, &s.session, text).await;
    let request = s
        .acp
        .wait_for("a permission request", |m| {
            m["method"] == "session/request_permission"
        })
        .await;
    (asked, request)
}

/// Sends a prompt; returns its request id.
pub async fn prompt(acp: &mut AcpHarness, session: &str, text: &str) -> i64 {
    acp.call(
        "session/prompt",
        json!({"sessionId": session, "prompt": [{"type": "text", "text": text}]}),
    )
    .await
}
