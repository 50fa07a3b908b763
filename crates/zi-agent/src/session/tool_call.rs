//! The one path every tool call takes, whether the model made it or a Code Mode cell did
//! (docs/code-mode.md#approvals-and-the-sandbox): validation, the one parse of the arguments
//! ([`crate::tool::Tool::prepare`]), the approval gate, the call in its own task,
//! the cancellation grace, and `details.outcome: "error"` as an error.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;
use zi_protocol::message::ToolCall;

use super::AgentSession;
use crate::errors;
use crate::tool::{ProgressSink, RegisteredTool, ToolCallContext, ToolOutput};

/// Told `true` when a call enters the approval gate and `false` when it leaves it: a Code
/// Mode cell does not count time a person takes to decide against its time limit.
pub type GateObserver = Arc<dyn Fn(bool) + Send + Sync>;

/// How long a tool may keep running after cancellation before it is abandoned.
const TOOL_CANCEL_GRACE: std::time::Duration = std::time::Duration::from_secs(5);

impl AgentSession {
    /// Validates and approves one call of `registered`, then runs it in its own task, so a
    /// panicking tool becomes an error result and a tool that ignores cancellation is abandoned
    /// after a grace period.
    pub(in crate::session) async fn run_tool_call(
        &self,
        call: &ToolCall,
        registered: &Arc<RegisteredTool>,
        cancel: &CancellationToken,
        progress: ProgressSink,
        gate: Option<&GateObserver>,
    ) -> ToolOutput {
        if let Err(problem) = registered.validate(&call.arguments) {
            return ToolOutput::error(problem.to_string());
        }
        let prepared = match registered.tool.clone().prepare(&call.arguments) {
            Ok(prepared) => prepared,
            Err(output) => return output,
        };
        if let Some(gate) = gate {
            gate(true);
        }
        let refused = self
            .approve_call(call, &registered.tool, prepared.as_ref(), cancel)
            .await;
        if let Some(gate) = gate {
            gate(false);
        }
        if let Some(output) = refused {
            return output;
        }
        let context = ToolCallContext {
            call_id: call.id.clone(),
            raw_arguments: call.arguments.clone(),
            cancel: cancel.child_token(),
            progress,
            host: self.host(),
        };
        let mut task = tokio::spawn(prepared.execute(context));
        let joined = tokio::select! {
            joined = &mut task => joined,
            () = cancel.cancelled() => {
                match tokio::time::timeout(TOOL_CANCEL_GRACE, &mut task).await {
                    Ok(joined) => joined,
                    Err(_) => {
                        task.abort();
                        return ToolOutput::error(errors::TOOL_ABORTED);
                    }
                }
            }
        };
        let mut output = joined.unwrap_or_else(|error| {
            ToolOutput::error(format!("Tool {} failed: {error}", call.name))
        });
        output.settle_outcome();
        output
    }
}
