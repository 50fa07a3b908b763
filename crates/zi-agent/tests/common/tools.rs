//! Tools defined by the tests: any behaviour as a closure, and the two blocking shapes the
//! interruption and delivery tests hold a run open with.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use futures::FutureExt;
use futures::future::BoxFuture;
use serde_json::{Value, json};
use tokio::sync::Notify;
use zi_agent::{ExecutionMode, Tool, ToolCallContext, ToolOutput, TypedTool};

use super::{TOOL_WAIT, WAIT};

type ExecFn = dyn Fn(ToolCallContext) -> BoxFuture<'static, ToolOutput> + Send + Sync;

struct TestTool {
    name: &'static str,
    parameters: Value,
    mode: ExecutionMode,
    calls: Arc<AtomicUsize>,
    exec: Box<ExecFn>,
}

impl TypedTool for TestTool {
    type Args = Value;

    fn name(&self) -> &str {
        self.name
    }

    fn description(&self) -> &str {
        "a tool defined by the tests"
    }

    fn parameters(&self) -> &Value {
        &self.parameters
    }

    fn execution_mode(&self) -> ExecutionMode {
        self.mode
    }

    fn execute(&self, _arguments: Value, call: ToolCallContext) -> BoxFuture<'static, ToolOutput> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        (self.exec)(call)
    }
}

/// A tool plus the number of times it was executed.
pub(crate) fn test_tool(
    name: &'static str,
    parameters: Value,
    mode: ExecutionMode,
    exec: impl Fn(ToolCallContext) -> BoxFuture<'static, ToolOutput> + Send + Sync + 'static,
) -> (Arc<dyn Tool>, Arc<AtomicUsize>) {
    let calls = Arc::new(AtomicUsize::new(0));
    let tool = TestTool {
        name,
        parameters,
        mode,
        calls: calls.clone(),
        exec: Box::new(exec),
    };
    (Arc::new(tool), calls)
}

/// Parameters that take any object.
pub(crate) fn any_args() -> Value {
    json!({"type": "object", "properties": {}})
}

/// The signal a blocking tool gives once it runs.
#[derive(Clone, Default)]
pub(crate) struct Started(Arc<Notify>);

impl Started {
    /// Waits (at most [`WAIT`]) until the tool runs.
    pub(crate) async fn wait(&self) {
        tokio::time::timeout(WAIT, self.0.notified())
            .await
            .expect("the blocking tool started");
    }
}

/// A parallel tool that announces it started, then waits for its cancellation (at most
/// [`TOOL_WAIT`]); once cancelled it takes `cleanup` to clean up, records that it saw the
/// cancellation (the flag returned) and answers with an error.
pub(crate) fn cancellable_tool(
    name: &'static str,
    cleanup: Duration,
) -> (Arc<dyn Tool>, Started, Arc<AtomicBool>) {
    let started = Started::default();
    let cancelled = Arc::new(AtomicBool::new(false));
    let (signal, seen) = (started.0.clone(), cancelled.clone());
    let (tool, _) = test_tool(name, any_args(), ExecutionMode::Parallel, move |call| {
        let signal = signal.clone();
        let seen = seen.clone();
        async move {
            signal.notify_one();
            if tokio::time::timeout(TOOL_WAIT, call.cancel.cancelled())
                .await
                .is_err()
            {
                return ToolOutput::text("never cancelled");
            }
            tokio::time::sleep(cleanup).await;
            seen.store(true, Ordering::SeqCst);
            ToolOutput::error("stopped by cancellation")
        }
        .boxed()
    });
    (tool, started, cancelled)
}

/// The `gate` tool's handle: it holds a run open until opened (or cancelled).
pub(crate) struct Gate {
    started: Started,
    release: Arc<Notify>,
}

/// `gate`: announces it started, then answers `gate opened` once the test opens it, an error
/// when cancelled, or an error of its own after [`TOOL_WAIT`].
pub(crate) fn gate_tool() -> (Arc<dyn Tool>, Gate) {
    let started = Started::default();
    let release = Arc::new(Notify::new());
    let (signal, opened) = (started.0.clone(), release.clone());
    let (tool, _) = test_tool("gate", any_args(), ExecutionMode::Parallel, move |call| {
        let signal = signal.clone();
        let opened = opened.clone();
        async move {
            signal.notify_one();
            tokio::select! {
                () = opened.notified() => ToolOutput::text("gate opened"),
                () = call.cancel.cancelled() => ToolOutput::error("gate cancelled"),
                () = tokio::time::sleep(TOOL_WAIT) => ToolOutput::error("gate was never released"),
            }
        }
        .boxed()
    });
    (tool, Gate { started, release })
}

impl Gate {
    /// Waits (at most [`WAIT`]) until the gate holds the run.
    pub(crate) async fn wait_started(&self) {
        self.started.wait().await;
    }

    /// Lets the gate answer.
    pub(crate) fn open(&self) {
        self.release.notify_one();
    }
}
