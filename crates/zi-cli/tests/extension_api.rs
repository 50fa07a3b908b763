//! Black-box tests of the Lua extension API beyond commands (issue 16,
//! docs/extensions.md#api): active tools and dormant tools, structured output, progress and
//! deadlines, message deliveries, lifecycle and reload. The real binary runs against the mock
//! provider, whose recorded requests show what the model was offered.

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};
use zi_test_support::dirs::{AgentDir, temp_cwd};
use zi_test_support::harness::Harness;
use zi_test_support::mock_llm::{Step, start_mock};
use zi_test_support::zi_command::ZiCommand;

use crate::ext_support::{self, WAIT, agent_with, example, invoke, scene, spawn, write};

mod lifecycle;
mod messages;
mod tools;

fn script(dir: &Path, name: &str, text: &str) -> String {
    write(&dir.join("ext").join(name), text)
}

/// The tool names a provider request offered.
fn offered(body: &Value) -> Vec<String> {
    body["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .filter_map(|t| t["function"]["name"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// Every event of `kind` seen so far.
fn events_of(p: &Harness, kind: &str) -> Vec<Value> {
    p.events()
        .into_iter()
        .filter(|e| e["type"] == kind)
        .collect()
}
