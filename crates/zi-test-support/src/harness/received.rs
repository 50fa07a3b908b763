//! Reading back what zi has sent so far: its session events, a tool call's result, a run's reply.

use serde_json::Value;

use super::Harness;

impl Harness {
    /// The `event` objects of the `session_event` frames received so far, in order.
    pub fn events(&self) -> Vec<Value> {
        self.frames
            .iter()
            .filter(|f| f["type"] == "session_event")
            .map(|f| f["event"].clone())
            .collect()
    }

    /// The `tool_execution_end` event of the tool call `call_id` among the events received so
    /// far; panics when there is none.
    pub fn tool_end(&self, call_id: &str) -> Value {
        self.events()
            .into_iter()
            .find(|e| e["type"] == "tool_execution_end" && e["toolCallId"] == call_id)
            .unwrap_or_else(|| panic!("tool_execution_end of {call_id}"))
    }

    /// Event types (`event.type` of `session_event` frames) received so far, in order.
    pub fn event_types(&self) -> Vec<String> {
        self.frames
            .iter()
            .filter(|f| f["type"] == "session_event")
            .map(|f| f["event"]["type"].as_str().unwrap_or_default().to_string())
            .collect()
    }

    /// The last assistant message whose `message_end` came after sequence `after` (`Null`
    /// when none did).
    pub fn last_assistant_after(&self, after: u64) -> Value {
        self.frames
            .iter()
            .filter(|f| f["sequence"].as_u64().unwrap_or(0) > after)
            .filter(|f| f["type"] == "session_event" && f["event"]["type"] == "message_end")
            .map(|f| &f["event"]["message"])
            .rfind(|m| m["role"] == "assistant")
            .cloned()
            .unwrap_or_default()
    }

    /// Waits for the `agent_settled` after sequence `after` and returns that run's reply: the
    /// last assistant message ended after `after` (`Null` when there was none).
    pub async fn settled_reply(&mut self, after: u64) -> Value {
        self.event_after("agent_settled", after).await;
        self.last_assistant_after(after)
    }
}
