//! Every tool's error codes and limits, driven through the `Tool` trait as the agent loop
//! calls it (docs/tools.md).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use zi_agent::{SessionHost, Tool, ToolCallContext, ToolOutput};
use zi_os::sync::lock;
use zi_protocol::message::ContentBlock;
use zi_tools::{
    BashTool, EditTool, KillTaskTool, ReadTool, TaskOutputTool, TaskRegistry, ToolEnv,
    UpdatePlanTool, WriteTool,
};

mod bash;
mod files;
mod plan;

struct Fixture {
    _dir: tempfile::TempDir,
    root: PathBuf,
    env: ToolEnv,
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let root = dir.path().canonicalize().unwrap_or_else(|e| panic!("{e}"));
    let env = ToolEnv::new(root.clone(), Some(PathBuf::from("/bin/bash")));
    Fixture {
        _dir: dir,
        root,
        env,
    }
}

type Updates = Arc<Mutex<Vec<Value>>>;

async fn call_with(
    tool: &dyn Tool,
    args: Value,
    cancel: CancellationToken,
) -> (ToolOutput, Updates) {
    let updates: Updates = Arc::default();
    let sink = updates.clone();
    let output = tool
        .execute_json(ToolCallContext {
            call_id: "c1".into(),
            raw_arguments: args,
            cancel,
            progress: Arc::new(move |v| lock(&sink).push(v)),
            host: SessionHost::detached(),
        })
        .await;
    (output, updates)
}

async fn call(tool: &dyn Tool, args: Value) -> ToolOutput {
    call_with(tool, args, CancellationToken::new()).await.0
}

fn text(output: &ToolOutput) -> String {
    output
        .content
        .iter()
        .map(|block| match block {
            ContentBlock::Text { text, .. } => text.clone(),
            _ => String::new(),
        })
        .collect()
}

fn code(output: &ToolOutput) -> Option<String> {
    output
        .details
        .as_ref()?
        .get("code")?
        .as_str()
        .map(str::to_string)
}

fn detail(output: &ToolOutput, key: &str) -> Value {
    output
        .details
        .as_ref()
        .and_then(|d| d.get(key))
        .cloned()
        .unwrap_or(Value::Null)
}

#[track_caller]
fn assert_error(output: &ToolOutput, expected: &str) {
    assert!(output.is_error, "expected an error, got {:?}", text(output));
    assert_eq!(code(output).as_deref(), Some(expected), "{}", text(output));
    assert_eq!(detail(output, "outcome"), json!("error"));
}

fn write_file(path: &Path, content: impl AsRef<[u8]>) {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).unwrap_or_else(|e| panic!("{e}"));
    }
    std::fs::write(path, content).unwrap_or_else(|e| panic!("{e}"));
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc_geteuid() == 0 }
}

unsafe extern "C" {
    #[link_name = "geteuid"]
    fn libc_geteuid() -> u32;
}
