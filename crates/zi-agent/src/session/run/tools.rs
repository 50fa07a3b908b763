//! Tool execution within a turn: parallel or sequential calls, their events and results.

use std::sync::Arc;

use futures::stream::{FuturesUnordered, StreamExt};
use serde_json::Value;
use zi_os::clock::now_millis;
use zi_protocol::event::AgentSessionEvent;
use zi_protocol::message::{
    AgentMessage, AssistantMessage, StopReason, ToolCall, ToolResultMessage,
};

use super::{Pending, Run, RunStopped};
use crate::errors;
use crate::tool::{ExecutionMode, ProgressSink, ToolOutput};

impl Run {
    /// Runs the assistant's tool calls and commits their results in call order.
    pub(super) async fn execute_tools(
        &mut self,
        assistant: &AssistantMessage,
    ) -> Result<Vec<AgentMessage>, RunStopped> {
        let calls: Vec<ToolCall> = assistant.tool_calls().cloned().collect();
        if calls.is_empty() {
            return Ok(Vec::new());
        }
        for call in &calls {
            // Each start carries the call's arguments (up to the whole message).
            self.wait_for_output_room().await;
            self.emit(AgentSessionEvent::ToolExecutionStart {
                tool_call_id: call.id.clone(),
                tool_name: call.name.clone(),
                args: call.arguments.clone(),
            });
        }
        let outputs = if assistant.stop_reason == StopReason::Length {
            let outputs: Vec<ToolOutput> = calls
                .iter()
                .map(|_| ToolOutput::error(errors::TOOL_SKIPPED_LENGTH))
                .collect();
            for (call, output) in calls.iter().zip(&outputs) {
                self.emit_tool_end(call, output);
            }
            outputs
        } else {
            self.run_tool_calls(&calls).await
        };
        let mut results = Vec::with_capacity(calls.len());
        for (call, output) in calls.iter().zip(outputs) {
            results.push(Pending::Message(AgentMessage::ToolResult(
                ToolResultMessage {
                    tool_call_id: call.id.clone(),
                    tool_name: call.name.clone(),
                    content: output.content,
                    details: output.details,
                    is_error: output.is_error,
                    timestamp: now_millis(),
                },
            )));
        }
        self.commit_all(results)
    }

    pub(super) fn emit_tool_end(&self, call: &ToolCall, output: &ToolOutput) {
        self.emit(AgentSessionEvent::ToolExecutionEnd {
            tool_call_id: call.id.clone(),
            tool_name: call.name.clone(),
            result: output.to_result(),
            is_error: output.is_error,
        });
    }

    /// Executes validated calls in parallel, or one by one when any tool is sequential. Ends
    /// are emitted as calls finish; outputs are returned in call order.
    pub(super) async fn run_tool_calls(&self, calls: &[ToolCall]) -> Vec<ToolOutput> {
        let tools = &self.session.inner.tools;
        let sequential = calls.iter().any(|call| {
            tools
                .get(&call.name)
                .is_some_and(|t| t.tool.execution_mode() == ExecutionMode::Sequential)
        });
        let mut outputs: Vec<Option<ToolOutput>> = vec![None; calls.len()];
        if sequential {
            for (index, call) in calls.iter().enumerate() {
                let output = self.run_one(call).await;
                self.emit_tool_end(call, &output);
                outputs[index] = Some(output);
            }
        } else {
            let mut running: FuturesUnordered<_> = calls
                .iter()
                .enumerate()
                .map(|(index, call)| async move { (index, self.run_one(call).await) })
                .collect();
            while let Some((index, output)) = running.next().await {
                self.emit_tool_end(&calls[index], &output);
                outputs[index] = Some(output);
            }
        }
        outputs
            .into_iter()
            .map(|o| o.unwrap_or_else(|| ToolOutput::error(errors::TOOL_ABORTED)))
            .collect()
    }

    /// Runs one call; an escape approved for it ends with it.
    pub(super) async fn run_one(&self, call: &ToolCall) -> ToolOutput {
        let output = self.approve_and_run(call).await;
        self.session.end_call_approval(&call.id);
        output
    }

    /// The model's call of an active tool through the session's one tool path.
    async fn approve_and_run(&self, call: &ToolCall) -> ToolOutput {
        // A dormant tool is unknown to the model: calling it is like calling a missing one.
        let Some(registered) = self.session.inner.tools.get_active(&call.name) else {
            return ToolOutput::error(errors::tool_not_found(&call.name));
        };
        let progress = self.progress_sink(call);
        self.session
            .run_tool_call(call, &registered, &self.cancel, progress, None)
            .await
    }

    pub(super) fn progress_sink(&self, call: &ToolCall) -> ProgressSink {
        let session = self.session.clone();
        let id = call.id.clone();
        let name = call.name.clone();
        let args = call.arguments.clone();
        Arc::new(move |partial: Value| {
            session.lock().emit(AgentSessionEvent::ToolExecutionUpdate {
                tool_call_id: id.clone(),
                tool_name: name.clone(),
                args: args.clone(),
                partial_result: partial,
            });
        })
    }
}
