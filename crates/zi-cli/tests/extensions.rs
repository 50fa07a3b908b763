//! Black-box tests of Lua extensions over Zi RPC v1 (docs/extensions.md,
//! docs/rpc.md#commandlist, docs/rpc.md#commandinvoke): the real binary with `--extension`, the
//! examples in `examples/extensions/`, fault containment (coroutines, stdout, `ctx.exec`
//! processes), extension tools called by the scripted model, and custom messages.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use zi_test_support::dirs::{AgentDir, TempCwd};
use zi_test_support::harness::Harness;
use zi_test_support::mock_llm::Step;
use zi_test_support::process::{process_exists, wait_until_gone};
use zi_test_support::zi_command::ZiCommand;

use crate::ext_support::{WAIT, example, invoke, scene, spawn, write};

mod commands;
mod containment;
mod session;

async fn wait_for_activity(p: &mut Harness, name: &str) {
    for n in 0..200 {
        let state = p
            .request_ok(&format!("st{n}"), "session.get_state", None)
            .await;
        if state["activity"]["type"] == "extension_command" {
            assert_eq!(
                state["activity"],
                json!({"type": "extension_command", "name": name, "phase": "executing"})
            );
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("the command never became active");
}
