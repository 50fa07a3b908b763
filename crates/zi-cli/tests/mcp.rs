//! Black-box tests of MCP tools (docs/mcp.md) against real servers built with the official
//! Python SDK (`tests/fixtures/mcp/server.py`, in the virtual environment that
//! `scripts/mcp-test-venv.sh` provisions): discovery through the catalog, direct tools,
//! scripted calls end to end, error results, interruption, `list_changed`, a crash mid-call,
//! required servers, secrets and orphans.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use zi_test_support::dirs::{AgentDir, all_files, temp_cwd};
use zi_test_support::harness::Harness;
use zi_test_support::mcp::{HttpServer, stdio_command};
use zi_test_support::mock_llm::{MockLlm, Step, start_mock};
use zi_test_support::process::{process_exists, wait_until_gone};
use zi_test_support::zi_command::ZiCommand;

use crate::wire_support::result_texts;

mod servers;
mod tools;

const ZI: &str = env!("CARGO_BIN_EXE_zi");
/// Python servers take seconds to import under load; every wait is generous.
const WAIT: Duration = Duration::from_secs(120);
const KEY: &str = "test-key-abc";

fn agent(mock: &MockLlm, servers: Value) -> AgentDir {
    AgentDir::new()
        .models(mock, KEY, &[json!({"id": "m1"})])
        .settings(&json!({ "mcpServers": servers }).to_string())
}

fn command(agent: &AgentDir, cwd: &Path) -> ZiCommand {
    ZiCommand::rpc(ZI, agent, cwd)
        .no_session()
        .model("mock/m1")
        .timeout(WAIT)
}

/// A zi with one stdio server `name` (extra definition fields merged in), and the server's
/// marker directory. The temporary directories live as long as the returned value.
struct Dirs {
    markers: zi_test_support::dirs::TempCwd,
    _cwd: zi_test_support::dirs::TempCwd,
    _agent: AgentDir,
}

async fn stdio_zi(mock: &MockLlm, name: &str, extra: Value) -> (Harness, Dirs) {
    let markers = temp_cwd();
    let mut definition = json!({"command": stdio_command(&markers.path)});
    for (key, value) in extra.as_object().into_iter().flatten() {
        definition[key] = value.clone();
    }
    let agent = agent(mock, json!({ name: definition }));
    let cwd = temp_cwd();
    let p = command(&agent, &cwd.path).spawn_rpc().await;
    let dirs = Dirs {
        markers,
        _cwd: cwd,
        _agent: agent,
    };
    (p, dirs)
}

/// One prompt whose run makes the scripted tool calls, one per turn, then answers "done".
async fn run_calls(p: &mut Harness, mock: &MockLlm, id: &str, calls: &[(&str, &str, Value)]) {
    for (call_id, name, args) in calls {
        mock.push(Step::tool_call(call_id, name, args.clone()));
    }
    mock.push(Step::text("done"));
    p.prompt(id, "use the tools").await;
    p.wait_for("agent_settled", |f| {
        f["type"] == "session_event" && f["event"]["type"] == "agent_settled"
    })
    .await;
}
